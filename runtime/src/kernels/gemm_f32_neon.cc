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

// Row r of the tile: the lane index must be a constant, hence the recursion.
template <int r, int R, int V>
inline void Rows(float32x4_t a0, float32x4_t a1, const float32x4_t (&b)[V],
                 float32x4_t (&acc)[R][V]) {
  if constexpr (r < R) {
    for (int v = 0; v < V; ++v)
      acc[r][v] = vfmaq_laneq_f32(acc[r][v], b[v], r < 4 ? a0 : a1, r % 4);
    Rows<r + 1, R, V>(a0, a1, b, acc);
  }
}

template <int R, int V>
void Block(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, const Tile& t) {
  float32x4_t acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = vdupq_n_f32(0.f);
  for (int64_t k = 0; k < kc; ++k, lp += kMr, rp += kNr) {
    float32x4_t b[V];
    for (int v = 0; v < V; ++v) b[v] = vld1q_f32(rp + 4 * v);
    // The packed left panel always holds kMr values per k (zeros past the end).
    const float32x4_t a0 = vld1q_f32(lp), a1 = vld1q_f32(lp + 4);
    Rows<0, R, V>(a0, a1, b, acc);
  }
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
