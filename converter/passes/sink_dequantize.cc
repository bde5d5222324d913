// DequantizeLinear -> data-movement op (no QuantizeLinear after it) becomes
// op -> DequantizeLinear: the op moves the integers instead of the floats.
// NNCF and other producers quantize a MaxPool's input but not its output (a
// max of dequantized values is the dequantized max, so they see no need);
// without this, the Conv after the MaxPool reads a float tensor and stays
// float. Exact for per-tensor parameters: every op here only selects or
// reorders elements, and dequantization with a positive scale is monotone,
// so MaxPool commutes with it too (padding never wins a max either way).
// A Concat sinks one DequantizeLinear when all its inputs share the parameters.
#include <cstring>
#include <string>
#include <unordered_map>

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {

namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

// MaxPool and Resize run on the integers only where their kernels take the
// dtype (8-bit).
bool MovesElements(const Node& n, DType q) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !HasTraits(n.op_type, kTraitMovesElements))
    return false;
  if (n.op_type == "MaxPool") return Is8Bit(q);
  if (n.op_type == "Resize") return Is8Bit(q) && n.attrs.GetString("mode", "nearest") == "nearest";
  return true;
}

bool PerTensorConstants(const Graph& g, const Node& dq) {
  for (size_t i = 1; i < dq.inputs.size() && i < 3; ++i) {
    if (dq.inputs[i].empty()) continue;
    const Value* v = g.Find(dq.inputs[i]);
    if (!v || !v->is_constant() || !v->rank_known) return false;
    for (int64_t d : v->shape)
      if (d != 1) return false;
  }
  return dq.attrs.GetInt("block_size", 0) == 0 && !dq.input(1).empty();
}

// Two parameter inputs with the same constant value (or both absent).
bool SameConstant(const Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  const Value* va = g.Find(a);
  const Value* vb = g.Find(b);
  return va && vb && va->is_constant() && vb->is_constant() && va->dtype == vb->dtype &&
         va->data->size() == vb->data->size() &&
         std::memcmp(va->data->data(), vb->data->data(), va->data->size()) == 0;
}

bool QuantizedCodes(const Value* v) {
  return v && (Is8Bit(v->dtype) || v->dtype == DType::kInt16 || v->dtype == DType::kUInt16);
}

class Sinker {
 public:
  explicit Sinker(Graph* g) : g_(*g) {}

  Status Run() {
    for (const Node& n : g_.nodes)
      if (n.domain.empty() && n.op_type == "QuantizeLinear") ++q_readers_[n.input(0)];
    out_.reserve(2 * g_.nodes.size());  // selected DQ pointers point into it
    for (Node& n : g_.nodes) {
      const bool free_output =
          n.outputs.size() == 1 && g_.Find(n.outputs[0]) && !q_readers_.count(n.outputs[0]);
      const Node* dq = free_output ? SelectConcat(n) : nullptr;
      if (!dq && free_output && !n.inputs.empty()) dq = SelectMove(n);
      if (dq) {
        Sink(std::move(n), *dq);
        continue;
      }
      Emit(std::move(n));
    }
    g_.nodes = std::move(out_);
    if (sunk_)
      g_.notes.push_back(std::to_string(sunk_) +
                         " data-movement op(s) now run on quantized values (their "
                         "DequantizeLinear moved after them)");
    return Status::Ok();
  }

 private:
  Graph& g_;
  std::vector<Node> out_;
  std::unordered_map<std::string, size_t> producer_;  // value -> index in out_
  std::unordered_map<std::string, int> q_readers_;    // value -> QuantizeLinear readers
  size_t sunk_ = 0;

  // The per-tensor DequantizeLinear of 8/16-bit codes producing `name`.
  const Node* Dq(const std::string& name) const {
    auto it = producer_.find(name);
    if (it == producer_.end()) return nullptr;
    const Node& dq = out_[it->second];
    if (!dq.domain.empty() || dq.op_type != "DequantizeLinear" ||
        !QuantizedCodes(g_.Find(dq.input(0))) || !PerTensorConstants(g_, dq))
      return nullptr;
    return &dq;
  }

  // Concat of DequantizeLinears with one scale and zero point (NNCF's
  // detection neck before a Conv): the Concat joins the codes.
  const Node* SelectConcat(const Node& n) const {
    if (!n.domain.empty() || n.op_type != "Concat" || n.inputs.empty()) return nullptr;
    const Node* first = Dq(n.inputs[0]);
    if (!first) return nullptr;
    const DType codes = g_.Find(first->input(0))->dtype;
    for (const std::string& in : n.inputs) {
      const Node* dq = Dq(in);
      if (!dq || g_.Find(dq->input(0))->dtype != codes ||
          !SameConstant(g_, dq->input(1), first->input(1)) ||
          !SameConstant(g_, dq->input(2), first->input(2)))
        return nullptr;
    }
    return first;
  }

  // An element-moving op reading a DequantizeLinear as its data input.
  const Node* SelectMove(const Node& n) const {
    const Node* dq = Dq(n.inputs[0]);
    return dq && MovesElements(n, g_.Find(dq->input(0))->dtype) ? dq : nullptr;
  }

  // n on the codes into a fresh value (every input that is `dq`-like reads
  // its codes), then the same DequantizeLinear after it.
  void Sink(Node n, const Node& dq) {
    const Value* y = g_.Find(n.outputs[0]);
    const std::string moved = g_.UniqueName(n.outputs[0] + "_quantized");
    Value& mv = g_.values[moved];
    mv.name = moved;
    mv.dtype = g_.Find(dq.input(0))->dtype;
    mv.shape = y->shape;
    mv.rank_known = y->rank_known;
    Node after;
    after.op_type = "DequantizeLinear";
    after.name = n.name + "_dequantize";
    after.attrs = dq.attrs;  // output_dtype and the like
    after.inputs = {moved, dq.input(1)};
    if (!dq.input(2).empty()) after.inputs.push_back(dq.input(2));
    after.outputs = {n.outputs[0]};
    const size_t data_inputs = n.op_type == "Concat" ? n.inputs.size() : 1;
    for (size_t i = 0; i < data_inputs; ++i) n.inputs[i] = out_[producer_[n.inputs[i]]].input(0);
    n.outputs[0] = moved;
    Emit(std::move(n));
    Emit(std::move(after));
    ++sunk_;
  }

  void Emit(Node n) {
    out_.push_back(std::move(n));
    for (const std::string& o : out_.back().outputs)
      if (!o.empty()) producer_[o] = out_.size() - 1;
  }
};

}  // namespace

Status SinkDequantize(Graph* g) {
  return Sinker(g).Run();
}

}  // namespace conv
}  // namespace qfold
