// NEON vmath kernels (vmath.h): the shared algorithm over 4-lane vectors
// (Armv8.0 Advanced SIMD: fmla, frintn, fdiv).
#include <arm_neon.h>

#include "kernels/vmath.h"
#include "kernels/vmath_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V4 {
  using F = float32x4_t;
  static constexpr int kLanes = 4;
  static F Load(const float* p) { return vld1q_f32(p); }
  static void Store(float* p, F v) { vst1q_f32(p, v); }
  static F Set(float v) { return vdupq_n_f32(v); }
  static F Add(F a, F b) { return vaddq_f32(a, b); }
  static F Sub(F a, F b) { return vsubq_f32(a, b); }
  static F Mul(F a, F b) { return vmulq_f32(a, b); }
  static F Div(F a, F b) { return vdivq_f32(a, b); }
  static F Sqrt(F a) { return vsqrtq_f32(a); }
  static F Fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  // fminnm/fmaxnm: a NaN operand gives the other one; callers restore NaN at the end.
  static F Min(F a, F b) { return vminnmq_f32(a, b); }
  static F Max(F a, F b) { return vmaxnmq_f32(a, b); }
  static F Abs(F a) { return vabsq_f32(a); }
  static F Round(F a) { return vrndnq_f32(a); }
  static F Pow2(F n) {
    const int32x4_t e = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
  }
  static F Less(F a, F b) { return vreinterpretq_f32_u32(vcltq_f32(a, b)); }
  static F Equal(F a, F b) { return vreinterpretq_f32_u32(vceqq_f32(a, b)); }
  static F Exponent(F a) {
    const int32x4_t bits = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_f32(a), 23));
    return vcvtq_f32_s32(vsubq_s32(bits, vdupq_n_s32(127)));
  }
  static F Mantissa(F a) {
    const uint32x4_t bits = vandq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x007fffffu));
    return vreinterpretq_f32_u32(vorrq_u32(bits, vdupq_n_u32(0x3f800000u)));
  }
  static F IsNan(F a) { return vreinterpretq_f32_u32(vmvnq_u32(vceqq_f32(a, a))); }
  static bool All(F mask) { return vminvq_u32(vreinterpretq_u32_f32(mask)) != 0; }
  static bool None(F mask) { return vmaxvq_u32(vreinterpretq_u32_f32(mask)) == 0; }
  static F ScalePow2(F p, F n) { return vmath::ScalePow2TwoSteps<V4>(p, n); }
  static F Select(F mask, F a, F b) { return vbslq_f32(vreinterpretq_u32_f32(mask), a, b); }
  static F CopySign(F mag, F sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
};

using K = vmath::Kernels<V4>;

}  // namespace

extern const VMathKernels kVMathNeon;
const VMathKernels kVMathNeon = {"neon",
                                 K::Sigmoid,
                                 K::Tanh,
                                 K::Exp,
                                 K::Log,
                                 K::Erf,
                                 K::Gelu,
                                 K::GeluTanh,
                                 K::Swish,
                                 K::Max,
                                 K::ExpShiftSum,
                                 K::Lrn,
                                 K::LrnChannelsLast,
                                 K::HardSwish,
                                 K::Affine};

}  // namespace kernels
}  // namespace qfold
