// Armv8.0 NEON channels-last fp32 convolution microkernels (conv_f32_nhwc.h).
// Indirect GEMM: 8 pixels x 8 channels, 16 q-register accumulators. Each
// step of 4 input channels loads one vector of 4 channels per pixel (8
// vectors) and two weight vectors per channel (8, by 4 ldp) for 64 fmla by
// lane: 16 vectors per 64 FMAs, against 4x16's 20 (4 pixels, 16 weight
// vectors), and 16 + 8 + 2 live vectors fit the 32 registers without spills.
// llvm-mca's steady state on Cortex-A53/A72/A76 is in docs/KERNELS.md.
// A panel of at most 4 channels runs on one vector, a tile of at most 4
// pixels on 4 rows; partial vectors of the epilogue go lane by lane (NEON
// has no masked loads or stores).
// Depthwise: 8 channels of 4 pixels of a row run share each tap's weight
// loads; the channels past a multiple of 4 are summed in scalar FMAs.
// Winograd transforms (conv_f32_nhwc_winograd.h): 4 channels per vector, the
// rest by the scalar lanes.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "kernels/conv_f32_nhwc.h"
#include "kernels/conv_f32_nhwc_winograd.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 8, kNr = 8;

// As gemm_f32_neon.cc: x > 0 ? x : 0 and x < lo ? lo : (x > hi ? hi : x),
// so NaN becomes 0 under Relu and passes through Clip, like the reference.
inline float32x4_t Activate(float32x4_t x, F32Act act, float lo_v, float hi_v) {
  if (act == F32Act::kRelu) {
    const float32x4_t zero = vdupq_n_f32(0.f);
    return vbslq_f32(vcgtq_f32(x, zero), x, zero);
  }
  if (act == F32Act::kClamp) {
    const float32x4_t lo = vdupq_n_f32(lo_v), hi = vdupq_n_f32(hi_v);
    return vbslq_f32(vcltq_f32(x, lo), lo, vbslq_f32(vcgtq_f32(x, hi), hi, x));
  }
  return x;
}

// The first n (0 to 4) lanes from p, zeros past them; nothing past p[n - 1] is read.
inline float32x4_t LoadPart(const float* p, int64_t n) {
  if (n >= 4) return vld1q_f32(p);
  float32x4_t v = vdupq_n_f32(0.f);
  if (n > 0) v = vld1q_lane_f32(p, v, 0);
  if (n > 1) v = vld1q_lane_f32(p + 1, v, 1);
  if (n > 2) v = vld1q_lane_f32(p + 2, v, 2);
  return v;
}

inline void StorePart(float* p, int64_t n, float32x4_t v) {
  if (n >= 4) {
    vst1q_f32(p, v);
    return;
  }
  if (n > 0) vst1q_lane_f32(p, v, 0);
  if (n > 1) vst1q_lane_f32(p + 1, v, 1);
  if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}

// One input channel (lane L of each pixel's vector x0..x7) into the
// accumulators: c<row><vector> += w[L * kNr + 4 * vector] * x<row>[L]. The
// accumulators are named variables, not an array (see conv_f32_nhwc_avx2.cc:
// GCC keeps an array indexed across the tap loop in memory).
#define QFOLD_ROW(r, L)                                          \
  if (R > r) {                                                   \
    c##r##0 = vfmaq_laneq_f32(c##r##0, b0, x##r, L);             \
    if (V == 2) c##r##1 = vfmaq_laneq_f32(c##r##1, b1, x##r, L); \
  }
#define QFOLD_LANE(L)                              \
  {                                                \
    b0 = vld1q_f32(w + (L)*kNr);                   \
    b1 = V == 2 ? vld1q_f32(w + (L)*kNr + 4) : b0; \
    QFOLD_ROW(0, L)                                \
    QFOLD_ROW(1, L)                                \
    QFOLD_ROW(2, L)                                \
    QFOLD_ROW(3, L)                                \
    QFOLD_ROW(4, L)                                \
    QFOLD_ROW(5, L)                                \
    QFOLD_ROW(6, L)                                \
    QFOLD_ROW(7, L)                                \
  }

