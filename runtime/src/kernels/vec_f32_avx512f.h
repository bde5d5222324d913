// The 16-lane float vector trait the AVX-512F kernel families share (vmath,
// rowops_f32, binary_f32): the same operations as F32x8 (vec_f32_avx2.h) on
// zmm, comparisons in mask registers. For files compiled with -mavx512f; in an
// anonymous namespace, so each ISA file keeps its own copy with its own flags.
#pragma once
#include <immintrin.h>

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics as
// (maybe-)uninitialized: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct F32x16 {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  // The first n (1..16) lanes.
  static void StoreFirst(float* p, F v, int n) {
    _mm512_mask_storeu_ps(p, __mmask16(n >= 16 ? 0xffff : (1u << n) - 1), v);
  }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Sqrt(F a) { return _mm512_sqrt_ps(a); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // NaN in a gives b, as on ymm: callers that care restore NaN.
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static M Less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M Equal(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M Unordered(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static M IsNan(F a) { return Unordered(a, a); }
  static F Select(M mask, F a, F b) { return _mm512_mask_blend_ps(mask, b, a); }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
