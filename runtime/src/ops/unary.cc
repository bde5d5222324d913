// Elementwise unary math and activations. Each op is a small functor built
// from the node's attributes; one template supplies infer and run for all.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "kernels/vmath.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

// Which input dtypes an op accepts.
enum class Types { kFloat, kSignedNumeric, kNumeric };

bool Accepts(Types types, DType t) {
  switch (types) {
    case Types::kFloat:
      return IsFloatDType(t);
    case Types::kSignedNumeric:
      return IsFloatDType(t) || IsSignedIntDType(t);
    case Types::kNumeric:
      return IsNumericDType(t);
  }
  return false;
}

struct NoAttrs {
  explicit NoAttrs(const AttrMap&) {}
  static Status Validate(const KernelContext&) { return Status::Ok(); }
};

template <class T>
T Sigmoid(T x) {
  // Split by sign so exp never overflows into inf/inf.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

template <class T>
T Softplus(T x) {
  // log(1 + exp(x)) without overflow for large x.
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

#define QF_SIMPLE_FUNCTOR(NAME, EXPR) \
  struct NAME##F : NoAttrs {          \
    using NoAttrs::NoAttrs;           \
    template <class T>                \
    T operator()(T x) const {         \
      return EXPR;                    \
    }                                 \
  };

QF_SIMPLE_FUNCTOR(Sigmoid, Sigmoid(x))
QF_SIMPLE_FUNCTOR(Tanh, std::tanh(x))
QF_SIMPLE_FUNCTOR(Erf, std::erf(x))
QF_SIMPLE_FUNCTOR(Exp, std::exp(x))
QF_SIMPLE_FUNCTOR(Log, std::log(x))
QF_SIMPLE_FUNCTOR(Sqrt, std::sqrt(x))
QF_SIMPLE_FUNCTOR(Reciprocal, T(1) / x)
QF_SIMPLE_FUNCTOR(Floor, std::floor(x))
QF_SIMPLE_FUNCTOR(Ceil, std::ceil(x))
// nearbyint rounds half to even in the default rounding mode, as ONNX requires.
QF_SIMPLE_FUNCTOR(Round, std::nearbyint(x))
QF_SIMPLE_FUNCTOR(Sin, std::sin(x))
QF_SIMPLE_FUNCTOR(Cos, std::cos(x))
QF_SIMPLE_FUNCTOR(Tan, std::tan(x))
QF_SIMPLE_FUNCTOR(Asin, std::asin(x))
QF_SIMPLE_FUNCTOR(Acos, std::acos(x))
QF_SIMPLE_FUNCTOR(Atan, std::atan(x))
QF_SIMPLE_FUNCTOR(Sinh, std::sinh(x))
QF_SIMPLE_FUNCTOR(Cosh, std::cosh(x))
QF_SIMPLE_FUNCTOR(Asinh, std::asinh(x))
QF_SIMPLE_FUNCTOR(Acosh, std::acosh(x))
QF_SIMPLE_FUNCTOR(Atanh, std::atanh(x))
QF_SIMPLE_FUNCTOR(Softplus, Softplus(x))
QF_SIMPLE_FUNCTOR(Softsign, x / (T(1) + std::fabs(x)))
QF_SIMPLE_FUNCTOR(Mish, x* std::tanh(Softplus(x)))
// The spec's alpha = 1/6 as a product of T, rounded before the sum (as the
// fused activation's vmath kernels and ONNX Runtime compute it).
QF_SIMPLE_FUNCTOR(HardSwish,
                  x* std::max(T(0), std::min(T(1), kernels::Rounded(T(x* T(1.0 / 6.0))) + T(0.5))))
QF_SIMPLE_FUNCTOR(Relu, x > T(0) ? x : T(0))
// Integer negation wraps (MIN stays MIN) instead of overflowing.
QF_SIMPLE_FUNCTOR(Neg, std::is_integral<T>::value ? T(uint64_t(0) - uint64_t(x)) : T(-x))
#undef QF_SIMPLE_FUNCTOR

struct AbsF : NoAttrs {
  using NoAttrs::NoAttrs;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value)
      return std::fabs(x);
    else if constexpr (std::is_signed<T>::value)
      return x < 0 ? T(uint64_t(0) - uint64_t(x)) : x;
    else
      return x;
  }
};

