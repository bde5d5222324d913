// AVX2 microkernel of the a16w8 channels-last convolution (conv_a16_nhwc.h):
// 4 rows x 16 columns, vpmaddwd on int16 pairs into int32, widened to double
// after each chunk so long reductions stay exact.
#include <immintrin.h>

#include "kernels/conv_a16_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

// Adds the 8 int32 lanes of v to dst[0..7] (double).
inline void AddToDouble(__m256i v, double* dst) {
  const __m256d lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v));
  const __m256d hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
  _mm256_storeu_pd(dst, _mm256_add_pd(_mm256_loadu_pd(dst), lo));
  _mm256_storeu_pd(dst + 4, _mm256_add_pd(_mm256_loadu_pd(dst + 4), hi));
}

template <int R>
void TileRows(const int16_t* const* a, const int16_t* panel, int64_t kpairs, int64_t chunk,
              double* dot) {
  for (int i = 0; i < R * 16; ++i) dot[i] = 0.0;
  const int32_t* ap[4];
  for (int r = 0; r < R; ++r) ap[r] = reinterpret_cast<const int32_t*>(a[r]);
  const __m256i* bp = reinterpret_cast<const __m256i*>(panel);
  for (int64_t k0 = 0; k0 < kpairs; k0 += chunk) {
    const int64_t k1 = k0 + chunk < kpairs ? k0 + chunk : kpairs;
    __m256i acc[4][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m256i b0 = _mm256_loadu_si256(bp + 2 * kk);
      const __m256i b1 = _mm256_loadu_si256(bp + 2 * kk + 1);
      for (int r = 0; r < R; ++r) {
        const __m256i av = _mm256_set1_epi32(ap[r][kk]);
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
      }
    }
    for (int r = 0; r < R; ++r) {
      AddToDouble(acc[r][0], dot + r * 16);
      AddToDouble(acc[r][1], dot + r * 16 + 8);
    }
  }
}

void A16TileAvx2(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs,
                 int64_t chunk, double* dot) {
  switch (rows) {
    case 4:
      return TileRows<4>(a, panel, kpairs, chunk, dot);
    case 3:
      return TileRows<3>(a, panel, kpairs, chunk, dot);
    case 2:
      return TileRows<2>(a, panel, kpairs, chunk, dot);
    default:
      return TileRows<1>(a, panel, kpairs, chunk, dot);
  }
}

void A16EpilogueAvx2(const double* dot, int rows, const double* corr, const double* mult,
                     int32_t zp, int32_t lo, int32_t hi, int32_t* out) {
  const __m256d zpv = _mm256_set1_pd(zp), lov = _mm256_set1_pd(lo), hiv = _mm256_set1_pd(hi);
  for (int r = 0; r < rows; ++r)
    for (int n = 0; n < 16; n += 4) {
      __m256d v = _mm256_add_pd(_mm256_loadu_pd(dot + r * 16 + n), _mm256_loadu_pd(corr + n));
      v = _mm256_mul_pd(v, _mm256_loadu_pd(mult + n));
      v = _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(v, zpv), lov), hiv);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + r * 16 + n), _mm256_cvtpd_epi32(v));
    }
}

}  // namespace

extern const A16TileFn kA16TileAvx2 = A16TileAvx2;
extern const A16EpilogueFn kA16EpilogueAvx2 = A16EpilogueAvx2;

}  // namespace kernels
}  // namespace qfold
