// Clip: y = min(max(x, lo), hi) with optional scalar inputs lo (1) and hi (2);
// omitted bounds default to the dtype's lowest/highest value.
#include <cstdint>
#include <limits>
#include <string>

#include "core/op.h"
#include "core/shape_util.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

Status InferClip(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Tensor* x = ctx.input(0);
  if (!IsNumericDType(x->dtype)) return UnsupportedDType(ctx, x->dtype);
  for (int i = 1; i <= 2; ++i) {
    const Tensor* b = ctx.input(i);
    if (!b) continue;
    const char* what = i == 1 ? "min" : "max";
    if (b->dtype != x->dtype)
      return ctx.Invalid(std::string(what) + " dtype " + dtype_name(b->dtype) +
                         " differs from input dtype " + dtype_name(x->dtype));
    if (b->shape_known() && b->numel() != 1)
      return ctx.Invalid(std::string(what) + " must be a scalar, got shape " +
                         ShapeToString(b->shape));
  }
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  return Status::Ok();
}

template <class T>
void ClipLoop(const Tensor& x, const Tensor* lo_t, const Tensor* hi_t, Tensor& y) {
  const T lo = lo_t ? lo_t->ptr<T>()[0] : std::numeric_limits<T>::lowest();
  const T hi = hi_t ? hi_t->ptr<T>()[0] : std::numeric_limits<T>::max();
  const T* px = x.ptr<T>();
  T* py = y.ptr<T>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    // Written so NaN inputs pass through unchanged; lo > hi gives hi (numpy.clip).
    T v = px[i];
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    py[i] = v;
  }
}

Status RunClip(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  QF_DISPATCH_NUMERIC(x.dtype, return UnsupportedDType(ctx, x.dtype),
                      ClipLoop<T>(x, ctx.input(1), ctx.input(2), *ctx.output(0)));
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Clip() {
  static const OpDef def = [] {
    OpDef d{"Clip", InferClip, RunClip, 0, false, 1, 3};
    d.layout = LayoutRole::kElementwise;
    d.traits = kTraitUnaryLut | kTraitPointwise;
    return d;
  }();
  return def;
}

}  // namespace qfold
