// Per-channel requantization inputs of the 8-bit GEMM-based kernels
// (qlinear_s8.cc, conv_nhwc_s8.cc): the zero-point terms that depend only on
// the channel folded into the bias, as docs/NUMERICS.md derives, with int32
// wraparound like the reference's accumulators.
#pragma once
#include <cstdint>
#include <vector>

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

// For n channels with k-long dot products: wsum holds each channel's sum of
// the shifted (s8) weights, xzp_u the activation zero point shifted to u8;
// uint8 weights' zero points are shifted to s8 here.
inline void FoldChannels(int64_t n, int64_t k, const int32_t* bias,
                         const std::vector<int32_t>& wsum, int32_t xzp_u,
                         const std::vector<int32_t>& wzp, DType w_dtype, float x_scale,
                         const std::vector<float>& w_scale, float y_scale, ChannelParams* cp) {
  const int64_t padded = RoundUpTo(n, 64) + 64;
  cp->bias.assign(size_t(padded), 0);
  cp->wzp.assign(size_t(padded), 0);
  cp->mult.assign(size_t(padded), 0.f);
  cp->any_wzp = false;
  for (int64_t c = 0; c < n; ++c) {
    const int32_t z = wzp.size() == 1 ? wzp[0] : wzp[size_t(c)];
    const int32_t wz = w_dtype == DType::kUInt8 ? z - 128 : z;
    cp->wzp[size_t(c)] = wz;
    cp->any_wzp |= wz != 0;
    cp->bias[size_t(c)] = WrapInt32(int64_t(bias ? bias[c] : 0) - int64_t(xzp_u) * wsum[size_t(c)] +
                                    int64_t(WrapInt32(k * xzp_u)) * wz);
    // The multiplier in float32, in the reference's order (docs/NUMERICS.md).
    cp->mult[size_t(c)] = x_scale * w_scale[w_scale.size() == 1 ? 0 : size_t(c)] / y_scale;
  }
}

}  // namespace kernels
}  // namespace qfold
