// If folding: an If whose condition is constant once the input overrides
// (--const, --input-shape) are applied and what they determine is folded
// becomes the nodes of the branch it takes. An If that stays dynamic is kept;
// the runtime plans both branches and runs the one its condition picks.
#include <algorithm>
#include <set>

#include "converter/passes/passes.h"
#include "core/shape_util.h"

namespace qfold {
namespace conv {

// Names a graph defines itself: its inputs, constants and node outputs. Its
// other references (node inputs, outputs) are values of enclosing graphs.
std::set<std::string> DefinedNames(const Graph& g) {
  std::set<std::string> names(g.inputs.begin(), g.inputs.end());
  for (const auto& kv : g.values)
    if (kv.second.is_constant()) names.insert(kv.first);
  for (const Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty()) names.insert(o);
  return names;
}

// Renames a subgraph's references to enclosing values (and those of the
// subgraphs nested in it); a name the subgraph defines itself hides the outer one.
void RenameOuterRefs(Graph* sub, std::map<std::string, std::string> renames) {
  for (const std::string& local : DefinedNames(*sub)) renames.erase(local);
  if (renames.empty()) return;
  auto rename = [&](std::string* s) {
    auto it = renames.find(*s);
    if (it != renames.end()) *s = it->second;
  };
  for (Node& n : sub->nodes) {
    for (std::string& in : n.inputs) rename(&in);
    for (auto& nested : n.subgraphs) RenameOuterRefs(nested.second.get(), renames);
  }
  for (std::string& out : sub->outputs) rename(&out);
}

namespace {

// Every name used anywhere in `g`, nested subgraphs included.
void UsedNames(const Graph& g, std::set<std::string>* names) {
  for (const auto& kv : g.values) names->insert(kv.first);
  names->insert(g.inputs.begin(), g.inputs.end());
  names->insert(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) {
    names->insert(n.inputs.begin(), n.inputs.end());
    names->insert(n.outputs.begin(), n.outputs.end());
    for (const auto& sub : n.subgraphs) UsedNames(*sub.second, names);
  }
}

Status BranchesAgree(const Graph& g, const Node& n, const Graph& then_g, const Graph& else_g) {
  auto bad = [&](const std::string& msg) {
    return Status(StatusCode::kInvalidModel, g.source + ": " + n.Label() + ": " + msg);
  };
  for (const Graph* b : {&then_g, &else_g})
    if (b->outputs.size() != n.outputs.size())
      return bad(std::string(b == &then_g ? "then_branch" : "else_branch") + " has " +
                 std::to_string(b->outputs.size()) + " output(s), the If has " +
                 std::to_string(n.outputs.size()));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    // The declared output types (a branch may leave them out).
    const Value* t = then_g.Find(then_g.outputs[i]);
    const Value* e = else_g.Find(else_g.outputs[i]);
    if (!t || !e) continue;
    const std::string which = "output " + std::to_string(i) + " ('" + n.outputs[i] + "')";
    if (t->dtype != DType::kUndefined && e->dtype != DType::kUndefined && t->dtype != e->dtype)
      return bad(which + " is " + dtype_name(t->dtype) + " in then_branch ('" + then_g.outputs[i] +
                 "') but " + dtype_name(e->dtype) + " in else_branch ('" + else_g.outputs[i] +
                 "')");
    if (t->rank_known && e->rank_known && t->shape.size() != e->shape.size())
      return bad(which + " has rank " + std::to_string(t->shape.size()) + " in then_branch ('" +
                 then_g.outputs[i] + "' " + ShapeToString(t->shape) + ") but rank " +
                 std::to_string(e->shape.size()) + " in else_branch ('" + else_g.outputs[i] + "' " +
                 ShapeToString(e->shape) + ")");
  }
  return Status::Ok();
}

// Folds the nodes the condition depends on in a scratch copy. Returns whether
// it is constant; `taken` then holds its value, `inputs` otherwise the graph
// inputs it depends on and `why` what stopped folding, if anything failed.
Status EvaluateCondition(const Graph& g, size_t if_index, bool* constant, bool* taken,
                         std::vector<std::string>* inputs, std::string* why) {
  const Node& n = g.nodes[if_index];
  const std::string& cond = n.input(0);
  *constant = false;
  std::set<std::string> need{cond};
  std::vector<bool> keep(if_index, false);
  for (size_t k = if_index; k-- > 0;) {
    const Node& p = g.nodes[k];
    bool needed = false;
    for (const std::string& o : p.outputs) needed = needed || (!o.empty() && need.count(o));
    if (!needed) continue;
    keep[k] = true;
    need.insert(p.inputs.begin(), p.inputs.end());
  }
  for (const std::string& in : g.inputs)
    if (need.count(in)) inputs->push_back(in);
  Graph scratch;
  scratch.source = g.source;
  scratch.opset = g.opset;
  scratch.opsets = g.opsets;
  scratch.inputs = g.inputs;
  scratch.outputs = {cond};
  for (const std::string& name : need) {
    const Value* v = g.Find(name);
    if (v &&
        (v->is_constant() || std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end()))
      scratch.values[name] = *v;
  }
  for (size_t k = 0; k < if_index; ++k)
    if (keep[k]) scratch.nodes.push_back(g.nodes[k]);
  Status st = InferAndFold(&scratch, /*fold=*/true);
  if (!st.ok()) *why = st.message();
  const Value* c = scratch.Find(cond);
  if (!st.ok() || !c || !c->is_constant()) return Status::Ok();
  int64_t numel = 0;
  if (!CheckedNumel(c->shape, &numel) || numel != 1 ||
      (c->dtype != DType::kBool && c->dtype != DType::kUInt8))
    return Status(StatusCode::kInvalidModel, g.source + ": " + n.Label() + ": condition '" + cond +
                                                 "' is " + dtype_name(c->dtype) + " " +
                                                 ShapeToString(c->shape) +
                                                 "; an If takes one bool");
  *constant = true;
  *taken = (*c->data)[0] != 0;
  return Status::Ok();
}

// Replaces node `k` (an If) by the nodes of `branch`: names the branch defines
// are kept where the graph does not use them yet, prefixed with the If's name
// otherwise; each branch output feeds the If's output through an Identity.
void Inline(Graph* g, size_t k, Graph* branch) {
  const Node n = g->nodes[k];
  std::set<std::string> used;
  UsedNames(*g, &used);
  std::map<std::string, std::string> renames;
  for (const std::string& name : DefinedNames(*branch)) {
    std::string fresh = name;
    for (int i = 1; used.count(fresh); ++i)
      fresh = n.name + "/" + name + (i > 1 ? "_" + std::to_string(i) : "");
    used.insert(fresh);
    if (fresh != name) renames[name] = fresh;
  }
  auto renamed = [&](const std::string& s) {
    auto it = renames.find(s);
    return it == renames.end() ? s : it->second;
  };
  for (auto& kv : branch->values) {
    if (!kv.second.is_constant()) continue;
    Value v = kv.second;
    v.name = renamed(kv.first);
    g->values[v.name] = std::move(v);
  }
  std::vector<Node> inlined;
  for (Node& b : branch->nodes) {
    b.name = n.name + "/" + b.name;
    for (std::string& s : b.inputs) s = renamed(s);
    for (std::string& s : b.outputs) s = renamed(s);
    for (auto& sub : b.subgraphs) RenameOuterRefs(sub.second.get(), renames);
    inlined.push_back(std::move(b));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i].empty()) continue;
    Node id;
    id.op_type = "Identity";
    id.name = n.name + "/output_" + std::to_string(i);
    id.inputs = {renamed(branch->outputs[i])};
    id.outputs = {n.outputs[i]};
    inlined.push_back(std::move(id));
  }
  g->nodes.erase(g->nodes.begin() + std::ptrdiff_t(k));
  g->nodes.insert(g->nodes.begin() + std::ptrdiff_t(k), inlined.begin(), inlined.end());
}

}  // namespace

