// CPU feature detection for the SIMD kernels: the instruction-set level is
// detected once (cpuid, plus xgetbv so AVX/AVX-512 state is enabled by the
// OS; getauxval hardware caps on Arm Linux), and the environment variable
// QFOLD_ISA=reference|avx2|avxvnni|avx512vnni (|neon|neondot|neoni8mm on Arm)
// may force a
// lower level, never a higher one.
#pragma once
#include <vector>

namespace qfold {
namespace kernels {

// Levels are ordered within one architecture (x86: kAvx2 < kAvxVnni <
// kAvx512Vnni; Arm: kNeon < kNeonDot < kNeonI8mm): a higher level implies the
// lower ones.
enum class Isa : int {
  kReference = 0,
  kAvx2 = 1,        // x86-64: AVX2 + FMA, u8*s8 dot products through vpmaddwd
  kAvxVnni = 2,     // x86-64: AVX2 + AVX-VNNI (256-bit vpdpbusd, VEX encoded)
  kAvx512Vnni = 3,  // x86-64: AVX-512 F/BW/DQ/VL + VNNI (vpdpbusd)
  kNeon = 4,        // aarch64: Armv8.0 Advanced SIMD (Cortex-A53/A57/A72/A73)
  kNeonDot = 5,     // aarch64: Armv8.2 dot product (sdot/udot)
  kNeonI8mm = 6,    // aarch64: Armv8.6 int8 matrix multiply (smmla/usmmla), with dotprod
};

const char* IsaName(Isa isa);
// The best level this CPU (and OS) supports, detected once.
Isa DetectedIsa();
// The level kernels use: DetectedIsa(), lowered by QFOLD_ISA or SetIsaForTesting.
Isa ActiveIsa();
// Every level usable on this CPU, lowest first (kReference always).
std::vector<Isa> SupportedIsas();
// Tests: forces `isa` (clamped to what the CPU supports); kernels prepared
// afterwards use it. Returns the level in effect.
Isa SetIsaForTesting(Isa isa);

// Kernels run at `isa` (clamped to what the CPU has) until this is destroyed,
// then at the level before. Process-wide, not thread-safe: for single-threaded
// callers such as the converter, which folds constants at the reference level.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : saved_(ActiveIsa()) { SetIsaForTesting(isa); }
  ~ScopedIsa() { SetIsaForTesting(saved_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa saved_;
};

}  // namespace kernels
}  // namespace qfold
