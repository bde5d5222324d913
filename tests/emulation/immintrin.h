// Verification builds only (QFOLD_EMULATE_X86=ON, scripts/test_emulated_x86.sh):
// the AVX-512 and AVX-VNNI intrinsics the kernels use, through SIMDe's portable
// implementations (Debian's libsimde-dev) on top of native AVX2, so those
// kernels run, slowly, on a CPU without them and are checked against the
// reference like any other level. A few intrinsics that SIMDe 0.7.4 lacks are
// written out below lane by lane with the instruction's semantics. Never part
// of a shipped build.
#pragma once
#include_next <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#define _mm256_dpbusd_avx_epi32(a, b, c) _mm256_dpbusd_epi32(a, b, c)
#define _mm256_dpwssd_avx_epi32(a, b, c) _mm256_dpwssd_epi32(a, b, c)
// Missing from SIMDe 0.7.4: conversions with x86 semantics (out of range -> INT_MIN).
static inline int32_t EmuCvt(float f, bool trunc) {
  double r = trunc ? std::trunc(double(f)) : std::nearbyint(double(f));
  if (!(r >= -2147483648.0 && r < 2147483648.0)) return INT32_MIN;
  return int32_t(r);
}
static inline simde__m512i EmuCvtps(simde__m512 a, bool trunc) {
  float f[16]; int32_t i[16];
  simde_mm512_storeu_ps(f, a);
  for (int k = 0; k < 16; ++k) i[k] = EmuCvt(f[k], trunc);
  return simde_mm512_loadu_si512(i);
}
static inline simde__m512 EmuCvtepi32(simde__m512i a) {
  int32_t i[16]; float f[16];
  simde_mm512_storeu_si512(i, a);
  for (int k = 0; k < 16; ++k) f[k] = float(i[k]);
  return simde_mm512_loadu_ps(f);
}
static inline simde__m512 EmuMaskzLoad(uint16_t m, const void* p) {
  float f[16] = {0};
  for (int k = 0; k < 16; ++k) if (m >> k & 1) std::memcpy(&f[k], static_cast<const char*>(p) + 4 * k, 4);
  return simde_mm512_loadu_ps(f);
}
static inline void EmuMaskStore(void* p, uint16_t m, simde__m512 a) {
  float f[16];
  simde_mm512_storeu_ps(f, a);
  for (int k = 0; k < 16; ++k) if (m >> k & 1) std::memcpy(static_cast<char*>(p) + 4 * k, &f[k], 4);
}
#define _mm512_cvtps_epi32(a) EmuCvtps(a, false)
#define _mm512_cvttps_epi32(a) EmuCvtps(a, true)
#define _mm512_cvtepi32_ps(a) EmuCvtepi32(a)
#define _mm512_maskz_loadu_ps(m, p) EmuMaskzLoad(m, p)
#define _mm512_mask_storeu_ps(p, m, a) EmuMaskStore(p, m, a)
template <int N, class T>
static inline void EmuMaskStoreBytes(void* p, uint64_t m, const T& v, int esize) {
  unsigned char b[64];
  std::memcpy(b, &v, sizeof(T));
  for (int k = 0; k < N; ++k)
    if (m >> k & 1) std::memcpy(static_cast<char*>(p) + esize * k, b + esize * k, esize);
}
template <int N, class T>
static inline T EmuMaskzLoadBytes(uint64_t m, const void* p, int esize) {
  unsigned char b[64] = {0};
  for (int k = 0; k < N; ++k)
    if (m >> k & 1) std::memcpy(b + esize * k, static_cast<const char*>(p) + esize * k, esize);
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}
static inline simde__m512i EmuCvtepu8Epi16(simde__m256i a) {
  uint8_t s[32]; int16_t d[32];
  std::memcpy(s, &a, 32);
  for (int k = 0; k < 32; ++k) d[k] = s[k];
  simde__m512i r; std::memcpy(&r, d, 64); return r;
}
static inline simde__m512i EmuCvtepi8Epi32(simde__m128i a) {
  int8_t s[16]; int32_t d[16];
  std::memcpy(s, &a, 16);
  for (int k = 0; k < 16; ++k) d[k] = s[k];
  simde__m512i r; std::memcpy(&r, d, 64); return r;
}
static inline void EmuMaskCvtEpi32StoreEpi8(void* p, uint16_t m, simde__m512i a) {
  int32_t s[16];
  std::memcpy(s, &a, 64);
  for (int k = 0; k < 16; ++k) if (m >> k & 1) static_cast<int8_t*>(p)[k] = int8_t(s[k]);
}
#define _mm512_mask_storeu_epi16(p, m, a) EmuMaskStoreBytes<32>(p, m, a, 2)
#define _mm512_mask_storeu_epi32(p, m, a) EmuMaskStoreBytes<16>(p, m, a, 4)
#define _mm256_mask_storeu_epi8(p, m, a) EmuMaskStoreBytes<32>(p, m, a, 1)
#define _mm512_maskz_loadu_epi32(m, p) EmuMaskzLoadBytes<16, simde__m512i>(m, p, 4)
#define _mm256_maskz_loadu_epi8(m, p) EmuMaskzLoadBytes<32, simde__m256i>(m, p, 1)
#define _mm_maskz_loadu_epi8(m, p) EmuMaskzLoadBytes<16, simde__m128i>(m, p, 1)
#define _mm512_cvtepu8_epi16(a) EmuCvtepu8Epi16(a)
#define _mm512_cvtepi8_epi32(a) EmuCvtepi8Epi32(a)
#define _mm512_mask_cvtepi32_storeu_epi8(p, m, a) EmuMaskCvtEpi32StoreEpi8(p, m, a)
static inline simde__m512i EmuCvtepu8Epi32(simde__m128i a) {
  uint8_t s[16]; int32_t d[16];
  std::memcpy(s, &a, 16);
  for (int k = 0; k < 16; ++k) d[k] = s[k];
  simde__m512i r; std::memcpy(&r, d, 64); return r;
}
static inline void EmuMaskCvtEpi16StoreEpi8(void* p, uint32_t m, simde__m512i a) {
  int16_t s[32];
  std::memcpy(s, &a, 64);
  for (int k = 0; k < 32; ++k) if (m >> k & 1) static_cast<int8_t*>(p)[k] = int8_t(s[k]);
}
#define _mm512_maskz_loadu_epi8(m, p) EmuMaskzLoadBytes<64, simde__m512i>(m, p, 1)
#define _mm512_mask_cvtepi16_storeu_epi8(p, m, a) EmuMaskCvtEpi16StoreEpi8(p, m, a)
#define _mm512_cvtepu8_epi32(a) EmuCvtepu8Epi32(a)
static inline simde__m512i EmuSrai32(simde__m512i a, unsigned n) {
  int32_t s[16];
  std::memcpy(s, &a, 64);
  for (int k = 0; k < 16; ++k) s[k] = n > 31 ? (s[k] < 0 ? -1 : 0) : (s[k] >> n);
  simde__m512i r; std::memcpy(&r, s, 64); return r;
}
static inline void EmuMaskCvtEpi32StoreEpi16(void* p, uint16_t m, simde__m512i a) {
  int32_t s[16];
  std::memcpy(s, &a, 64);
  for (int k = 0; k < 16; ++k) if (m >> k & 1) { int16_t v = int16_t(s[k]); std::memcpy(static_cast<char*>(p) + 2 * k, &v, 2); }
}
#define _mm512_mask_storeu_epi8(p, m, a) EmuMaskStoreBytes<64>(p, m, a, 1)
#define _mm512_srai_epi32(a, n) EmuSrai32(a, n)
#define _mm512_mask_cvtepi32_storeu_epi16(p, m, a) EmuMaskCvtEpi32StoreEpi16(p, m, a)
