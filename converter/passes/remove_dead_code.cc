#include <set>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

Status RemoveDeadCode(Graph* g) {
  std::set<std::string> live(g->outputs.begin(), g->outputs.end());
  std::vector<bool> keep(g->nodes.size(), false);
  for (size_t k = g->nodes.size(); k-- > 0;) {
    const Node& n = g->nodes[k];
    for (const std::string& o : n.outputs)
      if (!o.empty() && live.count(o)) keep[k] = true;
    if (keep[k])
      for (const std::string& i : n.inputs)
        if (!i.empty()) live.insert(i);
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (keep[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  // Unread outputs of kept nodes stay as values; drop other dead values.
  for (const Node& n : g->nodes)
    for (const std::string& o : n.outputs) live.insert(o);
  for (const std::string& i : g->inputs) live.insert(i);
  for (auto it = g->values.begin(); it != g->values.end();)
    it = live.count(it->first) ? std::next(it) : g->values.erase(it);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
