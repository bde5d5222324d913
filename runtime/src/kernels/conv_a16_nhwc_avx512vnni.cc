// AVX-512 VNNI microkernel of the a16w8 channels-last GEMM (conv_a16_nhwc.h):
// a panel's k step ([16 columns][2] int16) is one zmm, so vpdpwssd adds a
// row's broadcast int16 pair times all 16 columns into one accumulator whose
// lanes are the columns in order (no pair reduction at the end, unlike the
// AVX2 kernel's madd + add). Same exact int32 chunks and double
// requantization (the 256-bit epilogue shared with AVX2) as the other levels;
// the depthwise kernel is the shared 256-bit one on EVEX vpdpwssd.
#include <immintrin.h>

#include <cstring>

// GCC 12 reports the _mm512_undefined_* inside the AVX-512 intrinsics as
// maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/conv_a16_nhwc.h"
#include "kernels/conv_a16_nhwc_x86.h"

namespace qfold {
namespace kernels {
namespace {

// The 4 int32 quarters of a row's 16 column sums, as doubles.
inline __m256d Quarter(__m512i v, int i) {
  switch (i) {
    case 0:
      return _mm256_cvtepi32_pd(_mm512_extracti32x4_epi32(v, 0));
    case 1:
      return _mm256_cvtepi32_pd(_mm512_extracti32x4_epi32(v, 1));
    case 2:
      return _mm256_cvtepi32_pd(_mm512_extracti32x4_epi32(v, 2));
    default:
      return _mm256_cvtepi32_pd(_mm512_extracti32x4_epi32(v, 3));
  }
}

// R rows by NP panels (16 columns each, kPanelStride int16 apart): each k
// step loads NP panel vectors and broadcasts R pairs, so R * NP vpdpwssd share
// R + NP loads (4 x 4: 8 loads for 16 products, where one panel at a time
// needed 5 for 4 and was load-bound).
template <int R, int NP>
void GemmTile(const int16_t* const* a, const int16_t* panel, int64_t stride, int64_t kpairs,
              int64_t chunk, const A16Output& o, void* const* y, int cols) {
  const __m256d zp = _mm256_set1_pd(o.zp), lo = _mm256_set1_pd(o.lo), hi = _mm256_set1_pd(o.hi);
  __m512i acc[R][NP];
  // Long reductions: exact int32 chunks summed in double (in memory; rare).
  alignas(32) double sum[R][NP][16];
  const bool chunked = chunk < kpairs;
  if (chunked)
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < NP; ++p)
        for (int i = 0; i < 16; ++i) sum[r][p][i] = 0.0;
  for (int64_t k0 = 0; k0 < kpairs; k0 += chunk) {
    const int64_t k1 = chunked && k0 + chunk < kpairs ? k0 + chunk : kpairs;
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_si512();
    for (int64_t kk = k0; kk < k1; ++kk) {
      __m512i b[NP];
      for (int p = 0; p < NP; ++p) b[p] = _mm512_loadu_si512(panel + p * stride + kk * 32);
      for (int r = 0; r < R; ++r) {
        int32_t pair;
        std::memcpy(&pair, a[r] + 2 * kk, 4);
        const __m512i av = _mm512_set1_epi32(pair);
        for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpwssd_epi32(acc[r][p], av, b[p]);
      }
    }
    if (!chunked) break;
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < NP; ++p)
        for (int i = 0; i < 4; ++i) {
          double* d = sum[r][p] + 4 * i;
          _mm256_store_pd(d, _mm256_add_pd(_mm256_load_pd(d), Quarter(acc[r][p], i)));
        }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < NP; ++p) {
      const int pcols = cols - 16 * p < 16 ? cols - 16 * p : 16;
      if (pcols <= 0) break;
      __m128i q[4];
      for (int i = 0; i < 4; ++i) {
        const __m256d v = chunked ? _mm256_load_pd(sum[r][p] + 4 * i) : Quarter(acc[r][p], i);
        q[i] = Requant4(v, o.corr + 16 * p + 4 * i, o.mult + 16 * p + 4 * i, zp, lo, hi);
      }
      Store16(q, o, static_cast<uint8_t*>(y[r]) + Elem(o) * size_t(16 * p), pcols);
    }
}

template <int NP>
void GemmPanels(const int16_t* const* a, int rows, const int16_t* panel, int64_t stride,
                int64_t kpairs, int64_t chunk, const A16Output& o, void* const* y, int cols) {
  switch (rows) {
    case 4:
      return GemmTile<4, NP>(a, panel, stride, kpairs, chunk, o, y, cols);
    case 3:
      return GemmTile<3, NP>(a, panel, stride, kpairs, chunk, o, y, cols);
    case 2:
      return GemmTile<2, NP>(a, panel, stride, kpairs, chunk, o, y, cols);
    default:
      return GemmTile<1, NP>(a, panel, stride, kpairs, chunk, o, y, cols);
  }
}

// Up to kA16MaxPanels panels per call (cols <= 64), consecutive in memory.
void A16GemmAvx512Vnni(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs,
                       int64_t chunk, const A16Output& o, void* const* y, int cols) {
  const int64_t stride = kpairs * 32;
  switch ((cols + 15) / 16) {
    case 4:
      return GemmPanels<4>(a, rows, panel, stride, kpairs, chunk, o, y, cols);
    case 3:
      return GemmPanels<3>(a, rows, panel, stride, kpairs, chunk, o, y, cols);
    case 2:
      return GemmPanels<2>(a, rows, panel, stride, kpairs, chunk, o, y, cols);
    default:
      return GemmPanels<1>(a, rows, panel, stride, kpairs, chunk, o, y, cols);
  }
}

struct DpwssdVl {
  static __m256i Add(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
};

}  // namespace

extern const A16GemmFn kA16GemmAvx512Vnni = A16GemmAvx512Vnni;
extern const A16DepthwiseFn kA16DepthwiseAvx512Vnni = Depthwise256<DpwssdVl>;

}  // namespace kernels
}  // namespace qfold
