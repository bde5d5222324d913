// Vectorized transcendental functions over float arrays: the float unary ops
// (Exp, Log, Erf, Sigmoid, Tanh, Gelu, Swish), Softmax, the activations fused
// into Conv/Gemm/MatMul (core/activation.h) and the recurrent gates. Naming
// follows <dtype>_<op>_<isa>: vmath.cc holds the reference (libm) and the
// choice of variant, vmath_avx2.cc, vmath_avx512f.cc and vmath_neon.cc the SIMD
// variants, which share one algorithm (vmath_impl.h) written over a small
// vector trait.
//
// Error of the SIMD variants against the exact function, measured by the unit
// test "kernels: vmath" over a dense sweep of inputs (docs/NUMERICS.md): at
// most a few ulp relative where the exact result is at least FLT_MIN (exp and
// sigmoid underflow gradually below it), absolute below 2e-7 elsewhere.
// NaN in gives NaN out; +-inf give the limits (log(+inf) = inf, log(0) = -inf,
// log(x < 0) = NaN, gelu(-inf) = -0).
#pragma once
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

// y may alias x in every function.
struct VMathKernels {
  const char* name;  // the features it needs ("avx2" = AVX2 + FMA), or "reference"
  void (*sigmoid)(const float* x, float* y, int64_t n);  // 1 / (1 + exp(-x))
  void (*tanh)(const float* x, float* y, int64_t n);
  void (*exp)(const float* x, float* y, int64_t n);
  void (*log)(const float* x, float* y, int64_t n);
  void (*erf)(const float* x, float* y, int64_t n);
  // x Phi(x) = 0.5 x (1 + erf(x / sqrt2)), without its cancellation for x < 0.
  void (*gelu)(const float* x, float* y, int64_t n);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as x sigmoid(2 tanh's argument).
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
  // x sigmoid(alpha x) (SiLU with alpha 1).
  void (*swish)(const float* x, float* y, int64_t n, float alpha);
  // max(x[0..n)), NaN ignored; -inf for n = 0.
  float (*max)(const float* x, int64_t n);
  // y = exp(x - shift); returns the sum of y (Softmax's numerator and denominator).
  float (*exp_shift_sum)(const float* x, float* y, int64_t n, float shift);
  // LRN of one plane: y = xc * d^nbeta with d = fma(scale, s, bias), s the
  // sum of x0[k * stride]^2 over k in [0, count) as s = fma(x, x, s) in k
  // order; d^nbeta = exp(nbeta * log(d)) with the variant's log and exp, or
  // for nbeta = -0.75 y = xc / (sqrt(d) * sqrt(sqrt(d))). Every variant the
  // same steps (explicit fused multiply-adds: no compiler contraction decides).
  void (*lrn)(const float* x0, int64_t stride, int64_t count, const float* xc, float* y, int64_t n,
              float bias, float scale, float nbeta);
  // LRN of `rows` rows of c channels (channels-last): channel ch's window is
  // [ch - before, ch + after] clipped to the row, summed in channel order;
  // otherwise the steps of lrn, so both layouts give the same bits.
  // before + after + 1 (the LRN size) at most kLrnMaxChannelsLastSize.
  void (*lrn_channels_last)(const float* x, float* y, int64_t rows, int64_t c, int64_t before,
                            int64_t after, float bias, float scale, float nbeta);
  // HardSwish, x * max(0, min(1, x * (1/6) + 0.5)), then with `affine`
  // y * scale + shift: every step rounded as the scalar code rounds it, so
  // every variant gives the reference's bits (a fused activation's pass over
  // a convolution's rows).
  void (*hardswish)(const float* x, float* y, int64_t n, bool affine, float scale, float shift);
  // y = x * scale + shift, each step rounded.
  void (*affine)(const float* x, float* y, int64_t n, float scale, float shift);
};

// `v` as computed, hidden from the optimizer: a product passed through it is
// rounded before the sum it feeds (GCC contracts a * b + c into one fused
// multiply-add in C++ wherever the target has one, which would round once).
template <class T>
inline T Rounded(T v) {
#if defined(QFOLD_EMULATED_X86)  // SIMDe's vector structs live in memory
  __asm__("" : "+m"(v));
#elif defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+v"(v));
#elif defined(__aarch64__)
  __asm__("" : "+w"(v));
#endif
  return v;
}

// The largest LRN size the channels-last kernels take.
constexpr int64_t kLrnMaxChannelsLastSize = 32;

// The kernels the named feature set `isa` allows (the reference ones when it
// has no SIMD; never null).
const VMathKernels& VMathFor(Isa isa);
// The variant `f` allows (never null: the reference one without SIMD).
const VMathKernels* VMathFor(const CpuFeatures& f, const char** variant);

}  // namespace kernels
}  // namespace qfold
