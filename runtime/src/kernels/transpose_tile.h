// One square tile of a 2-D transpose in 128-bit registers: N x N elements of
// E (N = 16 / sizeof(E)), dst[i][j] = src[j][i]. Only the baseline vector
// ISA of each architecture is used (SSE2 on x86-64, Advanced SIMD on
// aarch64), which every CPU of the target has, so no feature check is needed.
//
// The tile is log2(N) rounds of one interleave: row i and row i + N/2 are
// zipped element by element into rows 2i (low halves) and 2i + 1 (high
// halves). Each round rotates the bits of (row, column) by one, so after
// log2(N) rounds every row index bit has become a column bit: the transpose.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace qfold {
namespace kernels {

#if defined(__SSE2__) || defined(__aarch64__)

namespace transpose_detail {

#if defined(__SSE2__)
using Reg = __m128i;
inline Reg Load(const void* p) {
  return _mm_loadu_si128(static_cast<const Reg*>(p));
}
inline void Store(void* p, Reg v) {
  _mm_storeu_si128(static_cast<Reg*>(p), v);
}
template <int kBytes>
inline Reg ZipLo(Reg a, Reg b) {
  if constexpr (kBytes == 1) return _mm_unpacklo_epi8(a, b);
  if constexpr (kBytes == 2) return _mm_unpacklo_epi16(a, b);
  if constexpr (kBytes == 4) return _mm_unpacklo_epi32(a, b);
  if constexpr (kBytes == 8) return _mm_unpacklo_epi64(a, b);
}
template <int kBytes>
inline Reg ZipHi(Reg a, Reg b) {
  if constexpr (kBytes == 1) return _mm_unpackhi_epi8(a, b);
  if constexpr (kBytes == 2) return _mm_unpackhi_epi16(a, b);
  if constexpr (kBytes == 4) return _mm_unpackhi_epi32(a, b);
  if constexpr (kBytes == 8) return _mm_unpackhi_epi64(a, b);
}
#else
using Reg = uint8x16_t;
inline Reg Load(const void* p) {
  return vld1q_u8(static_cast<const uint8_t*>(p));
}
inline void Store(void* p, Reg v) {
  vst1q_u8(static_cast<uint8_t*>(p), v);
}
template <int kBytes>
inline Reg ZipLo(Reg a, Reg b) {
  if constexpr (kBytes == 1) return vzip1q_u8(a, b);
  if constexpr (kBytes == 2)
    return vreinterpretq_u8_u16(vzip1q_u16(vreinterpretq_u16_u8(a), vreinterpretq_u16_u8(b)));
  if constexpr (kBytes == 4)
    return vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b)));
  if constexpr (kBytes == 8)
    return vreinterpretq_u8_u64(vzip1q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
template <int kBytes>
inline Reg ZipHi(Reg a, Reg b) {
  if constexpr (kBytes == 1) return vzip2q_u8(a, b);
  if constexpr (kBytes == 2)
    return vreinterpretq_u8_u16(vzip2q_u16(vreinterpretq_u16_u8(a), vreinterpretq_u16_u8(b)));
  if constexpr (kBytes == 4)
    return vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b)));
  if constexpr (kBytes == 8)
    return vreinterpretq_u8_u64(vzip2q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
#endif

}  // namespace transpose_detail

// dst[i * ld + j] = src[j * ls + i] for i, j < 16 / sizeof(E) (strides in elements).
template <class E>
inline void TransposeTile(const E* src, int64_t ls, E* dst, int64_t ld) {
  using namespace transpose_detail;
  constexpr int kBytes = int(sizeof(E)), kN = 16 / kBytes;
  static_assert(kBytes == 1 || kBytes == 2 || kBytes == 4 || kBytes == 8, "element size");
  Reg a[kN], b[kN];
#pragma GCC unroll 16
  for (int i = 0; i < kN; ++i) a[i] = Load(src + i * ls);
#pragma GCC unroll 4
  for (int round = 1; round < kN; round *= 2) {
#pragma GCC unroll 8
    for (int i = 0; i < kN / 2; ++i) {
      b[2 * i] = ZipLo<kBytes>(a[i], a[i + kN / 2]);
      b[2 * i + 1] = ZipHi<kBytes>(a[i], a[i + kN / 2]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < kN; ++i) a[i] = b[i];
  }
#pragma GCC unroll 16
  for (int i = 0; i < kN; ++i) Store(dst + i * ld, a[i]);
}
#else
template <class E>
inline void TransposeTile(const E* src, int64_t ls, E* dst, int64_t ld) {
  constexpr int kN = 16 / int(sizeof(E));
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) dst[i * ld + j] = src[j * ls + i];
}
#endif

}  // namespace kernels
}  // namespace qfold
