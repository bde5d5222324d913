// cpuid/xgetbv (x86) and getauxval (Arm Linux) based detection; see cpu_features.h.
#include "kernels/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace qfold {
namespace kernels {
namespace {

#if defined(__x86_64__) || defined(_M_X64)
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  // xgetbv is encoded by hand so no -mxsave flag is needed for this file.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

// AVX-VNNI (leaf 7 subleaf 1, EAX bit 4) is not implied by AVX-512 VNNI
// (Ice Lake has only the latter), so it is tracked apart from the level.
bool DetectAvxVnni() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c >> 27 & 1, avx = c >> 28 & 1, fma = c >> 12 & 1;
  if (!osxsave || !avx || !fma || (ReadXcr0() & 0x6) != 0x6) return false;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  if (!(b >> 5 & 1) || a < 1) return false;  // AVX2; subleaf 1 present
  __cpuid_count(7, 1, a, b, c, d);
  return a >> 4 & 1;
}

bool HasAvxVnni() {
  static const bool has = DetectAvxVnni();
  return has;
}

Isa DetectX86() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::kReference;
  const bool osxsave = c >> 27 & 1, avx = c >> 28 & 1, fma = c >> 12 & 1;
  if (!osxsave || !avx) return Isa::kReference;
  const uint64_t xcr0 = ReadXcr0();
  if ((xcr0 & 0x6) != 0x6) return Isa::kReference;  // XMM and YMM state
  if (__get_cpuid_max(0, nullptr) < 7) return Isa::kReference;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b >> 5 & 1;
  if (!avx2 || !fma) return Isa::kReference;
  const bool f = b >> 16 & 1, dq = b >> 17 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1;
  const bool vnni = c >> 11 & 1;
  const bool zmm_state = (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (f && dq && bw && vl && vnni && zmm_state) return Isa::kAvx512Vnni;
  return HasAvxVnni() ? Isa::kAvxVnni : Isa::kAvx2;
}
#endif

Isa Detect() {
#if defined(__x86_64__) || defined(_M_X64)
#if defined(QFOLD_EMULATED_X86)
  // Verification build: SIMDe emulates the levels above AVX2, which must be real.
  return DetectX86() >= Isa::kAvx2 ? Isa::kAvx512Vnni : DetectX86();
#endif
  return DetectX86();
#elif defined(__aarch64__) && defined(__linux__)
  // HWCAP_ASIMD (AT_HWCAP bit 1): Advanced SIMD; HWCAP_ASIMDDP (bit 20):
  // sdot/udot; HWCAP2_I8MM (AT_HWCAP2 bit 13): smmla/usmmla/usdot. The bit
  // numbers are spelled out because older libc headers lack the names. i8mm is
  // only used on top of dotprod.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  if (!(hwcap >> 1 & 1)) return Isa::kReference;
  if (!(hwcap >> 20 & 1)) return Isa::kNeon;
  return (getauxval(AT_HWCAP2) >> 13 & 1) ? Isa::kNeonI8mm : Isa::kNeonDot;
#else
  return Isa::kReference;
#endif
}

// Whether a level below the detected one can run here: every lower level
// can, except AVX-VNNI, which AVX-512 VNNI does not imply.
bool Usable(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
#if defined(QFOLD_EMULATED_X86)
  if (isa == Isa::kAvxVnni) return true;
#else
  if (isa == Isa::kAvxVnni) return HasAvxVnni();
#endif
#endif
  return true;
}

bool IsArm(Isa isa) {
  return isa == Isa::kNeon || isa == Isa::kNeonDot || isa == Isa::kNeonI8mm;
}

// `want` lowered to what the CPU supports: a level of another architecture
// (or an unknown one) gives the detected level, a higher one too.
Isa Clamp(Isa want, Isa detected) {
  if (want == Isa::kReference) return want;
  if (IsArm(want) != IsArm(detected)) return detected;
  if (int(want) >= int(detected)) return detected;
  if (want == Isa::kAvxVnni && !Usable(want)) return Isa::kAvx2;
  return want;
}

Isa FromEnv(Isa detected) {
  const char* env = std::getenv("QFOLD_ISA");
  if (!env || !*env) return detected;
  Isa want = detected;
  if (!std::strcmp(env, "reference")) want = Isa::kReference;
  if (!std::strcmp(env, "avx2")) want = Isa::kAvx2;
  if (!std::strcmp(env, "avxvnni")) want = Isa::kAvxVnni;
  if (!std::strcmp(env, "avx512vnni")) want = Isa::kAvx512Vnni;
  if (!std::strcmp(env, "neon")) want = Isa::kNeon;
  if (!std::strcmp(env, "neondot")) want = Isa::kNeonDot;
  if (!std::strcmp(env, "neoni8mm")) want = Isa::kNeonI8mm;
  return Clamp(want, detected);
}

std::atomic<int> g_override{-1};

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kReference:
      return "reference";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDot:
      return "neondot";
    case Isa::kNeonI8mm:
      return "neoni8mm";
  }
  return "?";
}

Isa DetectedIsa() {
  static const Isa isa = Detect();
  return isa;
}

Isa ActiveIsa() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0) return Isa(o);
  static const Isa isa = FromEnv(DetectedIsa());
  return isa;
}

std::vector<Isa> SupportedIsas() {
  const Isa d = DetectedIsa();
  std::vector<Isa> v = {Isa::kReference};
  for (int i = 1; i <= int(d); ++i)
    if (IsArm(Isa(i)) == IsArm(d) && Usable(Isa(i))) v.push_back(Isa(i));
  return v;
}

Isa SetIsaForTesting(Isa isa) {
  const Isa use = Clamp(isa, DetectedIsa());
  g_override.store(int(use), std::memory_order_relaxed);
  return use;
}

}  // namespace kernels
}  // namespace qfold
