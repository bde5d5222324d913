// Type inference through the subgraphs of If, Loop and Scan (called by
// InferAndFold for each such node, after CaptureOuterValues): each subgraph's
// inputs get their dtypes and shapes from the node's inputs, the subgraph is
// inferred and folded like a graph of its own, and the node's outputs get the
// types the branches agree on (If) or the body keeps across iterations.
#include <algorithm>

#include "converter/passes/passes.h"
#include "core/shape_util.h"

namespace qfold {
namespace conv {

namespace {

Status Invalid(const Graph& g, const Node& n, const std::string& msg) {
  return Status(StatusCode::kInvalidModel, g.source + ": " + n.Label() + ": " + msg);
}

Shape Merge(const Shape& a, const Shape& b) {
  Shape s = a;
  for (size_t d = 0; d < s.size(); ++d)
    if (a[d] != b[d]) s[d] = kUnknownDim;
  return s;
}

void SetType(Value* v, DType dtype, bool rank_known, const Shape& shape, bool is_sequence = false,
             bool is_optional = false) {
  v->is_sequence = is_sequence;
  v->is_optional = is_optional;
  v->dtype = dtype;
  v->rank_known = rank_known;
  v->shape = shape;
  v->data = nullptr;
  v->dim_names.clear();
}

// Sets the subgraph's inputs from `types` (one per input), then infers (and,
// with `fold`, folds) it. Nodes of a subgraph whose types are only being
// probed are not folded: a trial shape may not hold at every iteration.
Status InferBody(const Graph& g, const Node& n, const std::string& attr, Graph* sub,
                 const std::vector<Value>& types, bool fold) {
  if (sub->inputs.size() != types.size())
    return Invalid(g, n,
                   "subgraph '" + attr + "' has " + std::to_string(sub->inputs.size()) +
                       " inputs, expected " + std::to_string(types.size()));
  for (size_t i = 0; i < types.size(); ++i) {
    Value& v = sub->values[sub->inputs[i]];
    v.name = sub->inputs[i];
    SetType(&v, types[i].dtype, types[i].rank_known, types[i].shape, types[i].is_sequence,
            types[i].is_optional);
  }
  Status st = VerifyGraph(sub);
  if (st.ok()) st = InferAndFold(sub, fold);
  if (st.ok() && fold) st = RemoveDeadCode(sub);
  if (!st.ok()) {
    std::string msg = st.message();
    // The subgraph's own messages start with the file name already.
    if (msg.compare(0, g.source.size() + 2, g.source + ": ") == 0)
      msg = msg.substr(g.source.size() + 2);
    return Status(st.code(), g.source + ": " + n.Label() + ", subgraph '" + attr + "': " + msg);
  }
  for (const std::string& o : sub->outputs) {
    const Value* v = sub->Find(o);
    if (!v || v->dtype == DType::kUndefined)
      return Invalid(g, n, "subgraph '" + attr + "' output '" + o + "' has no known type");
  }
  return Status::Ok();
}

// "an optional sequence of float32": a value's kind for messages.
std::string KindName(const Value& v) {
  return std::string(v.is_optional ? "an optional " : "") +
         (v.is_sequence ? (v.is_optional ? "sequence of " : "a sequence of ") : "") +
         dtype_name(v.dtype);
}

const Value& Out(const Graph& sub, size_t i) {
  return *sub.Find(sub.outputs[i]);
}

Value TypeOf(const Graph& g, const std::string& name) {
  Value v;
  if (const Value* found = g.Find(name)) v = *found;
  v.data = nullptr;
  return v;
}

// Loop/Scan: the carried inputs' types with every dim one iteration changes
// made unknown, so that nothing is folded for one iteration's shapes only.
Status FixCarriedTypes(const Graph& g, const Node& n, Graph* body, std::vector<Value>* types,
                       size_t first_in, size_t first_out, size_t count) {
  for (int round = 0; round < 2; ++round) {
    Graph trial = *body;
    QF_RETURN_IF_ERROR(InferBody(g, n, "body", &trial, *types, /*fold=*/false));
    bool stable = true;
    for (size_t i = 0; i < count; ++i) {
      Value& in = (*types)[first_in + i];
      const Value& out = Out(trial, first_out + i);
      if (out.dtype != in.dtype || out.is_sequence != in.is_sequence)
        return Invalid(g, n,
                       "loop-carried value " + std::to_string(i) + " enters as " + KindName(in) +
                           " and leaves the body as " + KindName(out));
      // An optional on either side makes the body's input optional: the
      // runtime wraps a plain value (or unwraps the body's) between iterations.
      if (out.is_optional && !in.is_optional) {
        in.is_optional = true;
        stable = false;
      }
      if (!in.rank_known) continue;
      if (!out.rank_known || out.shape.size() != in.shape.size()) {
        in.rank_known = false;
        in.shape.clear();
        stable = false;
      } else if (out.shape != in.shape) {
        in.shape = Merge(in.shape, out.shape);
        stable = false;
      }
    }
    if (stable) return Status::Ok();
  }
  return Status::Ok();
}

Status InferIf(Graph* g, Node* n, bool fold) {
  Graph& then_g = *n->subgraphs.at("then_branch");
  Graph& else_g = *n->subgraphs.at("else_branch");
  std::vector<Value> types;
  for (size_t i = 1; i < n->inputs.size(); ++i) types.push_back(TypeOf(*g, n->inputs[i]));
  QF_RETURN_IF_ERROR(InferBody(*g, *n, "then_branch", &then_g, types, fold));
  QF_RETURN_IF_ERROR(InferBody(*g, *n, "else_branch", &else_g, types, fold));
  for (const Graph* b : {&then_g, &else_g})
    if (b->outputs.size() != n->outputs.size())
      return Invalid(*g, *n,
                     std::string(b == &then_g ? "then_branch" : "else_branch") + " has " +
                         std::to_string(b->outputs.size()) + " output(s), the If has " +
                         std::to_string(n->outputs.size()));
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    const Value& t = Out(then_g, i);
    const Value& e = Out(else_g, i);
    const std::string which = "output " + std::to_string(i) + " ('" + n->outputs[i] + "')";
    if (t.dtype != e.dtype || t.is_sequence != e.is_sequence || t.is_optional != e.is_optional)
      return Invalid(
          *g, *n,
          which + " is " + KindName(t) + " in then_branch but " + KindName(e) + " in else_branch");
    // Declared output ranks must agree (fold_ifs checks them); inferred ones
    // may differ, as ONNX allows: the output's rank is then known when running.
    if (n->outputs[i].empty()) continue;
    Value& v = g->values[n->outputs[i]];
    v.name = n->outputs[i];
    const bool rank = t.rank_known && e.rank_known && t.shape.size() == e.shape.size();
    SetType(&v, t.dtype, rank, rank ? Merge(t.shape, e.shape) : Shape(), t.is_sequence,
            t.is_optional);
  }
  return Status::Ok();
}

Status InferLoop(Graph* g, Node* n, bool fold) {
  Graph& body = *n->subgraphs.at("body");
  const size_t captured = size_t(n->attrs.GetInt("captured_inputs", 0));
  if (n->inputs.size() < 2 + captured)
    return Invalid(*g, *n, "needs the inputs M and cond (either may be empty)");
  const size_t carried = n->inputs.size() - 2 - captured;
  if (body.outputs.size() < 1 + carried || n->outputs.size() != body.outputs.size() - 1)
    return Invalid(*g, *n,
                   "body has " + std::to_string(body.outputs.size()) +
                       " outputs, expected the condition, " + std::to_string(carried) +
                       " carried value(s) and the Loop's scan outputs");
  std::vector<Value> types(2);
  SetType(&types[0], DType::kInt64, true, {});
  SetType(&types[1], DType::kBool, true, {});
  for (size_t i = 2; i < n->inputs.size(); ++i) types.push_back(TypeOf(*g, n->inputs[i]));
  QF_RETURN_IF_ERROR(FixCarriedTypes(*g, *n, &body, &types, 2, 1, carried));
  QF_RETURN_IF_ERROR(InferBody(*g, *n, "body", &body, types, fold));
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    if (n->outputs[i].empty()) continue;
    const Value& b = Out(body, 1 + i);
    Value& v = g->values[n->outputs[i]];
    v.name = n->outputs[i];
    if (i < carried) {
      SetType(&v, b.dtype, types[2 + i].rank_known, types[2 + i].shape, b.is_sequence,
              b.is_optional);
    } else {
      if (b.is_sequence || b.is_optional)
        return Status(StatusCode::kUnsupported,
                      g->source + ": " + n->Label() + ": scan output '" + n->outputs[i] + "' is " +
                          (b.is_optional ? "an optional" : "a sequence") +
                          "; scan outputs are tensors stacked over iterations");
      Shape s = b.shape;
      s.insert(s.begin(), kUnknownDim);  // the iterations run
      SetType(&v, b.dtype, b.rank_known, b.rank_known ? s : Shape());
    }
  }
  return Status::Ok();
}

Status InferScan(Graph* g, Node* n, bool fold) {
  Graph& body = *n->subgraphs.at("body");
  const size_t captured = size_t(n->attrs.GetInt("captured_inputs", 0));
  const int64_t scan_inputs = n->attrs.GetInt("num_scan_inputs", -1);
  if (scan_inputs < 1 || size_t(scan_inputs) + captured > n->inputs.size())
    return Invalid(*g, *n,
                   "num_scan_inputs " + std::to_string(scan_inputs) + " does not fit its " +
                       std::to_string(n->inputs.size()) + " inputs");
  const size_t states = n->inputs.size() - size_t(scan_inputs) - captured;
  if (n->outputs.size() < states || body.outputs.size() != n->outputs.size())
    return Invalid(*g, *n,
                   "body has " + std::to_string(body.outputs.size()) + " outputs, the Scan " +
                       std::to_string(n->outputs.size()));
  std::vector<int64_t> in_axes = n->attrs.GetInts("scan_input_axes");
  std::vector<int64_t> out_axes = n->attrs.GetInts("scan_output_axes");
  in_axes.resize(size_t(scan_inputs), 0);
  out_axes.resize(n->outputs.size() - states, 0);
  std::vector<Value> types;
  int64_t T = kUnknownDim;
  // States and scan inputs are tensors (the spec's V); captured values may be
  // sequences, which the body reads as a Loop body does (captured optionals
  // are not supported).
  for (size_t i = n->inputs.size() - captured; i < n->inputs.size(); ++i)
    if (TypeOf(*g, n->inputs[i]).is_optional)
      return Status(StatusCode::kUnsupported, g->source + ": " + n->Label() + ": reads optional '" +
                                                  n->inputs[i] +
                                                  "'; Scan bodies take no optionals");
  for (size_t i = 0; i < n->inputs.size() - captured; ++i) {
    Value t = TypeOf(*g, n->inputs[i]);
    if (t.is_sequence || t.is_optional)
      return Invalid(*g, *n,
                     "input '" + n->inputs[i] + "' is " +
                         (t.is_optional ? "an optional" : "a sequence") +
                         "; Scan's inputs are tensors");
    if (i >= states && t.rank_known) {
      int axis = 0;
      if (!NormalizeAxis(in_axes[i - states], int(t.shape.size()), &axis))
        return Invalid(*g, *n,
                       "scan_input_axes " + std::to_string(in_axes[i - states]) +
                           " is out of range for '" + n->inputs[i] + "' " + ShapeToString(t.shape));
      if (t.shape[size_t(axis)] >= 0) T = t.shape[size_t(axis)];
      t.shape.erase(t.shape.begin() + axis);
    }
    types.push_back(t);
  }
  for (size_t i = n->inputs.size() - captured; i < n->inputs.size(); ++i)
    types.push_back(TypeOf(*g, n->inputs[i]));
  QF_RETURN_IF_ERROR(FixCarriedTypes(*g, *n, &body, &types, 0, 0, states));
  QF_RETURN_IF_ERROR(InferBody(*g, *n, "body", &body, types, fold));
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    const Value& b = Out(body, i);
    if (b.is_sequence || b.is_optional)
      return Invalid(*g, *n,
                     "body output '" + body.outputs[i] + "' is " +
                         (b.is_optional ? "an optional" : "a sequence") +
                         "; Scan's outputs are tensors");
    if (n->outputs[i].empty()) continue;
    Value& v = g->values[n->outputs[i]];
    v.name = n->outputs[i];
    if (i < states) {
      SetType(&v, b.dtype, types[i].rank_known, types[i].shape);
      continue;
    }
    if (!b.rank_known) {
      SetType(&v, b.dtype, false, {});
      continue;
    }
    int axis = 0;
    if (!NormalizeAxis(out_axes[i - states], int(b.shape.size()) + 1, &axis))
      return Invalid(*g, *n,
                     "scan_output_axes " + std::to_string(out_axes[i - states]) +
                         " is out of range for scan output '" + n->outputs[i] + "'");
    Shape s = b.shape;
    s.insert(s.begin() + axis, T);
    SetType(&v, b.dtype, true, s);
  }
  return Status::Ok();
}

}  // namespace

Status InferSubgraphNode(Graph* g, Node* n, bool fold) {
  for (const char* attr : {"then_branch", "else_branch", "body"}) {
    const bool needed = (n->op_type == "If") == (std::string(attr) != "body");
    if (needed && !n->subgraphs.count(attr))
      return Invalid(*g, *n, std::string("has no graph attribute '") + attr + "'");
  }
  if (n->op_type == "If") return InferIf(g, n, fold);
  if (n->op_type == "Loop") return InferLoop(g, n, fold);
  return InferScan(g, n, fold);
}

}  // namespace conv
}  // namespace qfold
