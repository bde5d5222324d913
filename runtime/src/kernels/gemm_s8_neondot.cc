// Armv8.2 dot-product GEMM (gemm_s8.h), 8x12 tiles of lane-indexed sdot/udot:
// 24 accumulators, 2 left and 3 right vectors per 4 k.
//
// The interface is u8 x s8, but sdot is s8 x s8 and udot u8 x u8, so the
// left operand is stored flipped (byte ^ 0x80) by pack_left, whichever of
// the two it holds, and the right one as given. With L' = L ^ 0x80:
//   weights left (L = s8 weights, R = u8 activations): L' = L + 128 as u8,
//     sum(L * R) = udot(L', R) - 128 * colsum(R);
//   weights right (L = u8 activations, R = s8 weights): L' = L - 128 as s8,
//     sum(L * R) = sdot(L', R) + 128 * colsum(R).
// Both hold modulo 2^32, so the int32 wraparound matches the reference. The
// column sums come from the packed right panel (one pass per panel, shared
// by all row tiles) and seed the accumulators. Padding bytes stay 0 in both
// operands, so they add nothing to either sum.
//
// Packed layouts (gemm_s8.h): left [panel][k / 4][row 8][4], right
// [panel][k / 4][col 12][4].
#include <arm_neon.h>

#include <cstring>

#include "kernels/gemm_s8.h"
#include "kernels/gemm_s8_neon.h"

namespace qfold {
namespace kernels {
namespace {

// 4x4 transpose of 32-bit groups: out[j] = {a[j], b[j], c[j], d[j]}.
inline void Transpose4(uint8x16_t a, uint8x16_t b, uint8x16_t c, uint8x16_t d, uint8x16_t out[4]) {
  const uint32x4_t ab0 = vtrn1q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b));
  const uint32x4_t ab1 = vtrn2q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b));
  const uint32x4_t cd0 = vtrn1q_u32(vreinterpretq_u32_u8(c), vreinterpretq_u32_u8(d));
  const uint32x4_t cd1 = vtrn2q_u32(vreinterpretq_u32_u8(c), vreinterpretq_u32_u8(d));
  out[0] = vreinterpretq_u8_u64(vtrn1q_u64(vreinterpretq_u64_u32(ab0), vreinterpretq_u64_u32(cd0)));
  out[1] = vreinterpretq_u8_u64(vtrn1q_u64(vreinterpretq_u64_u32(ab1), vreinterpretq_u64_u32(cd1)));
  out[2] = vreinterpretq_u8_u64(vtrn2q_u64(vreinterpretq_u64_u32(ab0), vreinterpretq_u64_u32(cd0)));
  out[3] = vreinterpretq_u8_u64(vtrn2q_u64(vreinterpretq_u64_u32(ab1), vreinterpretq_u64_u32(cd1)));
}

// Rows 16 k at a time: each row's 16 bytes are four 4-byte groups, and the
// transposes gather group j of the 8 rows into one 32-byte k/4 step.
void PackLeft(const uint8_t* src, int64_t lds, int64_t rows, int64_t k, uint8_t xor_mask,
              uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4;
  const uint8_t mask = xor_mask ^ 0x80;  // the flip (see the top of the file)
  for (int64_t p = 0; p < rows; p += kMr) {
    uint8_t* panel = dst + p * k4 * 4;
    for (int64_t kc = 0; kc < k; kc += 16) {
      uint8x16_t r[kMr];
      for (int i = 0; i < kMr; ++i)
        r[i] = p + i < rows ? Load16(src + (p + i) * lds + kc, k - kc, mask) : vdupq_n_u8(0);
      uint8x16_t lo[4], hi[4];
      Transpose4(r[0], r[1], r[2], r[3], lo);
      Transpose4(r[4], r[5], r[6], r[7], hi);
      for (int j = 0; j < 4 && kc / 4 + j < k4; ++j) {
        uint8_t* out = panel + (kc / 4 + j) * 4 * kMr;
        vst1q_u8(out, lo[j]);
        vst1q_u8(out + 16, hi[j]);
      }
    }
  }
}

void PackRight(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, uint8_t xor_mask,
               uint8_t* dst) {
  const int64_t k4 = (k + 3) / 4;
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    uint8_t* out = dst + c0 * k4 * 4;
    for (int64_t q = 0; q < k4; ++q, out += 4 * kNr) {
      uint8x16_t v[3];
      Interleave4(RightRow(src, lds, k, cols, 4 * q, c0, xor_mask),
                  RightRow(src, lds, k, cols, 4 * q + 1, c0, xor_mask),
                  RightRow(src, lds, k, cols, 4 * q + 2, c0, xor_mask),
                  RightRow(src, lds, k, cols, 4 * q + 3, c0, xor_mask), v);
      for (int j = 0; j < 3; ++j) vst1q_u8(out + 16 * j, v[j]);
    }
  }
}

// udot (weights left) or sdot (weights right) on the stored bytes.
template <bool kWeightsLeft>
struct Dot;

