// Conv followed by inference BatchNormalization folds into the Conv:
//   W'[o] = W[o] * s[o],  b'[o] = (b[o] - mean[o]) * s[o] + beta[o],
//   s[o] = gamma[o] / sqrt(var[o] + eps).
#include <cmath>
#include <cstring>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {
bool FloatConst(const Graph& g, const std::string& name, int64_t count, std::vector<float>* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32) return false;
  if (int64_t(v->data->size()) != count * 4) return false;
  out->resize(size_t(count));
  std::memcpy(out->data(), v->data->data(), v->data->size());
  return true;
}
}  // namespace

Status FuseConvBatchNorm(Graph* g) {
  auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    Node& bn = g->nodes[k];
    if (bn.op_type != "BatchNormalization" || bn.outputs.size() != 1 || bn.inputs.size() != 5)
      continue;
    if (bn.attrs.GetInt("training_mode", 0) != 0) continue;
    const std::string& x = bn.inputs[0];
    auto cit = consumers.find(x);
    if (cit == consumers.end() || cit->second.size() != 1 || g->IsGraphOutput(x)) continue;
    // Find the Conv producing x.
    size_t ci = SIZE_MAX;
    for (size_t j = 0; j < k; ++j)
      if (!removed[j] && g->nodes[j].outputs.size() == 1 && g->nodes[j].outputs[0] == x)
        ci = j;
    if (ci == SIZE_MAX) continue;
    Node& cv = g->nodes[ci];
    if (cv.op_type != "Conv" || cv.attrs.Has("_activation")) continue;
    const Value* w = g->Find(cv.input(1));
    if (!w || !w->is_constant() || w->dtype != DType::kFloat32 || w->shape.empty()) continue;
    const int64_t oc = w->shape[0];
    std::vector<float> gamma, beta, mean, var, bias(size_t(oc), 0.f);
    if (!FloatConst(*g, bn.inputs[1], oc, &gamma) || !FloatConst(*g, bn.inputs[2], oc, &beta) ||
        !FloatConst(*g, bn.inputs[3], oc, &mean) || !FloatConst(*g, bn.inputs[4], oc, &var))
      continue;
    if (!cv.input(2).empty() && !FloatConst(*g, cv.input(2), oc, &bias)) continue;
    const float eps = bn.attrs.GetFloat("epsilon", 1e-5f);

    std::vector<float> weights(w->data->size() / 4);
    std::memcpy(weights.data(), w->data->data(), w->data->size());
    const size_t per_oc = weights.size() / size_t(oc);
    for (int64_t o = 0; o < oc; ++o) {
      // Scale in double: the folded weights should round once, not twice.
      double s = double(gamma[o]) / std::sqrt(double(var[o]) + double(eps));
      for (size_t i = 0; i < per_oc; ++i) weights[o * per_oc + i] = float(weights[o * per_oc + i] * s);
      bias[o] = float((double(bias[o]) - mean[o]) * s + beta[o]);
    }
    std::vector<uint8_t> wb(weights.size() * 4), bb(size_t(oc) * 4);
    std::memcpy(wb.data(), weights.data(), wb.size());
    std::memcpy(bb.data(), bias.data(), bb.size());
    Shape wshape = w->shape;
    cv.inputs.resize(3);
    cv.inputs[1] = g->AddConstant(cv.name + "_bn_weight", DType::kFloat32, wshape, std::move(wb));
    cv.inputs[2] = g->AddConstant(cv.name + "_bn_bias", DType::kFloat32, {oc}, std::move(bb));
    g->values.erase(cv.outputs[0]);
    cv.outputs[0] = bn.outputs[0];
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
