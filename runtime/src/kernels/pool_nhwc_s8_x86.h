// x86 channels-last pooling row kernels (pool_nhwc_s8.h) over the vector
// traits of dwconv_nhwc_s8_x86.h; included by pool_nhwc_s8_avx2.cc and
// pool_nhwc_s8_avx512vnni.cc.
//
// Max: byte vectors, vpmaxsb/vpmaxub over the taps. Average: taps widened
// to int16 and summed (up to 128 taps: |sum| <= 128 * 255 fits), the
// partial sums widened to int32, then the reference's float32 step,
// float(sum) * m (one IEEE product per pixel's multiplier), so the bytes are
// identical.
//
// Float (8 channels per __m256; the max 16 per __m512 with AVX-512): max via
// max_ps, which is "x > m ? x : m", the reference's step, with a NaN tap kept; the
// average adds each tap, widened to double, in tap order, divides in double
// and rounds to float once, as the reference does. Tails of C % 8 channels
// use masked loads and stores.
#pragma once
#include <immintrin.h>

#include <cstring>

#include "kernels/dwconv_nhwc_s8_x86.h"
#include "kernels/pool_nhwc_s8.h"

namespace qfold {
namespace kernels {
namespace {

template <class Tr, bool kS>
void MaxRow(const PoolNhwcRowArgs& a) {
  using VI = typename Tr::VI;
  constexpr int kB = Tr::kBytes;
  const int64_t c = a.c, nfull = c / kB, rem = c % kB;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t b = 0;
    for (; b + 2 <= nfull; b += 2) {
      const int64_t o = x0 + b * kB;
      VI m0 = Tr::Load(t[0] + o), m1 = Tr::Load(t[0] + o + kB);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        m0 = Tr::template MaxB<kS>(m0, Tr::Load(t[k] + o));
        m1 = Tr::template MaxB<kS>(m1, Tr::Load(t[k] + o + kB));
      }
      Tr::StoreB(y + b * kB, m0);
      Tr::StoreB(y + b * kB + kB, m1);
    }
    for (; b < nfull; ++b) {
      const int64_t o = x0 + b * kB;
      VI m = Tr::Load(t[0] + o);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::Load(t[k] + o));
      Tr::StoreB(y + b * kB, m);
    }
    if (rem == 0) continue;
    if (!Tr::kMasked && c >= kB) {  // overlap the last full vector: same bytes again
      const int64_t o = x0 + c - kB;
      VI m = Tr::Load(t[0] + o);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::Load(t[k] + o));
      Tr::StoreB(y + c - kB, m);
    } else {
      const int64_t o = x0 + nfull * kB;
      VI m = Tr::LoadBN(t[0] + o, rem);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::LoadBN(t[k] + o, rem));
      Tr::StoreBN(y + nfull * kB, m, rem);
    }
  }
}

// One block of channels at `off` of every tap: sum(x - x_zp) in int32, in
// UnpackLo/UnpackHi order, then the average quantized and stored.
template <class Tr, class Ld>
inline void AvgBlock(const PoolNhwcRowArgs& a, const uint8_t* const* t, int64_t off, Ld load,
                     typename Tr::VF mult, const Requant<Tr>& rq, uint8_t* y, int64_t n) {
  using VI = typename Tr::VI;
  using VF = typename Tr::VF;
  VI lo = Tr::Set1(a.corr), hi = lo;
  for (int64_t k0 = 0; k0 < a.ntaps; k0 += 128) {
    const int64_t k1 = a.ntaps < k0 + 128 ? a.ntaps : k0 + 128;
    VI s = Tr::Zero();
    for (int64_t k = k0; k < k1; ++k) s = Tr::Add16(s, load(t[k] + off));
    lo = Tr::Add32(lo, Tr::Lo32(s));
    hi = Tr::Add32(hi, Tr::Hi32(s));
  }
  const VF flo = Tr::Mul(Tr::ToF(lo), mult);
  const VF fhi = Tr::Mul(Tr::ToF(hi), mult);
  if (n >= Tr::kV)
    Tr::Store(y, rq(flo), rq(fhi));
  else
    Tr::StoreN(y, rq(flo), rq(fhi), n);
}

