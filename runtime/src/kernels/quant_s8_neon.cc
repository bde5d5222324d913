// NEON kernels of quant_s8.h (aarch64; only baseline Advanced SIMD is used,
// the file name picks the build flags). fcvtns rounds half to even like
// nearbyint, saturates out-of-range values and turns NaN into 0, so the
// saturating + zp and the clamp give exactly the reference result.
#include <arm_neon.h>

#include "kernels/quant_s8.h"
#include "kernels/quant_s8_ref.h"

namespace qfold {
namespace kernels {
namespace {

// q rounded half to even (NaN -> 0), + zp, clamped to [lo, hi].
inline int32x4_t Round4(float32x4_t q, int32x4_t zp, int32x4_t lo, int32x4_t hi) {
  const int32x4_t r = vqaddq_s32(vcvtnq_s32_f32(q), zp);
  return vminq_s32(vmaxq_s32(r, lo), hi);
}

inline int32x4_t Quantize4(float32x4_t x, float32x4_t s, int32x4_t zp, int32x4_t lo, int32x4_t hi) {
  return Round4(vdivq_f32(x, s), zp, lo, hi);
}

// 8 in-range int32 values to 8 bytes.
template <bool kSigned>
inline void Store8(void* y, int64_t i, int32x4_t a, int32x4_t b) {
  const int16x8_t w = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
  uint8_t* p = static_cast<uint8_t*>(y) + i;
  if (kSigned)
    vst1_s8(reinterpret_cast<int8_t*>(p), vqmovn_s16(w));
  else
    vst1_u8(p, vqmovun_s16(w));
}

// 8 bytes as two float vectors (exact).
template <bool kSigned>
inline void Load8(const void* x, int64_t i, float32x4_t* lo, float32x4_t* hi) {
  const uint8_t* p = static_cast<const uint8_t*>(x) + i;
  int16x8_t w;
  if (kSigned)
    w = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(p)));
  else
    w = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p)));
  *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
  *hi = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)));
}

template <bool kSigned, bool kPerElem>
void QuantizeT(const float* x, void* y, int64_t n, const float* scale, const float* zpf, int32_t lo,
               int32_t hi) {
  const int32x4_t lov = vdupq_n_s32(lo), hiv = vdupq_n_s32(hi);
  float32x4_t s0 = vdupq_n_f32(scale[0]), s1 = s0;
  int32x4_t z0 = vdupq_n_s32(int32_t(zpf[0])), z1 = z0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (kPerElem) {
      s0 = vld1q_f32(scale + i);
      s1 = vld1q_f32(scale + i + 4);
      z0 = vcvtq_s32_f32(vld1q_f32(zpf + i));
      z1 = vcvtq_s32_f32(vld1q_f32(zpf + i + 4));
    }
    Store8<kSigned>(y, i, Quantize4(vld1q_f32(x + i), s0, z0, lov, hiv),
                    Quantize4(vld1q_f32(x + i + 4), s1, z1, lov, hiv));
  }
  QS8QuantizeScalar(x, y, i, n, scale, zpf, kPerElem, lo, hi);
}

void Quantize(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
              bool per_elem, int32_t lo, int32_t hi, bool is_signed) {
  if (is_signed)
    per_elem ? QuantizeT<true, true>(x, y, n, scale, zpf, lo, hi)
             : QuantizeT<true, false>(x, y, n, scale, zpf, lo, hi);
  else
    per_elem ? QuantizeT<false, true>(x, y, n, scale, zpf, lo, hi)
             : QuantizeT<false, false>(x, y, n, scale, zpf, lo, hi);
}

