// Choice of the float binary kernels' variant (binary_f32.h).
#include "kernels/binary_f32.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const BinaryF32Kernels kBinaryF32Avx2;
extern const BinaryF32Kernels kBinaryF32Avx512f;
#endif
#if defined(__aarch64__)
extern const BinaryF32Kernels kBinaryF32Neon;
#endif

const BinaryF32Kernels* BinaryF32For(const CpuFeatures& f, const char** variant) {
  // Names spelled here, not read from the tables: those are initialized at
  // run time and a static initializer could get here first.
  const BinaryF32Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = f.avx512f ? &kBinaryF32Avx512f : &kBinaryF32Avx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    k = &kBinaryF32Neon;
    name = "neon";
  }
#endif
  (void)f;
  if (variant) *variant = name;
  return k;
}

}  // namespace kernels
}  // namespace qfold
