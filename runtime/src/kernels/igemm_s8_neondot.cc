// Armv8.2 dot-product indirect GEMM microkernels (igemm_s8.h). sdot is
// s8 x s8, the activations u8: the kernel flips them (a ^ 0x80 = a - 128 as
// s8; raw int8 input already is that) and adds 128 * sum(w) per channel back:
//   sum(a * w) = sdot(a - 128, w) + 128 * sum(w),
// exact modulo 2^32 like the reference's wraparound. The weight sums come
// from one pass over the panel per call, shared by all its row tiles. The
// weights keep the common packing [tap][kc4][nr][4]: one 16-byte vector is 4
// channels x 4 k, the unit of sdot. Per 16 k of 4 rows x 16 channels: 4
// activation loads (+ 4 eor for u8 input), 16 weight loads, 64 sdot (16
// MACs each); the last 1-3 groups of 4 k broadcast 4 bytes per row (no
// reads past the row's 4 * kc4 bytes).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

template <int MR, int NR>
struct IgemmNeonDot {
  static constexpr int kNv = NR / 4;

  // acc[r] += the 4 k group kL of x[r] (16 bytes: 4 groups) with 16 * kNv weights.
  template <int kL>
  static inline void Dot4(int32x4_t (&acc)[MR][kNv], const int8_t* w, const int8x16_t (&x)[MR]) {
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) {
      const int8x16_t wv = vld1q_s8(w + 16 * v);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc[r][v] = vdotq_laneq_s32(acc[r][v], wv, x[r], kL);
    }
  }

  template <bool kFlip>
  static void Tiles(const IgemmS8Args& a) {
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t tiles = (rows + MR - 1) / MR;
    const ArmEpilogue ep(a);
    const int8x16_t flip = vdupq_n_s8(kFlip ? int8_t(-128) : 0);
    // 128 * the sum of each channel's weights over the panel (wrapping); in
    // memory, so the registers stay free for the tile loop.
    int32_t wsum[NR];
    {
      int32x4_t sum[kNv];
      for (int v = 0; v < kNv; ++v) sum[v] = vdupq_n_s32(0);
      const int8x16_t ones = vdupq_n_s8(1);
      const int8_t* w = reinterpret_cast<const int8_t*>(a.w);
      for (int64_t s = 0; s < taps * kc4; ++s)
        for (int v = 0; v < kNv; ++v)
          sum[v] = vdotq_s32(sum[v], vld1q_s8(w + (s * kNv + v) * 16), ones);
      for (int v = 0; v < kNv; ++v) vst1q_s32(wsum + 4 * v, vshlq_n_s32(sum[v], 7));
    }
    const int8_t* w0 = reinterpret_cast<const int8_t*>(a.w);
    for (int64_t t = 0; t < tiles; ++t) {
      int32x4_t acc[MR][kNv];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < kNv; ++v) acc[r][v] = vld1q_s32(wsum + 4 * v);
      const uint8_t* const* ind = a.ind + t * taps * MR;
      const int8_t* w = w0;
      for (int64_t tap = 0; tap < taps; ++tap, ind += MR) {
        const uint8_t* p[MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) p[r] = ind[r] + a_offset;
        int64_t q = 0;
        for (; q + 4 <= kc4; q += 4, w += 64 * kNv) {
          int8x16_t x[MR];
#pragma GCC unroll 8
          for (int r = 0; r < MR; ++r)
            x[r] = veorq_s8(vld1q_s8(reinterpret_cast<const int8_t*>(p[r] + 4 * q)), flip);
          Dot4<0>(acc, w, x);
          Dot4<1>(acc, w + 16 * kNv, x);
          Dot4<2>(acc, w + 32 * kNv, x);
          Dot4<3>(acc, w + 48 * kNv, x);
        }
        for (; q < kc4; ++q, w += 16 * kNv) {
          int8x16_t x[MR];
#pragma GCC unroll 8
          for (int r = 0; r < MR; ++r)
            x[r] = veorq_s8(vreinterpretq_s8_u32(Bcast4(p[r] + 4 * q)), flip);
          Dot4<0>(acc, w, x);
        }
      }
      // Constant row indices (unrolled), so acc stays in registers.
      const int64_t nrow = rows - t * MR;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        if (r < nrow) ep.Store(a, t * MR + r, acc[r]);
    }
  }

  // Raw int8 activations are a - 128 already; u8 ones are flipped.
  static void Run(const IgemmS8Args& a) {
    a.x_signed ? Tiles<false>(a) : Tiles<true>(a);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8NeonDot[];
const IgemmS8Kernel kIgemmS8NeonDot[] = {
    {"neondot", 4, 16, 1, 1, IgemmNeonDot<4, 16>::Run, 4},
    {"neondot", 4, 8, 1, 1, IgemmNeonDot<4, 8>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
