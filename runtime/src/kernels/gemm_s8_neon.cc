// Armv8.0 Advanced SIMD GEMM (gemm_s8.h) for cores without dotprod
// (Cortex-A53/A57/A72/A73): 4x4 tiles with K along the vector lanes. Per 16 k
// and per output, smull/smull2 multiply a row's 16 bytes by a column's into
// 16-bit products and sadalp/uadalp add adjacent products pairwise into the
// output's four 32-bit partial sums; the 16 outputs' partial sums are reduced
// with addp at the end of K. Register use: 16 accumulators, 4 row and 4
// column vectors, 6 products in flight.
//
// The products must not be summed in 16 bits first (smull + smlal, as
// kernels that assume weights in [-127, 127] do): two products of -128 * -128
// overflow int16. Each product fits int16 (s8 x s8) or uint16 (u8 x u8), and
// the pairwise long adds are exact, so the int32 sums wrap exactly like the
// reference's.
//
// smull multiplies like signs only, so the left operand is stored flipped
// (byte ^ 0x80) as in gemm_s8_neondot.cc: weights left, L' = L + 128 is u8 and
// sum(L * R) = sum(L' * R) - 128 * colsum(R) (umull/uadalp); weights right,
// L' = L - 128 is s8 and sum(L * R) = sum(L' * R) + 128 * colsum(R)
// (smull/sadalp). The column sums come from the packed right panel, once per
// panel for all row tiles. Padding bytes are 0 in both operands.
//
// Packed layouts (the sizes of gemm_s8.h's): per panel of 4 rows (columns),
// first the full 16-k blocks, then the last rem = K4 * 4 % 16 bytes (4, 8 or
// 12) of each row (column) contiguous:
//   left:  [panel][k / 16][row 4][16], then [row 4][rem]
//   right: [panel][k / 16][col 4][16], then [col 4][rem]
#include "kernels/gemm_s8_neon.h"

#include <arm_neon.h>

#include <cstring>

#include "kernels/gemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kTile = 4;  // rows and columns of a tile

// Full 16-k blocks and the bytes after them, per row or column of a panel.
struct KSplit {
  int64_t blocks, rem;
};

inline KSplit SplitK(int64_t k4) {
  return {k4 / 4, k4 % 4 * 4};
}

// The first n bytes of v to p (n < 16).
inline void StorePart(uint8_t* p, uint8x16_t v, int64_t n) {
  uint8_t t[16];
  vst1q_u8(t, v);
  std::memcpy(p, t, size_t(n));
}

void PackLeft(const uint8_t* src, int64_t lds, int64_t rows, int64_t k, uint8_t xor_mask,
              uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4;
  const KSplit ks = SplitK(k4);
  const uint8_t mask = xor_mask ^ 0x80;  // the flip (see the top of the file)
  for (int64_t p = 0; p < rows; p += kTile) {
    uint8_t* panel = dst + p * k4 * 4;
    for (int i = 0; i < kTile; ++i) {
      const int64_t row = p + i;
      auto load = [&](int64_t kk) {
        return row < rows ? Load16(src + row * lds + kk, k - kk, mask) : vdupq_n_u8(0);
      };
      for (int64_t b = 0; b < ks.blocks; ++b) vst1q_u8(panel + (b * kTile + i) * 16, load(16 * b));
      if (ks.rem)
        StorePart(panel + ks.blocks * kTile * 16 + i * ks.rem, load(16 * ks.blocks), ks.rem);
    }
  }
}

