// Static sequences. Exports often build a sequence only to take it apart at
// once: SplitToSequence -> SequenceAt / ConcatFromSequence, SequenceConstruct
// -> ConcatFromSequence. When every sequence of the main graph has a length
// known at conversion, each is a list of tensor names here and its ops become
// Split, Squeeze, Unsqueeze, Concat and Identity. Otherwise (a sequence graph
// input or output, a length that depends on data) the sequence ops stay and
// run on sequence values (runtime/src/ops/sequence.cc); sequences that an
// If/Loop/Scan body would use are refused naming the node.
#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "converter/passes/passes.h"
#include "core/shape_util.h"

namespace qfold {
namespace conv {

namespace {

// Tensors in one lowered sequence: each becomes graph values and nodes, so
// longer ones run as sequence values instead (65536 one-column pieces took
// 15 s to convert into 131072 nodes and a 34 MB file).
constexpr int64_t kMaxLength = 4096;

}  // namespace

bool IsSequenceOp(const Node& n) {
  static const std::set<std::string> ops = {
      "SequenceConstruct", "SequenceEmpty", "SplitToSequence", "SequenceInsert",
      "SequenceErase",     "SequenceAt",    "SequenceLength",  "ConcatFromSequence"};
  return n.domain.empty() && ops.count(n.op_type);
}

namespace {

// The tensors of one sequence, and the node that built it (for messages).
struct StaticSequence {
  std::vector<std::string> elements;
  std::string producer;
};

// Names (a std::set or std::unordered_set of them).
template <class Names>
void CollectNames(const Graph& g, Names* names) {
  for (const auto& kv : g.values) names->insert(kv.first);
  names->insert(g.inputs.begin(), g.inputs.end());
  names->insert(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) {
    names->insert(n.name);
    names->insert(n.inputs.begin(), n.inputs.end());
    names->insert(n.outputs.begin(), n.outputs.end());
    for (const auto& sub : n.subgraphs) CollectNames(*sub.second, names);
  }
}

class Lowering {
 public:
  explicit Lowering(Graph* g) : g_(g) { CollectNames(*g, &used_); }

  // Leaves the graph as it was on failure (only unused constants added), so
  // `qfold check` can go on analysing it.
  Status Run() {
    for (const Node& n : g_->nodes) {
      if (IsSequenceOp(n)) {
        QF_RETURN_IF_ERROR(Lower(n));
        continue;
      }
      for (const std::string& in : n.inputs)
        if (seqs_.count(in)) return Refuse(n, "reads sequence '" + in + "'" + From(in) + NoType());
      std::set<std::string> sub_names;
      for (const auto& sub : n.subgraphs) CollectNames(*sub.second, &sub_names);
      for (const auto& kv : seqs_)
        if (sub_names.count(kv.first))
          return Refuse(n,
                        "a subgraph reads sequence '" + kv.first + "'" + From(kv.first) + NoType());
      lowered_.push_back(n);
    }
    for (const std::string& out : g_->outputs)
      if (seqs_.count(out))
        return Status(StatusCode::kUnsupported, g_->source + ": graph output '" + out +
                                                    "' is a sequence" + From(out) + NoType());
    g_->nodes = std::move(lowered_);
    return Status::Ok();
  }

 private:
  // Why a sequence stays one (then it runs on sequence values, main graph only).
  static std::string NoType() { return ", so it stays a sequence at run time"; }
  std::string From(const std::string& seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? "" : " (built by " + it->second.producer + ")";
  }
  Status Refuse(const Node& n, const std::string& why) const {
    return Status(StatusCode::kUnsupported, g_->source + ": " + n.Label() + ": " + why);
  }
  Status Invalid(const Node& n, const std::string& why) const {
    return Status(StatusCode::kInvalidModel, g_->source + ": " + n.Label() + ": " + why);
  }

