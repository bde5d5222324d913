// AVX-VNNI GEMM (gemm_s8.h): the VEX form of vpdpbusd multiplies u8 by s8
// and adds four products into each int32 lane without intermediate
// saturation, so the sum is exact (int32 wraparound, as in the reference).
// 6x16 tiles: 12 ymm accumulators, two right-hand loads and one broadcast
// of the narrow operand leave one of the 16 registers spare.
#include "kernels/gemm_s8_avxvnni.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_s8_pack_x86.h"
#include "kernels/gemm_s8_x86_256.h"

namespace qfold {
namespace kernels {
namespace {

struct AvxVnniMicro {
  static constexpr int kMr = 6, kNr = 16;

  template <bool kWeightsLeft, int kRows>
  __attribute__((always_inline)) static void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                        int64_t k4, __m256i (&acc)[kMr][2]) {
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t q = 0; q < k4; ++q, lp += 4 * kMr, rp += 4 * kNr) {
      const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp));
      const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rp + 32));
      for (int r = 0; r < kRows; ++r) {
        int32_t l;
        std::memcpy(&l, lp + 4 * r, 4);
        const __m256i lb = _mm256_set1_epi32(l);
        if (kWeightsLeft) {  // right = unsigned activations, left = signed weights
          acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], r0, lb);
          acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], r1, lb);
        } else {
          acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], lb, r0);
          acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], lb, r1);
        }
      }
    }
  }
};

const GemmS8Kernels kKernels = {"avxvnni",
                                AvxVnniMicro::kMr,
                                AvxVnniMicro::kNr,
                                PackLeftX86<AvxVnniMicro::kMr>,
                                PackRightX86<AvxVnniMicro::kNr>,
                                Gemm256<AvxVnniMicro>,
                                RequantRow256};

}  // namespace

const GemmS8Kernels* GemmS8AvxVnni() {
  return &kKernels;
}

}  // namespace kernels
}  // namespace qfold
