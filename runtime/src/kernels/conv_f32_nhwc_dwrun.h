// Depthwise runs (conv_f32_nhwc.h, DwRunF32Args), one source for every x86
// vector width: include from a kernel file compiled with its ISA's flags and
// instantiate DwRun<V> with a trait V (see DwRunZmm in
// conv_f32_nhwc_avx512f.cc):
//   F, Mask, kLanes (channels per vector), kPixels (pixels per block)
//   Tail(n) Zero() Load(p) LoadTail(p, m) Store(p, v) StoreTail(p, m, v)
//   Fma(a, b, c) = a * b + c, Add, Act(x, act, lo, hi)
//   kMaxChannelsPerPixel3x3: 3x3 kernels with at most this many channels stay
//   on the per-pixel kernel (AVX2 at 32 channels: 272 against 225 us)
//
// kPixels pixels by one vector of channels: a kernel row's KW weights in
// registers, each of the row's (kPixels - 1) * SW + KW input columns loaded
// once and multiplied into every pixel whose window holds it (a 5x5 over 8
// pixels: 12 loads a row for 40 products, where the per-pixel kernel loads
// two vectors per product). The loops over columns and taps are unrolled
// whole, so the sums stay in registers; each sum adds its taps in kernel-row,
// then column order, as the per-pixel kernel does.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/conv_f32_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

template <class V, int KW, int SW, int P, bool Tail>
void DwRunBlock(const DwRunF32Args& g, int64_t p0, int64_t ch, typename V::Mask tail) {
  using F = typename V::F;
  auto load = [&](const float* src) { return Tail ? V::LoadTail(src, tail) : V::Load(src); };
  constexpr int kCols = (P - 1) * SW + KW;
  const int64_t c = g.c;
  F acc[P];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) acc[i] = V::Zero();
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const float* r = g.rows[ky];
    if (!r) continue;
    r += p0 * SW * c + ch;
    const float* w = g.w + ky * KW * c + ch;
    F wv[KW];
#pragma GCC unroll 8
    for (int kx = 0; kx < KW; ++kx) wv[kx] = load(w + kx * c);
#pragma GCC unroll 32
    for (int j = 0; j < kCols; ++j) {
      F x = load(r + j * c);
      // Keep the column in a register: GCC otherwise folds the load into
      // each of its KW multiplications, loading it KW times.
      __asm__("" : "+v"(x));
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; ++kx) {
        const int at = j - kx;
        if (at >= 0 && at % SW == 0 && at / SW < P) acc[at / SW] = V::Fma(x, wv[kx], acc[at / SW]);
      }
    }
  }
  const F b = g.bias ? load(g.bias + ch) : V::Zero();
  const F32Act act = g.act;
  const float lo = g.lo, hi = g.hi;
  float* const y0 = g.y + p0 * g.ldy + ch;
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
    const F v = V::Act(V::Add(acc[i], b), act, lo, hi);
    if (Tail)
      V::StoreTail(y0 + i * g.ldy, tail, v);
    else
      V::Store(y0 + i * g.ldy, v);
  }
}

// P pixels at p by every channel vector.
template <class V, int KW, int SW, int P>
void DwRunPixels(const DwRunF32Args& g, int64_t p) {
  const int64_t full = g.c / V::kLanes * V::kLanes;
  for (int64_t ch = 0; ch < full; ch += V::kLanes)
    DwRunBlock<V, KW, SW, P, false>(g, p, ch, V::Tail(V::kLanes));
  if (full < g.c) DwRunBlock<V, KW, SW, P, true>(g, p, full, V::Tail(g.c - full));
}

// The pixels of one channel vector (Tail: the last, partial one).
template <class V, int KW, int SW, bool Tail>
void DwRunVector(const DwRunF32Args& g, int64_t ch) {
  const typename V::Mask m = V::Tail(g.c - ch);
  constexpr int kP = V::kPixels;
  int64_t p = 0;
  for (; p + kP <= g.pixels; p += kP) DwRunBlock<V, KW, SW, kP, Tail>(g, p, ch, m);
  if (kP > 4 && p + 4 <= g.pixels) DwRunBlock<V, KW, SW, 4, Tail>(g, p, ch, m), p += 4;
  if (p + 2 <= g.pixels) DwRunBlock<V, KW, SW, 2, Tail>(g, p, ch, m), p += 2;
  if (p < g.pixels) DwRunBlock<V, KW, SW, 1, Tail>(g, p, ch, m);
}

// Pixels outer, channel vectors inner while one block of pixels' windows
// over all channels stays in L1 (about 40 KiB); else channel vectors outer,
// so that one vector's kh rows of the run stay in L1 while its pixels pass
// (a 5x5 over 240 channels: 140 us against 280 pixels outer).
template <class V, int KW, int SW>
void DwRunChannels(const DwRunF32Args& g) {
  constexpr int64_t kCols = (V::kPixels - 1) * SW + KW;
  if (g.kh * kCols * g.c * int64_t(sizeof(float)) <= 40 * 1024) {
    constexpr int kP = V::kPixels;
    int64_t p = 0;
    for (; p + kP <= g.pixels; p += kP) DwRunPixels<V, KW, SW, kP>(g, p);
    if (kP > 4 && p + 4 <= g.pixels) DwRunPixels<V, KW, SW, 4>(g, p), p += 4;
    if (p + 2 <= g.pixels) DwRunPixels<V, KW, SW, 2>(g, p), p += 2;
    if (p < g.pixels) DwRunPixels<V, KW, SW, 1>(g, p);
    return;
  }
  const int64_t full = g.c / V::kLanes * V::kLanes;
  for (int64_t ch = 0; ch < full; ch += V::kLanes) DwRunVector<V, KW, SW, false>(g, ch);
  if (full < g.c) DwRunVector<V, KW, SW, true>(g, full);
}

// Stride 2 across the width only from 5 columns on: a 3x3's windows then
// share one column in three, and the per-pixel kernel was as fast or faster
// (a 3x3 at stride 1x2 over 128 channels: 56 against 67 us).
template <class V, int KW>
bool DwRunStride(const DwRunF32Args& g) {
  if (g.sw == 1) return DwRunChannels<V, KW, 1>(g), true;
  if (g.sw == 2 && KW >= 5) return DwRunChannels<V, KW, 2>(g), true;
  return false;
}

template <class V>
bool DwRun(const DwRunF32Args& g) {
  if (g.dw != 1 || (g.kw == 3 && g.c <= V::kMaxChannelsPerPixel3x3)) return false;
  switch (g.kw) {
    case 3:
      return DwRunStride<V, 3>(g);
    case 5:
      return DwRunStride<V, 5>(g);
    case 7:
      return DwRunStride<V, 7>(g);
    default:
      return false;
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
