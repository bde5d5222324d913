// AVX-512 BF16 kernel of the bf16 Gemm (gemm_bf16.h): vdpbf16ps adds the
// products of 16 column pairs of a B panel and one broadcast pair of A's row
// to 16 fp32 sums; up to 4 rows x 4 panels of accumulators, so each 64-byte
// load of B serves every row. At batch 1 it streams B at memory speed.
#include <immintrin.h>

#include <cstring>

#include "kernels/f32_v512.h"
#include "kernels/gemm_bf16.h"

namespace qfold {
namespace kernels {
namespace {

template <int R, int P>
void Gemv(const GemvBf16Args& g) {
  __m512 acc[R][P];
  __mmask16 mask[P];
  for (int p = 0; p < P; ++p) mask[p] = TailMask(g.cols - 16 * p);
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      acc[r][p] = g.accumulate ? _mm512_maskz_loadu_ps(mask[p], g.y + r * g.ldy + 16 * p)
                               : _mm512_setzero_ps();
  const uint16_t* bp[P];
  for (int p = 0; p < P; ++p) bp[p] = g.b + p * g.panel_stride;
  for (int64_t q = 0; q < g.kc; q += 2) {
    __m512i av[R];
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, g.a + r * g.lda + q, 4);
      av[r] = _mm512_set1_epi32(pair);
    }
    for (int p = 0; p < P; ++p) {
      const __m512i w = _mm512_loadu_si512(bp[p] + q * 16);
      for (int r = 0; r < R; ++r)
        acc[r][p] = _mm512_dpbf16_ps(acc[r][p], (__m512bh)av[r], (__m512bh)w);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_mask_storeu_ps(g.y + r * g.ldy + 16 * p, mask[p], acc[r][p]);
}

template <int R>
void GemvRows(const GemvBf16Args& g) {
  switch (g.panels) {
    case 1:
      return Gemv<R, 1>(g);
    case 2:
      return Gemv<R, 2>(g);
    case 3:
      return Gemv<R, 3>(g);
    default:
      return Gemv<R, 4>(g);
  }
}

}  // namespace

void GemvBf16Avx512(const GemvBf16Args& g) {
  switch (g.rows) {
    case 1:
      return GemvRows<1>(g);
    case 2:
      return GemvRows<2>(g);
    case 3:
      return GemvRows<3>(g);
    default:
      return GemvRows<4>(g);
  }
}

extern const GemmBf16Kernels kGemmBf16Avx512Bf16;
const GemmBf16Kernels kGemmBf16Avx512Bf16 = {"avx512bf16", GemvBf16Avx512};

}  // namespace kernels
}  // namespace qfold
