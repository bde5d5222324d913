// A linear op followed by a pointwise activation becomes one node with the
// activation applied to its output in the same pass over memory.
#include <cstring>
#include <limits>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {
bool ScalarFloat(const Graph& g, const std::string& name, float* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32 || v->data->size() != 4) return false;
  std::memcpy(out, v->data->data(), 4);
  return true;
}

}  // namespace

bool FusedActivationAttrs(const Graph& g, const Node& act, AttrMap* attrs) {
  const std::string& t = act.op_type;
  if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "HardSwish") {
    attrs->SetString("_activation", t);
    return true;
  }
  if (t == "LeakyRelu") {
    attrs->SetString("_activation", t);
    attrs->SetFloat("_act_alpha", act.attrs.GetFloat("alpha", 0.01f));
    return true;
  }
  if (t == "HardSigmoid") {
    attrs->SetString("_activation", t);
    attrs->SetFloat("_act_alpha", act.attrs.GetFloat("alpha", 0.2f));
    attrs->SetFloat("_act_beta", act.attrs.GetFloat("beta", 0.5f));
    return true;
  }
  if (t == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
    if (!act.input(1).empty() && !ScalarFloat(g, act.input(1), &lo)) return false;
    if (!act.input(2).empty() && !ScalarFloat(g, act.input(2), &hi)) return false;
    attrs->SetString("_activation", t);
    if (!act.input(1).empty()) attrs->SetFloat("_act_min", lo);
    if (!act.input(2).empty()) attrs->SetFloat("_act_max", hi);
    return true;
  }
  return false;
}

Status FuseActivations(Graph* g) {
  auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    Node& n = g->nodes[k];
    if (n.op_type != "Conv" && n.op_type != "ConvTranspose" && n.op_type != "Gemm" &&
        n.op_type != "MatMul")
      continue;
    if (n.outputs.size() != 1 || n.attrs.Has("_activation")) continue;
    const Value* out = g->Find(n.outputs[0]);
    if (!out || out->dtype != DType::kFloat32 || g->IsGraphOutput(n.outputs[0])) continue;
    auto it = consumers.find(n.outputs[0]);
    if (it == consumers.end() || it->second.size() != 1) continue;
    size_t ai = it->second[0].first;
    Node& act = g->nodes[ai];
    if (!act.domain.empty() || it->second[0].second != 0 || act.outputs.size() != 1) continue;
    AttrMap fused = n.attrs;
    if (!FusedActivationAttrs(*g, act, &fused)) continue;
    n.attrs = std::move(fused);
    g->values.erase(n.outputs[0]);
    n.outputs[0] = act.outputs[0];
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
