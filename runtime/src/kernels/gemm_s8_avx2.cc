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
  // no widening. Each activation byte a = lo + 128 * hi (lo 7 bits, hi 1 bit),
  // so vpmaddubsw(lo, w) is exact (|2 * 127 * 128| < 2^15) and is widened by
  // vpmaddwd with ones; vpmaddubsw(hi, w) pairs lie in [-256, 254] and are
  // summed in 16 bits over up to 128 k groups before one vpmaddwd by 128.
  template <int kRows>
  __attribute__((always_inline)) static void AccumulateFewRows(const uint8_t* lp, const uint8_t* rp,
                                                               int64_t k4, __m256i (&acc)[kMr][2]) {
    constexpr int64_t kHiBlock = 128;  // 128 * 256 = 2^15: the int16 hi sums cannot overflow
    const __m256i ones = _mm256_set1_epi16(1), x128 = _mm256_set1_epi16(128);
    const __m256i low7 = _mm256_set1_epi8(0x7f), bit0 = _mm256_set1_epi8(1);
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t q0 = 0; q0 < k4; q0 += kHiBlock) {
      const int64_t q1 = k4 - q0 < kHiBlock ? k4 : q0 + kHiBlock;
      __m256i hi_sum[kRows][2];
      for (int r = 0; r < kRows; ++r) hi_sum[r][0] = hi_sum[r][1] = _mm256_setzero_si256();
      for (int64_t q = q0; q < q1; ++q, lp += 4 * kMr, rp += 4 * kNr) {
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp + 32));
        for (int r = 0; r < kRows; ++r) {
          int32_t l;
          std::memcpy(&l, lp + 4 * r, 4);
          const __m256i a = _mm256_set1_epi32(l);
          const __m256i lo = _mm256_and_si256(a, low7);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(a, 7), bit0);
          acc[r][0] =
              _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, w0), ones));
          acc[r][1] =
              _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, w1), ones));
          hi_sum[r][0] = _mm256_add_epi16(hi_sum[r][0], _mm256_maddubs_epi16(hi, w0));
          hi_sum[r][1] = _mm256_add_epi16(hi_sum[r][1], _mm256_maddubs_epi16(hi, w1));
        }
      }
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < 2; ++v)
          acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(hi_sum[r][v], x128));
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