  // Suffixes continue from the last one taken for the same base: probing
  // from 1 each time made a sequence of 65536 pieces (a fuzzer's model)
  // take minutes (quadratic).
  std::string NewName(const std::string& base) {
    std::string name = base;
    int& next = next_suffix_[base];
    while (used_.count(name)) name = base + "_" + std::to_string(++next);
    used_.insert(name);
    return name;
  }
  std::string Int64Constant(const std::string& base, const std::vector<int64_t>& v, bool scalar) {
    std::vector<uint8_t> bytes(v.size() * 8);
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    std::string name =
        g_->AddConstant(NewName(base), DType::kInt64, scalar ? Shape{} : Shape{int64_t(v.size())},
                        std::move(bytes));
    used_.insert(name);
    return name;
  }
  // The node that takes a sequence op's place keeps its name (messages then
  // name the ONNX node); helpers around it get new names.
  Node MakeNode(const std::string& op, const std::string& base, std::vector<std::string> inputs,
                std::vector<std::string> outputs, bool replaces = false) {
    return conv::MakeNode(op, replaces ? base : NewName(base), std::move(inputs),
                          std::move(outputs));
  }

  // The sequence input `slot` of `n`, which must have been built in this graph.
  Status Input(const Node& n, size_t slot, const StaticSequence** seq) const {
    const std::string& name = n.input(slot);
    auto it = seqs_.find(name);
    if (it == seqs_.end())
      return Refuse(n, "sequence '" + name +
                           "' is not built by SequenceConstruct, SequenceEmpty or "
                           "SplitToSequence in this graph, so its length is not known at "
                           "conversion" +
                           NoType());
    *seq = &it->second;
    return Status::Ok();
  }

  // An optional constant integer scalar input (a position); `present` false when omitted.
  Status ConstScalar(const Node& n, size_t slot, const char* what, bool* present, int64_t* v) {
    *present = !n.input(slot).empty();
    if (!*present) return Status::Ok();
    std::vector<int64_t> ints;
    QF_RETURN_IF_ERROR(ConstInts(n, slot, what, &ints));
    if (ints.size() != 1) return Invalid(n, std::string(what) + " must hold one value");
    *v = ints[0];
    return Status::Ok();
  }
  Status ConstInts(const Node& n, size_t slot, const char* what, std::vector<int64_t>* out) {
    const Value* v = g_->Find(n.input(slot));
    if (!v || !v->is_constant())
      return Refuse(n, std::string(what) + " '" + n.input(slot) +
                           "' is not a constant, so the sequence is not known at conversion");
    Tensor t;
    t.dtype = v->dtype;
    t.shape = v->shape;
    t.data = const_cast<uint8_t*>(v->data->data());
    if (!ReadInts(&t, out))
      return Invalid(n, std::string(what) + " '" + n.input(slot) + "' must be int32 or int64");
    return Status::Ok();
  }

  // The shape of `name` as inferred from the nodes lowered so far (those it
  // depends on, in a scratch copy); false with `why` when unknown.
  bool KnownShape(const std::string& name, Shape* shape, std::string* why) {
    const Value* v = g_->Find(name);
    if (v && v->rank_known) {
      *shape = v->shape;
      return true;
    }
    std::set<std::string> need{name};
    std::vector<bool> keep(lowered_.size(), false);
    for (size_t k = lowered_.size(); k-- > 0;) {
      const Node& p = lowered_[k];
      bool needed = false;
      for (const std::string& o : p.outputs) needed = needed || (!o.empty() && need.count(o));
      if (!needed) continue;
      keep[k] = true;
      need.insert(p.inputs.begin(), p.inputs.end());
    }
    Graph scratch;
    scratch.source = g_->source;
    scratch.opset = g_->opset;
    scratch.opsets = g_->opsets;
    scratch.inputs = g_->inputs;
    scratch.outputs = {name};
    for (const std::string& n : need)
      if (const Value* nv = g_->Find(n)) scratch.values[n] = *nv;
    for (const std::string& in : g_->inputs)
      if (const Value* iv = g_->Find(in)) scratch.values[in] = *iv;
    for (size_t k = 0; k < lowered_.size(); ++k)
      if (keep[k]) scratch.nodes.push_back(lowered_[k]);
    Status st = InferAndFold(&scratch, /*fold=*/true);
    const Value* r = scratch.Find(name);
    if (!st.ok() || !r || !r->rank_known) {
      *why = st.ok() ? "its shape is not known" : st.message();
      return false;
    }
    *shape = r->shape;
    return true;
  }

