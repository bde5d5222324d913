// NEON widening (half_f32.h): 4 halves per fcvtl (base Armv8.0 AArch64).
#include <arm_neon.h>

#include "kernels/half_f32.h"

namespace qfold {
namespace kernels {

void HalfToF32Neon(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
  if (i < n) {  // the tail through a zero-padded vector: no over-read
    uint16_t h[4] = {};
    float f[4];
    for (size_t j = i; j < n; ++j) h[j - i] = src[j];
    vst1q_f32(f, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))));
    for (size_t j = i; j < n; ++j) dst[j] = f[j - i];
  }
}

}  // namespace kernels
}  // namespace qfold
