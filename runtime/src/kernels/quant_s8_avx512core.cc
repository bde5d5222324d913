// AVX-512 F/BW/DQ/VL kernels of quant_s8.h: 16 floats per vector, tails through masked
// loads and stores. Same steps as the AVX2 file: true division, round half to
// even, NaN lanes zeroed (-> zero point), + zp and clamp in float, then
// vpmovdb (the values are already in range, so truncation is exact).
// QLinearAdd/QLinearMul with bounded factors instead round to int32 and
// clamp with saturating packs (pack_s8_v512.h): the same bytes.
#include <immintrin.h>

#include <cmath>

// GCC 12 flags the _mm512_undefined_* placeholders inside the intrinsics
// as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/pack_s8_v512.h"
#include "kernels/quant_16_x86.h"
#include "kernels/quant_s8.h"
#include "kernels/quant_s8_ref.h"

namespace qfold {
namespace kernels {

void QuantS8LookupAvx2(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n);
void QuantS8LookupChannelsAvx2(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t pixels,
                               int64_t channels, int64_t c0, int64_t c1);

namespace {

// q rounded half to even (NaN -> 0), + zp, clamped to [lo, hi], as int32.
inline __m512i Round16(__m512 q, __m512 zpf, __m512 lof, __m512 hif) {
  const __mmask16 ord = _mm512_cmp_ps_mask(q, q, _CMP_ORD_Q);
  __m512 t = _mm512_maskz_roundscale_ps(ord, q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm512_add_ps(t, zpf);
  t = _mm512_min_ps(_mm512_max_ps(t, lof), hif);
  return _mm512_cvttps_epi32(t);
}

inline __m512i Quantize16(__m512 x, __m512 s, __m512 zpf, __m512 lof, __m512 hif) {
  return Round16(_mm512_div_ps(x, s), zpf, lof, hif);
}

inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

template <bool kSigned>
inline __m512 Load16(const void* x, int64_t i, __mmask16 m) {
  // A full vector (a constant mask once inlined) loads without the mask.
  const __m128i b =
      m == 0xffff
          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(x) + i))
          : _mm_maskz_loadu_epi8(m, static_cast<const uint8_t*>(x) + i);
  return _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
}

// Four vectors of int32 in byte range as one 64-byte vector, in order.
inline __m512i Bytes64(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m256i ab = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(a)),
                                             _mm512_cvtepi32_epi8(b), 1);
  const __m256i cd = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(c)),
                                             _mm512_cvtepi32_epi8(d), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(ab), cd, 1);
}

template <bool kPerElem>
void QuantizeT(const float* x, void* y, int64_t n, const float* scale, const float* zpf, int32_t lo,
               int32_t hi) {
  const __m512 lof = _mm512_set1_ps(float(lo)), hif = _mm512_set1_ps(float(hi));
  __m512 s = _mm512_set1_ps(scale[0]), z = _mm512_set1_ps(zpf[0]);
  uint8_t* yb = static_cast<uint8_t*>(y);
  int64_t i = 0;
  if (!kPerElem) {
    // 64 outputs per plain store: a masked byte store per 16 outputs made
    // the next loads of x wait for it where x and y alias modulo 4 KiB
    // (measured: 10x slower on an input laid out that way).
    for (; i + 64 <= n; i += 64) {
      const __m512i q0 = Quantize16(_mm512_loadu_ps(x + i), s, z, lof, hif);
      const __m512i q1 = Quantize16(_mm512_loadu_ps(x + i + 16), s, z, lof, hif);
      const __m512i q2 = Quantize16(_mm512_loadu_ps(x + i + 32), s, z, lof, hif);
      const __m512i q3 = Quantize16(_mm512_loadu_ps(x + i + 48), s, z, lof, hif);
      _mm512_storeu_si512(yb + i, Bytes64(q0, q1, q2, q3));
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    if (kPerElem) {
      // Masked-off lanes load 0 / 0 = NaN quietly and are never stored.
      s = _mm512_maskz_loadu_ps(m, scale + i);
      z = _mm512_maskz_loadu_ps(m, zpf + i);
    }
    const __m512i q = Quantize16(_mm512_maskz_loadu_ps(m, x + i), s, z, lof, hif);
    _mm512_mask_cvtepi32_storeu_epi8(yb + i, m, q);
  }
}

void Quantize(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
              bool per_elem, int32_t lo, int32_t hi, bool is_signed) {
  // Signedness only matters for the scalar reference; vpmovdb stores both.
  (void)is_signed;
  per_elem ? QuantizeT<true>(x, y, n, scale, zpf, lo, hi)
           : QuantizeT<false>(x, y, n, scale, zpf, lo, hi);
}

template <bool kSigned, bool kPerElem>
void DequantizeT(const void* x, float* y, int64_t n, const float* scale, const float* zpf) {
  __m512 s = _mm512_set1_ps(scale[0]), z = _mm512_set1_ps(zpf[0]);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    if (kPerElem) {
      s = _mm512_maskz_loadu_ps(m, scale + i);
      z = _mm512_maskz_loadu_ps(m, zpf + i);
    }
    // x - zp is exact in float, so this is float(x - zp) * scale.
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_sub_ps(Load16<kSigned>(x, i, m), z), s));
  }
}

