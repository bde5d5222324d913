// x86 channels-last depthwise row kernel (dwconv_nhwc_s8.h), one template
// over a small vector trait: X86Avx2 (ymm, vpmaddwd) in the _avx2.cc file,
// X86Avx512 (zmm, vpdpwssd, masked tails) in the _avx512vnni.cc file. The
// traits are also used by pool_nhwc_s8_x86.h. Everything sits in an
// anonymous namespace so no inline function compiled with one file's ISA
// flags can be picked by the linker for another file.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dwconv_nhwc_s8.h"

// GCC flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

#if defined(__AVX2__)
struct X86Avx2 {
  static constexpr int kV = 16;      // channels per int16 vector
  static constexpr int kBytes = 32;  // channels per byte vector
  static constexpr bool kMasked = false;
  using VI = __m256i;
  using VF = __m256;

  static VI Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static VF LoadF(const float* p) { return _mm256_loadu_ps(p); }
  static VI Set1(int32_t v) { return _mm256_set1_epi32(v); }
  static VF Set1F(float v) { return _mm256_set1_ps(v); }
  static VI Zero() { return _mm256_setzero_si256(); }
  // kV bytes widened to int16.
  template <bool kS>
  static VI Widen(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return kS ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
  }
  // n < kV bytes: no byte-masked loads on AVX2, so through a stack copy.
  template <bool kS>
  static VI WidenN(const uint8_t* p, int64_t n) {
    uint8_t buf[kV] = {};
    std::memcpy(buf, p, size_t(n));
    return Widen<kS>(buf);
  }
  static VI UnpackLo(VI a, VI b) { return _mm256_unpacklo_epi16(a, b); }
  static VI UnpackHi(VI a, VI b) { return _mm256_unpackhi_epi16(a, b); }
  // acc + x.lo * w.lo + x.hi * w.hi per int32 lane, exact for our operands.
  static VI Dot(VI acc, VI x, VI w) { return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w)); }
  static VI Add16(VI a, VI b) { return _mm256_add_epi16(a, b); }
  static VI Add32(VI a, VI b) { return _mm256_add_epi32(a, b); }
  // int16 lanes sign-extended to int32, in UnpackLo/UnpackHi order.
  static VI Lo32(VI v) { return _mm256_unpacklo_epi16(v, _mm256_srai_epi16(v, 15)); }
  static VI Hi32(VI v) { return _mm256_unpackhi_epi16(v, _mm256_srai_epi16(v, 15)); }
  static VF ToF(VI v) { return _mm256_cvtepi32_ps(v); }
  static VF Mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static VF Div(VF a, VF b) { return _mm256_div_ps(a, b); }
  static VF Clamp(VF f, VF lo, VF hi) { return _mm256_min_ps(_mm256_max_ps(f, lo), hi); }
  static VF ZeroNaN(VF f) { return _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q)); }
  static VI Round(VF f) { return _mm256_cvtps_epi32(f); }  // MXCSR default: half to even
  // lo/hi: int32 results in [-128, 255] in UnpackLo/UnpackHi order; packs
  // puts the channels back in order, the low byte of each is the result.
  static __m128i Pack(VI lo, VI hi) {
    VI v = _mm256_and_si256(_mm256_packs_epi32(lo, hi), _mm256_set1_epi16(0xff));
    v = _mm256_packus_epi16(v, v);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(v, 0x08));
  }
  static void Store(uint8_t* y, VI lo, VI hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), Pack(lo, hi));
  }
  static void StoreN(uint8_t* y, VI lo, VI hi, int64_t n) {
    uint8_t buf[kV];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buf), Pack(lo, hi));
    std::memcpy(y, buf, size_t(n));
  }
  // clamp(fma(f, m, b), lo, hi); the operand order lets NaN through.
  static VF FmaClamp(VF f, VF m, VF b, VF lo, VF hi) {
    return _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_fmadd_ps(f, m, b)));
  }
  // First n (<= kV) floats in channel order from UnpackLo/UnpackHi order:
  // each 128-bit half holds 4 channels of the low, then the high vector.
  static void StoreF(float* y, VF lo, VF hi, int64_t n) {
    const VF a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
    if (n >= kV) {
      _mm256_storeu_ps(y, a);
      _mm256_storeu_ps(y + 8, b);
      return;
    }
    float buf[kV];
    _mm256_storeu_ps(buf, a);
    _mm256_storeu_ps(buf + 8, b);
    std::memcpy(y, buf, size_t(n) * sizeof(float));
  }
  // Byte vectors (max pool).
  static VI LoadBN(const uint8_t* p, int64_t n) {
    uint8_t buf[kBytes] = {};
    std::memcpy(buf, p, size_t(n));
    return Load(buf);
  }
  static void StoreB(uint8_t* y, VI v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), v); }
  static void StoreBN(uint8_t* y, VI v, int64_t n) {
    uint8_t buf[kBytes];
    StoreB(buf, v);
    std::memcpy(y, buf, size_t(n));
  }
  template <bool kS>
  static VI MaxB(VI a, VI b) {
    return kS ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
  }
};
#endif

