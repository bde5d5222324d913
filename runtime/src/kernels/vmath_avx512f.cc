// AVX-512F vmath kernels (vmath.h): the shared algorithm over 16-lane vectors,
// comparisons in mask registers. Lane for lane the same operations as the
// AVX2 variant, so the results are identical to it (Softmax's sum, whose
// order would follow the lane count, is the AVX2 variant's own, below).
#include <immintrin.h>

#include <cmath>

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
  // One rounding of the exact p 2^n (vscalefps), as ScalePow2TwoSteps.
  static F ScalePow2(F p, F n) { return _mm512_scalef_ps(p, n); }
  static bool All(M mask) { return mask == M(0xffff); }
  static bool None(M mask) { return mask == 0; }
  static F CopySign(F mag, F sgn) {
    const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(sign, _mm512_castps_si512(sgn))));
  }
};

using K = vmath::Kernels<V16>;

}  // namespace

namespace {

// Softmax's sum of exponentials stays the AVX2 variant's (vmath_impl.h
// ExpShiftSum on 8 lanes): on 16 lanes it would add in another order, a
// last-bit change in every Softmax that moved a dynamically quantized
// transformer (e2e_dynamic_quant_detected) by one quantization step. The
// exponentials themselves run on 16 lanes, four vectors at a time (one
// vector's exp is a chain of latencies: on 8 lanes, one at a time, PP-OCRv4
// rec's 40 x 6625 Softmax took 0.12 ms), lane for lane the AVX2 variant's
// values, and their 8-lane halves go into the one 8-lane sum in element order.
float ExpShiftSum(const float* x, float* y, int64_t n, float shift) {
  const __m512 vs = _mm512_set1_ps(shift), ninf = _mm512_set1_ps(-INFINITY);
  __m256 acc = _mm256_setzero_ps();
  auto exp16 = [&](__m512 v) { return vmath::ExpFull<V16>(_mm512_sub_ps(v, vs)); };
  auto add_halves = [&](__m512 e) {
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
    acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 e[4];
    for (int u = 0; u < 4; ++u) e[u] = exp16(_mm512_loadu_ps(x + i + 16 * u));
    for (int u = 0; u < 4; ++u) {
      _mm512_storeu_ps(y + i + 16 * u, e[u]);
      add_halves(e[u]);
    }
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_loadu_ps(x + i));
    _mm512_storeu_ps(y + i, e);
    add_halves(e);
  }
  if (i + 8 <= n) {  // the last whole 8-lane vector
    const __m512 e = exp16(_mm512_mask_loadu_ps(ninf, 0x00ff, x + i));
    _mm512_mask_storeu_ps(y + i, 0x00ff, e);
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
    i += 8;
  }
  float buf[8];
  _mm256_storeu_ps(buf, acc);
  float sum = 0.f;
  for (int k = 0; k < 8; ++k) sum += buf[k];
  if (i < n) {  // fewer than 8: -inf in the other lanes, as the AVX2 variant's tail
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m512 e = exp16(_mm512_mask_loadu_ps(ninf, m, x + i));
    _mm512_mask_storeu_ps(y + i, m, e);
    float tail[16];
    _mm512_storeu_ps(tail, e);
    for (int64_t k = 0; k < n - i; ++k) sum += tail[k];
  }
  return sum;
}

}  // namespace

// Every function gives the AVX2 variant's bits (ExpShiftSum: above).
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
                                    ExpShiftSum,
                                    K::Lrn,
                                    K::LrnChannelsLast,
                                    K::HardSwish,
                                    K::Affine};

}  // namespace kernels
}  // namespace qfold
