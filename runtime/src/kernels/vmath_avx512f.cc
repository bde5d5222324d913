// AVX-512F vmath kernels (vmath.h): the shared algorithm over 16-lane vectors,
// comparisons in mask registers. Lane for lane the same operations as the
// AVX2 variant, so the results are identical to it (Softmax's sum, whose
// order would follow the lane count, is the AVX2 variant's own, below).
#include <immintrin.h>

#include "kernels/vmath.h"
#include "kernels/vmath_impl.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics as
// maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct V16 {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // NaN in a gives b, as vminps/vmaxps on ymm: callers restore NaN at the end.
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Abs(F a) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static F Round(F a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F Pow2(F n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static M Less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M Equal(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M IsNan(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static F Exponent(F a) {
    const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(a), 23);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(bits, _mm512_set1_epi32(127)));
  }
  static F Mantissa(F a) {
    const __m512i bits = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x007fffff));
    return _mm512_castsi512_ps(_mm512_or_si512(bits, _mm512_set1_epi32(0x3f800000)));
  }
  static bool All(M mask) { return mask == M(0xffff); }
  static F Select(M mask, F a, F b) { return _mm512_mask_blend_ps(mask, b, a); }
  static F CopySign(F mag, F sgn) {
    const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(sign, _mm512_castps_si512(sgn))));
  }
};

using K = vmath::Kernels<V16>;

}  // namespace

float ExpShiftSumAvx2(const float* x, float* y, int64_t n, float shift);  // vmath_avx2.cc

// Softmax's sum of exponentials stays the AVX2 variant's: on 16 lanes it would
// add in another order, a last-bit change in every Softmax that moved a
// dynamically quantized transformer (e2e_dynamic_quant_detected) by one
// quantization step. Every other function gives the AVX2 variant's bits.
extern const VMathKernels kVMathAvx512f;
const VMathKernels kVMathAvx512f = {"avx512f", K::Sigmoid, K::Tanh,        K::Exp,
                                    K::Log,    K::Erf,     K::Gelu,        K::GeluTanh,
                                    K::Swish,  K::Max,     ExpShiftSumAvx2};

}  // namespace kernels
}  // namespace qfold
