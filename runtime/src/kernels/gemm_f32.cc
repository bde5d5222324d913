// Picks the fp32 GEMM kernels of an ISA level (each ISA's file is compiled
// only for its architecture, with its own flags) and holds the portable
// packers they share.
#include "kernels/gemm_f32.h"

#include <algorithm>
#include <cstring>

#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const GemmF32Kernels kGemmF32Avx2;
extern const GemmF32Kernels kGemmF32Avx512F;
#endif
#if defined(__aarch64__)
extern const GemmF32Kernels kGemmF32Neon;
#endif

const GemmF32Kernels* GemmF32For(const CpuFeatures& f, const char** variant) {
  const GemmF32Kernels* k = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) k = f.avx512f ? &kGemmF32Avx512F : &kGemmF32Avx2;
#endif
#if defined(__aarch64__)
  if (f.asimd) k = &kGemmF32Neon;  // fmla only: Armv8.0 NEON
#endif
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

void PackLeftF32(const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t k, int mr,
                 float* dst) {
  for (int64_t p = 0; p < rows; p += mr) {
    const int64_t h = std::min<int64_t>(mr, rows - p);
    // A partial panel's missing rows are 0: zeroed as one block first (per k,
    // they are a few floats, which compilers turn into one memset call each).
    if (h < mr) std::fill(dst, dst + k * mr, 0.f);
    if (cs == 1) {
      // Row-major source: walk each row contiguously, scatter with stride mr.
      for (int64_t r = 0; r < h; ++r) {
        const float* s = src + (p + r) * rs;
        for (int64_t kk = 0; kk < k; ++kk) dst[kk * mr + r] = s[kk];
      }
    } else {
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t r = 0; r < h; ++r) dst[kk * mr + r] = src[(p + r) * rs + kk * cs];
    }
    dst += k * mr;
  }
}

void PackRightF32(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t cols, int nr,
                  float* dst) {
  for (int64_t p = 0; p < cols; p += nr) {
    const int64_t w = std::min<int64_t>(nr, cols - p);
    if (cs == 1) {
      for (int64_t kk = 0; kk < k; ++kk) {
        std::memcpy(dst + kk * nr, src + kk * rs + p, size_t(w) * sizeof(float));
        std::fill(dst + kk * nr + w, dst + (kk + 1) * nr, 0.f);
      }
    } else {
      // Column-major source (a transposed B): read each column contiguously.
      for (int64_t c = 0; c < w; ++c) {
        const float* s = src + (p + c) * cs;
        for (int64_t kk = 0; kk < k; ++kk) dst[kk * nr + c] = s[kk * rs];
      }
      for (int64_t kk = 0; kk < k && w < nr; ++kk)
        std::fill(dst + kk * nr + w, dst + (kk + 1) * nr, 0.f);
    }
    dst += k * nr;
  }
}

F32Act EpilogueFor(const FusedActivation& act, float* lo, float* hi, const FusedActivation** post) {
  *post = nullptr;
  *lo = *hi = 0.f;
  if (act.affine) {  // the epilogues have no affine after their activation
    *post = &act;
    return F32Act::kNone;
  }
  switch (act.kind) {
    case FusedActivation::kNone:
      return F32Act::kNone;
    case FusedActivation::kRelu:
      return F32Act::kRelu;
    case FusedActivation::kClip:
      *lo = act.min;
      *hi = act.max;
      return F32Act::kClamp;
    default:
      *post = &act;
      return F32Act::kNone;
  }
}

// Below about 1M flops (6 us at this machine's FMA peak, session 15's Xeon)
// the hand-off to a woken worker and the cache lines passed between the
// cores cost more than the second thread saves: at 2^18 the GRU keyword
// spotter (its input projections ~0.75M flops) and the PP-OCR classifier's
// small convolutions ran slower with 2 threads than with 1.
ThreadPool* PoolForWork(ThreadPool* pool, int64_t flops) {
  return flops < (int64_t(1) << 20) ? nullptr : pool;
}

void GemmF32Batched(const GemmF32Kernels& k, const GemmF32Args& proto, const float* const* left,
                    const float* const* right, float* const* c, int64_t batches, ThreadPool* pool) {
  const int64_t num_threads = NumThreads(pool);
  if (batches == 0 || proto.rows == 0 || proto.cols == 0) return;
  const int64_t panels = (proto.cols + k.nr - 1) / k.nr;
  const int64_t row_panels = (proto.rows + k.mr - 1) / k.mr;
  // Row blocks only when the column panels alone leave threads idle.
  int64_t row_blocks = 1;
  if (num_threads > 1 && batches * panels < 4 * int64_t(num_threads))
    row_blocks = std::min(row_panels,
                          (4 * int64_t(num_threads) + batches * panels - 1) / (batches * panels));
  const int64_t block_rows = (row_panels + row_blocks - 1) / row_blocks * k.mr;
  row_blocks = (proto.rows + block_rows - 1) / block_rows;
  const int64_t units = batches * row_blocks * panels;
  auto work = [&](int64_t begin, int64_t end, int) {
    // Consecutive units share a row block, so one call covers a run of panels.
    for (int64_t u = begin; u < end;) {
      const int64_t jp = u % panels, rb = u / panels % row_blocks, b = u / panels / row_blocks;
      const int64_t run = std::min(end - u, panels - jp);
      GemmF32Args a = proto;
      const int64_t r0 = rb * block_rows;
      a.left = left[b] + r0 * proto.k;
      a.right = right[b];
      a.rows = std::min(block_rows, proto.rows - r0);
      a.c = c[b] + r0 * proto.ldc;
      if (a.bias && a.bias_per_row) a.bias += r0;
      a.panel_begin = jp;
      a.panel_end = jp + run;
      k.gemm(a);
      u += run;
    }
  };
  ParallelFor(PoolForWork(pool, 2 * batches * proto.rows * proto.cols * proto.k), units, work);
}

}  // namespace kernels
}  // namespace qfold
