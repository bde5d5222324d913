// cpuid/xgetbv based detection; see cpu_features.h.
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
  return Isa::kAvx2;
}
#endif

Isa Detect() {
#if defined(__x86_64__) || defined(_M_X64)
  return DetectX86();
#elif defined(__aarch64__) && defined(__linux__)
  // HWCAP_ASIMDDP (bit 20): sdot/udot.
  return (getauxval(AT_HWCAP) >> 20 & 1) ? Isa::kNeonDot : Isa::kReference;
#else
  return Isa::kReference;
#endif
}

Isa FromEnv(Isa detected) {
  const char* env = std::getenv("QFOLD_ISA");
  if (!env || !*env) return detected;
  Isa want = detected;
  if (!std::strcmp(env, "reference")) want = Isa::kReference;
  if (!std::strcmp(env, "avx2")) want = Isa::kAvx2;
  if (!std::strcmp(env, "avx512vnni")) want = Isa::kAvx512Vnni;
  if (!std::strcmp(env, "neondot")) want = Isa::kNeonDot;
  // Levels of another architecture, or higher ones, are ignored.
  if (detected == Isa::kNeonDot) return want == Isa::kReference ? want : detected;
  if (want == Isa::kNeonDot) return detected;
  return int(want) < int(detected) ? want : detected;
}

std::atomic<int> g_override{-1};

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kReference:
      return "reference";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
    case Isa::kNeonDot:
      return "neondot";
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
  if (d == Isa::kNeonDot) return {Isa::kReference, Isa::kNeonDot};
  std::vector<Isa> v;
  for (int i = 0; i <= int(d); ++i) v.push_back(Isa(i));
  return v;
}

Isa SetIsaForTesting(Isa isa) {
  const Isa d = DetectedIsa();
  Isa use = isa;
  if (d == Isa::kNeonDot) {
    if (isa != Isa::kReference) use = d;
  } else if (isa == Isa::kNeonDot || int(isa) > int(d)) {
    use = d;
  }
  g_override.store(int(use), std::memory_order_relaxed);
  return use;
}

}  // namespace kernels
}  // namespace qfold
