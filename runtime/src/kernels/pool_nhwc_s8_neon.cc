// Armv8.0 NEON channels-last pooling row kernels (pool_nhwc_s8.h), 16
// channels per vector. Max: smax/umax over the taps. Average: taps added to
// int16 lanes with saddw/uaddw (up to 128 taps: |sum| <= 128 * 255 fits),
// the partial sums widened to int32, then the reference's float32 step,
// float(sum) * m (one IEEE product), so the bytes are identical. The last C % 16 channels take the
// vector ending at channel C (the same bytes again) when C >= 16, else go
// through zeroed copies (no reads or writes past them).
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8_arm.h"
#include "kernels/pool_nhwc_s8.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kV = 16;

inline uint8x16_t LoadN(const uint8_t* p, int64_t n) {
  if (n >= kV) return vld1q_u8(p);
  uint8_t buf[kV] = {};
  std::memcpy(buf, p, size_t(n));
  return vld1q_u8(buf);
}

inline void StoreN(uint8_t* y, uint8x16_t v, int64_t n) {
  if (n >= kV) return vst1q_u8(y, v);
  uint8_t buf[kV];
  vst1q_u8(buf, v);
  std::memcpy(y, buf, size_t(n));
}

template <bool kS>
inline uint8x16_t Max(uint8x16_t a, uint8x16_t b) {
  return kS ? vreinterpretq_u8_s8(vmaxq_s8(vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(b)))
            : vmaxq_u8(a, b);
}

// n channels (<= kV) at `off` of every tap.
template <bool kS>
inline void MaxBlock(const PoolNhwcRowArgs& a, const uint8_t* const* t, int64_t off, uint8_t* y,
                     int64_t n) {
  uint8x16_t m = LoadN(t[0] + off, n);
  for (int64_t k = 1; k < a.ntaps; ++k) m = Max<kS>(m, LoadN(t[k] + off, n));
  StoreN(y, m, n);
}

template <bool kS>
void MaxRow(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t b = 0;
    for (; b + 2 <= nfull; b += 2) {  // two independent chains
      const int64_t o = x0 + b * kV;
      uint8x16_t m0 = vld1q_u8(t[0] + o), m1 = vld1q_u8(t[0] + o + kV);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        m0 = Max<kS>(m0, vld1q_u8(t[k] + o));
        m1 = Max<kS>(m1, vld1q_u8(t[k] + o + kV));
      }
      vst1q_u8(y + b * kV, m0);
      vst1q_u8(y + b * kV + kV, m1);
    }
    for (; b < nfull; ++b) MaxBlock<kS>(a, t, x0 + b * kV, y + b * kV, kV);
    if (rem == 0) continue;
    if (c >= kV)
      MaxBlock<kS>(a, t, x0 + c - kV, y + c - kV, kV);
    else
      MaxBlock<kS>(a, t, x0, y, rem);
  }
}

// sum(x - x_zp) of n channels (<= kV) at `off` of every tap, averaged and
// requantized.
template <bool kS>
inline void AvgBlock(const PoolNhwcRowArgs& a, const uint8_t* const* t, int64_t off,
                     float32x4_t mult, uint8_t* y, int64_t n) {
  int32x4_t s32[4];
  for (int i = 0; i < 4; ++i) s32[i] = vdupq_n_s32(a.corr);
  for (int64_t k0 = 0; k0 < a.ntaps; k0 += 128) {
    const int64_t k1 = a.ntaps < k0 + 128 ? a.ntaps : k0 + 128;
    int16x8_t lo = vdupq_n_s16(0), hi = lo;
    for (int64_t k = k0; k < k1; ++k) {
      const uint8x16_t x = LoadN(t[k] + off, n);
      if (kS) {
        lo = vaddw_s8(lo, vget_low_s8(vreinterpretq_s8_u8(x)));
        hi = vaddw_high_s8(hi, vreinterpretq_s8_u8(x));
      } else {  // 128 * 255 < 2^15: the u16 sums are valid int16
        lo = vreinterpretq_s16_u16(vaddw_u8(vreinterpretq_u16_s16(lo), vget_low_u8(x)));
        hi = vreinterpretq_s16_u16(vaddw_high_u8(vreinterpretq_u16_s16(hi), x));
      }
    }
    s32[0] = vaddw_s16(s32[0], vget_low_s16(lo));
    s32[1] = vaddw_high_s16(s32[1], lo);
    s32[2] = vaddw_s16(s32[2], vget_low_s16(hi));
    s32[3] = vaddw_high_s16(s32[3], hi);
  }
  const float32x4_t lo = vdupq_n_f32(float(a.lo - a.yzp)), hi = vdupq_n_f32(float(a.hi - a.yzp));
  const int32x4_t zp = vdupq_n_s32(a.yzp);
  int16x4_t r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = RoundClamp4(vmulq_f32(vcvtq_f32_s32(s32[i]), mult), lo, hi, zp);
  StoreN(y,
         vcombine_u8(vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(r[0], r[1]))),
                     vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(r[2], r[3])))),
         n);
}