template <class Tr, bool kS>
void AvgRow(const PoolNhwcRowArgs& a) {
  constexpr int kV = Tr::kV;
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  const Requant<Tr> rq(a.yzp, a.lo, a.hi);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const typename Tr::VF mult = Tr::Set1F(a.mult[px]);
    const int64_t x0 = a.xoff + px * a.pix_step;
    for (int64_t b = 0; b < nfull; ++b)
      AvgBlock<Tr>(a, t, x0 + b * kV, FullLoad<Tr, kS>(), mult, rq, y + b * kV, kV);
    if (rem == 0) continue;
    if (!Tr::kMasked && c >= kV)
      AvgBlock<Tr>(a, t, x0 + c - kV, FullLoad<Tr, kS>(), mult, rq, y + c - kV, kV);
    else
      AvgBlock<Tr>(a, t, x0 + nfull * kV, PartLoad<Tr, kS>{rem}, mult, rq, y + nfull * kV, rem);
  }
}

inline __m256i TailMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 MaxStep8(__m256 m, __m256 x) {
  return _mm256_blendv_ps(_mm256_max_ps(x, m), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline const float* TapF(const uint8_t* tap, int64_t off) {
  return reinterpret_cast<const float*>(tap + off);
}

#if defined(__AVX512F__)
// The same step on 16 lanes in two operations: a masked max that keeps a NaN
// tap (x's unordered lanes) and otherwise is "x > m ? x : m".
inline __m512 MaxStep16(__m512 m, __m512 x) {
  return _mm512_mask_max_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x, m);
}

// 16 channels per vector (the AVX2 form's 8 took three operations a step).
inline void MaxRowF32(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  const __mmask16 tail = __mmask16((1u << (c % 16)) - 1);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t i = 0;
    for (; i + 64 <= c; i += 64) {
      const float* p = TapF(t[0], x0) + i;
      __m512 m0 = _mm512_loadu_ps(p), m1 = _mm512_loadu_ps(p + 16);
      __m512 m2 = _mm512_loadu_ps(p + 32), m3 = _mm512_loadu_ps(p + 48);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        m0 = MaxStep16(m0, _mm512_loadu_ps(q));
        m1 = MaxStep16(m1, _mm512_loadu_ps(q + 16));
        m2 = MaxStep16(m2, _mm512_loadu_ps(q + 32));
        m3 = MaxStep16(m3, _mm512_loadu_ps(q + 48));
      }
      _mm512_storeu_ps(y + i, m0);
      _mm512_storeu_ps(y + i + 16, m1);
      _mm512_storeu_ps(y + i + 32, m2);
      _mm512_storeu_ps(y + i + 48, m3);
    }
    for (; i + 16 <= c; i += 16) {
      __m512 m = _mm512_loadu_ps(TapF(t[0], x0) + i);
      for (int64_t k = 1; k < a.ntaps; ++k) m = MaxStep16(m, _mm512_loadu_ps(TapF(t[k], x0) + i));
      _mm512_storeu_ps(y + i, m);
    }
    if (i < c) {
      __m512 m = _mm512_maskz_loadu_ps(tail, TapF(t[0], x0) + i);
      for (int64_t k = 1; k < a.ntaps; ++k)
        m = MaxStep16(m, _mm512_maskz_loadu_ps(tail, TapF(t[k], x0) + i));
      _mm512_mask_storeu_ps(y + i, tail, m);
    }
  }
}
#else
inline void MaxRowF32(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  const __m256i tail = TailMask(c % 8);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t i = 0;
    for (; i + 32 <= c; i += 32) {
      const float* p = TapF(t[0], x0) + i;
      __m256 m0 = _mm256_loadu_ps(p), m1 = _mm256_loadu_ps(p + 8);
      __m256 m2 = _mm256_loadu_ps(p + 16), m3 = _mm256_loadu_ps(p + 24);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        m0 = MaxStep8(m0, _mm256_loadu_ps(q));
        m1 = MaxStep8(m1, _mm256_loadu_ps(q + 8));
        m2 = MaxStep8(m2, _mm256_loadu_ps(q + 16));
        m3 = MaxStep8(m3, _mm256_loadu_ps(q + 24));
      }
      _mm256_storeu_ps(y + i, m0);
      _mm256_storeu_ps(y + i + 8, m1);
      _mm256_storeu_ps(y + i + 16, m2);
      _mm256_storeu_ps(y + i + 24, m3);
    }
    for (; i + 8 <= c; i += 8) {
      __m256 m = _mm256_loadu_ps(TapF(t[0], x0) + i);
      for (int64_t k = 1; k < a.ntaps; ++k) m = MaxStep8(m, _mm256_loadu_ps(TapF(t[k], x0) + i));
      _mm256_storeu_ps(y + i, m);
    }
    if (i < c) {
      __m256 m = _mm256_maskload_ps(TapF(t[0], x0) + i, tail);
      for (int64_t k = 1; k < a.ntaps; ++k)
        m = MaxStep8(m, _mm256_maskload_ps(TapF(t[k], x0) + i, tail));
      _mm256_maskstore_ps(y + i, tail, m);
    }
  }
}

