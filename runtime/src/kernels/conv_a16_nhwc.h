// a16w8 convolution, channels-last: QLinearConv with 16-bit activations
// (x int16/uint16, y 8- or 16-bit) and 8-bit weights, the fast path of
// ops/quant_conv.cc. Results are bit-identical to the op's reference kernel
// (exact int64 accumulation, RequantizeWide in double; docs/NUMERICS.md).
//
// The product runs on int16 pairs (vpmaddwd on AVX2, vpdpwssd with VNNI): activations enter as
// x' = x - 32768 for uint16 (a sign-bit flip), so both operands are int16 and
//   sum((x - x_zp) * w) = sum(x' * w) - (x_zp - 32768) * sum(w).
// One pair adds at most 2^23 in magnitude (int8 weights), so int32 partial
// sums are exact over 255 pairs (128 for uint8 weights); longer reductions
// (when the weights' sizes do not rule overflow out) add such int32 partial
// sums into double, which is exact below 2^53. Requires 8-bit weights with
// zero point 0 (symmetric, as quantizers write int8 weights); grouped
// convolutions run one GEMM per group.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/cpu_features.h"
#include "kernels/qlinear_s8.h"

namespace qfold {
namespace kernels {

// Packs W [M, C, kh, kw] (int8/uint8) with zero points w_zp (1 or M values);
// null when the fast kernel does not apply (no SIMD level, a nonzero weight
// zero point). Depthwise convolutions (M == C == group)
// have their own kernel (one pixel at a time, taps in pairs).
struct KernelConfig;  // kernel_config.h

std::shared_ptr<void> PrepareQConvA16Nhwc(const KernelConfig& kc, const Tensor& w, int64_t group,
                                          const std::vector<int32_t>& w_zp);

// QLinearMatMul with a constant B [K, N] (zero points 0): the same kernel as
// a 1x1 convolution over the rows of A; run it with RunQConvA16Nhwc and a call
// whose x is A ([..., K]), y is Y ([..., N]), ih = oh = 1, iw = ow = rows.
std::shared_ptr<void> PrepareQMatMulA16(const KernelConfig& kc, const Tensor& b,
                                        const std::vector<int32_t>& b_zp);

// c.x: [N, ih, iw, C] int16/uint16; c.y: [N, oh, ow, M] int8/uint8/int16/uint16
// (1-D: ih = oh = kh = 1). x_scale * w_scale[m] / y_scale is formed in double
// in that order. False when not covered. Its scratch (per channel
// corrections and multipliers, per thread unrolled rows or tap pointers):
// c.scratch when planned, else allocated for the call.
bool RunQConvA16Nhwc(void* state, const QConvCall& c);
// The scratch bytes RunQConvA16Nhwc(state, c) uses (c's geometry and
// tensors' shapes and dtypes, pool; not their data).
size_t QConvA16NhwcScratch(const void* state, const QConvCall& c);

// The microkernel's requantization: y = clamp(nearbyint((acc + corr[n]) *
// mult[n]) + zp, lo, hi), stored as `type`; corr and mult point at the
// panel's first column (16 readable values).
struct A16Output {
  enum Type { kS8, kU8, kS16, kU16 } type = kU16;
  const double* corr = nullptr;
  const double* mult = nullptr;
  int32_t zp = 0, lo = 0, hi = 0;
};

// The microkernel contract (conv_a16_nhwc_x86.h, _avx512vnni.cc, _neon.cc): rows of `a` (up to 4,
// each kpairs * 2 int16) times one packed panel of 16 columns (or several: A16Kernels::gemm_panels)
// ([kpairs][16][2] int16), reducing in int32 over at most `chunk` pairs at a
// time (exact sums beyond it in double), requantized per `o` into the first
// `cols` elements at y[row].
using A16GemmFn = void (*)(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs,
                           int64_t chunk, const A16Output& o, void* const* y, int cols);

// The depthwise microkernel (conv_a16_nhwc_x86.h, _neon.cc): one output pixel, all
// channels. taps: 2 * tap_pairs row pointers (int16/uint16 [channels]; the
// padding taps point at a row of x_zp); w: [tap_pairs][channels rounded up to
// 16][2] int16 in the kernel's interleaved order; flip: uint16 input (x is
// read as x - 32768); corr/mult of `o` per channel (padded to 16); the
// requantized channels go to y.
using A16DepthwiseFn = void (*)(const void* const* taps, int64_t tap_pairs, const int16_t* w,
                                int64_t channels, bool flip, const A16Output& o, void* y);

// The family's kernels (null: the ops run their reference kernels).
struct A16Kernels {
  A16GemmFn gemm;
  A16DepthwiseFn depthwise;
  // Panels one gemm call may take: cols up to 16 * gemm_panels, the panels
  // consecutive in memory (kpairs * 32 int16 apart) and corr/mult/y running on.
  int gemm_panels;
};
// The variant `f` allows: avx512vnni (zmm vpdpwssd GEMM, ymm depthwise),
// avxvnni (ymm vpdpwssd), avx2 (vpmaddwd), neon (every Arm level).
const A16Kernels* A16KernelsFor(const CpuFeatures& f, const char** variant);

}  // namespace kernels
}  // namespace qfold
