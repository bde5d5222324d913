// Winograd F(2x2, 3x3) and F(4x4, 3x3) for channels-last fp32 convolutions
// (conv_f32_nhwc.h): the transforms of one tile, channel by channel, shared
// by every variant (each includes this file; everything here has internal
// linkage, so each is compiled with its own file's flags).
//
// A 2x2 output tile reads a 4x4 input patch d; per channel
//   V = B^T d B,   M[xi] = sum_c V[xi][c] * U[xi][c][m]   (16 GEMMs),
//   Y = A^T M A,   U = G g G^T (the 3x3 filter g, transformed at prepare)
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1]. docs/NUMERICS.md bounds the
// difference from the direct convolution.
//
// One source for every variant: W is a lane trait (F, Mask, kLanes,
// kMaskedTail, Tail, LoadTail, StoreTail, Add, Sub, Mul, Set, Zero, Act,
// AnyNan); WinogradLane below is the scalar one, which also takes the
// channels past the last whole vector of a variant without masks. Every
// variant does the same operations in the same order (no fused
// multiply-adds), lane for lane.
#pragma once
#include <cstdint>

#include "kernels/gemm_f32.h"

namespace qfold {
namespace kernels {
namespace {

inline float WinogradActivate(float v, F32Act act, float lo, float hi) {
  if (act == F32Act::kRelu) return v > 0.f ? v : 0.f;
  if (act == F32Act::kClamp) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

struct WinogradLane {
  using F = float;
  using Mask = int;
  static constexpr int kLanes = 1;
  static constexpr bool kMaskedTail = false;
  static Mask Tail(int64_t) { return 1; }
  static F LoadTail(const float* p, Mask) { return *p; }
  static void StoreTail(float* p, Mask, F v) { *p = v; }
  static F Add(F a, F b) { return a + b; }
  static F Sub(F a, F b) { return a - b; }
  static F Mul(F a, F b) { return a * b; }
  static F Set(float v) { return v; }
  static F Zero() { return 0.f; }
  static F Act(F v, F32Act act, float lo, float hi) { return WinogradActivate(v, act, lo, hi); }
  static bool AnyNan(F v) { return v != v; }
};

// ---- Winograd F(2x2, 3x3) ---------------------------------------------------

// Lanes [ch, ch + kLanes) masked to mk: d holds the 4x4 patch's pixel
// pointers, row-major; writes V[xi] to v[xi * v_stride + ch].
template <class W>
inline void Winograd2InputLanes(const float* const* d, int64_t ch, typename W::Mask mk, float* v,
                                int64_t v_stride) {
  using F = typename W::F;
  F t[4][4];  // t[i][j] = (B^T d)[i][j]
  for (int j = 0; j < 4; ++j) {
    const F d0 = W::LoadTail(d[j] + ch, mk), d1 = W::LoadTail(d[4 + j] + ch, mk);
    const F d2 = W::LoadTail(d[8 + j] + ch, mk), d3 = W::LoadTail(d[12 + j] + ch, mk);
    t[0][j] = W::Sub(d0, d2);
    t[1][j] = W::Add(d1, d2);
    t[2][j] = W::Sub(d2, d1);
    t[3][j] = W::Sub(d1, d3);
  }
  for (int i = 0; i < 4; ++i) {
    float* o = v + i * 4 * v_stride + ch;
    W::StoreTail(o, mk, W::Sub(t[i][0], t[i][2]));
    W::StoreTail(o + v_stride, mk, W::Add(t[i][1], t[i][2]));
    W::StoreTail(o + 2 * v_stride, mk, W::Sub(t[i][2], t[i][1]));
    W::StoreTail(o + 3 * v_stride, mk, W::Sub(t[i][1], t[i][3]));
  }
}

// One output of a tile, lanes [ch, ch + kLanes): act(v + res[ch]) to
// out[ch] (res may be null: no residual; a null out, outside the output,
// is skipped). *bad accumulates 0 * the value before the activation: NaN
// once one was not finite.
template <class W>
inline void WinogradStore(typename W::F v, const float* res, float* out, int64_t ch,
                          typename W::Mask mk, F32Act act, float lo, float hi, typename W::F* bad) {
  if (!out) return;
  if (res) v = W::Add(v, W::LoadTail(res + ch, mk));
  *bad = W::Add(*bad, W::Mul(v, W::Zero()));
  W::StoreTail(out + ch, mk, W::Act(v, act, lo, hi));
}

// Lanes [ch, ch + kLanes): y[a * 2 + e][ch] = act(bias + (A^T M A)[a][e]
// (+ res[a * 2 + e][ch])), M[xi] at m[xi * m_stride] (WinogradStore).
template <class W>
inline void Winograd2OutputLanes(const float* m, int64_t m_stride, int64_t ch, typename W::Mask mk,
                                 const float* bias, F32Act act, float lo, float hi,
                                 const float* const* res, float* const* y, typename W::F* bad) {
  using F = typename W::F;
  F s[2][4];  // s[a][j] = (A^T M)[a][j]
  for (int j = 0; j < 4; ++j) {
    const F m0 = W::LoadTail(m + j * m_stride + ch, mk);
    const F m1 = W::LoadTail(m + (4 + j) * m_stride + ch, mk);
    const F m2 = W::LoadTail(m + (8 + j) * m_stride + ch, mk);
    const F m3 = W::LoadTail(m + (12 + j) * m_stride + ch, mk);
    s[0][j] = W::Add(W::Add(m0, m1), m2);
    s[1][j] = W::Sub(W::Sub(m1, m2), m3);
  }
  const F b = bias ? W::LoadTail(bias + ch, mk) : W::Zero();
  for (int a = 0; a < 2; ++a) {
    const F v[2] = {W::Add(W::Add(W::Add(s[a][0], s[a][1]), s[a][2]), b),
                    W::Add(W::Sub(W::Sub(s[a][1], s[a][2]), s[a][3]), b)};
    for (int e = 0; e < 2; ++e)
      WinogradStore<W>(v[e], res ? res[a * 2 + e] : nullptr, y[a * 2 + e], ch, mk, act, lo, hi,
                       bad);
  }
}

// ---- Winograd F(4x4, 3x3) ---------------------------------------------------
// A 4x4 output tile reads a 6x6 patch: V = B^T d B, 36 GEMMs, Y = A^T M A,
// U = G g G^T, with (Lavin and Gray's points 0, +-1, +-2 and infinity)
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
//          0 2 -1 -2 1 0; 0 4 0 -5 0 1],
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
//        1/24 -1/12 1/6; 0 0 1],
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]:
// 36 multiplications per 16 outputs and channel pair where F(2x2, 3x3)
// takes 64 and the direct sums 144.

// r = B^T x for one line of the patch.
template <class W>
inline void Winograd4InputLine(const typename W::F* x, typename W::F* r) {
  const typename W::F four = W::Set(4.f), five = W::Set(5.f), two = W::Set(2.f);
  const typename W::F a = W::Sub(x[4], W::Mul(four, x[2])), b = W::Sub(x[3], W::Mul(four, x[1]));
  const typename W::F c = W::Sub(x[4], x[2]), e = W::Mul(two, W::Sub(x[3], x[1]));
  r[0] = W::Add(W::Sub(x[4], W::Mul(five, x[2])), W::Mul(four, x[0]));
  r[1] = W::Add(a, b);
  r[2] = W::Sub(a, b);
  r[3] = W::Add(c, e);
  r[4] = W::Sub(c, e);
  r[5] = W::Add(W::Sub(x[5], W::Mul(five, x[3])), W::Mul(four, x[1]));
}

// o = A^T x for one line of M.
template <class W>
inline void Winograd4OutputLine(const typename W::F* x, typename W::F* o) {
  const typename W::F p = W::Add(x[1], x[2]), q = W::Sub(x[1], x[2]);
  const typename W::F r = W::Add(x[3], x[4]), s = W::Sub(x[3], x[4]);
  o[0] = W::Add(W::Add(x[0], p), r);
  o[1] = W::Add(q, W::Mul(W::Set(2.f), s));
  o[2] = W::Add(p, W::Mul(W::Set(4.f), r));
  o[3] = W::Add(W::Add(q, W::Mul(W::Set(8.f), s)), x[5]);
}

// Lanes [ch, ch + kLanes) masked to mk: d holds the 6x6 patch's pixel
// pointers, row-major; writes V[xi] to v[xi * v_stride + ch].
template <class W>
inline void Winograd4InputLanes(const float* const* d, int64_t ch, typename W::Mask mk, float* v,
                                int64_t v_stride) {
  using F = typename W::F;
  F t[6][6];  // t[i][j] = (B^T d)[i][j]
  for (int j = 0; j < 6; ++j) {
    F x[6], r[6];
    for (int i = 0; i < 6; ++i) x[i] = W::LoadTail(d[i * 6 + j] + ch, mk);
    Winograd4InputLine<W>(x, r);
    for (int i = 0; i < 6; ++i) t[i][j] = r[i];
  }
  for (int i = 0; i < 6; ++i) {
    F r[6];
    Winograd4InputLine<W>(t[i], r);
    for (int j = 0; j < 6; ++j) W::StoreTail(v + (i * 6 + j) * v_stride + ch, mk, r[j]);
  }
}

// Lanes [ch, ch + kLanes): y[a * 4 + e][ch] = act(bias + (A^T M A)[a][e]
// (+ res[a * 4 + e][ch])), M[xi] at m[xi * m_stride] (WinogradStore).
template <class W>
inline void Winograd4OutputLanes(const float* m, int64_t m_stride, int64_t ch, typename W::Mask mk,
                                 const float* bias, F32Act act, float lo, float hi,
                                 const float* const* res, float* const* y, typename W::F* bad) {
  using F = typename W::F;
  F s[4][6];  // s[a][j] = (A^T M)[a][j]
  for (int j = 0; j < 6; ++j) {
    F x[6], o[4];
    for (int i = 0; i < 6; ++i) x[i] = W::LoadTail(m + (i * 6 + j) * m_stride + ch, mk);
    Winograd4OutputLine<W>(x, o);
    for (int a = 0; a < 4; ++a) s[a][j] = o[a];
  }
  const F b = bias ? W::LoadTail(bias + ch, mk) : W::Zero();
  for (int a = 0; a < 4; ++a) {
    F o[4];
    Winograd4OutputLine<W>(s[a], o);
    for (int e = 0; e < 4; ++e)
      WinogradStore<W>(W::Add(o[e], b), res ? res[a * 4 + e] : nullptr, y[a * 4 + e], ch, mk, act,
                       lo, hi, bad);
  }
}

// The lanes of a tile size.
template <int kTile, class W, class... A>
inline void WinogradInputLanes(A... a) {
  if constexpr (kTile == 2)
    Winograd2InputLanes<W>(a...);
  else
    Winograd4InputLanes<W>(a...);
}
template <int kTile, class W, class... A>
inline void WinogradOutputLanes(A... a) {
  if constexpr (kTile == 2)
    Winograd2OutputLanes<W>(a...);
  else
    Winograd4OutputLanes<W>(a...);
}

// All c channels of one tile (ConvNhwcF32Kernels::winograd_in/winograd4_in):
// whole vectors, then the tail masked (kMaskedTail) or by the scalar lanes.
template <class W, int kTile>
void WinogradInput(const float* const* d, int64_t c, float* v, int64_t v_stride) {
  int64_t ch = 0;
  for (; ch + W::kLanes <= c; ch += W::kLanes)
    WinogradInputLanes<kTile, W>(d, ch, W::Tail(W::kLanes), v, v_stride);
  if (ch == c) return;
  if constexpr (W::kMaskedTail) {
    WinogradInputLanes<kTile, W>(d, ch, W::Tail(c - ch), v, v_stride);
  } else {
    for (; ch < c; ++ch) WinogradInputLanes<kTile, WinogradLane>(d, ch, 1, v, v_stride);
  }
}

// False when a stored value was not finite (ConvNhwcF32Kernels::winograd_out).
template <class W, int kTile>
bool WinogradOutput(const float* m, int64_t m_stride, int64_t c, const float* bias, F32Act act,
                    float lo, float hi, const float* const* res, float* const* y) {
  typename W::F bad = W::Zero();
  float bad_lane = 0.f;
  int64_t ch = 0;
  for (; ch + W::kLanes <= c; ch += W::kLanes)
    WinogradOutputLanes<kTile, W>(m, m_stride, ch, W::Tail(W::kLanes), bias, act, lo, hi, res, y,
                                  &bad);
  if (ch < c) {
    if constexpr (W::kMaskedTail) {
      WinogradOutputLanes<kTile, W>(m, m_stride, ch, W::Tail(c - ch), bias, act, lo, hi, res, y,
                                    &bad);
    } else {
      for (; ch < c; ++ch)
        WinogradOutputLanes<kTile, WinogradLane>(m, m_stride, ch, 1, bias, act, lo, hi, res, y,
                                                 &bad_lane);
    }
  }
  return !W::AnyNan(bad) && !WinogradLane::AnyNan(bad_lane);
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
