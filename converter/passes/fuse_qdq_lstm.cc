// An LSTM (or a GRU or RNN, as QfGRUInteger or QfRNNInteger: the same form
// with 3 gates or 1) whose W and R are DequantizeLinear of 8-bit constants
// (QDQ exporters' quantized recurrent weights) keeps them 8-bit and runs its GEMMs
// on the integers: it becomes com.microsoft DynamicQuantizeLSTM, whose
// weights are the transposed integers W^T [dirs, in, 4H], R^T [dirs, H, 4H]
// with scales and zero points per direction ([dirs]) or per gate column
// ([dirs, 4H]). A DequantizeLinear scale per tensor or per gate row (axis 1
// of [dirs, 4H, k], one row scale shared by the directions) maps onto these
// exactly; blocked or other axes stay float (the weights are then
// dequantized at conversion, as before). X and H_{t-1} are quantized at run
// time (docs/NUMERICS.md, "Recurrent layers"), except an X that is itself a
// DequantizeLinear with one constant scale (static activation quantization):
// then the node is QfLSTMInteger reading the 8-bit X, whose input projection
// is exact integer arithmetic.
#include <cstring>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {
namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// An 8-bit constant weight [dirs, rows, k] behind a DequantizeLinear, with
// its scales and zero points as one value per row (`per_row`) or one in all.
struct QdqWeight {
  const Value* q = nullptr;
  const Value* scale = nullptr;
  const Value* zp = nullptr;  // null: 0
  bool per_row = false;
};

class QdqLstmFuser {
 public:
  explicit QdqLstmFuser(Graph* g) : g_(*g) {}

