// Operand packing shared by the x86 GEMM files (gemm_s8.h layouts). Only
// SSE2 is used, so the code is valid under every x86 ISA file's flags; it
// lives in an anonymous namespace so each file keeps its own copy (inline
// functions compiled with different -m flags must not be merged).
#pragma once
#include <emmintrin.h>

#include <cstdint>
#include <cstring>

namespace qfold {
namespace kernels {
namespace {

template <int MR>
void PackLeftX86(const uint8_t* src, int64_t lds, int64_t rows, int64_t k, uint8_t xor_mask,
                 uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4;
  for (int64_t p = 0; p < rows; p += MR) {
    for (int64_t q = 0; q < k4; ++q) {
      for (int r = 0; r < MR; ++r, dst += 4) {
        const int64_t row = p + r;
        for (int i = 0; i < 4; ++i) {
          const int64_t kk = 4 * q + i;
          dst[i] = (row < rows && kk < k) ? uint8_t(src[row * lds + kk] ^ xor_mask) : 0;
        }
      }
    }
  }
}

// Interleaves 4 rows into [col][4] groups, 16 columns per SSE2 step.
template <int NR>
void PackRightX86(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, uint8_t xor_mask,
                  uint8_t* dst) {
  static_assert(NR % 16 == 0, "panel width must be a multiple of 16");
  alignas(16) static const uint8_t kZeros[NR] = {};
  const int64_t k4 = (k + 3) / 4;
  const __m128i mask = _mm_set1_epi8(char(xor_mask));
  for (int64_t p = 0; p < cols; p += NR) {
    const int64_t width = cols - p < NR ? cols - p : NR;
    for (int64_t q = 0; q < k4; ++q) {
      const uint8_t* row[4];
      bool real[4];
      for (int i = 0; i < 4; ++i) {
        real[i] = 4 * q + i < k;
        row[i] = real[i] ? src + (4 * q + i) * lds + p : kZeros;
      }
      int64_t c = 0;
      for (; c + 16 <= width; c += 16, dst += 64) {
        __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[0] + c));
        __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[1] + c));
        __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[2] + c));
        __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[3] + c));
        // Padding rows past k stay 0 (their partner bytes in L are 0 anyway).
        if (real[0]) r0 = _mm_xor_si128(r0, mask);
        if (real[1]) r1 = _mm_xor_si128(r1, mask);
        if (real[2]) r2 = _mm_xor_si128(r2, mask);
        if (real[3]) r3 = _mm_xor_si128(r3, mask);
        const __m128i a_lo = _mm_unpacklo_epi8(r0, r1), a_hi = _mm_unpackhi_epi8(r0, r1);
        const __m128i b_lo = _mm_unpacklo_epi8(r2, r3), b_hi = _mm_unpackhi_epi8(r2, r3);
        __m128i* out = reinterpret_cast<__m128i*>(dst);
        _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(a_lo, b_lo));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(a_lo, b_lo));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(a_hi, b_hi));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(a_hi, b_hi));
      }
      for (; c < NR; ++c, dst += 4)
        for (int i = 0; i < 4; ++i)
          dst[i] = (c < width && real[i]) ? uint8_t(row[i][c] ^ xor_mask) : 0;
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
