// Input-shape overrides at conversion: whole shapes (--input-shape) and
// symbolic dims by name (--dim batch=4), checked against what the model fixes
// and against the first Conv that reads each input, so that a batch/channel
// swap is named instead of surfacing as a shape error deep in the graph.
#include <algorithm>
#include <cstring>

#include "converter/passes/passes.h"
#include "core/op.h"
#include "core/shape_util.h"

namespace qfold {
namespace conv {

namespace {

Status Bad(const Graph& g, const std::string& msg) {
  return Status(StatusCode::kInvalidArgument, g.source + ": " + msg);
}

std::string InputList(const Graph& g) {
  std::string s;
  for (const std::string& in : g.inputs) {
    const Value* v = g.Find(in);
    s += (s.empty() ? "'" : ", '") + in + "' " + (v ? ShapeToString(v->shape) : "");
  }
  return s;
}

// Channels the Conv needs at axis 1: weight dim 1 times group.
int64_t ConvInputChannels(const Graph& g, const Node& conv) {
  const OpDef* def = FindOp(conv.op_type);
  if (!def || def->weight_input < 0) return -1;
  const std::string& w_name = conv.input(size_t(def->weight_input));
  const Value* w = g.Find(w_name);
  // A QDQ weight: the DequantizeLinear's constant input carries the shape.
  if (w && !w->is_constant()) {
    for (const Node& n : g.nodes)
      if (n.op_type == "DequantizeLinear" && !n.outputs.empty() && n.outputs[0] == w_name)
        w = g.Find(n.input(0));
  }
  if (!w || !w->rank_known || w->shape.size() < 2 || w->shape[1] < 0) return -1;
  return w->shape[1] * conv.attrs.GetInt("group", 1);
}

// Checks a user-given shape for `input` against its first Conv.
Status CheckAgainstConv(const Graph& g, const std::string& input, const Shape& given,
                        const std::string& origin) {
  const Node* conv = FirstConv(g, input);
  if (!conv || given.size() < 3) return Status::Ok();
  const int64_t need = ConvInputChannels(g, *conv);
  if (need < 0 || given[1] == need) return Status::Ok();
  std::string msg = "input '" + input + "' " + origin + " as " + ShapeToString(given) + ", but " +
                    conv->Label() + " needs " + std::to_string(need) +
                    " channels at axis 1 (NCHW), which holds " + std::to_string(given[1]);
  for (size_t a = 0; a < given.size(); ++a) {
    if (a == 1 || given[a] != need) continue;
    Shape fixed = given;
    std::swap(fixed[a], fixed[1]);
    msg += "; axes " + std::to_string(a) + " and 1 look swapped: did you mean " +
           ShapeToString(fixed) + "?";
    break;
  }
  return Bad(g, msg);
}

}  // namespace

const Node* FirstConv(const Graph& g, const std::string& name, int depth) {
  if (depth > 4) return nullptr;
  for (const Node& n : g.nodes) {
    if (n.inputs.empty() || n.inputs[0] != name || !n.domain.empty()) continue;
    // By name, not by traits: ConvTranspose's weight holds its input channels
    // at axis 0, and counting QfConvDequant (made by the converter) would
    // change the layouts AnnotateLayouts records.
    if (n.op_type == "Conv" || n.op_type == "QLinearConv") return &n;
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear" || n.op_type == "Cast")
      if (const Node* c = FirstConv(g, n.outputs[0], depth + 1)) return c;
  }
  return nullptr;
}

Status ApplyInputOverrides(Graph* g, const std::map<std::string, Shape>& shapes,
                           const std::map<std::string, int64_t>& dims) {
  for (const auto& kv : shapes) {
    if (std::find(g->inputs.begin(), g->inputs.end(), kv.first) == g->inputs.end())
      return Bad(*g, "--input-shape names '" + kv.first +
                         "', which is not a graph input; inputs: " + InputList(*g));
    Value& v = g->values[kv.first];
    const Shape& given = kv.second;
    for (int64_t d : given)
      if (d < 0) return Bad(*g, "--input-shape for '" + kv.first + "' has a negative dim");
    if (v.rank_known && v.shape.size() != given.size())
      return Bad(*g, "input '" + kv.first + "' is declared " + ShapeToString(v.shape) + " (rank " +
                         std::to_string(v.shape.size()) + "), --input-shape gives " +
                         ShapeToString(given) + " (rank " + std::to_string(given.size()) + ")");
    for (size_t a = 0; v.rank_known && a < given.size(); ++a)
      if (v.shape[a] >= 0 && v.shape[a] != given[a]) {
        QF_RETURN_IF_ERROR(CheckAgainstConv(*g, kv.first, given, "is given by --input-shape"));
        return Bad(*g, "input '" + kv.first + "' is declared " + ShapeToString(v.shape) +
                           " with axis " + std::to_string(a) + " fixed at " +
                           std::to_string(v.shape[a]) + ", --input-shape gives " +
                           ShapeToString(given));
      }
    QF_RETURN_IF_ERROR(CheckAgainstConv(*g, kv.first, given, "is given by --input-shape"));
    v.shape = given;
    v.rank_known = true;
    v.dim_names.assign(given.size(), "");
  }
  for (const auto& kv : dims) {
    bool used = false;
    std::vector<std::string> names;
    for (const std::string& in : g->inputs) {
      Value& v = g->values[in];
      for (size_t a = 0; a < v.dim_names.size(); ++a) {
        if (!v.dim_names[a].empty()) names.push_back(v.dim_names[a]);
        if (v.dim_names[a] != kv.first) continue;
        if (kv.second < 0) return Bad(*g, "--dim " + kv.first + " must not be negative");
        v.shape[a] = kv.second;
        v.dim_names[a].clear();
        used = true;
      }
    }
    if (!used) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return Bad(*g, "--dim names '" + kv.first + "', which no input uses; symbolic dims: " +
                         (list.empty() ? std::string("none") : list));
    }
  }
  // Shapes completed by --dim are checked against the first Conv too.
  if (!dims.empty())
    for (const std::string& in : g->inputs) {
      const Value& v = g->values[in];
      bool concrete = v.rank_known;
      for (int64_t d : v.shape) concrete = concrete && d >= 0;
      if (concrete && !shapes.count(in))
        QF_RETURN_IF_ERROR(CheckAgainstConv(*g, in, v.shape, "resolves with --dim"));
    }
  return Status::Ok();
}

Status ApplyInputLayouts(Graph* g, const std::map<std::string, std::string>& layouts) {
  for (const auto& kv : layouts) {
    if (std::find(g->inputs.begin(), g->inputs.end(), kv.first) == g->inputs.end())
      return Bad(*g, "--input-layout names '" + kv.first +
                         "', which is not a graph input; inputs: " + InputList(*g));
    Value& v = g->values[kv.first];
    if (kv.second != "NHWC" && kv.second != "NCHW")
      return Bad(*g, "--input-layout " + kv.first + "=" + kv.second + ": expected NCHW or NHWC");
    if (!v.rank_known || v.shape.size() != 4)
      return Bad(*g, "--input-layout needs a 4-D input; '" + kv.first + "' is " +
                         (v.rank_known ? ShapeToString(v.shape) : std::string("of unknown rank")));
    if (kv.second == "NCHW") continue;  // the model's own layout
    // The caller feeds NHWC: the graph input becomes NHWC and one Transpose
    // restores the NCHW tensor every consumer expects.
    const std::string nchw = g->UniqueName(kv.first + "_nchw");
    Value inner = v;
    inner.name = nchw;
    inner.dim_names.clear();
    g->values[nchw] = inner;
    for (Node& n : g->nodes)
      for (std::string& s : n.inputs)
        if (s == kv.first) s = nchw;
    Node t;
    t.op_type = "Transpose";
    t.name = kv.first + "_to_nchw";
    t.inputs = {kv.first};
    t.outputs = {nchw};
    t.attrs.SetInts("perm", {0, 3, 1, 2});
    g->nodes.insert(g->nodes.begin(), std::move(t));
    Shape s = v.shape;
    v.shape = {s[0], s[2], s[3], s[1]};
    if (v.dim_names.size() == 4)
      v.dim_names = {v.dim_names[0], v.dim_names[2], v.dim_names[3], v.dim_names[1]};
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
