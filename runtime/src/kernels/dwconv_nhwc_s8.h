// Channels-last depthwise 8-bit convolution (group == C == M, W [M, 1, kh(, kw)]),
// the fast path of QLinearConv with channels_last = 1 for depthwise layers:
// x [N, ih, iw, C], y [N, oh, ow, C] (1-D: [N, iw, C], ih = oh = kh = 1).
// Vectorized across channels: every tap of an output pixel reads C
// contiguous bytes. Bit-identical to the reference QLinearConv
// (docs/NUMERICS.md) at every ISA level and thread count, and so is the
// float output of QfConvDequant (QConvCall::dq_mult).
//
// Design: per output row, an indirection buffer holds one pointer per output
// pixel and tap (taps outside the input point at a row of x_zp bytes), taps
// taken in pairs. Weights are packed once per (weights, zero points, scales)
// as int16 pairs (w[t0] - w_zp, w[t1] - w_zp) per channel, so one pair of
// input rows is widened to int16, interleaved and multiply-added into int32
// lanes (vpmaddwd / vpdpwssd), exact. The x_zp term is folded into the bias
// (x_zp rows make the window complete), so raw x is multiplied.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/cpu_features.h"
#include "kernels/qlinear_s8.h"

namespace qfold {
namespace kernels {

// Prepares W [M, 1, kh(, kw)] for `group` == M; null when not depthwise or
// no fast kernel applies.
std::shared_ptr<void> PrepareDwConvNhwcS8(const KernelConfig& kc, const Tensor& w, int64_t group);

// False when the call is not covered (the op then runs its reference kernel).
// Its scratch (the call's bias and multipliers, the x_zp row, per thread tap
// pointers): c.scratch when planned, else allocated for the call.
bool RunDwConvNhwcS8(void* state, const QConvCall& c);
// The scratch bytes RunDwConvNhwcS8(state, c) uses (c's geometry, x's shape
// and pool; not its data).
size_t DwConvNhwcS8Scratch(const void* state, const QConvCall& c);

// ---- Internal: the per-ISA row kernels ----------------------------------

// One output row (or any run of output pixels).
struct DwNhwcRowArgs {
  // Pixel p reads taps[p * tap_stride + i] + p * pix_step: tap_stride 2 * np
  // with a buffer per pixel, 0 with one set of taps shifted along the row
  // (interior pixels, pix_step = stride * C).
  const uint8_t* const* taps = nullptr;
  int64_t tap_stride = 0, pix_step = 0;
  int64_t npix = 0, c = 0;
  int np = 0;                     // tap pairs (a lone last tap pairs with weight 0)
  const int16_t* w = nullptr;     // per channel block: np pairs x block int16 pairs
  const int32_t* bias = nullptr;  // per channel block: block values (x_zp folded in)
  const float* mult = nullptr;    // per channel block: block values
  int32_t yzp = 0, lo = 0, hi = 0;
  bool x_signed = false;
  uint8_t* y = nullptr;  // npix * c bytes
  // QfConvDequant's float output instead of y: clamp(fma(float(acc), mult,
  // fbias), flo, fhi) into npix * c floats; fbias per channel block like bias.
  float* yf = nullptr;
  const float* fbias = nullptr;
  float flo = 0, fhi = 0;
};

struct DwConvNhwcKernels {
  int block;  // channels per packed block
  // Packed in the order vpunpck{l,h}wd leave channels in (per 128-bit lane:
  // channels 0-3 of each 8 in the low vector, 4-7 in the high one), else in
  // channel order.
  bool lane_pairs;
  // C % block > 0 and C >= block: the last packed block starts at C - block
  // (recomputing some channels, which gives the same bytes), else it is
  // zero-padded past C.
  bool overlap_tail;
  void (*row)(const DwNhwcRowArgs& a);
};

// The variant `f` allows; null without SIMD features. *variant (if given):
// its name or nullptr.
const DwConvNhwcKernels* DwConvNhwcFor(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