template <bool kS>
void AvgRow(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const float32x4_t mult = vdupq_n_f32(a.mult[px]);
    const int64_t x0 = a.xoff + px * a.pix_step;
    for (int64_t b = 0; b < nfull; ++b) AvgBlock<kS>(a, t, x0 + b * kV, mult, y + b * kV, kV);
    if (rem == 0) continue;
    if (c >= kV)
      AvgBlock<kS>(a, t, x0 + c - kV, mult, y + c - kV, kV);
    else
      AvgBlock<kS>(a, t, x0, mult, y, rem);
  }
}

// Float: 4 channels per vector. Max: the reference's step ("x > m or x is
// NaN" selects x) as a compare and a bit select; the average widens each tap
// to double (two float64x2 per vector), adds in tap order, divides in double
// and rounds to float once. The last C % 4 channels go through scalar code.
inline float32x4_t MaxStep4(float32x4_t m, float32x4_t x) {
  const uint32x4_t take = vorrq_u32(vcgtq_f32(x, m), vmvnq_u32(vceqq_f32(x, x)));
  return vbslq_f32(take, x, m);
}

inline const float* TapF(const uint8_t* tap, int64_t off) {
  return reinterpret_cast<const float*>(tap + off);
}

void MaxRowF32(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t i = 0;
    for (; i + 8 <= c; i += 8) {
      const float* p = TapF(t[0], x0) + i;
      float32x4_t m0 = vld1q_f32(p), m1 = vld1q_f32(p + 4);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        m0 = MaxStep4(m0, vld1q_f32(q));
        m1 = MaxStep4(m1, vld1q_f32(q + 4));
      }
      vst1q_f32(y + i, m0);
      vst1q_f32(y + i + 4, m1);
    }
    for (; i + 4 <= c; i += 4) {
      float32x4_t m = vld1q_f32(TapF(t[0], x0) + i);
      for (int64_t k = 1; k < a.ntaps; ++k) m = MaxStep4(m, vld1q_f32(TapF(t[k], x0) + i));
      vst1q_f32(y + i, m);
    }
    for (; i < c; ++i) {
      float m = TapF(t[0], x0)[i];
      for (int64_t k = 1; k < a.ntaps; ++k) {
        const float v = TapF(t[k], x0)[i];
        if (v > m || v != v) m = v;
      }
      y[i] = m;
    }
  }
}

void AvgRowF32(const PoolNhwcRowArgs& a) {
  const int64_t c = a.c;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    float* y = reinterpret_cast<float*>(a.y + px * a.ystride);
    const int64_t x0 = a.xoff + px * a.pix_step;
    if (!(a.div[px] > 0)) {  // no tap counted: 0, as the reference
      for (int64_t i = 0; i < c; ++i) y[i] = 0.f;
      continue;
    }
    const double d = double(a.div[px]);
    const float64x2_t div = vdupq_n_f64(d);
    int64_t i = 0;
    for (; i + 8 <= c; i += 8) {
      float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t k = 0; k < a.ntaps; ++k) {
        const float* q = TapF(t[k], x0) + i;
        const float32x4_t v0 = vld1q_f32(q), v1 = vld1q_f32(q + 4);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v0)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(v0));
        s2 = vaddq_f64(s2, vcvt_f64_f32(vget_low_f32(v1)));
        s3 = vaddq_f64(s3, vcvt_high_f64_f32(v1));
      }
      vst1q_f32(y + i, vcvt_high_f32_f64(vcvt_f32_f64(vdivq_f64(s0, div)), vdivq_f64(s1, div)));
      vst1q_f32(y + i + 4, vcvt_high_f32_f64(vcvt_f32_f64(vdivq_f64(s2, div)), vdivq_f64(s3, div)));
    }
    for (; i < c; ++i) {
      double s = 0.0;
      for (int64_t k = 0; k < a.ntaps; ++k) s += double(TapF(t[k], x0)[i]);
      y[i] = float(s / d);
    }
  }
}

}  // namespace

extern const PoolNhwcKernels kPoolNhwcNeon;
constexpr PoolNhwcKernels kPoolNhwcNeon = {MaxRow<true>,  MaxRow<false>, AvgRow<true>,
                                           AvgRow<false>, MaxRowF32,     AvgRowF32};

}  // namespace kernels
}  // namespace qfold