#if (defined(__AVX512BW__) && defined(__AVX512VNNI__)) || defined(QFOLD_EMULATED_X86)
struct X86Avx512 {
  static constexpr int kV = 32;
  static constexpr int kBytes = 64;
  static constexpr bool kMasked = true;
  using VI = __m512i;
  using VF = __m512;

  static VI Load(const void* p) { return _mm512_loadu_si512(p); }
  static VF LoadF(const float* p) { return _mm512_loadu_ps(p); }
  static VI Set1(int32_t v) { return _mm512_set1_epi32(v); }
  static VF Set1F(float v) { return _mm512_set1_ps(v); }
  static VI Zero() { return _mm512_setzero_si512(); }
  template <bool kS>
  static VI Widen(const uint8_t* p) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return kS ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
  }
  static __mmask32 Mask32(int64_t n) { return __mmask32((uint64_t(1) << n) - 1); }
  template <bool kS>
  static VI WidenN(const uint8_t* p, int64_t n) {
    const __m256i b = _mm256_maskz_loadu_epi8(Mask32(n), p);
    return kS ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
  }
  static VI UnpackLo(VI a, VI b) { return _mm512_unpacklo_epi16(a, b); }
  static VI UnpackHi(VI a, VI b) { return _mm512_unpackhi_epi16(a, b); }
  static VI Dot(VI acc, VI x, VI w) { return _mm512_dpwssd_epi32(acc, x, w); }
  static VI Add16(VI a, VI b) { return _mm512_add_epi16(a, b); }
  static VI Add32(VI a, VI b) { return _mm512_add_epi32(a, b); }
  static VI Lo32(VI v) { return _mm512_unpacklo_epi16(v, _mm512_srai_epi16(v, 15)); }
  static VI Hi32(VI v) { return _mm512_unpackhi_epi16(v, _mm512_srai_epi16(v, 15)); }
  static VF ToF(VI v) { return _mm512_cvtepi32_ps(v); }
  static VF Mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static VF Div(VF a, VF b) { return _mm512_div_ps(a, b); }
  static VF Clamp(VF f, VF lo, VF hi) { return _mm512_min_ps(_mm512_max_ps(f, lo), hi); }
  static VF ZeroNaN(VF f) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f); }
  static VI Round(VF f) { return _mm512_cvtps_epi32(f); }
  // Results lie in [-128, 255]: vpmovwb's truncation keeps the byte.
  static __m256i Pack(VI lo, VI hi) { return _mm512_cvtepi16_epi8(_mm512_packs_epi32(lo, hi)); }
  static void Store(uint8_t* y, VI lo, VI hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), Pack(lo, hi));
  }
  static void StoreN(uint8_t* y, VI lo, VI hi, int64_t n) {
    _mm256_mask_storeu_epi8(y, Mask32(n), Pack(lo, hi));
  }
  static VF FmaClamp(VF f, VF m, VF b, VF lo, VF hi) {
    return _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_fmadd_ps(f, m, b)));
  }
  // As X86Avx2::StoreF, four 128-bit quarters per vector.
  static void StoreF(float* y, VF lo, VF hi, int64_t n) {
    const VI i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const VI i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    const VF a = _mm512_permutex2var_ps(lo, i0, hi), b = _mm512_permutex2var_ps(lo, i1, hi);
    const int64_t n0 = n < 16 ? n : 16, n1 = n - n0;
    _mm512_mask_storeu_ps(y, __mmask16((uint32_t(1) << n0) - 1), a);
    if (n1 > 0) _mm512_mask_storeu_ps(y + 16, __mmask16((uint32_t(1) << n1) - 1), b);
  }
  static __mmask64 Mask64(int64_t n) { return __mmask64((uint64_t(1) << n) - 1); }
  static VI LoadBN(const uint8_t* p, int64_t n) { return _mm512_maskz_loadu_epi8(Mask64(n), p); }
  static void StoreB(uint8_t* y, VI v) { _mm512_storeu_si512(y, v); }
  static void StoreBN(uint8_t* y, VI v, int64_t n) { _mm512_mask_storeu_epi8(y, Mask64(n), v); }
  template <bool kS>
  static VI MaxB(VI a, VI b) {
    return kS ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
  }
};
#endif

