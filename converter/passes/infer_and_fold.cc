#include <cstring>
#include <memory>

#include "converter/passes/passes.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"

namespace qfold {
namespace conv {

namespace {

// Folding a node whose result is huge would bloat the file with what one
// cheap op computes at run time (ConstantOfShape, Expand, Tile...).
constexpr size_t kMaxFoldedBytes = size_t(16) << 20;
// Most elements one value may have (as the reader allows for constants).
constexpr int64_t kMaxElements = int64_t(1) << 34;

Tensor ToTensor(const Value& v) {
  Tensor t;
  t.name = v.name;
  t.dtype = v.dtype;
  t.rank_known = v.rank_known;
  t.shape = v.shape;
  t.is_sequence = v.is_sequence;
  t.data = v.data ? const_cast<uint8_t*>(v.data->data()) : nullptr;
  // An empty constant still has a known (empty) value.
  static uint8_t empty_marker;
  if (v.data && v.data->empty()) t.data = &empty_marker;
  return t;
}

}  // namespace

Status InferAndFold(Graph* g, bool fold, bool keep_dequantize) {
  // Folding runs the reference kernels: the fast float kernels sum in another
  // order on each ISA, and a .qfm should not depend on the machine that made it.
  const kernels::KernelConfig& reference_kernels = kernels::ReferenceKernelConfig();
  std::vector<Node> kept;
  for (Node& n : g->nodes) {
    const OpDef* def = FindOp(n.op_type);
    if (!def)
      return Status(StatusCode::kUnsupported, g->source + ": " + n.Label() + " is not supported");
    int n_in = int(n.inputs.size());
    if (n_in < def->min_inputs || n_in > def->max_inputs)
      return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + " has " +
                                                   std::to_string(n_in) + " inputs, expected " +
                                                   std::to_string(def->min_inputs) + ".." +
                                                   std::to_string(def->max_inputs));
    // Kernels rely on this: only inputs past min_inputs may be omitted.
    for (int i = 0; i < def->min_inputs; ++i)
      if (n.inputs[size_t(i)].empty())
        return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() +
                                                     ": required input " + std::to_string(i) +
                                                     " is omitted (empty name)");
    // Kernels write output 0 unless the op says it may be omitted.
    if (!def->output0_optional && (n.outputs.empty() || n.outputs[0].empty()))
      return Status(StatusCode::kInvalidModel,
                    g->source + ": " + n.Label() + ": required output 0 is omitted (empty name)");
    std::vector<Tensor> ins(n.inputs.size()), outs(n.outputs.size());
    KernelContext ctx;
    ctx.kernels = &reference_kernels;
    ctx.op_type = &n.op_type;
    ctx.op_name = &n.name;
    ctx.attrs = &n.attrs;
    bool all_const = true, inputs_known = true, has_sequence = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      const Value* v = g->Find(n.inputs[i]);
      if (!v || v->dtype == DType::kUndefined)
        return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": input '" +
                                                     n.inputs[i] + "' has no known type");
      ins[i] = ToTensor(*v);
      // If/Loop pass sequences to their subgraphs (Scan refuses them there).
      if (v->is_sequence && !(def->traits & kTraitSequence) && !def->has_subgraphs)
        return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": input '" +
                                                     n.inputs[i] +
                                                     "' is a sequence; this op takes tensors");
      has_sequence = has_sequence || v->is_sequence;
      all_const = all_const && v->is_constant();
      inputs_known = inputs_known && ins[i].shape_known();
      ctx.inputs.push_back(&ins[i]);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      outs[i].name = n.outputs[i];
      ctx.outputs.push_back(n.outputs[i].empty() ? nullptr : &outs[i]);
    }
    if (def->has_subgraphs) {  // If/Loop/Scan: inferred through their subgraphs, never folded
      QF_RETURN_IF_ERROR(InferSubgraphNode(g, &n, fold));
      kept.push_back(std::move(n));
      continue;
    }
    Status st = def->infer(ctx);
    if (!st.ok()) return Status(st.code(), g->source + ": " + st.message());

    for (Tensor* o : ctx.outputs) {
      if (!o || !o->rank_known) continue;
      // Known dims alone must stay countable, so no later size arithmetic overflows.
      Shape known;
      for (int64_t d : o->shape) known.push_back(d < 0 ? 1 : d);
      int64_t count = 0;
      if (o->rank() > kMaxRank || !CheckedNumel(known, &count) || count > kMaxElements)
        return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": output '" +
                                                     o->name + "' gets shape " +
                                                     ShapeToString(o->shape) + ", more than " +
                                                     std::to_string(kMaxElements) + " elements");
    }
    bool outputs_known = true;
    size_t out_bytes = 0;
    for (Tensor* o : ctx.outputs)
      if (o) {
        // Sequence values exist only at run time: nothing they touch folds.
        has_sequence = has_sequence || o->is_sequence;
        outputs_known = outputs_known && o->shape_known();
        if (o->shape_known()) out_bytes += dtype_storage_bytes(o->dtype, o->numel());
      }
    bool keep = keep_dequantize && n.op_type == "DequantizeLinear";
    bool foldable = fold && !keep && !has_sequence && outputs_known &&
                    out_bytes <= kMaxFoldedBytes &&
                    ((all_const && inputs_known) || (def->shape_only && inputs_known));
    std::vector<std::shared_ptr<std::vector<uint8_t>>> storage;
    if (foldable) {
      for (Tensor* o : ctx.outputs) {
        if (!o) continue;
        storage.push_back(
            std::make_shared<std::vector<uint8_t>>(dtype_storage_bytes(o->dtype, o->numel()) + 1));
        o->data = storage.back()->data();
      }
      st = def->run(ctx);
      if (!st.ok()) return Status(st.code(), g->source + ": folding " + st.message());
    }
    size_t s = 0;
    for (Tensor* o : ctx.outputs) {
      if (!o) continue;
      Value& v = g->values[o->name];
      // A declared graph output type is advisory, but not its kind: a caller
      // expecting a tensor cannot read a sequence.
      if (v.dtype != DType::kUndefined && v.is_sequence != o->is_sequence &&
          g->IsGraphOutput(o->name))
        return Status(StatusCode::kInvalidModel,
                      g->source + ": " + n.Label() + ": graph output '" + o->name +
                          "' is declared a " + (v.is_sequence ? "sequence" : "tensor") +
                          " but the op makes a " + (o->is_sequence ? "sequence" : "tensor"));
      v.name = o->name;
      v.dtype = o->dtype;
      v.rank_known = o->rank_known;
      v.shape = o->shape;
      v.is_sequence = o->is_sequence;
      if (foldable) {
        storage[s]->resize(storage[s]->size() - 1);
        v.data = storage[s++];
      }
    }
    if (!foldable) kept.push_back(std::move(n));
  }
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
