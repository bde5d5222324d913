// Stem runs (conv_f32_nhwc.h, StemRunF32Args), one source for every x86
// vector width: include from a kernel file compiled with its ISA's flags and
// instantiate StemRun<V> with the trait of its depthwise runs plus
//   Broadcast(p): every lane = *p;  kRegisters: vector registers of the ISA
//
// A convolution whose kernel rows hold few values (a 1-channel text line or
// spectrogram, an RGB image: kw * c of 3 to 21) spends the indirect GEMM's
// time on pointers, prefetches and loop control around a few FMAs per tap.
// Here P pixels of one output row share their input columns: each of the
// row's (P - 1) * SW + KW columns is broadcast once per channel and
// multiplied into every pixel whose window holds it (a 3x3 over one channel,
// 16 pixels: 18 broadcasts a kernel row for 48 products, where the indirect
// GEMM broadcasts 48 times and reloads 16 pointers). The loops over columns,
// channels and pixels are unrolled whole, so the sums stay in registers, and
// so do the kernel row's weights while they fit beside them. Each sum adds
// its terms in kernel-row, column, channel order, as the indirect GEMM does.
#pragma once
#include <cstdint>

#include "kernels/conv_f32_nhwc.h"

namespace qfold {
namespace kernels {
namespace {

// NV vectors of channels by P pixels starting at p0.
template <class V, int KW, int SW, int C, int NV, int P>
void StemRunBlock(const StemRunF32Args& g, int64_t p0) {
  using F = typename V::F;
  constexpr int kCols = (P - 1) * SW + KW;
  constexpr int kTaps = KW * C;
  // Weights in registers while P * NV sums, kTaps * NV weights and a column fit.
  constexpr bool kWeightsInRegisters = P * NV + kTaps * NV + 1 <= V::kRegisters;
  constexpr int kHeld = kWeightsInRegisters ? kTaps * NV : 1;
  const int64_t nr = g.nr;
  F acc[P][NV];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = V::Zero();
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const float* const x = g.x + ky * g.x_row + p0 * SW * C;
    const float* const w = g.w + ky * kTaps * nr;
    if constexpr (kWeightsInRegisters) {
      F held[kHeld];
#pragma GCC unroll 24
      for (int t = 0; t < kHeld; ++t) held[t] = V::Load(w + (t / NV) * nr + (t % NV) * V::kLanes);
#pragma GCC unroll 64
      for (int q = 0; q < kCols; ++q) {
#pragma GCC unroll 4
        for (int ch = 0; ch < C; ++ch) {
          F col = V::Broadcast(x + q * C + ch);
          // Keep the column in a register: GCC otherwise folds the broadcast
          // into each of its multiplications, loading it once per pixel.
          __asm__("" : "+v"(col));
#pragma GCC unroll 8
          for (int kx = 0; kx < KW; ++kx) {
            const int at = q - kx;
            if (at < 0 || at % SW != 0 || at / SW >= P) continue;
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v)
              acc[at / SW][v] = V::Fma(col, held[(kx * C + ch) * NV + v], acc[at / SW][v]);
          }
        }
      }
    } else {
      // Tap by tap: its weights loaded once, a broadcast per pixel. The tap's
      // base pointer is opaque, so GCC does not keep a column read again by
      // a later tap in a register (sharing columns leaves too few registers
      // beside the weights here: GCC then spilled sums).
#pragma GCC unroll 8
      for (int kx = 0; kx < KW; ++kx)
#pragma GCC unroll 4
        for (int ch = 0; ch < C; ++ch) {
          const float* xt = x + kx * C + ch;
          __asm__("" : "+r"(xt));
          F wv[NV];
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) wv[v] = V::Load(w + (kx * C + ch) * nr + v * V::kLanes);
#pragma GCC unroll 16
          for (int i = 0; i < P; ++i) {
            const F col = V::Broadcast(xt + i * SW * C);
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v) acc[i][v] = V::Fma(col, wv[v], acc[i][v]);
          }
        }
    }
  }
  typename V::Mask mask[NV];
  F bias[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    mask[v] = V::Tail(g.cols - v * V::kLanes);
    bias[v] = g.bias ? V::LoadTail(g.bias + v * V::kLanes, mask[v]) : V::Zero();
  }
  // Locals: the stores could alias g, which made GCC reload them after each.
  const F32Act act = g.act;
  const float lo = g.lo, hi = g.hi;
  float* const y0 = g.y + p0 * g.ldy;
  const int64_t ldy = g.ldy;
  // Plain stores for whole vectors: AVX2's masked store (vmaskmovps) costs
  // about ten plain ones on AMD Zen (SqueezeNet 1.1's 3x3 s2 RGB stem to 64
  // channels at 111x111 on Zen 3: 1.10 -> 0.59 ms; ONNX Runtime 0.70).
  if (g.cols == NV * V::kLanes) {
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        V::Store(y0 + i * ldy + v * V::kLanes, V::Act(V::Add(acc[i][v], bias[v]), act, lo, hi));
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      V::StoreTail(y0 + i * ldy + v * V::kLanes, mask[v],
                   V::Act(V::Add(acc[i][v], bias[v]), act, lo, hi));
}

// Every pixel of the run: blocks of the trait's pixels, the last one moved
// back to end at the run's end (its first pixels are computed twice, to the
// same values); runs shorter than a block one pixel at a time.
template <class V, int KW, int SW, int C, int NV>
void StemRunPixels(const StemRunF32Args& g) {
  constexpr int kP = NV == 1 ? V::kStemPixels1 : V::kStemPixels2;
  if (g.pixels < kP) {
    for (int64_t p = 0; p < g.pixels; ++p) StemRunBlock<V, KW, SW, C, NV, 1>(g, p);
    return;
  }
  for (int64_t p = 0;; p += kP) {
    const int64_t at = p + kP <= g.pixels ? p : g.pixels - kP;
    StemRunBlock<V, KW, SW, C, NV, kP>(g, at);
    if (at + kP >= g.pixels) break;
  }
}

template <class V, int KW, int SW, int C>
void StemRunVectors(const StemRunF32Args& g) {
  if (g.cols <= V::kLanes)
    StemRunPixels<V, KW, SW, C, 1>(g);
  else
    StemRunPixels<V, KW, SW, C, 2>(g);
}

template <class V, int KW, int SW>
void StemRunChannels(const StemRunF32Args& g) {
  if (g.c == 1)
    StemRunVectors<V, KW, SW, 1>(g);
  else
    StemRunVectors<V, KW, SW, 3>(g);
}

template <class V, int KW>
void StemRunStride(const StemRunF32Args& g) {
  if (g.sw == 1)
    StemRunChannels<V, KW, 1>(g);
  else
    StemRunChannels<V, KW, 2>(g);
}

// The driver checked StemRunSupports; cols <= nr = 2 vectors.
template <class V>
void StemRun(const StemRunF32Args& g) {
  if (g.kw == 3)
    StemRunStride<V, 3>(g);
  else if (g.kw == 5)
    StemRunStride<V, 5>(g);
  else
    StemRunStride<V, 7>(g);
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
