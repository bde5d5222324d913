// What the x86 a16w8 microkernels share (conv_a16_nhwc_avx2.cc, _avxvnni.cc,
// _avx512vnni.cc): the double-precision epilogue (requantization of 4 int32
// sums at a time, the stores of 16 columns) and the 256-bit GEMM and depthwise
// kernels. Each ISA file compiles its own copy (anonymous namespace, its own
// -m flags).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/conv_a16_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

// (acc + corr) * mult, rounded half to even, + zp, clamped: 4 lanes in double.
inline __m128i Requant4(__m256d acc, const double* corr, const double* mult, __m256d zp, __m256d lo,
                        __m256d hi) {
  __m256d v = _mm256_mul_pd(_mm256_add_pd(acc, _mm256_loadu_pd(corr)), _mm256_loadu_pd(mult));
  v = _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(v, zp), lo), hi);
  return _mm256_cvtpd_epi32(v);
}

// Bytes per output element.
inline size_t Elem(const A16Output& o) {
  return o.type == A16Output::kS8 || o.type == A16Output::kU8 ? 1 : 2;
}

// Stores 16 in-range int32 values (q[0..3], 4 each) as `cols` elements of out_type.
inline void Store16(const __m128i* q, const A16Output& o, void* dst, int cols) {
  const __m256i lo8 = _mm256_set_m128i(q[1], q[0]), hi8 = _mm256_set_m128i(q[3], q[2]);
  alignas(32) uint8_t buf[32];
  size_t elem = 2;
  __m256i w;
  switch (o.type) {
    case A16Output::kS16:
    case A16Output::kS8:
      w = _mm256_packs_epi32(lo8, hi8);
      break;
    default:
      w = _mm256_packus_epi32(lo8, hi8);
      break;
  }
  // The in-lane packs leave quadwords as lo8[0..3] hi8[0..3] lo8[4..7] hi8[4..7].
  w = _mm256_permute4x64_epi64(w, 0xD8);
  if (o.type == A16Output::kS8 || o.type == A16Output::kU8) {
    const __m128i a = _mm256_castsi256_si128(w), b = _mm256_extracti128_si256(w, 1);
    const __m128i bytes = o.type == A16Output::kS8 ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
    elem = 1;
    if (cols == 16) {
      _mm_storeu_si128(static_cast<__m128i*>(dst), bytes);
      return;
    }
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), bytes);
  } else {
    if (cols == 16) {
      _mm256_storeu_si256(static_cast<__m256i*>(dst), w);
      return;
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(buf), w);
  }
  std::memcpy(dst, buf, size_t(cols) * elem);
}

// The 256-bit microkernels, written once over `Dot`, the int16-pair
// multiply-add of the ISA file that instantiates them: Dot::Add(acc, a, b)
// returns acc + the pairwise products of a and b summed per int32 lane
// (vpmaddwd + vpaddd on AVX2, vpdpwssd on AVX-VNNI; the same exact sums).
//
// Up to 4 rows x 16 columns. When one int32 reduction covers K (the weights
// rule overflow out) the requantization runs straight from the registers;
// otherwise each chunk's int32 sums are added into double first.
template <class Dot, int R>
void GemmRows256(const int16_t* const* a, const int16_t* panel, int64_t kpairs, int64_t chunk,
                 const A16Output& o, void* const* y, int cols) {
  const int32_t* ap[4];
  for (int r = 0; r < R; ++r) ap[r] = reinterpret_cast<const int32_t*>(a[r]);
  const __m256i* bp = reinterpret_cast<const __m256i*>(panel);
  const __m256d zp = _mm256_set1_pd(o.zp), lo = _mm256_set1_pd(o.lo), hi = _mm256_set1_pd(o.hi);
  __m256i acc[R][2];
  auto reduce = [&](int64_t k0, int64_t k1) {
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t kk = k0; kk < k1; ++kk) {
      const __m256i b0 = _mm256_loadu_si256(bp + 2 * kk);
      const __m256i b1 = _mm256_loadu_si256(bp + 2 * kk + 1);
      for (int r = 0; r < R; ++r) {
        const __m256i av = _mm256_set1_epi32(ap[r][kk]);
        acc[r][0] = Dot::Add(acc[r][0], av, b0);
        acc[r][1] = Dot::Add(acc[r][1], av, b1);
      }
    }
  };
  auto lanes = [](__m256i v, int half) {
    return _mm256_cvtepi32_pd(half ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v));
  };
  if (chunk >= kpairs) {
    reduce(0, kpairs);
    for (int r = 0; r < R; ++r) {
      __m128i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = Requant4(lanes(acc[r][i / 2], i % 2), o.corr + 4 * i, o.mult + 4 * i, zp, lo, hi);
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
      for (int i = 0; i < 4; ++i) sum[r][i] = _mm256_add_pd(sum[r][i], lanes(acc[r][i / 2], i % 2));
  }
  for (int r = 0; r < R; ++r) {
    __m128i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = Requant4(sum[r][i], o.corr + 4 * i, o.mult + 4 * i, zp, lo, hi);
    Store16(q, o, y[r], cols);
  }
}

