// What the bf16-mode convolution kernels for x86 share (conv_f32_nhwc.h,
// ConvNhwcBf16Kernels): the AMX-BF16 tiles (conv_f32_nhwc_amx.cc) and the
// AVX-512 BF16 vectors (conv_f32_nhwc_avx512bf16.cc) read the same bf16 copy
// of x and the same packed weights, and write through the same epilogue. For
// files compiled with AVX-512 BF16 or more.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/conv_f32_nhwc.h"
#include "kernels/f32_v512.h"
#include "kernels/vmath.h"

namespace qfold {
namespace kernels {
namespace {

inline void ConvertBf16(const float* x, int64_t pixels, int64_t c, uint16_t* out, int64_t kc) {
  for (int64_t p = 0; p < pixels; ++p, x += c, out += kc)
    for (int64_t ch = 0; ch < kc; ch += 32) {
      const __m512 v0 = _mm512_maskz_loadu_ps(TailMask(c - ch), x + ch);
      const __m512 v1 = _mm512_maskz_loadu_ps(TailMask(c - ch - 16), x + ch + 16);
      _mm512_storeu_si512(out + ch, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    }
}

inline void ConvertBf16Flat(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; i += 32) {
    const __m512 v0 = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    const __m512 v1 = _mm512_maskz_loadu_ps(TailMask(n - i - 16), x + i + 16);
    const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (n - i)) - 1;
    _mm512_mask_storeu_epi16(out + i, m, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
  }
}

inline void WidenBf16(const uint16_t* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
  }
}

// The epilogue's activation as a template argument: F32Act's values, or
// HardSwish (a convolution's fused FusedActivation::kHardSwish, with its
// optional affine; the vmath kernels' operations in their order, so the
// same bits as the pass after the epilogue it replaces).
constexpr int kEpiHardSwish = 3;

template <int kEpi, class Args>
inline __m512 Epilogue(const Args& a, __m512 x) {
  if (kEpi != kEpiHardSwish) return Activate(x, F32Act(kEpi), a.lo, a.hi);
  const __m512 gate =
      _mm512_add_ps(Rounded(_mm512_mul_ps(x, _mm512_set1_ps(1.f / 6.f))), _mm512_set1_ps(0.5f));
  x = _mm512_mul_ps(x,
                    _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.f), gate)));
  if (a.hswish_affine)
    x = _mm512_add_ps(Rounded(_mm512_mul_ps(x, _mm512_set1_ps(a.hswish_scale))),
                      _mm512_set1_ps(a.hswish_shift));
  return x;
}

// One output pixel's NB vectors of sums (bias included): residual,
// activation, y (kOut16: y_bf16) at `at` (Bf16Output). The activation and the
// output's type are template arguments: with one k block per tile (an im2col
// stem) the epilogue is most of the time, and per-vector branches on them
// cost a third of it.
template <int NB, int kEpi, bool kOut16, class Args>
inline void StoreSums(const Args& a, __m512* x, int64_t at, const __mmask16* mask) {
  if (NB == 2 && kOut16 && mask[1] == 0xffff) {
    // A whole 32-channel row of bf16 output: the residual's 32 values in one
    // load, both vectors rounded into one 64-byte store.
    __m512 x0 = x[0], x1 = x[1 % NB];
    if (a.residual) {
      x0 = _mm512_add_ps(x0, _mm512_loadu_ps(a.residual + at));
      x1 = _mm512_add_ps(x1, _mm512_loadu_ps(a.residual + at + 16));
    }
    if (a.residual_bf16) {
      const __m512i r = _mm512_loadu_si512(a.residual_bf16 + at);
      const __m512i r0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(r));
      const __m512i r1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1));
      x0 = _mm512_add_ps(x0, _mm512_castsi512_ps(_mm512_slli_epi32(r0, 16)));
      x1 = _mm512_add_ps(x1, _mm512_castsi512_ps(_mm512_slli_epi32(r1, 16)));
    }
    x0 = Epilogue<kEpi>(a, x0);
    x1 = Epilogue<kEpi>(a, x1);
    _mm512_storeu_si512(a.y_bf16 + at, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
    return;
  }
  for (int v = 0; v < NB; ++v) {
    if (!mask[v]) continue;
    const int64_t i = at + 16 * v;
    __m512 y = x[v];
    if (a.residual) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask[v], a.residual + i));
    if (a.residual_bf16) {
      // bf16 -> fp32 is exact: the 16 bits become the float's high half.
      const __m512i r16 =
          _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask[v], a.residual_bf16 + i));
      y = _mm512_add_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(r16, 16)));
    }
    y = Epilogue<kEpi>(a, y);
    if (kOut16)
      _mm256_mask_storeu_epi16(a.y_bf16 + i, mask[v], (__m256i)_mm512_cvtneps_pbh(y));
    else
      _mm512_mask_storeu_ps(a.y + i, mask[v], y);
  }
}

