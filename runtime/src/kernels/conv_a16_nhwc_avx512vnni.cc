// AVX-512 VNNI microkernel of the a16w8 channels-last GEMM (conv_a16_nhwc.h):
// a panel's k step ([16 columns][2] int16) is one zmm, so vpdpwssd adds a
// row's broadcast int16 pair times all 16 columns into one accumulator whose
// lanes are the columns in order (no pair reduction at the end, unlike the
// AVX2 kernel's madd + add). Same exact int32 chunks and double
// requantization as the other levels; the depthwise kernel stays AVX2's.
#include <immintrin.h>

#include <cstring>

// GCC 12 reports the _mm512_undefined_* inside the AVX-512 intrinsics as
// maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/conv_a16_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

// (acc + corr) * mult, rounded half to even, + zp, clamped: 8 lanes in double.
inline __m256i Requant8(__m512d acc, const double* corr, const double* mult, __m512d zp, __m512d lo,
                        __m512d hi) {
  __m512d v = _mm512_mul_pd(_mm512_add_pd(acc, _mm512_loadu_pd(corr)), _mm512_loadu_pd(mult));
  v = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(v, zp), lo), hi);
  return _mm512_cvtpd_epi32(v);
}

// Requantizes 16 column sums (two halves of 8 doubles) and stores `cols`.
inline void Store16(__m512d s0, __m512d s1, const A16Output& o, void* dst, int cols) {
  const __m512d zp = _mm512_set1_pd(o.zp), lo = _mm512_set1_pd(o.lo), hi = _mm512_set1_pd(o.hi);
  const __m512i q = _mm512_inserti64x4(
      _mm512_castsi256_si512(Requant8(s0, o.corr, o.mult, zp, lo, hi)),
      Requant8(s1, o.corr + 8, o.mult + 8, zp, lo, hi), 1);
  const __mmask16 m = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  // In range for the type after the clamp: the truncating stores keep the value.
  if (o.type == A16Output::kS8 || o.type == A16Output::kU8)
    _mm512_mask_cvtepi32_storeu_epi8(dst, m, q);
  else
    _mm512_mask_cvtepi32_storeu_epi16(dst, m, q);
}

inline __m512d Low8(__m512i v) {
  return _mm512_cvtepi32_pd(_mm512_castsi512_si256(v));
}
inline __m512d High8(__m512i v) {
  return _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(v, 1));
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
  if (chunk >= kpairs) {
    reduce(0, kpairs);
    for (int r = 0; r < R; ++r) Store16(Low8(acc[r]), High8(acc[r]), o, y[r], cols);
    return;
  }
  // Long reductions: exact int32 chunks summed in double.
  __m512d sum[R][2];
  for (int r = 0; r < R; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_pd();
  for (int64_t k0 = 0; k0 < kpairs; k0 += chunk) {
    reduce(k0, k0 + chunk < kpairs ? k0 + chunk : kpairs);
    for (int r = 0; r < R; ++r) {
      sum[r][0] = _mm512_add_pd(sum[r][0], Low8(acc[r]));
      sum[r][1] = _mm512_add_pd(sum[r][1], High8(acc[r]));
    }
  }
  for (int r = 0; r < R; ++r) Store16(sum[r][0], sum[r][1], o, y[r], cols);
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

}  // namespace

extern const A16GemmFn kA16GemmAvx512Vnni = A16GemmAvx512Vnni;

}  // namespace kernels
}  // namespace qfold
