// The panel kernel of gemm_wq_s8.h, written once over a vector trait V;
// included only by the per-ISA files (and the portable variant), which
// compile it with their flags.
//
// V provides: kLanes (int32 lanes; a panel row is 16 / kLanes vectors), I
// (int32 vector), F (float vector), U (unpacked codes of one vector: kLanes
// columns x 4 k), Zero, Unpack(w64, lo, hi) (64 packed bytes into the low-
// and high-nibble k-groups), Dot(acc, u, a4) (acc + the 4-k dot products of
// u's columns with the 4 int8 activations in a4), ZeroF, Block(acc, zp,
// asum, a_scale, scale, y) (fma(float(acc - zp * asum), a_scale * scale, y)
// for kLanes columns: zp kLanes bytes, scale kLanes floats) and
// StoreCols(p, v, n) (the first n lanes).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm_wq_s8.h"

namespace qfold {
namespace kernels {
namespace gemm_wq_s8 {

// A tile keeps V::kAccumulators accumulator vectors (independent chains:
// vpdpbusd's latency is about 5 cycles at 2 a cycle): a tile of one row
// takes several panels at once, and 4 rows by 4 panels share each unpacked
// chunk and each broadcast 4 times.

// Bytes of one block of a panel: its nibble chunks, zero points and scales.
inline int64_t BlockBytes(int64_t block) {
  return block / 8 * 64 + kWqS8Nr + kWqS8Nr * int64_t(sizeof(float));
}

// R rows by NP panels from panel `p0`; panels past `np` are not stored.
template <class V, int R, int NP>
void Tile(const WqS8PanelArgs& p, int64_t p0, int64_t np) {
  using I = typename V::I;
  using F = typename V::F;
  using U = typename V::U;
  constexpr int NV = kWqS8Nr / V::kLanes;
  const int64_t stride = p.blocks * p.block, bb = BlockBytes(p.block), chunks = p.block / 8;
  int64_t row[R];
  for (int r = 0; r < R; ++r) row[r] = std::min<int64_t>(r, p.rows - 1);
  const uint8_t* panel[NP];
  for (int q = 0; q < NP; ++q) panel[q] = p.w + (p0 + std::min<int64_t>(q, np - 1)) * p.panel_bytes;
  F y[R][NP][NV];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < NP; ++q)
      for (int v = 0; v < NV; ++v) y[r][q][v] = V::ZeroF();
  for (int64_t b = 0; b < p.blocks; ++b) {
    I acc[R][NP][NV];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < NP; ++q)
        for (int v = 0; v < NV; ++v) acc[r][q][v] = V::Zero();
    const int8_t* aq[R];
    for (int r = 0; r < R; ++r) aq[r] = p.a.q + row[r] * stride + b * p.block;
    for (int64_t c = 0; c < chunks; ++c) {
      int32_t lo4[R], hi4[R];
      for (int r = 0; r < R; ++r) {
        std::memcpy(&lo4[r], aq[r] + 8 * c, 4);
        std::memcpy(&hi4[r], aq[r] + 8 * c + 4, 4);
      }
      for (int q = 0; q < NP; ++q) {
        U lo[NV], hi[NV];
        V::Unpack(panel[q] + b * bb + c * 64, lo, hi);
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < NV; ++v)
            acc[r][q][v] = V::Dot(V::Dot(acc[r][q][v], lo[v], lo4[r]), hi[v], hi4[r]);
      }
    }
    for (int q = 0; q < NP; ++q) {
      const uint8_t* zp = panel[q] + b * bb + chunks * 64;
      const float* scale = reinterpret_cast<const float*>(zp + kWqS8Nr);
      for (int r = 0; r < R; ++r) {
        const int64_t at = row[r] * p.blocks + b;
        for (int v = 0; v < NV; ++v)
          y[r][q][v] = V::Block(acc[r][q][v], zp + v * V::kLanes, p.a.sum[at], p.a.scale[at],
                                scale + v * V::kLanes, y[r][q][v]);
      }
    }
  }
  for (int r = 0; r < R && r < p.rows; ++r)
    for (int q = 0; q < NP && q < np; ++q)
      for (int v = 0; v < NV; ++v) {
        const int64_t col = (p0 + q) * kWqS8Nr + v * V::kLanes, left = p.cols - col;
        if (left <= 0) break;
        V::StoreCols(p.y + r * p.ldy + col, y[r][q][v], int(std::min<int64_t>(left, V::kLanes)));
      }
}

template <class V, int R>
void Rows(const WqS8PanelArgs& p) {
  constexpr int NV = kWqS8Nr / V::kLanes;
  // At most the 8 panels a call gets (GemmWqS8's groups): a tile's panels
  // past the call's are computed and dropped.
  constexpr int NP = std::min(8, std::max(1, V::kAccumulators / (R * NV)));
  for (int64_t q = 0; q < p.panels; q += NP)
    Tile<V, R, NP>(p, q, std::min<int64_t>(NP, p.panels - q));
}

// Tiles of 1, 2 or Mr rows: a matrix-vector product multiplies no padding rows.
template <class V, int Mr>
void Panel(const WqS8PanelArgs& p) {
  if (p.rows == 1) return Rows<V, 1>(p);
  if (p.rows == 2 || Mr == 2) return Rows<V, 2>(p);
  Rows<V, Mr>(p);
}

}  // namespace gemm_wq_s8
}  // namespace kernels
}  // namespace qfold
