// Pieces shared by the NEON GEMM files (gemm_s8_neon.cc, gemm_s8_neondot.cc,
// gemm_s8_neoni8mm.cc): edge-safe row loads, the 4-row [col][4] interleave, and
// the requantizing epilogue, which computes exactly what Requantize
// (ops/quant_util.h) and the x86 epilogues compute. Everything is in an
// anonymous namespace so each file, compiled with its own -march, keeps its own
// copy.
//
// The dotprod and i8mm files use 8x12 tiles (kMr = 8, kNr = 12), the Armv8.0
// file 4x4; each hands the epilogue its tile as acc[row][column block of 4]
// int32x4 vectors.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 8, kNr = 12;

// The first n bytes at p (none when n <= 0) xor mask, then zeros: padding
// stays 0 whatever the mask. Only the edge of an operand takes the copy.
inline uint8x16_t Load16(const uint8_t* p, int64_t n, uint8_t mask) {
  if (n >= 16) return veorq_u8(vld1q_u8(p), vdupq_n_u8(mask));
  uint8_t t[16] = {};
  for (int64_t i = 0; i < n; ++i) t[i] = uint8_t(p[i] ^ mask);
  return vld1q_u8(t);
}

inline uint8x8_t Load8(const uint8_t* p, int64_t n, uint8_t mask) {
  if (n >= 8) return veor_u8(vld1_u8(p), vdup_n_u8(mask));
  uint8_t t[8] = {};
  for (int64_t i = 0; i < n; ++i) t[i] = uint8_t(p[i] ^ mask);
  return vld1_u8(t);
}

// Row kk of a k x cols right operand from column c0 (16 bytes, zero past the
// end of the row or when kk >= k).
inline uint8x16_t RightRow(const uint8_t* src, int64_t lds, int64_t k, int64_t cols, int64_t kk,
                           int64_t c0, uint8_t mask) {
  return kk < k ? Load16(src + kk * lds + c0, cols - c0, mask) : vdupq_n_u8(0);
}

// Four rows (consecutive k) of 12 columns to the [col][4] layout:
// out[0] = columns 0-3, out[1] = 4-7, out[2] = 8-11, each column's 4 bytes in k order.
inline void Interleave4(uint8x16_t r0, uint8x16_t r1, uint8x16_t r2, uint8x16_t r3,
                        uint8x16_t out[3]) {
  const uint16x8_t a_lo = vreinterpretq_u16_u8(vzip1q_u8(r0, r1));
  const uint16x8_t a_hi = vreinterpretq_u16_u8(vzip2q_u8(r0, r1));
  const uint16x8_t b_lo = vreinterpretq_u16_u8(vzip1q_u8(r2, r3));
  const uint16x8_t b_hi = vreinterpretq_u16_u8(vzip2q_u8(r2, r3));
  out[0] = vreinterpretq_u8_u16(vzip1q_u16(a_lo, b_lo));
  out[1] = vreinterpretq_u8_u16(vzip2q_u16(a_lo, b_lo));
  out[2] = vreinterpretq_u8_u16(vzip1q_u16(a_hi, b_hi));
}

// Up to 4 * kBlocks per-column values, zero past n (the caller's arrays need
// not be padded to a multiple of the tile width).
template <int kBlocks>
inline void LoadCols(const int32_t* p, int64_t n, int32x4_t (&out)[kBlocks]) {
  int32_t t[4 * kBlocks] = {};
  std::memcpy(t, p, size_t(n < 4 * kBlocks ? n : 4 * kBlocks) * sizeof(int32_t));
  for (int j = 0; j < kBlocks; ++j) out[j] = vld1q_s32(t + 4 * j);
}

template <int kBlocks>
inline void LoadCols(const float* p, int64_t n, float32x4_t (&out)[kBlocks]) {
  float t[4 * kBlocks] = {};
  std::memcpy(t, p, size_t(n < 4 * kBlocks ? n : 4 * kBlocks) * sizeof(float));
  for (int j = 0; j < kBlocks; ++j) out[j] = vld1q_f32(t + 4 * j);
}

// clamp(round(float(acc) * mult) + yzp, lo, hi) with lo/hi passed as lo - yzp,
// hi - yzp: clamping in float before the conversion equals clamping after
// rounding because the bounds are integers. NaN becomes 0 (the zero point).
// vcvtq_f32_s32 rounds to nearest and fcvtns rounds half to even, as
// float(int) and nearbyintf do in the default rounding mode.
inline int32x4_t Requant(int32x4_t acc, float32x4_t mult, float32x4_t lo, float32x4_t hi,
                         int32x4_t yzp) {
  float32x4_t f = vmulq_f32(vcvtq_f32_s32(acc), mult);
  f = vreinterpretq_f32_u32(vandq_u32(vceqq_f32(f, f), vreinterpretq_u32_f32(f)));
  f = vminq_f32(vmaxq_f32(f, lo), hi);
  return vaddq_s32(vcvtnq_s32_f32(f), yzp);
}

// Low bytes of 16 results (each in [-128, 255], so the low byte is the value).
inline uint8x16_t Narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
  const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
  return vreinterpretq_u8_s8(vcombine_s8(vmovn_s16(ab), vmovn_s16(cd)));
}

