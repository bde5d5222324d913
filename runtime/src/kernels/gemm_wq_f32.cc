// Weight-only quantized GEMM (gemm_wq_f32.h): packing, the driver, the
// portable variant and the choice of variant.
#include "kernels/gemm_wq_f32.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/gemm_f32.h"
#include "kernels/gemm_wq_f32_impl.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const GemmWqF32Kernels kGemmWqF32Avx2;
extern const GemmWqF32Kernels kGemmWqF32Avx512f;
#endif
#if defined(__aarch64__)
extern const GemmWqF32Kernels kGemmWqF32Neon;
#endif

namespace {

// One float a lane: the template's sums, std::fma rounding each product
// and sum once as the SIMD variants' fused multiply-adds do.
struct ScalarLane {
  using F = float;
  static constexpr int kLanes = 1;
  static F Zero() { return 0.f; }
  static F Set(float v) { return v; }
  static F Load(const float* p) { return *p; }
  static F Mul(F a, F b) { return a * b; }
  static F Fma(F a, F b, F c) { return std::fma(a, b, c); }
  static void Widen8(const int8_t* p, F* v) {
    for (int i = 0; i < kWqNr; ++i) v[i] = float(p[i]);
  }
  static void Widen16(const int16_t* p, F* v) {
    for (int i = 0; i < kWqNr; ++i) v[i] = float(p[i]);
  }
  static void StoreCols(float* p, F v, int) { *p = v; }
};

const GemmWqF32Kernels kGemmWqF32Portable = {"portable", 4, gemm_wq::Panel<ScalarLane, 4>};

}  // namespace

const GemmWqF32Kernels* GemmWqF32Portable() {
  return &kGemmWqF32Portable;
}

const GemmWqF32Kernels* GemmWqF32For(const CpuFeatures& f, const char** variant) {
  // Names spelled here, not read from the tables: a static initializer
  // could get here before those are initialized.
  const GemmWqF32Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = f.avx512f ? &kGemmWqF32Avx512f : &kGemmWqF32Avx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    k = &kGemmWqF32Neon;
    name = "neon";
  }
#endif
  (void)f;
  if (variant) *variant = name;
  return k;
}

bool PackWqB(const int16_t* d, const float* scales, int64_t k, int64_t n, int64_t block,
             WqPackedB* out) {
  if (k <= 0 || n <= 0 || block <= 0) return false;
  bool narrow = true;
  for (int64_t i = 0; i < k * n; ++i) narrow = narrow && d[i] >= -128 && d[i] <= 127;
  const int64_t panels = (n + kWqNr - 1) / kWqNr, rows = (k + block - 1) / block;
  out->k = k;
  out->n = n;
  out->block = block;
  out->w8.assign(narrow ? size_t(panels * k * kWqNr) : 0, 0);
  out->w16.assign(narrow ? 0 : size_t(panels * k * kWqNr), 0);
  out->scales.assign(size_t(panels * rows * kWqNr), 0.f);
  for (int64_t pn = 0; pn < panels; ++pn)
    for (int64_t j = pn * kWqNr; j < std::min(n, (pn + 1) * kWqNr); ++j) {
      const size_t col = size_t(j - pn * kWqNr);
      for (int64_t kk = 0; kk < k; ++kk) {
        const size_t at = size_t((pn * k + kk) * kWqNr) + col;
        if (narrow)
          out->w8[at] = int8_t(d[kk * n + j]);
        else
          out->w16[at] = int16_t(d[kk * n + j]);
      }
      for (int64_t b = 0; b < rows; ++b)
        out->scales[size_t((pn * rows + b) * kWqNr) + col] = scales[b * n + j];
    }
  return true;
}

void GemmWqF32(const GemmWqF32Kernels& kernels, const WqPackedB& b, const float* a, int64_t rows,
               float* y, ThreadPool* pool) {
  const int64_t panels = (b.n + kWqNr - 1) / kWqNr, mr = kernels.mr;
  const int64_t tiles = (rows + mr - 1) / mr;
  // Work unit: a group of 8 panels (the most a tile of one row keeps in
  // flight) by one tile of rows, group-major, so that a thread's range
  // reuses the panels it reads.
  constexpr int64_t kGroup = 8;
  const int64_t groups = (panels + kGroup - 1) / kGroup;
  ThreadPool* const p = PoolForWork(pool, 2 * rows * b.k * b.n);
  ParallelFor(p, groups * tiles, [&](int64_t begin, int64_t end, int) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t g0 = u / tiles * kGroup, r0 = u % tiles * mr;
      WqPanelArgs g;
      g.a = a + r0 * b.k;
      g.lda = b.k;
      g.rows = std::min(mr, rows - r0);
      g.w8 = b.w8.empty() ? nullptr : b.w8.data();
      g.w16 = b.w16.empty() ? nullptr : b.w16.data();
      g.scales = b.scales.data();
      g.k = b.k;
      g.block = b.block;
      g.panel0 = g0;
      g.panels = std::min(kGroup, panels - g0);
      g.y = y + r0 * b.n + g0 * kWqNr;
      g.ldy = b.n;
      g.cols = std::min<int64_t>(kGroup * kWqNr, b.n - g0 * kWqNr);
      kernels.panel(g);
    }
  });
}

}  // namespace kernels
}  // namespace qfold
