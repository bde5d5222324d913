#include <cstring>
#include <map>
#include <memory>
#include <set>

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
  t.is_optional = v.is_optional;
  t.data = v.data ? const_cast<uint8_t*>(v.data->data()) : nullptr;
  // An empty constant still has a known (empty) value.
  static uint8_t empty_marker;
  if (v.data && v.data->empty()) t.data = &empty_marker;
  return t;
}

// What the converter knows of an optional value: made by an Optional of a
// plain value (`present`, that value's name) or an Optional without input.
struct KnownOptionals {
  std::map<std::string, std::string> present;
  std::set<std::string> none;
};

// Folds the optional ops whose answer the types already tell, so that only
// optionals crossing graph inputs, If branches or Loop iterations cost
// anything at run time: OptionalHasElement of an omitted, plain or known
// optional input becomes a constant; OptionalGetElement of a plain or known
// present value becomes that value (its readers are redirected to it).
// Returns true when node `n` is gone. Optional nodes stay (the type changes)
// and fall to dead-code removal once nothing reads them.
bool FoldOptionalNode(Graph* g, const Node& n, KnownOptionals* known,
                      std::map<std::string, std::string>* alias) {
  if (!n.domain.empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  const std::string& in = n.input(0);
  const Value* v = in.empty() ? nullptr : g->Find(in);
  if (n.op_type == "Optional") {
    if (in.empty())
      known->none.insert(n.outputs[0]);
    else if (v && !v->is_optional)
      known->present[n.outputs[0]] = in;
    return false;
  }
  const bool plain = v && v->dtype != DType::kUndefined && !v->is_optional;
  const auto present = known->present.find(in);
  if (n.op_type == "OptionalHasElement") {
    bool has = false;
    if (in.empty() || known->none.count(in))
      has = false;
    else if (plain || present != known->present.end())
      has = true;
    else
      return false;
    Value& out = g->values[n.outputs[0]];
    out = Value();
    out.name = n.outputs[0];
    out.dtype = DType::kBool;
    out.rank_known = true;
    out.data = std::make_shared<std::vector<uint8_t>>(1, uint8_t(has ? 1 : 0));
    return true;
  }
  if (n.op_type == "OptionalGetElement") {
    std::string source;
    if (plain)
      source = in;
    else if (present != known->present.end())
      source = present->second;
    else
      return false;  // none at run time is an error there, where the branch may not run
    // A graph output keeps its name: the node stays, as an Identity.
    if (g->IsGraphOutput(n.outputs[0])) return false;
    (*alias)[n.outputs[0]] = source;
    g->values.erase(n.outputs[0]);
    return true;
  }
  return false;
}

}  // namespace

Status InferAndFold(Graph* g, bool fold, bool keep_dequantize) {
  // Folding runs the reference kernels: the fast float kernels sum in another
  // order on each ISA, and a .qfm should not depend on the machine that made it.
  const kernels::KernelConfig& reference_kernels = kernels::ReferenceKernelConfig();
  std::vector<Node> kept;
  KnownOptionals known_optionals;
  std::map<std::string, std::string> alias;  // folded OptionalGetElement outputs
  for (Node& n : g->nodes) {
    for (std::string& in : n.inputs) {
      auto a = alias.find(in);
      if (a != alias.end()) in = a->second;
    }
    if (fold && FoldOptionalNode(g, n, &known_optionals, &alias)) continue;
    if (fold && n.op_type == "OptionalGetElement" && n.domain.empty()) {
      // Of a plain value, as a graph output: a copy.
      const Value* v = g->Find(n.input(0));
      const auto present = known_optionals.present.find(n.input(0));
      if (v && v->dtype != DType::kUndefined && !v->is_optional) n.op_type = "Identity";
      if (present != known_optionals.present.end()) {
        n.inputs[0] = present->second;
        n.op_type = "Identity";
      }
    }
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
      // If/Loop pass sequences and optionals to their subgraphs (Scan refuses them there).
      if (v->is_optional && !(def->traits & kTraitOptional) && !def->has_subgraphs)
        return Status(StatusCode::kInvalidModel,
                      g->source + ": " + n.Label() + ": input '" + n.inputs[i] +
                          "' is an optional; this op does not take optionals (unwrap it with "
                          "OptionalGetElement)");
      if (v->is_sequence && !(def->traits & kTraitSequence) && !def->has_subgraphs)
        return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": input '" +
                                                     n.inputs[i] +
                                                     "' is a sequence; this op takes tensors");
      has_sequence = has_sequence || v->is_sequence || v->is_optional;
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
        has_sequence = has_sequence || o->is_sequence || o->is_optional;
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
      auto kind = [](bool optional, bool sequence) {
        return std::string(optional ? "an optional " : "a ") + (sequence ? "sequence" : "tensor");
      };
      if (v.dtype != DType::kUndefined &&
          (v.is_sequence != o->is_sequence || v.is_optional != o->is_optional) &&
          g->IsGraphOutput(o->name))
        return Status(StatusCode::kInvalidModel,
                      g->source + ": " + n.Label() + ": graph output '" + o->name +
                          "' is declared " + kind(v.is_optional, v.is_sequence) +
                          " but the op makes " + kind(o->is_optional, o->is_sequence));
      v.name = o->name;
      v.dtype = o->dtype;
      v.rank_known = o->rank_known;
      v.shape = o->shape;
      v.is_sequence = o->is_sequence;
      v.is_optional = o->is_optional;
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
