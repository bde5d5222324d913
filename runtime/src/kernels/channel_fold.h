// Per-channel requantization inputs of the 8-bit GEMM-based kernels
// (qlinear_s8.cc, conv_nhwc_s8.cc): the zero-point terms that depend only on
// the channel folded into the bias, as docs/NUMERICS.md derives, with int32
// wraparound like the reference's accumulators.
#pragma once
#include <algorithm>
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
// uint8 weights' zero points are shifted to s8 here. Without `with_mult`
// (a float epilogue with its own multipliers) cp->mult is left zero. Runs
// before every GEMM (once per step of a recurrent layer), so the arrays keep
// their storage and the loops carry no per-channel branches.
inline void FoldChannels(int64_t n, int64_t k, const int32_t* bias, const int32_t* wsum,
                         int32_t xzp_u, const std::vector<int32_t>& wzp, DType w_dtype,
                         float x_scale, const std::vector<float>& w_scale, float y_scale,
                         ChannelParams* cp, bool with_mult = true) {
  const size_t padded = size_t(RoundUpTo(n, 64) + 64), un = size_t(n);
  for (auto* v : {&cp->bias, &cp->wzp}) {
    v->resize(padded);
    std::fill(v->begin() + int64_t(un), v->end(), 0);
  }
  cp->mult.assign(padded, 0.f);
  const int32_t shift = w_dtype == DType::kUInt8 ? 128 : 0;
  int32_t any = 0;
  for (size_t c = 0; c < un; ++c) {
    const int32_t wz = (wzp.size() == 1 ? wzp[0] : wzp[c]) - shift;
    cp->wzp[c] = wz;
    any |= wz;
  }
  cp->any_wzp = any != 0;
  const int64_t kz = WrapInt32(k * xzp_u);
  for (size_t c = 0; c < un; ++c)
    cp->bias[c] =
        WrapInt32(int64_t(bias ? bias[c] : 0) - int64_t(xzp_u) * wsum[c] + kz * cp->wzp[c]);
  if (!with_mult) return;
  // The multiplier in float32, in the reference's order (docs/NUMERICS.md).
  for (size_t c = 0; c < un; ++c)
    cp->mult[c] = x_scale * w_scale[w_scale.size() == 1 ? 0 : c] / y_scale;
}

}  // namespace kernels
}  // namespace qfold
