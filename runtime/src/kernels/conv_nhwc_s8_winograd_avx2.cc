// AVX2 transforms of the exact integer Winograd F(2x2, 3x3)
// (conv_nhwc_s8_winograd.h): 16 channels per vector in, 8 out; the channels
// past the last whole vector take the same integer operations one at a time.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/conv_nhwc_s8_winograd.h"

namespace qfold {
namespace kernels {
namespace {

// V = B^T d B for one lane type: Load(i) gives patch pixel i (row-major).
template <class T, class Load, class Add, class Sub, class Store>
inline void InputTile(const Load& load, const Add& add, const Sub& sub, const Store& store) {
  T t[4][4];  // (B^T d)[i][j]
  for (int j = 0; j < 4; ++j) {
    const T d0 = load(j), d1 = load(4 + j), d2 = load(8 + j), d3 = load(12 + j);
    t[0][j] = sub(d0, d2);
    t[1][j] = add(d1, d2);
    t[2][j] = sub(d2, d1);
    t[3][j] = sub(d1, d3);
  }
  for (int i = 0; i < 4; ++i) {
    store(i * 4 + 0, sub(t[i][0], t[i][2]));
    store(i * 4 + 1, add(t[i][1], t[i][2]));
    store(i * 4 + 2, sub(t[i][2], t[i][1]));
    store(i * 4 + 3, sub(t[i][1], t[i][3]));
  }
}

// The 4 sums A^T M A (times 4) for one lane type, out[a * 2 + e].
template <class T, class Load, class Add, class Sub>
inline void OutputTile(const Load& load, const Add& add, const Sub& sub, T (&out)[4]) {
  T s[2][4];  // (A^T M)[a][j]
  for (int j = 0; j < 4; ++j) {
    const T m0 = load(j), m1 = load(4 + j), m2 = load(8 + j), m3 = load(12 + j);
    s[0][j] = add(add(m0, m1), m2);
    s[1][j] = sub(sub(m1, m2), m3);
  }
  for (int a = 0; a < 2; ++a) {
    out[a * 2] = add(add(s[a][0], s[a][1]), s[a][2]);
    out[a * 2 + 1] = sub(sub(s[a][1], s[a][2]), s[a][3]);
  }
}

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
  for (; ch < cp; ++ch) {
    if (ch >= c) {
      for (int xi = 0; xi < 16; ++xi) v[xi * v_stride + ch] = 0;
      continue;
    }
    InputTile<int32_t>(
        [&](int i) { return d[i] ? int32_t(uint8_t(d[i][ch] ^ xmask)) - x_zp_u : 0; },
        [](int32_t a, int32_t b) { return a + b; }, [](int32_t a, int32_t b) { return a - b; },
        [&](int xi, int32_t r) { v[xi * v_stride + ch] = int16_t(r); });
  }
}

// The reference's rule (Requantize): clamp(nearbyint(f) + zp, lo, hi), NaN
// to the zero point.
inline uint8_t RequantScalar(int32_t acc, float mult, int32_t zp, int32_t lo, int32_t hi) {
  const float f = float(acc) * mult;
  if (std::isnan(f)) return uint8_t(zp < lo ? lo : (zp > hi ? hi : zp));
  const float r = std::nearbyint(f);
  if (r <= float(lo - zp)) return uint8_t(lo);
  if (r >= float(hi - zp)) return uint8_t(hi);
  return uint8_t(int32_t(r) + zp);
}

void OutputAvx2(const int32_t* m_sums, int64_t m_stride, int64_t m, const int32_t* bias,
                const float* mult, int32_t yzp, int32_t lo, int32_t hi, uint8_t* const* y) {
  const __m256 flo = _mm256_set1_ps(float(lo - yzp)), fhi = _mm256_set1_ps(float(hi - yzp));
  const __m256i vzp = _mm256_set1_epi32(yzp);
  int64_t ch = 0;
  for (; ch + 8 <= m; ch += 8) {
    __m256i out[4];
    OutputTile<__m256i>(
        [&](int xi) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m_sums + xi * m_stride + ch));
        },
        [](__m256i a, __m256i b) { return _mm256_add_epi32(a, b); },
        [](__m256i a, __m256i b) { return _mm256_sub_epi32(a, b); }, out);
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
  for (; ch < m; ++ch) {
    uint32_t out[4];  // unsigned: the sums wrap like the vector lanes
    OutputTile<uint32_t>([&](int xi) { return uint32_t(m_sums[xi * m_stride + ch]); },
                         [](uint32_t a, uint32_t b) { return a + b; },
                         [](uint32_t a, uint32_t b) { return a - b; }, out);
    for (int o = 0; o < 4; ++o) {
      if (!y[o]) continue;
      // 4 * the sum, which fits in 30 bits: an arithmetic shift recovers it.
      const int32_t sum = int32_t(out[o]) / 4;
      y[o][ch] = RequantScalar(int32_t(uint32_t(sum) + uint32_t(bias[ch])), mult[ch], yzp, lo, hi);
    }
  }
}

}  // namespace

extern const WinogradS8Transforms kWinogradS8Avx2;
const WinogradS8Transforms kWinogradS8Avx2 = {InputAvx2, OutputAvx2};

}  // namespace kernels
}  // namespace qfold