void Dequantize(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                bool per_elem, bool is_signed) {
  if (is_signed)
    per_elem ? DequantizeT<true, true>(x, y, n, scale, zpf)
             : DequantizeT<true, false>(x, y, n, scale, zpf);
  else
    per_elem ? DequantizeT<false, true>(x, y, n, scale, zpf)
             : DequantizeT<false, false>(x, y, n, scale, zpf);
}

// kA / kB: whether the operand advances (else one broadcast value).
template <bool kSigned, bool kMul, bool kA, bool kB>
void BinaryT(const QBinaryS8Params& p, const void* a, const void* b, void* y, int64_t n) {
  if (n <= 0) return;
  const __m512 sa = _mm512_set1_ps(p.a_factor()), za = _mm512_set1_ps(float(p.a_zp));
  const __m512 sb = _mm512_set1_ps(p.b_factor()), zb = _mm512_set1_ps(float(p.b_zp));
  const __m512 sm = _mm512_set1_ps(p.mul_factor()), zc = _mm512_set1_ps(float(p.c_zp));
  const __m512 lof = _mm512_set1_ps(float(p.lo)), hif = _mm512_set1_ps(float(p.hi));
  // A broadcast operand's value, computed once as the scalar code does.
  const __m512 va0 = _mm512_set1_ps(float(QS8Load(a, 0, kSigned) - p.a_zp) * p.a_factor());
  const __m512 vb0 = _mm512_set1_ps(float(QS8Load(b, 0, kSigned) - p.b_zp) * p.b_factor());
  auto v16 = [&](int64_t i, __mmask16 m) {
    const __m512 va = kA ? _mm512_mul_ps(_mm512_sub_ps(Load16<kSigned>(a, i, m), za), sa) : va0;
    const __m512 vb = kB ? _mm512_mul_ps(_mm512_sub_ps(Load16<kSigned>(b, i, m), zb), sb) : vb0;
    return kMul ? _mm512_mul_ps(_mm512_mul_ps(va, vb), sm) : _mm512_add_ps(va, vb);
  };
  auto q16 = [&](int64_t i, __mmask16 m) { return Round16(v16(i, m), zc, lof, hif); };
  // With finite factors that keep |v| below 2^30 (no NaN, no int32
  // overflow), v rounds to int32 directly (half to even) and the saturating
  // packs do the zero point and the clamp: about half the vector operations
  // of Round16 and vpmovdb (the bound of QLinearAdd and QLinearMul on Intel's
  // two 512-bit ports).
  const float bound = kMul ? 65025.f * std::fabs(p.mul_factor())
                           : 255.f * (std::fabs(p.a_factor()) + std::fabs(p.b_factor()));
  const bool packed = bound < 1073741824.f;  // false for NaN and inf
  const PackS8Params pq = MakePackS8Params(p.c_zp, p.lo, p.hi);
  auto r16 = [&](int64_t i, __mmask16 m) { return _mm512_cvtps_epi32(v16(i, m)); };
  uint8_t* yb = static_cast<uint8_t*>(y);
  int64_t i = 0;
  if (packed) {
    for (; i + 64 <= n; i += 64) {
      const __m512i w01 = PackS8Words(r16(i, 0xffff), r16(i + 16, 0xffff), pq);
      const __m512i w23 = PackS8Words(r16(i + 32, 0xffff), r16(i + 48, 0xffff), pq);
      _mm512_storeu_si512(yb + i, PackS8BytesT<kSigned>(w01, w23, pq));
    }
    if (i < n) {
      const int64_t left = n - i;
      auto mask = [&](int64_t at) { return TailMask(left > at ? left - at : 0); };
      const __m512i w01 = PackS8Words(r16(i, mask(0)), r16(i + 16, mask(16)), pq);
      const __m512i w23 = PackS8Words(r16(i + 32, mask(32)), r16(i + 48, mask(48)), pq);
      _mm512_mask_storeu_epi8(yb + i, (__mmask64(1) << left) - 1,
                              PackS8BytesT<kSigned>(w01, w23, pq));
    }
    return;
  }
  // 64 bytes per store: the four vectors' int32 lanes are in range, so
  // truncating them to bytes (vpmovdb) is exact.
  for (; i + 64 <= n; i += 64) {
    _mm512_storeu_si512(yb + i, Bytes64(q16(i, 0xffff), q16(i + 16, 0xffff), q16(i + 32, 0xffff),
                                        q16(i + 48, 0xffff)));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_cvtepi32_storeu_epi8(yb + i, m, q16(i, m));
  }
}