// R pixel rows (4 or 8), V vectors of 4 channels (1 or 2). Every output
// sums its taps, then channels, in order, whatever R, V or the tile.
template <int R, int V>
void IgemmTile(const IgemmF32Args& p) {
  float32x4_t c00 = vdupq_n_f32(0.f), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  float32x4_t c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  float32x4_t c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const float* w = p.w;
  const int64_t c4 = p.c & ~int64_t(3);
  for (int64_t t = 0; t < p.taps; ++t) {
    const float* const* a = p.a + t * kMr;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = a[R > 4 ? 4 : 0], *a5 = a[R > 4 ? 5 : 0];
    const float *a6 = a[R > 4 ? 6 : 0], *a7 = a[R > 4 ? 7 : 0];
    int64_t ch = 0;
    for (; ch < c4; ch += 4, w += 4 * kNr) {
      // Lane-major: 16 independent accumulators between two fmla into one.
      const float32x4_t x0 = vld1q_f32(a0 + ch), x1 = vld1q_f32(a1 + ch);
      const float32x4_t x2 = vld1q_f32(a2 + ch), x3 = vld1q_f32(a3 + ch);
      const float32x4_t x4 = R > 4 ? vld1q_f32(a4 + ch) : x0;
      const float32x4_t x5 = R > 4 ? vld1q_f32(a5 + ch) : x0;
      const float32x4_t x6 = R > 4 ? vld1q_f32(a6 + ch) : x0;
      const float32x4_t x7 = R > 4 ? vld1q_f32(a7 + ch) : x0;
      float32x4_t b0, b1;
      QFOLD_LANE(0)
      QFOLD_LANE(1)
      QFOLD_LANE(2)
      QFOLD_LANE(3)
    }
    // The last c % 4 channels one at a time (lane 0 of a broadcast).
    for (; ch < p.c; ++ch, w += kNr) {
      const float32x4_t x0 = vld1q_dup_f32(a0 + ch), x1 = vld1q_dup_f32(a1 + ch);
      const float32x4_t x2 = vld1q_dup_f32(a2 + ch), x3 = vld1q_dup_f32(a3 + ch);
      const float32x4_t x4 = R > 4 ? vld1q_dup_f32(a4 + ch) : x0;
      const float32x4_t x5 = R > 4 ? vld1q_dup_f32(a5 + ch) : x0;
      const float32x4_t x6 = R > 4 ? vld1q_dup_f32(a6 + ch) : x0;
      const float32x4_t x7 = R > 4 ? vld1q_dup_f32(a7 + ch) : x0;
      float32x4_t b0, b1;
      QFOLD_LANE(0)
    }
  }
  const float32x4_t acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                                   {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  int64_t n[V];
  float32x4_t bias[V];
  for (int v = 0; v < V; ++v) {
    n[v] = std::max<int64_t>(0, std::min<int64_t>(4, p.cols - 4 * v));
    bias[v] = p.bias ? LoadPart(p.bias + 4 * v, n[v]) : vdupq_n_f32(0.f);
  }
  for (int r = 0; r < R && r < p.rows; ++r)
    for (int v = 0; v < V; ++v) {
      if (n[v] == 0) break;
      float32x4_t x = vaddq_f32(acc[r][v], bias[v]);
      if (p.residual) x = vaddq_f32(x, LoadPart(p.residual + r * p.ldy + 4 * v, n[v]));
      StorePart(p.y + r * p.ldy + 4 * v, n[v], Activate(x, p.act, p.lo, p.hi));
    }
}

#undef QFOLD_LANE
#undef QFOLD_ROW

void IgemmNeon(const IgemmF32Args& p) {
  if (p.rows <= 4) {
    if (p.cols <= 4)
      IgemmTile<4, 1>(p);
    else
      IgemmTile<4, 2>(p);
  } else if (p.cols <= 4) {
    IgemmTile<8, 1>(p);
  } else {
    IgemmTile<8, 2>(p);
  }
}

// Channels [ch, ch + 4 * U) of P pixels (1 or 4, the taps of pixel q at
// a[t] + off + q * step), each tap's weights loaded once for all P.
template <int U, int P>
inline void DwBlock(const DwNhwcF32Args& p, const float* const* a, int64_t off, int64_t step,
                    int64_t ch, float* y) {
  float32x4_t s00 = vdupq_n_f32(0.f), s01 = s00, s10 = s00, s11 = s00;
  float32x4_t s20 = s00, s21 = s00, s30 = s00, s31 = s00;
  const float* w = p.w + ch;
  for (int64_t t = 0; t < p.taps; ++t, w += p.c) {
    const float* x = a[t] + off + ch;
    // All loads first: the file is compiled without GCC's first scheduling
    // pass (runtime/CMakeLists.txt), which would otherwise put each fmla right
    // behind its load, a stall per fmla on the in-order Cortex-A53.
    const float32x4_t w0 = vld1q_f32(w), w1 = U == 2 ? vld1q_f32(w + 4) : w0;
    const float32x4_t x00 = vld1q_f32(x), x01 = U == 2 ? vld1q_f32(x + 4) : w0;
    const float32x4_t x10 = P > 1 ? vld1q_f32(x + step) : w0;
    const float32x4_t x11 = P > 1 && U == 2 ? vld1q_f32(x + step + 4) : w0;
    const float32x4_t x20 = P > 1 ? vld1q_f32(x + 2 * step) : w0;
    const float32x4_t x21 = P > 1 && U == 2 ? vld1q_f32(x + 2 * step + 4) : w0;
    const float32x4_t x30 = P > 1 ? vld1q_f32(x + 3 * step) : w0;
    const float32x4_t x31 = P > 1 && U == 2 ? vld1q_f32(x + 3 * step + 4) : w0;
    s00 = vfmaq_f32(s00, x00, w0);
    if (U == 2) s01 = vfmaq_f32(s01, x01, w1);
    if (P > 1) {
      s10 = vfmaq_f32(s10, x10, w0);
      if (U == 2) s11 = vfmaq_f32(s11, x11, w1);
      s20 = vfmaq_f32(s20, x20, w0);
      if (U == 2) s21 = vfmaq_f32(s21, x21, w1);
      s30 = vfmaq_f32(s30, x30, w0);
      if (U == 2) s31 = vfmaq_f32(s31, x31, w1);
    }
  }
  const float32x4_t acc[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
  for (int u = 0; u < U; ++u) {
    const float32x4_t b = p.bias ? vld1q_f32(p.bias + ch + 4 * u) : vdupq_n_f32(0.f);
    for (int q = 0; q < P; ++q)
      vst1q_f32(y + q * p.ldy + ch + 4 * u, Activate(vaddq_f32(acc[q][u], b), p.act, p.lo, p.hi));
  }
}

// Channels [c4, c) (fewer than 4) of P pixels, as DwBlock's sums but one
// channel at a time.
inline void DwTail(const DwNhwcF32Args& p, const float* const* a, int64_t off, int64_t step, int P,
                   int64_t c4, float* y) {
  for (int q = 0; q < P; ++q)
    for (int64_t ch = c4; ch < p.c; ++ch) {
      float acc = 0.f;
      for (int64_t t = 0; t < p.taps; ++t)
        acc = std::fma(a[t][off + q * step + ch], p.w[t * p.c + ch], acc);
      const float v = acc + (p.bias ? p.bias[ch] : 0.f);
      y[q * p.ldy + ch] = WinogradActivate(v, p.act, p.lo, p.hi);  // the scalar epilogue
    }
}

template <int P>
void DwPixels(const DwNhwcF32Args& p, const float* const* a, int64_t off, int64_t step, float* y) {
  const int64_t c8 = p.c & ~int64_t(7), c4 = p.c & ~int64_t(3);
  for (int64_t ch = 0; ch < c8; ch += 8) DwBlock<2, P>(p, a, off, step, ch, y);
  if (c4 > c8) DwBlock<1, P>(p, a, off, step, c8, y);
  if (p.c > c4) DwTail(p, a, off, step, P, c4, y);
}

void DwNeon(const DwNhwcF32Args& p) {
  int64_t px = 0;
  // A row run: four pixels at a time share the weight loads.
  if (p.a_step)
    for (; px + 4 <= p.pixels; px += 4)
      DwPixels<4>(p, p.a, px * p.a_step, p.a_step, p.y + px * p.ldy);
  for (; px < p.pixels; ++px) {
    const float* const* a = p.a_step ? p.a : p.a + px * p.taps;
    DwPixels<1>(p, a, px * p.a_step, 0, p.y + px * p.ldy);
  }
}

// Winograd lanes (conv_f32_nhwc_winograd.h): 4 channels, the rest by the
// scalar lanes.
struct WinogradQ {
  using F = float32x4_t;
  using Mask = int;
  static constexpr int kLanes = 4;
  static constexpr bool kMaskedTail = false;
  static Mask Tail(int64_t) { return 0; }
  static F LoadTail(const float* p, Mask) { return vld1q_f32(p); }
  static void StoreTail(float* p, Mask, F v) { vst1q_f32(p, v); }
  static F Add(F a, F b) { return vaddq_f32(a, b); }
  static F Sub(F a, F b) { return vsubq_f32(a, b); }
  static F Mul(F a, F b) { return vmulq_f32(a, b); }
  static F Set(float v) { return vdupq_n_f32(v); }
  static F Zero() { return vdupq_n_f32(0.f); }
  static F Act(F x, F32Act act, float lo, float hi) { return Activate(x, act, lo, hi); }
  static bool AnyNan(F v) { return vmaxvq_u32(vmvnq_u32(vceqq_f32(v, v))) != 0; }
};

// 4 pixels of three planes at a time into interleaved floats (st3).
void Interleave3Neon(const float* src, int64_t plane, int64_t width, float* dst) {
  const float *r = src, *g = src + plane, *bl = src + 2 * plane;
  int64_t i = 0;
  for (; i + 4 <= width; i += 4) {
    float32x4x3_t v;
    v.val[0] = vld1q_f32(r + i);
    v.val[1] = vld1q_f32(g + i);
    v.val[2] = vld1q_f32(bl + i);
    vst3q_f32(dst + 3 * i, v);
  }
  for (; i < width; ++i) {
    dst[3 * i] = r[i];
    dst[3 * i + 1] = g[i];
    dst[3 * i + 2] = bl[i];
  }
}

}  // namespace

extern const ConvNhwcF32Kernels kConvNhwcF32Neon;
const ConvNhwcF32Kernels kConvNhwcF32Neon = {"neon",
                                             kMr,
                                             kNr,
                                             IgemmNeon,
                                             DwNeon,
                                             WinogradInput<WinogradQ, 2>,
                                             WinogradOutput<WinogradQ, 2>,
                                             nullptr,
                                             nullptr,
                                             WinogradInput<WinogradQ, 4>,
                                             WinogradOutput<WinogradQ, 4>,
                                             Interleave3Neon};

}  // namespace kernels
}  // namespace qfold
