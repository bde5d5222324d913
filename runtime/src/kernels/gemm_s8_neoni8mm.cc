// Armv8.6 int8 matrix-multiply GEMM (gemm_s8.h): usmmla multiplies a 2x8 u8
// block by an 8x2 s8 block into a 2x2 int32 block, exactly the interface's
// u8 x s8, so no shift correction is needed and the int32 sums wrap like the
// reference's. 8x12 tiles: 24 accumulators of 2x2 blocks, 4 left and 6
// right vectors per 8 k.
//
// Packed layouts (same sizes as gemm_s8.h's, K rounded up to 4): per panel,
// first the full 8-k blocks as pairs of rows (columns), each pair 16 bytes
// = 8 k of the first then 8 k of the second:
//   left:  [panel][k / 8][row pair 4][2][8]
//   right: [panel][k / 8][col pair 6][2][8]
// then, when K / 4 is odd, the last 4 k as [row 8][4] / [col 12][4], which
// the kernel widens to pairs with zero bytes in registers.
#include <arm_neon.h>

#include <cstring>

#include "kernels/gemm_s8.h"
#include "kernels/gemm_s8_neon.h"

namespace qfold {
namespace kernels {
namespace {

void PackLeft(const uint8_t* src, int64_t lds, int64_t rows, int64_t k, uint8_t xor_mask,
              uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4, kb = k4 / 2;
  for (int64_t p = 0; p < rows; p += kMr) {
    uint8_t* out = dst + p * k4 * 4;
    for (int64_t b = 0; b < kb; ++b, out += 8 * kMr) {
      for (int i = 0; i < kMr; i += 2) {
        const int64_t kk = 8 * b;
        const uint8x8_t r0 =
            p + i < rows ? Load8(src + (p + i) * lds + kk, k - kk, xor_mask) : vdup_n_u8(0);
        const uint8x8_t r1 =
            p + i + 1 < rows ? Load8(src + (p + i + 1) * lds + kk, k - kk, xor_mask) : vdup_n_u8(0);
        vst1q_u8(out + 8 * i, vcombine_u8(r0, r1));
      }
    }
    if (k4 % 2) {
      for (int i = 0; i < kMr; ++i)
        for (int t = 0; t < 4; ++t) {
          const int64_t kk = 8 * kb + t;
          out[4 * i + t] = p + i < rows && kk < k ? uint8_t(src[(p + i) * lds + kk] ^ xor_mask) : 0;
        }
    }
  }
}

void PackRight(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, uint8_t xor_mask,
               uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4, kb = k4 / 2;
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    uint8_t* out = dst + c0 * k4 * 4;
    for (int64_t b = 0; b < kb; ++b, out += 8 * kNr) {
      // [col][4] for k 0-3 and for k 4-7 of the block, then zipped per column pair.
      uint8x16_t lo[3], hi[3];
      const int64_t kk = 8 * b;
      Interleave4(RightRow(src, lds, k, cols, kk, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 1, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 2, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 3, c0, xor_mask), lo);
      Interleave4(RightRow(src, lds, k, cols, kk + 4, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 5, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 6, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 7, c0, xor_mask), hi);
      for (int j = 0; j < 3; ++j) {
        const uint32x4_t l = vreinterpretq_u32_u8(lo[j]), h = vreinterpretq_u32_u8(hi[j]);
        vst1q_u8(out + 32 * j, vreinterpretq_u8_u32(vzip1q_u32(l, h)));
        vst1q_u8(out + 32 * j + 16, vreinterpretq_u8_u32(vzip2q_u32(l, h)));
      }
    }
    if (k4 % 2) {
      uint8x16_t v[3];
      const int64_t kk = 8 * kb;
      Interleave4(RightRow(src, lds, k, cols, kk, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 1, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 2, c0, xor_mask),
                  RightRow(src, lds, k, cols, kk + 3, c0, xor_mask), v);
      for (int j = 0; j < 3; ++j) vst1q_u8(out + 16 * j, v[j]);
    }
  }
}

// usmmla takes the unsigned operand first: the right (activations) when
// weights are left, which gives the 2x2 blocks transposed (columns x rows).
template <bool kWeightsLeft>
__attribute__((always_inline)) inline int32x4_t Mma(int32x4_t acc, uint8x16_t l, uint8x16_t r) {
  return kWeightsLeft ? vusmmlaq_s32(acc, r, vreinterpretq_s8_u8(l))
                      : vusmmlaq_s32(acc, l, vreinterpretq_s8_u8(r));
}

// One 8-k block in two halves of 3 right pairs: 24 accumulators + 4 left +
// 3 right vectors fit the 32 registers. The empty asm keeps the compiler
// from loading the second half early (it otherwise spills accumulators).
template <bool kWeightsLeft>
__attribute__((always_inline)) inline void Block(int32x4_t (&m)[kMr / 2][kNr / 2],
                                                 const uint8x16_t (&l)[kMr / 2],
                                                 const uint8_t* rp) {
  for (int h = 0; h < 2; ++h) {
    uint8x16_t r[3];
    for (int j = 0; j < 3; ++j) r[j] = vld1q_u8(rp + 48 * h + 16 * j);
    for (int i = 0; i < kMr / 2; ++i)
      for (int j = 0; j < 3; ++j) m[i][3 * h + j] = Mma<kWeightsLeft>(m[i][3 * h + j], l[i], r[j]);
    __asm__ volatile("" ::: "memory");
  }
}

// A [4][4] 32-bit group vector to two pairs, each group followed by 4 zero bytes.
inline uint8x16_t PairLo(uint8x16_t v) {
  return vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(v), vdupq_n_u32(0)));
}
inline uint8x16_t PairHi(uint8x16_t v) {
  return vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(v), vdupq_n_u32(0)));
}

