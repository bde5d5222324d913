// Armv8.6 int8 matrix-multiply indirect GEMM microkernels (igemm_s8.h).
// usmmla multiplies a 2x8 block of u8 activations (two output pixels, 8
// consecutive input channels each) by a 2x8 block of s8 weights (two output
// channels) into a 2x2 block of int32: 32 MACs per instruction, twice sdot's,
// and u8 x s8 directly, so u8 input needs no flip and no weight-sum
// correction (int8 input is xor-ed with 0x80 to u8 values, as the driver's
// zero-point folding expects). The weights are packed by 8 k (kgroup 8:
// [tap][ceil(kc4 / 2)][nr][8]), so 16 bytes are 8 k of two channels; a row
// pair's activations are two 8-byte loads in one register. With an odd kc4
// the last group's upper 4 weights are zero and each row's last 4 bytes are
// loaded alone: nothing is read past a row's 4 * kc4 bytes.
// Per 8 k of 4 rows x 16 channels: 4 activation loads, 8 weight loads,
// 16 usmmla (512 MACs); 16 accumulators, 2 activation and 8 weight vectors.
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8_arm.h"

namespace qfold {
namespace kernels {
namespace {

inline uint8x8_t Load8(const uint8_t* p) {
  return vld1_u8(p);
}
inline uint8x8_t Load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vcreate_u8(uint64_t(v));  // the upper 4 bytes zero
}

template <int MR, int NR>
struct IgemmNeonI8mm {
  static_assert(MR % 2 == 0 && NR % 4 == 0, "row pairs, channel quads");
  static constexpr int kRp = MR / 2, kCp = NR / 2, kNv = NR / 4;

  // acc += one group of 8 k: the row pairs x[rp] with the channel pairs at w.
  static inline void Step(int32x4_t (&acc)[kRp][kCp], const int8_t* w, const uint8x16_t (&x)[kRp]) {
#pragma GCC unroll 8
    for (int cp = 0; cp < kCp; ++cp) {
      const int8x16_t wv = vld1q_s8(w + 16 * cp);
#pragma GCC unroll 4
      for (int rp = 0; rp < kRp; ++rp) acc[rp][cp] = vusmmlaq_s32(acc[rp][cp], x[rp], wv);
    }
  }

  template <bool kFlip>
  static void Tiles(const IgemmS8Args& a) {
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t tiles = (rows + MR - 1) / MR, kc8 = kc4 / 2;
    const bool odd = kc4 % 2 != 0;
    const ArmEpilogue ep(a);
    const uint8x16_t flip = vdupq_n_u8(kFlip ? 0x80 : 0);
    const int8_t* w0 = reinterpret_cast<const int8_t*>(a.w);
    for (int64_t t = 0; t < tiles; ++t) {
      int32x4_t acc[kRp][kCp];
#pragma GCC unroll 4
      for (int rp = 0; rp < kRp; ++rp)
#pragma GCC unroll 8
        for (int cp = 0; cp < kCp; ++cp) acc[rp][cp] = vdupq_n_s32(0);
      const uint8_t* const* ind = a.ind + t * taps * MR;
      const int8_t* w = w0;
      for (int64_t tap = 0; tap < taps; ++tap, ind += MR) {
        const uint8_t* p[MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) p[r] = ind[r] + a_offset;
        for (int64_t q = 0; q < kc8; ++q, w += 16 * kCp) {
          uint8x16_t x[kRp];
#pragma GCC unroll 4
          for (int rp = 0; rp < kRp; ++rp)
            x[rp] =
                veorq_u8(vcombine_u8(Load8(p[2 * rp] + 8 * q), Load8(p[2 * rp + 1] + 8 * q)), flip);
          Step(acc, w, x);
        }
        if (odd) {
          // The zero weights meet whatever the upper halves hold (0 ^ flip).
          uint8x16_t x[kRp];
#pragma GCC unroll 4
          for (int rp = 0; rp < kRp; ++rp)
            x[rp] = veorq_u8(
                vcombine_u8(Load4(p[2 * rp] + 8 * kc8), Load4(p[2 * rp + 1] + 8 * kc8)), flip);
          Step(acc, w, x);
          w += 16 * kCp;
        }
      }
      // acc[rp][cp] = [r0 c0, r0 c1, r1 c0, r1 c1] of rows 2rp, 2rp + 1 and
      // channels 2cp, 2cp + 1: the 64-bit halves of two channel pairs make a
      // row's 4 channels.
      const int64_t nrow = rows - t * MR;
#pragma GCC unroll 4
      for (int rp = 0; rp < kRp; ++rp) {
        int32x4_t r0[kNv], r1[kNv];
#pragma GCC unroll 8
        for (int v = 0; v < kNv; ++v) {
          const int64x2_t lo = vreinterpretq_s64_s32(acc[rp][2 * v]);
          const int64x2_t hi = vreinterpretq_s64_s32(acc[rp][2 * v + 1]);
          r0[v] = vreinterpretq_s32_s64(vzip1q_s64(lo, hi));
          r1[v] = vreinterpretq_s32_s64(vzip2q_s64(lo, hi));
        }
        if (2 * rp < nrow) ep.Store(a, t * MR + 2 * rp, r0);
        if (2 * rp + 1 < nrow) ep.Store(a, t * MR + 2 * rp + 1, r1);
      }
    }
  }

  static void Run(const IgemmS8Args& a) {
    a.x_signed ? Tiles<true>(a) : Tiles<false>(a);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8NeonI8mm[];
const IgemmS8Kernel kIgemmS8NeonI8mm[] = {
    {"neoni8mm", 4, 16, 1, 1, IgemmNeonI8mm<4, 16>::Run, 8},
    {"neoni8mm", 4, 8, 1, 1, IgemmNeonI8mm<4, 8>::Run, 8},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