// 16x16 byte transpose: v[r] byte c becomes v[c] byte r. Each stage swaps
// elements twice as wide between rows half as far apart.
inline void Transpose16(uint8x16_t (&v)[16]) {
  for (int r = 0; r < 16; r += 2) {
    const uint8x16_t a = v[r], b = v[r + 1];
    v[r] = vtrn1q_u8(a, b);
    v[r + 1] = vtrn2q_u8(a, b);
  }
  for (int r = 0; r < 16; r += 4)
    for (int i = 0; i < 2; ++i) {
      const uint16x8_t a = vreinterpretq_u16_u8(v[r + i]), b = vreinterpretq_u16_u8(v[r + i + 2]);
      v[r + i] = vreinterpretq_u8_u16(vtrn1q_u16(a, b));
      v[r + i + 2] = vreinterpretq_u8_u16(vtrn2q_u16(a, b));
    }
  for (int r = 0; r < 16; r += 8)
    for (int i = 0; i < 4; ++i) {
      const uint32x4_t a = vreinterpretq_u32_u8(v[r + i]), b = vreinterpretq_u32_u8(v[r + i + 4]);
      v[r + i] = vreinterpretq_u8_u32(vtrn1q_u32(a, b));
      v[r + i + 4] = vreinterpretq_u8_u32(vtrn2q_u32(a, b));
    }
  for (int i = 0; i < 8; ++i) {
    const uint64x2_t a = vreinterpretq_u64_u8(v[i]), b = vreinterpretq_u64_u8(v[i + 8]);
    v[i] = vreinterpretq_u8_u64(vtrn1q_u64(a, b));
    v[i + 8] = vreinterpretq_u8_u64(vtrn2q_u64(a, b));
  }
}

// 16 columns (4 panels) at a time: 16 rows of k are transposed so that each
// column's 16 k are one vector.
void PackRight(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, uint8_t xor_mask,
               uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4;
  const KSplit ks = SplitK(k4);
  const int64_t panel_bytes = kTile * k4 * 4;
  for (int64_t c0 = 0; c0 < cols; c0 += 4 * kTile) {
    const int64_t ncol = cols - c0 < 4 * kTile ? cols - c0 : 4 * kTile;
    uint8_t* out = dst + c0 / kTile * panel_bytes;
    for (int64_t b = 0; b <= ks.blocks; ++b) {
      if (b == ks.blocks && !ks.rem) break;
      uint8x16_t v[16];
      for (int r = 0; r < 16; ++r) v[r] = RightRow(src, lds, k, cols, 16 * b + r, c0, xor_mask);
      Transpose16(v);
      // Columns past the end (zero in v) pad the last panel.
      for (int c = 0; c < (ncol + kTile - 1) / kTile * kTile; ++c) {
        uint8_t* panel = out + c / kTile * panel_bytes;
        if (b < ks.blocks)
          vst1q_u8(panel + (b * kTile + c % kTile) * 16, v[c]);
        else
          StorePart(panel + ks.blocks * kTile * 16 + c % kTile * ks.rem, v[c], ks.rem);
      }
    }
  }
}

// umull/uadalp (weights left, u8 x u8) or smull/sadalp (weights right, s8 x s8)
// for the tails and the column sums; the 16-k blocks go through MacBlocks.
template <bool kWeightsLeft>
struct Mul;

template <>
struct Mul<true> {
  using Acc = uint32x4_t;
  static Acc Add8(Acc acc, uint8x8_t l, uint8x8_t r) { return vpadalq_u16(acc, vmull_u8(l, r)); }
  static Acc Sum16(Acc acc, uint8x16_t r) { return vpadalq_u16(acc, vpaddlq_u8(r)); }
  // -128 * colsum, modulo 2^32.
  static int32x4_t Correction(int32x4_t sum) {
    return vreinterpretq_s32_u32(
        vsubq_u32(vdupq_n_u32(0), vshlq_n_u32(vreinterpretq_u32_s32(sum), 7)));
  }
};

template <>
struct Mul<false> {
  using Acc = uint32x4_t;  // holds int32 lanes; the asm blocks take one type
  static Acc Add(Acc acc, uint16x8_t products) {
    return vreinterpretq_u32_s32(
        vpadalq_s16(vreinterpretq_s32_u32(acc), vreinterpretq_s16_u16(products)));
  }
  static Acc Add8(Acc acc, uint8x8_t l, uint8x8_t r) {
    return Add(acc, vreinterpretq_u16_s16(vmull_s8(vreinterpret_s8_u8(l), vreinterpret_s8_u8(r))));
  }
  static Acc Sum16(Acc acc, uint8x16_t r) {
    return Add(acc, vreinterpretq_u16_s16(vpaddlq_s8(vreinterpretq_s8_u8(r))));
  }
  // +128 * colsum, modulo 2^32.
  static int32x4_t Correction(int32x4_t sum) {
    return vreinterpretq_s32_u32(vshlq_n_u32(vreinterpretq_u32_s32(sum), 7));
  }
};

