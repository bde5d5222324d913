// NEON fp32 GEMM for aarch64 (gemm_f32.h): 8x12 tiles, 24 q-register
// accumulators; each k step loads 3 right vectors and the 8 left values as
// two vectors, multiplied in by lane (fmla v.4s, v.4s, v.s[i]). Edge tiles
// are instantiated per row count and vector count.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_f32.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 8, kNr = 12, kV = kNr / 4;
constexpr int64_t kKc = 256;

struct Tile {
  int64_t row0, col0;
  int ncols;
  bool first, last;
};

// Row r, vector v of the tile's accumulators: named variables, not an array.
// With float32x4_t acc[R][V] GCC kept the array in memory and stored all
// R * V accumulators every k step (12 stp beside 24 fmla in the 8x12 loop).
#define QFOLD_FMA(r, v, a, lane) \
  if constexpr (r < R && v < V) c##r##v = vfmaq_laneq_f32(c##r##v, b##v, a, lane);
#define QFOLD_ROW(r, a, lane) \
  QFOLD_FMA(r, 0, a, lane) QFOLD_FMA(r, 1, a, lane) QFOLD_FMA(r, 2, a, lane)

template <int R, int V>
void Block(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, const Tile& t) {
  static_assert(R <= 8 && V <= 3, "the 8x12 tile");
  float32x4_t c00 = vdupq_n_f32(0.f), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
  float32x4_t c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
  float32x4_t c40 = c00, c41 = c00, c42 = c00, c50 = c00, c51 = c00, c52 = c00;
  float32x4_t c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
  for (int64_t k = 0; k < kc; ++k, lp += kMr, rp += kNr) {
    const float32x4_t b0 = vld1q_f32(rp);
    const float32x4_t b1 = V > 1 ? vld1q_f32(rp + 4) : b0;
    const float32x4_t b2 = V > 2 ? vld1q_f32(rp + 8) : b0;
    // The packed left panel always holds kMr values per k (zeros past the end).
    const float32x4_t a0 = vld1q_f32(lp), a1 = vld1q_f32(lp + 4);
    QFOLD_ROW(0, a0, 0)
    QFOLD_ROW(1, a0, 1)
    QFOLD_ROW(2, a0, 2)
    QFOLD_ROW(3, a0, 3)
    QFOLD_ROW(4, a1, 0)
    QFOLD_ROW(5, a1, 1)
    QFOLD_ROW(6, a1, 2)
    QFOLD_ROW(7, a1, 3)
  }
  const float32x4_t acc[8][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22},
                                 {c30, c31, c32}, {c40, c41, c42}, {c50, c51, c52},
                                 {c60, c61, c62}, {c70, c71, c72}};
  const float32x4_t alpha = vdupq_n_f32(a.alpha), zero = vdupq_n_f32(0.f);
  const float32x4_t lo = vdupq_n_f32(a.lo), hi = vdupq_n_f32(a.hi);
  const int full = t.ncols / 4, tail = t.ncols % 4;
  for (int r = 0; r < R; ++r) {
    float* c = a.c + (t.row0 + r) * a.ldc + t.col0;
    const bool row_bias = a.bias && a.bias_per_row;
    const float32x4_t rb = row_bias ? vdupq_n_f32(a.bias[t.row0 + r]) : zero;
    for (int v = 0; v < V; ++v) {
      if (v > full || (v == full && tail == 0)) break;
      const int n = v < full ? 4 : tail;
      // Partial vectors go through a small buffer: loads and stores stay in bounds.
      float cbuf[4] = {0.f, 0.f, 0.f, 0.f}, bbuf[4] = {0.f, 0.f, 0.f, 0.f};
      std::memcpy(cbuf, c + 4 * v, size_t(n) * sizeof(float));
      float32x4_t x = vmulq_f32(alpha, acc[r][v]);
      if (t.first) {
        if (a.accumulate) x = vaddq_f32(x, vld1q_f32(cbuf));
        if (row_bias) {
          x = vaddq_f32(x, rb);
        } else if (a.bias) {
          std::memcpy(bbuf, a.bias + t.col0 + 4 * v, size_t(n) * sizeof(float));
          x = vaddq_f32(x, vld1q_f32(bbuf));
        }
      } else {
        x = vaddq_f32(vld1q_f32(cbuf), x);
      }
      if (t.last) {
        if (a.act == F32Act::kRelu) {
          x = vbslq_f32(vcgtq_f32(x, zero), x, zero);  // NaN -> 0, as x > 0 ? x : 0
        } else if (a.act == F32Act::kClamp) {
          // x < lo ? lo : (x > hi ? hi : x): NaN passes through.
          const uint32x4_t below = vcltq_f32(x, lo);
          x = vbslq_f32(below, lo, vbslq_f32(vcgtq_f32(x, hi), hi, x));
        }
      }
      vst1q_f32(cbuf, x);
      std::memcpy(c + 4 * v, cbuf, size_t(n) * sizeof(float));
    }
  }
}

#undef QFOLD_ROW
#undef QFOLD_FMA

using BlockFn = void (*)(const GemmF32Args&, const float*, const float*, int64_t, const Tile&);

template <int R>
struct Row {
  static constexpr BlockFn fns[kV] = {Block<R, 1>, Block<R, 2>, Block<R, 3>};
};

constexpr const BlockFn* kBlocks[kMr] = {Row<1>::fns, Row<2>::fns, Row<3>::fns, Row<4>::fns,
                                         Row<5>::fns, Row<6>::fns, Row<7>::fns, Row<8>::fns};

void Gemm(const GemmF32Args& a) {
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    Tile t;
    t.col0 = jp * kNr;
    t.ncols = int(std::min<int64_t>(kNr, a.cols - t.col0));
    const int v = (t.ncols + 3) / 4;
    const float* rp = a.right + jp * a.k * kNr;
    int64_t k0 = 0;
    do {
      const int64_t kc = std::min(kKc, a.k - k0);
      t.first = k0 == 0;
      t.last = k0 + kc >= a.k;
      for (int64_t ip = 0; ip < a.rows; ip += kMr) {
        t.row0 = ip;
        const int r = int(std::min<int64_t>(kMr, a.rows - ip));
        kBlocks[r - 1][v - 1](a, a.left + ip * a.k + k0 * kMr, rp + k0 * kNr, kc, t);
      }
      k0 += kc;
    } while (k0 < a.k);
  }
}

void PackLeft(const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t k, float* dst) {
  PackLeftF32(src, rs, cs, rows, k, kMr, dst);
}

void PackRight(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t cols, float* dst) {
  PackRightF32(src, rs, cs, k, cols, kNr, dst);
}

}  // namespace

extern const GemmF32Kernels kGemmF32Neon;
const GemmF32Kernels kGemmF32Neon = {"neon", kMr, kNr, PackLeft, PackRight, Gemm};

}  // namespace kernels
}  // namespace qfold
