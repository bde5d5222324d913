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

#if defined(__AVX512BW__)
// The same on 16 lanes, channel tails masked.
inline __m512 LoadBf16x16(const uint8_t* p, __mmask16 m) {
  const __m256i v = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
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

// The average: the widened values summed in double (as AvgRowFloat), divided,
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

// The float average row over a vector trait (8 lanes on AVX2, 16 at the
// AVX-512 levels): each output's taps widened to double and added in tap
// order, one double division, one rounding to float, as the reference; 8
// doubles a vector halve the widening and the adds, most of the cost
// (Inception-v2's eight 3x3 AveragePools at 1 thread, Zen 5, 0.65 -> 0.38 ms).
//   V, D (double vector), Mask, kLanes, Load(p), Store(p, v), Tail(n),
//   LoadTail(p, m), StoreTail(p, m, v), ZeroD(), SetD(x),
//   AddWidened(v, &lo, &hi) (lanes of v into lo and hi), Divide(lo, hi, div)
template <class Tr>
void AvgRowFloat(const PoolNhwcRowArgs& a) {
  using D = typename Tr::D;
  constexpr int64_t kL = Tr::kLanes;
  const int64_t c = a.c;
  const typename Tr::Mask tail = Tr::Tail(c % kL);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    if (!(a.div[px] > 0)) {  // no tap counted: 0, as the reference
      for (int64_t i = 0; i < c; ++i) y[i] = 0.f;
      continue;
    }
    const D div = Tr::SetD(double(a.div[px]));
    int64_t i = 0;
    for (; i + 2 * kL <= c; i += 2 * kL) {
      D s0 = Tr::ZeroD(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        Tr::AddWidened(Tr::Load(q), &s0, &s1);
        Tr::AddWidened(Tr::Load(q + kL), &s2, &s3);
      }
      Tr::Store(y + i, Tr::Divide(s0, s1, div));
      Tr::Store(y + i + kL, Tr::Divide(s2, s3, div));
    }
    for (; i + kL <= c; i += kL) {
      D s0 = Tr::ZeroD(), s1 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k) Tr::AddWidened(Tr::Load(TapF(t[k], x0) + i), &s0, &s1);
      Tr::Store(y + i, Tr::Divide(s0, s1, div));
    }
    if (i < c) {
      D s0 = Tr::ZeroD(), s1 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k)
        Tr::AddWidened(Tr::LoadTail(TapF(t[k], x0) + i, tail), &s0, &s1);
      Tr::StoreTail(y + i, tail, Tr::Divide(s0, s1, div));
    }
  }
}

struct AvgF32x8 {
  using V = __m256;
  using D = __m256d;
  using Mask = __m256i;
  static constexpr int64_t kLanes = 8;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static Mask Tail(int64_t n) { return TailMask(n); }
  static V LoadTail(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void StoreTail(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  static D ZeroD() { return _mm256_setzero_pd(); }
  static D SetD(double x) { return _mm256_set1_pd(x); }
  static void AddWidened(V v, D* lo, D* hi) {
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static V Divide(D lo, D hi, D div) {
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(hi, div)),
                           _mm256_cvtpd_ps(_mm256_div_pd(lo, div)));
  }
};

#if defined(__AVX512BW__)
struct AvgF32x16 {
  using V = __m512;
  using D = __m512d;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static Mask Tail(int64_t n) { return Mask((1u << n) - 1); }
  static V LoadTail(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void StoreTail(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static D ZeroD() { return _mm512_setzero_pd(); }
  static D SetD(double x) { return _mm512_set1_pd(x); }
  static void AddWidened(V v, D* lo, D* hi) {
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(
        *hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  static V Divide(D lo, D hi, D div) {
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(lo, div)))),
        _mm256_castps_pd(_mm512_cvtpd_ps(_mm512_div_pd(hi, div))), 1));
  }
};
#endif

// The float max row over a vector trait (float or bf16 storage; 8 or 16
// lanes): blocks of 4 vectors, then single vectors, then the channel tail.
//   V, Mask, kLanes, kBytes (per element), Load(p), Store(p, v), Step(m, x),
//   Tail(n): the mask of n < kLanes lanes, LoadTail(p, mask), StoreTail(p, mask, v)
template <class Tr>
void MaxRowFloat(const PoolNhwcRowArgs& a) {
  using V = typename Tr::V;
  constexpr int64_t kL = Tr::kLanes, kE = Tr::kBytes;
  const int64_t c = a.c;
  const typename Tr::Mask tail = Tr::Tail(c % kL);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t i = 0;
    for (; i + 4 * kL <= c; i += 4 * kL) {
      const uint8_t* p = t[0] + x0 + i * kE;
      V m0 = Tr::Load(p), m1 = Tr::Load(p + kL * kE);
      V m2 = Tr::Load(p + 2 * kL * kE), m3 = Tr::Load(p + 3 * kL * kE);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const uint8_t* q = t[k] + x0 + i * kE;
        m0 = Tr::Step(m0, Tr::Load(q));
        m1 = Tr::Step(m1, Tr::Load(q + kL * kE));
        m2 = Tr::Step(m2, Tr::Load(q + 2 * kL * kE));
        m3 = Tr::Step(m3, Tr::Load(q + 3 * kL * kE));
      }
      Tr::Store(y + i * kE, m0);
      Tr::Store(y + (i + kL) * kE, m1);
      Tr::Store(y + (i + 2 * kL) * kE, m2);
      Tr::Store(y + (i + 3 * kL) * kE, m3);
    }
    for (; i + kL <= c; i += kL) {
      V m = Tr::Load(t[0] + x0 + i * kE);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::Step(m, Tr::Load(t[k] + x0 + i * kE));
      Tr::Store(y + i * kE, m);
    }
    if (i < c) {
      V m = Tr::LoadTail(t[0] + x0 + i * kE, tail);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::Step(m, Tr::LoadTail(t[k] + x0 + i * kE, tail));
      Tr::StoreTail(y + i * kE, tail, m);
    }
  }
}

