// The epilogue of the Arm int8 kernels (igemm_s8_neon.cc, igemm_s8_neondot.cc,
// dwconv_nhwc_s8_neon.cc, pool_nhwc_s8_neon.cc): int32 accumulators of 4 channels to requantized
// bytes or to QfConvDequant's floats, exactly as the reference does
// (docs/NUMERICS.md). In an anonymous namespace: each file compiles its own
// copy with its own -march flags.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

// The 4 bytes at p (any alignment: rows are byte-aligned) in every 32-bit lane.
typedef uint32_t UnalignedU32 __attribute__((aligned(1), may_alias));
inline uint32x4_t Bcast4(const uint8_t* p) {
  return vdupq_n_u32(*reinterpret_cast<const UnalignedU32*>(p));
}

// clamp(round(f)) + yzp as int16 lanes (in [-128, 255]), as RoundAddSaturate
// on a float: NaN to 0 (the zero point); the float clamp to the integer
// bounds lo - yzp and hi - yzp equals the reference's clamp after rounding;
// fcvtns rounds half to even like nearbyint.
inline int16x4_t RoundClamp4(float32x4_t f, float32x4_t lo, float32x4_t hi, int32x4_t yzp) {
  f = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(f), vceqq_f32(f, f)));
  f = vminq_f32(vmaxq_f32(f, lo), hi);
  return vmovn_s32(vaddq_s32(vcvtnq_s32_f32(f), yzp));
}

// Requantize: RoundClamp4(float(acc) * mult).
inline int16x4_t Requant4(int32x4_t acc, float32x4_t mult, float32x4_t lo, float32x4_t hi,
                          int32x4_t yzp) {
  return RoundClamp4(vmulq_f32(vcvtq_f32_s32(acc), mult), lo, hi, yzp);
}

// clamp(fma(float(acc), mult, bias), lo, hi) with one rounding like std::fma;
// the comparisons select like the reference's (NaN passes, -0 stays -0 where
// FMAX would give +0).
inline float32x4_t Dequant4(int32x4_t acc, float32x4_t mult, float32x4_t bias, float32x4_t lo,
                            float32x4_t hi) {
  float32x4_t f = vfmaq_f32(bias, vcvtq_f32_s32(acc), mult);
  f = vbslq_f32(vcltq_f32(f, lo), lo, f);
  return vbslq_f32(vcgtq_f32(f, hi), hi, f);
}

// The igemm microkernels' epilogue (igemm_s8.h arguments).
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
    const size_t n = size_t(a.cols < 4 * kNv ? a.cols : 4 * kNv);
    if (a.yf) {
      float out[4 * kNv];
      for (int v = 0; v < kNv; ++v)
        vst1q_f32(out + 4 * v,
                  Dequant4(x[v], vld1q_f32(a.mult + 4 * v), vld1q_f32(a.fbias + 4 * v), flo, fhi));
      std::memcpy(a.yf + row * a.ldy, out, n * sizeof(float));
      return;
    }
    static_assert(kNv % 2 == 0, "panels of 8 channels");
    uint8_t out[4 * kNv];
    for (int v = 0; v < kNv; v += 2) {
      const int16x8_t h =
          vcombine_s16(Requant4(x[v], vld1q_f32(a.mult + 4 * v), lo, hi, yzp),
                       Requant4(x[v + 1], vld1q_f32(a.mult + 4 * v + 4), lo, hi, yzp));
      vst1_u8(out + 4 * v, vmovn_u16(vreinterpretq_u16_s16(h)));  // the low bytes
    }
    std::memcpy(a.y + row * a.ldy, out, n);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