template <>
struct Dot<true> {
  using Acc = uint32x4_t;
  using Vec = uint8x16_t;
  static Vec Load(const uint8_t* p) { return vld1q_u8(p); }
  template <int kLane>
  static Acc Lane(Acc acc, Vec r, Vec l) {
    return vdotq_laneq_u32(acc, r, l, kLane);
  }
  static Acc Sum(Acc acc, Vec r) { return vdotq_u32(acc, r, vdupq_n_u8(1)); }
  // -128 * colsum, modulo 2^32.
  static int32x4_t Correction(Acc sum) {
    return vreinterpretq_s32_u32(vsubq_u32(vdupq_n_u32(0), vshlq_n_u32(sum, 7)));
  }
  static Acc FromS32(int32x4_t v) { return vreinterpretq_u32_s32(v); }
  static int32x4_t ToS32(Acc v) { return vreinterpretq_s32_u32(v); }
};

template <>
struct Dot<false> {
  using Acc = int32x4_t;
  using Vec = int8x16_t;
  static Vec Load(const uint8_t* p) { return vreinterpretq_s8_u8(vld1q_u8(p)); }
  template <int kLane>
  static Acc Lane(Acc acc, Vec r, Vec l) {
    return vdotq_laneq_s32(acc, r, l, kLane);
  }
  static Acc Sum(Acc acc, Vec r) { return vdotq_s32(acc, r, vdupq_n_s8(1)); }
  // +128 * colsum, modulo 2^32.
  static int32x4_t Correction(Acc sum) {
    return vreinterpretq_s32_u32(vshlq_n_u32(vreinterpretq_u32_s32(sum), 7));
  }
  static Acc FromS32(int32x4_t v) { return v; }
  static int32x4_t ToS32(Acc v) { return v; }
};

// One left row (lane kLane of l) times the 12 columns.
template <class D, int kLane>
__attribute__((always_inline)) inline void DotRow(typename D::Acc (&acc)[3], typename D::Vec r0,
                                                  typename D::Vec r1, typename D::Vec r2,
                                                  typename D::Vec l) {
  acc[0] = D::template Lane<kLane>(acc[0], r0, l);
  acc[1] = D::template Lane<kLane>(acc[1], r1, l);
  acc[2] = D::template Lane<kLane>(acc[2], r2, l);
}

template <bool kWeightsLeft>
__attribute__((always_inline)) inline void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                      int64_t k4, const int32x4_t (&init)[3],
                                                      int32x4_t (&out)[kMr][3]) {
  using D = Dot<kWeightsLeft>;
  typename D::Acc acc[kMr][3];
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < 3; ++j) acc[r][j] = D::FromS32(init[j]);
  for (int64_t q = 0; q < k4; ++q, lp += 4 * kMr, rp += 4 * kNr) {
    const typename D::Vec l0 = D::Load(lp), l1 = D::Load(lp + 16);
    const typename D::Vec r0 = D::Load(rp), r1 = D::Load(rp + 16), r2 = D::Load(rp + 32);
    DotRow<D, 0>(acc[0], r0, r1, r2, l0);
    DotRow<D, 1>(acc[1], r0, r1, r2, l0);
    DotRow<D, 2>(acc[2], r0, r1, r2, l0);
    DotRow<D, 3>(acc[3], r0, r1, r2, l0);
    DotRow<D, 0>(acc[4], r0, r1, r2, l1);
    DotRow<D, 1>(acc[5], r0, r1, r2, l1);
    DotRow<D, 2>(acc[6], r0, r1, r2, l1);
    DotRow<D, 3>(acc[7], r0, r1, r2, l1);
  }
  for (int r = 0; r < kMr; ++r)
    for (int j = 0; j < 3; ++j) out[r][j] = D::ToS32(acc[r][j]);
}

template <bool kWeightsLeft>
void GemmImpl(const GemmS8Args& a) {
  using D = Dot<kWeightsLeft>;
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    const uint8_t* rp = a.right + jp * a.k4 * 4 * kNr;
    const int64_t c0 = jp * kNr;
    const int ncol = a.cols - c0 < kNr ? int(a.cols - c0) : kNr;
    // Column sums of the right panel: the flip's correction, the accumulators' start.
    typename D::Acc sum[3];
    for (int j = 0; j < 3; ++j) sum[j] = D::FromS32(vdupq_n_s32(0));
    for (int64_t q = 0; q < a.k4; ++q)
      for (int j = 0; j < 3; ++j) sum[j] = D::Sum(sum[j], D::Load(rp + q * 4 * kNr + 16 * j));
    int32x4_t init[3];
    for (int j = 0; j < 3; ++j) init[j] = D::Correction(sum[j]);
    ColParams cp;
    LoadColParams<kWeightsLeft>(a, c0, ncol, &cp);
    for (int64_t ip = 0; ip < a.rows; ip += kMr) {
      int32x4_t acc[kMr][3];
      Accumulate<kWeightsLeft>(a.left + ip * a.k4 * 4, rp, a.k4, init, acc);
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

extern const GemmS8Kernels kGemmS8NeonDot;
const GemmS8Kernels kGemmS8NeonDot = {"neondot", kMr,  kNr,           PackLeft,
                                      PackRight, Gemm, RequantRowNeon};

}  // namespace kernels
}  // namespace qfold
