// Broadcasting arithmetic: Add, Sub, Mul, Div, Pow, Mod, PRelu, and the
// variadic Max, Min, Sum, Mean.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

// Integer arithmetic wraps modulo 2^bits (as ONNX Runtime does in practice);
// doing it in uint64 avoids signed-overflow undefined behaviour.
template <class T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return T(uint64_t(a) + uint64_t(b));
  else
    return a + b;
}
template <class T>
T WrapSub(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return T(uint64_t(a) - uint64_t(b));
  else
    return a - b;
}
template <class T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral<T>::value)
    return T(uint64_t(a) * uint64_t(b));
  else
    return a * b;
}

// Integer division truncates toward zero. Division by zero and MIN / -1 would
// trap; they yield 0 and the wrapped negation instead.
template <class T>
T SafeDiv(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed<T>::value) {
      if (b == T(-1)) return WrapSub(T(0), a);
    }
    return T(a / b);
  } else {
    return a / b;
  }
}

// Max/Min propagate NaN like numpy.maximum/minimum.
template <class T>
T MaxOf(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <class T>
T MinOf(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return b < a ? b : a;
}

struct AddFn {
  static constexpr int kF32Op = kernels::kBinAdd;
  template <class T>
  static T Apply(T a, T b) {
    return WrapAdd(a, b);
  }
};
struct SubFn {
  static constexpr int kF32Op = kernels::kBinSub;
  template <class T>
  static T Apply(T a, T b) {
    return WrapSub(a, b);
  }
};
struct MulFn {
  static constexpr int kF32Op = kernels::kBinMul;
  template <class T>
  static T Apply(T a, T b) {
    return WrapMul(a, b);
  }
};
struct DivFn {
  static constexpr int kF32Op = kernels::kBinDiv;
  template <class T>
  static T Apply(T a, T b) {
    return SafeDiv(a, b);
  }
};
struct MaxFn {
  static constexpr int kF32Op = kernels::kBinMax;
  template <class T>
  static T Apply(T a, T b) {
    return MaxOf(a, b);
  }
};
struct MinFn {
  static constexpr int kF32Op = kernels::kBinMin;
  template <class T>
  static T Apply(T a, T b) {
    return MinOf(a, b);
  }
};

// ---- Two-input, same-dtype numeric ops: Add, Sub, Mul, Div ----

Status InferSameTypeBinary(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  QF_RETURN_IF_ERROR(RejectLegacyBroadcast(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (a->dtype != b->dtype)
    return ctx.Invalid(std::string("input dtypes differ: ") + dtype_name(a->dtype) + " and " +
                       dtype_name(b->dtype));
  if (!IsNumericDType(a->dtype)) return UnsupportedDType(ctx, a->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = a->dtype;
  return InferBroadcastShape(ctx, {a, b}, y);
}

// y = Fn(a, b) with broadcasting, as runs of contiguous output elements: y's
// dims (size-1 dims dropped) merged wherever both inputs step through them
// alike, so the innermost run reads each input either contiguously or as one
// repeated value. Plain loops the compiler vectorizes, instead of an index
// computation per element: same shapes, a tensor and a scalar, a [1,C,1,1]
// scale over [N,C,H,W] (runs of H*W) or a [C] bias over [N,C] (runs of C).
struct RunPlan {
  std::vector<int64_t> dims, sa, sb;  // innermost first; dims[0] is the run

  // Moves the odometer pos (over dims[1..]) and the input offsets to the next run.
  void Next(std::vector<int64_t>* pos, int64_t* oa, int64_t* ob) const {
    for (size_t d = 1; d < dims.size(); ++d) {
      *oa += sa[d];
      *ob += sb[d];
      if (++(*pos)[d] < dims[d]) break;
      *oa -= sa[d] * dims[d];
      *ob -= sb[d] * dims[d];
      (*pos)[d] = 0;
    }
  }
};

RunPlan PlanRuns(const Tensor& a, const Tensor& b, const Tensor& y) {
  RunPlan p;
  const int r = y.rank();
  auto stride_of = [&](const Shape& s, int i, int64_t* acc) {
    const int j = i - (r - int(s.size()));
    if (j < 0 || s[size_t(j)] == 1) return int64_t(0);
    const int64_t st = *acc;
    *acc *= s[size_t(j)];
    return st;
  };
  int64_t acc_a = 1, acc_b = 1;
  for (int i = r - 1; i >= 0; --i) {
    const int64_t d = y.shape[size_t(i)];
    const int64_t ta = stride_of(a.shape, i, &acc_a), tb = stride_of(b.shape, i, &acc_b);
    if (d == 1) continue;
    if (!p.dims.empty() && ta == p.sa.back() * p.dims.back() && tb == p.sb.back() * p.dims.back()) {
      p.dims.back() *= d;  // contiguous with the inner dim (or broadcast alike): one dim
    } else {
      p.dims.push_back(d);
      p.sa.push_back(ta);
      p.sb.push_back(tb);
    }
  }
  return p;
}

template <class T, class Fn>
void ArithRuns(const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t total = y.numel();
  if (total == 0) return;
  const RunPlan plan = PlanRuns(a, b, y);
  const std::vector<int64_t>& dims = plan.dims;
  const std::vector<int64_t>& sa = plan.sa;
  const std::vector<int64_t>& sb = plan.sb;
  const T* pa = a.ptr<T>();
  const T* pb = b.ptr<T>();
  T* py = y.ptr<T>();
  if (dims.empty()) {  // every dim 1
    py[0] = Fn::template Apply<T>(pa[0], pb[0]);
    return;
  }
  const int64_t run = dims[0];
  const bool a_run = sa[0] != 0, b_run = sb[0] != 0;
  std::vector<int64_t> pos(dims.size(), 0);
  int64_t oa = 0, ob = 0;
  for (int64_t o = 0; o < total; o += run) {
    const T* ra = pa + oa;
    const T* rb = pb + ob;
    T* ry = py + o;
    if (a_run && b_run) {
      for (int64_t i = 0; i < run; ++i) ry[i] = Fn::template Apply<T>(ra[i], rb[i]);
    } else if (a_run) {
      const T v = rb[0];
      for (int64_t i = 0; i < run; ++i) ry[i] = Fn::template Apply<T>(ra[i], v);
    } else {
      const T u = ra[0];
      for (int64_t i = 0; i < run; ++i) ry[i] = Fn::template Apply<T>(u, rb[i]);
    }
    plan.Next(&pos, &oa, &ob);
  }
}

// The float runs of ArithRuns through the SIMD kernels (kernels/binary_f32.h),
// bit-identical to it (one IEEE operation per element either way). Threads
// take whole runs, or, when there are few runs, equal parts of each run:
// every element's result is independent of the split. False (nothing done)
// without the kernels or for a single element.
bool ArithRunsF32(KernelContext& ctx, int op, const Tensor& a, const Tensor& b, Tensor& y) {
  const kernels::BinaryF32Kernels* k = ctx.kernel_config().binary_f32;
  const int64_t total = y.numel();
  if (!k || total <= 1) return false;
  const RunPlan plan = PlanRuns(a, b, y);
  if (plan.dims.empty()) return false;
  const std::vector<int64_t>& dims = plan.dims;
  const std::vector<int64_t>& sa = plan.sa;
  const std::vector<int64_t>& sb = plan.sb;
  const int64_t run = dims[0];
  const int64_t runs = total / run;
  const bool a_run = sa[0] != 0, b_run = sb[0] != 0;
  const kernels::BinaryF32Fn fn =
      k->fn[op][a_run && b_run ? kernels::kBinVecVec
                               : (a_run ? kernels::kBinVecScalar : kernels::kBinScalarVec)];
  const float* pa = a.ptr<float>();
  const float* pb = b.ptr<float>();
  float* py = y.ptr<float>();
  // Below this (1 MiB an operand) a second thread's wake-up and the shared
  // cache traffic cost more than its half of the work: measured on 76800
  // elements, two threads were 8-18% slower than one.
  kernels::ThreadPool* pool = total < (int64_t(1) << 18) ? nullptr : ctx.pool;
  const int64_t threads = kernels::NumThreads(pool);
  // Parts per run: enough pieces for every thread, none under 1024 elements.
  int64_t parts = 1;
  if (threads > 1 && runs < 4 * threads)
    parts = std::max<int64_t>(1, std::min((4 * threads + runs - 1) / runs, run / 1024));
  // Input offsets of run r, and the odometer from there.
  auto offsets = [&](int64_t r, std::vector<int64_t>* pos, int64_t* oa, int64_t* ob) {
    *oa = 0;
    *ob = 0;
    for (size_t d = 1; d < dims.size(); ++d) {
      (*pos)[d] = r % dims[d];
      r /= dims[d];
      *oa += (*pos)[d] * sa[d];
      *ob += (*pos)[d] * sb[d];
    }
  };
  kernels::ParallelFor(pool, runs * parts, [&](int64_t p0, int64_t p1, int) {
    std::vector<int64_t> pos(dims.size(), 0);
    int64_t oa, ob;
    if (parts == 1) {
      offsets(p0, &pos, &oa, &ob);
      for (int64_t r = p0; r < p1; ++r) {
        fn(pa + oa, pb + ob, py + r * run, run);
        plan.Next(&pos, &oa, &ob);
      }
      return;
    }
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r = p / parts, j = p % parts;
      offsets(r, &pos, &oa, &ob);
      const int64_t lo = run * j / parts, hi = run * (j + 1) / parts;
      fn(pa + oa + (a_run ? lo : 0), pb + ob + (b_run ? lo : 0), py + r * run + lo, hi - lo);
    }
  });
  return true;
}

template <class Fn>
Status RunArith(KernelContext& ctx) {
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  if (a.dtype == DType::kFloat32 && ArithRunsF32(ctx, Fn::kF32Op, a, b, y)) return Status::Ok();
  QF_DISPATCH_NUMERIC(a.dtype, return UnsupportedDType(ctx, a.dtype), ArithRuns<T, Fn>(a, b, y));
  return Status::Ok();
}

// ---- Variadic: Max, Min (numeric), Sum, Mean (float) ----

template <bool kFloatOnly>
Status InferVariadic(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Tensor* first = ctx.input(0);
  std::vector<const Tensor*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) return ctx.Invalid("input " + std::to_string(i) + " is missing");
    if (t->dtype != first->dtype)
      return ctx.Invalid(std::string("input dtypes differ: ") + dtype_name(first->dtype) + " and " +
                         dtype_name(t->dtype));
    ins.push_back(t);
  }
  if (kFloatOnly ? !IsFloatDType(first->dtype) : !IsNumericDType(first->dtype))
    return UnsupportedDType(ctx, first->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = first->dtype;
  return InferBroadcastShape(ctx, ins, y);
}

// y = fold(Fn, inputs) with broadcasting; Mean divides by the count at the end.
template <class T, class Fn>
void FoldInputs(KernelContext& ctx, bool mean) {
  Tensor& y = *ctx.output(0);
  T* py = y.ptr<T>();
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    const Tensor& x = *ctx.input(k);
    const T* px = x.ptr<T>();
    ForEachBroadcast<1>({&x.shape}, y.shape, [&](int64_t o, const std::array<int64_t, 1>& i) {
      py[o] = k == 0 ? px[i[0]] : Fn::template Apply<T>(py[o], px[i[0]]);
    });
  }
  if (mean) {
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) py[i] = py[i] / T(ctx.num_inputs());
  }
}

