// Vectorized transcendental functions over float arrays: the gate
// activations of the recurrent ops (ops/recurrent.cc). Naming follows
// <dtype>_<op>_<isa>: vmath.cc holds the reference (libm) and the choice of
// level, vmath_avx2.cc and vmath_neon.cc the SIMD variants, which share one
// algorithm (vmath_impl.h) written over a small vector trait.
//
// Error of the SIMD variants against the exact function, measured by the unit
// test "kernels: vmath" over a dense sweep of inputs (docs/NUMERICS.md):
//   sigmoid, tanh: at most a few ulp relative where |y| >= FLT_MIN; sigmoid
//   below -87.34 (exact result under FLT_MIN) returns at most FLT_MIN.
// NaN in gives NaN out; +-inf give the limits.
#pragma once
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

struct VMathKernels {
  Isa isa;
  // y[i] = 1 / (1 + exp(-x[i])); y may alias x.
  void (*sigmoid)(const float* x, float* y, int64_t n);
  // y[i] = tanh(x[i]); y may alias x.
  void (*tanh)(const float* x, float* y, int64_t n);
};

// The kernels of `isa`, or the reference ones when the level has none
// (never null).
const VMathKernels& VMathFor(Isa isa);
// The variant `f` allows (never null: the reference one without SIMD).
const VMathKernels* VMathFor(const CpuFeatures& f, const char** variant);

}  // namespace kernels
}  // namespace qfold
