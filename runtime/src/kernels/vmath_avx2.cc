// AVX2+FMA vmath kernels (vmath.h): the shared algorithm over 8-lane vectors.
#include <immintrin.h>

#include "kernels/vec_f32_avx2.h"
#include "kernels/vmath.h"
#include "kernels/vmath_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V8 : F32x8 {
  static F Abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static F Round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F Pow2(F n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static F Exponent(F a) {
    const __m256i bits = _mm256_srli_epi32(_mm256_castps_si256(a), 23);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(bits, _mm256_set1_epi32(127)));
  }
  static F Mantissa(F a) {
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x007fffff));
    return _mm256_castsi256_ps(_mm256_or_si256(bits, _mm256_set1_epi32(0x3f800000)));
  }
  static F ScalePow2(F p, F n) { return vmath::ScalePow2TwoSteps<V8>(p, n); }
  static bool All(F mask) { return _mm256_movemask_ps(mask) == 0xff; }
  static bool None(F mask) { return _mm256_movemask_ps(mask) == 0; }
  static F CopySign(F mag, F sgn) {
    const F sign = _mm256_set1_ps(-0.f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
  }
};

using K = vmath::Kernels<V8>;

}  // namespace

extern const VMathKernels kVMathAvx2;
const VMathKernels kVMathAvx2 = {"avx2",
                                 K::Sigmoid,
                                 K::Tanh,
                                 K::Exp,
                                 K::Log,
                                 K::Erf,
                                 K::Gelu,
                                 K::GeluTanh,
                                 K::Swish,
                                 K::Max,
                                 K::ExpShiftSum,
                                 K::Lrn,
                                 K::LrnChannelsLast,
                                 K::HardSwish,
                                 K::Affine};

}  // namespace kernels
}  // namespace qfold
