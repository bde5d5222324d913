// Softmax, LogSoftmax and Hardmax along one axis (opset 13), or, when the
// converter sets "_coerce_2d" for opset < 13 models, over all axes from
// `axis` on (the input viewed as 2-D [prod(dims[:axis]), prod(dims[axis:])]).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

bool Coerce2d(const KernelContext& ctx) {
  return ctx.attr().GetInt("_coerce_2d", 0) != 0;
}
int64_t AxisAttr(const KernelContext& ctx) {
  return ctx.attr().GetInt("axis", Coerce2d(ctx) ? 1 : -1);
}

Status InferSoftmax(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Tensor* x = ctx.input(0);
  if (!IsFloatDType(x->dtype)) return UnsupportedDType(ctx, x->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  if (!x->rank_known) return Status::Ok();
  const int64_t axis = AxisAttr(ctx);
  int a;
  // The legacy 2-D view allows axis == rank (an empty inner group).
  const bool ok = Coerce2d(ctx) && axis == x->rank() ? true : NormalizeAxis(axis, x->rank(), &a);
  if (!ok)
    return ctx.Invalid("axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(x->rank()));
  return Status::Ok();
}

// Processes `outer` groups of `n` elements, consecutive elements of a group
// `inner` apart.
template <class T>
void SoftmaxLoop(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, Kind kind) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * n * inner + in;
      auto at = [&](int64_t k) { return base + k * inner; };
      T mx = -std::numeric_limits<T>::infinity();
      int64_t arg = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (x[at(k)] > mx) {
          mx = x[at(k)];
          arg = k;
        }
      }
      if (kind == Kind::kHardmax) {  // first maximum wins
        for (int64_t k = 0; k < n; ++k) y[at(k)] = k == arg ? T(1) : T(0);
        continue;
      }
      T sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        T e = std::exp(x[at(k)] - mx);
        if (kind == Kind::kSoftmax) y[at(k)] = e;
        sum += e;
      }
      if (kind == Kind::kSoftmax) {
        for (int64_t k = 0; k < n; ++k) y[at(k)] /= sum;
      } else {
        const T log_sum = std::log(sum);
        for (int64_t k = 0; k < n; ++k) y[at(k)] = x[at(k)] - mx - log_sum;
      }
    }
  }
}

// float32 groups of contiguous elements (the last axis, or the 2-D view):
// the vectorized max and exp of kernels/vmath.h; with row kernels, Softmax
// multiplies by 1/sum (one more rounding than dividing, 1 ulp) in vectors,
// and rows are split between threads.
void SoftmaxRowsF32(const kernels::KernelConfig& kc, kernels::ThreadPool* pool, const float* x,
                    float* y, int64_t outer, int64_t n, Kind kind) {
  const kernels::VMathKernels& vm = *kc.vmath;
  const kernels::RowOpsF32Kernels* rk = kc.rowops_f32;
  auto rows = [&](int64_t o0, int64_t o1, int) {
    for (int64_t o = o0; o < o1; ++o) {
      const float* xr = x + o * n;
      float* yr = y + o * n;
      const float mx = vm.max(xr, n);
      const float sum = vm.exp_shift_sum(xr, yr, n, mx);
      if (kind == Kind::kSoftmax && rk) {
        rk->scale(yr, yr, n, 1.f / sum);
      } else if (kind == Kind::kSoftmax) {
        for (int64_t k = 0; k < n; ++k) yr[k] /= sum;
      } else {
        const float log_sum = std::log(sum);
        for (int64_t k = 0; k < n; ++k) yr[k] = xr[k] - mx - log_sum;
      }
    }
  };
  const bool small = !rk || outer * n < (int64_t(1) << 15);
  kernels::ParallelFor(small ? nullptr : pool, outer, rows);
}

template <Kind kKind>
Status RunSoftmax(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  const int rank = x.rank();
  int64_t axis = AxisAttr(ctx);
  if (axis < 0) axis += rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < rank; ++i) {
    if (i < axis)
      outer *= x.shape[i];
    else if (i == axis || Coerce2d(ctx))
      n *= x.shape[i];
    else
      inner *= x.shape[i];
  }
  if (x.dtype == DType::kFloat32 && inner == 1 && kKind != Kind::kHardmax)
    SoftmaxRowsF32(ctx.kernel_config(), ctx.pool, x.ptr<float>(), y.ptr<float>(), outer, n, kKind);
  else if (x.dtype == DType::kFloat32)
    SoftmaxLoop(x.ptr<float>(), y.ptr<float>(), outer, n, inner, kKind);
  else if (x.dtype == DType::kFloat64)
    SoftmaxLoop(x.ptr<double>(), y.ptr<double>(), outer, n, inner, kKind);
  else
    return UnsupportedDType(ctx, x.dtype);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Softmax() {
  static const OpDef def{"Softmax", InferSoftmax, RunSoftmax<Kind::kSoftmax>, 0, false, 1, 1};
  return def;
}
const OpDef& OpDef_LogSoftmax() {
  static const OpDef def{"LogSoftmax", InferSoftmax, RunSoftmax<Kind::kLogSoftmax>, 0, false, 1, 1};
  return def;
}
const OpDef& OpDef_Hardmax() {
  static const OpDef def{"Hardmax", InferSoftmax, RunSoftmax<Kind::kHardmax>, 0, false, 1, 1};
  return def;
}

}  // namespace qfold
