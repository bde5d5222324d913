// Picks the GEMM kernels the CPU features allow; each ISA's file is compiled only
// for its architecture (runtime/CMakeLists.txt), with its own flags.
#include "kernels/gemm_s8.h"

#if defined(__x86_64__)
#include "kernels/gemm_s8_avxvnni.h"
#endif

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const GemmS8Kernels kGemmS8Avx2;
extern const GemmS8Kernels kGemmS8Avx512Vnni;
#endif
#if defined(__aarch64__)
// runtime/CMakeLists.txt always compiles the *_neon*.cc files on aarch64.
extern const GemmS8Kernels kGemmS8Neon;
extern const GemmS8Kernels kGemmS8NeonDot;
extern const GemmS8Kernels kGemmS8NeonI8mm;
#endif

const GemmS8Kernels* GemmS8For(const CpuFeatures& f, const char** variant) {
  const GemmS8Kernels* k = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    if (f.avx512_core() && f.avx512vnni)
      k = &kGemmS8Avx512Vnni;
    else if (f.avxvnni)
      k = GemmS8AvxVnni();
    else
      k = &kGemmS8Avx2;
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    if (f.dotprod && f.i8mm)
      k = &kGemmS8NeonI8mm;
    else if (f.dotprod)
      k = &kGemmS8NeonDot;
    else
      k = &kGemmS8Neon;
  }
#endif
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

}  // namespace kernels
}  // namespace qfold
