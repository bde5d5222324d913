// NEON weight-only quantized GEMM (gemm_wq_f32.h): a panel row is four q
// registers; 4 rows of A give 16 accumulators.
#include <arm_neon.h>

#include "kernels/gemm_wq_f32_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct WqQ {
  using F = float32x4_t;
  static constexpr int kLanes = 4;
  static F Zero() { return vdupq_n_f32(0.f); }
  static F Set(float v) { return vdupq_n_f32(v); }
  static F Load(const float* p) { return vld1q_f32(p); }
  static F Mul(F a, F b) { return vmulq_f32(a, b); }
  static F Fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static void Widen8(const int8_t* p, F* v) {
    const int8x16_t q = vld1q_s8(p);
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    v[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    v[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    v[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    v[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
  }
  static void Widen16(const int16_t* p, F* v) {
    const int16x8_t lo = vld1q_s16(p), hi = vld1q_s16(p + 8);
    v[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    v[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
    v[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    v[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
  }
  static void StoreCols(float* p, F v, int n) {
    if (n == 4) return vst1q_f32(p, v);
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }
};

}  // namespace

extern const GemmWqF32Kernels kGemmWqF32Neon;
const GemmWqF32Kernels kGemmWqF32Neon = {"neon", 4, gemm_wq::Panel<WqQ, 4>};

}  // namespace kernels
}  // namespace qfold
