// AMX-BF16 microkernels of the channels-last float convolutions in bf16 mode
// (conv_f32_nhwc.h, IgemmBf16Args). tdpbf16ps multiplies a 16x32 bf16 A tile
// (16 pixels x 16 channel pairs) by a 16x32 bf16 B tile (16 channel pairs x
// 16 output channels x 2) into 16x16 fp32. A 32x32 block uses all 8 tile
// registers as the int8 kernels do (igemm_s8_amx.cc): A rows 0-15 and 16-31
// (tmm0, tmm1), B channels 0-15 and 16-31 (tmm2, tmm3), C (tmm4..7).
//
// The driver's bf16 copy of x has rows of kc channels (a multiple of 32, so
// every k block is a whole 64-byte tile row, zeros past C): a tap's 16
// pointers that are equally spaced (1x1 convolutions, runs of pixels inside
// a row) are loaded in place, others are gathered into an aligned buffer.
// The kernel-row kernel (PlaneBf16Args: KxK and 1x1 convolutions without
// groups, im2col stems) loads every A tile in place at a fixed step. Both
// share the epilogue (StoreRow, Bf16Output).
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/amx_tiles.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/f32_v512.h"
#include "kernels/vmath.h"

namespace qfold {
namespace kernels {
namespace {

void ConvertBf16(const float* x, int64_t pixels, int64_t c, uint16_t* out, int64_t kc) {
  for (int64_t p = 0; p < pixels; ++p, x += c, out += kc)
    for (int64_t ch = 0; ch < kc; ch += 32) {
      const __m512 v0 = _mm512_maskz_loadu_ps(TailMask(c - ch), x + ch);
      const __m512 v1 = _mm512_maskz_loadu_ps(TailMask(c - ch - 16), x + ch + 16);
      _mm512_storeu_si512(out + ch, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    }
}

void ConvertBf16Flat(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; i += 32) {
    const __m512 v0 = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    const __m512 v1 = _mm512_maskz_loadu_ps(TailMask(n - i - 16), x + i + 16);
    const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : (__mmask32(1) << (n - i)) - 1;
    _mm512_mask_storeu_epi16(out + i, m, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
  }
}

void WidenBf16(const uint16_t* x, int64_t n, float* out) {
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

// One output pixel's NB vectors from a stored accumulator row: bias,
// residual, activation, y (kOut16: y_bf16) at `at` (IgemmBf16Args,
// PlaneBf16Args). The activation and the output's type are template
// arguments: with one k block per tile (an im2col stem) the epilogue is most
// of the time, and per-vector branches on them cost a third of it.
template <int NB, int kEpi, bool kOut16, class Args>
inline void StoreRow(const Args& a, const float* acc, int64_t at, const __m512* bias,
                     const __mmask16* mask) {
  if (NB == 2 && kOut16 && mask[1] == 0xffff) {
    // A whole 32-channel row of bf16 output: the residual's 32 values in one
    // load, both vectors rounded into one 64-byte store.
    __m512 x0 = _mm512_add_ps(_mm512_load_ps(acc), bias[0]);
    __m512 x1 = _mm512_add_ps(_mm512_load_ps(acc + 16), bias[1 % NB]);
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
    __m512 x = _mm512_add_ps(_mm512_load_ps(acc + 16 * v), bias[v]);
    if (a.residual) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], a.residual + i));
    if (a.residual_bf16) {
      // bf16 -> fp32 is exact: the 16 bits become the float's high half.
      const __m512i r16 =
          _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask[v], a.residual_bf16 + i));
      x = _mm512_add_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(r16, 16)));
    }
    x = Epilogue<kEpi>(a, x);
    if (kOut16)
      _mm256_mask_storeu_epi16(a.y_bf16 + i, mask[v], (__m256i)_mm512_cvtneps_pbh(x));
    else
      _mm512_mask_storeu_ps(a.y + i, mask[v], x);
  }
}

