// Armv8.0 NEON variant of the exact integer Winograd F(2x2, 3x3)
// (conv_nhwc_s8_winograd.h) for cores without dotprod (Cortex-A53/A55r0/
// A57/A72/A73): transforms 8 channels per vector in, 4 out, and the GEMM of
// one position. Its products are 16-bit like those of the direct sums
// there, whose smull + smull2 + 2 sadalp give 16 MACs in 4 instructions;
// here smlal + smlal2 give 8 in 2, on 16/36 of the products. 3-row tiles
// of one 8-channel panel: 24 accumulators (4 k-lanes of a channel each,
// summed by pairwise adds at the end), 4 weight vectors, the row.
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/conv_nhwc_s8_winograd.h"
#include "kernels/conv_nhwc_s8_winograd_impl.h"
#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

void InputNeon(const uint8_t* const* d, int64_t c, int64_t cp, uint8_t xmask, int32_t x_zp_u,
               int16_t* v, int64_t v_stride) {
  const uint8x8_t mask = vdup_n_u8(xmask);
  const int16x8_t zp = vdupq_n_s16(int16_t(x_zp_u));
  const int16x8_t zero = vdupq_n_s16(0);
  int64_t ch = 0;
  for (; ch + 8 <= c; ch += 8) {
    InputTile<int16x8_t>(
        [&](int i) {
          if (!d[i]) return zero;
          const uint8x8_t b = veor_u8(vld1_u8(d[i] + ch), mask);
          return vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(b)), zp);
        },
        [](int16x8_t a, int16x8_t b) { return vaddq_s16(a, b); },
        [](int16x8_t a, int16x8_t b) { return vsubq_s16(a, b); },
        [&](int xi, int16x8_t r) { vst1q_s16(v + xi * v_stride + ch, r); });
  }
  InputTail(d, ch, c, cp, xmask, x_zp_u, v, v_stride);
}

// The 4 sums A^T M A (times 4) of channels [ch, ch + 4).
inline void SumsNeon(const int32_t* m_sums, int64_t m_stride, int64_t ch, int32x4_t (&out)[4]) {
  OutputTile<int32x4_t>([&](int xi) { return vld1q_s32(m_sums + xi * m_stride + ch); },
                        [](int32x4_t a, int32x4_t b) { return vaddq_s32(a, b); },
                        [](int32x4_t a, int32x4_t b) { return vsubq_s32(a, b); }, out);
}

void OutputNeon(const int32_t* m_sums, int64_t m_stride, int64_t m, const int32_t* bias,
                const float* mult, int32_t yzp, int32_t lo, int32_t hi, uint8_t* const* y) {
  const float32x4_t flo = vdupq_n_f32(float(lo - yzp)), fhi = vdupq_n_f32(float(hi - yzp));
  const int32x4_t vzp = vdupq_n_s32(yzp);
  int64_t ch = 0;
  for (; ch + 4 <= m; ch += 4) {
    int32x4_t out[4];
    SumsNeon(m_sums, m_stride, ch, out);
    const int32x4_t b = vld1q_s32(bias + ch);
    const float32x4_t mu = vld1q_f32(mult + ch);
    for (int o = 0; o < 4; ++o) {
      if (!y[o]) continue;
      // Values within [-128, 255]: their low bytes.
      const int16x4_t q = Requant4(vaddq_s32(vshrq_n_s32(out[o], 2), b), mu, flo, fhi, vzp);
      uint8_t bytes[8];
      vst1_u8(bytes, vmovn_u16(vreinterpretq_u16_s16(vcombine_s16(q, q))));
      std::memcpy(y[o] + ch, bytes, 4);
    }
  }
  for (; ch < m; ++ch) OutputChannel(m_sums, m_stride, ch, bias, mult, yzp, lo, hi, y);
}

void OutputFloatNeon(const int32_t* m_sums, int64_t m_stride, int64_t m, const float* mult,
                     const float* bias, float lo, float hi, float* const* y) {
  const float32x4_t flo = vdupq_n_f32(lo), fhi = vdupq_n_f32(hi);
  int64_t ch = 0;
  for (; ch + 4 <= m; ch += 4) {
    int32x4_t out[4];
    SumsNeon(m_sums, m_stride, ch, out);
    const float32x4_t mu = vld1q_f32(mult + ch), b = vld1q_f32(bias + ch);
    for (int o = 0; o < 4; ++o)
      if (y[o]) vst1q_f32(y[o] + ch, Dequant4(vshrq_n_s32(out[o], 2), mu, b, flo, fhi));
  }
  for (; ch < m; ++ch) OutputChannelFloat(m_sums, m_stride, ch, mult, bias, lo, hi, y);
}

constexpr int kMr = 3;

void GemmNeon(const int16_t* v, int64_t rows, int64_t cp, const uint8_t* wb, int64_t cols,
              int32_t* out, int64_t ldo) {
  static_assert(kWinogradNr == 8, "4 weight vectors of 2 channels x 4 k");
  const int16_t* const w0 = reinterpret_cast<const int16_t*>(wb);
  const int64_t kc4 = cp / 4;
  for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const int64_t nrow = rows - r0 < kMr ? rows - r0 : kMr;
    const int16_t* a[kMr];
#pragma GCC unroll 4
    for (int r = 0; r < kMr; ++r) a[r] = v + (r0 + (r < nrow ? r : nrow - 1)) * cp;
    // acc[r][j]: channel j's sums over k = 4q + lane.
    int32x4_t acc[kMr][8];
#pragma GCC unroll 4
    for (int r = 0; r < kMr; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) acc[r][j] = vdupq_n_s32(0);
    const int16_t* w = w0;
    for (int64_t q = 0; q < kc4; ++q, w += 32) {
      int16x8_t wv[4];
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) wv[u] = vld1q_s16(w + 8 * u);
#pragma GCC unroll 4
      for (int r = 0; r < kMr; ++r) {
        const int16x4_t x = vld1_s16(a[r] + 4 * q);
        const int16x8_t xx = vcombine_s16(x, x);
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          acc[r][2 * u] = vmlal_s16(acc[r][2 * u], vget_low_s16(wv[u]), x);
          acc[r][2 * u + 1] = vmlal_high_s16(acc[r][2 * u + 1], wv[u], xx);
        }
      }
    }
    // Constant row indices (unrolled), so acc stays in registers.
#pragma GCC unroll 4
    for (int r = 0; r < kMr; ++r) {
      if (r >= nrow) continue;
      const int32x4_t lo4 =
          vpaddq_s32(vpaddq_s32(acc[r][0], acc[r][1]), vpaddq_s32(acc[r][2], acc[r][3]));
      const int32x4_t hi4 =
          vpaddq_s32(vpaddq_s32(acc[r][4], acc[r][5]), vpaddq_s32(acc[r][6], acc[r][7]));
      int32_t* o = out + (r0 + r) * ldo;
      if (cols >= 8) {  // whole vectors: a variable-length copy would be a call
        vst1q_s32(o, lo4);
        vst1q_s32(o + 4, hi4);
      } else {
        int32_t sums[8];
        vst1q_s32(sums, lo4);
        vst1q_s32(sums + 4, hi4);
        std::memcpy(o, sums, size_t(cols) * sizeof(int32_t));
      }
    }
  }
}

}  // namespace

extern const WinogradS8Transforms kWinogradS8Neon;
const WinogradS8Transforms kWinogradS8Neon = {InputNeon, OutputNeon, OutputFloatNeon, GemmNeon};

}  // namespace kernels
}  // namespace qfold
