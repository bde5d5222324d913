// Weight-only 4-bit GEMM with A quantized to int8 on the fly: QfMatMulWeightQ
// with accuracy_level = 4, which ONNX Runtime's MatMulNBits uses to allow
// exactly this ("A may be quantized to int8 with the same block size").
// Per row r of A and block b of B's blocks along K (block % 8 == 0):
//   amax = max |a[r][k]| over the block's k;  a_scale = amax / 127
//   aq[k] = clamp(nearbyint(a[r][k] * (127 / amax)), -127, 127)   (0 when amax is 0)
//   asum  = sum aq[k];  dot[j] = sum q[k][j] * aq[k]   (int32, exact)
//   y[r][j] = fma(float(dot[j] - zp[b][j] * asum), a_scale * scale[b][j], y[r][j])
// with y from 0 and the blocks in order, so every variant (and the portable
// one) gives the same bits whatever the split between calls and threads.
// Codes q and zero points zp are 0..15 (uint4 weights, or int4 ones moved by
// 8 with their zero points: the differences are the same).
//
// B is packed once as nibbles, in panels of 16 columns; a block of a panel
// is block / 8 chunks of 64 bytes, chunk c holding k-groups 2c (low
// nibbles) and 2c + 1 (high nibbles) of 4 k each as [16 columns][4 k]: the
// unit of vpdpbusd / sdot (u8 codes x s8 activations). The zero points and
// scales of a block follow as [16] bytes and [16] floats.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

class ThreadPool;  // thread_pool.h

constexpr int kWqS8Nr = 16;  // columns per panel

// A quantized per row and block (GemmWqS8QuantizeA).
struct WqS8A {
  const int8_t* q = nullptr;     // [rows][blocks * block], 0 past K
  const float* scale = nullptr;  // [rows][blocks]
  const int32_t* sum = nullptr;  // [rows][blocks]
};

struct WqS8PanelArgs {
  WqS8A a;
  int64_t rows = 0;  // rows of A in this call (<= the kernel's mr)
  int64_t blocks = 0, block = 0;
  const uint8_t* w = nullptr;  // panel panel0 (panel p at w + p * panel_bytes)
  int64_t panel_bytes = 0;
  int64_t panels = 0;  // panels of this call
  float* y = nullptr;  // y[r * ldy + j], j < cols
  int64_t ldy = 0, cols = 0;
};

struct GemmWqS8Kernels {
  const char* name;  // the features it needs ("avx512vnni", "avx2", "neon", "portable")
  int mr;
  void (*panel)(const WqS8PanelArgs& args);
};

// The variant `f` allows; the portable one without SIMD (accuracy_level 4
// then gives the same results on every CPU).
const GemmWqS8Kernels* GemmWqS8For(const CpuFeatures& f, const char** variant = nullptr);
// The plain C++ variant (tests run it on every target).
const GemmWqS8Kernels* GemmWqS8Portable();

struct WqS8PackedB {
  int64_t k = 0, n = 0, block = 0, blocks = 0, panel_bytes = 0;
  std::vector<uint8_t> data;  // [panel] of panel_bytes
};
// q: codes [k][n] (one byte each) and zp: [ceil(k / block)][n], all 0..15;
// scales like zp.
// False when block is not a positive multiple of 8 or a value is out of range.
bool PackWqS8B(const uint8_t* q, const int32_t* zp, const float* scales, int64_t k, int64_t n,
               int64_t block, WqS8PackedB* out);

// Bytes GemmWqS8 needs for A's quantized copy (its `scratch`).
size_t GemmWqS8ScratchBytes(const WqS8PackedB& b, int64_t rows);
// y [rows][n] = a [rows][k] x B as above; scratch: GemmWqS8ScratchBytes,
// 64-byte aligned. Split over the pool's threads by panels and row tiles.
void GemmWqS8(const GemmWqS8Kernels& kernels, const WqS8PackedB& b, const float* a, int64_t rows,
              float* y, void* scratch, ThreadPool* pool);

}  // namespace kernels
}  // namespace qfold
