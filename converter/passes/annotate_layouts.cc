// Graph inputs and outputs record their layout as their consumers and
// producers imply it: a Conv reads NCHW; a Transpose(0,3,1,2) in front of it
// means the input itself is NHWC. External shapes are never changed here.

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {

namespace {

void Mark(Value* v, Value::Layout layout, int batch, int channel) {
  v->layout = layout;
  v->batch_axis = batch;
  v->channel_axis = channel;
}

// The node producing `name`, looking through DequantizeLinear/Cast.
const Node* SpatialProducer(const Graph& g, const std::string& name, int depth = 0) {
  if (depth > 4) return nullptr;
  for (const Node& n : g.nodes) {
    if (n.outputs.empty() || n.outputs[0] != name) continue;
    if (HasTraits(n.op_type, kTraitSpatial)) return &n;
    if (n.op_type == "DequantizeLinear" || n.op_type == "QuantizeLinear" || n.op_type == "Cast")
      return SpatialProducer(g, n.input(0), depth + 1);
    if (n.op_type == "Transpose") return &n;
    return nullptr;
  }
  return nullptr;
}

}  // namespace

Status AnnotateLayouts(Graph* g) {
  for (const std::string& in : g->inputs) {
    Value* v = g->Find(in);
    if (!v || !v->rank_known || v->shape.size() < 3) continue;
    const bool rank4 = v->shape.size() == 4;
    if (FirstConv(*g, in)) {
      Mark(v, rank4 ? Value::Layout::kNCHW : Value::Layout::kPlain, 0, 1);
      continue;
    }
    for (const Node& n : g->nodes) {
      if (n.op_type != "Transpose" || n.inputs.empty() || n.inputs[0] != in || !rank4) continue;
      if (n.attrs.GetInts("perm") == std::vector<int64_t>{0, 3, 1, 2} &&
          FirstConv(*g, n.outputs[0]))
        Mark(v, Value::Layout::kNHWC, 0, 3);
    }
  }
  for (const std::string& out : g->outputs) {
    Value* v = g->Find(out);
    if (!v || !v->rank_known || v->shape.size() < 3) continue;
    const Node* p = SpatialProducer(*g, out);
    if (!p) continue;
    if (p->op_type == "Transpose") {
      if (v->shape.size() == 4 && p->attrs.GetInts("perm") == std::vector<int64_t>{0, 2, 3, 1} &&
          SpatialProducer(*g, p->input(0)))
        Mark(v, Value::Layout::kNHWC, 0, 3);
      continue;
    }
    Mark(v, v->shape.size() == 4 ? Value::Layout::kNCHW : Value::Layout::kPlain, 0, 1);
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
