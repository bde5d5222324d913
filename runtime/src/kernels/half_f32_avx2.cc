// F16C widening (half_f32.h): 8 halves per vcvtph2ps. F16C is its own CPUID
// bit, so the function asks for it alone; HalfToF32For checks it.
#include <immintrin.h>

#include "kernels/half_f32.h"

namespace qfold {
namespace kernels {

__attribute__((target("f16c"))) void HalfToF32F16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i < n) {  // the tail through a zero-padded vector: no over-read
    alignas(16) uint16_t h[8] = {};
    alignas(32) float f[8];
    for (size_t j = i; j < n; ++j) h[j - i] = src[j];
    _mm256_store_ps(f, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
    for (size_t j = i; j < n; ++j) dst[j] = f[j - i];
  }
}

}  // namespace kernels
}  // namespace qfold