#endif  // __AVX512F__

// bfloat16: 8 values widened exactly to floats (the high halves), compared
// as MaxRowF32 compares, narrowed back by dropping the (zero) low halves.
inline __m256 LoadBf16x8(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

inline void StoreBf16x8(uint8_t* p, __m256 m) {
  const __m256i v = _mm256_srli_epi32(_mm256_castps_si256(m), 16);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

inline void MaxRowBf16(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t i = 0;
    for (; i + 32 <= c; i += 32) {
      const uint8_t* p = t[0] + x0 + 2 * i;
      __m256 m0 = LoadBf16x8(p), m1 = LoadBf16x8(p + 16);
      __m256 m2 = LoadBf16x8(p + 32), m3 = LoadBf16x8(p + 48);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const uint8_t* q = t[k] + x0 + 2 * i;
        m0 = MaxStep8(m0, LoadBf16x8(q));
        m1 = MaxStep8(m1, LoadBf16x8(q + 16));
        m2 = MaxStep8(m2, LoadBf16x8(q + 32));
        m3 = MaxStep8(m3, LoadBf16x8(q + 48));
      }
      StoreBf16x8(y + 2 * i, m0);
      StoreBf16x8(y + 2 * i + 16, m1);
      StoreBf16x8(y + 2 * i + 32, m2);
      StoreBf16x8(y + 2 * i + 48, m3);
    }
    for (; i + 8 <= c; i += 8) {
      __m256 m = LoadBf16x8(t[0] + x0 + 2 * i);
      for (int64_t k = 1; k < a.ntaps; ++k) m = MaxStep8(m, LoadBf16x8(t[k] + x0 + 2 * i));
      StoreBf16x8(y + 2 * i, m);
    }
    for (; i < c; ++i) {  // the last channels one at a time, as MaxStep8 per lane
      uint16_t best;
      std::memcpy(&best, t[0] + x0 + 2 * i, 2);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        uint16_t v;
        std::memcpy(&v, t[k] + x0 + 2 * i, 2);
        const uint32_t vb = uint32_t(v) << 16, bb = uint32_t(best) << 16;
        float vf, bf;
        std::memcpy(&vf, &vb, 4);
        std::memcpy(&bf, &bb, 4);
        if (vf > bf || vf != vf) best = v;
      }
      std::memcpy(y + 2 * i, &best, 2);
    }
  }
}