// Per column panel of kBlocks * 4 columns: what the epilogue reads by column.
template <int kBlocks>
struct ColParamsN {
  int32x4_t bias[kBlocks], wzp[kBlocks], xsum[kBlocks];
  float32x4_t mult[kBlocks];
};
using ColParams = ColParamsN<kNr / 4>;

template <bool kWeightsLeft, int kBlocks>
inline void LoadColParams(const GemmS8Args& a, int64_t c0, int64_t ncol, ColParamsN<kBlocks>* cp) {
  const int32x4_t zero = vdupq_n_s32(0);
  for (int j = 0; j < kBlocks; ++j) cp->bias[j] = cp->wzp[j] = cp->xsum[j] = zero;
  for (int j = 0; j < kBlocks; ++j) cp->mult[j] = vdupq_n_f32(0.f);
  if (kWeightsLeft) {
    if (a.wzp) LoadCols(a.xsum + c0, ncol, cp->xsum);
  } else {
    LoadCols(a.bias + c0, ncol, cp->bias);
    LoadCols(a.mult + c0, ncol, cp->mult);
    if (a.wzp) LoadCols(a.wzp + c0, ncol, cp->wzp);
  }
}

// Folds bias and weight zero points into the tile rows ip.. of columns
// c0..c0+ncol, requantizes and stores the bytes. kBlocks is 3 or 1.
template <bool kWeightsLeft, int kRows, int kBlocks>
inline void StoreTile(const GemmS8Args& a, const ColParamsN<kBlocks>& cp, int64_t ip, int64_t c0,
                      int ncol, const int32x4_t (&acc)[kRows][kBlocks]) {
  static_assert(kBlocks == 3 || kBlocks == 1, "12 or 4 columns");
  const float32x4_t lo = vdupq_n_f32(float(a.lo - a.yzp)), hi = vdupq_n_f32(float(a.hi - a.yzp));
  const int32x4_t yzp = vdupq_n_s32(a.yzp);
  const int nrow = a.rows - ip < kRows ? int(a.rows - ip) : kRows;
  for (int r = 0; r < nrow; ++r) {
    const int64_t row = ip + r;
    int32x4_t q[4], sums[kBlocks];
    for (int j = 0; j < kBlocks; ++j) {
      int32x4_t v = acc[r][j];
      float32x4_t mult = cp.mult[j];
      if (kWeightsLeft) {
        v = vaddq_s32(v, vdupq_n_s32(a.bias[row]));
        if (a.wzp) v = vmlsq_s32(v, cp.xsum[j], vdupq_n_s32(a.wzp[row]));
        mult = vdupq_n_f32(a.mult[row]);
      } else {
        v = vaddq_s32(v, cp.bias[j]);
        if (a.wzp) v = vmlsq_s32(v, cp.wzp[j], vdupq_n_s32(a.xsum[row]));
      }
      sums[j] = v;
      q[j] = Requant(v, mult, lo, hi, yzp);
    }
    if (a.y32) {
      int32_t t[4 * kBlocks];
      for (int j = 0; j < kBlocks; ++j) vst1q_s32(t + 4 * j, sums[j]);
      std::memcpy(a.y32 + row * a.ldy + c0, t, size_t(ncol) * sizeof(int32_t));
      continue;
    }
    for (int j = kBlocks; j < 4; ++j) q[j] = q[kBlocks - 1];
    const uint8x16_t bytes = Narrow16(q[0], q[1], q[2], q[3]);
    uint8_t* y = a.y + row * a.ldy + c0;
    if (ncol == 4 * kBlocks) {
      if (kBlocks == 3) vst1_u8(y, vget_low_u8(bytes));
      vst1q_lane_u32(reinterpret_cast<uint32_t*>(y + 4 * kBlocks - 4), vreinterpretq_u32_u8(bytes),
                     kBlocks - 1);
    } else {
      uint8_t t[16];
      vst1q_u8(t, bytes);
      std::memcpy(y, t, size_t(ncol));
    }
  }
}

inline void RequantRowNeon(const int32_t* acc, int64_t n, int32_t bias, float mult, int32_t yzp,
                           int32_t lo, int32_t hi, uint8_t* y) {
  const float32x4_t vlo = vdupq_n_f32(float(lo - yzp)), vhi = vdupq_n_f32(float(hi - yzp));
  const float32x4_t vm = vdupq_n_f32(mult);
  const int32x4_t vz = vdupq_n_s32(yzp), vb = vdupq_n_s32(bias);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t len = n - i < 16 ? n - i : 16;
    int32_t t[16] = {};
    const int32_t* src = acc + i;
    if (len < 16) {
      std::memcpy(t, src, size_t(len) * sizeof(int32_t));
      src = t;
    }
    int32x4_t q[4];
    for (int j = 0; j < 4; ++j)
      q[j] = Requant(vaddq_s32(vld1q_s32(src + 4 * j), vb), vm, vlo, vhi, vz);
    const uint8x16_t bytes = Narrow16(q[0], q[1], q[2], q[3]);
    if (len == 16) {
      vst1q_u8(y + i, bytes);
    } else {
      uint8_t b[16];
      vst1q_u8(b, bytes);
      std::memcpy(y + i, b, size_t(len));
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
