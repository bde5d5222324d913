// 16-bit (int16/uint16) QuantizeLinear/DequantizeLinear bodies for the x86
// quant_s8 files (AVX2 instructions; included by every x86 level's file so
// each compiles them with its own flags). Bit-identical to the reference:
// true division, half-to-even rounding, clamping in float after adding the
// zero point (exact: |values| < 2^24), NaN to the zero point.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/quant_s8_ref.h"

namespace qfold {
namespace kernels {
namespace {

// Rounds q half to even (NaN -> 0), adds the zero point and clamps.
inline __m256i Q16Round8(__m256 q, __m256 zpf, __m256 lof, __m256 hif) {
  q = _mm256_and_ps(q, _mm256_cmp_ps(q, q, _CMP_ORD_Q));
  __m256 t = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, zpf), lof), hif);
  return _mm256_cvttps_epi32(t);
}

inline __m256i Q16Quantize8(__m256 x, __m256 s, __m256 zpf, __m256 lof, __m256 hif) {
  return Q16Round8(_mm256_div_ps(x, s), zpf, lof, hif);
}

template <bool kSigned>
inline void Q16Store8(void* y, int64_t i, __m256i v) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  // Values are already within the 16-bit type's range, so the packs are exact.
  const __m128i w = kSigned ? _mm_packs_epi32(lo, hi) : _mm_packus_epi32(lo, hi);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(y) + i), w);
}

template <bool kSigned>
inline __m256 Q16Load8(const void* x, int64_t i) {
  const __m128i w =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + i));
  return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi16_epi32(w) : _mm256_cvtepu16_epi32(w));
}

inline int32_t Q16Load(const void* p, int64_t i, bool is_signed) {
  return is_signed ? int32_t(static_cast<const int16_t*>(p)[i])
                   : int32_t(static_cast<const uint16_t*>(p)[i]);
}

template <bool kSigned, bool kPerElem>
void Quantize16T(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                 int32_t lo, int32_t hi) {
  const __m256 lof = _mm256_set1_ps(float(lo)), hif = _mm256_set1_ps(float(hi));
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(zpf[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (kPerElem) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_loadu_ps(zpf + i);
    }
    Q16Store8<kSigned>(y, i, Q16Quantize8(_mm256_loadu_ps(x + i), s, z, lof, hif));
  }
  for (; i < n; ++i) {
    const int64_t p = kPerElem ? i : 0;
    const int32_t v = QS8RoundAddSaturate(x[i] / scale[p], int32_t(zpf[p]), lo, hi);
    static_cast<uint16_t*>(y)[i] = uint16_t(v);  // two's complement: int16 too
  }
}

void Quantize16(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                bool per_elem, int32_t lo, int32_t hi, bool is_signed) {
  if (is_signed)
    per_elem ? Quantize16T<true, true>(x, y, n, scale, zpf, lo, hi)
             : Quantize16T<true, false>(x, y, n, scale, zpf, lo, hi);
  else
    per_elem ? Quantize16T<false, true>(x, y, n, scale, zpf, lo, hi)
             : Quantize16T<false, false>(x, y, n, scale, zpf, lo, hi);
}

template <bool kSigned, bool kPerElem>
void Dequantize16T(const void* x, float* y, int64_t n, const float* scale, const float* zpf) {
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(zpf[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (kPerElem) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_loadu_ps(zpf + i);
    }
    // x - zp is exact in float (|x - zp| < 2^17), so this is float(x - zp) * scale.
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(Q16Load8<kSigned>(x, i), z), s));
  }
  for (; i < n; ++i) {
    const int64_t p = kPerElem ? i : 0;
    y[i] = float(Q16Load(x, i, kSigned) - int32_t(zpf[p])) * scale[p];
  }
}

void Dequantize16(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                  bool per_elem, bool is_signed) {
  if (is_signed)
    per_elem ? Dequantize16T<true, true>(x, y, n, scale, zpf)
             : Dequantize16T<true, false>(x, y, n, scale, zpf);
  else
    per_elem ? Dequantize16T<false, true>(x, y, n, scale, zpf)
             : Dequantize16T<false, false>(x, y, n, scale, zpf);
}

// One element of the 16-bit binary op, as the reference computes it.
inline void Q16BinaryScalar(const QBinaryS8Params& p, const void* a, int a_step, const void* b,
                            int b_step, void* y, int64_t begin, int64_t end) {
  const float fa = p.a_factor(), fb = p.b_factor();
  for (int64_t i = begin; i < end; ++i) {
    const float va = float(Q16Load(a, i * a_step, p.is_signed) - p.a_zp) * fa;
    const float vb = float(Q16Load(b, i * b_step, p.is_signed) - p.b_zp) * fb;
    static_cast<uint16_t*>(y)[i] =
        uint16_t(QS8RoundAddSaturate(p.Combine(va, vb), p.c_zp, p.lo, p.hi));
  }
}

template <bool kSigned, bool kMul, bool kA, bool kB>
void Binary16T(const QBinaryS8Params& p, const void* a, const void* b, void* y, int64_t n) {
  if (n <= 0) return;
  const __m256 sa = _mm256_set1_ps(p.a_factor()), za = _mm256_set1_ps(float(p.a_zp));
  const __m256 sb = _mm256_set1_ps(p.b_factor()), zb = _mm256_set1_ps(float(p.b_zp));
  const __m256 sm = _mm256_set1_ps(p.mul_factor()), zc = _mm256_set1_ps(float(p.c_zp));
  const __m256 lof = _mm256_set1_ps(float(p.lo)), hif = _mm256_set1_ps(float(p.hi));
  // A broadcast operand's value, computed once as the scalar code does.
  const __m256 va0 = _mm256_set1_ps(float(Q16Load(a, 0, kSigned) - p.a_zp) * p.a_factor());
  const __m256 vb0 = _mm256_set1_ps(float(Q16Load(b, 0, kSigned) - p.b_zp) * p.b_factor());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 va = kA ? _mm256_mul_ps(_mm256_sub_ps(Q16Load8<kSigned>(a, i), za), sa) : va0;
    const __m256 vb = kB ? _mm256_mul_ps(_mm256_sub_ps(Q16Load8<kSigned>(b, i), zb), sb) : vb0;
    const __m256 v = kMul ? _mm256_mul_ps(_mm256_mul_ps(va, vb), sm) : _mm256_add_ps(va, vb);
    Q16Store8<kSigned>(y, i, Q16Round8(v, zc, lof, hif));
  }
  Q16BinaryScalar(p, a, kA ? 1 : 0, b, kB ? 1 : 0, y, i, n);
}

template <bool kSigned, bool kMul>
void Binary16S(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
               void* y, int64_t n) {
  if (a_step && b_step)
    Binary16T<kSigned, kMul, true, true>(p, a, b, y, n);
  else if (a_step)
    Binary16T<kSigned, kMul, true, false>(p, a, b, y, n);
  else if (b_step)
    Binary16T<kSigned, kMul, false, true>(p, a, b, y, n);
  else
    Q16BinaryScalar(p, a, 0, b, 0, y, 0, n);
}

void Binary16(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
              void* y, int64_t n) {
  if (p.is_signed)
    p.mul ? Binary16S<true, true>(p, a, a_step, b, b_step, y, n)
          : Binary16S<true, false>(p, a, a_step, b, b_step, y, n);
  else
    p.mul ? Binary16S<false, true>(p, a, a_step, b, b_step, y, n)
          : Binary16S<false, false>(p, a, a_step, b, b_step, y, n);
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