#if defined(__AVX512BW__)
// The same on 16 lanes, channel tails masked.
inline __m512 LoadBf16x16(const uint8_t* p, __mmask16 m) {
  const __m256i v = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

inline void MaxRowBf16x16(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    for (int64_t i = 0; i < c; i += 32) {
      const __mmask16 m0 = c - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - i)) - 1);
      const __mmask16 m1 = c - i >= 32  ? __mmask16(0xffff)
                           : c - i > 16 ? __mmask16((1u << (c - i - 16)) - 1)
                                        : __mmask16(0);
      const uint8_t* p = t[0] + x0 + 2 * i;
      __m512 v0 = LoadBf16x16(p, m0), v1 = LoadBf16x16(p + 32, m1);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const uint8_t* q = t[k] + x0 + 2 * i;
        v0 = MaxStep16(v0, LoadBf16x16(q, m0));
        v1 = MaxStep16(v1, LoadBf16x16(q + 32, m1));
      }
      _mm256_mask_storeu_epi16(
          y + 2 * i, m0, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v0), 16)));
      _mm256_mask_storeu_epi16(
          y + 2 * i + 32, m1,
          _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v1), 16)));
    }
  }
}
// Floats to bf16, to nearest even, NaN kept NaN (Bf16FromFloat's rule) in
// integer arithmetic: this level may lack AVX-512 BF16.
inline __m256i NarrowBf16x16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// The average: the widened values summed in double (as AvgRowF32), divided,
// rounded to float, then to bf16.
inline void AvgRowBf16x16(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    const bool counted = a.div[px] > 0;  // else 0, as the reference
    const __m512d div = _mm512_set1_pd(counted ? double(a.div[px]) : 1.0);
    for (int64_t i = 0; i < c; i += 16) {
      const __mmask16 m = c - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - i)) - 1);
      __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
      for (int64_t k = 0; k < a.ntaps; ++k) {
        const __m512 v = LoadBf16x16(t[k] + x0 + 2 * i, m);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        hi = _mm512_add_pd(
            hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
      }
      __m512 avg = _mm512_castpd_ps(_mm512_insertf64x4(
          _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(lo, div)))),
          _mm256_castps_pd(_mm512_cvtpd_ps(_mm512_div_pd(hi, div))), 1));
      if (!counted) avg = _mm512_setzero_ps();
      _mm256_mask_storeu_epi16(y + 2 * i, m, NarrowBf16x16(avg));
    }
  }
}
#endif

// sum += the 8 floats at p widened to double, lanes 0-3 into lo, 4-7 into hi.
inline void AddWidened(__m256 v, __m256d* lo, __m256d* hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

inline __m256 Divide(__m256d lo, __m256d hi, __m256d div) {
  return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(hi, div)),
                         _mm256_cvtpd_ps(_mm256_div_pd(lo, div)));
}

inline void AvgRowF32(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  const __m256i tail = TailMask(c % 8);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    if (!(a.div[px] > 0)) {  // no tap counted: 0, as the reference
      for (int64_t i = 0; i < c; ++i) y[i] = 0.f;
      continue;
    }
    const __m256d div = _mm256_set1_pd(double(a.div[px]));
    int64_t i = 0;
    for (; i + 16 <= c; i += 16) {
      __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        AddWidened(_mm256_loadu_ps(q), &s0, &s1);
        AddWidened(_mm256_loadu_ps(q + 8), &s2, &s3);
      }
      _mm256_storeu_ps(y + i, Divide(s0, s1, div));
      _mm256_storeu_ps(y + i + 8, Divide(s2, s3, div));
    }
    for (; i + 8 <= c; i += 8) {
      __m256d s0 = _mm256_setzero_pd(), s1 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k)
        AddWidened(_mm256_loadu_ps(TapF(t[k], x0) + i), &s0, &s1);
      _mm256_storeu_ps(y + i, Divide(s0, s1, div));
    }
    if (i < c) {
      __m256d s0 = _mm256_setzero_pd(), s1 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k)
        AddWidened(_mm256_maskload_ps(TapF(t[k], x0) + i, tail), &s0, &s1);
      _mm256_maskstore_ps(y + i, tail, Divide(s0, s1, div));
    }
  }
}

template <class Tr>
constexpr PoolNhwcKernels MakePoolNhwcKernels() {
#if defined(__AVX512BW__)
  void (*const max_bf16)(const PoolNhwcRowArgs&) = MaxRowBf16x16;
  void (*const avg_bf16)(const PoolNhwcRowArgs&) = AvgRowBf16x16;
#else
  void (*const max_bf16)(const PoolNhwcRowArgs&) = MaxRowBf16;
  void (*const avg_bf16)(const PoolNhwcRowArgs&) = nullptr;  // the portable loop
#endif
  return {MaxRow<Tr, true>, MaxRow<Tr, false>, AvgRow<Tr, true>, AvgRow<Tr, false>,
          MaxRowF32,        AvgRowF32,         max_bf16,         avg_bf16};
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