// {sum(a), sum(b), sum(c), sum(d)} of four partial-sum vectors, wrapping.
inline int32x4_t Reduce4(uint32x4_t a, uint32x4_t b, uint32x4_t c, uint32x4_t d) {
  return vreinterpretq_s32_u32(vpaddq_u32(vpaddq_u32(a, b), vpaddq_u32(c, d)));
}

// The 16 bytes after the 16-k blocks of one row (column): rem of them, zeros after.
inline uint8x16_t LoadRem(const uint8_t* p, int64_t rem) {
  uint8_t t[16] = {};
  std::memcpy(t, p, size_t(rem));
  return vld1q_u8(t);
}

// Column sums of a right panel (as s8 or u8 per the operand), wrapping.
template <bool kWeightsLeft>
int32x4_t ColumnSums(const uint8_t* rp, const KSplit& ks) {
  using M = Mul<kWeightsLeft>;
  uint32x4_t s[kTile];
  for (auto& v : s) v = vdupq_n_u32(0);
  for (int64_t b = 0; b < ks.blocks; ++b, rp += kTile * 16)
    for (int j = 0; j < kTile; ++j) s[j] = M::Sum16(s[j], vld1q_u8(rp + 16 * j));
  if (ks.rem)
    for (int j = 0; j < kTile; ++j) s[j] = M::Sum16(s[j], LoadRem(rp + j * ks.rem, ks.rem));
  return Reduce4(s[0], s[1], s[2], s[3]);
}

// 4 bytes at p in the low half of a vector, zeros above.
inline uint8x8_t Load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpret_u8_u32(vset_lane_u32(v, vdup_n_u32(0), 0));
}

// The 16-k blocks of a 4x4 tile, software-pipelined for in-order cores
// (Cortex-A53: 6-cycle multiply and pairwise-add latencies in LLVM's model).
// Output o = 4 * row + column (accumulator v<o>), in order; step o multiplies
// its low 8 bytes into tl = v16 + o % 2 and its high 8 into th = v18 + o % 4,
// and adds in the low products of output o - 2 and the high products of o - 4
// (of the previous block when negative; the products start at 0), so no
// instruction waits on the one just before it and the two adds into an
// accumulator are 10 instructions apart. Rows v22-v25 and columns v26-v29 are
// reloaded from the next block right after their last use (the last block
// reloads itself rather than read past the panel); the loop counter and
// pointer steps sit between the vector steps, where an in-order core issues
// them alongside. Written in asm because GCC's scheduler hoists all 32
// multiplies and then spills or copies accumulators, and the 16 accumulators
// as operands would exceed GCC's limit of 30.
#define QF_MAC_STEP(MUL, MUL2, ADALP, alo, tl, ahi, th, l, r)                               \
  ADALP " " alo ".4s, " tl ".8h\n\t" MUL " " tl ".8h, " l ".8b, " r ".8b\n\t" ADALP " " ahi \
        ".4s, " th ".8h\n\t" MUL2 " " th ".8h, " l ".16b, " r ".16b\n\t"