// StoreSums of a stored accumulator row (32 floats) plus the bias.
template <int NB, int kEpi, bool kOut16, class Args>
inline void StoreRow(const Args& a, const float* acc, int64_t at, const __m512* bias,
                     const __mmask16* mask) {
  __m512 x[NB];
  for (int v = 0; v < NB; ++v) x[v] = _mm512_add_ps(_mm512_load_ps(acc + 16 * v), bias[v]);
  StoreSums<NB, kEpi, kOut16>(a, x, at, mask);
}

// The panel's columns (masks of its NB vectors) and their biases (0 without).
template <int NB, class Args>
inline void LoadPanelBias(const Args& a, __m512* bias, __mmask16* mask) {
  for (int v = 0; v < NB; ++v) {
    mask[v] = TailMask(a.cols - 16 * v);
    bias[v] = a.bias ? _mm512_maskz_loadu_ps(mask[v], a.bias + 16 * v) : _mm512_setzero_ps();
  }
}

// Calls f(NB, epilogue activation, bf16 output) with each as a compile-time
// constant (HardSwish only without an F32Act before it: the driver fuses it
// only then).
template <class Args, class F>
inline void Dispatch(const Args& a, F f) {
  auto out = [&](auto nb, auto epi) {
    if (a.y_bf16)
      f(nb, epi, std::true_type{});
    else
      f(nb, epi, std::false_type{});
  };
  auto epi = [&](auto nb) {
    if (a.hswish)
      out(nb, std::integral_constant<int, kEpiHardSwish>{});
    else if (a.act == F32Act::kRelu)
      out(nb, std::integral_constant<int, int(F32Act::kRelu)>{});
    else if (a.act == F32Act::kClamp)
      out(nb, std::integral_constant<int, int(F32Act::kClamp)>{});
    else
      out(nb, std::integral_constant<int, int(F32Act::kNone)>{});
  };
  if (a.cols > 16)
    epi(std::integral_constant<int, 2>{});
  else
    epi(std::integral_constant<int, 1>{});
}

// Each kernel row (fewer than 16 values) is loaded into a register and
// permuted into its lanes of the row's one or two vectors: one aligned
// store per 32 values, not a store per kernel row across cache lines.
inline void Im2colBf16(const Im2colBf16Args& a) {
  const int64_t row = a.kw * a.c, kh = a.kh;
  const __mmask32 load = (__mmask32(1) << row) - 1;
  // Lane i of output vector h takes lane i - lo of the row (operand 2,
  // index 32 + i - lo) where lo <= i < lo + row, else keeps its own.
  __m512i idx[2][64];
  bool touches[2][64] = {};
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int h = 0; h < 2; ++h) {
      alignas(64) uint16_t lanes[32];
      for (int i = 0; i < 32; ++i) {
        const int64_t g = 32 * h + i, lo = ky * row;
        const bool in = g >= lo && g < lo + row;
        touches[h][ky] |= in;
        lanes[i] = uint16_t(in ? 32 + g - lo : i);
      }
      idx[h][ky] = _mm512_load_si512(lanes);
    }
  const bool two = a.kc > 32;
  uint16_t* out = a.out;
  int64_t oy = a.oy, ox = a.ox;
  for (int64_t i = 0; i < a.count; ++i, out += a.kc) {
    const uint16_t* src = a.plane + (oy * a.sh * a.pw + ox * a.sw) * a.c;
    __m512i v0 = _mm512_setzero_si512(), v1 = _mm512_setzero_si512();
    for (int64_t ky = 0; ky < kh; ++ky, src += a.dh * a.pw * a.c) {
      const __m512i r = _mm512_maskz_loadu_epi16(load, src);
      if (touches[0][ky]) v0 = _mm512_permutex2var_epi16(v0, idx[0][ky], r);
      if (two && touches[1][ky]) v1 = _mm512_permutex2var_epi16(v1, idx[1][ky], r);
    }
    _mm512_storeu_si512(out, v0);
    if (two) _mm512_storeu_si512(out + 32, v1);
    if (++ox == a.ow) ox = 0, ++oy;
  }
  for (int64_t i = a.count; i < a.rows; ++i, out += a.kc)
    for (int64_t j = 0; j < a.kc; j += 32) _mm512_storeu_si512(out + j, _mm512_setzero_si512());
}

inline void GatherRowsBf16(const float* x32, const uint16_t* x16, int64_t pixels, int64_t x_step,
                           int64_t c, uint16_t* out, int64_t kc) {
  for (int64_t p = 0; p < pixels; ++p, out += kc)
    for (int64_t ch = 0; ch < kc; ch += 32) {
      __m512i v;
      if (x32) {
        const float* x = x32 + p * x_step + ch;
        const __m512 v0 = _mm512_maskz_loadu_ps(TailMask(c - ch), x);
        const __m512 v1 = _mm512_maskz_loadu_ps(TailMask(c - ch - 16), x + 16);
        v = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
      } else {
        const int64_t left = c - ch;
        const __mmask32 m = left >= 32 ? ~__mmask32(0) : left <= 0 ? 0 : (__mmask32(1) << left) - 1;
        v = _mm512_maskz_loadu_epi16(m, x16 + p * x_step + ch);
      }
      _mm512_storeu_si512(out + ch, v);
    }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
