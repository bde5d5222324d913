// NEON float binary kernels (binary_f32.h): 4 lanes; tails go through a
// 4-float buffer.
#include <arm_neon.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_f32_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V4 {
  using F = float32x4_t;
  using M = uint32x4_t;
  static constexpr int kLanes = 4;
  static F Load(const float* p) { return vld1q_f32(p); }
  static void Store(float* p, F v) { vst1q_f32(p, v); }
  static F LoadPart(const float* p, int m) {
    float t[4] = {0.f, 0.f, 0.f, 0.f};
    for (int i = 0; i < m; ++i) t[i] = p[i];
    return vld1q_f32(t);
  }
  static void StorePart(float* p, F v, int m) {
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < m; ++i) p[i] = t[i];
  }
  static F Set(float v) { return vdupq_n_f32(v); }
  static F Add(F a, F b) { return vaddq_f32(a, b); }
  static F Sub(F a, F b) { return vsubq_f32(a, b); }
  static F Mul(F a, F b) { return vmulq_f32(a, b); }
  static F Div(F a, F b) { return vdivq_f32(a, b); }
  static M Less(F a, F b) { return vcltq_f32(a, b); }
  static M Unordered(F a, F b) { return vmvnq_u32(vandq_u32(vceqq_f32(a, a), vceqq_f32(b, b))); }
  static F Select(M mask, F a, F b) { return vbslq_f32(mask, a, b); }
};

}  // namespace

extern const BinaryF32Kernels kBinaryF32Neon;
const BinaryF32Kernels kBinaryF32Neon = binary_f32::Make<V4>("neon");

}  // namespace kernels
}  // namespace qfold