#define QF_MAC_STEPS(MUL, MUL2, ADALP)                                    \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v14", "v16", "v12", "v18", "v22", "v26") \
  "subs %[n], %[n], #1\n\tmov %[step], #64\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v15", "v17", "v13", "v19", "v22", "v27") \
  "csel %[step], %[step], xzr, ne\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v0", "v16", "v14", "v20", "v22", "v28") \
  "add %[lp], %[lp], %[step]\n\tadd %[rp], %[rp], %[step]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v1", "v17", "v15", "v21", "v22", "v29") \
  "ldr q22, [%[lp]]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v2", "v16", "v0", "v18", "v23", "v26") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v3", "v17", "v1", "v19", "v23", "v27") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v4", "v16", "v2", "v20", "v23", "v28") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v5", "v17", "v3", "v21", "v23", "v29") \
  "ldr q23, [%[lp], #16]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v6", "v16", "v4", "v18", "v24", "v26") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v7", "v17", "v5", "v19", "v24", "v27") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v8", "v16", "v6", "v20", "v24", "v28") \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v9", "v17", "v7", "v21", "v24", "v29") \
  "ldr q24, [%[lp], #32]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v10", "v16", "v8", "v18", "v25", "v26") \
  "ldr q26, [%[rp]]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v11", "v17", "v9", "v19", "v25", "v27") \
  "ldr q27, [%[rp], #16]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v12", "v16", "v10", "v20", "v25", "v28") \
  "ldr q28, [%[rp], #32]\n\t" \
  QF_MAC_STEP(MUL, MUL2, ADALP, "v13", "v17", "v11", "v21", "v25", "v29") \
  "ldr q29, [%[rp], #48]\n\t" \
  "ldr q25, [%[lp], #48]\n\t"

// acc_out[row] = the row's 4 column sums over the blocks.
#define QF_MAC_BLOCKS(MUL, MUL2, ADALP)                                                            \
  __asm__ volatile(                                                                                \
      "movi v0.4s, #0\n\tmovi v1.4s, #0\n\tmovi v2.4s, #0\n\tmovi v3.4s, #0\n\t"                   \
      "movi v4.4s, #0\n\tmovi v5.4s, #0\n\tmovi v6.4s, #0\n\tmovi v7.4s, #0\n\t"                   \
      "movi v8.4s, #0\n\tmovi v9.4s, #0\n\tmovi v10.4s, #0\n\tmovi v11.4s, #0\n\t"                 \
      "movi v12.4s, #0\n\tmovi v13.4s, #0\n\tmovi v14.4s, #0\n\tmovi v15.4s, #0\n\t"               \
      "movi v16.4s, #0\n\tmovi v17.4s, #0\n\tmovi v18.4s, #0\n\tmovi v19.4s, #0\n\t"               \
      "movi v20.4s, #0\n\tmovi v21.4s, #0\n\t"                                                     \
      "ldp q22, q23, [%[lp]]\n\tldp q24, q25, [%[lp], #32]\n\t"                                    \
      "ldp q26, q27, [%[rp]]\n\tldp q28, q29, [%[rp], #32]\n\t"                                    \
      "1:\n\t" QF_MAC_STEPS(                                                                       \
          MUL, MUL2, ADALP) "b.ne 1b\n\t" ADALP " v14.4s, v16.8h\n\t" ADALP                        \
                            " v15.4s, v17.8h\n\t" ADALP " v12.4s, v18.8h\n\t" ADALP                \
                            " v13.4s, v19.8h\n\t" ADALP " v14.4s, v20.8h\n\t" ADALP                \
                            " v15.4s, v21.8h\n\t"                                                  \
                            "addp v0.4s, v0.4s, v1.4s\n\taddp v2.4s, v2.4s, v3.4s\n\taddp v0.4s, " \
                            "v0.4s, v2.4s\n\t"                                                     \
                            "addp v4.4s, v4.4s, v5.4s\n\taddp v6.4s, v6.4s, v7.4s\n\taddp v4.4s, " \
                            "v4.4s, v6.4s\n\t"                                                     \
                            "addp v8.4s, v8.4s, v9.4s\n\taddp v10.4s, v10.4s, v11.4s\n\taddp "     \
                            "v8.4s, v8.4s, v10.4s\n\t"                                             \
                            "addp v12.4s, v12.4s, v13.4s\n\taddp v14.4s, v14.4s, v15.4s\n\t"       \
                            "addp v12.4s, v12.4s, v14.4s\n\t"                                      \
                            "stp q0, q4, [%[out]]\n\tstp q8, q12, [%[out], #32]\n\t"               \
      : [lp] "+r"(lp), [rp] "+r"(rp), [n] "+r"(n), [step] "=&r"(step)                              \
      : [out] "r"(acc_out)                                                                         \
      : "cc", "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11",  \
        "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", \
        "v25", "v26", "v27", "v28", "v29")