  Status Run() {
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs)
        if (!o.empty()) producer_[o] = k;
    for (Node& n : g_.nodes)
      if ((n.op_type == "LSTM" || n.op_type == "GRU" || n.op_type == "RNN") && n.domain.empty())
        TryFuse(&n);
    return Status::Ok();
  }

 private:
  Graph& g_;
  std::unordered_map<std::string, size_t> producer_;

  // `name` as a DequantizeLinear of an 8-bit constant of shape [dirs, rows, k].
  bool MatchWeight(const std::string& name, int64_t dirs, int64_t rows, QdqWeight* w) const {
    auto it = producer_.find(name);
    if (it == producer_.end()) return false;
    const Node& dq = g_.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() < 2 ||
        dq.outputs.size() != 1 || dq.attrs.GetInt("block_size", 0) != 0 ||
        dq.attrs.GetInt("output_dtype", 1) != 1)  // ONNX FLOAT
      return false;
    w->q = g_.Find(dq.input(0));
    w->scale = g_.Find(dq.input(1));
    w->zp = dq.input(2).empty() ? nullptr : g_.Find(dq.input(2));
    if (!w->q || !w->q->is_constant() || !Is8Bit(w->q->dtype) || w->q->shape.size() != 3 ||
        w->q->shape[0] != dirs || w->q->shape[1] != rows)
      return false;
    if (!w->scale || !w->scale->is_constant() || w->scale->dtype != DType::kFloat32 ||
        w->scale->shape.size() > 1)
      return false;
    const int64_t n = Numel(w->scale->shape);
    const int64_t axis = dq.attrs.GetInt("axis", 1);
    w->per_row = w->scale->shape.size() == 1 && n != 1;
    if (n != 1 && !(w->per_row && n == rows && (axis == 1 || axis == -2))) return false;
    if (!dq.input(2).empty() && (!w->zp || !w->zp->is_constant() || w->zp->dtype != w->q->dtype ||
                                 w->zp->shape != w->scale->shape))
      return false;
    return true;
  }

  // [dirs, rows, k] -> [dirs, k, rows], bytes.
  std::string Transposed(const Value& q) {
    const int64_t dirs = q.shape[0], rows = q.shape[1], k = q.shape[2];
    const uint8_t* src = q.data->data();
    std::vector<uint8_t> t(size_t(dirs * rows * k));
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < k; ++c)
          t[size_t((d * k + c) * rows + r)] = src[(d * rows + r) * k + c];
    return g_.AddConstant(q.name + "_t", q.dtype, {dirs, k, rows}, std::move(t));
  }

  // A scale or zero point repeated for each direction: [dirs] or [dirs, rows].
  std::string PerDirection(const Value& v, int64_t dirs, bool per_row) {
    const size_t bytes = v.data->size();
    std::vector<uint8_t> out(bytes * size_t(dirs));
    for (int64_t d = 0; d < dirs; ++d)
      std::memcpy(out.data() + size_t(d) * bytes, v.data->data(), bytes);
    Shape shape = {dirs};
    if (per_row) shape.push_back(Numel(v.shape));
    return g_.AddConstant(v.name + "_dirs", v.dtype, shape, std::move(out));
  }

  // `name` as a DequantizeLinear of an 8-bit tensor with one constant scale
  // and zero point: its inputs (the zero point may be "").
  bool MatchStaticX(const std::string& name, std::vector<std::string>* dq_inputs) const {
    auto it = producer_.find(name);
    if (it == producer_.end()) return false;
    const Node& dq = g_.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() < 2 ||
        dq.attrs.GetInt("block_size", 0) != 0 || dq.attrs.GetInt("output_dtype", 1) != 1)
      return false;
    const Value* q = g_.Find(dq.input(0));
    const Value* scale = g_.Find(dq.input(1));
    const Value* zp = dq.input(2).empty() ? nullptr : g_.Find(dq.input(2));
    if (!q || !Is8Bit(q->dtype) || !scale || !scale->is_constant() ||
        scale->dtype != DType::kFloat32 || Numel(scale->shape) != 1)
      return false;
    if (!dq.input(2).empty() &&
        (!zp || !zp->is_constant() || zp->dtype != q->dtype || Numel(zp->shape) != 1))
      return false;
    *dq_inputs = {dq.input(0), dq.input(1), dq.input(2)};
    return true;
  }

  void TryFuse(Node* n) {
    if (n->inputs.size() < 3) return;
    const bool gru = n->op_type == "GRU", rnn = n->op_type == "RNN";
    const int64_t gates = gru ? 3 : rnn ? 1 : 4;
    // GRU and RNN: their own integer op, X quantized per run when float.
    const char* integer_op = gru ? "QfGRUInteger" : rnn ? "QfRNNInteger" : nullptr;
    const Value* x = g_.Find(n->input(0));
    if (!x || x->dtype != DType::kFloat32) return;
    const std::string dir = n->attrs.GetString("direction", "forward");
    const int64_t dirs = dir == "bidirectional" ? 2 : 1;
    int64_t hidden = n->attrs.GetInt("hidden_size", 0);
    if (const Value* rv = g_.Find(n->input(2)); hidden <= 0 && rv && rv->shape.size() == 3)
      hidden = rv->shape[2];
    if (hidden <= 0) return;
    QdqWeight w, r;
    if (!MatchWeight(n->input(1), dirs, gates * hidden, &w) ||
        !MatchWeight(n->input(2), dirs, gates * hidden, &r) || r.q->shape[2] != hidden)
      return;
    std::vector<std::string> inputs = n->inputs;
    inputs.resize(8);  // X, W, R, B, sequence_lens, initial_h, initial_c, P (GRU, RNN: 6, 7 empty)
    inputs[1] = Transposed(*w.q);
    inputs[2] = Transposed(*r.q);
    for (const QdqWeight* q : {&w, &r}) {
      inputs.push_back(PerDirection(*q->scale, dirs, q->per_row));
      inputs.push_back(q->zp ? PerDirection(*q->zp, dirs, q->per_row) : "");
    }
    std::vector<std::string> static_x;
    if (MatchStaticX(n->input(0), &static_x)) {
      inputs[0] = static_x[0];
      inputs.push_back(static_x[1]);
      inputs.push_back(static_x[2]);
      n->op_type = integer_op ? integer_op : "QfLSTMInteger";
      n->domain.clear();
    } else if (integer_op) {
      n->op_type = integer_op;
    } else {
      n->op_type = "DynamicQuantizeLSTM";
      n->domain = "com.microsoft";
    }
    while (inputs.back().empty()) inputs.pop_back();
    n->inputs = std::move(inputs);
    n->float_reason.clear();
    // The DequantizeLinear nodes, now unread unless shared, go with dead code.
  }
};

}  // namespace

Status FuseQdqLstm(Graph* g) {
  return QdqLstmFuser(g).Run();
}

}  // namespace conv
}  // namespace qfold
