// Layout changes cost memory traffic: a Transpose feeding another Transpose
// becomes one Transpose with the composed permutation, or nothing at all when
// the two cancel (NHWC -> NCHW -> NHWC around an op sequence that was removed).
#include <numeric>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

Status CancelTransposes(Graph* g) {
  bool changed = true;
  while (changed) {
    changed = false;
    auto consumers = BuildConsumers(*g);
    for (size_t k = 0; k < g->nodes.size() && !changed; ++k) {
      Node& first = g->nodes[k];
      if (first.op_type != "Transpose" || !first.domain.empty() || first.outputs.size() != 1)
        continue;
      const std::string mid = first.outputs[0];
      auto it = consumers.find(mid);
      if (g->IsGraphOutput(mid) || it == consumers.end() || it->second.size() != 1) continue;
      Node& second = g->nodes[it->second[0].first];
      if (second.op_type != "Transpose" || !second.domain.empty()) continue;
      const Value* x = g->Find(first.input(0));
      if (!x || !x->rank_known) continue;
      const size_t rank = x->shape.size();
      std::vector<int64_t> p1 = first.attrs.GetInts("perm"), p2 = second.attrs.GetInts("perm");
      std::vector<int64_t> reversed(rank);
      std::iota(reversed.rbegin(), reversed.rend(), 0);
      if (p1.empty()) p1 = reversed;
      if (p2.empty()) p2 = reversed;
      if (p1.size() != rank || p2.size() != rank) continue;
      // y = transpose(transpose(x, p1), p2): y axis i is x axis p1[p2[i]].
      std::vector<int64_t> composed(rank);
      bool identity = true;
      for (size_t i = 0; i < rank; ++i) {
        composed[i] = p1[size_t(p2[i])];
        identity = identity && composed[i] == int64_t(i);
      }
      const std::string in = first.input(0), out = second.outputs[0];
      if (identity && !g->IsGraphOutput(out)) {
        for (Node& n : g->nodes)
          for (std::string& s : n.inputs)
            if (s == out) s = in;
        g->values.erase(out);
        g->nodes.erase(g->nodes.begin() + long(std::max(k, it->second[0].first)));
        g->nodes.erase(g->nodes.begin() + long(std::min(k, it->second[0].first)));
      } else {
        second.inputs[0] = in;
        if (identity) {
          second.op_type = "Identity";
          second.attrs = AttrMap();
        } else {
          second.attrs.SetInts("perm", composed);
        }
        g->nodes.erase(g->nodes.begin() + long(k));
      }
      g->values.erase(mid);
      changed = true;
    }
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
