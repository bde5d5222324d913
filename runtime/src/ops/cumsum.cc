// CumSum: running sum along an axis given as input 1, optionally exclusive
// (each output excludes its own element) and/or reversed.
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

Status ReadAxis(const KernelContext& ctx, int rank, int* axis, bool* known) {
  const Tensor* a = ctx.input(1);
  std::vector<int64_t> v;
  *known = ReadInts(a, &v);
  if (!*known) return Status::Ok();
  if (v.size() != 1) return ctx.Invalid("axis must hold one value");
  if (!NormalizeAxis(v[0], rank, axis))
    return ctx.Invalid("axis " + std::to_string(v[0]) + " out of range for rank " +
                       std::to_string(rank));
  return Status::Ok();
}

bool CumSumDType(DType t) {
  return t != DType::kBool && dtype_size(t) != 0 && t != DType::kFloat16 && t != DType::kBFloat16;
}

Status InferCumSum(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* a = ctx.input(1);
  if (!CumSumDType(x->dtype))
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype) + " is not supported");
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, a, "axis"));
  if (a->rank_known && a->rank() > 1) return ctx.Invalid("axis must be a scalar");
  if (!x->rank_known) {
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    return Status::Ok();
  }
  int axis;
  bool known;
  QF_RETURN_IF_ERROR(ReadAxis(ctx, x->rank(), &axis, &known));
  SetOutput(ctx.output(0), x->dtype, x->shape);
  return Status::Ok();
}

template <class T>
void CumSumKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                  bool reverse) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      T acc = T(0);
      for (int64_t s = 0; s < n; ++s) {
        int64_t j = reverse ? n - 1 - s : s;
        int64_t idx = (o * n + j) * inner + in;
        if (exclusive) {
          y[idx] = acc;
          acc = T(acc + x[idx]);
        } else {
          acc = T(acc + x[idx]);
          y[idx] = acc;
        }
      }
    }
  }
}

Status RunCumSum(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int r = x->rank();
  int axis = 0;
  bool known;
  if (r == 0) return ctx.Invalid("input must have rank >= 1");
  QF_RETURN_IF_ERROR(ReadAxis(ctx, r, &axis, &known));
  if (!known) return ctx.Invalid("axis is not known at run time");
  bool exclusive = ctx.attr().GetInt("exclusive", 0) != 0;
  bool reverse = ctx.attr().GetInt("reverse", 0) != 0;
  int64_t outer = DimProduct(x->shape, 0, axis);
  int64_t inner = DimProduct(x->shape, axis + 1, r);
  int64_t n = x->shape[axis];
  QF_DISPATCH_NUMERIC(
      x->dtype, return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype)),
      CumSumKernel<T>(x->ptr<T>(), y->ptr<T>(), outer, n, inner, exclusive, reverse));
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_CumSum() {
  static const OpDef def{"CumSum", InferCumSum, RunCumSum, 0, false, 2, 2};
  return def;
}

}  // namespace qfold
