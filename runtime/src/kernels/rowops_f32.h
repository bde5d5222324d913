// Float32 row kernels of transformer blocks: LayerNormalization over the last
// axes, sums of rows (ReduceSum/ReduceMean/ReduceSumSquare over trailing
// axes) and the scaling pass of Softmax. One algorithm (rowops_f32_impl.h)
// over a vector trait, instantiated by rowops_f32_avx2.cc (8 lanes),
// rowops_f32_avx512f.cc (16) and rowops_f32_neon.cc (4 lanes); without SIMD the ops run their
// reference loops (statistics in double, ops/norm.cc and ops/reduce.cc), which are the oracle.
//
// Sums accumulate in float, in 4 vector accumulators (lane j of accumulator a
// takes elements i = j (mod lanes), (i / lanes) = a (mod 4)), a zero-padded
// last vector, then a tree over accumulators and lanes: each element passes
// through at most k = ceil(n / (4 lanes)) + 2 + log2(lanes) additions, so
// |sum - exact| <= k u sum|x| (u = 2^-24; docs/NUMERICS.md gives the
// LayerNormalization bound that follows).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/gemm_f32.h"  // F32Act

namespace qfold {
namespace kernels {

struct RowOpsF32Kernels {
  int lanes;  // of one vector (the error bound's accumulation depth depends on it)
  // Sum of x[0..n) (0 for n = 0).
  float (*sum)(const float* x, int64_t n);
  // Sum of x[i]^2.
  float (*sum_squares)(const float* x, int64_t n);
  // One row of LayerNormalization: mean, then the population variance as the
  // mean of (x - mean)^2 (a second pass: no cancellation), inv_std =
  // 1 / sqrt(var + eps), y = (x - mean) * (inv_std * scale) + bias. scale and
  // bias (null: none) have n contiguous values. *mean and *inv_std receive the
  // statistics (ONNX's optional outputs). y may alias x.
  void (*layer_norm)(const float* x, float* y, int64_t n, const float* scale, const float* bias,
                     float eps, float* mean, float* inv_std);
  // y = x * s (y may alias x).
  void (*scale)(const float* x, float* y, int64_t n, float s);
  // BatchNormalization's map, per channel i < cols of `rows` rows:
  //   y[r * ldy + i] = act(fma(x[r * ldx + i] - sub[i], mul[i], add[i]))
  // one fused multiply-add, as the reference (ops/norm.cc), so every variant
  // and layout gives the same bits; act as the GEMM epilogue's (gemm_f32.h).
  // y may alias x.
  void (*channel_affine)(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows,
                         int64_t cols, const float* sub, const float* mul, const float* add,
                         F32Act act, float lo, float hi);
  // The same with one channel's values for all n elements (a channels-first plane).
  void (*plane_affine)(const float* x, float* y, int64_t n, float sub, float mul, float add,
                       F32Act act, float lo, float hi);
  // acc[i] += x[r * c + i] for r < rows, i < c, in double, one row after the
  // other: each channel's sum in the reference's order (a channels-last
  // GlobalAveragePool, ops/pool.cc), so the same bits.
  void (*sum_columns_f64)(const float* x, int64_t rows, int64_t c, double* acc);
};

// act(fma(v - sub, mul, add)) for one element: the reference of both
// affine kernels above.
inline float ChannelAffineRef(float v, float sub, float mul, float add, F32Act act, float lo,
                              float hi) {
  const float r = std::fma(v - sub, mul, add);
  if (act == F32Act::kRelu) return r > 0.f ? r : 0.f;
  if (act == F32Act::kClamp) return r < lo ? lo : (r > hi ? hi : r);
  return r;
}

// The variant `f` allows, or null without SIMD (the ops' reference loops).
// *variant (if given): its name or nullptr.
const RowOpsF32Kernels* RowOpsF32For(const CpuFeatures& f, const char** variant = nullptr);

// Additions k an element of a row of n passes through in the sums above
// (the error bound's k): ceil(n / (4 lanes)) + 2 + log2(lanes).
inline int64_t RowSumDepth(const RowOpsF32Kernels& k, int64_t n) {
  int64_t log2_lanes = 0;
  while ((int64_t(1) << log2_lanes) < k.lanes) ++log2_lanes;
  return (n + 4 * k.lanes - 1) / (4 * k.lanes) + 2 + log2_lanes;
}

}  // namespace kernels
}  // namespace qfold
