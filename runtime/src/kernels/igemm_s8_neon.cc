// Armv8.0 NEON indirect GEMM microkernels (igemm_s8.h) for cores without
// dotprod (Cortex-A53/A55r0/A57/A72/A73). The widest exact int8 multiply
// there is smull: 8 byte pairs to 16-bit products (|-128 * -128| fits), which
// sadalp adds pairwise into int32 lanes, exact and wrapping like the
// reference. smull is s8 x s8 and the activations u8, so as in the dotprod
// kernel they are flipped (a ^ 0x80 = a - 128; raw int8 input already is)
// and 128 * sum(w) per channel, from one pass over the panel per call, seeds
// the sums: sum(a * w) = sum((a - 128) * w) + 128 * sum(w) modulo 2^32.
// The weights keep the common packing [tap][kc4][nr][4]: one 16-byte vector
// is 4 channels x 4 k, multiplied with a row's 4 bytes broadcast 4 times
// (smull + smull2, then two sadalp: 16 MACs in 4 instructions, the multiplies
// on one ASIMD pipe and the adds on the other on a Cortex-A72). The int32
// lanes hold 2 partial sums per channel, added with addp in the epilogue.
// 4x8 tiles: 16 accumulators, 2 weight vectors, 4 activation vectors.
#include <arm_neon.h>

#include <cstdint>

#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

template <int MR, int NR>
struct IgemmNeon {
  static constexpr int kNw = NR / 4;  // weight vectors (4 channels x 4 k) per k step
  static constexpr int kNv = NR / 4;  // output vectors per row

  template <bool kFlip>
  static void Tiles(const IgemmS8Args& a) {
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t tiles = (rows + MR - 1) / MR;
    const ArmEpilogue ep(a);
    const int8x16_t flip = vdupq_n_s8(kFlip ? int8_t(-128) : 0);
    const int8_t* w0 = reinterpret_cast<const int8_t*>(a.w);
    // 128 * the sum of each channel's weights over the panel (wrapping).
    int32_t wsum[NR];
    {
      int32x4_t sum[kNw];
      for (int u = 0; u < kNw; ++u) sum[u] = vdupq_n_s32(0);
      for (int64_t s = 0; s < taps * kc4; ++s)
        for (int u = 0; u < kNw; ++u)
          sum[u] = vpadalq_s16(sum[u], vpaddlq_s8(vld1q_s8(w0 + (s * kNw + u) * 16)));
      for (int u = 0; u < kNw; ++u) vst1q_s32(wsum + 4 * u, vshlq_n_s32(sum[u], 7));
    }
    for (int64_t t = 0; t < tiles; ++t) {
      // acc[r][2u]: channels 4u, 4u + 1 (two partial sums each); [2u + 1]: 4u + 2, 4u + 3.
      int32x4_t acc[MR][2 * kNw];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < 2 * kNw; ++v) acc[r][v] = vdupq_n_s32(0);
      const uint8_t* const* ind = a.ind + t * taps * MR;
      const int8_t* w = w0;
      for (int64_t tap = 0; tap < taps; ++tap, ind += MR) {
        const uint8_t* p[MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) p[r] = ind[r] + a_offset;
        for (int64_t q = 0; q < kc4; ++q, w += 16 * kNw) {
          int8x16_t wv[kNw];
#pragma GCC unroll 8
          for (int u = 0; u < kNw; ++u) wv[u] = vld1q_s8(w + 16 * u);
#pragma GCC unroll 8
          for (int r = 0; r < MR; ++r) {
            const int8x16_t x = veorq_s8(vreinterpretq_s8_u32(Bcast4(p[r] + 4 * q)), flip);
#pragma GCC unroll 8
            for (int u = 0; u < kNw; ++u) {
              acc[r][2 * u] =
                  vpadalq_s16(acc[r][2 * u], vmull_s8(vget_low_s8(wv[u]), vget_low_s8(x)));
              acc[r][2 * u + 1] = vpadalq_s16(acc[r][2 * u + 1], vmull_high_s8(wv[u], x));
            }
          }
        }
      }
      // Constant row indices (unrolled), so acc stays in registers.
      const int64_t nrow = rows - t * MR;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        if (r >= nrow) continue;
        int32x4_t out[kNv];
        for (int u = 0; u < kNv; ++u)
          out[u] = vaddq_s32(vpaddq_s32(acc[r][2 * u], acc[r][2 * u + 1]), vld1q_s32(wsum + 4 * u));
        ep.Store(a, t * MR + r, out);
      }
    }
  }

  // Raw int8 activations are a - 128 already; u8 ones are flipped.
  static void Run(const IgemmS8Args& a) {
    a.x_signed ? Tiles<false>(a) : Tiles<true>(a);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8Neon[];
const IgemmS8Kernel kIgemmS8Neon[] = {
    {"neon", 4, 8, 1, 1, IgemmNeon<4, 8>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
