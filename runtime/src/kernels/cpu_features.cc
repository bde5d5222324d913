// cpuid/xgetbv (x86) and getauxval (Arm Linux) based detection; see cpu_features.h.
#include "kernels/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qfold {
namespace kernels {
namespace {

// One table drives operator&, operator== and ToString, so a new flag is
// added in one place.
struct FeatureField {
  const char* name;
  bool CpuFeatures::*flag;
};
constexpr FeatureField kFields[] = {
    {"avx2", &CpuFeatures::avx2},
    {"fma", &CpuFeatures::fma},
    {"f16c", &CpuFeatures::f16c},
    {"avx512f", &CpuFeatures::avx512f},
    {"avx512bw", &CpuFeatures::avx512bw},
    {"avx512dq", &CpuFeatures::avx512dq},
    {"avx512vl", &CpuFeatures::avx512vl},
    {"avx512vnni", &CpuFeatures::avx512vnni},
    {"avxvnni", &CpuFeatures::avxvnni},
    {"avx512vbmi", &CpuFeatures::avx512vbmi},
    {"avx512bf16", &CpuFeatures::avx512bf16},
    {"avx512bf16_fast", &CpuFeatures::avx512bf16_fast},
    {"amx", &CpuFeatures::amx},
    {"amx_bf16", &CpuFeatures::amx_bf16},
    {"asimd", &CpuFeatures::asimd},
    {"fp16", &CpuFeatures::fp16},
    {"dotprod", &CpuFeatures::dotprod},
    {"i8mm", &CpuFeatures::i8mm},
    {"bf16", &CpuFeatures::bf16},
    {"sve", &CpuFeatures::sve},
};

#if defined(__x86_64__) || defined(_M_X64)
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  // xgetbv is encoded by hand so no -mxsave flag is needed for this file.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

// Linux keeps the 8 KB tile data state off until a process asks for it; a
// tile instruction would fault (SIGILL) before. The grant is process-wide.
bool RequestTileData() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;  // no known way to enable the tile state here
#endif
}

// The vendor string of cpuid leaf 0 (EBX, EDX, ECX) is "AuthenticAMD".
bool IsAmd() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::strcmp(vendor, "AuthenticAMD") == 0;
}

CpuFeatures DetectX86() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c >> 27 & 1, avx = c >> 28 & 1, fma = c >> 12 & 1, f16c = c >> 29 & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = ReadXcr0();
  if ((xcr0 & 0x6) != 0x6) return f;  // XMM and YMM state
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned leaf7_eax = a, ebx = b, ecx = c, edx = d;
  f.fma = fma;
  f.f16c = f16c;
  f.avx2 = ebx >> 5 & 1;
  if (leaf7_eax >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avxvnni = f.avx2 && (a >> 4 & 1);
    f.avx512bf16 = a >> 5 & 1;  // masked below with the ZMM state
  }
  const bool zmm_state = (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (zmm_state) {
    f.avx512f = ebx >> 16 & 1;
    f.avx512dq = ebx >> 17 & 1;
    f.avx512bw = ebx >> 30 & 1;
    f.avx512vl = ebx >> 31 & 1;
    f.avx512vbmi = ecx >> 1 & 1;
    f.avx512vnni = ecx >> 11 & 1;
  } else {
    f.avx512bf16 = false;
  }
  // AMX-TILE and AMX-INT8 (on top of AVX-512: the kernels' epilogue), with
  // XTILECFG and XTILEDATA (XCR0 bits 17, 18) enabled by the OS.
  f.amx = f.avx512_core() && (edx >> 24 & 1) && (edx >> 25 & 1) && (xcr0 >> 17 & 3) == 3 &&
          RequestTileData();
  f.amx_bf16 = f.amx && (edx >> 22 & 1);
  f.avx512bf16_fast = f.avx512bf16 && IsAmd();
  return f;
}
#endif

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(_M_X64)
  f = DetectX86();
#if defined(QFOLD_EMULATED_X86)
  // Verification build: SIMDe emulates the VNNI kernels on top of a real AVX2.
  if (f.avx2 && f.fma) {
    f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512vnni = f.avxvnni = true;
    f.avx512vbmi = f.avx512bf16 = f.avx512bf16_fast = f.amx = f.amx_bf16 = false;  // not emulated
  }
#endif
#elif defined(__aarch64__) && defined(__linux__)
  // AT_HWCAP bits: 1 ASIMD, 9 ASIMDHP (fp16 arithmetic), 20 ASIMDDP (dotprod),
  // 22 SVE; AT_HWCAP2 bits: 13 I8MM, 14 BF16. Spelled out because older libc
  // headers lack the names.
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  f.asimd = hwcap >> 1 & 1;
  if (f.asimd) {
    f.fp16 = hwcap >> 9 & 1;
    f.dotprod = hwcap >> 20 & 1;
    f.sve = hwcap >> 22 & 1;
    f.i8mm = hwcap2 >> 13 & 1;
    f.bf16 = hwcap2 >> 14 & 1;
  }
