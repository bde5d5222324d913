// NEON (Armv8.0) weight-only 4-bit GEMM with int8 activations
// (gemm_wq_s8.h): a panel row is four int32x4 of 4 columns; smull multiplies
// the codes (0..15, as s8) with the activations into 16-bit products and two
// pairwise adds sum each column's 4.
#include <arm_neon.h>

#include "kernels/gemm_wq_s8_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct WqS8Neon {
  static constexpr int kAccumulators = 16;
  static constexpr int kLanes = 4;
  using I = int32x4_t;
  using F = float32x4_t;
  using U = int8x16_t;
  static I Zero() { return vdupq_n_s32(0); }
  static F ZeroF() { return vdupq_n_f32(0.f); }
  static void Unpack(const uint8_t* w, U* lo, U* hi) {
    for (int v = 0; v < 4; ++v) {
      const uint8x16_t x = vld1q_u8(w + 16 * v);
      lo[v] = vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(15)));
      hi[v] = vreinterpretq_s8_u8(vshrq_n_u8(x, 4));
    }
  }
  static I Dot(I acc, U u, int32_t a4) {
    const int8x16_t a = vreinterpretq_s8_s32(vdupq_n_s32(a4));
    const int16x8_t p0 = vmull_s8(vget_low_s8(u), vget_low_s8(a));
    const int16x8_t p1 = vmull_high_s8(u, a);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
  }
  static F Block(I acc, const uint8_t* zp, int32_t asum, float a_scale, const float* scale, F y) {
    const int32x4_t z = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(
        uint64_t(zp[0]) | uint64_t(zp[1]) << 8 | uint64_t(zp[2]) << 16 | uint64_t(zp[3]) << 24)))));
    const int32x4_t d = vsubq_s32(acc, vmulq_n_s32(z, asum));
    return vfmaq_f32(y, vcvtq_f32_s32(d), vmulq_n_f32(vld1q_f32(scale), a_scale));
  }
  static void StoreCols(float* p, F v, int n) {
    if (n == 4) return vst1q_f32(p, v);
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }
};

}  // namespace

extern const GemmWqS8Kernels kGemmWqS8Neon;
const GemmWqS8Kernels kGemmWqS8Neon = {"neon", 4, gemm_wq_s8::Panel<WqS8Neon, 4>};

}  // namespace kernels
}  // namespace qfold
