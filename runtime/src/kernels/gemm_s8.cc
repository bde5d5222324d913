// Picks the GEMM kernels of an ISA level; each ISA's file is compiled only
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

const GemmS8Kernels* GemmS8For(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return &kGemmS8Avx2;
    case Isa::kAvxVnni:
      return GemmS8AvxVnni();
    case Isa::kAvx512Vnni:
      return &kGemmS8Avx512Vnni;
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
      return &kGemmS8Neon;
    case Isa::kNeonDot:
      return &kGemmS8NeonDot;
    case Isa::kNeonI8mm:
      return &kGemmS8NeonI8mm;
#endif
    default:
      return nullptr;
  }
}

}  // namespace kernels
}  // namespace qfold
