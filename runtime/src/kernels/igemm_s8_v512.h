// The AVX-512 VNNI vector trait of the x86 indirect GEMM microkernels
// (igemm_s8_x86.h): the zmm kernels' broadcast and vpdpbusd, and the
// requantizing / float epilogue that the AMX kernels (igemm_s8_amx.cc) share.
// For files compiled with the AVX-512 F/BW/DQ/VL + VNNI flags only.
#pragma once
#include <immintrin.h>

#include "kernels/igemm_s8_x86.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct V512 {
  static constexpr int kLanes = 16, kWBytes = 1, kABytes = 1, kChPerAcc = 16;
  using I = __m512i;
  using F = __m512;
  using A = __m512i;
  static I Zero() { return _mm512_setzero_si512(); }
  template <bool kXor>
  static A Bcast(const uint8_t* p) {
    const A x = _mm512_set1_epi32(LoadDword(p));
    return kXor ? _mm512_xor_si512(x, _mm512_set1_epi32(int32_t(0x80808080u))) : x;
  }
  static I Dot(I acc, A x, const uint8_t* w) {
    return _mm512_dpbusd_epi32(acc, x, _mm512_loadu_si512(w));
  }
  template <int N>
  static void Finish(const I (&acc)[N], I (&out)[N]) {
    for (int v = 0; v < N; ++v) out[v] = acc[v];
  }
  static I LoadI(const int32_t* p) { return _mm512_loadu_si512(p); }
  static F LoadF(const float* p) { return _mm512_loadu_ps(p); }
  static I Set1I(int32_t v) { return _mm512_set1_epi32(v); }
  static F Set1F(float v) { return _mm512_set1_ps(v); }
  static I Add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I Sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I Mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  // See V256Base::Requant.
  static I Requant(I acc, F mult, F lo, F hi, I yzp) {
    F f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mult);
    f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(f), yzp);
  }
  // See V256Base::Dequant.
  static F Dequant(I acc, F mult, F bias, F lo, F hi) {
    const F f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), mult, bias);
    return _mm512_min_ps(hi, _mm512_max_ps(lo, f));
  }
  static void StoreF(F v, int64_t n, float* y) {
    const __mmask16 m = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    _mm512_mask_storeu_ps(y, m, v);
  }
  static void Store(I v, int64_t n, uint8_t* y) {
    const __mmask16 m = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    _mm512_mask_cvtepi32_storeu_epi8(y, m, v);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
