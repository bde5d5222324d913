// AVX2+FMA fp32 GEMM (gemm_f32.h): 6x16 tiles, 12 ymm accumulators plus 2
// right vectors and a broadcast within the 16 registers. Edge tiles are
// instantiated per row count and vector count.
#include <immintrin.h>

#include <algorithm>

#include "kernels/gemm_f32.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 6, kNr = 16, kV = kNr / 8;
// K block: 256 x 16 floats of the right panel (16 KiB) stay in L1 while
// every row panel passes over them.
constexpr int64_t kKc = 256;

// Lane i enabled when i < n.
inline __m256i TailMask(int64_t n) {
  const int32_t k = int32_t(std::max<int64_t>(0, std::min<int64_t>(8, n)));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Masked moves only for a partial vector: on AMD Zen a vmaskmovps store costs
// about ten times a plain one, which made the epilogue of short-K tiles
// (1x1 convolutions over 16..64 channels) a third of their time.
inline __m256 LoadPart(const float* p, __m256i mask, bool full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}
inline void StorePart(float* p, __m256i mask, bool full, __m256 x) {
  if (full)
    _mm256_storeu_ps(p, x);
  else
    _mm256_maskstore_ps(p, mask, x);
}

struct Tile {
  int64_t row0, col0;
  int ncols;
  bool first, last;
};

template <int R, int V>
void Block(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, const Tile& t) {
  __m256 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, lp += kMr, rp += kNr) {
    __m256 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm256_loadu_ps(rp + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 l = _mm256_set1_ps(lp[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(l, b[v], acc[r][v]);
    }
  }
  __m256i m[V];
  bool full[V];
  for (int v = 0; v < V; ++v) {
    m[v] = TailMask(t.ncols - 8 * v);
    full[v] = t.ncols - 8 * v >= 8;
  }
  const __m256 alpha = _mm256_set1_ps(a.alpha);
  const __m256 lo = _mm256_set1_ps(a.lo), hi = _mm256_set1_ps(a.hi), zero = _mm256_setzero_ps();
  for (int r = 0; r < R; ++r) {
    float* c = a.c + (t.row0 + r) * a.ldc + t.col0;
    const bool row_bias = a.bias && a.bias_per_row;
    const __m256 rb = row_bias ? _mm256_set1_ps(a.bias[t.row0 + r]) : zero;
    for (int v = 0; v < V; ++v) {
      __m256 x = _mm256_mul_ps(alpha, acc[r][v]);
      if (t.first) {
        if (a.accumulate) x = _mm256_add_ps(x, LoadPart(c + 8 * v, m[v], full[v]));
        if (row_bias) {
          x = _mm256_add_ps(x, rb);
        } else if (a.bias) {
          x = _mm256_add_ps(x, LoadPart(a.bias + t.col0 + 8 * v, m[v], full[v]));
        }
      } else {
        x = _mm256_add_ps(LoadPart(c + 8 * v, m[v], full[v]), x);
      }
      if (t.last) {
        // Operand order matters for NaN: max/min return the second operand.
        if (a.act == F32Act::kRelu) {
          x = _mm256_max_ps(x, zero);
        } else if (a.act == F32Act::kClamp) {
          // x < lo ? lo : min(hi, x), exactly the reference even when lo > hi.
          const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
          x = _mm256_blendv_ps(_mm256_min_ps(hi, x), lo, below);
        }
      }
      StorePart(c + 8 * v, m[v], full[v], x);
    }
  }
}

using BlockFn = void (*)(const GemmF32Args&, const float*, const float*, int64_t, const Tile&);

template <int R>
struct Row {
  static constexpr BlockFn fns[kV] = {Block<R, 1>, Block<R, 2>};
};

constexpr const BlockFn* kBlocks[kMr] = {Row<1>::fns, Row<2>::fns, Row<3>::fns,
                                         Row<4>::fns, Row<5>::fns, Row<6>::fns};

// One row across four full column panels: Block<1, 2> alone has two FMA
// chains and waits on their latency (a recurrent step, a batch-1 MatMul);
// eight chains keep the FMA units busy. Each element still sums its k in
// order with Block's epilogue, so the results are bit-identical.
void RowFourPanels(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, int64_t col0,
                   bool first, bool last) {
  constexpr int kP = 4;
  const int64_t pstride = a.k * kNr;  // from one panel to the next
  __m256 acc[kP][kV];
  for (int p = 0; p < kP; ++p)
    for (int v = 0; v < kV; ++v) acc[p][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 l = _mm256_set1_ps(lp[k * kMr]);
    for (int p = 0; p < kP; ++p)
      for (int v = 0; v < kV; ++v)
        acc[p][v] =
            _mm256_fmadd_ps(l, _mm256_loadu_ps(rp + p * pstride + k * kNr + 8 * v), acc[p][v]);
  }
  const __m256 alpha = _mm256_set1_ps(a.alpha);
  const __m256 lo = _mm256_set1_ps(a.lo), hi = _mm256_set1_ps(a.hi), zero = _mm256_setzero_ps();
  const bool row_bias = a.bias && a.bias_per_row;
  const __m256 rb = row_bias ? _mm256_set1_ps(a.bias[0]) : zero;
  for (int p = 0; p < kP; ++p)
    for (int v = 0; v < kV; ++v) {
      const int64_t col = col0 + p * kNr + 8 * v;
      float* c = a.c + col;
      __m256 x = _mm256_mul_ps(alpha, acc[p][v]);
      if (first) {
        if (a.accumulate) x = _mm256_add_ps(x, _mm256_loadu_ps(c));
        if (row_bias) {
          x = _mm256_add_ps(x, rb);
        } else if (a.bias) {
          x = _mm256_add_ps(x, _mm256_loadu_ps(a.bias + col));
        }
      } else {
        x = _mm256_add_ps(_mm256_loadu_ps(c), x);
      }
      if (last) {
        if (a.act == F32Act::kRelu) {
          x = _mm256_max_ps(x, zero);
        } else if (a.act == F32Act::kClamp) {
          const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
          x = _mm256_blendv_ps(_mm256_min_ps(hi, x), lo, below);
        }
      }
      _mm256_storeu_ps(c, x);
    }
}

void Gemm(const GemmF32Args& a) {
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  int64_t jp0 = a.panel_begin;
  if (a.rows == 1) {
    // Groups of four full panels; the rest below.
    for (; jp0 + 4 <= pe && (jp0 + 4) * kNr <= a.cols; jp0 += 4) {
      const float* rp = a.right + jp0 * a.k * kNr;
      int64_t k0 = 0;
      do {
        const int64_t kc = std::min(kKc, a.k - k0);
        RowFourPanels(a, a.left + k0 * kMr, rp + k0 * kNr, kc, jp0 * kNr, k0 == 0, k0 + kc >= a.k);
        k0 += kc;
      } while (k0 < a.k);
    }
  }
  for (int64_t jp = jp0; jp < pe; ++jp) {
    Tile t;
    t.col0 = jp * kNr;
    t.ncols = int(std::min<int64_t>(kNr, a.cols - t.col0));
    const int v = (t.ncols + 7) / 8;
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

extern const GemmF32Kernels kGemmF32Avx2;
const GemmF32Kernels kGemmF32Avx2 = {"avx2", kMr, kNr, PackLeft, PackRight, Gemm};

}  // namespace kernels
}  // namespace qfold