template <bool kSigned, bool kPerElem>
void DequantizeT(const void* x, float* y, int64_t n, const float* scale, const float* zpf) {
  float32x4_t s0 = vdupq_n_f32(scale[0]), s1 = s0, z0 = vdupq_n_f32(zpf[0]), z1 = z0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (kPerElem) {
      s0 = vld1q_f32(scale + i);
      s1 = vld1q_f32(scale + i + 4);
      z0 = vld1q_f32(zpf + i);
      z1 = vld1q_f32(zpf + i + 4);
    }
    float32x4_t a, b;
    Load8<kSigned>(x, i, &a, &b);
    // x - zp is exact; separate sub and mul as in float(x - zp) * scale.
    vst1q_f32(y + i, vmulq_f32(vsubq_f32(a, z0), s0));
    vst1q_f32(y + i + 4, vmulq_f32(vsubq_f32(b, z1), s1));
  }
  QS8DequantizeScalar(x, y, i, n, scale, zpf, kPerElem, kSigned);
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
  const float32x4_t sa = vdupq_n_f32(p.a_factor()), za = vdupq_n_f32(float(p.a_zp));
  const float32x4_t sb = vdupq_n_f32(p.b_factor()), zb = vdupq_n_f32(float(p.b_zp));
  const float32x4_t sm = vdupq_n_f32(p.mul_factor());
  const int32x4_t zc = vdupq_n_s32(p.c_zp), lo = vdupq_n_s32(p.lo), hi = vdupq_n_s32(p.hi);
  const float32x4_t va0 = vdupq_n_f32(float(QS8Load(a, 0, kSigned) - p.a_zp) * p.a_factor());
  const float32x4_t vb0 = vdupq_n_f32(float(QS8Load(b, 0, kSigned) - p.b_zp) * p.b_factor());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t a0 = va0, a1 = va0, b0 = vb0, b1 = vb0;
    if (kA) {
      Load8<kSigned>(a, i, &a0, &a1);
      a0 = vmulq_f32(vsubq_f32(a0, za), sa);
      a1 = vmulq_f32(vsubq_f32(a1, za), sa);
    }
    if (kB) {
      Load8<kSigned>(b, i, &b0, &b1);
      b0 = vmulq_f32(vsubq_f32(b0, zb), sb);
      b1 = vmulq_f32(vsubq_f32(b1, zb), sb);
    }
    const float32x4_t v0 = kMul ? vmulq_f32(vmulq_f32(a0, b0), sm) : vaddq_f32(a0, b0);
    const float32x4_t v1 = kMul ? vmulq_f32(vmulq_f32(a1, b1), sm) : vaddq_f32(a1, b1);
    Store8<kSigned>(y, i, Round4(v0, zc, lo, hi), Round4(v1, zc, lo, hi));
  }
  QS8BinaryScalar(p, a, kA ? 1 : 0, b, kB ? 1 : 0, y, i, n);
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

// 256-entry lookup: tbl over the first 64 entries, then tbx (which keeps
// lanes whose index is out of range) over the next three 64-entry quarters.
void Lookup(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n) {
  const uint8x16x4_t t0 = vld1q_u8_x4(table), t1 = vld1q_u8_x4(table + 64);
  const uint8x16x4_t t2 = vld1q_u8_x4(table + 128), t3 = vld1q_u8_x4(table + 192);
  const uint8x16_t q = vdupq_n_u8(64);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint8x16_t idx = vld1q_u8(x + i);
    uint8x16_t r = vqtbl4q_u8(t0, idx);
    idx = vsubq_u8(idx, q);
    r = vqtbx4q_u8(r, t1, idx);
    idx = vsubq_u8(idx, q);
    r = vqtbx4q_u8(r, t2, idx);
    idx = vsubq_u8(idx, q);
    r = vqtbx4q_u8(r, t3, idx);
    vst1q_u8(y + i, r);
  }
  QS8LookupScalar(x, table, y, i, n);
}

// 16-bit elements: the same quantization, narrowed to int16/uint16 (the
// values are already within the type's range, so the narrowing is exact).
template <bool kSigned, bool kPerElem>
void Quantize16T(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                 int32_t lo, int32_t hi) {
  const int32x4_t lov = vdupq_n_s32(lo), hiv = vdupq_n_s32(hi);
  float32x4_t s0 = vdupq_n_f32(scale[0]);
  int32x4_t z0 = vdupq_n_s32(int32_t(zpf[0]));
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    if (kPerElem) {
      s0 = vld1q_f32(scale + i);
      z0 = vcvtq_s32_f32(vld1q_f32(zpf + i));
    }
    const int32x4_t q = Quantize4(vld1q_f32(x + i), s0, z0, lov, hiv);
    if (kSigned)
      vst1_s16(static_cast<int16_t*>(y) + i, vqmovn_s32(q));
    else
      vst1_u16(static_cast<uint16_t*>(y) + i, vqmovun_s32(q));
  }
  for (; i < n; ++i) {
    const int64_t p = kPerElem ? i : 0;
    const int32_t v = QS8RoundAddSaturate(x[i] / scale[p], int32_t(zpf[p]), lo, hi);
    static_cast<uint16_t*>(y)[i] = uint16_t(v);  // two's complement: int16 too
  }
}

void Quantize16(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                bool per_elem, int32_t lo, int32_t hi, bool is_signed) {
  if (is_signed)
    per_elem ? Quantize16T<true, true>(x, y, n, scale, zpf, lo, hi)
             : Quantize16T<true, false>(x, y, n, scale, zpf, lo, hi);
  else
    per_elem ? Quantize16T<false, true>(x, y, n, scale, zpf, lo, hi)
             : Quantize16T<false, false>(x, y, n, scale, zpf, lo, hi);
}

