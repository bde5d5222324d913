// ScatterElements and ScatterND: copy the data, then write (or combine with
// reduction add/mul/max/min) each update at the position its index selects.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Status GetReduction(const KernelContext& ctx, DType dt, Reduction* red) {
  std::string s = ctx.attr().GetString("reduction", "none");
  if (s == "none")
    *red = Reduction::kNone;
  else if (s == "add")
    *red = Reduction::kAdd;
  else if (s == "mul")
    *red = Reduction::kMul;
  else if (s == "max")
    *red = Reduction::kMax;
  else if (s == "min")
    *red = Reduction::kMin;
  else
    return ctx.Unsupported("reduction '" + s + "' is not supported");
  if (*red != Reduction::kNone &&
      (dt == DType::kBool || dt == DType::kFloat16 || dt == DType::kBFloat16))
    return ctx.Unsupported("reduction '" + s + "' on " + dtype_name(dt) + " is not supported");
  return Status::Ok();
}

int64_t IndexAt(const Tensor* t, int64_t i) {
  return t->dtype == DType::kInt64 ? t->ptr<int64_t>()[i] : int64_t(t->ptr<int32_t>()[i]);
}

Status FixIndex(const KernelContext& ctx, int64_t* idx, int64_t dim) {
  int64_t v = *idx < 0 ? *idx + dim : *idx;
  if (v < 0 || v >= dim)
    return ctx.Error(
        StatusCode::kInvalidArgument,
        "index " + std::to_string(*idx) + " out of range for a dim of " + std::to_string(dim));
  *idx = v;
  return Status::Ok();
}

template <class T>
void Combine(Reduction red, T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (red) {
      case Reduction::kNone:
        dst[i] = src[i];
        break;
      case Reduction::kAdd:
        dst[i] = T(dst[i] + src[i]);
        break;
      case Reduction::kMul:
        dst[i] = T(dst[i] * src[i]);
        break;
      case Reduction::kMax:
        dst[i] = std::max(dst[i], src[i]);
        break;
      case Reduction::kMin:
        dst[i] = std::min(dst[i], src[i]);
        break;
    }
  }
}

// Writes n elements of `src` at element offset `at` of y, per the reduction.
void Apply(Reduction red, DType dt, uint8_t* y, const uint8_t* src, int64_t at, int64_t n) {
  size_t esz = dtype_size(dt);
  if (red == Reduction::kNone) {
    std::memcpy(y + at * int64_t(esz), src, size_t(n) * esz);
    return;
  }
  QF_DISPATCH_NUMERIC(
      dt, break, Combine<T>(red, reinterpret_cast<T*>(y) + at, reinterpret_cast<const T*>(src), n));
}

Status CommonChecks(KernelContext& ctx, Reduction* red) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  const Tensor* upd = ctx.input(2);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, idx, "indices"));
  if (upd->dtype != x->dtype)
    return ctx.Invalid(std::string("updates dtype ") + dtype_name(upd->dtype) +
                       " differs from data dtype " + dtype_name(x->dtype));
  return GetReduction(ctx, x->dtype, red);
}

// ---- ScatterElements ----

Status InferScatterElements(KernelContext& ctx) {
  Reduction red;
  QF_RETURN_IF_ERROR(CommonChecks(ctx, &red));
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  const Tensor* upd = ctx.input(2);
  if (x->rank_known && idx->rank_known) {
    if (idx->rank() != x->rank()) return ctx.Invalid("indices rank differs from data rank");
    int axis;
    int64_t a = ctx.attr().GetInt("axis", 0);
    if (!NormalizeAxis(a, x->rank(), &axis))
      return ctx.Invalid("axis " + std::to_string(a) + " out of range");
  }
  if (idx->rank_known && upd->rank_known) {
    if (idx->rank() != upd->rank()) return ctx.Invalid("updates rank differs from indices rank");
    for (int d = 0; d < idx->rank(); ++d)
      if (idx->shape[d] >= 0 && upd->shape[d] >= 0 && idx->shape[d] != upd->shape[d])
        return ctx.Invalid("updates shape " + ShapeToString(upd->shape) +
                           " differs from indices shape " + ShapeToString(idx->shape));
  }
  if (x->rank_known)
    SetOutput(ctx.output(0), x->dtype, x->shape);
  else
    SetOutputUnknownRank(ctx.output(0), x->dtype);
  return Status::Ok();
}

