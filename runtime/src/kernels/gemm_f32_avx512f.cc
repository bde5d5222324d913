// AVX-512F fp32 GEMM (gemm_f32.h): 8x48 tiles, 24 zmm accumulators (enough
// independent FMA chains to cover two FMA pipes of latency 4), each k step
// loading 3 vectors of the right panel and broadcasting 8 left values.
// Edge tiles are instantiated per row count and vector count, so a 1-row
// MatMul or a 49-column conv does not pay for a full tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/gemm_f32.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics
// as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 8, kNr = 48, kV = kNr / 16;
// K block: 256 x 48 floats of the right panel (48 KiB) stay near L1 while
// every row panel passes over them.
constexpr int64_t kKc = 256;

inline __mmask16 TailMask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

struct Tile {
  int64_t row0, col0;
  int ncols;
  bool first, last;
};

// The epilogue of one vector: alpha * acc, plus c's prior value (a later K
// block, or accumulate), plus the bias, then (last K block) the activation.
// Every product that meets an addition is an explicit FMA: compilers
// contract a separate multiply and add (-ffp-contract=fast) in one inlining
// context and not in another, and the one-row kernel must give the same bits
// as the tiles.
inline void Store(const GemmF32Args& a, __m512 acc, __mmask16 m, float* c, int64_t col, __m512 rb,
                  bool first, bool last, __m512 alpha, __m512 lo, __m512 hi) {
  const __m512 zero = _mm512_setzero_ps();
  const bool row_bias = a.bias && a.bias_per_row;
  __m512 x;
  if (!first || a.accumulate) {
    x = _mm512_fmadd_ps(alpha, acc, _mm512_maskz_loadu_ps(m, c));
    if (first && row_bias) {
      x = _mm512_add_ps(x, rb);
    } else if (first && a.bias) {
      x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, a.bias + col));
    }
  } else if (row_bias) {
    x = _mm512_fmadd_ps(alpha, acc, rb);
  } else if (a.bias) {
    x = _mm512_fmadd_ps(alpha, acc, _mm512_maskz_loadu_ps(m, a.bias + col));
  } else {
    x = _mm512_mul_ps(alpha, acc);
  }
  if (last) {
    // Operand order matters for NaN: max/min return the second operand.
    if (a.act == F32Act::kRelu) {
      x = _mm512_max_ps(x, zero);
    } else if (a.act == F32Act::kClamp) {
      // x < lo ? lo : min(hi, x), exactly the reference even when lo > hi.
      const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
      x = _mm512_mask_blend_ps(below, _mm512_min_ps(hi, x), lo);
    }
  }
  _mm512_mask_storeu_ps(c, m, x);
}

template <int R, int V>
void Block(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, const Tile& t) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, lp += kMr, rp += kNr) {
    __m512 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_ps(rp + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 l = _mm512_set1_ps(lp[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(l, b[v], acc[r][v]);
    }
  }
  __mmask16 m[V];
  for (int v = 0; v < V; ++v) m[v] = TailMask(t.ncols - 16 * v);
  const __m512 alpha = _mm512_set1_ps(a.alpha);
  const __m512 lo = _mm512_set1_ps(a.lo), hi = _mm512_set1_ps(a.hi), zero = _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    float* c = a.c + (t.row0 + r) * a.ldc + t.col0;
    const bool row_bias = a.bias && a.bias_per_row;
    const __m512 rb = row_bias ? _mm512_set1_ps(a.bias[t.row0 + r]) : zero;
    for (int v = 0; v < V; ++v)
      Store(a, acc[r][v], m[v], c + 16 * v, t.col0 + 16 * v, rb, t.first, t.last, alpha, lo, hi);
  }
}

using BlockFn = void (*)(const GemmF32Args&, const float*, const float*, int64_t, const Tile&);

template <int R>
struct Row {
  static constexpr BlockFn fns[kV] = {Block<R, 1>, Block<R, 2>, Block<R, 3>};
};

constexpr const BlockFn* kBlocks[kMr] = {Row<1>::fns, Row<2>::fns, Row<3>::fns, Row<4>::fns,
                                         Row<5>::fns, Row<6>::fns, Row<7>::fns, Row<8>::fns};

