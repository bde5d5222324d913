// NEON row kernels (rowops_f32.h): the shared algorithm over 4-lane vectors
// (Armv8.0 Advanced SIMD).
#include <arm_neon.h>

#include "kernels/rowops_f32.h"
#include "kernels/rowops_f32_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V4 {
  using F = float32x4_t;
  using M = uint32x4_t;
  static constexpr int kLanes = 4;
  static F Load(const float* p) { return vld1q_f32(p); }
  static void Store(float* p, F v) { vst1q_f32(p, v); }
  static F Set(float v) { return vdupq_n_f32(v); }
  static F Add(F a, F b) { return vaddq_f32(a, b); }
  static F Sub(F a, F b) { return vsubq_f32(a, b); }
  static F Mul(F a, F b) { return vmulq_f32(a, b); }
  static F Fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static M Less(F a, F b) { return vcltq_f32(a, b); }
  static F Select(M m, F a, F b) { return vbslq_f32(m, a, b); }
  static float HorizontalSum(F v) {
    const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(vpadd_f32(s, s), 0);
  }
  using D = float64x2_t;
  static constexpr int kDLanes = 2;
  static D LoadD(const double* p) { return vld1q_f64(p); }
  static void StoreD(double* p, D v) { vst1q_f64(p, v); }
  static D AddD(D a, D b) { return vaddq_f64(a, b); }
  static void Widen(F v, D* d) {
    d[0] = vcvt_f64_f32(vget_low_f32(v));
    d[1] = vcvt_high_f64_f32(v);
  }
};

using K = rowops::Kernels<V4>;

}  // namespace

extern const RowOpsF32Kernels kRowOpsF32Neon;
const RowOpsF32Kernels kRowOpsF32Neon = {V4::kLanes,     K::Sum,          K::SumSquares,
                                         K::LayerNorm,   K::Scale,        K::ChannelAffine,
                                         K::PlaneAffine, K::SumColumnsF64};

}  // namespace kernels
}  // namespace qfold
