// SequenceMap (opset 17) is an ONNX function: a Loop over the first input
// sequence whose body takes element i of every sequence input (tensor inputs
// as they are), runs the SequenceMap body and appends each of its outputs to
// the output sequences. Expanding it here leaves one kind of node that runs
// subgraphs with sequences (Loop: carried, captured and returned sequences),
// and every later pass sees only that.
#include <map>
#include <string>
#include <vector>

#include "converter/onnx_dtype.h"
#include "converter/passes/passes.h"

namespace qfold {
namespace conv {
namespace {

// A name used neither in `g` nor in `body`: the Loop body sees both scopes.
std::string FreshName(const Graph& g, const Graph& body, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.values.count(name) || body.values.count(name); ++i)
    name = base + "_" + std::to_string(i);
  return name;
}

// A scalar tensor, or a sequence of tensors of `dtype` (any shape).
Value MakeValue(const std::string& name, DType dtype, bool sequence) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.rank_known = !sequence;
  v.is_sequence = sequence;
  return v;
}

}  // namespace

Status ExpandSequenceMap(Graph* g, Node&& n, std::vector<Node>* out) {
  auto invalid = [&](const std::string& why) {
    return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": " + why);
  };
  auto it = n.subgraphs.find("body");
  if (it == n.subgraphs.end() || !it->second) return invalid("has no body graph");
  Graph& body = *it->second;
  if (n.inputs.empty() || n.input(0).empty()) return invalid("needs an input sequence");
  if (body.inputs.size() != n.inputs.size())
    return invalid("its body takes " + std::to_string(body.inputs.size()) + " inputs but it has " +
                   std::to_string(n.inputs.size()));
  if (body.outputs.size() != n.outputs.size())
    return invalid("its body returns " + std::to_string(body.outputs.size()) +
                   " values but it has " + std::to_string(n.outputs.size()) + " outputs");
  // Which inputs are sequences (element i of each) and which tensors (the
  // same one every iteration). Values of an enclosing scope are not visible
  // here, so an input read from one is refused.
  std::vector<bool> is_seq(n.inputs.size());
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    if (n.inputs[j].empty()) return invalid("input " + std::to_string(j) + " is omitted");
    const Value* v = g->Find(n.inputs[j]);
    if (!v)
      return Status(StatusCode::kUnsupported,
                    g->source + ": " + n.Label() + ": input '" + n.inputs[j] +
                        "' comes from an enclosing graph; a SequenceMap there is not supported");
    is_seq[j] = v->is_sequence;
  }
  if (!is_seq[0]) return invalid("input 0 '" + n.inputs[0] + "' is not a sequence");
  for (const std::string& name : body.inputs)
    if (name.empty()) return invalid("its body has an input without a name");
  std::vector<DType> out_dtypes;
  for (const std::string& o : body.outputs) {
    const Value* v = body.Find(o) ? body.Find(o) : g->Find(o);  // or an outer value
    if (!v || v->dtype == DType::kUndefined || v->is_sequence)
      return invalid("body output '" + o + "' has no tensor type");
    out_dtypes.push_back(v->dtype);
  }

  const std::string base = n.name.empty() ? "SequenceMap" : n.name;
  Node loop = MakeNode("Loop", n.name, {}, n.outputs);
  // Outer nodes: the trip count and an empty sequence per output.
  const std::string count = FreshName(*g, body, base + "_length");
  g->values[count] = MakeValue(count, DType::kInt64, false);
  out->push_back(MakeNode("SequenceLength", base + "_length", {n.inputs[0]}, {count}));
  loop.inputs = {count, ""};
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const std::string empty = FreshName(*g, body, base + "_empty_" + std::to_string(i));
    g->values[empty] = MakeValue(empty, out_dtypes[i], true);
    Node e = MakeNode("SequenceEmpty", empty, {}, {empty});
    e.attrs.SetInt("dtype", OnnxFromDType(out_dtypes[i]));
    out->push_back(std::move(e));
    loop.inputs.push_back(empty);
  }

  // The body: (iteration, condition, the sequences so far) -> (condition,
  // the sequences with this iteration's values appended).
  auto loop_body = std::make_shared<Graph>();
  Graph& lb = *loop_body;
  lb.source = body.source;
  lb.opset = body.opset;
  lb.opsets = body.opsets;
  lb.values = body.values;
  const std::string iter = FreshName(*g, body, base + "_iteration");
  const std::string cond_in = FreshName(*g, body, base + "_cond_in");
  const std::string cond_out = FreshName(*g, body, base + "_cond_out");
  lb.values[iter] = MakeValue(iter, DType::kInt64, false);
  lb.values[cond_in] = MakeValue(cond_in, DType::kBool, false);
  lb.values[cond_out] = MakeValue(cond_out, DType::kBool, false);
  lb.inputs = {iter, cond_in};
  lb.outputs = {cond_out};
  std::vector<std::string> seq_in, seq_out;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const std::string si = FreshName(*g, lb, base + "_out" + std::to_string(i) + "_in");
    lb.values[si] = MakeValue(si, out_dtypes[i], true);
    const std::string so = FreshName(*g, lb, base + "_out" + std::to_string(i) + "_out");
    lb.values[so] = MakeValue(so, out_dtypes[i], true);
    lb.inputs.push_back(si);
    lb.outputs.push_back(so);
    seq_in.push_back(si);
    seq_out.push_back(so);
  }
  // The SequenceMap body's inputs become values its new first nodes produce,
  // under fresh names: a body input may share its name with a value of `g`
  // (the body's scope hid it), which the Loop body reads.
  std::map<std::string, std::string> renames;
  for (const std::string& in : body.inputs) {
    const std::string fresh = FreshName(*g, lb, in);
    Value v = lb.values[in];
    v.name = fresh;
    lb.values.erase(in);
    lb.values[fresh] = std::move(v);
    renames[in] = fresh;
  }
  auto renamed = [&](const std::string& s) {
    auto r = renames.find(s);
    return r == renames.end() ? s : r->second;
  };
  for (Node& b : body.nodes) {
    for (std::string& in : b.inputs) in = renamed(in);
    for (auto& nested : b.subgraphs) RenameOuterRefs(nested.second.get(), renames);
  }
  for (std::string& o : body.outputs) o = renamed(o);
  for (size_t j = 0; j < n.inputs.size(); ++j) {
    const std::string name = renamed(body.inputs[j]);
    lb.nodes.push_back(is_seq[j] ? MakeNode("SequenceAt", base + "_element_" + std::to_string(j),
                                            {n.inputs[j], iter}, {name})
                                 : MakeNode("Identity", base + "_input_" + std::to_string(j),
                                            {n.inputs[j]}, {name}));
  }
  for (Node& b : body.nodes) lb.nodes.push_back(std::move(b));
  for (size_t i = 0; i < n.outputs.size(); ++i)
    lb.nodes.push_back(MakeNode("SequenceInsert", base + "_append_" + std::to_string(i),
                                {seq_in[i], body.outputs[i]}, {seq_out[i]}));
  lb.nodes.push_back(MakeNode("Identity", base + "_continue", {cond_in}, {cond_out}));
  loop.subgraphs["body"] = std::move(loop_body);
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) {
      Value& v = g->values[n.outputs[i]];
      v.name = n.outputs[i];
      v.is_sequence = true;
      v.dtype = out_dtypes[i];
    }
  out->push_back(std::move(loop));
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
