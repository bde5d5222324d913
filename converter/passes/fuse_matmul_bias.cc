// A float MatMul whose only reader is an Add of a constant per-column bias
// (what every exported linear layer is: MatMul then Add of N values) becomes
// one MatMul with the bias as a third input: the GEMM's epilogue adds it, so
// the Add costs no pass over Y of its own, and an activation after it (GELU in
// transformer FFNs) can then join the MatMul in FuseActivations.
#include <cstdint>
#include <utility>
#include <vector>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

bool KnownShape(const Value* v) {
  if (!v || !v->rank_known) return false;
  for (int64_t d : v->shape)
    if (d < 0) return false;
  return true;
}

// The bias of `add` (the input other than `slot`) when it is a float32
// constant of N values along Y's last axis that does not widen Y: [N],
// [1, N], [1, 1, N], ... up to Y's rank.
bool ColumnBias(const Graph& g, const Node& add, size_t slot, const Value& y, std::string* bias) {
  const Value* b = g.Find(add.inputs[1 - slot]);
  if (!b || !b->is_constant() || b->dtype != DType::kFloat32 || !KnownShape(b) ||
      b->shape.empty() || b->shape.size() > y.shape.size() || b->shape.back() != y.shape.back())
    return false;
  for (size_t d = 0; d + 1 < b->shape.size(); ++d)
    if (b->shape[d] != 1) return false;
  *bias = b->name;
  return true;
}

}  // namespace

Status FuseMatMulBias(Graph* g) {
  const auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    const Node& mm = g->nodes[k];
    if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 ||
        mm.outputs.size() != 1 || mm.attrs.Has("_activation"))
      continue;
    const Value* bv = g->Find(mm.inputs[1]);
    const Value* yv = g->Find(mm.outputs[0]);
    // B of rank >= 2: Y's last axis is B's columns.
    if (!bv || !bv->rank_known || bv->shape.size() < 2 || !yv || yv->dtype != DType::kFloat32 ||
        !KnownShape(yv) || yv->shape.empty() || g->IsGraphOutput(mm.outputs[0]))
      continue;
    auto it = consumers.find(mm.outputs[0]);
    if (it == consumers.end() || it->second.size() != 1) continue;
    const size_t ai = it->second[0].first, slot = it->second[0].second;
    if (removed[ai]) continue;
    const Node& add = g->nodes[ai];
    if (add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2 ||
        add.outputs.size() != 1 || add.inputs[0] == add.inputs[1])
      continue;
    std::string bias;
    if (!ColumnBias(*g, add, slot, *yv, &bias)) continue;
    const Value* sum = g->Find(add.outputs[0]);
    if (!sum || sum->shape != yv->shape) continue;
    const Value& b = *g->Find(bias);
    if (b.shape.size() != 1)  // the MatMul takes the bias 1-D
      bias = g->AddConstant(bias, DType::kFloat32, {b.shape.back()}, *b.data);
    Node fused = mm;
    fused.inputs.push_back(bias);
    fused.outputs = add.outputs;
    g->values.erase(mm.outputs[0]);
    g->nodes[k] = std::move(fused);  // the bias is a constant: the MatMul's place is fine
    removed[ai] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