// Requantization in registers: clamp(round(float(acc) * mult) + yzp, lo, hi),
// NaN to the zero point, as RoundAddSaturate: the clamp bounds lo - yzp and
// hi - yzp are integers, so clamping before rounding gives the same value.
template <class Tr>
struct Requant {
  typename Tr::VF lo, hi;
  typename Tr::VI zp;
  typename Tr::VF flo, fhi;  // the float epilogue's clamp
  Requant(int32_t yzp, int32_t qlo, int32_t qhi, float float_lo = 0, float float_hi = 0)
      : lo(Tr::Set1F(float(qlo - yzp))),
        hi(Tr::Set1F(float(qhi - yzp))),
        zp(Tr::Set1(yzp)),
        flo(Tr::Set1F(float_lo)),
        fhi(Tr::Set1F(float_hi)) {}
  typename Tr::VI operator()(typename Tr::VF f) const {
    return Tr::Add32(Tr::Round(Tr::Clamp(Tr::ZeroNaN(f), lo, hi)), zp);
  }
};

// How the channels of one block are read: full vectors, or the first n
// channels (masked on AVX-512, through a copy on AVX2).
template <class Tr, bool kS>
struct FullLoad {
  typename Tr::VI operator()(const uint8_t* p) const { return Tr::template Widen<kS>(p); }
};
template <class Tr, bool kS>
struct PartLoad {
  int64_t n;
  typename Tr::VI operator()(const uint8_t* p) const { return Tr::template WidenN<kS>(p, n); }
};

