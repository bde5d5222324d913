// NEON depthwise kernel (dwconv_s8.h) for aarch64: the general kind only
// (phase-split rows cover every stride and dilation). Each tap's 16 int16
// inputs are multiplied by the tap's int16 weight and accumulated into int32
// lanes with smlal/smlal2 (exact products, wrapping adds as in the
// reference); requantization uses fcvtns, which rounds half to even.
#include <arm_neon.h>

#include <cstring>

#include "kernels/dwconv_s8.h"

namespace qfold {
namespace kernels {
namespace {

// Float clamp to integer bounds, NaN -> zero point (see gemm_s8_avx512vnni.cc).
inline int32x4_t Requant(int32x4_t acc, float32x4_t mult, float32x4_t lo, float32x4_t hi,
                         int32x4_t yzp) {
  float32x4_t f = vmulq_f32(vcvtq_f32_s32(acc), mult);
  f = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(f), vceqq_f32(f, f)));
  f = vminq_f32(vmaxq_f32(f, lo), hi);
  return vaddq_s32(vcvtnq_s32_f32(f), yzp);
}

// Low bytes of 8 int32 lanes (values in [-128, 255]).
inline uint8x8_t Bytes8(int32x4_t a, int32x4_t b) {
  return vreinterpret_u8_s8(vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
}

inline void Tap(const int16_t* s, int16_t w, int32x4_t (&acc)[4]) {
  const int16x8_t x0 = vld1q_s16(s), x1 = vld1q_s16(s + 8);
  acc[0] = vmlal_n_s16(acc[0], vget_low_s16(x0), w);
  acc[1] = vmlal_high_n_s16(acc[1], x0, w);
  acc[2] = vmlal_n_s16(acc[2], vget_low_s16(x1), w);
  acc[3] = vmlal_high_n_s16(acc[3], x1, w);
}

// 16 outputs per step; kNp > 0: that many tap pairs (unrolled), 0: a.np.
template <int kNp>
void GeneralImpl(const DwPlaneArgs& a) {
  const int np = kNp > 0 ? kNp : a.np;
  const float32x4_t mult = vdupq_n_f32(a.mult);
  const float32x4_t lo = vdupq_n_f32(float(a.lo - a.yzp)), hi = vdupq_n_f32(float(a.hi - a.yzp));
  const int32x4_t yzp = vdupq_n_s32(a.yzp), bias = vdupq_n_s32(a.bias);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 16) {
      int32x4_t acc[4] = {bias, bias, bias, bias};
      for (int p = 0; p < np; ++p) {
        const uint32_t wp = uint32_t(a.w[p]);
        const int16_t w0 = int16_t(uint16_t(wp)), w1 = int16_t(uint16_t(wp >> 16));
        Tap(row + a.off[2 * p] + i, w0, acc);
        if (w1) Tap(row + a.off[2 * p + 1] + i, w1, acc);  // 0: lone last tap (or a 0 weight)
      }
      if (a.y32) {  // ConvInteger: the sums, in order
        int32_t* y32 = a.y32 + oy * a.ow + i;
        if (a.ow - i >= 16) {
          for (int j = 0; j < 4; ++j) vst1q_s32(y32 + 4 * j, acc[j]);
        } else {
          int32_t tmp[16];
          for (int j = 0; j < 4; ++j) vst1q_s32(tmp + 4 * j, acc[j]);
          std::memcpy(y32, tmp, size_t(a.ow - i) * sizeof(int32_t));
        }
        continue;
      }
      const uint8x16_t b = vcombine_u8(
          Bytes8(Requant(acc[0], mult, lo, hi, yzp), Requant(acc[1], mult, lo, hi, yzp)),
          Bytes8(Requant(acc[2], mult, lo, hi, yzp), Requant(acc[3], mult, lo, hi, yzp)));
      if (a.ow - i >= 16) {
        vst1q_u8(y + i, b);
      } else {
        uint8_t tmp[16];
        vst1q_u8(tmp, b);
        std::memcpy(y + i, tmp, size_t(a.ow - i));
      }
    }
  }
}

void General(const DwPlaneArgs& a) {
  switch (a.np) {
    case 2:  // 1x3, 3x1, 2x2
      return GeneralImpl<2>(a);
    case 5:  // 3x3
      return GeneralImpl<5>(a);
    case 13:  // 5x5
      return GeneralImpl<13>(a);
    default:
      return GeneralImpl<0>(a);
  }
}

void WidenRow(const uint8_t* src, int64_t n, bool is_signed, int32_t xzp, int16_t* dst) {
  const int16x8_t z = vdupq_n_s16(int16_t(xzp));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    int16x8_t lo, hi;
    if (is_signed) {
      const int8x16_t b = vld1q_s8(reinterpret_cast<const int8_t*>(src + i));
      lo = vmovl_s8(vget_low_s8(b));
      hi = vmovl_high_s8(b);
    } else {
      const uint8x16_t b = vld1q_u8(src + i);
      lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b)));
      hi = vreinterpretq_s16_u16(vmovl_high_u8(b));
    }
    vst1q_s16(dst + i, vsubq_s16(lo, z));
    vst1q_s16(dst + i + 8, vsubq_s16(hi, z));
  }
  for (; i < n; ++i)
    dst[i] = int16_t((is_signed ? int32_t(int8_t(src[i])) : int32_t(src[i])) - xzp);
}

void Split2(const int16_t* src, int64_t n, int16_t* even, int16_t* odd) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int16x8x2_t v = vld2q_s16(src + 2 * j);
    vst1q_s16(even + j, v.val[0]);
    vst1q_s16(odd + j, v.val[1]);
  }
  for (; j < n; ++j) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

}  // namespace

extern const DwConvS8Kernels kDwConvS8Neon;
const DwConvS8Kernels kDwConvS8Neon = {"neon", WidenRow, Split2, General, nullptr, nullptr};

}  // namespace kernels
}  // namespace qfold
