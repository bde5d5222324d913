// Choice of the float16 widening variant (half_f32.h) and its reference.
#include "kernels/half_f32.h"

#include "core/half.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
void HalfToF32F16c(const uint16_t* src, float* dst, size_t n);
#endif
#if defined(__aarch64__)
void HalfToF32Neon(const uint16_t* src, float* dst, size_t n);
#endif

void HalfToF32Reference(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

HalfToF32Fn HalfToF32For(const CpuFeatures& f, const char** variant) {
  HalfToF32Fn fn = HalfToF32Reference;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.f16c) {
    fn = HalfToF32F16c;
    name = "f16c";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    fn = HalfToF32Neon;
    name = "neon";
  }
#endif
  (void)f;
  if (variant) *variant = name;
  return fn;
}

}  // namespace kernels
}  // namespace qfold
