// The a16 x a16 microkernel (qmatmul_a16a16.h) on Armv8.0 NEON, the
// counterpart of the AVX2 one: 4 rows by 8 columns, smlal by a lane
// (vmlal_lane_s16) of the row's pair against the de-interleaved panel (vld2q),
// the two byte planes of B in separate int32 accumulators, exact over
// kA16A16Chunk pairs and then widened into int64: total += lo + 256 * hi.
#include <arm_neon.h>

#include <cstring>

#include "kernels/qmatmul_a16a16.h"

namespace qfold {
namespace kernels {
namespace {

// acc[0]: columns 0-3, acc[1]: columns 4-7, of one row and one plane. `b` holds
// the panel's pair p de-interleaved: val[0] the first of each column's pair,
// val[1] the second; `av` the row's pair as a0 a1 a0 a1.
inline void Madd(int32x4_t (&acc)[2], const int16x8x2_t& b, int16x4_t av) {
  acc[0] = vmlal_lane_s16(acc[0], vget_low_s16(b.val[0]), av, 0);
  acc[0] = vmlal_lane_s16(acc[0], vget_low_s16(b.val[1]), av, 1);
  acc[1] = vmlal_lane_s16(acc[1], vget_high_s16(b.val[0]), av, 0);
  acc[1] = vmlal_lane_s16(acc[1], vget_high_s16(b.val[1]), av, 1);
}

// out[0..3] += sign-extended l + 256 * sign-extended h (4 columns, int64).
inline void Widen(int32x4_t l, int32x4_t h, int64_t* out) {
  const int64x2_t lo01 = vmovl_s32(vget_low_s32(l)), lo23 = vmovl_high_s32(l);
  const int64x2_t hi01 = vmovl_s32(vget_low_s32(h)), hi23 = vmovl_high_s32(h);
  vst1q_s64(out, vaddq_s64(vld1q_s64(out), vaddq_s64(lo01, vshlq_n_s64(hi01, 8))));
  vst1q_s64(out + 2, vaddq_s64(vld1q_s64(out + 2), vaddq_s64(lo23, vshlq_n_s64(hi23, 8))));
}

void A16A16GemmNeon(const int16_t* const* a, const int16_t* lo, const int16_t* hi, int64_t kpairs,
                    int64_t* out) {
  for (int i = 0; i < 4 * kA16A16Cols; ++i) out[i] = 0;
  for (int64_t p0 = 0; p0 < kpairs; p0 += kA16A16Chunk) {
    const int64_t pe = kpairs < p0 + kA16A16Chunk ? kpairs : p0 + kA16A16Chunk;
    // sl[r] / sh[r]: row r against the low / high byte plane.
    int32x4_t sl[4][2], sh[4][2];
    for (int r = 0; r < 4; ++r) sl[r][0] = sl[r][1] = sh[r][0] = sh[r][1] = vdupq_n_s32(0);
    for (int64_t p = p0; p < pe; ++p) {
      const int16x8x2_t vl = vld2q_s16(lo + p * 2 * kA16A16Cols);
      const int16x8x2_t vh = vld2q_s16(hi + p * 2 * kA16A16Cols);
      for (int r = 0; r < 4; ++r) {
        int32_t pair;
        std::memcpy(&pair, a[r] + 2 * p, sizeof(pair));
        const int16x4_t av = vreinterpret_s16_s32(vdup_n_s32(pair));  // a0 a1 a0 a1
        Madd(sl[r], vl, av);
        Madd(sh[r], vh, av);
      }
    }
    for (int r = 0; r < 4; ++r) {
      Widen(sl[r][0], sh[r][0], out + r * kA16A16Cols);
      Widen(sl[r][1], sh[r][1], out + r * kA16A16Cols + 4);
    }
  }
}

}  // namespace

extern const A16A16GemmFn kA16A16GemmNeon = A16A16GemmNeon;

}  // namespace kernels
}  // namespace qfold