// The 256-bit GEMM entry point: rows (1-4) as a template argument.
template <class Dot>
void Gemm256(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs, int64_t chunk,
             const A16Output& o, void* const* y, int cols) {
  switch (rows) {
    case 4:
      return GemmRows256<Dot, 4>(a, panel, kpairs, chunk, o, y, cols);
    case 3:
      return GemmRows256<Dot, 3>(a, panel, kpairs, chunk, o, y, cols);
    case 2:
      return GemmRows256<Dot, 2>(a, panel, kpairs, chunk, o, y, cols);
    default:
      return GemmRows256<Dot, 1>(a, panel, kpairs, chunk, o, y, cols);
  }
}

// Depthwise, one output pixel: taps in pairs, 16 channels at a time. The two
// taps' int16 values interleave (unpacklo/hi) against weights packed in the
// same order, so vpmaddwd adds both taps of 8 channels at once.
template <class Dot>
void Depthwise256(const void* const* taps, int64_t tap_pairs, const int16_t* w, int64_t channels,
                  bool flip, const A16Output& o, void* y) {
  const __m256i flipv = _mm256_set1_epi16(flip ? int16_t(-32768) : 0);
  const __m256d zp = _mm256_set1_pd(o.zp), lo = _mm256_set1_pd(o.lo), hi = _mm256_set1_pd(o.hi);
  const size_t elem = o.type == A16Output::kS8 || o.type == A16Output::kU8 ? 1 : 2;
  alignas(32) int16_t tail[2][16];
  const int64_t padded = (channels + 15) / 16 * 16;
  for (int64_t c0 = 0; c0 < channels; c0 += 16) {
    const int cols = int(channels - c0 < 16 ? channels - c0 : 16);
    __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();
    for (int64_t tp = 0; tp < tap_pairs; ++tp) {
      const int16_t* t0 = static_cast<const int16_t*>(taps[2 * tp]) + c0;
      const int16_t* t1 = static_cast<const int16_t*>(taps[2 * tp + 1]) + c0;
      if (cols < 16) {  // the last channels: no reads past the row
        std::memcpy(tail[0], t0, size_t(cols) * 2);
        std::memcpy(tail[1], t1, size_t(cols) * 2);
        t0 = tail[0];
        t1 = tail[1];
      }
      const __m256i a =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t0)), flipv);
      const __m256i b =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t1)), flipv);
      const __m256i* wp = reinterpret_cast<const __m256i*>(w + (tp * padded + c0) * 2);
      // Padded weights: 32 int16 per 16 channels, whole blocks past `channels`.
      acc_lo = Dot::Add(acc_lo, _mm256_unpacklo_epi16(a, b), _mm256_loadu_si256(wp));
      acc_hi = Dot::Add(acc_hi, _mm256_unpackhi_epi16(a, b), _mm256_loadu_si256(wp + 1));
    }
    // Lanes of acc_lo are channels 0-3, 8-11; acc_hi 4-7, 12-15.
    const __m256i v0 = _mm256_permute2x128_si256(acc_lo, acc_hi, 0x20);
    const __m256i v1 = _mm256_permute2x128_si256(acc_lo, acc_hi, 0x31);
    __m128i q[4];
    q[0] = Requant4(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v0)), o.corr + c0, o.mult + c0, zp,
                    lo, hi);
    q[1] = Requant4(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v0, 1)), o.corr + c0 + 4,
                    o.mult + c0 + 4, zp, lo, hi);
    q[2] = Requant4(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v1)), o.corr + c0 + 8,
                    o.mult + c0 + 8, zp, lo, hi);
    q[3] = Requant4(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v1, 1)), o.corr + c0 + 12,
                    o.mult + c0 + 12, zp, lo, hi);
    Store16(q, o, static_cast<uint8_t*>(y) + size_t(c0) * elem, cols);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
