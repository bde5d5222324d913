// Reference sigmoid/tanh (libm, the oracle of the SIMD variants) and the
// choice of variant per ISA level.
#include "kernels/vmath.h"

#include <cmath>

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const VMathKernels kVMathAvx2;
#endif
#if defined(__aarch64__)
extern const VMathKernels kVMathNeon;
#endif

namespace {

void SigmoidRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
}

void TanhRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

const VMathKernels kVMathRef = {Isa::kReference, SigmoidRef, TanhRef};

}  // namespace

const VMathKernels& VMathFor(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx2:  // 256-bit FMA is all they need: one variant for every x86 level
    case Isa::kAvxVnni:
    case Isa::kAvx512Vnni:
      return kVMathAvx2;
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
    case Isa::kNeonDot:
    case Isa::kNeonI8mm:
      return kVMathNeon;
#endif
    default:
      return kVMathRef;
  }
}

const VMathKernels* VMathFor(const CpuFeatures& f, const char** variant) {
  const VMathKernels& k = VMathFor(HighestIsa(f));
  if (variant) *variant = k.isa == Isa::kReference ? nullptr : IsaName(k.isa);
  return &k;
}

}  // namespace kernels
}  // namespace qfold