template <bool kSigned, bool kPerElem>
void Dequantize16T(const void* x, float* y, int64_t n, const float* scale, const float* zpf) {
  float32x4_t s0 = vdupq_n_f32(scale[0]), z0 = vdupq_n_f32(zpf[0]);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    if (kPerElem) {
      s0 = vld1q_f32(scale + i);
      z0 = vld1q_f32(zpf + i);
    }
    const int32x4_t w =
        kSigned ? vmovl_s16(vld1_s16(static_cast<const int16_t*>(x) + i))
                : vreinterpretq_s32_u32(vmovl_u16(vld1_u16(static_cast<const uint16_t*>(x) + i)));
    // x - zp is exact in float, so this is float(x - zp) * scale.
    vst1q_f32(y + i, vmulq_f32(vsubq_f32(vcvtq_f32_s32(w), z0), s0));
  }
  for (; i < n; ++i) {
    const int64_t p = kPerElem ? i : 0;
    const int32_t v = kSigned ? int32_t(static_cast<const int16_t*>(x)[i])
                              : int32_t(static_cast<const uint16_t*>(x)[i]);
    y[i] = float(v - int32_t(zpf[p])) * scale[p];
  }
}

void Dequantize16(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                  bool per_elem, bool is_signed) {
  if (is_signed)
    per_elem ? Dequantize16T<true, true>(x, y, n, scale, zpf)
             : Dequantize16T<true, false>(x, y, n, scale, zpf);
  else
    per_elem ? Dequantize16T<false, true>(x, y, n, scale, zpf)
             : Dequantize16T<false, false>(x, y, n, scale, zpf);
}

inline int32_t Load16(const void* p, int64_t i, bool is_signed) {
  return is_signed ? int32_t(static_cast<const int16_t*>(p)[i])
                   : int32_t(static_cast<const uint16_t*>(p)[i]);
}

inline float32x4_t Load16x4(const void* p, int64_t i, bool is_signed) {
  const int32x4_t w =
      is_signed ? vmovl_s16(vld1_s16(static_cast<const int16_t*>(p) + i))
                : vreinterpretq_s32_u32(vmovl_u16(vld1_u16(static_cast<const uint16_t*>(p) + i)));
  return vcvtq_f32_s32(w);
}

// The 16-bit QLinearAdd/QLinearMul: the reference's float operations, 4 lanes.
void Binary16(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
              void* y, int64_t n) {
  const bool sg = p.is_signed;
  const float fa = p.a_factor(), fb = p.b_factor();
  const float32x4_t sa = vdupq_n_f32(fa), za = vdupq_n_f32(float(p.a_zp));
  const float32x4_t sb = vdupq_n_f32(fb), zb = vdupq_n_f32(float(p.b_zp));
  const float32x4_t sm = vdupq_n_f32(p.mul_factor());
  const int32x4_t zc = vdupq_n_s32(p.c_zp), lo = vdupq_n_s32(p.lo), hi = vdupq_n_s32(p.hi);
  const float32x4_t va0 = vdupq_n_f32(float(Load16(a, 0, sg) - p.a_zp) * fa);
  const float32x4_t vb0 = vdupq_n_f32(float(Load16(b, 0, sg) - p.b_zp) * fb);
  int64_t i = 0;
  if (a_step || b_step)
    for (; i + 4 <= n; i += 4) {
      const float32x4_t va = a_step ? vmulq_f32(vsubq_f32(Load16x4(a, i, sg), za), sa) : va0;
      const float32x4_t vb = b_step ? vmulq_f32(vsubq_f32(Load16x4(b, i, sg), zb), sb) : vb0;
      const float32x4_t v = p.mul ? vmulq_f32(vmulq_f32(va, vb), sm) : vaddq_f32(va, vb);
      const int32x4_t q = Round4(v, zc, lo, hi);
      if (sg)
        vst1_s16(static_cast<int16_t*>(y) + i, vqmovn_s32(q));
      else
        vst1_u16(static_cast<uint16_t*>(y) + i, vqmovun_s32(q));
    }
  for (; i < n; ++i) {
    const float va = float(Load16(a, i * a_step, sg) - p.a_zp) * fa;
    const float vb = float(Load16(b, i * b_step, sg) - p.b_zp) * fb;
    static_cast<uint16_t*>(y)[i] =
        uint16_t(QS8RoundAddSaturate(p.Combine(va, vb), p.c_zp, p.lo, p.hi));
  }
}

}  // namespace

extern const QuantS8Kernels kQuantS8Neon;
// No per-channel lookup: without a byte gather, the caller's scalar loop is
// as fast as any NEON form.
const QuantS8Kernels kQuantS8Neon = {Quantize,     Dequantize, Binary,  Lookup, Quantize16,
                                     Dequantize16, Binary16,   nullptr, nullptr};

}  // namespace kernels
}  // namespace qfold
