// Driver of the bf16 Gemm (gemm_bf16.h): k in chunks whose panels stay in
// L2 while every group of 4 rows passes over them, panels split between
// threads.
#include "kernels/gemm_bf16.h"

#include <algorithm>

#include "kernels/conv_f32_nhwc.h"  // Bf16FromFloat
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(QFOLD_HAVE_AVX512BF16)
extern const GemmBf16Kernels kGemmBf16Avx512Bf16;
#endif
#if defined(QFOLD_HAVE_AMX)
extern const GemmBf16Kernels kGemmBf16Amx;
#endif

const GemmBf16Kernels* GemmBf16For(const CpuFeatures& f, const char** variant) {
  const GemmBf16Kernels* k = nullptr;
#if defined(QFOLD_HAVE_AVX512BF16)
  if (f.avx512_core() && f.avx512bf16) k = &kGemmBf16Avx512Bf16;
#endif
#if defined(QFOLD_HAVE_AMX)
  if (k && f.amx && f.amx_bf16) k = &kGemmBf16Amx;
#endif
  (void)f;
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

void PackBf16(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t n, PackedBf16* out) {
  out->k = k;
  out->kp = (k + 31) / 32 * 32;
  out->n = n;
  const int64_t panels = (n + 15) / 16;
  out->data.assign(size_t(panels * out->kp * 16), uint16_t(0));
  for (int64_t q = 0; q < k; ++q)
    for (int64_t c = 0; c < n; ++c)
      out->data[size_t(c / 16 * out->kp * 16 + q / 2 * 32 + c % 16 * 2 + q % 2)] =
          Bf16FromFloat(src[q * rs + c * cs]);
}

// A's rows rounded up to 16, the rows of a tile (zeros past m).
size_t GemmBf16Scratch(int64_t m, const PackedBf16& b) {
  return m <= 0 || b.n <= 0 ? 0 : size_t((m + 15) / 16 * 16 * b.kp) * sizeof(uint16_t);
}

namespace {

// Pairs of panels split between threads; each call covers all rows and all
// of k.
void GemmBf16Tiles(const GemmBf16Kernels& kern, const uint16_t* ab, int64_t m, const PackedBf16& b,
                   float* y, ThreadPool* pool) {
  const int64_t kp = b.kp, n = b.n;
  const int64_t panels = (n + 15) / 16, pairs = (panels + 1) / 2;
  ThreadPool* const run_pool = m * n * kp >= (int64_t(1) << 17) ? pool : nullptr;
  ParallelFor(run_pool, pairs, [&](int64_t p0, int64_t p1, int) {
    if (kern.begin) kern.begin();
    TilesBf16Args t;
    t.a = ab;
    t.lda = kp;
    t.rows = m;
    t.kp = kp;
    t.panel_stride = kp * 16;
    t.ldy = n;
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t p = pair * 2;
      t.b = b.data.data() + p * kp * 16;
      t.cols = std::min<int64_t>(32, n - p * 16);
      t.prefetch = pair + 1 < p1 ? t.b + 2 * kp * 16 : nullptr;
      t.y = y + p * 16;
      kern.tiles(t);
    }
    if (kern.end) kern.end();
  });
}

}  // namespace

void GemmBf16(const GemmBf16Kernels& kern, const float* a, int64_t rs, int64_t cs, int64_t m,
              const PackedBf16& b, float* y, ThreadPool* pool, const ScratchSpan& scratch) {
  const int64_t k = b.k, kp = b.kp, n = b.n;
  if (m <= 0 || n <= 0) return;
  const ScratchRegion region(scratch, GemmBf16Scratch(m, b));
  uint16_t* const ab = region.at<uint16_t>(0);
  const int64_t rows_padded = (m + 15) / 16 * 16;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t q = 0; q < k; ++q) ab[i * kp + q] = Bf16FromFloat(a[i * rs + q * cs]);
    std::fill(ab + i * kp + k, ab + (i + 1) * kp, uint16_t(0));
  }
  std::fill(ab + m * kp, ab + rows_padded * kp, uint16_t(0));
  if (k == 0) {
    std::fill(y, y + m * n, 0.f);
    return;
  }
  if (kern.tiles && m >= kern.tile_rows) return GemmBf16Tiles(kern, ab, m, b, y, pool);
  const int64_t panels = (n + 15) / 16, quads = (panels + 3) / 4;
  // A chunk of 4 panels' weights (kc * 128 bytes) stays in L2 while the row
  // groups pass over it: 512 KiB.
  const int64_t kc_max = 4096;
  // The gemv sums pairs: k up to even is enough (kp's padding to 32 is for the tiles).
  const int64_t k_even = (k + 1) / 2 * 2;
  ThreadPool* const run_pool = m * n * k_even >= (int64_t(1) << 17) ? pool : nullptr;
  for (int64_t k0 = 0; k0 < k_even; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, k_even - k0);
    ParallelFor(run_pool, quads, [&](int64_t q0, int64_t q1, int) {
      for (int64_t quad = q0; quad < q1; ++quad) {
        const int64_t p = quad * 4;
        GemvBf16Args g;
        g.lda = kp;
        g.kc = kc;
        g.b = b.data.data() + p * kp * 16 + k0 * 16;
        g.panel_stride = kp * 16;
        g.panels = std::min<int64_t>(4, panels - p);
        g.cols = std::min<int64_t>(64, n - p * 16);
        g.accumulate = k0 > 0;
        g.ldy = n;
        for (int64_t r = 0; r < m; r += 4) {
          g.a = ab + r * kp + k0;
          g.rows = std::min<int64_t>(4, m - r);
          g.y = y + r * n + p * 16;
          kern.gemv(g);
        }
      }
    });
  }
}

}  // namespace kernels
}  // namespace qfold
