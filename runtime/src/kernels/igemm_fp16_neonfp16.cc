// The fp16 microkernel (igemm_fp16.h) on Armv8.2 FEAT_FP16: 8 rows by 16
// columns, each step one 8-channel load per row and 16 fmla .8h by element
// (2 weight vectors x 8 rows), so the weights are loaded once per 8 rows.
// The 16 fp16 accumulators are widened into fp32 sums every kFp16Chunk
// products (2 fcvtl and 2 fadd per accumulator); fewer rows (a Gemm with
// one row) run a narrower copy of the same loop instead of 8 repeated rows.
#include <arm_neon.h>

#include "kernels/igemm_fp16.h"

// Every loop over rows or vectors fully unrolled, so the accumulator arrays
// become registers (GCC otherwise keeps them in memory).
#define QFOLD_UNROLL _Pragma("GCC unroll 16")

namespace qfold {
namespace kernels {
namespace {

template <int MR>
struct Acc {
  float16x8_t h[MR][2];  // this chunk's sums, fp16
  // The finished chunks' sums, fp32, in memory: touched once per chunk, and
  // as registers they would leave too few for the fp16 loop (GCC then spills
  // accumulators inside it).
  float s[MR][16];
};

template <int MR>
inline void Widen(Acc<MR>& acc) {
  QFOLD_UNROLL
  for (int r = 0; r < MR; ++r) {
    QFOLD_UNROLL
    for (int v = 0; v < 2; ++v) {
      float* s = acc.s[r] + 8 * v;
      vst1q_f32(s, vaddq_f32(vld1q_f32(s), vcvt_f32_f16(vget_low_f16(acc.h[r][v]))));
      vst1q_f32(s + 4, vaddq_f32(vld1q_f32(s + 4), vcvt_high_f32_f16(acc.h[r][v])));
      acc.h[r][v] = vdupq_n_f16(0);
    }
  }
}

// acc += w * a[lane] (fmla .8h by element). In asm because GCC 12 turns
// vfmaq_laneq_f16 into dup + fmla (and spills) once the lane's register is
// v16-v31, which the half-precision by-element form cannot encode; the "x"
// constraint keeps a in v0-v15.
#define QFOLD_FMLA_LANE(acc, w, a, lane) \
  asm("fmla %0.8h, %1.8h, %2.h[" #lane "]" : "+w"(acc) : "w"(w), "x"(a))

// Channel `lane` of the 8 loaded per row, times the 16 columns of its weights.
#define QFOLD_FP16_STEP(lane)                                                 \
  do {                                                                        \
    const float16x8_t w0 = vld1q_f16(w + lane * 16), w1 = vld1q_f16(w + lane * 16 + 8); \
    QFOLD_UNROLL                                                              \
    for (int r = 0; r < MR; ++r) {                                            \
      QFOLD_FMLA_LANE(acc.h[r][0], w0, av[r], lane);                          \
      QFOLD_FMLA_LANE(acc.h[r][1], w1, av[r], lane);                          \
    }                                                                         \
  } while (0)

inline float ActScalar(float v, F32Act act, float lo, float hi) {
  if (act == F32Act::kRelu) return v > 0.f ? v : 0.f;
  if (act == F32Act::kClamp) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

inline float32x4_t ActVec(float32x4_t v, F32Act act, float32x4_t lo, float32x4_t hi) {
  if (act == F32Act::kRelu) return vmaxq_f32(v, vdupq_n_f32(0.f));
  if (act == F32Act::kClamp) return vminq_f32(vmaxq_f32(v, lo), hi);
  return v;
}

// Rows < min(MR, p.rows) of the fp32 sums s[row][16] to y: bias, residual,
// activation; only p.cols columns are written.
template <int MR>
void Store(const float (&s)[MR][16], const IgemmFp16Args& p) {
  const float32x4_t lo = vdupq_n_f32(p.lo), hi = vdupq_n_f32(p.hi);
  for (int r = 0; r < MR && r < p.rows; ++r) {
    float* y = p.y + r * p.ldy;
    const float* res = p.residual ? p.residual + r * p.ldy : nullptr;
    if (p.cols == kFp16Nr) {
      QFOLD_UNROLL
      for (int v = 0; v < 4; ++v) {
        float32x4_t x = vld1q_f32(s[r] + 4 * v);
        if (p.bias) x = vaddq_f32(x, vld1q_f32(p.bias + 4 * v));
        if (res) x = vaddq_f32(x, vld1q_f32(res + 4 * v));
        vst1q_f32(y + 4 * v, ActVec(x, p.act, lo, hi));
      }
      continue;
    }
    for (int64_t j = 0; j < p.cols; ++j) {
      float x = s[r][j];
      if (p.bias) x += p.bias[j];
      if (res) x += res[j];
      y[j] = ActScalar(x, p.act, p.lo, p.hi);
    }
  }
}

template <int MR>
void Tile(const IgemmFp16Args& p) {
  Acc<MR> acc;
  QFOLD_UNROLL
  for (int r = 0; r < MR; ++r) {
    acc.h[r][0] = acc.h[r][1] = vdupq_n_f16(0);
    QFOLD_UNROLL
    for (int v = 0; v < 16; ++v) acc.s[r][v] = 0.f;
  }
  const float16_t* w = reinterpret_cast<const float16_t*>(p.w);
  constexpr int64_t kBlocksPerChunk = kFp16Chunk / 8;
  int64_t left = kBlocksPerChunk;  // 8-channel blocks until the next widening
  for (int64_t t = 0; t < p.taps; ++t) {
    const float16_t* a[MR];
    QFOLD_UNROLL
    for (int r = 0; r < MR; ++r) a[r] = reinterpret_cast<const float16_t*>(p.a[t * kFp16Mr + r]);
    for (int64_t q = 0; q < p.kc; q += 8, w += 8 * kFp16Nr) {
      float16x8_t av[MR];
      QFOLD_UNROLL
      for (int r = 0; r < MR; ++r) av[r] = vld1q_f16(a[r] + q);
      QFOLD_FP16_STEP(0);
      QFOLD_FP16_STEP(1);
      QFOLD_FP16_STEP(2);
      QFOLD_FP16_STEP(3);
      QFOLD_FP16_STEP(4);
      QFOLD_FP16_STEP(5);
      QFOLD_FP16_STEP(6);
      QFOLD_FP16_STEP(7);
      if (--left == 0) {
        Widen(acc);
        left = kBlocksPerChunk;
      }
    }
  }
  Widen(acc);
  Store(acc.s, p);
}

// The 8-row tile's 8-channel block in asm: a's 8 rows pinned to v0-v7 (the
// by-element half form reads lanes of v0-v15 only), the 16 fp16 accumulators
// to v16-v31, weights through v8-v11; two statements (columns 0-7, then
// 8-15) because one would need more than GCC's 30 asm operands. Intrinsics
// leave GCC 12 moving every lane into v0 and spilling accumulators.
#define QFOLD_S(x) #x
#define QFOLD_FM(l, wr, r, h) \
  "fmla v" QFOLD_S(h) ".8h, v" QFOLD_S(wr) ".8h, v" QFOLD_S(r) ".h[" QFOLD_S(l) "]\n"
// Lane l of every row times the 8 weights at w + off bytes, into h, h+2, ... h+14.
#define QFOLD_LANE(l, wr, off, h0, h1, h2, h3, h4, h5, h6, h7)                           \
  "ldr q" QFOLD_S(wr) ", [%[w], #" QFOLD_S(off) "]\n" QFOLD_FM(l, wr, 0, h0)             \
      QFOLD_FM(l, wr, 1, h1) QFOLD_FM(l, wr, 2, h2) QFOLD_FM(l, wr, 3, h3)                \
          QFOLD_FM(l, wr, 4, h4) QFOLD_FM(l, wr, 5, h5) QFOLD_FM(l, wr, 6, h6)            \
              QFOLD_FM(l, wr, 7, h7)
#define QFOLD_HALF(o, h0, h1, h2, h3, h4, h5, h6, h7)                                    \
  QFOLD_LANE(0, 8, 0 + o, h0, h1, h2, h3, h4, h5, h6, h7)                                 \
  QFOLD_LANE(1, 9, 32 + o, h0, h1, h2, h3, h4, h5, h6, h7)                                \
  QFOLD_LANE(2, 10, 64 + o, h0, h1, h2, h3, h4, h5, h6, h7)                               \
  QFOLD_LANE(3, 11, 96 + o, h0, h1, h2, h3, h4, h5, h6, h7)                               \
  QFOLD_LANE(4, 8, 128 + o, h0, h1, h2, h3, h4, h5, h6, h7)                               \
  QFOLD_LANE(5, 9, 160 + o, h0, h1, h2, h3, h4, h5, h6, h7)                               \
  QFOLD_LANE(6, 10, 192 + o, h0, h1, h2, h3, h4, h5, h6, h7)                              \
  QFOLD_LANE(7, 11, 224 + o, h0, h1, h2, h3, h4, h5, h6, h7)

// Accumulator v<h> (8 columns of one row) added into the 8 fp32 sums at
// s + off bytes through temporaries v<t0>..v<t3>, then zeroed.
#define QFOLD_W1(h, t0, t1, t2, t3, off)                                                   \
  "fcvtl v" QFOLD_S(t0) ".4s, v" QFOLD_S(h) ".4h\n"                                        \
  "fcvtl2 v" QFOLD_S(t1) ".4s, v" QFOLD_S(h) ".8h\n"                                       \
  "ldp q" QFOLD_S(t2) ", q" QFOLD_S(t3) ", [%[s], #" QFOLD_S(off) "]\n"                    \
  "fadd v" QFOLD_S(t2) ".4s, v" QFOLD_S(t2) ".4s, v" QFOLD_S(t0) ".4s\n"                   \
  "fadd v" QFOLD_S(t3) ".4s, v" QFOLD_S(t3) ".4s, v" QFOLD_S(t1) ".4s\n"                   \
  "stp q" QFOLD_S(t2) ", q" QFOLD_S(t3) ", [%[s], #" QFOLD_S(off) "]\n"                    \
  "movi v" QFOLD_S(h) ".2d, #0\n"

void Tile8(const IgemmFp16Args& p) {
  float s[8][16] = {};  // the finished chunks' fp32 sums
  register float16x8_t h0 asm("v16") = vdupq_n_f16(0), h1 asm("v17") = vdupq_n_f16(0);
  register float16x8_t h2 asm("v18") = vdupq_n_f16(0), h3 asm("v19") = vdupq_n_f16(0);
  register float16x8_t h4 asm("v20") = vdupq_n_f16(0), h5 asm("v21") = vdupq_n_f16(0);
  register float16x8_t h6 asm("v22") = vdupq_n_f16(0), h7 asm("v23") = vdupq_n_f16(0);
  register float16x8_t h8 asm("v24") = vdupq_n_f16(0), h9 asm("v25") = vdupq_n_f16(0);
  register float16x8_t h10 asm("v26") = vdupq_n_f16(0), h11 asm("v27") = vdupq_n_f16(0);
  register float16x8_t h12 asm("v28") = vdupq_n_f16(0), h13 asm("v29") = vdupq_n_f16(0);
  register float16x8_t h14 asm("v30") = vdupq_n_f16(0), h15 asm("v31") = vdupq_n_f16(0);
  // Widening, in asm as well: GCC's version of it kept a second copy of s
  // and took about 140 cycles per chunk on LLVM's Cortex-A76 model.
#define QFOLD_WIDEN()                                                                    \
  asm(QFOLD_W1(16, 0, 1, 2, 3, 0) QFOLD_W1(18, 4, 5, 6, 7, 64)                            \
          QFOLD_W1(20, 8, 9, 10, 11, 128) QFOLD_W1(22, 12, 13, 14, 15, 192)               \
              QFOLD_W1(24, 0, 1, 2, 3, 256) QFOLD_W1(26, 4, 5, 6, 7, 320)                 \
                  QFOLD_W1(28, 8, 9, 10, 11, 384) QFOLD_W1(30, 12, 13, 14, 15, 448)       \
      : "+w"(h0), "+w"(h2), "+w"(h4), "+w"(h6), "+w"(h8), "+w"(h10), "+w"(h12), "+w"(h14),  \
        "+m"(s)                                                                          \
      : [s] "r"(&s[0][0])                                                                \
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",   \
        "v13", "v14", "v15");                                                            \
  asm(QFOLD_W1(17, 0, 1, 2, 3, 32) QFOLD_W1(19, 4, 5, 6, 7, 96)                           \
          QFOLD_W1(21, 8, 9, 10, 11, 160) QFOLD_W1(23, 12, 13, 14, 15, 224)               \
              QFOLD_W1(25, 0, 1, 2, 3, 288) QFOLD_W1(27, 4, 5, 6, 7, 352)                 \
                  QFOLD_W1(29, 8, 9, 10, 11, 416) QFOLD_W1(31, 12, 13, 14, 15, 480)       \
      : "+w"(h1), "+w"(h3), "+w"(h5), "+w"(h7), "+w"(h9), "+w"(h11), "+w"(h13), "+w"(h15),  \
        "+m"(s)                                                                          \
      : [s] "r"(&s[0][0])                                                                \
      : "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",   \
        "v13", "v14", "v15")
  const uint16_t* w = p.w;
  constexpr int64_t kBlocksPerChunk = kFp16Chunk / 8;
  int64_t left = kBlocksPerChunk;  // 8-channel blocks until the next widening
  for (int64_t t = 0; t < p.taps; ++t) {
    const uint16_t* const* a = p.a + t * kFp16Mr;
    for (int64_t q = 0; q < p.kc; q += 8, w += 8 * kFp16Nr) {
      register float16x8_t a0 asm("v0") = vld1q_f16(reinterpret_cast<const float16_t*>(a[0]) + q);
      register float16x8_t a1 asm("v1") = vld1q_f16(reinterpret_cast<const float16_t*>(a[1]) + q);
      register float16x8_t a2 asm("v2") = vld1q_f16(reinterpret_cast<const float16_t*>(a[2]) + q);
      register float16x8_t a3 asm("v3") = vld1q_f16(reinterpret_cast<const float16_t*>(a[3]) + q);
      register float16x8_t a4 asm("v4") = vld1q_f16(reinterpret_cast<const float16_t*>(a[4]) + q);
      register float16x8_t a5 asm("v5") = vld1q_f16(reinterpret_cast<const float16_t*>(a[5]) + q);
      register float16x8_t a6 asm("v6") = vld1q_f16(reinterpret_cast<const float16_t*>(a[6]) + q);
      register float16x8_t a7 asm("v7") = vld1q_f16(reinterpret_cast<const float16_t*>(a[7]) + q);
      asm(QFOLD_HALF(0, 16, 18, 20, 22, 24, 26, 28, 30)
          : "+w"(h0), "+w"(h2), "+w"(h4), "+w"(h6), "+w"(h8), "+w"(h10), "+w"(h12), "+w"(h14)
          : "w"(a0), "w"(a1), "w"(a2), "w"(a3), "w"(a4), "w"(a5), "w"(a6), "w"(a7), [w] "r"(w),
            "m"(*reinterpret_cast<const uint16_t(*)[128]>(w))
          : "v8", "v9", "v10", "v11");
      asm(QFOLD_HALF(16, 17, 19, 21, 23, 25, 27, 29, 31)
          : "+w"(h1), "+w"(h3), "+w"(h5), "+w"(h7), "+w"(h9), "+w"(h11), "+w"(h13), "+w"(h15)
          : "w"(a0), "w"(a1), "w"(a2), "w"(a3), "w"(a4), "w"(a5), "w"(a6), "w"(a7), [w] "r"(w),
            "m"(*reinterpret_cast<const uint16_t(*)[128]>(w))
          : "v8", "v9", "v10", "v11");
      if (--left == 0) {
        QFOLD_WIDEN();
        left = kBlocksPerChunk;
      }
    }
  }
  QFOLD_WIDEN();
  Store(s, p);
}

void IgemmFp16(const IgemmFp16Args& p) {
  if (p.rows <= 1)
    Tile<1>(p);
  else if (p.rows <= 2)
    Tile<2>(p);
  else if (p.rows <= 4)
    Tile<4>(p);
  else
    Tile8(p);
}

void ConvertFp16(const float* x, int64_t rows, int64_t c, uint16_t* out, int64_t kc) {
  for (int64_t i = 0; i < rows; ++i, x += c, out += kc) {
    float16_t* o = reinterpret_cast<float16_t*>(out);
    int64_t j = 0;
    for (; j + 8 <= c; j += 8)
      vst1q_f16(o + j, vcombine_f16(vcvt_f16_f32(vld1q_f32(x + j)),
                                    vcvt_f16_f32(vld1q_f32(x + j + 4))));
    for (; j < c; ++j) o[j] = float16_t(x[j]);  // fcvt: the same rounding
    for (; j < kc; ++j) o[j] = float16_t(0.f);
  }
}

}  // namespace

extern const Fp16Kernels kFp16NeonFp16;
const Fp16Kernels kFp16NeonFp16 = {"neonfp16", ConvertFp16, IgemmFp16};

}  // namespace kernels
}  // namespace qfold