  Status Lower(const Node& n) {
    const std::string& op = n.op_type;
    const std::string out = n.outputs.empty() ? std::string() : n.outputs[0];
    if (out.empty()) return Invalid(n, "output 0 is omitted");
    if (op == "SequenceConstruct") {
      for (const std::string& in : n.inputs)
        if (in.empty()) return Invalid(n, "an input is omitted");
      seqs_[out] = {n.inputs, n.Label()};
      return Status::Ok();
    }
    if (op == "SequenceEmpty") {
      seqs_[out] = {{}, n.Label()};
      return Status::Ok();
    }
    if (op == "SplitToSequence") return LowerSplit(n, out);
    const StaticSequence* seq = nullptr;
    QF_RETURN_IF_ERROR(Input(n, 0, &seq));
    const int64_t len = int64_t(seq->elements.size());
    bool present = false;
    int64_t pos = 0;
    if (op == "SequenceInsert") {
      QF_RETURN_IF_ERROR(ConstScalar(n, 2, "position", &present, &pos));
      if (!present) pos = len;
      if (pos < -len || pos > len)
        return Invalid(n, "position " + std::to_string(pos) + " is outside [" +
                              std::to_string(-len) + ", " + std::to_string(len) + "]");
      if (n.input(1).empty()) return Invalid(n, "the tensor to insert is omitted");
      StaticSequence s{seq->elements, n.Label()};
      s.elements.insert(s.elements.begin() + (pos < 0 ? pos + len : pos), n.input(1));
      seqs_[out] = std::move(s);
      return Status::Ok();
    }
    if (op == "SequenceErase" || op == "SequenceAt") {
      QF_RETURN_IF_ERROR(ConstScalar(n, 1, "position", &present, &pos));
      if (!present && op == "SequenceAt") return Invalid(n, "position is omitted");
      if (!present) pos = len - 1;
      if (pos < -len || pos >= len)
        return Invalid(n, "position " + std::to_string(pos) + " is outside [" +
                              std::to_string(-len) + ", " + std::to_string(len - 1) +
                              "] for sequence '" + n.input(0) + "' of " + std::to_string(len) +
                              " tensors");
      if (pos < 0) pos += len;
      if (op == "SequenceAt") {
        Node id =
            MakeNode("Identity", n.name, {seq->elements[size_t(pos)]}, {out}, /*replaces=*/true);
        lowered_.push_back(std::move(id));
        return Status::Ok();
      }
      StaticSequence s{seq->elements, n.Label()};
      s.elements.erase(s.elements.begin() + pos);
      seqs_[out] = std::move(s);
      return Status::Ok();
    }
    if (op == "SequenceLength") {
      std::string c = Int64Constant(n.name + "_length", {len}, /*scalar=*/true);
      lowered_.push_back(MakeNode("Identity", n.name, {c}, {out}, /*replaces=*/true));
      return Status::Ok();
    }
    // ConcatFromSequence
    if (!n.attrs.Has("axis")) return Invalid(n, "attribute axis is missing");
    if (len == 0) return Invalid(n, "sequence '" + n.input(0) + "' is empty");
    const int64_t axis = n.attrs.GetInt("axis", 0);
    std::vector<std::string> parts = seq->elements;
    if (n.attrs.GetInt("new_axis", 0) != 0) {
      // Unsqueeze's axes count in the output's rank, as new_axis's axis does.
      std::string axes = Int64Constant(n.name + "_axes", {axis}, /*scalar=*/false);
      for (std::string& p : parts) {
        std::string u = NewName(p + "_unsqueezed");
        lowered_.push_back(MakeNode("Unsqueeze", n.name + "_unsqueeze", {p, axes}, {u}));
        p = u;
      }
    }
    Node concat = MakeNode("Concat", n.name, parts, {out}, /*replaces=*/true);
    concat.attrs.SetInt("axis", axis);
    lowered_.push_back(std::move(concat));
    return Status::Ok();
  }