Status RunScatterElements(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  const Tensor* upd = ctx.input(2);
  Tensor* y = ctx.output(0);
  Reduction red;
  QF_RETURN_IF_ERROR(GetReduction(ctx, x->dtype, &red));
  int r = x->rank();
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), r, &axis);
  for (int d = 0; d < r; ++d)
    if (d != axis && idx->shape[d] > x->shape[d])
      return ctx.Invalid("indices shape " + ShapeToString(idx->shape) + " exceeds data shape " +
                         ShapeToString(x->shape) + " off the axis");
  size_t esz = dtype_size(x->dtype);
  std::memcpy(y->data, x->data, x->bytes());
  std::vector<int64_t> xs = ContiguousStrides(x->shape);
  std::vector<int64_t> pos(static_cast<size_t>(r), 0);
  int64_t n = idx->numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = IndexAt(idx, i);
    QF_RETURN_IF_ERROR(FixIndex(ctx, &k, x->shape[axis]));
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += (d == axis ? k : pos[d]) * xs[d];
    Apply(red, x->dtype, y->ptr<uint8_t>(), upd->ptr<uint8_t>() + i * int64_t(esz), off, 1);
    for (int d = r - 1; d >= 0; --d) {
      if (++pos[d] < idx->shape[d]) break;
      pos[d] = 0;
    }
  }
  return Status::Ok();
}

// ---- ScatterND ----

Status InferScatterND(KernelContext& ctx) {
  Reduction red;
  QF_RETURN_IF_ERROR(CommonChecks(ctx, &red));
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  const Tensor* upd = ctx.input(2);
  if (x->rank_known && idx->rank_known && upd->rank_known) {
    if (idx->rank() < 1) return ctx.Invalid("indices must have rank >= 1");
    int64_t k = idx->shape.back();
    if (k >= 0) {
      if (k > x->rank())
        return ctx.Invalid("indices last dim " + std::to_string(k) + " exceeds data rank " +
                           std::to_string(x->rank()));
      Shape want(idx->shape.begin(), idx->shape.end() - 1);
      want.insert(want.end(), x->shape.begin() + k, x->shape.end());
      bool ok = want.size() == upd->shape.size();
      for (size_t d = 0; ok && d < want.size(); ++d)
        ok = want[d] < 0 || upd->shape[d] < 0 || want[d] == upd->shape[d];
      if (!ok)
        return ctx.Invalid("updates shape " + ShapeToString(upd->shape) + " should be " +
                           ShapeToString(want));
    }
  }
  if (x->rank_known)
    SetOutput(ctx.output(0), x->dtype, x->shape);
  else
    SetOutputUnknownRank(ctx.output(0), x->dtype);
  return Status::Ok();
}

Status RunScatterND(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  const Tensor* upd = ctx.input(2);
  Tensor* y = ctx.output(0);
  Reduction red;
  QF_RETURN_IF_ERROR(GetReduction(ctx, x->dtype, &red));
  int k = int(idx->shape.back());
  int r = x->rank();
  size_t esz = dtype_size(x->dtype);
  std::memcpy(y->data, x->data, x->bytes());
  std::vector<int64_t> xs = ContiguousStrides(x->shape);
  int64_t slice = DimProduct(x->shape, k, r);
  int64_t tuples = DimProduct(idx->shape, 0, idx->rank() - 1);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int j = 0; j < k; ++j) {
      int64_t v = IndexAt(idx, t * k + j);
      QF_RETURN_IF_ERROR(FixIndex(ctx, &v, x->shape[j]));
      off += v * xs[j];
    }
    Apply(red, x->dtype, y->ptr<uint8_t>(), upd->ptr<uint8_t>() + t * slice * int64_t(esz), off,
          slice);
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_ScatterElements() {
  static const OpDef def{
      "ScatterElements", InferScatterElements, RunScatterElements, 0, false, 3, 3};
  return def;
}

const OpDef& OpDef_ScatterND() {
  static const OpDef def{"ScatterND", InferScatterND, RunScatterND, 0, false, 3, 3};
  return def;
}

}  // namespace qfold
