// Reshape, Flatten, Squeeze, Unsqueeze: the data is unchanged, only the shape
// differs, so a run is a plain byte copy, or nothing when the planner gave the
// output the input's buffer (OpDef::output0_views_input0).
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

Status RunCopy(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (y->data != x->data && x->bytes() > 0) std::memcpy(y->data, x->data, x->bytes());
  return Status::Ok();
}

// Reads the axes of Squeeze/Unsqueeze (input 1). *known is false when the
// values are not available yet (converter).
Status ReadAxesInput(KernelContext& ctx, std::vector<int64_t>* axes, bool* known) {
  const Tensor* a = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, a, "axes"));
  if (a->rank_known && a->rank() > 1) return ctx.Invalid("axes must be 1-D");
  *known = ReadInts(a, axes);
  return Status::Ok();
}

// Length of a 1-D value input from its shape, or -1 when unknown.
int64_t Length1D(const Tensor* t) {
  if (!t->rank_known) return -1;
  if (t->rank() == 0) return 1;
  return t->shape[0];
}

// ---- Reshape ----

Status InferReshape(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* s = ctx.input(1);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, s, "shape"));
  if (s->rank_known && s->rank() != 1) return ctx.Invalid("shape must be 1-D");
  bool allowzero = ctx.attr().GetInt("allowzero", 0) != 0;
  std::vector<int64_t> req;
  if (!ReadInts(s, &req)) {
    int64_t n = Length1D(s);
    if (n > kMaxRank)
      return ctx.Invalid("shape has " + std::to_string(n) + " entries, more than rank " +
                         std::to_string(kMaxRank));
    if (n < 0)
      SetOutputUnknownRank(y, x->dtype);
    else
      SetOutput(y, x->dtype, Shape(size_t(n), kUnknownDim));
    return Status::Ok();
  }
  Shape out(req.size());
  int infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < req.size(); ++i) {
    int64_t v = req[i];
    if (v == -1) {
      if (infer_at >= 0) return ctx.Invalid("shape has more than one -1");
      infer_at = int(i);
      out[i] = kUnknownDim;
    } else if (v < -1) {
      return ctx.Invalid("shape value " + std::to_string(v) + " is negative");
    } else if (v == 0 && !allowzero) {
      if (!x->rank_known) {
        out[i] = kUnknownDim;
      } else if (int(i) >= x->rank()) {
        return ctx.Invalid("shape value 0 at index " + std::to_string(i) +
                           " copies a dim the input " + ShapeToString(x->shape) + " lacks");
      } else {
        out[i] = x->shape[i];
      }
    } else {
      if (v == 0) has_zero = true;
      out[i] = v;
    }
  }
  if (has_zero && infer_at >= 0) return ctx.Invalid("shape has both 0 and -1 with allowzero=1");
  int64_t in_numel = -1;
  if (x->shape_known()) in_numel = x->numel();
  int64_t rest = 1;
  bool rest_known = true;
  for (size_t i = 0; i < out.size(); ++i) {
    if (int(i) == infer_at) continue;
    if (out[i] < 0)
      rest_known = false;
    else if (__builtin_mul_overflow(rest, out[i], &rest))
      return ctx.Invalid("shape " + ShapeToString(out) + " has more elements than int64 holds");
  }
  if (infer_at >= 0 && in_numel >= 0 && rest_known) {
    if (rest == 0) {
      if (in_numel != 0)
        return ctx.Invalid("cannot infer the -1 dim of a zero-size shape for input " +
                           ShapeToString(x->shape));
      out[infer_at] = 0;
    } else {
      if (in_numel % rest != 0)
        return ctx.Invalid("cannot reshape " + ShapeToString(x->shape) + " to " +
                           ShapeToString(Shape(req.begin(), req.end())));
      out[infer_at] = in_numel / rest;
    }
  } else if (infer_at < 0 && in_numel >= 0 && rest_known && rest != in_numel) {
    return ctx.Invalid("cannot reshape " + ShapeToString(x->shape) + " to " + ShapeToString(out));
  }
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

// ---- Flatten ----

Status InferFlatten(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  int64_t axis = ctx.attr().GetInt("axis", 1);
  if (!x->rank_known) {
    SetOutput(ctx.output(0), x->dtype, {kUnknownDim, kUnknownDim});
    return Status::Ok();
  }
  int r = x->rank();
  if (axis < -r || axis > r)
    return ctx.Invalid("axis " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(r));
  int a = int(axis < 0 ? axis + r : axis);
  SetOutput(ctx.output(0), x->dtype, {DimProduct(x->shape, 0, a), DimProduct(x->shape, a, r)});
  return Status::Ok();
}