struct SignF : NoAttrs {
  using NoAttrs::NoAttrs;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point<T>::value) {
      if (std::isnan(x)) return x;
    }
    return x > T(0) ? T(1) : (IsNegative(x) ? T(-1) : T(0));
  }
};

// Activations with float attributes.
struct LeakyReluF : NoAttrs {
  float alpha;
  explicit LeakyReluF(const AttrMap& a) : NoAttrs(a), alpha(a.GetFloat("alpha", 0.01f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
};

struct HardSigmoidF : NoAttrs {
  float alpha, beta;
  explicit HardSigmoidF(const AttrMap& a)
      : NoAttrs(a), alpha(a.GetFloat("alpha", 0.2f)), beta(a.GetFloat("beta", 0.5f)) {}
  template <class T>
  T operator()(T x) const {
    return std::max(T(0), std::min(T(1), T(alpha) * x + T(beta)));
  }
};

struct EluF : NoAttrs {
  float alpha;
  explicit EluF(const AttrMap& a) : NoAttrs(a), alpha(a.GetFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * (std::exp(x) - T(1)) : x;
  }
};

struct SeluF : NoAttrs {
  float alpha, gamma;
  explicit SeluF(const AttrMap& a)
      : NoAttrs(a),
        alpha(a.GetFloat("alpha", 1.67326319217681884765625f)),
        gamma(a.GetFloat("gamma", 1.05070102214813232421875f)) {}
  template <class T>
  T operator()(T x) const {
    return T(gamma) * (x <= T(0) ? T(alpha) * (std::exp(x) - T(1)) : x);
  }
};

struct CeluF : NoAttrs {
  float alpha;
  explicit CeluF(const AttrMap& a) : NoAttrs(a), alpha(a.GetFloat("alpha", 1.0f)) {}
  static Status Validate(const KernelContext& ctx) {
    if (ctx.attr().GetFloat("alpha", 1.0f) == 0.f) return ctx.Invalid("alpha must be nonzero");
    return Status::Ok();
  }
  template <class T>
  T operator()(T x) const {
    const T a = T(alpha);
    return std::max(T(0), x) + std::min(T(0), a * (std::exp(x / a) - T(1)));
  }
};

struct ThresholdedReluF : NoAttrs {
  float alpha;
  explicit ThresholdedReluF(const AttrMap& a) : NoAttrs(a), alpha(a.GetFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
};

struct ShrinkF : NoAttrs {
  float lambd, bias;
  explicit ShrinkF(const AttrMap& a)
      : NoAttrs(a), lambd(a.GetFloat("lambd", 0.5f)), bias(a.GetFloat("bias", 0.0f)) {}
  template <class T>
  T operator()(T x) const {
    if (x < T(-lambd)) return x + T(bias);
    if (x > T(lambd)) return x - T(bias);
    return T(0);
  }
};

struct SwishF : NoAttrs {
  float alpha;
  explicit SwishF(const AttrMap& a) : NoAttrs(a), alpha(a.GetFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x * Sigmoid(T(alpha) * x);
  }
};

struct GeluF : NoAttrs {
  bool tanh_approx;
  explicit GeluF(const AttrMap& a)
      : NoAttrs(a), tanh_approx(a.GetString("approximate", "none") == "tanh") {}
  static Status Validate(const KernelContext& ctx) {
    std::string mode = ctx.attr().GetString("approximate", "none");
    if (mode != "none" && mode != "tanh")
      return ctx.Invalid("approximate must be \"none\" or \"tanh\", got \"" + mode + "\"");
    return Status::Ok();
  }
  template <class T>
  T operator()(T x) const {
    if (tanh_approx) {
      const T k = T(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
  }
};

// float32 through the session's vectorized kernels (kernels/vmath.h) where
// the op has one: false leaves it to the scalar functor.
template <class F>
bool MapVMath(const F&, const kernels::VMathKernels&, const float*, float*, int64_t) {
  return false;
}
bool MapVMath(const SigmoidF&, const kernels::VMathKernels& k, const float* x, float* y,
              int64_t n) {
  k.sigmoid(x, y, n);
  return true;
}
bool MapVMath(const TanhF&, const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  k.tanh(x, y, n);
  return true;
}
bool MapVMath(const ExpF&, const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  k.exp(x, y, n);
  return true;
}
bool MapVMath(const LogF&, const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  k.log(x, y, n);
  return true;
}
bool MapVMath(const ErfF&, const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  k.erf(x, y, n);
  return true;
}
bool MapVMath(const GeluF& f, const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  (f.tanh_approx ? k.gelu_tanh : k.gelu)(x, y, n);
  return true;
}
bool MapVMath(const SwishF& f, const kernels::VMathKernels& k, const float* x, float* y,
              int64_t n) {
  k.swish(x, y, n, f.alpha);
  return true;
}

template <class T, class F>
void MapUnary(const F& f, const Tensor& x, Tensor& y) {
  const T* px = x.ptr<T>();
  T* py = y.ptr<T>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
}

Status CopyShape(KernelContext& ctx, DType out_dtype) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->dtype = out_dtype;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  return Status::Ok();
}

template <class F, Types kTypes>
Status InferUnary(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  QF_RETURN_IF_ERROR(F::Validate(ctx));
  const DType dt = ctx.input(0)->dtype;
  if (!Accepts(kTypes, dt)) return UnsupportedDType(ctx, dt);
  return CopyShape(ctx, dt);
}

template <class F, Types kTypes>
Status RunUnary(KernelContext& ctx) {
  const F f(ctx.attr());
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  if constexpr (kTypes == Types::kFloat) {
    if (x.dtype == DType::kFloat32) {
      const kernels::VMathKernels& vm = *ctx.kernel_config().vmath;
      // A zero-length call only asks whether the op has a vector kernel.
      if (MapVMath(f, vm, nullptr, nullptr, 0)) {
        // Chunks of whole vectors between threads: a lane's result never
        // depends on its neighbours, so any split gives the same bits.
        constexpr int64_t kChunk = 4096;
        const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
        const float* px = x.ptr<float>();
        float* py = y.ptr<float>();
        kernels::ParallelFor(chunks > 1 ? ctx.pool : nullptr, chunks,
                             [&](int64_t c0, int64_t c1, int) {
                               const int64_t b = c0 * kChunk, e = std::min(n, c1 * kChunk);
                               MapVMath(f, vm, px + b, py + b, e - b);
                             });
      } else {
        MapUnary<float>(f, x, y);
      }
    } else if (x.dtype == DType::kFloat64) {
      MapUnary<double>(f, x, y);
    } else {
      return UnsupportedDType(ctx, x.dtype);
    }
  } else {
    QF_DISPATCH_NUMERIC(x.dtype, return UnsupportedDType(ctx, x.dtype), MapUnary<T>(f, x, y));
  }
  return Status::Ok();
}

// ---- Ops with a bool output or input ----

Status InferIsNaNIsInf(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const DType dt = ctx.input(0)->dtype;
  if (!IsFloatDType(dt)) return UnsupportedDType(ctx, dt);
  return CopyShape(ctx, DType::kBool);
}

template <class T, class Pred>
void MapToBool(const Tensor& x, Tensor& y, Pred pred) {
  const T* px = x.ptr<T>();
  bool* py = y.ptr<bool>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) py[i] = pred(px[i]);
}

Status RunIsNaN(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  if (x.dtype == DType::kFloat32)
    MapToBool<float>(x, y, [](float v) { return std::isnan(v); });
  else
    MapToBool<double>(x, y, [](double v) { return std::isnan(v); });
  return Status::Ok();
}

Status RunIsInf(KernelContext& ctx) {
  const bool neg = ctx.attr().GetInt("detect_negative", 1) != 0;
  const bool pos = ctx.attr().GetInt("detect_positive", 1) != 0;
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  auto pred = [&](double v) { return std::isinf(v) && (v > 0 ? pos : neg); };
  if (x.dtype == DType::kFloat32)
    MapToBool<float>(x, y, pred);
  else
    MapToBool<double>(x, y, pred);
  return Status::Ok();
}

Status InferNot(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const DType dt = ctx.input(0)->dtype;
  if (dt != DType::kBool) return UnsupportedDType(ctx, dt);
  return CopyShape(ctx, DType::kBool);
}

Status RunNot(KernelContext& ctx) {
  MapToBool<bool>(*ctx.input(0), *ctx.output(0), [](bool v) { return !v; });
  return Status::Ok();
}

}  // namespace

// TRAITS (core/op.h): kTraitUnaryLut on the activations QDQ graphs carry
// between DequantizeLinear and QuantizeLinear; kTraitPointwise where the
// byte-wise collapse (converter/passes/collapse_bytewise.cc) has been tried.
// The trigonometric ops are point-wise too but have neither: no quantized
// model seen so far uses them, and no test covers them as tables.
#define QF_UNARY_DEF(NAME, TYPES, TRAITS)                                                   \
  const OpDef& OpDef_##NAME() {                                                             \
    static const OpDef def = [] {                                                           \
      OpDef d{#NAME, InferUnary<NAME##F, TYPES>, RunUnary<NAME##F, TYPES>, 0, false, 1, 1}; \
      d.layout = LayoutRole::kElementwise;                                                  \
      d.traits = TRAITS;                                                                    \
      return d;                                                                             \
    }();                                                                                    \
    return def;                                                                             \
  }

QF_UNARY_DEF(Relu, Types::kSignedNumeric, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Neg, Types::kSignedNumeric, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Abs, Types::kNumeric, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Sign, Types::kNumeric, kTraitPointwise)
QF_UNARY_DEF(LeakyRelu, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Sigmoid, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Tanh, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(HardSigmoid, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(HardSwish, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Erf, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Gelu, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Exp, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Log, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Sqrt, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Reciprocal, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Floor, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Ceil, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Round, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Sin, Types::kFloat, 0)
QF_UNARY_DEF(Cos, Types::kFloat, 0)
QF_UNARY_DEF(Tan, Types::kFloat, 0)
QF_UNARY_DEF(Asin, Types::kFloat, 0)
QF_UNARY_DEF(Acos, Types::kFloat, 0)
QF_UNARY_DEF(Atan, Types::kFloat, 0)
QF_UNARY_DEF(Sinh, Types::kFloat, 0)
QF_UNARY_DEF(Cosh, Types::kFloat, 0)
QF_UNARY_DEF(Asinh, Types::kFloat, 0)
QF_UNARY_DEF(Acosh, Types::kFloat, 0)
QF_UNARY_DEF(Atanh, Types::kFloat, 0)
QF_UNARY_DEF(Elu, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Selu, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Celu, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Softplus, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Softsign, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(Mish, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
QF_UNARY_DEF(ThresholdedRelu, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Shrink, Types::kFloat, kTraitPointwise)
QF_UNARY_DEF(Swish, Types::kFloat, kTraitUnaryLut | kTraitPointwise)
#undef QF_UNARY_DEF

const OpDef& OpDef_IsNaN() {
  static const OpDef def{"IsNaN", InferIsNaNIsInf, RunIsNaN, 0, false, 1, 1};
  return def;
}
const OpDef& OpDef_IsInf() {
  static const OpDef def{"IsInf", InferIsNaNIsInf, RunIsInf, 0, false, 1, 1};
  return def;
}
const OpDef& OpDef_Not() {
  static const OpDef def{"Not", InferNot, RunNot, 0, false, 1, 1};
  return def;
}

}  // namespace qfold
