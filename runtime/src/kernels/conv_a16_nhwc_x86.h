// The double-precision epilogue shared by the x86 a16w8 microkernels
// (conv_a16_nhwc_avx2.cc, conv_a16_nhwc_avx512vnni.cc): requantization of 4
// int32 sums at a time in double and the stores of 16 columns. Each ISA file
// compiles its own copy (anonymous namespace, its own -m flags).
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

}  // namespace
}  // namespace kernels
}  // namespace qfold
