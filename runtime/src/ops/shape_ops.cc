// Shape, Size, ConstantOfShape, Range: ops whose outputs are built from
// shapes or scalars rather than copied from tensor data.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

// ---- Shape (opset 15: start/end clamp into [0, rank]) ----

void ShapeRange(const KernelContext& ctx, int rank, int64_t* begin, int64_t* end) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::min<int64_t>(std::max<int64_t>(v, 0), rank);
  };
  *begin = clamp(ctx.attr().GetInt("start", 0));
  *end = clamp(ctx.attr().GetInt("end", rank));
}

Status InferShape(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x->rank_known) {
    SetOutput(ctx.output(0), DType::kInt64, {kUnknownDim});
    return Status::Ok();
  }
  int64_t b, e;
  ShapeRange(ctx, x->rank(), &b, &e);
  SetOutput(ctx.output(0), DType::kInt64, {std::max<int64_t>(e - b, 0)});
  return Status::Ok();
}

Status RunShape(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  int64_t b, e;
  ShapeRange(ctx, x->rank(), &b, &e);
  int64_t* out = ctx.output(0)->ptr<int64_t>();
  for (int64_t i = b; i < e; ++i) out[i - b] = x->shape[i];
  return Status::Ok();
}

// ---- Size ----

Status InferSize(KernelContext& ctx) {
  SetOutput(ctx.output(0), DType::kInt64, {});
  return Status::Ok();
}

Status RunSize(KernelContext& ctx) {
  *ctx.output(0)->ptr<int64_t>() = ctx.input(0)->numel();
  return Status::Ok();
}

// ---- ConstantOfShape ----

Status InferConstantOfShape(KernelContext& ctx) {
  const Tensor* s = ctx.input(0);
  const Tensor* v = ctx.input(1);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, s, "shape"));
  if (s->rank_known && s->rank() != 1) return ctx.Invalid("shape must be 1-D");
  DType dt = DType::kFloat32;
  if (v) {
    QF_RETURN_IF_ERROR(CheckByteDType(ctx, v, "value"));
    if (v->shape_known() && v->numel() != 1)
      return ctx.Invalid("value must have exactly one element, has " + std::to_string(v->numel()));
    dt = v->dtype;
  }
  std::vector<int64_t> dims;
  if (!ReadInts(s, &dims)) {
    if (s->rank_known && s->shape[0] > kMaxRank)
      return ctx.Invalid("shape has " + std::to_string(s->shape[0]) + " entries, more than rank " +
                         std::to_string(kMaxRank));
    if (s->rank_known && s->shape[0] >= 0)
      SetOutput(y, dt, Shape(size_t(s->shape[0]), kUnknownDim));
    else
      SetOutputUnknownRank(y, dt);
    return Status::Ok();
  }
  for (int64_t d : dims)
    if (d < 0) return ctx.Invalid("shape has negative dim " + std::to_string(d));
  SetOutput(y, dt, Shape(dims.begin(), dims.end()));
  return Status::Ok();
}

Status RunConstantOfShape(KernelContext& ctx) {
  const Tensor* v = ctx.input(1);
  Tensor* y = ctx.output(0);
  size_t esz = dtype_size(y->dtype);
  int64_t n = y->numel();
  uint8_t* dst = y->ptr<uint8_t>();
  if (!v) {
    std::memset(dst, 0, size_t(n) * esz);
    return Status::Ok();
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * esz, v->data, esz);
  return Status::Ok();
}

// ---- Range ----

bool RangeDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt16 || t == DType::kInt32 ||
         t == DType::kInt64;
}

template <class T>
T ScalarAt(const Tensor* t) {
  return *t->ptr<T>();
}

// Element count per the spec: max(ceil((limit - start) / delta), 0).
template <class T>
int64_t RangeCount(T start, T limit, T delta) {
  // Counts too large for int64 saturate; the caller's size limits then refuse them.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if constexpr (std::is_floating_point_v<T>) {
    double n = std::ceil((double(limit) - double(start)) / double(delta));
    if (!(n > 0)) return 0;  // NaN too
    return n < 9.2e18 ? int64_t(n) : kMax;
  } else {
    // Unsigned arithmetic: the distance between two int64 values fits in uint64.
    int64_t s = start, l = limit, d = delta;
    uint64_t dist = 0, step = 0;
    if (d > 0) {
      if (l <= s) return 0;
      dist = uint64_t(l) - uint64_t(s), step = uint64_t(d);
    } else {
      if (s <= l) return 0;
      dist = uint64_t(s) - uint64_t(l), step = uint64_t(0) - uint64_t(d);
    }
    uint64_t n = (dist - 1) / step + 1;
    return n <= uint64_t(kMax) ? int64_t(n) : kMax;
  }
}

Status InferRange(KernelContext& ctx) {
  DType dt = ctx.input(0)->dtype;
  for (int i = 0; i < 3; ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) return ctx.Invalid("input " + std::to_string(i) + " is missing");
    if (t->dtype != dt) return ctx.Invalid("start, limit and delta must share a dtype");
    if (t->shape_known() && t->numel() != 1) return ctx.Invalid("inputs must be scalars");
  }
  if (!RangeDType(dt))
    return ctx.Unsupported(std::string("dtype ") + dtype_name(dt) + " is not supported");
  if (!ctx.input(0)->data || !ctx.input(1)->data || !ctx.input(2)->data) {
    SetOutput(ctx.output(0), dt, {kUnknownDim});
    return Status::Ok();
  }
  int64_t n = 0;
  bool zero_delta = false;
  QF_DISPATCH_NUMERIC(dt, break, {
    T d = ScalarAt<T>(ctx.input(2));
    zero_delta = d == T(0);
    if (!zero_delta) n = RangeCount<T>(ScalarAt<T>(ctx.input(0)), ScalarAt<T>(ctx.input(1)), d);
  });
  if (zero_delta) return ctx.Invalid("delta is 0");
  SetOutput(ctx.output(0), dt, {n});
  return Status::Ok();
}

Status RunRange(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  int64_t n = y->numel();
  QF_DISPATCH_NUMERIC(y->dtype, return ctx.Unsupported("dtype"), {
    T start = ScalarAt<T>(ctx.input(0));
    T delta = ScalarAt<T>(ctx.input(2));
    T* out = y->ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        out[i] = T(start + T(i) * delta);
      } else {
        // Every value lies between start and limit, but i * delta alone may not fit in
        // T: unsigned (wrapping) arithmetic gives the exact result.
        out[i] = T(uint64_t(int64_t(start)) + uint64_t(i) * uint64_t(int64_t(delta)));
      }
    }
  });
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Shape() {
  static const OpDef def{"Shape", InferShape, RunShape, 0, /*shape_only=*/true, 1, 1};
  return def;
}

const OpDef& OpDef_Size() {
  static const OpDef def{"Size", InferSize, RunSize, 0, /*shape_only=*/true, 1, 1};
  return def;
}

const OpDef& OpDef_ConstantOfShape() {
  static const OpDef def{
      "ConstantOfShape", InferConstantOfShape, RunConstantOfShape, 1u << 0, false, 1, 2};
  return def;
}

const OpDef& OpDef_Range() {
  static const OpDef def{"Range", InferRange, RunRange, 0x7u, false, 3, 3};
  return def;
}

}  // namespace qfold
