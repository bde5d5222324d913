// Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, with C
// unidirectionally broadcast to (M, N), plus the converter's fused activation.
#include <algorithm>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"

namespace qfold {
namespace {

// Float types only: integer Gemm with float alpha/beta has no well-defined rounding.
bool GemmDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

Status InferGemm(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  if (!a || !b) return ctx.Invalid("inputs A and B are required");
  if (!GemmDType(a->dtype)) return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype));
  if (b->dtype != a->dtype || (c && c->dtype != a->dtype))
    return ctx.Invalid("A, B and C must have the same dtype");
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  if (act.active() && a->dtype != DType::kFloat32)
    return ctx.Unsupported("fused activation on a non-float32 Gemm");
  y->dtype = a->dtype;
  if ((a->rank_known && a->rank() != 2) || (b->rank_known && b->rank() != 2))
    return ctx.Invalid("A and B must be 2-D");
  const bool ta = ctx.attr().GetInt("transA", 0) != 0;
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  int64_t m = kUnknownDim, ka = kUnknownDim, kb = kUnknownDim, n = kUnknownDim;
  if (a->rank_known) {
    m = a->shape[ta ? 1 : 0];
    ka = a->shape[ta ? 0 : 1];
  }
  if (b->rank_known) {
    kb = b->shape[tb ? 1 : 0];
    n = b->shape[tb ? 0 : 1];
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return ctx.Invalid("inner dims differ: A " + ShapeToString(a->shape) + ", B " +
                       ShapeToString(b->shape));
  if (c && c->rank_known) {
    if (c->rank() > 2) return ctx.Invalid("C must have rank <= 2");
    // Right-aligned against (M, N); each dim must be 1 or match.
    const int64_t out[2] = {m, n};
    for (int i = 0; i < c->rank(); ++i) {
      int64_t d = c->shape[i], o = out[2 - c->rank() + i];
      if (d >= 0 && d != 1 && o >= 0 && d != o)
        return ctx.Invalid("C " + ShapeToString(c->shape) + " does not broadcast to (" +
                           std::to_string(m) + "," + std::to_string(n) + ")");
    }
  }
  y->rank_known = true;
  y->shape = {m, n};
  return Status::Ok();
}

template <class T>
void GemmKernel(const T* a, const T* b, const T* c, const Shape& c_shape, T* y, int64_t m,
                int64_t k, int64_t n, bool ta, bool tb, float alpha, float beta) {
  // C's strides over (M, N), zero on broadcast axes.
  int64_t cs_m = 0, cs_n = 0;
  if (c) {
    const int cr = int(c_shape.size());
    const int64_t cm = cr == 2 ? c_shape[0] : 1;
    const int64_t cn = cr >= 1 ? c_shape[cr - 1] : 1;
    cs_n = cn == 1 ? 0 : 1;
    cs_m = cm == 1 ? 0 : cn;
  }
  // Loop orders keep the innermost loop contiguous in B.
  std::vector<T> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), T(0));
    for (int64_t j = 0; j < n && tb; ++j) {
      const T* brow = b + j * k;
      T sum = T(0);
      for (int64_t p = 0; p < k; ++p) sum += (ta ? a[p * m + i] : a[i * k + p]) * brow[p];
      acc[j] = sum;
    }
    for (int64_t p = 0; p < k && !tb; ++p) {
      const T av = ta ? a[p * m + i] : a[i * k + p];
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      T v = T(alpha) * acc[j];
      if (c) v += T(beta) * c[i * cs_m + j * cs_n];
      y[i * n + j] = v;
    }
  }
}

Status RunGemm(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  const bool ta = ctx.attr().GetInt("transA", 0) != 0;
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  const float alpha = ctx.attr().GetFloat("alpha", 1.f);
  const float beta = ctx.attr().GetFloat("beta", 1.f);
  const int64_t m = y->shape[0], n = y->shape[1];
  const int64_t k = a->shape[ta ? 0 : 1];
  const Shape c_shape = c ? c->shape : Shape();
  switch (a->dtype) {
    case DType::kFloat32: {
      GemmKernel(a->ptr<float>(), b->ptr<float>(), c ? c->ptr<float>() : nullptr, c_shape,
                 y->ptr<float>(), m, k, n, ta, tb, alpha, beta);
      Status st;
      FusedActivation::FromAttrs(ctx.attr(), &st).Apply(y->ptr<float>(), y->numel());
      break;
    }
    case DType::kFloat64:
      GemmKernel(a->ptr<double>(), b->ptr<double>(), c ? c->ptr<double>() : nullptr, c_shape,
                 y->ptr<double>(), m, k, n, ta, tb, alpha, beta);
      break;
    default:
      return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype));
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Gemm() {
  static const OpDef def{"Gemm",
                         InferGemm,
                         RunGemm,
                         /*value_inputs=*/0,
                         /*shape_only=*/false,
                         /*min_inputs=*/2,
                         /*max_inputs=*/3};
  return def;
}

}  // namespace qfold