// One row across up to six column panels (NV vectors of 16 columns, the
// last possibly partial): Block<1, V> alone has at most three FMA chains and
// waits on their latency (a recurrent step, a batch-1 MatMul); up to
// eighteen chains (an LSTM's 4 x 64 gates in one pass) keep the FMA units
// busy. Each element still sums its k in order with Block's epilogue, so the
// results are bit-identical.
constexpr int kRowPanels = 6;

template <int NV>
void RowVectors(const GemmF32Args& a, const float* lp, const float* rp, int64_t kc, int64_t col0,
                int64_t ncols, bool first, bool last) {
  const int64_t pstride = a.k * kNr;  // from one panel to the next
  __m512 acc[NV];
  for (int i = 0; i < NV; ++i) acc[i] = _mm512_setzero_ps();
  // Unrolled explicitly: GCC left the loop of 18 vectors rolled, with
  // the sums on the stack (a 9216 x 4096 Gemm at 1 thread: 13.5 -> 3.5 ms).
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 l = _mm512_set1_ps(lp[k * kMr]);
#pragma GCC unroll 18
    for (int i = 0; i < NV; ++i)
      acc[i] = _mm512_fmadd_ps(l, _mm512_loadu_ps(rp + i / kV * pstride + k * kNr + i % kV * 16),
                               acc[i]);
  }
  const __m512 alpha = _mm512_set1_ps(a.alpha);
  const __m512 lo = _mm512_set1_ps(a.lo), hi = _mm512_set1_ps(a.hi), zero = _mm512_setzero_ps();
  const bool row_bias = a.bias && a.bias_per_row;
  const __m512 rb = row_bias ? _mm512_set1_ps(a.bias[0]) : zero;
  for (int i = 0; i < NV; ++i)
    Store(a, acc[i], TailMask(ncols - 16 * i), a.c + col0 + 16 * i, col0 + 16 * i, rb, first, last,
          alpha, lo, hi);
}

using RowFn = void (*)(const GemmF32Args&, const float*, const float*, int64_t, int64_t, int64_t,
                       bool, bool);
constexpr RowFn kRowVectors[kRowPanels * kV] = {
    RowVectors<1>,  RowVectors<2>,  RowVectors<3>,  RowVectors<4>,  RowVectors<5>,  RowVectors<6>,
    RowVectors<7>,  RowVectors<8>,  RowVectors<9>,  RowVectors<10>, RowVectors<11>, RowVectors<12>,
    RowVectors<13>, RowVectors<14>, RowVectors<15>, RowVectors<16>, RowVectors<17>, RowVectors<18>};

void GemmOneRow(const GemmF32Args& a, int64_t pb, int64_t pe) {
  for (int64_t jp0 = pb; jp0 < pe; jp0 += kRowPanels) {
    const int64_t col0 = jp0 * kNr;
    const int64_t ncols = std::min(std::min<int64_t>(kRowPanels, pe - jp0) * kNr, a.cols - col0);
    const RowFn fn = kRowVectors[(ncols + 15) / 16 - 1];
    const float* rp = a.right + jp0 * a.k * kNr;
    int64_t k0 = 0;
    do {
      const int64_t kc = std::min(kKc, a.k - k0);
      fn(a, a.left + k0 * kMr, rp + k0 * kNr, kc, col0, ncols, k0 == 0, k0 + kc >= a.k);
      k0 += kc;
    } while (k0 < a.k);
  }
}

void Gemm(const GemmF32Args& a) {
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  if (a.rows == 1) {
    GemmOneRow(a, a.panel_begin, pe);
    return;
  }
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    Tile t;
    t.col0 = jp * kNr;
    t.ncols = int(std::min<int64_t>(kNr, a.cols - t.col0));
    const int v = (t.ncols + 15) / 16;
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

extern const GemmF32Kernels kGemmF32Avx512F;
const GemmF32Kernels kGemmF32Avx512F = {"avx512f", kMr, kNr, PackLeft, PackRight, Gemm};

}  // namespace kernels
}  // namespace qfold