// One k block of a 32 x 16 * NB block: the A tiles in tmm0/tmm1, the B tiles
// loaded from w (rows of 32 channel pairs) into tmm2/tmm3, products into
// tmm4..7. `stream`: the first tile of a call, which fetches the panel's
// weights two k blocks ahead.
template <int NB>
inline void DotKBlock(const uint8_t* w, bool stream) {
  constexpr int64_t kLdw = 128, kBlockBytes = 16 * kLdw;
  if (stream) {
    const char* pf = reinterpret_cast<const char*>(w + 2 * kBlockBytes);
    for (int64_t b = 0; b < kBlockBytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T0);
  }
  _tile_loadd(2, w, kLdw);
  _tile_dpbf16ps(4, 0, 2);
  _tile_dpbf16ps(6, 1, 2);
  if (NB == 2) {
    _tile_loadd(3, w + 64, kLdw);
    _tile_dpbf16ps(5, 0, 3);
    _tile_dpbf16ps(7, 1, 3);
  }
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
void Dispatch(const Args& a, F f) {
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

// NB B tiles (a panel of up to 16 * NB channels) by 2 A tiles (32 pixels).
template <int NB, int kEpi, bool kOut16>
void IgemmTiles(const IgemmBf16Args& a) {
  constexpr int64_t kMr = 32, kLdw = 128;  // B rows: 32 channels x 2 bf16
  const int64_t rows = a.rows, taps = a.taps, kblocks = a.kc / 32;
  const int64_t tiles = (rows + kMr - 1) / kMr;
  const uint8_t* const w0 = reinterpret_cast<const uint8_t*>(a.w);
  const int64_t tap_bytes = a.kc / 2 * kLdw;
  alignas(64) uint8_t abuf[2][16 * 64];
  alignas(64) float cbuf[kMr * 32];
  const __m512i no_xor = _mm512_setzero_si512();
  __m512 bias[NB];
  __mmask16 mask[NB];
  LoadPanelBias<NB>(a, bias, mask);
  auto epilogue = [&](int64_t t) {
    const int64_t nrow = rows - t * kMr < kMr ? rows - t * kMr : kMr;
    for (int64_t r = 0; r < nrow; ++r)
      StoreRow<NB, kEpi, kOut16>(a, cbuf + r * 32, (t * kMr + r) * a.ldy, bias, mask);
  };
  for (int64_t t = 0; t < tiles; ++t) {
    _tile_zero(4);
    _tile_zero(6);
    if (NB == 2) {
      _tile_zero(5);
      _tile_zero(7);
    }
    const uint16_t* const* ind = a.a + t * taps * kMr;
    for (int64_t tap = 0; tap < taps; ++tap, ind += kMr) {
      int64_t s0 = 0, s1 = 0;
      const bool d0 = amx::EquallySpaced(ind, &s0);
      const bool d1 = amx::EquallySpaced(ind + 16, &s1);
      const uint8_t* p0 = reinterpret_cast<const uint8_t*>(ind[0]);
      const uint8_t* p1 = reinterpret_cast<const uint8_t*>(ind[16]);
      const uint8_t* w = w0 + tap * tap_bytes;
      for (int64_t q = 0; q < kblocks; ++q, w += 16 * kLdw) {
        // Every k block is a whole 64-byte row of the copy (kc % 32 == 0).
        const int64_t off = 64 * q;
        if (d0) {
          _tile_loadd(0, p0 + off, s0);
        } else {
          amx::Publish(abuf[0]);
          amx::GatherRows(ind, off, 64, no_xor, abuf[0]);
          amx::Publish(abuf[0]);
          _tile_loadd(0, abuf[0], 64);
        }
        if (d1) {
          _tile_loadd(1, p1 + off, s1);
        } else {
          amx::Publish(abuf[1]);
          amx::GatherRows(ind + 16, off, 64, no_xor, abuf[1]);
          amx::Publish(abuf[1]);
          _tile_loadd(1, abuf[1], 64);
        }
        DotKBlock<NB>(w, t == 0);
      }
    }
    // The previous tile's epilogue runs while the tile unit works on this one.
    if (t > 0) epilogue(t - 1);
    _tile_stored(4, cbuf, kLdw);
    _tile_stored(6, cbuf + 16 * 32, kLdw);
    if (NB == 2) {
      _tile_stored(5, cbuf + 16, kLdw);
      _tile_stored(7, cbuf + 16 * 32 + 16, kLdw);
    }
  }
  if (tiles > 0) epilogue(tiles - 1);
}

// Kernel rows of a padded plane (PlaneBf16Args): every A tile loads in place,
// 16 positions pixel_step apart; no pointers, no gathers.
template <int NB, int kEpi, bool kOut16>
void PlaneTiles(const PlaneBf16Args& a) {
  constexpr int64_t kMr = 32, kLdw = 128;
  const int64_t kblocks = a.kc / 32, stride = 2 * a.pixel_step;
  const int64_t row_bytes = 2 * a.kernel_row, block_bytes = 16 * kLdw;
  const uint8_t* const w0 = reinterpret_cast<const uint8_t*>(a.w);
  alignas(64) float cbuf[kMr * 32];
  __m512 bias[NB];
  __mmask16 mask[NB];
  LoadPanelBias<NB>(a, bias, mask);
  auto tile_base = [&](int64_t v) {
    return reinterpret_cast<const uint8_t*>(a.x + v / a.vw * a.row_step + v % a.vw * a.pixel_step);
  };
  auto epilogue = [&](int64_t v) {
    int64_t oy = v / a.vw, ox = v % a.vw;
    const int64_t n = a.v1 - v < kMr ? a.v1 - v : kMr;
    for (int64_t r = 0; r < n; ++r) {
      if (ox < a.ow && oy < a.oh)
        StoreRow<NB, kEpi, kOut16>(a, cbuf + r * 32, (oy * a.ow + ox - a.p0) * a.ldy, bias, mask);
      if (++ox == a.vw) ox = 0, ++oy;
    }
  };
  for (int64_t v = a.v0; v < a.v1; v += kMr) {
    _tile_zero(4);
    _tile_zero(6);
    if (NB == 2) {
      _tile_zero(5);
      _tile_zero(7);
    }
    const uint8_t* p0 = tile_base(v);
    const uint8_t* p1 = tile_base(v + 16);
    const uint8_t* w = w0;
    for (int64_t ky = 0; ky < a.kh; ++ky, p0 += row_bytes, p1 += row_bytes)
      for (int64_t q = 0; q < kblocks; ++q, w += block_bytes) {
        _tile_loadd(0, p0 + 64 * q, stride);
        _tile_loadd(1, p1 + 64 * q, stride);
        DotKBlock<NB>(w, v == a.v0);
      }
    // The previous tile's epilogue runs while the tile unit works on this one.
    if (v > a.v0) epilogue(v - kMr);
    _tile_stored(4, cbuf, kLdw);
    _tile_stored(6, cbuf + 16 * 32, kLdw);
    if (NB == 2) {
      _tile_stored(5, cbuf + 16, kLdw);
      _tile_stored(7, cbuf + 16 * 32 + 16, kLdw);
    }
  }
  if (a.v1 > a.v0) epilogue(a.v0 + (a.v1 - a.v0 - 1) / kMr * kMr);
}

// Each kernel row (fewer than 16 values) is loaded into a register and
// permuted into its lanes of the row's one or two vectors: one aligned
// store per 32 values, not a store per kernel row across cache lines.
void Im2colBf16(const Im2colBf16Args& a) {
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

void GatherRowsBf16(const float* x32, const uint16_t* x16, int64_t pixels, int64_t x_step,
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

// Between amx::ConfigureTiles16x64 and amx::ReleaseTiles on the calling thread
// (ConvNhwcBf16Kernels).
void IgemmBf16Amx(const IgemmBf16Args& a) {
  Dispatch(a, [&](auto nb, auto epi, auto out16) {
    IgemmTiles<decltype(nb)::value, decltype(epi)::value, decltype(out16)::value>(a);
  });
}

void PlaneBf16Amx(const PlaneBf16Args& a) {
  Dispatch(a, [&](auto nb, auto epi, auto out16) {
    PlaneTiles<decltype(nb)::value, decltype(epi)::value, decltype(out16)::value>(a);
  });
}

}  // namespace

extern const ConvNhwcBf16Kernels kConvNhwcBf16Amx;
const ConvNhwcBf16Kernels kConvNhwcBf16Amx = {
    "amx_bf16",       ConvertBf16,    ConvertBf16Flat,
    WidenBf16,        IgemmBf16Amx,   PlaneBf16Amx,
    Im2colBf16,       GatherRowsBf16, amx::ConfigureTiles16x64,
    amx::ReleaseTiles};

}  // namespace kernels
}  // namespace qfold