template <bool kWeightsLeft>
__attribute__((always_inline)) inline void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                      int64_t k4, int32x4_t (&out)[kMr][3]) {
  int32x4_t m[kMr / 2][kNr / 2];
  for (auto& row : m)
    for (auto& v : row) v = vdupq_n_s32(0);
  for (int64_t b = 0; b < k4 / 2; ++b, lp += 8 * kMr, rp += 8 * kNr) {
    uint8x16_t l[kMr / 2];
    for (int i = 0; i < kMr / 2; ++i) l[i] = vld1q_u8(lp + 16 * i);
    Block<kWeightsLeft>(m, l, rp);
  }
  if (k4 % 2) {
    const uint8x16_t l0 = vld1q_u8(lp), l1 = vld1q_u8(lp + 16);
    const uint8x16_t l[kMr / 2] = {PairLo(l0), PairHi(l0), PairLo(l1), PairHi(l1)};
    uint8_t r[8 * kNr];
    for (int j = 0; j < 3; ++j) {
      const uint8x16_t v = vld1q_u8(rp + 16 * j);
      vst1q_u8(r + 32 * j, PairLo(v));
      vst1q_u8(r + 32 * j + 16, PairHi(v));
    }
    Block<kWeightsLeft>(m, l, r);
  }
  // 2x2 blocks to rows of 4 columns: blocks (2j, 2j + 1) hold columns 4j..4j+3.
  for (int i = 0; i < kMr / 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      const int32x4_t a = m[i][2 * j], b = m[i][2 * j + 1];
      if (kWeightsLeft) {  // {c0r0, c0r1, c1r0, c1r1}
        out[2 * i][j] = vuzp1q_s32(a, b);
        out[2 * i + 1][j] = vuzp2q_s32(a, b);
      } else {  // {r0c0, r0c1, r1c0, r1c1}
        out[2 * i][j] =
            vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
        out[2 * i + 1][j] =
            vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
      }
    }
  }
}

template <bool kWeightsLeft>
void GemmImpl(const GemmS8Args& a) {
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    const uint8_t* rp = a.right + jp * a.k4 * 4 * kNr;
    const int64_t c0 = jp * kNr;
    const int ncol = a.cols - c0 < kNr ? int(a.cols - c0) : kNr;
    ColParams cp;
    LoadColParams<kWeightsLeft>(a, c0, ncol, &cp);
    for (int64_t ip = 0; ip < a.rows; ip += kMr) {
      int32x4_t acc[kMr][3];
      Accumulate<kWeightsLeft>(a.left + ip * a.k4 * 4, rp, a.k4, acc);
      StoreTile<kWeightsLeft>(a, cp, ip, c0, ncol, acc);
    }
  }
}

void Gemm(const GemmS8Args& a) {
  if (a.weights_left)
    GemmImpl<true>(a);
  else
    GemmImpl<false>(a);
}

}  // namespace

extern const GemmS8Kernels kGemmS8NeonI8mm;
const GemmS8Kernels kGemmS8NeonI8mm = {"neoni8mm", kMr,  kNr,           PackLeft,
                                       PackRight,  Gemm, RequantRowNeon};

}  // namespace kernels
}  // namespace qfold
