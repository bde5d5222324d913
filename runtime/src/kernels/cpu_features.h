// CPU feature detection for the SIMD kernels: the features are detected once
// (cpuid, plus xgetbv so AVX/AVX-512 state is enabled by the OS; getauxval
// hardware caps on Arm Linux) and never change afterwards. Each kernel family
// picks its variant from the features it needs (kernel_config.h), so a CPU
// with AVX-512F but no VNNI still gets the AVX-512F float kernels.
//
// The environment variable QFOLD_ISA=reference|avx2|avxvnni|avx512vnni|amx
// (|neon|neondot|neoni8mm on Arm) names a feature set that lowers the
// detected features for tests (intersection: never more than the CPU has).
#pragma once
#include <string>
#include <vector>

namespace qfold {
namespace kernels {

struct CpuFeatures {
  // x86-64 (each AVX-512 flag only when the OS saves the ZMM state)
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;  // vcvtph2ps/vcvtps2ph (every AVX2 CPU has it; checked anyway)
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avxvnni = false;  // VEX-encoded 256-bit VNNI; not implied by avx512vnni
  bool avx512vbmi = false;
  bool avx512bf16 = false;
  // vdpbf16ps issues at the FMA's rate or faster, so a bf16 dot (two products a
  // lane) beats fp32 FMA: AMD (Zen 4, Zen 5). Intel cores issue it at half the
  // FMA rate (Emerald Rapids measured: 81 against 165 GFLOPS a core), where bf16
  // mode without AMX-BF16 would be slower than fp32; EnableBf16 reads this.
  bool avx512bf16_fast = false;
  // AMX-TILE + AMX-INT8, with the tile state enabled in XCR0 and (Linux) granted
  // to this process by arch_prctl(ARCH_REQ_XCOMP_PERM) at detection.
  bool amx = false;
  // AMX-BF16 (tdpbf16ps), on top of `amx` (the same tile state).
  bool amx_bf16 = false;
  // aarch64
  bool asimd = false;
  bool fp16 = false;  // half-precision arithmetic (Armv8.2 FEAT_FP16)
  bool dotprod = false;
  bool i8mm = false;
  bool bf16 = false;
  bool sve = false;

  // AVX-512 Foundation plus the BW/DQ/VL extensions every AVX-512 CPU has
  // (Skylake-SP onwards); the int8 kernels need this base.
  bool avx512_core() const { return avx512f && avx512bw && avx512dq && avx512vl; }
  // The features set in both.
  CpuFeatures operator&(const CpuFeatures& o) const;
  bool operator==(const CpuFeatures& o) const;
  bool operator!=(const CpuFeatures& o) const { return !(*this == o); }
  // "avx2 fma avx512f ..." (the set features, in declaration order; "none").
  std::string ToString() const;
};

// What this CPU (and OS) supports, detected once.
const CpuFeatures& DetectedCpuFeatures();
// The features sessions use by default: the detected ones, lowered by
// QFOLD_ISA (read once, at the first call).
const CpuFeatures& DefaultCpuFeatures();

// Named feature sets ("levels"), the values QFOLD_ISA and tests use to ask for
// fewer features. Within one architecture a later set contains the earlier.
enum class Isa : int {
  kReference = 0,   // no SIMD features: the reference kernels
  kAvx2 = 1,        // x86-64: AVX2 + FMA
  kAvxVnni = 2,     // x86-64: AVX2 + FMA + AVX-VNNI
  kAvx512Vnni = 3,  // x86-64: AVX-512 F/BW/DQ/VL + VNNI (and VBMI, BF16, AVX-VNNI)
  kNeon = 4,        // aarch64: Armv8.0 Advanced SIMD (Cortex-A53/A57/A72/A73)
  kNeonDot = 5,     // aarch64: + fp16 arithmetic and the dot product (Armv8.2)
  kNeonI8mm = 6,    // aarch64: every Arm feature (i8mm, bf16, SVE)
  kAmx = 7,         // x86-64: every x86 feature (kAvx512Vnni + AMX tiles and int8); the last
};

const char* IsaName(Isa isa);
// Parses a name of IsaName; false for an unknown name.
bool ParseIsa(const char* name, Isa* isa);
// The features the set `isa` allows (before intersecting with the CPU's).
CpuFeatures IsaFeatures(Isa isa);
// `isa`'s features that this CPU has; a set of the other architecture leaves
// the detected features (QFOLD_ISA=avx2 on Arm changes nothing).
CpuFeatures FeaturesForIsa(Isa isa);
// The largest named set contained in `f` (for messages and tests).
Isa HighestIsa(const CpuFeatures& f);
// The highest named set this CPU supports.
Isa DetectedIsa();
// Every named set this CPU supports in full, lowest first (kReference always).
std::vector<Isa> SupportedIsas();

}  // namespace kernels
}  // namespace qfold