  Status LowerSplit(const Node& n, const std::string& out) {
    const std::string& x = n.input(0);
    if (x.empty()) return Invalid(n, "input 0 is omitted");
    const int64_t axis_attr = n.attrs.GetInt("axis", 0);
    const bool keepdims = n.attrs.GetInt("keepdims", 1) != 0;
    std::vector<int64_t> split;
    bool split_given = !n.input(1).empty();
    if (split_given) QF_RETURN_IF_ERROR(ConstInts(n, 1, "split", &split));
    const Value* sv = split_given ? g_->Find(n.input(1)) : nullptr;
    const bool split_scalar = sv && sv->shape.empty();
    Shape shape;
    std::string why;
    if (!KnownShape(x, &shape, &why))
      return Refuse(n, "the length of sequence '" + out + "' is not known at conversion: input '" +
                           x + "': " + why);
    int axis = 0;
    if (!NormalizeAxis(axis_attr, int(shape.size()), &axis))
      return Invalid(n, "axis " + std::to_string(axis_attr) + " out of range for input '" + x +
                            "' of shape " + ShapeToString(shape));
    const int64_t dim = shape[size_t(axis)];
    std::vector<int64_t> sizes;
    if (split_given && !split_scalar) {
      if (int64_t(split.size()) > kMaxLength)
        return Refuse(n, "split has " + std::to_string(split.size()) + " values, more than " +
                             std::to_string(kMaxLength));
      sizes = split;
    } else {
      if (dim < 0)
        return Refuse(n, "the length of sequence '" + out + "' is not known at conversion: axis " +
                             std::to_string(axis) + " of input '" + x + "' (shape " +
                             ShapeToString(shape) +
                             ") is unknown; fix it with --input-shape or "
                             "--dim");
      const int64_t chunk = split_scalar ? split[0] : 1;
      if (chunk <= 0) return Invalid(n, "split must be positive, it is " + std::to_string(chunk));
      const int64_t count = dim / chunk + (dim % chunk != 0);
      // Each element becomes a graph value: a huge count is a malformed model, not a plan.
      if (count > kMaxLength)
        return Refuse(n, "sequence '" + out + "' would hold " + std::to_string(count) +
                             " tensors, more than " + std::to_string(kMaxLength));
      for (int64_t i = 0; i < count; ++i) sizes.push_back(std::min(chunk, dim - i * chunk));
    }
    StaticSequence s{{}, n.Label()};
    if (!sizes.empty()) {
      std::vector<std::string> pieces;
      for (size_t i = 0; i < sizes.size(); ++i)
        pieces.push_back(NewName(out + "_" + std::to_string(i)));
      Node sp =
          MakeNode("Split", n.name, {x, Int64Constant(n.name + "_split", sizes, /*scalar=*/false)},
                   pieces, /*replaces=*/true);
      sp.attrs.SetInt("axis", axis);
      lowered_.push_back(std::move(sp));
      // Without a split input each piece has length 1, and keepdims = 0 drops that axis.
      if (!split_given && !keepdims) {
        std::string axes = Int64Constant(n.name + "_axes", {int64_t(axis)}, /*scalar=*/false);
        for (std::string& p : pieces) {
          std::string q = NewName(p + "_squeezed");
          lowered_.push_back(MakeNode("Squeeze", n.name + "_squeeze", {p, axes}, {q}));
          p = q;
        }
      }
      s.elements = std::move(pieces);
    }
    seqs_[out] = std::move(s);
    return Status::Ok();
  }

