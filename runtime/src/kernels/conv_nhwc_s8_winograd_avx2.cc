// AVX2 transforms of the exact integer Winograd F(2x2, 3x3)
// (conv_nhwc_s8_winograd.h): 16 channels per vector in, 8 out; the channels
// past the last whole vector take the same integer operations one at a time.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/conv_nhwc_s8_winograd.h"
#include "kernels/conv_nhwc_s8_winograd_impl.h"

namespace qfold {
namespace kernels {
namespace {

void InputAvx2(const uint8_t* const* d, int64_t c, int64_t cp, uint8_t xmask, int32_t x_zp_u,
               int16_t* v, int64_t v_stride) {
  const __m128i mask = _mm_set1_epi8(char(xmask));
  const __m256i zp = _mm256_set1_epi16(int16_t(x_zp_u));
  const __m256i zero = _mm256_setzero_si256();
  int64_t ch = 0;
  for (; ch + 16 <= c; ch += 16) {
    InputTile<__m256i>(
        [&](int i) {
          if (!d[i]) return zero;
          const __m128i b =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d[i] + ch)), mask);
          return _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), zp);
        },
        [](__m256i a, __m256i b) { return _mm256_add_epi16(a, b); },
        [](__m256i a, __m256i b) { return _mm256_sub_epi16(a, b); },
        [&](int xi, __m256i r) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + xi * v_stride + ch), r);
        });
  }
  InputTail(d, ch, c, cp, xmask, x_zp_u, v, v_stride);
}

// The 4 sums A^T M A (times 4) of channels [ch, ch + 8).
inline void SumsAvx2(const int32_t* m_sums, int64_t m_stride, int64_t ch, __m256i (&out)[4]) {
  OutputTile<__m256i>(
      [&](int xi) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m_sums + xi * m_stride + ch));
      },
      [](__m256i a, __m256i b) { return _mm256_add_epi32(a, b); },
      [](__m256i a, __m256i b) { return _mm256_sub_epi32(a, b); }, out);
}

void OutputAvx2(const int32_t* m_sums, int64_t m_stride, int64_t m, const int32_t* bias,
                const float* mult, int32_t yzp, int32_t lo, int32_t hi, uint8_t* const* y) {
  const __m256 flo = _mm256_set1_ps(float(lo - yzp)), fhi = _mm256_set1_ps(float(hi - yzp));
  const __m256i vzp = _mm256_set1_epi32(yzp);
  int64_t ch = 0;
  for (; ch + 8 <= m; ch += 8) {
    __m256i out[4];
    SumsAvx2(m_sums, m_stride, ch, out);
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + ch));
    const __m256 mu = _mm256_loadu_ps(mult + ch);
    for (int o = 0; o < 4; ++o) {
      if (!y[o]) continue;
      const __m256i acc = _mm256_add_epi32(_mm256_srai_epi32(out[o], 2), b);
      __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), mu);
      f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
      f = _mm256_min_ps(_mm256_max_ps(f, flo), fhi);
      const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), vzp);
      __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      p = _mm_packus_epi16(_mm_and_si128(p, _mm_set1_epi16(0xff)), p);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y[o] + ch), p);
    }
  }
  for (; ch < m; ++ch) OutputChannel(m_sums, m_stride, ch, bias, mult, yzp, lo, hi, y);
}

void OutputFloatAvx2(const int32_t* m_sums, int64_t m_stride, int64_t m, const float* mult,
                     const float* bias, float lo, float hi, float* const* y) {
  const __m256 flo = _mm256_set1_ps(lo), fhi = _mm256_set1_ps(hi);
  int64_t ch = 0;
  for (; ch + 8 <= m; ch += 8) {
    __m256i out[4];
    SumsAvx2(m_sums, m_stride, ch, out);
    const __m256 mu = _mm256_loadu_ps(mult + ch), b = _mm256_loadu_ps(bias + ch);
    for (int o = 0; o < 4; ++o) {
      if (!y[o]) continue;
      // One fused rounding as std::fma; max/min in this operand order let
      // NaN through like the reference's comparisons.
      const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(out[o], 2)), mu, b);
      _mm256_storeu_ps(y[o] + ch, _mm256_min_ps(fhi, _mm256_max_ps(flo, f)));
    }
  }
  for (; ch < m; ++ch) OutputChannelFloat(m_sums, m_stride, ch, mult, bias, lo, hi, y);
}

}  // namespace

extern const WinogradS8Transforms kWinogradS8Avx2;
const WinogradS8Transforms kWinogradS8Avx2 = {InputAvx2, OutputAvx2, OutputFloatAvx2, nullptr};

}  // namespace kernels
}  // namespace qfold
