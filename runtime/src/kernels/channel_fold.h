// Per-channel requantization inputs of the 8-bit GEMM-based kernels
// (qlinear_s8.cc, conv_nhwc_s8.cc): the zero-point terms that depend only on
// the channel folded into the bias, as docs/NUMERICS.md derives, with int32
// wraparound like the reference's accumulators.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/const_span.h"
#include "qfold/dtype.h"

namespace qfold {
namespace kernels {

inline int32_t WrapInt32(int64_t v) {
  return int32_t(uint32_t(uint64_t(v)));
}

inline int64_t RoundUpTo(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// Arrays padded with zeros to a multiple of 64 plus 64 more entries, so a
// vector epilogue may read a whole panel past any channel.
struct ChannelParams {
  std::vector<int32_t> bias, wzp;
  std::vector<float> mult;
  bool any_wzp = false;
};

// Entries of each folded array for n channels (ChannelParams' padding).
inline size_t FoldedLength(int64_t n) {
  return size_t(RoundUpTo(n, 64) + 64);
}

// For n channels with k-long dot products: wsum holds each channel's sum of
// the shifted (s8) weights, xzp_u the activation zero point shifted to u8;
// uint8 weights' zero points are shifted to s8 here. Writes FoldedLength(n)
// entries of bias_out, wzp_out and mult_out (zeros past n); without
// `with_mult` (a float epilogue with its own multipliers) mult_out is all
// zero. Returns whether any shifted weight zero point is nonzero. Runs
// before every GEMM (once per step of a recurrent layer), so the loops carry
// no per-channel branches.
inline bool FoldChannelsInto(int64_t n, int64_t k, const int32_t* bias, const int32_t* wsum,
                             int32_t xzp_u, ConstSpan<int32_t> wzp, DType w_dtype, float x_scale,
                             ConstSpan<float> w_scale, float y_scale, int32_t* bias_out,
                             int32_t* wzp_out, float* mult_out, bool with_mult = true) {
  const size_t padded = FoldedLength(n), un = size_t(n);
  std::fill(bias_out + un, bias_out + padded, 0);
  std::fill(wzp_out + un, wzp_out + padded, 0);
  std::fill(mult_out, mult_out + padded, 0.f);
  const int32_t shift = w_dtype == DType::kUInt8 ? 128 : 0;
  int32_t any = 0;
  for (size_t c = 0; c < un; ++c) {
    const int32_t wz = (wzp.size() == 1 ? wzp[0] : wzp[c]) - shift;
    wzp_out[c] = wz;
    any |= wz;
  }
  const int64_t kz = WrapInt32(k * xzp_u);
  for (size_t c = 0; c < un; ++c)
    bias_out[c] =
        WrapInt32(int64_t(bias ? bias[c] : 0) - int64_t(xzp_u) * wsum[c] + kz * wzp_out[c]);
  if (with_mult) {
    // The multiplier in float32, in the reference's order (docs/NUMERICS.md).
    for (size_t c = 0; c < un; ++c)
      mult_out[c] = x_scale * w_scale[w_scale.size() == 1 ? 0 : c] / y_scale;
  }
  return any != 0;
}

// FoldChannelsInto cp's arrays, which keep their storage across calls.
inline void FoldChannels(int64_t n, int64_t k, const int32_t* bias, const int32_t* wsum,
                         int32_t xzp_u, const std::vector<int32_t>& wzp, DType w_dtype,
                         float x_scale, const std::vector<float>& w_scale, float y_scale,
                         ChannelParams* cp, bool with_mult = true) {
  const size_t padded = FoldedLength(n);
  cp->bias.resize(padded);
  cp->wzp.resize(padded);
  cp->mult.resize(padded);
  cp->any_wzp = FoldChannelsInto(n, k, bias, wsum, xzp_u, wzp, w_dtype, x_scale, w_scale, y_scale,
                                 cp->bias.data(), cp->wzp.data(), cp->mult.data(), with_mult);
}

}  // namespace kernels
}  // namespace qfold