// ---- Squeeze ----

Status InferSqueeze(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  std::vector<int64_t> axes;
  bool known = false;
  if (ctx.input(1)) QF_RETURN_IF_ERROR(ReadAxesInput(ctx, &axes, &known));
  // An empty axes tensor means "no axes" (as in ONNX Runtime): squeeze every 1.
  if (!ctx.input(1) || (known && axes.empty())) {
    if (!x->shape_known()) {
      SetOutputUnknownRank(y, x->dtype);
      return Status::Ok();
    }
    Shape out;
    for (int64_t d : x->shape)
      if (d != 1) out.push_back(d);
    SetOutput(y, x->dtype, std::move(out));
    return Status::Ok();
  }
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  int r = x->rank();
  if (!known) {
    int64_t n = Length1D(ctx.input(1));
    if (n < 0 || n > r)
      SetOutputUnknownRank(y, x->dtype);
    else
      SetOutput(y, x->dtype, Shape(size_t(r - n), kUnknownDim));
    return Status::Ok();
  }
  std::vector<bool> drop(size_t(r), false);
  for (int64_t a : axes) {
    int n;
    if (!NormalizeAxis(a, r, &n))
      return ctx.Invalid("axis " + std::to_string(a) + " out of range for rank " +
                         std::to_string(r));
    if (drop[n]) return ctx.Invalid("axis " + std::to_string(a) + " repeated");
    if (x->shape[n] >= 0 && x->shape[n] != 1)
      return ctx.Invalid("cannot squeeze axis " + std::to_string(a) + " of size " +
                         std::to_string(x->shape[n]));
    drop[n] = true;
  }
  Shape out;
  for (int i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(x->shape[i]);
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

// ---- Unsqueeze ----

Status InferUnsqueeze(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  if (!ctx.input(1)) return ctx.Invalid("axes input is required");
  std::vector<int64_t> axes;
  bool known = false;
  QF_RETURN_IF_ERROR(ReadAxesInput(ctx, &axes, &known));
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  if (!known) {
    int64_t n = Length1D(ctx.input(1));
    if (n > kMaxRank)
      return ctx.Invalid("axes has " + std::to_string(n) + " entries, more than rank " +
                         std::to_string(kMaxRank));
    if (n < 0)
      SetOutputUnknownRank(y, x->dtype);
    else
      SetOutput(y, x->dtype, Shape(size_t(x->rank() + n), kUnknownDim));
    return Status::Ok();
  }
  int r = x->rank() + int(axes.size());
  if (r > kMaxRank) return ctx.Unsupported("output rank " + std::to_string(r) + " is too large");
  std::vector<bool> inserted(size_t(r), false);
  for (int64_t a : axes) {
    int n;
    if (!NormalizeAxis(a, r, &n))
      return ctx.Invalid("axis " + std::to_string(a) + " out of range for output rank " +
                         std::to_string(r));
    if (inserted[n]) return ctx.Invalid("axis " + std::to_string(a) + " repeated");
    inserted[n] = true;
  }
  Shape out(static_cast<size_t>(r));
  size_t src = 0;
  for (int i = 0; i < r; ++i) out[i] = inserted[i] ? 1 : x->shape[src++];
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

}  // namespace

// A view of input 0: the planner may share its buffer (RunCopy then copies nothing).
OpDef View(OpDef def) {
  def.traits = kTraitMovesElements;
  def.output0_views_input0 = true;
  return def;
}

const OpDef& OpDef_Reshape() {
  static const OpDef def = View({"Reshape", InferReshape, RunCopy,
                                 /*value_inputs=*/1u << 1,
                                 /*shape_only=*/false,
                                 /*min_inputs=*/2,
                                 /*max_inputs=*/2});
  return def;
}

const OpDef& OpDef_Flatten() {
  static const OpDef def = View({"Flatten", InferFlatten, RunCopy, 0, false, 1, 1});
  return def;
}

const OpDef& OpDef_Squeeze() {
  static const OpDef def = View({"Squeeze", InferSqueeze, RunCopy, 1u << 1, false, 1, 2});
  return def;
}

const OpDef& OpDef_Unsqueeze() {
  static const OpDef def = View({"Unsqueeze", InferUnsqueeze, RunCopy, 1u << 1, false, 2, 2});
  return def;
}

}  // namespace qfold
