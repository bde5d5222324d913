// The a16 x a16 microkernel (qmatmul_a16a16.h) on vpmaddwd: 4 rows by 8
// columns, the two byte planes of B in separate int32 accumulators.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qmatmul_a16a16.h"

namespace qfold {
namespace kernels {

void A16A16GemmAvx2(const int16_t* const* a, const int16_t* lo, const int16_t* hi, int64_t kpairs,
                    int64_t* out) {
  __m256i total[4][2];
  for (auto& t : total) t[0] = t[1] = _mm256_setzero_si256();
  for (int64_t p0 = 0; p0 < kpairs; p0 += kA16A16Chunk) {
    const int64_t pe = std::min(kpairs, p0 + kA16A16Chunk);
    __m256i sl[4], sh[4];
    for (int r = 0; r < 4; ++r) sl[r] = sh[r] = _mm256_setzero_si256();
    for (int64_t p = p0; p < pe; ++p) {
      const __m256i vl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + p * 16));
      const __m256i vh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + p * 16));
      for (int r = 0; r < 4; ++r) {
        int32_t pair;
        std::memcpy(&pair, a[r] + 2 * p, sizeof(pair));
        const __m256i va = _mm256_set1_epi32(pair);
        sl[r] = _mm256_add_epi32(sl[r], _mm256_madd_epi16(va, vl));
        sh[r] = _mm256_add_epi32(sh[r], _mm256_madd_epi16(va, vh));
      }
    }
    // Widen the chunk's exact int32 sums: total += lo + 256 * hi.
    for (int r = 0; r < 4; ++r)
      for (int half = 0; half < 2; ++half) {
        const __m128i l = half ? _mm256_extracti128_si256(sl[r], 1) : _mm256_castsi256_si128(sl[r]);
        const __m128i h = half ? _mm256_extracti128_si256(sh[r], 1) : _mm256_castsi256_si128(sh[r]);
        const __m256i sum = _mm256_add_epi64(_mm256_cvtepi32_epi64(l),
                                             _mm256_slli_epi64(_mm256_cvtepi32_epi64(h), 8));
        total[r][half] = _mm256_add_epi64(total[r][half], sum);
      }
  }
  for (int r = 0; r < 4; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * kA16A16Cols), total[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * kA16A16Cols + 4), total[r][1]);
  }
}

}  // namespace kernels
}  // namespace qfold
