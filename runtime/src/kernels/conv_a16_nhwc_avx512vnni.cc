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

template <int R>
void GemmRows(const int16_t* const* a, const int16_t* panel, int64_t kpairs, int64_t chunk,
              const A16Output& o, void* const* y, int cols) {
  __m512i acc[R];
  auto reduce = [&](int64_t k0, int64_t k1) {
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m512i b = _mm512_loadu_si512(panel + kk * 32);
      for (int r = 0; r < R; ++r) {
        int32_t pair;
        std::memcpy(&pair, a[r] + 2 * kk, 4);
        acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_set1_epi32(pair), b);
      }
    }
  };
  const __m256d zp = _mm256_set1_pd(o.zp), lo = _mm256_set1_pd(o.lo), hi = _mm256_set1_pd(o.hi);
  if (chunk >= kpairs) {
    reduce(0, kpairs);
    for (int r = 0; r < R; ++r) {
      __m128i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = Requant4(Quarter(acc[r], i), o.corr + 4 * i, o.mult + 4 * i, zp, lo, hi);
      Store16(q, o, y[r], cols);
    }
    return;
  }
  // Long reductions: exact int32 chunks summed in double.
  __m256d sum[R][4];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 4; ++i) sum[r][i] = _mm256_setzero_pd();
  for (int64_t k0 = 0; k0 < kpairs; k0 += chunk) {
    reduce(k0, k0 + chunk < kpairs ? k0 + chunk : kpairs);
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) sum[r][i] = _mm256_add_pd(sum[r][i], Quarter(acc[r], i));
  }
  for (int r = 0; r < R; ++r) {
    __m128i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = Requant4(sum[r][i], o.corr + 4 * i, o.mult + 4 * i, zp, lo, hi);
    Store16(q, o, y[r], cols);
  }
}

void A16GemmAvx512Vnni(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs,
                       int64_t chunk, const A16Output& o, void* const* y, int cols) {
  switch (rows) {
    case 4:
      return GemmRows<4>(a, panel, kpairs, chunk, o, y, cols);
    case 3:
      return GemmRows<3>(a, panel, kpairs, chunk, o, y, cols);
    case 2:
      return GemmRows<2>(a, panel, kpairs, chunk, o, y, cols);
    default:
      return GemmRows<1>(a, panel, kpairs, chunk, o, y, cols);
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
