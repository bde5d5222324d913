// Packed 8-bit GEMM with fused requantization: the inner loops of the fast
// QLinearConv/QLinearMatMul paths (qlinear_s8.h). Naming follows
// <dtype>_<op>_<isa>: gemm_s8_avx512vnni.cc, gemm_s8_avx2.cc.
//
// C[r][c] = sum_k L[r][k] * R[k][c] with one operand unsigned 8-bit and the
// other signed 8-bit (int8 activations are shifted to uint8 by xor 0x80 and
// uint8 weights to int8 the same way; the caller folds the shifts into the
// bias, docs/NUMERICS.md). "Weights left" means L is the signed weight
// matrix (convolution over NCHW: out[m][p] = W[m][:] . X[:][p]); otherwise L
// holds the unsigned activations (MatMul: out[i][j] = A[i][:] . B[:][j]).
//
// Packed layouts, K rounded up to a multiple of 4 with zero bytes:
//   left:  panels of mr rows:    [panel][k / 4][row in panel][4]
//   right: panels of nr columns: [panel][k / 4][col in panel][4]
// Rows/columns past the end of a panel are zero. Accumulation is int32 with
// wraparound, exactly like the reference kernels.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

// Per-call epilogue: acc += bias[ch] - wzp[ch] * xsum[pos], then
// y = clamp(round(float(acc) * mult[ch]) + yzp, lo, hi) as in Requantize.
// ch is the row when weights are left, the column otherwise; pos the other.
// Arrays indexed by columns must be readable up to a multiple of nr.
struct GemmS8Args {
  const uint8_t* left = nullptr;   // packed, rows panels
  const uint8_t* right = nullptr;  // packed, cols panels
  int64_t rows = 0, cols = 0;
  int64_t k4 = 0;  // K / 4, rounded up
  bool weights_left = true;
  const int32_t* bias = nullptr;  // per channel, required
  const float* mult = nullptr;    // per channel, required
  const int32_t* wzp = nullptr;   // per channel; nullptr when every one is 0
  const int32_t* xsum = nullptr;  // per position; needed with wzp
  int32_t yzp = 0, lo = 0, hi = 0;
  uint8_t* y = nullptr;  // int8 or uint8 bytes, row-major with row stride ldy
  int64_t ldy = 0;
  // Instead of y: the int32 sums themselves (acc + bias - wzp * xsum, no
  // requantization; MatMulInteger/ConvInteger), row-major with row stride ldy.
  int32_t* y32 = nullptr;
  // Column-panel range to compute, for splitting the work between threads.
  int64_t panel_begin = 0, panel_end = -1;  // -1: all
};

struct GemmS8Kernels {
  const char* name;  // the features it needs ("avx2", "avxvnni", "neondot"...)
  int mr, nr;
  // src: rows x k bytes, row stride lds; xor_mask applied to every byte.
  void (*pack_left)(const uint8_t* src, int64_t lds, int64_t rows, int64_t k, uint8_t xor_mask,
                    uint8_t* dst);
  // src: k x cols bytes, row stride lds.
  void (*pack_right)(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, uint8_t xor_mask,
                     uint8_t* dst);
  void (*gemm)(const GemmS8Args& args);
  // Requantizes n accumulators of one channel: y[i] = clamp(round(float(acc[i] + bias) *
  // mult) + yzp, lo, hi), stored as bytes.
  void (*requant_row)(const int32_t* acc, int64_t n, int32_t bias, float mult, int32_t yzp,
                      int32_t lo, int32_t hi, uint8_t* y);
};

// The variant `f` allows, or nullptr (no SIMD features, or none compiled for
// this target); *variant (if given) receives its name or nullptr.
const GemmS8Kernels* GemmS8For(const CpuFeatures& f, const char** variant = nullptr);

// Bytes of a packed operand.
inline int64_t PackedBytes(int64_t n, int64_t k, int tile) {
  return (n + tile - 1) / tile * tile * ((k + 3) / 4 * 4);
}

}  // namespace kernels
}  // namespace qfold
