// Layout changes cost memory traffic: a Transpose feeding another Transpose
// becomes one Transpose with the composed permutation, or nothing at all when
// the two cancel (NHWC -> NCHW -> NHWC around an op sequence that was removed).
#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

using Readers = std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>>;

void DropReader(Readers* readers, const std::string& name, size_t node) {
  auto it = readers->find(name);
  if (it == readers->end()) return;
  auto& uses = it->second;
  uses.erase(std::remove_if(uses.begin(), uses.end(),
                            [node](const std::pair<size_t, size_t>& u) { return u.first == node; }),
             uses.end());
}

// One pass in node order; a merged pair's result is visited again as the
// first of the next pair, so chains compose. The reader index is updated per
// rewrite, never rebuilt: linear in the graph size. Returns whether it
// changed the graph.
bool CancelPass(Graph* g) {
  Readers readers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  bool changed = false;
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    if (removed[k]) continue;
    Node& first = g->nodes[k];
    if (first.op_type != "Transpose" || !first.domain.empty() || first.outputs.size() != 1)
      continue;
    const std::string mid = first.outputs[0];
    auto it = readers.find(mid);
    if (g->IsGraphOutput(mid) || it == readers.end() || it->second.size() != 1) continue;
    const size_t second_k = it->second[0].first;
    Node& second = g->nodes[second_k];
    if (removed[second_k] || second.op_type != "Transpose" || !second.domain.empty()) continue;
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
    DropReader(&readers, in, k);
    removed[k] = true;
    if (identity && !g->IsGraphOutput(out)) {
      auto out_readers = readers.find(out);
      if (out_readers != readers.end()) {
        for (const auto& use : out_readers->second) {
          g->nodes[use.first].inputs[use.second] = in;
          readers[in].push_back(use);
        }
        readers.erase(out);
      }
      g->values.erase(out);
      removed[second_k] = true;
    } else {
      second.inputs[0] = in;
      readers[in].emplace_back(second_k, 0);
      if (identity) {
        second.op_type = "Identity";
        second.attrs = AttrMap();
      } else {
        second.attrs.SetInts("perm", composed);
      }
    }
    readers.erase(mid);
    g->values.erase(mid);
    changed = true;
  }
  if (!changed) return false;
  std::vector<Node> kept;
  kept.reserve(g->nodes.size());
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  return true;
}

}  // namespace

Status CancelTransposes(Graph* g) {
  // A pass can expose a pair it already passed (a reader count that dropped);
  // the next pass finds it. Each pass removes at least one node.
  while (CancelPass(g)) {
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
