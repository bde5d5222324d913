#include <algorithm>
#include <set>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {
// Identity, or a Dropout whose mask nobody reads (inference mode only); a
// mask output that is named but read by no node nor the graph counts as unread.
bool IsPassThrough(const Graph& g, const Node& n, const std::set<std::string>& read) {
  if (!n.domain.empty()) return false;
  if (n.op_type == "Identity") return true;
  if (n.op_type == "Dropout") {
    if (n.outputs.size() > 1 && !n.outputs[1].empty() &&
        (read.count(n.outputs[1]) || g.IsGraphOutput(n.outputs[1])))
      return false;
    // training_mode (input 2) must be a constant false or absent.
    const std::string& tm = n.input(2);
    if (tm.empty()) return true;
    const Value* v = g.Find(tm);
    return v && v->is_constant() && !v->data->empty() && (*v->data)[0] == 0;
  }
  return false;
}
}  // namespace

Status RemoveIdentities(Graph* g) {
  std::vector<Node> kept;
  std::vector<Node> nodes = std::move(g->nodes);
  g->nodes.clear();
  std::set<std::string> read;
  for (const Node& n : nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (size_t k = 0; k < nodes.size(); ++k) {
    // Redirects every reader of `from`, earlier or later, to `to`.
    auto rename_uses = [&](const std::string& from, const std::string& to) {
      for (size_t j = k + 1; j < nodes.size(); ++j)
        for (std::string& s : nodes[j].inputs)
          if (s == from) s = to;
      for (Node& kn : kept)
        for (std::string& s : kn.inputs)
          if (s == from) s = to;
    };
    Node& n = nodes[k];
    if (!IsPassThrough(*g, n, read) || n.inputs.empty() || n.outputs.empty()) {
      kept.push_back(std::move(n));
      continue;
    }
    const std::string in = n.inputs[0], out = n.outputs[0];
    bool in_is_boundary = g->IsGraphOutput(in) ||
                          std::find(g->inputs.begin(), g->inputs.end(), in) != g->inputs.end();
    if (!g->IsGraphOutput(out)) {
      rename_uses(out, in);
      g->values.erase(out);
      continue;
    }
    if (in_is_boundary || g->IsConstant(in)) {
      kept.push_back(std::move(n));  // keep: the output name must exist as a copy
      continue;
    }
    // The output is a graph output: let the producer write the output name.
    bool renamed = false;
    for (Node& p : kept)
      for (std::string& o : p.outputs)
        if (o == in) {
          o = out;
          renamed = true;
        }
    if (!renamed) {
      kept.push_back(std::move(n));
      continue;
    }
    rename_uses(in, out);
    g->values.erase(in);
  }
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
