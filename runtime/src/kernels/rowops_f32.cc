// Choice of the row kernels' variant (rowops_f32.h).
#include "kernels/rowops_f32.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const RowOpsF32Kernels kRowOpsF32Avx2;
extern const RowOpsF32Kernels kRowOpsF32Avx512f;
#endif
#if defined(__aarch64__)
extern const RowOpsF32Kernels kRowOpsF32Neon;
#endif

const RowOpsF32Kernels* RowOpsF32For(const CpuFeatures& f, const char** variant) {
  const RowOpsF32Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = f.avx512f ? &kRowOpsF32Avx512f : &kRowOpsF32Avx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    k = &kRowOpsF32Neon;
    name = "neon";
  }
#endif
  (void)f;
  if (variant) *variant = name;
  return k;
}

}  // namespace kernels
}  // namespace qfold
