// ONNX optionals: Optional wraps a tensor or sequence (or makes none of a
// given type), OptionalHasElement tells whether one holds a value,
// OptionalGetElement unwraps it. At run time an optional is boxed like a
// sequence (core/sequence.h: SequenceValue::none; an optional tensor is the
// value's single element). The converter folds what it can decide statically
// (converter/passes/infer_and_fold.cc): these ops run only where an optional
// crosses a graph input, an If branch or a Loop iteration.
#include <cstring>
#include <string>

#include "core/op.h"
#include "core/sequence.h"
#include "ops/shape_common.h"

namespace qfold {
namespace {

// Boxed values exist only at run time; the converter infers without them.
Status NeedValue(const KernelContext& ctx, const Tensor& t) {
  if (!t.sequence)
    return ctx.Unsupported("'" + t.name + "' has no value: optionals run in a session");
  return Status::Ok();
}

// --- Optional --------------------------------------------------------------

Status InferOptional(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  const Tensor* x = ctx.input(0);
  y->is_optional = true;
  if (x) {
    if (x->is_optional) return ctx.Invalid("input '" + x->name + "' is already an optional");
    y->is_sequence = x->is_sequence;
    y->dtype = x->dtype;
    y->rank_known = x->rank_known;
    y->shape = x->shape;
    return Status::Ok();
  }
  // No input: a none of the type the converter kept from the `type` attribute.
  const AttrMap& a = ctx.attr();
  if (!a.Has("_type_elem"))
    return ctx.Invalid("has neither an input nor a 'type' attribute (of a tensor or a sequence)");
  bool known = false;
  const int64_t onnx = a.GetInt("_type_elem", 0);
  const DType dt = DTypeFromOnnxNumber(onnx, &known);
  if (!known) return ctx.Invalid("type's element type " + std::to_string(onnx) + " is not ONNX's");
  if (dt == DType::kUndefined)
    return ctx.Unsupported("optionals of ONNX type " + std::to_string(onnx) + " are not supported");
  y->dtype = dt;
  y->is_sequence = a.GetInt("_type_sequence", 0) != 0;
  y->rank_known = a.Has("_type_shape");
  y->shape = y->rank_known ? a.GetInts("_type_shape") : Shape();
  if (y->rank() > kMaxRank) return ctx.Invalid("type has rank " + std::to_string(y->rank()));
  for (int64_t& d : y->shape)
    if (d < 0) d = kUnknownDim;
  return Status::Ok();
}

Status RunOptional(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(NeedValue(ctx, *y));
  SequenceValue& v = *y->sequence;
  if (!x) {
    v.elements.clear();
    v.none = true;
    return Status::Ok();
  }
  if (x->is_sequence) {
    QF_RETURN_IF_ERROR(NeedValue(ctx, *x));
    // Elements are immutable: the optional shares them.
    if (&v != x->sequence) v = *x->sequence;
  } else {
    SequenceElement e;
    if (!MakeSequenceElement(x->dtype, x->shape, x->data, x->bytes(), &e))
      return ctx.Error(StatusCode::kIoError,
                       "out of memory for a value of " + std::to_string(x->bytes()) + " bytes");
    v.elements.assign(1, std::move(e));
  }
  v.none = false;
  return Status::Ok();
}

// --- OptionalHasElement ----------------------------------------------------

Status InferOptionalHasElement(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  y->dtype = DType::kBool;
  y->rank_known = true;
  y->shape.clear();
  y->is_sequence = false;
  y->is_optional = false;
  return Status::Ok();
}

Status RunOptionalHasElement(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  bool has = x != nullptr;  // an omitted input is none
  if (x && x->is_optional) {
    QF_RETURN_IF_ERROR(NeedValue(ctx, *x));
    has = !x->sequence->none;
  }
  *static_cast<uint8_t*>(ctx.output(0)->data) = has ? 1 : 0;
  return Status::Ok();
}

// --- OptionalGetElement ----------------------------------------------------

// The element of a present optional tensor; an error naming the node when none.
Status PresentTensor(const KernelContext& ctx, const Tensor& x, const SequenceElement** out) {
  QF_RETURN_IF_ERROR(NeedValue(ctx, x));
  if (x.sequence->none)
    return ctx.Invalid("optional '" + x.name + "' is none: it has no element to get");
  if (!x.is_sequence && x.sequence->elements.size() != 1)
    return ctx.Invalid("optional tensor '" + x.name + "' holds " +
                       std::to_string(x.sequence->elements.size()) + " values, not one");
  *out = x.is_sequence ? nullptr : &x.sequence->elements[0];
  return Status::Ok();
}

Status InferOptionalGetElement(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->is_optional = false;
  y->is_sequence = x->is_sequence;
  y->dtype = x->dtype;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  // At run time the value tells the tensor's exact shape (and whether it is none).
  if (x->is_optional && x->sequence) {
    const SequenceElement* e = nullptr;
    QF_RETURN_IF_ERROR(PresentTensor(ctx, *x, &e));
    if (e) {
      if (e->dtype != x->dtype)
        return ctx.Invalid("optional '" + x->name + "' holds " + dtype_name(e->dtype) + ", not " +
                           dtype_name(x->dtype));
      y->rank_known = true;
      y->shape = e->shape;
    }
  }
  return Status::Ok();
}

Status RunOptionalGetElement(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (x->is_sequence) {  // a sequence, or an optional one: share the elements
    QF_RETURN_IF_ERROR(NeedValue(ctx, *x));
    QF_RETURN_IF_ERROR(NeedValue(ctx, *y));
    if (x->is_optional && x->sequence->none)
      return ctx.Invalid("optional '" + x->name + "' is none: it has no element to get");
    if (y->sequence != x->sequence) *y->sequence = *x->sequence;
    y->sequence->none = false;
    return Status::Ok();
  }
  const void* src = x->data;
  size_t bytes = x->bytes();
  if (x->is_optional) {
    const SequenceElement* e = nullptr;
    QF_RETURN_IF_ERROR(PresentTensor(ctx, *x, &e));
    src = e->data.get();
    bytes = e->bytes;
  }
  if (bytes != y->bytes())
    return ctx.Invalid("output '" + y->name + "' was planned for " + std::to_string(y->bytes()) +
                       " bytes, the value has " + std::to_string(bytes));
  if (bytes && y->data != src) std::memcpy(y->data, src, bytes);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Optional() {
  static const OpDef def = [] {
    OpDef d{"Optional",           InferOptional,    RunOptional,
            /*value_inputs=*/0,
            /*shape_only=*/false, /*min_inputs=*/0, /*max_inputs=*/1};
    d.traits = kTraitSequence | kTraitOptional;
    return d;
  }();
  return def;
}

const OpDef& OpDef_OptionalHasElement() {
  static const OpDef def = [] {
    OpDef d{"OptionalHasElement", InferOptionalHasElement, RunOptionalHasElement,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/0,
            /*max_inputs=*/1};
    d.traits = kTraitSequence | kTraitOptional;
    return d;
  }();
  return def;
}

const OpDef& OpDef_OptionalGetElement() {
  static const OpDef def = [] {
    OpDef d{"OptionalGetElement", InferOptionalGetElement, RunOptionalGetElement,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/1,
            /*max_inputs=*/1};
    d.traits = kTraitSequence | kTraitOptional;
    return d;
  }();
  return def;
}

}  // namespace qfold
