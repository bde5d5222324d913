// The AVX-512 VNNI vector trait of the x86 indirect GEMM microkernels
// (igemm_s8_x86.h): the zmm kernels' broadcast and vpdpbusd, and the
// requantizing / float epilogue that the AMX kernels (igemm_s8_amx.cc) share.
// For files compiled with the AVX-512 F/BW/DQ/VL + VNNI flags only.
#pragma once
#include <immintrin.h>

#include "kernels/igemm_s8_x86.h"
#include "kernels/pack_s8_v512.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct V512 {
  static constexpr int kLanes = 16, kWBytes = 1, kABytes = 1, kChPerAcc = 16, kSub = 1;
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

  // The packed epilogue. With every |mult| <= 0.5 (and finite), |float(acc) *
  // mult| < 2^31, so the int32 conversion needs no clamp first; saturating
  // packs to 16 bits, the zero point added with 16-bit saturation, a
  // saturating pack to 8 bits and a byte clamp give Requant's clamp (each
  // step is monotone and exact inside the output range): about 21 instead of
  // 40 vector operations per 64 outputs.
  static constexpr bool kPackedRequant = true;
  using PackedParams = PackS8Params;
  static PackedParams MakePackedParams(int32_t yzp, int32_t lo, int32_t hi) {
    return MakePackS8Params(yzp, lo, hi);
  }
  static bool SmallMults(const float* mult, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
      const F v = _mm512_maskz_loadu_ps(m, mult + i);
      if (_mm512_mask_cmp_ps_mask(m, _mm512_abs_ps(v), _mm512_set1_ps(0.5f), _CMP_LE_OQ) != m)
        return false;
    }
    return true;
  }
  // Requantizes N (1, 2 or 4) vectors of one row and stores their first n
  // channels (n <= 16 N).
  template <int N>
  static void StorePacked(const I (&acc)[N], const F (&mult)[N], const PackedParams& q, int64_t n,
                          uint8_t* y) {
    static_assert(N == 1 || N == 2 || N == 4, "1, 2 or 4 vectors a row");
    I r[4];
    for (int v = 0; v < N; ++v)
      r[v] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[v]), mult[v]));
    const I w01 = PackS8Words(r[0], N > 1 ? r[1] : r[0], q);
    const I w23 = N == 4 ? PackS8Words(r[2], r[3], q) : w01;
    const I b = PackS8Bytes(w01, w23, q);
    const __mmask64 m = n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
    _mm512_mask_storeu_epi8(y, m, b);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace qfold
