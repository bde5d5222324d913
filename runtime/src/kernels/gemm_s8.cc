// Picks the GEMM kernels of an ISA level; each ISA's file is compiled only
// for its architecture (runtime/CMakeLists.txt), with its own flags.
#include "kernels/gemm_s8.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const GemmS8Kernels kGemmS8Avx2;
extern const GemmS8Kernels kGemmS8Avx512Vnni;
#endif
#if defined(__aarch64__)
extern const GemmS8Kernels kGemmS8NeonDot;
#endif

const GemmS8Kernels* GemmS8For(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return &kGemmS8Avx2;
    case Isa::kAvx512Vnni:
      return &kGemmS8Avx512Vnni;
#endif
#if defined(__aarch64__) && defined(QFOLD_HAVE_NEON_DOT)
    case Isa::kNeonDot:
      return &kGemmS8NeonDot;
#endif
    default:
      return nullptr;
  }
}

}  // namespace kernels
}  // namespace qfold