// acc_out[row] = the sums over the n > 0 16-k blocks at lp and rp.
template <bool kWeightsLeft>
void MacBlocks(const uint8_t* lp, const uint8_t* rp, int64_t n, int32_t* acc_out) {
  int64_t step;
  if (kWeightsLeft) {
    QF_MAC_BLOCKS("umull", "umull2", "uadalp");
  } else {
    QF_MAC_BLOCKS("smull", "smull2", "sadalp");
  }
}

#undef QF_MAC_BLOCKS
#undef QF_MAC_STEPS
#undef QF_MAC_STEP

// One 4x4 tile over all of K; out[row][0] holds the row's 4 column sums plus `init`.
template <bool kWeightsLeft>
__attribute__((always_inline)) inline void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                      const KSplit& ks, int32x4_t init,
                                                      int32x4_t (&out)[kTile][1]) {
  using M = Mul<kWeightsLeft>;
  for (auto& row : out) row[0] = init;
  if (ks.blocks > 0) {
    int32_t sums[4 * kTile];
    MacBlocks<kWeightsLeft>(lp, rp, ks.blocks, sums);
    for (int i = 0; i < kTile; ++i) out[i][0] = vaddq_s32(out[i][0], vld1q_s32(sums + 4 * i));
    lp += ks.blocks * kTile * 16;
    rp += ks.blocks * kTile * 16;
  }
  if (!ks.rem) return;
  uint32x4_t acc[kTile][kTile];
  for (auto& row : acc)
    for (auto& v : row) v = vdupq_n_u32(0);
  if (ks.rem >= 8) {  // the tail's first 8 bytes
    for (int i = 0; i < kTile; ++i) {
      const uint8x8_t lv = vld1_u8(lp + i * ks.rem);
      for (int j = 0; j < kTile; ++j) acc[i][j] = M::Add8(acc[i][j], lv, vld1_u8(rp + j * ks.rem));
    }
  }
  if (ks.rem & 4) {  // its last 4
    const int64_t off = ks.rem - 4;
    for (int i = 0; i < kTile; ++i) {
      const uint8x8_t lv = Load4(lp + i * ks.rem + off);
      for (int j = 0; j < kTile; ++j)
        acc[i][j] = M::Add8(acc[i][j], lv, Load4(rp + j * ks.rem + off));
    }
  }
  for (int i = 0; i < kTile; ++i)
    out[i][0] = vaddq_s32(out[i][0], Reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
}

template <bool kWeightsLeft>
void GemmImpl(const GemmS8Args& a) {
  const KSplit ks = SplitK(a.k4);
  const int64_t panel_bytes = kTile * a.k4 * 4;
  const int64_t panels = (a.cols + kTile - 1) / kTile;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    const uint8_t* rp = a.right + jp * panel_bytes;
    const int64_t c0 = jp * kTile;
    const int ncol = a.cols - c0 < kTile ? int(a.cols - c0) : kTile;
    const int32x4_t init = Mul<kWeightsLeft>::Correction(ColumnSums<kWeightsLeft>(rp, ks));
    ColParamsN<1> cp;
    LoadColParams<kWeightsLeft>(a, c0, ncol, &cp);
    for (int64_t ip = 0; ip < a.rows; ip += kTile) {
      int32x4_t acc[kTile][1];
      Accumulate<kWeightsLeft>(a.left + ip / kTile * panel_bytes, rp, ks, init, acc);
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

extern const GemmS8Kernels kGemmS8Neon;
const GemmS8Kernels kGemmS8Neon = {"neon", kTile, kTile, PackLeft, PackRight, Gemm, RequantRowNeon};

}  // namespace kernels
}  // namespace qfold
