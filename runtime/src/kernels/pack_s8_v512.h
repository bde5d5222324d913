// Four vectors of int32 results to 64 output bytes with saturating packs
// (AVX-512 BW): shared by the convolutions' packed requantization
// (igemm_s8_v512.h) and the element-wise QLinearAdd/QLinearMul kernels
// (quant_s8_avx512core.cc). For files compiled with AVX-512 F/BW.
#pragma once
#include <immintrin.h>

namespace qfold {
namespace kernels {
namespace {

struct PackS8Params {
  __m512i zp16, lo8, hi8;
  bool y_signed;
};

// lo < 0: int8 output; a range within [0, 127] packs either way.
inline PackS8Params MakePackS8Params(int32_t zp, int32_t lo, int32_t hi) {
  return {_mm512_set1_epi16(int16_t(zp)), _mm512_set1_epi8(char(lo)), _mm512_set1_epi8(char(hi)),
          lo < 0};
}

// Two vectors of int32 as int16 with the zero point added (saturating).
inline __m512i PackS8Words(__m512i r0, __m512i r1, const PackS8Params& q) {
  return _mm512_adds_epi16(_mm512_packs_epi32(r0, r1), q.zp16);
}

// The 64 bytes of PackS8Words(r0, r1) and PackS8Words(r2, r3), in order (r0's
// 16 first): clamp(r[v] + zp, lo, hi). The int32 values saturate to int16,
// take the zero point with 16-bit saturation, saturate to 8 bits and are
// clamped as bytes: each step is monotone and exact inside the output range,
// so this equals clamping the int32 sum (for |zp| < 2^15 - 2^8).
template <bool kSigned>
inline __m512i PackS8BytesT(__m512i w01, __m512i w23, const PackS8Params& q) {
  __m512i b;
  if (kSigned)
    b = _mm512_min_epi8(_mm512_max_epi8(_mm512_packs_epi16(w01, w23), q.lo8), q.hi8);
  else
    b = _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(w01, w23), q.lo8), q.hi8);
  // The packs interleave per 128-bit lane: dword 4L + v of b holds values
  // 4L..4L+3 of vector v; put dword 4v + L there.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, b);
}

inline __m512i PackS8Bytes(__m512i w01, __m512i w23, const PackS8Params& q) {
  return q.y_signed ? PackS8BytesT<true>(w01, w23, q) : PackS8BytesT<false>(w01, w23, q);
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
