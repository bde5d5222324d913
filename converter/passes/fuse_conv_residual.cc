// A channels-last float Conv (not depthwise) whose only reader is an Add of a tensor of the
// same shape (a residual connection), optionally followed by an activation,
// becomes one Conv with that tensor as a fourth input: the convolution's
// epilogue adds it before the activation, so the sum and the activation cost
// no passes over memory of their own (ResNet's Add + Relu after every block).
// Runs after layout planning, so both addends are already channels-last.
#include <cstdint>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

bool FullyKnownFloat(const Value* v) {
  if (!v || v->dtype != DType::kFloat32 || v->shape.empty()) return false;
  for (int64_t d : v->shape)
    if (d < 0) return false;
  return true;
}

// The node reading `name` when exactly one node reads it, at slot `*slot`.
size_t SoleReader(const std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>>& c,
                  const std::string& name, size_t* slot) {
  auto it = c.find(name);
  if (it == c.end() || it->second.size() != 1) return SIZE_MAX;
  *slot = it->second[0].second;
  return it->second[0].first;
}

}  // namespace

Status FuseConvResidual(Graph* g) {
  const auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    const Node& cv = g->nodes[k];
    if (removed[k] || cv.op_type != "Conv" || !cv.domain.empty() || cv.outputs.size() != 1 ||
        cv.inputs.size() < 2 || cv.inputs.size() > 3 || cv.attrs.Has("_activation") ||
        cv.attrs.GetInt("channels_last", 0) != 1)
      continue;
    // Groups run on the igemm kernels, whose epilogue adds the residual
    // (ShuffleNet's grouped 1x1 convolutions before its Adds); depthwise ones
    // (one input and one output channel per group) do not.
    const int64_t group = cv.attrs.GetInt("group", 1);
    const Value* wv = g->Find(cv.inputs[1]);
    if (group != 1 && (!wv || wv->shape.size() < 2 || (wv->shape[1] == 1 && wv->shape[0] == group)))
      continue;
    const std::string& y = cv.outputs[0];
    const Value* yv = g->Find(y);
    if (g->IsGraphOutput(y) || !FullyKnownFloat(yv)) continue;
    size_t slot;
    const size_t ai = SoleReader(consumers, y, &slot);
    if (ai == SIZE_MAX || removed[ai]) continue;
    const Node& add = g->nodes[ai];
    if (add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2 ||
        add.outputs.size() != 1 || add.inputs[0] == add.inputs[1])
      continue;
    const std::string other = add.inputs[1 - slot];
    const Value* ov = g->Find(other);
    if (!FullyKnownFloat(ov) || ov->shape != yv->shape) continue;
    Node fused = cv;
    fused.inputs.resize(3);  // "" for an absent bias
    fused.inputs.push_back(other);
    fused.outputs = add.outputs;
    // An activation reading the sum alone joins the epilogue.
    size_t act_k = SIZE_MAX;
    if (!g->IsGraphOutput(add.outputs[0])) {
      size_t act_slot;
      const size_t r = SoleReader(consumers, add.outputs[0], &act_slot);
      if (r != SIZE_MAX && !removed[r] && act_slot == 0 && g->nodes[r].domain.empty() &&
          g->nodes[r].outputs.size() == 1 && FusedActivationAttrs(*g, g->nodes[r], &fused.attrs))
        act_k = r;
    }
    g->values.erase(y);
    if (act_k != SIZE_MAX) {
      g->values.erase(add.outputs[0]);
      fused.outputs = g->nodes[act_k].outputs;
      removed[act_k] = true;
    }
    // At the Add's place: the other addend may be computed after the Conv.
    g->nodes[ai] = std::move(fused);
    removed[k] = true;
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
