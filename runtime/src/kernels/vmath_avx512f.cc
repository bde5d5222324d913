// AVX-512F vmath kernels (vmath.h): the shared algorithm over 16-lane vectors,
// comparisons in mask registers. Lane for lane the same operations as the
// AVX2 variant, so the results are identical to it (Softmax's sum, whose
// order would follow the lane count, is the AVX2 variant's own, below).
#include <immintrin.h>

#include "kernels/vec_f32_avx512f.h"
#include "kernels/vmath.h"
#include "kernels/vmath_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V16 : F32x16 {
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
  static F Exponent(F a) {
    const __m512i bits = _mm512_srli_epi32(_mm512_castps_si512(a), 23);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(bits, _mm512_set1_epi32(127)));
  }
  static F Mantissa(F a) {
    const __m512i bits = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x007fffff));
    return _mm512_castsi512_ps(_mm512_or_si512(bits, _mm512_set1_epi32(0x3f800000)));
  }
  static bool All(M mask) { return mask == M(0xffff); }
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
const VMathKernels kVMathAvx512f = {"avx512f",
                                    K::Sigmoid,
                                    K::Tanh,
                                    K::Exp,
                                    K::Log,
                                    K::Erf,
                                    K::Gelu,
                                    K::GeluTanh,
                                    K::Swish,
                                    K::Max,
                                    ExpShiftSumAvx2,
                                    K::Lrn,
                                    K::LrnChannelsLast,
                                    K::HardSwish,
                                    K::Affine};

}  // namespace kernels
}  // namespace qfold
