// Armv8.0 NEON indirect GEMM microkernels (igemm_s8.h) for cores without
// dotprod (Cortex-A53/A55r0/A57/A72/A73). No int8 multiply-accumulate that is
// both exact and u8 x s8 exists there, so both operands are widened to int16
// (uxtl for the u8 activations, sxtl for the s8 weights, exact) and
// smlal/smlal2 by lane accumulate 4 products into int32 lanes each, wrapping
// like the reference. The weights are packed k-major ([tap][kc4][4][nr]):
// per k, the nr channels are one vector multiplied by one activation lane.
// Per 8 k of 4 rows x 16 channels: 4 activation loads + 4 uxtl (+ 4 eor for
// int8 input), 8 weight loads + 16 sxtl, 128 smlal (4 MACs each).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

template <int MR, int NR>
struct IgemmNeon {
  static constexpr int kNv = NR / 4;  // int32x4 accumulators per row

  static constexpr int kH = NR / 8;  // int16x8 weight vectors per k

  static inline void Widen(int16x8_t (&wv)[kH], const int8_t* w) {
#pragma GCC unroll 4
    for (int h = 0; h < kH; ++h) wv[h] = vmovl_s8(vld1_s8(w + 8 * h));
  }

  // acc[r] += wv (the NR widened weights of one k) * x[r][kL], for every row.
  template <int kL, class X>
  static inline void Mac(int32x4_t (&acc)[MR][kNv], const int16x8_t (&wv)[kH], const X (&x)[MR]) {
#pragma GCC unroll 4
    for (int h = 0; h < kH; ++h) {
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        if constexpr (sizeof(X) == 16) {
          acc[r][2 * h] = vmlal_laneq_s16(acc[r][2 * h], vget_low_s16(wv[h]), x[r], kL);
          acc[r][2 * h + 1] = vmlal_high_laneq_s16(acc[r][2 * h + 1], wv[h], x[r], kL);
        } else {
          acc[r][2 * h] = vmlal_lane_s16(acc[r][2 * h], vget_low_s16(wv[h]), x[r], kL);
          acc[r][2 * h + 1] = vmlal_high_lane_s16(acc[r][2 * h + 1], wv[h], x[r], kL);
        }
      }
    }
  }

  template <bool kXor>
  static void Tiles(const IgemmS8Args& a) {
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t tiles = (rows + MR - 1) / MR;
    const ArmEpilogue ep(a);
    const uint8x8_t flip = vdup_n_u8(kXor ? 0x80 : 0);
    for (int64_t t = 0; t < tiles; ++t) {
      int32x4_t acc[MR][kNv];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < kNv; ++v) acc[r][v] = vdupq_n_s32(0);
      const uint8_t* const* ind = a.ind + t * taps * MR;
      const int8_t* w = reinterpret_cast<const int8_t*>(a.w);
      for (int64_t tap = 0; tap < taps; ++tap, ind += MR) {
        const uint8_t* p[MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) p[r] = ind[r] + a_offset;
        int64_t q = 0;
        // 8 k per step: one 8-byte load and uxtl per row.
        for (; q + 2 <= kc4; q += 2, w += 8 * NR) {
          int16x8_t w0[kH], w1[kH], w2[kH], w3[kH], w4[kH], w5[kH], w6[kH], w7[kH];
          Widen(w0, w);
          int16x8_t x[MR];
#pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            uint8x8_t b = vld1_u8(p[r] + 4 * q);
            if (kXor) b = veor_u8(b, flip);
            x[r] = vreinterpretq_s16_u16(vmovl_u8(b));
          }
          // The next k's weights are loaded and widened while this k's
          // multiply-accumulates run: an in-order core (Cortex-A53) would
          // otherwise wait for each load and sxtl.
          Widen(w1, w + NR);
          Mac<0>(acc, w0, x);
          Widen(w2, w + 2 * NR);
          Mac<1>(acc, w1, x);
          Widen(w3, w + 3 * NR);
          Mac<2>(acc, w2, x);
          Widen(w4, w + 4 * NR);
          Mac<3>(acc, w3, x);
          Widen(w5, w + 5 * NR);
          Mac<4>(acc, w4, x);
          Widen(w6, w + 6 * NR);
          Mac<5>(acc, w5, x);
          Widen(w7, w + 7 * NR);
          Mac<6>(acc, w6, x);
          Mac<7>(acc, w7, x);
        }
        if (q < kc4) {  // the last 4 k: only 4 bytes per row are readable
          int16x8_t w0[kH], w1[kH], w2[kH], w3[kH];
          Widen(w0, w);
          int16x4_t x[MR];
#pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(LoadU32(p[r] + 4 * q)));
            if (kXor) b = veor_u8(b, flip);
            x[r] = vget_low_s16(vreinterpretq_s16_u16(vmovl_u8(b)));
          }
          Widen(w1, w + NR);
          Mac<0>(acc, w0, x);
          Widen(w2, w + 2 * NR);
          Mac<1>(acc, w1, x);
          Widen(w3, w + 3 * NR);
          Mac<2>(acc, w2, x);
          Mac<3>(acc, w3, x);
          w += 4 * NR;
        }
      }
      // Constant row indices (unrolled), so acc stays in registers.
      const int64_t nrow = rows - t * MR;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        if (r < nrow) ep.Store(a, t * MR + r, acc[r]);
    }
  }

  static void Run(const IgemmS8Args& a) {
    a.x_signed ? Tiles<true>(a) : Tiles<false>(a);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8Neon[];
const IgemmS8Kernel kIgemmS8Neon[] = {
    {"neon", 4, 16, 1, 1, IgemmNeon<4, 16>::Run, /*k_major=*/true},
    {"neon", 4, 8, 1, 1, IgemmNeon<4, 8>::Run, /*k_major=*/true},
    {"", 0, 0, 0, 0, nullptr},
};

}  // namespace kernels
}  // namespace qfold
