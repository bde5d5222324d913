// The panel kernel of gemm_wq_f32.h, written once over a vector trait V;
// included only by the per-ISA files, which compile them with their flags.
//
// V provides: type F, kLanes (16 / kLanes vectors make a panel row), Zero,
// Set, Fma, Mul, Load, Widen8(p, v) and Widen16(p, v) (16 int8 or int16 at
// p into 16 / kLanes float vectors), StoreCols(p, v, n) (the first n lanes).
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/gemm_wq_f32.h"

namespace qfold {
namespace kernels {
namespace gemm_wq {

// Independent accumulator chains a tile keeps: every output's sum is one
// chain of dependent fused multiply-adds, so a tile of few rows takes
// several panels at once (one row of A, a decoder's token: 8 panels on
// AVX-512; it ran one chain at the FMA latency, 4x slower). Each output's
// operations stay the same whatever the tile.
constexpr int kChains = 8;

// R rows by NP panels from panel `p0`: weights at w + p * k * 16, scales at
// scales + p * rows_of_scales * 16; panels past `np` are not stored.
template <class V, int R, int NP, bool Wide>
void Tile(const WqPanelArgs& p, int64_t p0, int64_t np) {
  using F = typename V::F;
  constexpr int NV = kWqNr / V::kLanes;
  const int64_t block_rows = (p.k + p.block - 1) / p.block;
  F acc[R][NP][NV];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < NP; ++q)
      for (int v = 0; v < NV; ++v) acc[r][q][v] = V::Zero();
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = p.a + std::min<int64_t>(r, p.rows - 1) * p.lda;
  // Panels past np repeat the last one (computed, not stored).
  int64_t pn[NP];
  for (int q = 0; q < NP; ++q) pn[q] = p0 + std::min<int64_t>(q, np - 1);
  for (int64_t k0 = 0, b = 0; k0 < p.k; k0 += p.block, ++b) {
    F s[NP][NV];
    for (int q = 0; q < NP; ++q)
      for (int v = 0; v < NV; ++v)
        s[q][v] = V::Load(p.scales + (pn[q] * block_rows + b) * kWqNr + v * V::kLanes);
    const int64_t k1 = std::min(p.k, k0 + p.block);
    for (int64_t kk = k0; kk < k1; ++kk) {
      F w[NP][NV];
      for (int q = 0; q < NP; ++q) {
        const int64_t at = (pn[q] * p.k + kk) * kWqNr;
        if constexpr (Wide)
          V::Widen16(p.w16 + at, w[q]);
        else
          V::Widen8(p.w8 + at, w[q]);
        for (int v = 0; v < NV; ++v) w[q][v] = V::Mul(w[q][v], s[q][v]);
      }
      for (int r = 0; r < R; ++r) {
        const F x = V::Set(a[r][kk]);
        for (int q = 0; q < NP; ++q)
          for (int v = 0; v < NV; ++v) acc[r][q][v] = V::Fma(x, w[q][v], acc[r][q][v]);
      }
    }
  }
  for (int r = 0; r < R && r < p.rows; ++r)
    for (int q = 0; q < NP && q < np; ++q)
      for (int v = 0; v < NV; ++v) {
        const int64_t col = (pn[q] - p.panel0) * kWqNr + v * V::kLanes;
        const int64_t left = p.cols - col;
        if (left <= 0) break;
        V::StoreCols(p.y + r * p.ldy + col, acc[r][q][v], int(std::min<int64_t>(left, V::kLanes)));
      }
}

// Every panel of the call, NP at a time.
template <class V, int R, bool Wide>
void Rows(const WqPanelArgs& p) {
  constexpr int NV = kWqNr / V::kLanes;
  constexpr int NP = std::max(1, kChains / (R * NV));
  for (int64_t q = 0; q < p.panels; q += NP)
    Tile<V, R, NP, Wide>(p, p.panel0 + q, std::min<int64_t>(NP, p.panels - q));
}

// Tiles of 1, 2, 4 or Mr rows: a matrix-vector product multiplies no
// padding rows.
template <class V, int Mr, bool Wide>
void Width(const WqPanelArgs& p) {
  if (p.rows == 1) return Rows<V, 1, Wide>(p);
  if (p.rows == 2) return Rows<V, 2, Wide>(p);
  if (p.rows <= 4 || Mr == 4) return Rows<V, 4, Wide>(p);
  Rows<V, Mr, Wide>(p);
}

template <class V, int Mr>
void Panel(const WqPanelArgs& p) {
  if (p.w16)
    Width<V, Mr, true>(p);
  else
    Width<V, Mr, false>(p);
}

}  // namespace gemm_wq
}  // namespace kernels
}  // namespace qfold