Status FoldIfs(Graph* g, std::string* dynamic_if) {
  auto is_if = [](const Node& n) { return n.domain.empty() && n.op_type == "If"; };
  // Graphs without an If keep their order and their first error as before.
  if (std::none_of(g->nodes.begin(), g->nodes.end(), is_if)) return Status::Ok();
  std::set<std::string> dynamic;  // Ifs kept
  for (;;) {
    QF_RETURN_IF_ERROR(VerifyGraph(g));
    size_t k = 0;
    while (k < g->nodes.size() && (!is_if(g->nodes[k]) || dynamic.count(g->nodes[k].name))) ++k;
    if (k == g->nodes.size()) return Status::Ok();
    const Node& n = g->nodes[k];
    auto then_it = n.subgraphs.find("then_branch"), else_it = n.subgraphs.find("else_branch");
    if (n.inputs.size() != 1 || n.input(0).empty() || then_it == n.subgraphs.end() ||
        else_it == n.subgraphs.end())
      return Status(StatusCode::kInvalidModel,
                    g->source + ": " + n.Label() +
                        " needs one condition input and then_branch and else_branch graphs");
    QF_RETURN_IF_ERROR(BranchesAgree(*g, n, *then_it->second, *else_it->second));
    bool constant = false, taken = false;
    std::vector<std::string> inputs;
    std::string why;
    QF_RETURN_IF_ERROR(EvaluateCondition(*g, k, &constant, &taken, &inputs, &why));
    if (!constant) {
      // Stays an If: both branches are converted and chosen at run time.
      if (dynamic_if && dynamic_if->empty()) *dynamic_if = n.name;
      dynamic.insert(n.name);
      continue;
    }
    // Keep the taken branch alive past the erase of its If.
    std::shared_ptr<Graph> branch = taken ? then_it->second : else_it->second;
    g->notes.push_back(n.Label() + ": condition '" + n.input(0) + "' is " +
                       (taken ? "true" : "false") + " at conversion; " +
                       (taken ? "then_branch" : "else_branch") + " (" +
                       std::to_string(branch->nodes.size()) + " nodes) inlined");
    Inline(g, k, branch.get());
  }
}

}  // namespace conv
}  // namespace qfold
