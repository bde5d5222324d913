// Armv8.0 NEON channels-last depthwise row kernel (dwconv_nhwc_s8.h), 16
// channels per block. The weights are packed as int16 pairs (w[t0] - w_zp,
// w[t1] - w_zp) per channel in channel order; ld2 splits a block's pairs into
// the two taps' vectors. The two input rows are widened to int16 (sxtl for
// int8, uxtl for uint8: raw x, the x_zp term is in the bias) and smlal/smlal2
// accumulate the products exactly in int32, wrapping like the reference.
// Per tap pair of 16 channels: 2 loads + 4 widenings of x, 2 ld2 of weights,
// 8 smlal (4 MACs each).
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/dwconv_nhwc_s8.h"
#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kV = 16;

// The first n (< kV) channels through a zeroed copy: no reads past them.
template <bool kS>
inline void Widen(const uint8_t* p, int64_t n, int16x8_t& lo, int16x8_t& hi) {
  uint8x16_t b;
  if (n >= kV) {
    b = vld1q_u8(p);
  } else {
    uint8_t buf[kV] = {};
    std::memcpy(buf, p, size_t(n));
    b = vld1q_u8(buf);
  }
  if (kS) {
    const int8x16_t s = vreinterpretq_s8_u8(b);
    lo = vmovl_s8(vget_low_s8(s));
    hi = vmovl_high_s8(s);
  } else {
    lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(b)));
    hi = vreinterpretq_s16_u16(vmovl_high_u8(b));
  }
}

// One block: channels [off, off + n) of every tap (n <= kV), packed block b,
// results to channel yo of the output row. kNp > 0: the pair count, unrolled.
template <bool kS, bool kF, int kNp>
void Block(const DwNhwcRowArgs& a, const uint8_t* const* t, int64_t off, int64_t b, int64_t n,
           int64_t yo) {
  const int np = kNp > 0 ? kNp : a.np;
  int32x4_t acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = vld1q_s32(a.bias + b * kV + 4 * i);
  const int16_t* w = a.w + b * int64_t(np) * 2 * kV;
  for (int p = 0; p < np; ++p, w += 2 * kV) {
    int16x8_t x0l, x0h, x1l, x1h;
    Widen<kS>(t[2 * p] + off, n, x0l, x0h);
    Widen<kS>(t[2 * p + 1] + off, n, x1l, x1h);
    const int16x8x2_t wl = vld2q_s16(w), wh = vld2q_s16(w + kV);  // [0]: tap t0, [1]: t1
    acc[0] = vmlal_s16(acc[0], vget_low_s16(x0l), vget_low_s16(wl.val[0]));
    acc[1] = vmlal_high_s16(acc[1], x0l, wl.val[0]);
    acc[2] = vmlal_s16(acc[2], vget_low_s16(x0h), vget_low_s16(wh.val[0]));
    acc[3] = vmlal_high_s16(acc[3], x0h, wh.val[0]);
    acc[0] = vmlal_s16(acc[0], vget_low_s16(x1l), vget_low_s16(wl.val[1]));
    acc[1] = vmlal_high_s16(acc[1], x1l, wl.val[1]);
    acc[2] = vmlal_s16(acc[2], vget_low_s16(x1h), vget_low_s16(wh.val[1]));
    acc[3] = vmlal_high_s16(acc[3], x1h, wh.val[1]);
  }
  const float* m = a.mult + b * kV;
  if (kF) {
    const float32x4_t lo = vdupq_n_f32(a.flo), hi = vdupq_n_f32(a.fhi);
    float out[kV];
    for (int i = 0; i < 4; ++i)
      vst1q_f32(out + 4 * i, Dequant4(acc[i], vld1q_f32(m + 4 * i),
                                      vld1q_f32(a.fbias + b * kV + 4 * i), lo, hi));
    std::memcpy(a.yf + yo, out, size_t(n) * sizeof(float));
    return;
  }
  const float32x4_t lo = vdupq_n_f32(float(a.lo - a.yzp)), hi = vdupq_n_f32(float(a.hi - a.yzp));
  const int32x4_t zp = vdupq_n_s32(a.yzp);
  int16x4_t r[4];
  for (int i = 0; i < 4; ++i) r[i] = Requant4(acc[i], vld1q_f32(m + 4 * i), lo, hi, zp);
  const uint8x16_t bytes = vcombine_u8(vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(r[0], r[1]))),
                                       vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(r[2], r[3]))));
  if (n >= kV) {
    vst1q_u8(a.y + yo, bytes);
  } else {
    uint8_t out[kV];
    vst1q_u8(out, bytes);
    std::memcpy(a.y + yo, out, size_t(n));
  }
}

template <bool kS, bool kF, int kNp>
void RowImpl(const DwNhwcRowArgs& a) {
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t sh = px * a.pix_step, y = px * c;
    for (int64_t b = 0; b < nfull; ++b) Block<kS, kF, kNp>(a, t, sh + b * kV, b, kV, y + b * kV);
    if (rem == 0) continue;
    if (c >= kV)  // the packed overlap block at c - kV (overlap_tail)
      Block<kS, kF, kNp>(a, t, sh + c - kV, nfull, kV, y + c - kV);
    else
      Block<kS, kF, kNp>(a, t, sh, 0, rem, y);
  }
}

template <bool kS, bool kF>
void RowPairs(const DwNhwcRowArgs& a) {
  switch (a.np) {
    case 1:  // 1x1, 1x2, 2x1
      return RowImpl<kS, kF, 1>(a);
    case 2:  // 1x3, 3x1, 2x2
      return RowImpl<kS, kF, 2>(a);
    case 5:  // 3x3
      return RowImpl<kS, kF, 5>(a);
    case 13:  // 5x5
      return RowImpl<kS, kF, 13>(a);
    default:
      return RowImpl<kS, kF, 0>(a);
  }
}

void Row(const DwNhwcRowArgs& a) {
  if (a.yf)
    a.x_signed ? RowPairs<true, true>(a) : RowPairs<false, true>(a);
  else
    a.x_signed ? RowPairs<true, false>(a) : RowPairs<false, false>(a);
}

}  // namespace

extern const DwConvNhwcKernels kDwConvNhwcNeon;
constexpr DwConvNhwcKernels kDwConvNhwcNeon = {kV, /*lane_pairs=*/false, /*overlap_tail=*/true,
                                               Row};

}  // namespace kernels
}  // namespace qfold
