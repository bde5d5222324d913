// A channels-last float Conv of few input channels reading a graph input
// through Transpose(NCHW -> NHWC) (an RGB stem, after layout planning) reads
// the graph input itself: x_channels_first = 1. Its kernel builds the padded
// copy of x it reads anyway from the channels-first planes (or, where it
// reads no such copy, transposes x into its scratch), so the separate pass
// over the input goes (a 3 x 416 x 416 detector input: 0.07 ms of 0.6).
// Other readers of the Transpose keep it.
#include <algorithm>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

// Input channels up to which the kernels' padded copy interleaves planes.
constexpr int64_t kMaxChannels = 4;

}  // namespace

Status FuseConvInputTranspose(Graph* g) {
  std::unordered_map<std::string, size_t> producer;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    for (const std::string& o : g->nodes[k].outputs) producer[o] = k;
  for (Node& cv : g->nodes) {
    if (cv.op_type != "Conv" || !cv.domain.empty() || cv.inputs.size() < 2 ||
        cv.attrs.GetInt("channels_last", 0) != 1 || cv.attrs.Has("x_channels_first"))
      continue;
    const Value* w = g->Find(cv.inputs[1]);
    if (!w || !w->is_constant() || w->shape.size() != 4 || w->shape[1] > kMaxChannels ||
        cv.attrs.GetInt("group", 1) != 1)
      continue;
    auto it = producer.find(cv.inputs[0]);
    if (it == producer.end()) continue;
    const Node& tr = g->nodes[it->second];
    if (tr.op_type != "Transpose" || !tr.domain.empty() || tr.inputs.size() != 1 ||
        tr.attrs.GetInts("perm") != std::vector<int64_t>{0, 2, 3, 1})
      continue;
    const std::string& x = tr.inputs[0];
    const Value* xv = g->Find(x);
    if (!xv || xv->dtype != DType::kFloat32 || xv->shape.size() != 4 ||
        std::find(g->inputs.begin(), g->inputs.end(), x) == g->inputs.end())
      continue;
    cv.inputs[0] = x;
    cv.attrs.SetInt("x_channels_first", 1);
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
