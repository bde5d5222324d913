// Depthwise 8-bit convolution (group == channels, one filter per channel)
// over NCHW planes, the fast path of QLinearConv behind RunQConvS8
// (qlinear_s8.h). Bit-identical to the reference (docs/NUMERICS.md):
//   acc = sum((x - x_zp) * (w - w_zp)) + bias,
//   y   = clamp(round(float(acc) * mult) + y_zp, lo, hi).
//
// Design: per plane, the padded input is widened once to int16 x - x_zp
// (0 in padding), so every tap reads a contiguous run of inputs for
// consecutive outputs. Taps are grouped in pairs whose int16 products are
// summed exactly into int32 lanes (vpmaddwd / vpdpwssd; NEON multiplies tap
// by tap), the weight pair packed in one int32. Stride 1 and 2 (dilation 1)
// read pairs of adjacent inputs straight from the row; other strides and
// dilations split rows into phases and interleave the two taps' inputs. The
// kernels requantize in registers and store bytes; no int32 buffer is written
// (except for ConvInteger, whose output is the int32 sums).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/qlinear_s8.h"

namespace qfold {
namespace kernels {

// One plane (one channel of one image). The int16 plane holds x - x_zp,
// 0 in padding, row by row; output row oy's window starts at
// src + oy * out_row_step, its tap row ky at + ky * tap_row_step.
// Rows are readable well past the last output's taps (kDwRowAlign), so the
// kernels compute whole vectors of outputs and store only ow bytes.
struct DwPlaneArgs {
  const int16_t* src = nullptr;
  int64_t out_row_step = 0, tap_row_step = 0;
  int64_t oh = 0, ow = 0;
  int kh = 1, kw = 1;
  // Weights (w - w_zp), packed per kernel kind (see DwConvS8Kernels).
  const int32_t* w = nullptr;
  // General kind only: element offsets from the window start of the two taps
  // of pair p at off[2p], off[2p + 1]; np pairs.
  const int64_t* off = nullptr;
  int np = 0;
  int32_t bias = 0;
  float mult = 0;
  int32_t yzp = 0, lo = 0, hi = 0;
  uint8_t* y = nullptr;  // oh * ow bytes
  // Instead of y: oh * ow int32 sums, unrequantized (ConvInteger).
  int32_t* y32 = nullptr;
};

constexpr int64_t kDwRowAlign = 64;

// Int16 weight pair (a, b) in one int32: a in the low half (the first tap).
inline int32_t DwPair(int32_t a, int32_t b) {
  return int32_t(uint32_t(uint16_t(a)) | uint32_t(uint16_t(b)) << 16);
}

struct DwConvS8Kernels {
  const char* name;  // the features it needs
  // dst[i] = int16(src[i]) - xzp, src int8 when is_signed else uint8.
  void (*widen_row)(const uint8_t* src, int64_t n, bool is_signed, int32_t xzp, int16_t* dst);
  // even[j] = src[2j], odd[j] = src[2j + 1] for j < n.
  void (*split2)(const int16_t* src, int64_t n, int16_t* even, int16_t* odd);
  // Any stride/dilation: rows split into `sw` phases (phase r, column j =
  // padded column j * sw + r) so each tap reads consecutive columns; w holds
  // np pairs DwPair(w[t0], w[t1]) for the taps at off[2p], off[2p + 1] (a lone
  // last tap repeats its offset with weight 0).
  void (*general)(const DwPlaneArgs& a);
  // Horizontal stride 1, dilation 1, kw in {3, 5, 7}, unsplit rows; null if
  // absent. Per kernel row, nl = kw / 2 + 1 pairs E[q] = DwPair(w[2q], w[2q+1])
  // for even outputs, then nl pairs O[q] = DwPair(w[2q-1], w[2q]) for odd
  // ones (out-of-range taps 0); both read the input pair at column 2q.
  void (*stride1)(const DwPlaneArgs& a);
  // Horizontal stride 2, dilation 1, kw in {3, 5, 7}, unsplit rows; null if
  // absent. Per kernel row, (kw + 1) / 2 pairs DwPair(w[2q], w[2q + 1]).
  void (*stride2)(const DwPlaneArgs& a);
};

// The variant `f` allows, or nullptr (no SIMD features, or none compiled for
// this target); *variant (if given) receives its name or nullptr.
const DwConvS8Kernels* DwConvS8For(const CpuFeatures& f, const char** variant = nullptr);

// Prepared depthwise weights (owned by QConvState). A call's packed
// weights, multipliers and per-thread planes live in its scratch.
struct DwConvS8State {
  const DwConvS8Kernels* k = nullptr;
  DType w_dtype = DType::kUndefined;
  int64_t m = 0, kh = 1, kw = 1;
  std::vector<int16_t> w;  // raw weights [m][kh * kw]
};

// Fills *s for W [M, 1, kh(, kw)]; false when no depthwise kernel applies.
bool PrepareDwConvS8(const KernelConfig& kc, const Tensor& w, DwConvS8State* s);
// The scratch bytes RunDwConvS8(s, c) uses (c's geometry, x's shape and
// pool; not its data); 0 when the call is not covered.
size_t DwConvS8Scratch(const DwConvS8State& s, const QConvCall& c);
// Runs one depthwise call (c.x has M channels) in c.scratch when planned;
// false when not covered.
bool RunDwConvS8(const DwConvS8State& s, const QConvCall& c);

}  // namespace kernels
}  // namespace qfold
