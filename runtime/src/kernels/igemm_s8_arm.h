// The epilogue of the Arm indirect GEMM microkernels (igemm_s8.h), shared by
// igemm_s8_neon.cc and igemm_s8_neondot.cc: int32 accumulators of 4
// channels to requantized bytes or to QfConvDequant's floats, exactly as the
// reference does (docs/NUMERICS.md). In an anonymous namespace: each file
// compiles its own copy with its own -march flags.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // the rows are byte-aligned
  return v;
}

struct ArmEpilogue {
  float32x4_t lo, hi, flo, fhi;
  int32x4_t yzp;
  explicit ArmEpilogue(const IgemmS8Args& a)
      : lo(vdupq_n_f32(float(a.lo - a.yzp))),
        hi(vdupq_n_f32(float(a.hi - a.yzp))),
        flo(vdupq_n_f32(a.flo)),
        fhi(vdupq_n_f32(a.fhi)),
        yzp(vdupq_n_s32(a.yzp)) {}

  // Row `row` of the tile: acc[v] holds channels 4v..4v+3 of the panel.
  template <int kNv>
  void Store(const IgemmS8Args& a, int64_t row, const int32x4_t (&acc)[kNv]) const {
    int32x4_t x[kNv];
    for (int v = 0; v < kNv; ++v) {
      x[v] = vaddq_s32(acc[v], vld1q_s32(a.bias + 4 * v));  // wraps like WrapInt32
      if (a.wzp) x[v] = vmlsq_s32(x[v], vld1q_s32(a.wzp + 4 * v), vdupq_n_s32(a.xsum[row]));
    }
    if (a.yf) {
      float* y = a.yf + row * a.ldy;
      float out[4 * kNv];
      for (int v = 0; v < kNv; ++v) {
        // One rounding like std::fma; the comparisons select like the
        // reference's (NaN passes, -0 stays -0 where FMAX would give +0).
        float32x4_t f =
            vfmaq_f32(vld1q_f32(a.fbias + 4 * v), vcvtq_f32_s32(x[v]), vld1q_f32(a.mult + 4 * v));
        f = vbslq_f32(vcltq_f32(f, flo), flo, f);
        f = vbslq_f32(vcgtq_f32(f, fhi), fhi, f);
        vst1q_f32(out + 4 * v, f);
      }
      std::memcpy(y, out, size_t(a.cols < 4 * kNv ? a.cols : 4 * kNv) * sizeof(float));
      return;
    }
    // clamp(round(float(acc) * mult)) + yzp: NaN to 0 (the zero point), the
    // float clamp to the integer bounds equals the reference's clamp after
    // rounding; fcvtns rounds half to even like nearbyint.
    int16x8_t h[(kNv + 1) / 2];
    for (int v = 0; v < kNv; ++v) {
      float32x4_t f = vmulq_f32(vcvtq_f32_s32(x[v]), vld1q_f32(a.mult + 4 * v));
      f = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(f), vceqq_f32(f, f)));
      f = vminq_f32(vmaxq_f32(f, lo), hi);
      const int16x4_t r = vmovn_s32(vaddq_s32(vcvtnq_s32_f32(f), yzp));  // in [-128, 255]
      if (v % 2 == 0)
        h[v / 2] = vcombine_s16(r, r);
      else
        h[v / 2] = vcombine_s16(vget_low_s16(h[v / 2]), r);
    }
    uint8_t out[4 * kNv + 4];
    for (int v = 0; v < (kNv + 1) / 2; ++v)
      vst1_u8(out + 8 * v, vmovn_u16(vreinterpretq_u16_s16(h[v])));  // low bytes
    std::memcpy(a.y + row * a.ldy, out, size_t(a.cols < 4 * kNv ? a.cols : 4 * kNv));
  }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
