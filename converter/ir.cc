#include "converter/ir.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

namespace qfold {
namespace conv {

bool Graph::IsGraphOutput(const std::string& name) const {
  return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
}

std::string Graph::UniqueName(const std::string& base) const {
  if (!values.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!values.count(n)) return n;
  }
}

std::string Graph::AddConstant(const std::string& base, DType dtype, const Shape& shape,
                               std::vector<uint8_t> bytes) {
  Value v;
  v.name = UniqueName(base);
  v.dtype = dtype;
  v.rank_known = true;
  v.shape = shape;
  v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  std::string name = v.name;
  values.emplace(name, std::move(v));
  return name;
}

std::string Graph::AddInt64Constant(const std::string& base, const std::vector<int64_t>& v) {
  std::vector<uint8_t> bytes(v.size() * 8);
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return AddConstant(base, DType::kInt64, {int64_t(v.size())}, std::move(bytes));
}

std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> BuildConsumers(
    const Graph& g) {
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> c;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (size_t i = 0; i < g.nodes[n].inputs.size(); ++i)
      if (!g.nodes[n].inputs[i].empty()) c[g.nodes[n].inputs[i]].emplace_back(n, i);
  return c;
}

Status VerifyGraph(Graph* g) {
  auto bad = [&](const std::string& msg) {
    return Status(StatusCode::kInvalidModel, g->source + ": " + msg);
  };
  // Producers; graph inputs and constants are available from the start.
  std::unordered_map<std::string, size_t> producer;
  std::set<std::string> available;
  for (const std::string& in : g->inputs) {
    if (!g->Find(in)) return bad("graph input '" + in + "' has no type information");
    if (!available.insert(in).second) return bad("graph input '" + in + "' is listed twice");
  }
  for (const auto& kv : g->values)
    if (kv.second.is_constant()) available.insert(kv.first);
  for (size_t n = 0; n < g->nodes.size(); ++n)
    for (const std::string& out : g->nodes[n].outputs) {
      if (out.empty()) continue;
      if (available.count(out))
        return bad(g->nodes[n].Label() + ": output '" + out +
                   "' is also a graph input or initializer");
      if (!producer.emplace(out, n).second)
        return bad(g->nodes[n].Label() + ": output '" + out + "' is already produced by " +
                   g->nodes[producer[out]].Label());
    }
  // Kahn's algorithm keeps the original order where it is already valid.
  const size_t nn = g->nodes.size();
  std::vector<size_t> pending(nn, 0);
  std::vector<std::vector<size_t>> users(nn);
  for (size_t n = 0; n < nn; ++n)
    for (const std::string& in : g->nodes[n].inputs) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return bad(g->nodes[n].Label() + ": input '" + in +
                   "' is not a graph input, initializer or any node's output");
      ++pending[n];
      users[it->second].push_back(n);
    }
  std::set<size_t> ready;
  for (size_t n = 0; n < nn; ++n)
    if (!pending[n]) ready.insert(n);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (size_t u : users[n])
      if (--pending[u] == 0) ready.insert(u);
  }
  if (order.size() != nn) {
    for (size_t n = 0; n < nn; ++n)
      if (pending[n]) return bad("graph has a cycle through " + g->nodes[n].Label());
  }
  std::vector<Node> sorted;
  sorted.reserve(nn);
  for (size_t n : order) sorted.push_back(std::move(g->nodes[n]));
  g->nodes = std::move(sorted);
  for (const std::string& out : g->outputs)
    if (!available.count(out) && !producer.count(out))
      return bad("graph output '" + out + "' is never produced");
  return Status::Ok();
}

Node MakeNode(const std::string& op_type, const std::string& name, std::vector<std::string> inputs,
              std::vector<std::string> outputs) {
  Node n;
  n.op_type = op_type;
  n.name = name;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

bool IsControlFlowNode(const Node& n) {
  return n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan");
}

}  // namespace conv
}  // namespace qfold
