// Weight-only quantized GEMM (QfMatMulWeightQ, ops/quant_weightq.cc):
//   y[r][j] = sum_k a[r][k] * w(k, j),  w(k, j) = float(q[k][j] - zp) * scale
// with w rounded once, as DequantizeLinear gives it, and the products
// summed in k order, one fused multiply-add each, from 0. Every variant
// (and the portable one, through std::fma) gives the same bits; the split
// of rows and panels between calls and threads does not change them.
//
// B is prepared once: q - zp as int8 (4-bit weights always fit; 8-bit ones
// when their differences do) or int16, in panels of 16 columns [k][16],
// with the scales [block][16] beside them. The kernel widens a row of a
// panel to floats, multiplies it by its scales and into every row of A it
// holds, so the weights stay 1 or 2 bytes each in memory (4-bit weights
// take 2x their file size, not the 8x of a float copy) and are read once
// per tile of rows.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

class ThreadPool;  // thread_pool.h

constexpr int kWqNr = 16;  // columns per panel

// Panels [panel0, panel0 + panels) (16 columns each) by `rows` (<= the
// kernel's mr) rows of A.
struct WqPanelArgs {
  const float* a = nullptr;  // a[r * lda + kk]
  int64_t lda = 0, rows = 0;
  const int8_t* w8 = nullptr;     // every panel, [panel][k][16], or null and
  const int16_t* w16 = nullptr;   // [panel][k][16]
  const float* scales = nullptr;  // [panel][ceil(k / block)][16]
  int64_t k = 0, block = 0;       // block: rows of B per scale row (> 0)
  int64_t panel0 = 0, panels = 0;
  float* y = nullptr;  // y[r * ldy + j]: column panel0 * 16 + j, j < cols
  int64_t ldy = 0, cols = 0;
};

struct GemmWqF32Kernels {
  const char* name;  // the features it needs ("avx2", "avx512f", "neon", "portable")
  int mr;
  void (*panel)(const WqPanelArgs& args);
};

// The variant `f` allows, or nullptr without SIMD (the op then runs its
// reference kernel).
const GemmWqF32Kernels* GemmWqF32For(const CpuFeatures& f, const char** variant = nullptr);
// The plain C++ variant (tests run it on every target).
const GemmWqF32Kernels* GemmWqF32Portable();

struct WqPackedB {
  int64_t k = 0, n = 0, block = 0;
  std::vector<int8_t> w8;     // set when every q - zp fits in int8,
  std::vector<int16_t> w16;   // else this
  std::vector<float> scales;  // [panel][block row][16]
};
// d: q - zp, [k][n] (8-bit and 4-bit weights: within [-255, 255]); scales:
// [ceil(k / block)][n].
bool PackWqB(const int16_t* d, const float* scales, int64_t k, int64_t n, int64_t block,
             WqPackedB* out);

// y [rows][n] = a [rows][k] x B, split over the pool's threads by panels
// and tiles of rows (null pool: the calling thread).
void GemmWqF32(const GemmWqF32Kernels& kernels, const WqPackedB& b, const float* a, int64_t rows,
               float* y, ThreadPool* pool);

}  // namespace kernels
}  // namespace qfold