// kNb packed blocks of channels starting at channel `off` of every tap; the
// pair loop is unrolled when kNp > 0. n < kV: store only n channels. The
// results go to channel yo of a.y, or of a.yf with kF (float output).
template <class Tr, int kNp, int kNb, bool kF, class Ld>
inline void DwBlocks(const DwNhwcRowArgs& a, const uint8_t* const* t, int64_t off, int64_t b,
                     const Requant<Tr>& rq, Ld load, int64_t yo, int64_t n) {
  using VI = typename Tr::VI;
  constexpr int kV = Tr::kV;
  const int np = kNp > 0 ? kNp : a.np;
  const int64_t wstride = int64_t(np) * 2 * kV;  // int16 per packed block
  VI acc[2 * kNb];
  for (int j = 0; j < kNb; ++j) {
    acc[2 * j] = Tr::Load(a.bias + (b + j) * kV);
    acc[2 * j + 1] = Tr::Load(a.bias + (b + j) * kV + kV / 2);
  }
  const int16_t* w = a.w + b * wstride;
  for (int p = 0; p < np; ++p, w += 2 * kV) {
    const uint8_t* p0 = t[2 * p] + off;
    const uint8_t* p1 = t[2 * p + 1] + off;
    for (int j = 0; j < kNb; ++j) {
      const VI x0 = load(p0 + j * kV), x1 = load(p1 + j * kV);
      acc[2 * j] = Tr::Dot(acc[2 * j], Tr::UnpackLo(x0, x1), Tr::Load(w + j * wstride));
      acc[2 * j + 1] =
          Tr::Dot(acc[2 * j + 1], Tr::UnpackHi(x0, x1), Tr::Load(w + j * wstride + kV));
    }
  }
  for (int j = 0; j < kNb; ++j) {
    const float* m = a.mult + (b + j) * kV;
    if (kF) {
      const float* fb = a.fbias + (b + j) * kV;
      Tr::StoreF(a.yf + yo + j * kV,
                 Tr::FmaClamp(Tr::ToF(acc[2 * j]), Tr::LoadF(m), Tr::LoadF(fb), rq.flo, rq.fhi),
                 Tr::FmaClamp(Tr::ToF(acc[2 * j + 1]), Tr::LoadF(m + kV / 2),
                              Tr::LoadF(fb + kV / 2), rq.flo, rq.fhi),
                 n);
      continue;
    }
    const VI lo = rq(Tr::Mul(Tr::ToF(acc[2 * j]), Tr::LoadF(m)));
    const VI hi = rq(Tr::Mul(Tr::ToF(acc[2 * j + 1]), Tr::LoadF(m + kV / 2)));
    if (n >= kV)
      Tr::Store(a.y + yo + j * kV, lo, hi);
    else
      Tr::StoreN(a.y + yo + j * kV, lo, hi, n);
  }
}

template <class Tr, bool kS, int kNp, bool kF>
void DwRowImpl(const DwNhwcRowArgs& a) {
  constexpr int kV = Tr::kV;
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  const Requant<Tr> rq(a.yzp, a.lo, a.hi, a.flo, a.fhi);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t sh = px * a.pix_step;
    const int64_t y = px * c;
    int64_t b = 0;
    // Two blocks at a time: independent accumulator chains.
    for (; b + 2 <= nfull; b += 2)
      DwBlocks<Tr, kNp, 2, kF>(a, t, sh + b * kV, b, rq, FullLoad<Tr, kS>(), y + b * kV, kV);
    for (; b < nfull; ++b)
      DwBlocks<Tr, kNp, 1, kF>(a, t, sh + b * kV, b, rq, FullLoad<Tr, kS>(), y + b * kV, kV);
    if (rem == 0) continue;
    if (!Tr::kMasked && c >= kV)  // the packed overlap block at c - kV
      DwBlocks<Tr, kNp, 1, kF>(a, t, sh + c - kV, nfull, rq, FullLoad<Tr, kS>(), y + c - kV, kV);
    else
      DwBlocks<Tr, kNp, 1, kF>(a, t, sh + nfull * kV, nfull, rq, PartLoad<Tr, kS>{rem},
                               y + nfull * kV, rem);
  }
}

template <class Tr, bool kS, bool kF>
void DwRowSigned(const DwNhwcRowArgs& a) {
  switch (a.np) {
    case 1:  // 1x1, 1x2, 2x1
      return DwRowImpl<Tr, kS, 1, kF>(a);
    case 2:  // 1x3, 3x1, 2x2
      return DwRowImpl<Tr, kS, 2, kF>(a);
    case 5:  // 3x3
      return DwRowImpl<Tr, kS, 5, kF>(a);
    case 13:  // 5x5
      return DwRowImpl<Tr, kS, 13, kF>(a);
    default:
      return DwRowImpl<Tr, kS, 0, kF>(a);
  }
}

template <class Tr>
void DwRow(const DwNhwcRowArgs& a) {
  if (a.yf)
    a.x_signed ? DwRowSigned<Tr, true, true>(a) : DwRowSigned<Tr, false, true>(a);
  else
    a.x_signed ? DwRowSigned<Tr, true, false>(a) : DwRowSigned<Tr, false, false>(a);
}

template <class Tr>
constexpr DwConvNhwcKernels MakeDwConvNhwcKernels() {
  return {Tr::kV, /*lane_pairs=*/true, /*overlap_tail=*/!Tr::kMasked, DwRow<Tr>};
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