  Graph* g_;
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, int> next_suffix_;
  std::map<std::string, StaticSequence> seqs_;
  std::vector<Node> lowered_;  // the graph's nodes so far, sequence ops replaced
};

// Names of the values that hold sequences in `g` before inference: sequence
// graph inputs and what sequence ops (and Identity) make of them.
std::set<std::string> SequenceValues(const Graph& g) {
  std::set<std::string> seqs;
  for (const std::string& in : g.inputs)
    if (const Value* v = g.Find(in))
      if (v->is_sequence) seqs.insert(in);
  for (const Node& n : g.nodes) {
    const bool makes = IsSequenceOp(n) && n.op_type != "SequenceAt" &&
                       n.op_type != "SequenceLength" && n.op_type != "ConcatFromSequence";
    const bool passes = n.op_type == "Identity" && seqs.count(n.input(0));
    if ((makes || passes) && !n.outputs.empty()) seqs.insert(n.outputs[0]);
  }
  return seqs;
}

// Whether subgraph `g` (recursively) has a sequence op or a sequence value.
bool UsesSequences(const Graph& g) {
  if (!SequenceValues(g).empty()) return true;
  for (const std::string& out : g.outputs)
    if (const Value* v = g.Find(out))
      if (v->is_sequence) return true;
  for (const Node& n : g.nodes) {
    if (IsSequenceOp(n)) return true;
    for (const auto& sub : n.subgraphs)
      if (UsesSequences(*sub.second)) return true;
  }
  return false;
}

// Sequences that cannot be lowered run on sequence values, in the main graph
// and in If, Loop and Scan subgraphs (carried, captured, returned; SequenceMap
// is a Loop by then, ExpandSequenceMap). Scan's own inputs and outputs are
// tensors (the spec's V), which Scan's inference checks; its body may read
// sequences it captures and make its own.
Status CheckRuntimeSequences(const Graph& g, const Status& why_not_static) {
  const std::set<std::string> seqs = SequenceValues(g);
  for (const Node& n : g.nodes) {
    if (n.subgraphs.empty()) continue;
    if (n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan")) {
      for (const auto& sub : n.subgraphs)
        QF_RETURN_IF_ERROR(CheckRuntimeSequences(*sub.second, why_not_static));
      continue;
    }
    std::string what;
    for (const std::string& in : n.inputs)
      if (seqs.count(in)) what = "reads sequence '" + in + "'";
    for (const auto& sub : n.subgraphs) {
      std::set<std::string> names;
      CollectNames(*sub.second, &names);
      for (const std::string& s : seqs)
        if (names.count(s)) what = "a subgraph reads sequence '" + s + "'";
      if (what.empty() && UsesSequences(*sub.second))
        what = "subgraph '" + sub.first + "' uses sequences";
    }
    if (!what.empty())
      return Status(
          StatusCode::kUnsupported,
          g.source + ": " + n.Label() + ": " + what +
              "; sequences inside this operator's subgraphs are not supported" +
              (why_not_static.message().empty() ? "" : " (" + why_not_static.message() + ")"));
  }
  return Status::Ok();
}

}  // namespace

Status LowerSequences(Graph* g, std::string* kept_why) {
  bool any = false;
  for (const Node& n : g->nodes) any = any || IsSequenceOp(n);
  if (!any) return CheckRuntimeSequences(*g, Status::Ok());
  QF_RETURN_IF_ERROR(VerifyGraph(g));  // topological order: builders before readers
  Status st = Lowering(g).Run();
  if (st.ok() || st.code() != StatusCode::kUnsupported) return st;
  // Not known at conversion (a sequence input or output, a length that
  // depends on data): the ops stay and run on sequence values.
  QF_RETURN_IF_ERROR(CheckRuntimeSequences(*g, st));
  if (kept_why) *kept_why = st.message();
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