#endif
  return f;
}

bool IsArm(Isa isa) {
  return isa == Isa::kNeon || isa == Isa::kNeonDot || isa == Isa::kNeonI8mm;
}

// Whether `f` has the features that define the named set (the ones its
// kernels need; the set's other features are optional extras).
bool Has(const CpuFeatures& f, Isa isa) {
  const bool x86 = f.avx2 && f.fma;
  switch (isa) {
    case Isa::kReference:
      return true;
    case Isa::kAvx2:
      return x86;
    case Isa::kAvxVnni:
      return x86 && f.avxvnni;
    case Isa::kAvx512Vnni:
      return x86 && f.avx512_core() && f.avx512vnni;
    case Isa::kAmx:
      return x86 && f.avx512_core() && f.avx512vnni && f.amx;
    case Isa::kNeon:
      return f.asimd;
    case Isa::kNeonDot:
      return f.asimd && f.dotprod;
    case Isa::kNeonI8mm:
      return f.asimd && f.dotprod && f.i8mm;
  }
  return false;
}

// Lowest first within each architecture (SupportedIsas keeps this order).
constexpr Isa kAllIsas[] = {Isa::kReference, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni,
                            Isa::kAmx,       Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm};

}  // namespace

CpuFeatures CpuFeatures::operator&(const CpuFeatures& o) const {
  CpuFeatures r;
  for (const FeatureField& field : kFields) r.*field.flag = this->*field.flag && o.*field.flag;
  return r;
}

bool CpuFeatures::operator==(const CpuFeatures& o) const {
  for (const FeatureField& field : kFields)
    if (this->*field.flag != o.*field.flag) return false;
  return true;
}

std::string CpuFeatures::ToString() const {
  std::string s;
  for (const FeatureField& field : kFields) {
    if (!(this->*field.flag)) continue;
    if (!s.empty()) s += ' ';
    s += field.name;
  }
  return s.empty() ? "none" : s;
}

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures detected = Detect();
  return detected;
}

const CpuFeatures& DefaultCpuFeatures() {
  static const CpuFeatures features = [] {
    const char* env = std::getenv("QFOLD_ISA");
    Isa isa;
    if (!env || !*env || !ParseIsa(env, &isa)) return DetectedCpuFeatures();
    return FeaturesForIsa(isa);
  }();
  return features;
}

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
    case Isa::kAmx:
      return "amx";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDot:
      return "neondot";
    case Isa::kNeonI8mm:
      return "neoni8mm";
  }
  return "?";
}

bool ParseIsa(const char* name, Isa* isa) {
  for (Isa i : kAllIsas) {
    if (!std::strcmp(name, IsaName(i))) {
      *isa = i;
      return true;
    }
  }
  return false;
}

CpuFeatures IsaFeatures(Isa isa) {
  CpuFeatures f;
  switch (isa) {
    case Isa::kReference:
      break;
    case Isa::kAmx:
      f.amx = f.amx_bf16 = true;
      [[fallthrough]];
    case Isa::kAvx512Vnni:
      f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512vnni = true;
      f.avx512vbmi = f.avx512bf16 = f.avx512bf16_fast = f.avxvnni = true;
      f.avx2 = f.fma = f.f16c = true;
      break;
    case Isa::kAvxVnni:
      f.avxvnni = true;
      f.avx2 = f.fma = f.f16c = true;
      break;
    case Isa::kAvx2:
      f.avx2 = f.fma = f.f16c = true;
      break;
    case Isa::kNeonI8mm:
      f.i8mm = f.bf16 = f.sve = true;
      f.asimd = f.fp16 = f.dotprod = true;
      break;
    case Isa::kNeonDot:
      f.asimd = f.fp16 = f.dotprod = true;
      break;
    case Isa::kNeon:
      f.asimd = true;
      break;
  }
  return f;
}

CpuFeatures FeaturesForIsa(Isa isa) {
  const CpuFeatures& detected = DetectedCpuFeatures();
  const bool arm_cpu = detected.asimd;
  if (isa != Isa::kReference && IsArm(isa) != arm_cpu) return detected;
  return detected & IsaFeatures(isa);
}

Isa HighestIsa(const CpuFeatures& f) {
  Isa best = Isa::kReference;
  for (Isa i : kAllIsas)
    if (Has(f, i) && (int(i) > int(best)) && (best == Isa::kReference || IsArm(i) == IsArm(best)))
      best = i;
  return best;
}

Isa DetectedIsa() {
  static const Isa isa = HighestIsa(DetectedCpuFeatures());
  return isa;
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> v;
  for (Isa i : kAllIsas)
    if (Has(DetectedCpuFeatures(), i)) v.push_back(i);
  return v;
}

}  // namespace kernels
}  // namespace qfold
