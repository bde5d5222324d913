// AVX2 GEMM (gemm_s8.h) for CPUs without VNNI. vpmaddubsw would saturate its
// 16-bit pair sums (255 * 127 * 2 > 32767), so the bytes are widened to
// 16 bits (even and odd bytes separately, zero- or sign-extended) and
// multiplied with vpmaddwd, whose 32-bit pair sums are exact. 4x16 tiles;
// fewer activation rows take AccumulateFewRows.
#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_s8.h"
#include "kernels/gemm_s8_pack_x86.h"
#include "kernels/gemm_s8_x86_256.h"

namespace qfold {
namespace kernels {
namespace {

struct Avx2Micro {
  static constexpr int kMr = 4, kNr = 16;

  // Even bytes (0, 2 of each dword) and odd bytes (1, 3) as 16-bit values.
  __attribute__((always_inline)) static void SplitU8(__m256i v, __m256i* even, __m256i* odd) {
    *even = _mm256_and_si256(v, _mm256_set1_epi16(0xff));
    *odd = _mm256_srli_epi16(v, 8);
  }
  __attribute__((always_inline)) static void SplitS8(__m256i v, __m256i* even, __m256i* odd) {
    *even = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
    *odd = _mm256_srai_epi16(v, 8);
  }

  template <bool kWeightsLeft, int kRows>
  __attribute__((always_inline)) static void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                        int64_t k4, __m256i (&acc)[kMr][2]) {
    if constexpr (!kWeightsLeft && kRows < kMr) {
      AccumulateFewRows<kRows>(lp, rp, k4, acc);
      return;
    }
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t q = 0; q < k4; ++q, lp += 4 * kMr, rp += 4 * kNr) {
      __m256i re[2], ro[2];
      for (int v = 0; v < 2; ++v) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp + 32 * v));
        if (kWeightsLeft)
          SplitU8(x, &re[v], &ro[v]);
        else
          SplitS8(x, &re[v], &ro[v]);
      }
      for (int r = 0; r < kRows; ++r) {
        int32_t l;
        std::memcpy(&l, lp + 4 * r, 4);
        __m256i le, lo;
        if (kWeightsLeft)
          SplitS8(_mm256_set1_epi32(l), &le, &lo);
        else
          SplitU8(_mm256_set1_epi32(l), &le, &lo);
        for (int v = 0; v < 2; ++v)
          acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_add_epi32(_mm256_madd_epi16(le, re[v]),
                                                                   _mm256_madd_epi16(lo, ro[v])));
      }
    }
  }

  // Few unsigned activation rows by the signed weights (the one-row GEMV of
  // an LSTM step or a batch-1 MatMul): the weights are used as packed, with
  // no widening. Each activation byte a = lo + 16 * hi with 4-bit halves, so
  // vpmaddubsw(lo or hi, w) pairs are exact and lie in [-3840, 3810]: eight
  // k groups of them still fit 16 bits, and one vpmaddwd (by 1 or 16) per
  // eight groups widens them to the int32 sums.
  template <int kRows>
  __attribute__((always_inline)) static void AccumulateFewRows(const uint8_t* lp, const uint8_t* rp,
                                                               int64_t k4, __m256i (&acc)[kMr][2]) {
    constexpr int64_t kBlock = 8;  // 8 * 3840 < 2^15
    const __m256i ones = _mm256_set1_epi16(1), x16 = _mm256_set1_epi16(16);
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t q0 = 0; q0 < k4; q0 += kBlock) {
      const int64_t n = k4 - q0 < kBlock ? k4 - q0 : kBlock;
      __m256i lo_sum[kRows][2], hi_sum[kRows][2];
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v) lo_sum[r][v] = hi_sum[r][v] = _mm256_setzero_si256();
      for (int64_t q = 0; q < n; ++q, lp += 4 * kMr, rp += 4 * kNr) {
        const __m256i w[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp + 32))};
        for (int r = 0; r < kRows; ++r) {
          int32_t l;
          std::memcpy(&l, lp + 4 * r, 4);
          const __m256i a = _mm256_set1_epi32(l);
          const __m256i lo = _mm256_and_si256(a, nibble);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(a, 4), nibble);
          for (int v = 0; v < 2; ++v) {
            lo_sum[r][v] = _mm256_add_epi16(lo_sum[r][v], _mm256_maddubs_epi16(lo, w[v]));
            hi_sum[r][v] = _mm256_add_epi16(hi_sum[r][v], _mm256_maddubs_epi16(hi, w[v]));
          }
        }
      }
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v)
          acc[r][v] =
              _mm256_add_epi32(acc[r][v], _mm256_add_epi32(_mm256_madd_epi16(lo_sum[r][v], ones),
                                                           _mm256_madd_epi16(hi_sum[r][v], x16)));
    }
  }
};

}  // namespace

extern const GemmS8Kernels kGemmS8Avx2;
const GemmS8Kernels kGemmS8Avx2 = {"avx2",
                                   Avx2Micro::kMr,
                                   Avx2Micro::kNr,
                                   PackLeftX86<Avx2Micro::kMr>,
                                   PackRightX86<Avx2Micro::kNr>,
                                   Gemm256<Avx2Micro>,
                                   RequantRow256};

}  // namespace kernels
}  // namespace qfold
