// AVX2+FMA vmath kernels (vmath.h): the shared algorithm over 8-lane vectors.
#include <immintrin.h>

#include "kernels/vmath.h"
#include "kernels/vmath_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V8 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  // NaN in a gives b: callers restore NaN at the end.
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static F Round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F Pow2(F n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static F Less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F Equal(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static F IsNan(F a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static F Exponent(F a) {
    const __m256i bits = _mm256_srli_epi32(_mm256_castps_si256(a), 23);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(bits, _mm256_set1_epi32(127)));
  }
  static F Mantissa(F a) {
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x007fffff));
    return _mm256_castsi256_ps(_mm256_or_si256(bits, _mm256_set1_epi32(0x3f800000)));
  }
  static bool All(F mask) { return _mm256_movemask_ps(mask) == 0xff; }
  static F Select(F mask, F a, F b) { return _mm256_blendv_ps(b, a, mask); }
  static F CopySign(F mag, F sgn) {
    const F sign = _mm256_set1_ps(-0.f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
  }
};

using K = vmath::Kernels<V8>;

}  // namespace

// Softmax's exponentials and their sum on 8 lanes, also the AVX-512 variant's
// (vmath_avx512f.cc): the sum's order follows the lane count.
float ExpShiftSumAvx2(const float* x, float* y, int64_t n, float shift) {
  return K::ExpShiftSum(x, y, n, shift);
}

extern const VMathKernels kVMathAvx2;
const VMathKernels kVMathAvx2 = {"avx2",  K::Sigmoid,  K::Tanh,  K::Exp, K::Log,        K::Erf,
                                 K::Gelu, K::GeluTanh, K::Swish, K::Max, K::ExpShiftSum};

}  // namespace kernels
}  // namespace qfold
