// The 8-lane float vector trait the AVX2+FMA kernel families share (vmath,
// rowops_f32, binary_f32): loads, stores, arithmetic, comparisons as lane
// masks. Each family's trait derives from it and adds what its algorithm
// needs. For files compiled with -mavx2 -mfma; in an anonymous namespace, so
// each ISA file keeps its own copy with its own flags.
#pragma once
#include <immintrin.h>

namespace qfold {
namespace kernels {
namespace {

struct F32x8 {
  using F = __m256;
  using M = __m256;  // a comparison's lanes: all ones or all zeros
  static constexpr int kLanes = 8;
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  // The first n (1..8) lanes, through a buffer: vmaskmovps stores are slow
  // on AMD, and callers store a partial vector at most once per row.
  static void StoreFirst(float* p, F v, int n) {
    if (n == 8) return _mm256_storeu_ps(p, v);
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Sqrt(F a) { return _mm256_sqrt_ps(a); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  // NaN in a gives b (vminps/vmaxps): callers that care restore NaN.
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static M Less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M Equal(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M Unordered(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
  static M IsNan(F a) { return Unordered(a, a); }
  static F Select(M mask, F a, F b) { return _mm256_blendv_ps(b, a, mask); }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