template <class Fn, bool kMean>
Status RunVariadic(KernelContext& ctx) {
  const DType dt = ctx.input(0)->dtype;
  // Two float inputs (Max/Min in practice): one pass of the binary kernels,
  // the same values as the fold.
  if (!kMean && dt == DType::kFloat32 && ctx.num_inputs() == 2 &&
      ArithRunsF32(ctx, Fn::kF32Op, *ctx.input(0), *ctx.input(1), *ctx.output(0)))
    return Status::Ok();
  QF_DISPATCH_NUMERIC(dt, return UnsupportedDType(ctx, dt), FoldInputs<T, Fn>(ctx, kMean));
  return Status::Ok();
}

// ---- Pow: base in {float, double, int32, int64}; exponent any numeric ----

Status InferPow(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  QF_RETURN_IF_ERROR(RejectLegacyBroadcast(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (!IsFloatDType(a->dtype) && a->dtype != DType::kInt32 && a->dtype != DType::kInt64)
    return UnsupportedDType(ctx, a->dtype, "base");
  if (!IsNumericDType(b->dtype)) return UnsupportedDType(ctx, b->dtype, "exponent");
  Tensor* y = ctx.output(0);
  y->dtype = a->dtype;
  return InferBroadcastShape(ctx, {a, b}, y);
}

template <class A>
Status RunPowBase(KernelContext& ctx) {
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  // Computed in double: exact for integer results below 2^53, and correctly
  // rounded for float32 results in practice.
  auto pow = [](A base, double e) -> A {
    double r = std::pow(double(base), e);
    if constexpr (std::is_integral<A>::value)
      return FloatToInt<A>(r);
    else
      return A(r);
  };
  QF_DISPATCH_NUMERIC(b.dtype, return UnsupportedDType(ctx, b.dtype, "exponent"),
                      BinaryLoop<A, T, A>(a, b, y, [&](A u, T v) { return pow(u, double(v)); }));
  return Status::Ok();
}

// x^2 for a float32 base and one float exponent equal to 2 (the variance of
// decomposed LayerNorms): x * x, which is bit-identical to pow in double
// rounded to float (the double product of two floats is exact).
bool RunSquareF32(KernelContext& ctx) {
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  if (a.dtype != DType::kFloat32 || b.numel() != 1 || a.shape != y.shape) return false;
  double e;
  if (b.dtype == DType::kFloat32)
    e = b.ptr<float>()[0];
  else if (b.dtype == DType::kFloat64)
    e = b.ptr<double>()[0];
  else
    return false;
  if (e != 2.0) return false;
  const float* x = a.ptr<float>();
  float* py = y.ptr<float>();
  const int64_t n = y.numel();
  for (int64_t i = 0; i < n; ++i) py[i] = x[i] * x[i];
  return true;
}

Status RunPow(KernelContext& ctx) {
  switch (ctx.input(0)->dtype) {
    case DType::kFloat32:
      if (RunSquareF32(ctx)) return Status::Ok();
      return RunPowBase<float>(ctx);
    case DType::kFloat64:
      return RunPowBase<double>(ctx);
    case DType::kInt32:
      return RunPowBase<int32_t>(ctx);
    case DType::kInt64:
      return RunPowBase<int64_t>(ctx);
    default:
      return UnsupportedDType(ctx, ctx.input(0)->dtype, "base");
  }
}

// ---- Mod ----

Status InferMod(KernelContext& ctx) {
  int64_t fmod = ctx.attr().GetInt("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return ctx.Invalid("fmod must be 0 or 1, got " + std::to_string(fmod));
  return InferSameTypeBinary(ctx);
}

// fmod=1: result has the sign of the dividend (C fmod / %). fmod=0: sign of
// the divisor (Python %). Integer division by zero yields 0 like NumPy.
template <class T>
T ModOf(T a, T b, bool c_fmod) {
  if constexpr (std::is_floating_point<T>::value) {
    T r = std::fmod(a, b);
    if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    if (b == 0) return T(0);
    if constexpr (std::is_signed<T>::value) {
      if (b == T(-1)) return T(0);  // avoids the MIN % -1 trap
      T r = T(a % b);
      if (!c_fmod && r != 0 && (IsNegative(r) != IsNegative(b))) r = T(r + b);
      return r;
    } else {
      return T(a % b);
    }
  }
}

Status RunMod(KernelContext& ctx) {
  const bool c_fmod = ctx.attr().GetInt("fmod", 0) == 1;
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  QF_DISPATCH_NUMERIC(a.dtype, return UnsupportedDType(ctx, a.dtype),
                      BinaryLoop<T, T, T>(a, b, y, [&](T u, T v) { return ModOf(u, v, c_fmod); }));
  return Status::Ok();
}

// ---- PRelu: slope broadcasts unidirectionally to X ----

Status InferPRelu(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  const Tensor* x = ctx.input(0);
  const Tensor* slope = ctx.input(1);
  if (x->dtype != slope->dtype)
    return ctx.Invalid(std::string("X is ") + dtype_name(x->dtype) + " but slope is " +
                       dtype_name(slope->dtype));
  if (!IsNumericDType(x->dtype)) return UnsupportedDType(ctx, x->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  if (!x->rank_known || !slope->rank_known) return Status::Ok();
  if (slope->rank() > x->rank())
    return ctx.Invalid("slope " + ShapeToString(slope->shape) + " has higher rank than X " +
                       ShapeToString(x->shape));
  Shape b;
  std::string err;
  if (!BroadcastShapes(x->shape, slope->shape, &b, &err)) return ctx.Invalid(err);
  for (int i = 0; i < x->rank(); ++i) {
    if (x->shape[i] >= 0 && b[i] >= 0 && b[i] != x->shape[i])
      return ctx.Invalid("slope " + ShapeToString(slope->shape) + " does not broadcast to X " +
                         ShapeToString(x->shape));
    if (x->shape[i] < 0) y->shape[i] = b[i];  // slope may pin an unknown dim
  }
  return Status::Ok();
}

Status RunPRelu(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  const Tensor& s = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  QF_DISPATCH_NUMERIC(
      x.dtype, return UnsupportedDType(ctx, x.dtype),
      BinaryLoop<T, T, T>(x, s, y, [](T u, T v) { return IsNegative(u) ? WrapMul(u, v) : u; }));
  return Status::Ok();
}

}  // namespace

// Element-wise with numpy broadcasting: any common axis order works.
// kTraitPointwise as for the unary ops (unary.cc): Mod, Sum and Mean qualify
// but were never tried in the byte-wise collapse. SAME_DTYPE: every op but
// Pow (its exponent may have another type) takes operands of one dtype.
#define QF_BINARY_DEF(NAME, INFER, RUN, MIN_IN, MAX_IN, TRAITS, SAME_DTYPE) \
  const OpDef& OpDef_##NAME() {                                             \
    static const OpDef def = [] {                                           \
      OpDef d{#NAME, INFER, RUN, 0, false, MIN_IN, MAX_IN};                 \
      d.layout = LayoutRole::kElementwise;                                  \
      d.layout_input = EveryInput;                                          \
      d.traits = kTraitBroadcasting | (TRAITS);                             \
      d.same_dtype_inputs = SAME_DTYPE;                                     \
      return d;                                                             \
    }();                                                                    \
    return def;                                                             \
  }

constexpr int kVariadicMax = 1 << 20;

QF_BINARY_DEF(Add, InferSameTypeBinary, RunArith<AddFn>, 2, 2, kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Sub, InferSameTypeBinary, RunArith<SubFn>, 2, 2, kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Mul, InferSameTypeBinary, RunArith<MulFn>, 2, 2, kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Div, InferSameTypeBinary, RunArith<DivFn>, 2, 2, kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Pow, InferPow, RunPow, 2, 2, kTraitPointwise, 0)
QF_BINARY_DEF(Mod, InferMod, RunMod, 2, 2, 0, kAllInputs)
QF_BINARY_DEF(PRelu, InferPRelu, RunPRelu, 2, 2, kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Max, InferVariadic<false>, (RunVariadic<MaxFn, false>), 1, kVariadicMax,
              kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Min, InferVariadic<false>, (RunVariadic<MinFn, false>), 1, kVariadicMax,
              kTraitPointwise, kAllInputs)
QF_BINARY_DEF(Sum, InferVariadic<true>, (RunVariadic<AddFn, false>), 1, kVariadicMax, 0, kAllInputs)
QF_BINARY_DEF(Mean, InferVariadic<true>, (RunVariadic<AddFn, true>), 1, kVariadicMax, 0, kAllInputs)

#undef QF_BINARY_DEF

}  // namespace qfold
