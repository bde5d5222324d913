// Armv8.0 NEON microkernels of the a16w8 channels-last convolution
// (conv_a16_nhwc.h), the counterparts of the AVX2 ones: smlal by a lane
// (vmlal_lane_s16) adds a16 x w8 products into int32, exact over the same
// `chunk` of pairs as vpmaddwd; longer reductions add the int32 chunk sums
// into double. Requantization in double (float64x2), as the reference.
#include <arm_neon.h>

#include <cstring>

#include "kernels/conv_a16_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

// Requantizes 16 sums (double) of one row and stores `cols` of them as o.type.
inline void Requant16(const double* sum, const A16Output& o, void* dst, int cols) {
  const float64x2_t zp = vdupq_n_f64(o.zp), lo = vdupq_n_f64(o.lo), hi = vdupq_n_f64(o.hi);
  int32_t q[16];
  for (int i = 0; i < 16; i += 2) {
    float64x2_t v =
        vmulq_f64(vaddq_f64(vld1q_f64(sum + i), vld1q_f64(o.corr + i)), vld1q_f64(o.mult + i));
    v = vrndnq_f64(v);  // half to even, like nearbyint
    v = vminq_f64(vmaxq_f64(vaddq_f64(v, zp), lo), hi);
    vst1_s32(q + i, vmovn_s64(vcvtq_s64_f64(v)));
  }
  // In range for the output type after the clamp: narrowing keeps the value.
  switch (o.type) {
    case A16Output::kS8:
    case A16Output::kU8: {
      uint8_t b[16];
      for (int i = 0; i < 16; ++i) b[i] = uint8_t(q[i]);
      std::memcpy(dst, b, size_t(cols));
      return;
    }
    default: {
      uint16_t h[16];
      for (int i = 0; i < 16; ++i) h[i] = uint16_t(q[i]);
      std::memcpy(dst, h, size_t(cols) * 2);
      return;
    }
  }
}

inline void Widen(const int32x4_t (&acc)[4], double* out) {
  for (int i = 0; i < 4; ++i) {
    vst1q_f64(out + 4 * i, vcvtq_f64_s64(vmovl_s32(vget_low_s32(acc[i]))));
    vst1q_f64(out + 4 * i + 2, vcvtq_f64_s64(vmovl_high_s32(acc[i])));
  }
}

template <int R>
void GemmRows(const int16_t* const* a, const int16_t* panel, int64_t kpairs, int64_t chunk,
              const A16Output& o, void* const* y, int cols) {
  // acc[r][i]: columns 4i..4i+3 of row r.
  int32x4_t acc[R][4];
  auto reduce = [&](int64_t k0, int64_t k1) {
    // Named accumulators in the loop (an array there stayed in memory: GCC
    // stored the accumulators every step), copied to acc after it.
    int32x4_t c00 = vdupq_n_s32(0), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00;
    int32x4_t c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
    int32x4_t c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    for (int64_t kk = k0; kk < k1; ++kk) {
      // [16][2] int16: val[0] the first of each column's pair, val[1] the second.
      const int16x8x2_t b0 = vld2q_s16(panel + kk * 32);
      const int16x8x2_t b1 = vld2q_s16(panel + kk * 32 + 16);
#define QFOLD_ROW(r)                                                               \
  if constexpr (r < R) {                                                           \
    int32_t pair;                                                                  \
    std::memcpy(&pair, a[r] + 2 * kk, 4);                                          \
    const int16x4_t av = vreinterpret_s16_s32(vdup_n_s32(pair)); /* a0 a1 a0 a1 */ \
    c##r##0 = vmlal_lane_s16(c##r##0, vget_low_s16(b0.val[0]), av, 0);             \
    c##r##0 = vmlal_lane_s16(c##r##0, vget_low_s16(b0.val[1]), av, 1);             \
    c##r##1 = vmlal_lane_s16(c##r##1, vget_high_s16(b0.val[0]), av, 0);            \
    c##r##1 = vmlal_lane_s16(c##r##1, vget_high_s16(b0.val[1]), av, 1);            \
    c##r##2 = vmlal_lane_s16(c##r##2, vget_low_s16(b1.val[0]), av, 0);             \
    c##r##2 = vmlal_lane_s16(c##r##2, vget_low_s16(b1.val[1]), av, 1);             \
    c##r##3 = vmlal_lane_s16(c##r##3, vget_high_s16(b1.val[0]), av, 0);            \
    c##r##3 = vmlal_lane_s16(c##r##3, vget_high_s16(b1.val[1]), av, 1);            \
  }
      QFOLD_ROW(0)
      QFOLD_ROW(1)
      QFOLD_ROW(2)
      QFOLD_ROW(3)
#undef QFOLD_ROW
    }
    const int32x4_t all[4][4] = {
        {c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}};
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) acc[r][i] = all[r][i];
  };
  double sum[R][16];
  if (chunk >= kpairs) {
    reduce(0, kpairs);
    for (int r = 0; r < R; ++r) Widen(acc[r], sum[r]);
  } else {
    // Long reductions: exact int32 chunks summed in double.
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 16; ++i) sum[r][i] = 0;
    for (int64_t k0 = 0; k0 < kpairs; k0 += chunk) {
      reduce(k0, k0 + chunk < kpairs ? k0 + chunk : kpairs);
      for (int r = 0; r < R; ++r) {
        double part[16];
        Widen(acc[r], part);
        for (int i = 0; i < 16; ++i) sum[r][i] += part[i];
      }
    }
  }
  for (int r = 0; r < R; ++r) Requant16(sum[r], o, y[r], cols);
}

