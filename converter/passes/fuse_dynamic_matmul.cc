// Dynamic quantization's MatMul chain -> one integer op with a float epilogue.
// quantize_dynamic writes, per MatMul with a constant weight:
//   (q, s, z) = DynamicQuantizeLinear(x)
//   y = Add(Mul(Cast<float>(MatMulInteger(q, Wq, z, Wz)), Mul(s, Ws)), bias)
// (the Add is the original model's bias; it may be missing). The chain becomes
// DynamicQuantizeMatMul(x, Wq, Ws, Wz, bias) when the DynamicQuantizeLinear
// feeds nothing else, else MatMulIntegerToFloat(q, Wq, s, Ws, z, Wz, bias), so
// one quantization of x still serves several weights (attention's Q, K, V).
// Both compute the same integers and round the float epilogue as the chain
// does: float(acc) * float(s * Ws[j]), then + bias[j].
#include <cstring>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {
namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

int64_t Numel(const Value& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n;
}

class DynamicMatMulFuser {
 public:
  explicit DynamicMatMulFuser(Graph* g) : g_(*g) {}

  Status Run() {
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs)
        if (!o.empty()) producer_[o] = k;
    consumers_ = BuildConsumers(g_);
    removed_.assign(g_.nodes.size(), false);
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      if (!removed_[k] && IsOp(k, "MatMulInteger")) TryFuse(k);
    std::vector<Node> kept;
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      if (!removed_[k]) kept.push_back(std::move(g_.nodes[k]));
    g_.nodes = std::move(kept);
    return Status::Ok();
  }

 private:
  Graph& g_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> consumers_;
  std::vector<bool> removed_;

  bool IsOp(size_t k, const char* type) const {
    return g_.nodes[k].op_type == type && g_.nodes[k].domain.empty();
  }

  // The node reading `name` when it is its only reader and `name` is not a
  // graph output; SIZE_MAX otherwise.
  size_t SoleConsumer(const std::string& name) const {
    auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1 || g_.IsGraphOutput(name)) return SIZE_MAX;
    return it->second[0].first;
  }

  size_t Producer(const std::string& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? SIZE_MAX : it->second;
  }

  // A constant float32 scale or bias of one value or `n` values (rank <= 1).
  bool PerColumnFloat(const std::string& name, int64_t n) const {
    const Value* v = g_.Find(name);
    if (!v || !v->is_constant() || v->dtype != DType::kFloat32 || v->shape.size() > 1) return false;
    return Numel(*v) == 1 || Numel(*v) == n;
  }

  void TryFuse(size_t mk) {
    const Node& mi = g_.nodes[mk];
    if (mi.inputs.size() < 3 || mi.outputs.size() != 1) return;
    const Value* w = g_.Find(mi.input(1));
    if (!w || !w->is_constant() || !Is8Bit(w->dtype) || w->shape.size() != 2) return;
    const int64_t n = w->shape[1];
    if (!mi.input(3).empty()) {  // weight zero point: constant, per tensor or per column
      const Value* wz = g_.Find(mi.input(3));
      if (!wz || !wz->is_constant() || wz->shape.size() > 1 || (Numel(*wz) != 1 && Numel(*wz) != n))
        return;
    }
    // A and its zero point from one DynamicQuantizeLinear.
    const size_t dk = Producer(mi.input(0));
    if (dk == SIZE_MAX || removed_[dk] || !IsOp(dk, "DynamicQuantizeLinear")) return;
    const Node& dq = g_.nodes[dk];
    if (dq.outputs.size() != 3 || dq.outputs[0] != mi.input(0) || dq.outputs[2] != mi.input(2))
      return;
    // Cast to float32, read by Mul alone.
    const size_t ck = SoleConsumer(mi.outputs[0]);
    if (ck == SIZE_MAX || !IsOp(ck, "Cast") ||
        g_.nodes[ck].attrs.GetInt("to", 0) != 1)  // ONNX FLOAT
      return;
    const size_t uk = SoleConsumer(g_.nodes[ck].outputs[0]);
    if (uk == SIZE_MAX || !IsOp(uk, "Mul") || g_.nodes[uk].inputs.size() != 2) return;
    const Node& mul = g_.nodes[uk];
    const std::string& factor = mul.input(mul.input(0) == g_.nodes[ck].outputs[0] ? 1 : 0);
    // The factor: Mul(DynamicQuantizeLinear's scale, constant weight scale).
    const size_t sk = Producer(factor);
    if (sk == SIZE_MAX || removed_[sk] || !IsOp(sk, "Mul") || g_.nodes[sk].inputs.size() != 2)
      return;
    const Node& smul = g_.nodes[sk];
    const bool scale_first = smul.input(0) == dq.outputs[1];
    if (!scale_first && smul.input(1) != dq.outputs[1]) return;
    const std::string w_scale = smul.input(scale_first ? 1 : 0);
    if (!PerColumnFloat(w_scale, n)) return;
    // An optional Add of a constant per-column bias.
    size_t last = uk;
    std::string bias;
    const size_t ak = SoleConsumer(mul.outputs[0]);
    if (ak != SIZE_MAX && IsOp(ak, "Add") && g_.nodes[ak].inputs.size() == 2) {
      const Node& add = g_.nodes[ak];
      const std::string& other = add.input(add.input(0) == mul.outputs[0] ? 1 : 0);
      const Value* out = g_.Find(add.outputs[0]);
      const Value* prod = g_.Find(mul.outputs[0]);
      // The bias must not broadcast the product to a larger shape.
      if (PerColumnFloat(other, n) && out && prod && out->rank_known && prod->rank_known &&
          out->shape == prod->shape && !prod->shape.empty()) {
        bias = other;
        last = ak;
        const Value* b = g_.Find(other);
        if (Numel(*b) != n) {  // one value for every column: spelled out per column
          std::vector<uint8_t> bytes(size_t(n) * 4);
          for (int64_t j = 0; j < n; ++j) std::memcpy(bytes.data() + j * 4, b->data->data(), 4);
          bias = g_.AddConstant(other, DType::kFloat32, {n}, std::move(bytes));
        }
      }
    }
    // One op for the whole chain when the quantization serves this product alone.
    const bool own_quantization =
        SoleConsumer(dq.outputs[0]) == mk && SoleConsumer(dq.outputs[1]) == sk &&
        SoleConsumer(dq.outputs[2]) == mk && SoleConsumer(smul.outputs[0]) == uk;
    Node fused;
    fused.name = mi.name;
    fused.outputs = {g_.nodes[last].outputs[0]};
    if (own_quantization) {
      fused.op_type = "DynamicQuantizeMatMul";
      fused.inputs = {dq.input(0), mi.input(1), w_scale, mi.input(3), bias};
      removed_[dk] = removed_[sk] = true;
    } else {
      fused.op_type = "MatMulIntegerToFloat";
      fused.inputs = {mi.input(0), mi.input(1), dq.outputs[1], w_scale,
                      mi.input(2), mi.input(3), bias};
    }
    while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
    removed_[mk] = removed_[ck] = true;
    if (last != uk) removed_[uk] = true;
    // The fused node takes the place of the chain's last node: every input precedes it.
    g_.nodes[last] = std::move(fused);
  }
};

}  // namespace

Status FuseDynamicMatMul(Graph* g) {
  return DynamicMatMulFuser(g).Run();
}

}  // namespace conv
}  // namespace qfold
