// Makes every subgraph of an If, Loop or Scan self-contained: the values of
// enclosing graphs it reads (ONNX lets a subgraph name them freely) become
// extra inputs of the node, after its ONNX inputs, and the subgraph's last
// inputs, in the same order (attribute captured_inputs counts them). The
// planner then sees their lifetimes, and a subgraph is a graph with numbered
// inputs like any other. Enclosing constants are copied into the subgraph
// instead. Innermost subgraphs first, so what a nested node captures is an
// ordinary input its own subgraph may capture in turn.
#include <algorithm>
#include <set>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

// Names a graph defines: inputs, constants, node outputs.
std::set<std::string> Defined(const Graph& g) {
  std::set<std::string> names(g.inputs.begin(), g.inputs.end());
  for (const auto& kv : g.values)
    if (kv.second.is_constant()) names.insert(kv.first);
  for (const Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty()) names.insert(o);
  return names;
}

Status Invalid(const Graph& g, const Node& n, const std::string& msg) {
  return Status(StatusCode::kInvalidModel, g.source + ": " + n.Label() + ": " + msg);
}

// The graph attributes the node needs, and what qfold cannot run.
Status CheckNode(const Graph& g, const Node& n) {
  std::vector<std::string> need = n.op_type == "If"
                                      ? std::vector<std::string>{"then_branch", "else_branch"}
                                      : std::vector<std::string>{"body"};
  for (const std::string& a : need)
    if (!n.subgraphs.count(a)) return Invalid(g, n, "has no graph attribute '" + a + "'");
  if (n.op_type == "Loop" && n.input(0).empty()) {
    const Graph& body = *n.subgraphs.at("body");
    const Value* c = body.outputs.empty() ? nullptr : body.Find(body.outputs[0]);
    const bool stops = c && c->is_constant() && !c->data->empty() && (*c->data)[0] == 0;
    if (!stops)
      return Invalid(g, n,
                     "unbounded loop: it has no trip count M and its condition ('" +
                         (body.outputs.empty() ? std::string() : body.outputs[0]) +
                         "') is computed by the body from data, so qfold cannot bound its "
                         "iterations or size its outputs; give the Loop a maximum trip count M");
  }
  return Status::Ok();
}

Status Capture(Graph* g, std::vector<const Graph*>* scopes) {
  scopes->push_back(g);
  for (Node& n : g->nodes) {
    if (!IsControlFlowNode(n)) continue;
    QF_RETURN_IF_ERROR(CheckNode(*g, n));
    std::vector<std::string> captured;
    for (auto& kv : n.subgraphs) {
      Graph* sub = kv.second.get();
      sub->source = g->source;
      sub->opset = g->opset;
      sub->opsets = g->opsets;
      QF_RETURN_IF_ERROR(Capture(sub, scopes));
      const std::set<std::string> defined = Defined(*sub);
      std::vector<std::string> free;
      auto use = [&](const std::string& s) {
        if (!s.empty() && !defined.count(s) && std::find(free.begin(), free.end(), s) == free.end())
          free.push_back(s);
      };
      for (const Node& m : sub->nodes)
        for (const std::string& in : m.inputs) use(in);
      for (const std::string& out : sub->outputs) use(out);
      for (const std::string& name : free) {
        const Value* v = nullptr;
        bool found = false;
        for (auto it = scopes->rbegin(); it != scopes->rend() && !found; ++it)
          if (Defined(**it).count(name)) {
            found = true;
            v = (*it)->Find(name);
          }
        if (!found)
          return Invalid(*g, n,
                         "subgraph '" + kv.first + "' reads '" + name +
                             "', which neither it nor an enclosing graph defines");
        if (v && v->is_constant()) {
          sub->values[name] = *v;
          continue;
        }
        if (std::find(captured.begin(), captured.end(), name) == captured.end())
          captured.push_back(name);
      }
    }
    if (captured.empty()) continue;
    for (auto& kv : n.subgraphs) {
      Graph* sub = kv.second.get();
      for (const std::string& name : captured) {
        // A subgraph may already define a value of that name (a constant
        // shadowing the outer one is read as its own): it then ignores the input.
        std::string local = name;
        if (Defined(*sub).count(local)) local = sub->UniqueName(name + "/captured");
        sub->inputs.push_back(local);
        Value& v = sub->values[local];
        v.name = local;
      }
    }
    n.inputs.insert(n.inputs.end(), captured.begin(), captured.end());
    n.attrs.SetInt("captured_inputs", int64_t(captured.size()));
  }
  scopes->pop_back();
  return Status::Ok();
}

}  // namespace

Status CaptureOuterValues(Graph* g) {
  std::vector<const Graph*> scopes;
  return Capture(g, &scopes);
}

}  // namespace conv
}  // namespace qfold