void A16GemmNeon(const int16_t* const* a, int rows, const int16_t* panel, int64_t kpairs,
                 int64_t chunk, const A16Output& o, void* const* y, int cols) {
  switch (rows) {
    case 4:
      return GemmRows<4>(a, panel, kpairs, chunk, o, y, cols);
    case 3:
      return GemmRows<3>(a, panel, kpairs, chunk, o, y, cols);
    case 2:
      return GemmRows<2>(a, panel, kpairs, chunk, o, y, cols);
    default:
      return GemmRows<1>(a, panel, kpairs, chunk, o, y, cols);
  }
}

// Depthwise, one output pixel, taps in pairs, 16 channels at a time. The
// weights are packed in the AVX2 kernel's order (its in-lane unpacks): per 16
// channels, pairs (first tap, second tap) of channels 0-3, 8-11, then 4-7,
// 12-15; vld2q splits each half into the two taps' weights.
void A16DepthwiseNeon(const void* const* taps, int64_t tap_pairs, const int16_t* w,
                      int64_t channels, bool flip, const A16Output& o, void* y) {
  const int16x8_t flipv = vdupq_n_s16(flip ? int16_t(-32768) : 0);
  const size_t elem = o.type == A16Output::kS8 || o.type == A16Output::kU8 ? 1 : 2;
  int16_t tail[2][16];
  const int64_t padded = (channels + 15) / 16 * 16;
  for (int64_t c0 = 0; c0 < channels; c0 += 16) {
    const int cols = int(channels - c0 < 16 ? channels - c0 : 16);
    int32x4_t acc[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int64_t tp = 0; tp < tap_pairs; ++tp) {
      const int16_t* t0 = static_cast<const int16_t*>(taps[2 * tp]) + c0;
      const int16_t* t1 = static_cast<const int16_t*>(taps[2 * tp + 1]) + c0;
      if (cols < 16) {  // the last channels: no reads past the row
        std::memcpy(tail[0], t0, size_t(cols) * 2);
        std::memcpy(tail[1], t1, size_t(cols) * 2);
        t0 = tail[0];
        t1 = tail[1];
      }
      const int16x8_t a_lo = veorq_s16(vld1q_s16(t0), flipv);  // channels 0-7
      const int16x8_t a_hi = veorq_s16(vld1q_s16(t0 + 8), flipv);
      const int16x8_t b_lo = veorq_s16(vld1q_s16(t1), flipv);
      const int16x8_t b_hi = veorq_s16(vld1q_s16(t1 + 8), flipv);
      const int16_t* wp = w + (tp * padded + c0) * 2;
      const int16x8x2_t w0 = vld2q_s16(wp);       // channels 0-3, 8-11
      const int16x8x2_t w1 = vld2q_s16(wp + 16);  // channels 4-7, 12-15
      acc[0] = vmlal_s16(acc[0], vget_low_s16(a_lo), vget_low_s16(w0.val[0]));
      acc[0] = vmlal_s16(acc[0], vget_low_s16(b_lo), vget_low_s16(w0.val[1]));
      acc[1] = vmlal_s16(acc[1], vget_high_s16(a_lo), vget_low_s16(w1.val[0]));
      acc[1] = vmlal_s16(acc[1], vget_high_s16(b_lo), vget_low_s16(w1.val[1]));
      acc[2] = vmlal_s16(acc[2], vget_low_s16(a_hi), vget_high_s16(w0.val[0]));
      acc[2] = vmlal_s16(acc[2], vget_low_s16(b_hi), vget_high_s16(w0.val[1]));
      acc[3] = vmlal_s16(acc[3], vget_high_s16(a_hi), vget_high_s16(w1.val[0]));
      acc[3] = vmlal_s16(acc[3], vget_high_s16(b_hi), vget_high_s16(w1.val[1]));
    }
    double sum[16];
    Widen(acc, sum);
    Requant16(sum, A16Output{o.type, o.corr + c0, o.mult + c0, o.zp, o.lo, o.hi},
              static_cast<uint8_t*>(y) + size_t(c0) * elem, cols);
  }
}

}  // namespace

extern const A16GemmFn kA16GemmNeon = A16GemmNeon;
extern const A16DepthwiseFn kA16DepthwiseNeon = A16DepthwiseNeon;

}  // namespace kernels
}  // namespace qfold
