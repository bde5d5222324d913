// The panel kernel of gemm_wq_f32.h, written once over a vector trait V;
// included only by the per-ISA files, which compile it with their flags.
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

template <class V, int R, bool Wide>
void PanelRows(const WqPanelArgs& p) {
  using F = typename V::F;
  constexpr int NV = kWqNr / V::kLanes;
  F acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V::Zero();
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = p.a + std::min<int64_t>(r, p.rows - 1) * p.lda;
  const float* scales = p.scales;
  for (int64_t k0 = 0; k0 < p.k; k0 += p.block, scales += kWqNr) {
    F s[NV];
    for (int v = 0; v < NV; ++v) s[v] = V::Load(scales + v * V::kLanes);
    const int64_t k1 = std::min(p.k, k0 + p.block);
    for (int64_t kk = k0; kk < k1; ++kk) {
      F w[NV];
      if constexpr (Wide)
        V::Widen16(p.w16 + kk * kWqNr, w);
      else
        V::Widen8(p.w8 + kk * kWqNr, w);
      for (int v = 0; v < NV; ++v) w[v] = V::Mul(w[v], s[v]);
      for (int r = 0; r < R; ++r) {
        const F x = V::Set(a[r][kk]);
        for (int v = 0; v < NV; ++v) acc[r][v] = V::Fma(x, w[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < R && r < p.rows; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t left = p.cols - v * V::kLanes;
      if (left <= 0) break;
      V::StoreCols(p.y + r * p.ldy + v * V::kLanes, acc[r][v], int(std::min<int64_t>(left, V::kLanes)));
    }
}

// Tiles of 1, 2, 4 or Mr rows: a matrix-vector product (one row of A, as
// when a decoder runs a token) multiplies no padding rows.
template <class V, int Mr, bool Wide>
void PanelWidth(const WqPanelArgs& p) {
  if (p.rows == 1) return PanelRows<V, 1, Wide>(p);
  if (p.rows == 2) return PanelRows<V, 2, Wide>(p);
  if (p.rows <= 4 || Mr == 4) return PanelRows<V, 4, Wide>(p);
  PanelRows<V, Mr, Wide>(p);
}

template <class V, int Mr>
void Panel(const WqPanelArgs& p) {
  if (p.w16)
    PanelWidth<V, Mr, true>(p);
  else
    PanelWidth<V, Mr, false>(p);
}

}  // namespace gemm_wq
}  // namespace kernels
}  // namespace qfold