template <bool kSigned, bool kMul>
void BinaryS(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
             void* y, int64_t n) {
  if (a_step && b_step)
    BinaryT<kSigned, kMul, true, true>(p, a, b, y, n);
  else if (a_step)
    BinaryT<kSigned, kMul, true, false>(p, a, b, y, n);
  else if (b_step)
    BinaryT<kSigned, kMul, false, true>(p, a, b, y, n);
  else
    QS8BinaryScalar(p, a, 0, b, 0, y, 0, n);
}

void Binary(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step, void* y,
            int64_t n) {
  if (p.is_signed)
    p.mul ? BinaryS<true, true>(p, a, a_step, b, b_step, y, n)
          : BinaryS<true, false>(p, a, a_step, b, b_step, y, n);
  else
    p.mul ? BinaryS<false, true>(p, a, a_step, b, b_step, y, n)
          : BinaryS<false, false>(p, a, a_step, b, b_step, y, n);
}

// 256-entry lookup with two vpermi2b (7-bit index into 128 table bytes) and
// a blend on the index's top bit. VBMI is not part of this file's base set,
// so the function carries its own target; only the kQuantS8Avx512Vbmi table
// holds it, and kernel_config.cc picks that table only on CPUs with VBMI.
__attribute__((target("avx512vbmi"))) void LookupVbmi(const uint8_t* x, const uint8_t* table,
                                                      uint8_t* y, int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t left = n - i;
    const __mmask64 m = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
    const __m512i idx = _mm512_maskz_loadu_epi8(m, x + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
  }
}

// ChannelLines, blocks of 16 channels: the stages' parameters of a block
// stay in registers (S stages, 5 vectors each) while every pixel's 16 bytes
// pass through them in int32 lanes (exact: the op keeps every product and
// sum inside int32). kS = 0: any stage count, parameters from memory.
template <bool kXSigned, int kS>
void LineChannelsT(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l) {
  const int64_t c = l.channels, stride = l.stride;
  const int stages = kS ? kS : l.stages;
  constexpr int kRegs = kS ? kS : 1;
  for (int64_t ch = 0; ch < c; ch += 16) {
    const __mmask16 m = TailMask(c - ch);
    __m512i mult[kRegs], add[kRegs], shift[kRegs], lo[kRegs], hi[kRegs];
    auto load = [&](int st, int r) {
      const int64_t o = st * stride + ch;
      mult[r] = _mm512_loadu_si512(l.mult.data() + o);
      add[r] = _mm512_loadu_si512(l.add.data() + o);
      shift[r] = _mm512_loadu_si512(l.shift.data() + o);
      lo[r] = _mm512_loadu_si512(l.lo.data() + o);
      hi[r] = _mm512_loadu_si512(l.hi.data() + o);
    };
    if (kS)
      for (int st = 0; st < kS; ++st) load(st, st);
    const uint8_t* xp = x + ch;
    uint8_t* yp = y + ch;
    for (int64_t p = 0; p < pixels; ++p, xp += c, yp += c) {
      const __m128i b = _mm_maskz_loadu_epi8(m, xp);
      __m512i v = kXSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
      for (int st = 0; st < stages; ++st) {
        const int r = kS ? st : 0;
        if (!kS) load(st, 0);
        v = _mm512_srav_epi32(_mm512_add_epi32(_mm512_mullo_epi32(v, mult[r]), add[r]), shift[r]);
        v = _mm512_min_epi32(_mm512_max_epi32(v, lo[r]), hi[r]);
      }
      _mm512_mask_cvtepi32_storeu_epi8(yp, m, v);
    }
  }
}

template <bool kXSigned>
void LineChannelsS(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l) {
  switch (l.stages) {
    case 1:
      return LineChannelsT<kXSigned, 1>(x, y, pixels, l);
    case 2:
      return LineChannelsT<kXSigned, 2>(x, y, pixels, l);
    case 3:
      return LineChannelsT<kXSigned, 3>(x, y, pixels, l);
    case 4:
      return LineChannelsT<kXSigned, 4>(x, y, pixels, l);
    default:
      return LineChannelsT<kXSigned, 0>(x, y, pixels, l);
  }
}

void LineChannels(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l) {
  l.x_signed ? LineChannelsS<true>(x, y, pixels, l) : LineChannelsS<false>(x, y, pixels, l);
}

}  // namespace

extern const QuantS8Kernels kQuantS8Avx512Core;
extern const QuantS8Kernels kQuantS8Avx512Vbmi;
const QuantS8Kernels kQuantS8Avx512Core = {
    Quantize,    Dequantize,   Binary,   QuantS8LookupAvx2,
    Quantize16,  Dequantize16, Binary16, QuantS8LookupChannelsAvx2,
    LineChannels};
const QuantS8Kernels kQuantS8Avx512Vbmi = {
    Quantize,    Dequantize,   Binary,   LookupVbmi,
    Quantize16,  Dequantize16, Binary16, QuantS8LookupChannelsAvx2,
    LineChannels};

}  // namespace kernels
}  // namespace qfold