struct MaxF32x8 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int64_t kLanes = 8, kBytes = 4;
  static V Load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static void Store(uint8_t* p, V v) { _mm256_storeu_ps(reinterpret_cast<float*>(p), v); }
  static V Step(V m, V x) { return MaxStep8(m, x); }
  static Mask Tail(int64_t n) { return TailMask(n); }
  static V LoadTail(const uint8_t* p, Mask m) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(p), m);
  }
  static void StoreTail(uint8_t* p, Mask m, V v) {
    _mm256_maskstore_ps(reinterpret_cast<float*>(p), m, v);
  }
};

// bfloat16 widened exactly to floats (the high halves), compared as floats,
// narrowed back by dropping the (zero) low halves. The tail goes through a
// 16-byte buffer (AVX2 has no 16-bit masked loads).
struct MaxBf16x8 {
  using V = __m256;
  using Mask = int64_t;  // lanes
  static constexpr int64_t kLanes = 8, kBytes = 2;
  static V Load(const uint8_t* p) { return LoadBf16x8(p); }
  static void Store(uint8_t* p, V v) { StoreBf16x8(p, v); }
  static V Step(V m, V x) { return MaxStep8(m, x); }
  static Mask Tail(int64_t n) { return n; }
  static V LoadTail(const uint8_t* p, Mask n) {
    uint8_t buf[16] = {};
    std::memcpy(buf, p, size_t(2 * n));
    return LoadBf16x8(buf);
  }
  static void StoreTail(uint8_t* p, Mask n, V v) {
    uint8_t buf[16];
    StoreBf16x8(buf, v);
    std::memcpy(p, buf, size_t(2 * n));
  }
};

#if defined(__AVX512F__)
// 16 lanes: two operations a step where 8 lanes took three.
struct MaxF32x16 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16, kBytes = 4;
  static V Load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static void Store(uint8_t* p, V v) { _mm512_storeu_ps(p, v); }
  static V Step(V m, V x) { return MaxStep16(m, x); }
  static Mask Tail(int64_t n) { return Mask((1u << n) - 1); }
  static V LoadTail(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void StoreTail(uint8_t* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
};
#endif

#if defined(__AVX512BW__)
struct MaxBf16x16 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16, kBytes = 2;
  static V Load(const uint8_t* p) { return LoadBf16x16(p, 0xffff); }
  static void Store(uint8_t* p, V v) { StoreTail(p, 0xffff, v); }
  static V Step(V m, V x) { return MaxStep16(m, x); }
  static Mask Tail(int64_t n) { return Mask((1u << n) - 1); }
  static V LoadTail(const uint8_t* p, Mask m) { return LoadBf16x16(p, m); }
  static void StoreTail(uint8_t* p, Mask m, V v) {
    _mm256_mask_storeu_epi16(p, m,
                             _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
  }
};
#endif

template <class Tr>
constexpr PoolNhwcKernels MakePoolNhwcKernels() {
#if defined(__AVX512BW__)
  void (*const max_f32)(const PoolNhwcRowArgs&) = MaxRowFloat<MaxF32x16>;
  void (*const max_bf16)(const PoolNhwcRowArgs&) = MaxRowFloat<MaxBf16x16>;
  void (*const avg_bf16)(const PoolNhwcRowArgs&) = AvgRowBf16x16;
  void (*const avg_f32)(const PoolNhwcRowArgs&) = AvgRowFloat<AvgF32x16>;
#else
  void (*const avg_f32)(const PoolNhwcRowArgs&) = AvgRowFloat<AvgF32x8>;
  void (*const max_f32)(const PoolNhwcRowArgs&) = MaxRowFloat<MaxF32x8>;
  void (*const max_bf16)(const PoolNhwcRowArgs&) = MaxRowFloat<MaxBf16x8>;
  void (*const avg_bf16)(const PoolNhwcRowArgs&) = nullptr;  // the portable loop
#endif
  return {MaxRow<Tr, true>, MaxRow<Tr, false>, AvgRow<Tr, true>, AvgRow<Tr, false>,
          max_f32,          avg_f32,           max_bf16,         avg_bf16};
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
