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
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/f32_v512.h"

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

// NB B tiles (a panel of up to 16 * NB channels) by 2 A tiles (32 pixels).
template <int NB>
void IgemmTiles(const IgemmBf16Args& a) {
  constexpr int64_t kMr = 32, kLdw = 128;  // B rows: 32 channels x 2 bf16
  const int64_t rows = a.rows, taps = a.taps, kblocks = a.kc / 32;
  const int64_t valid = a.valid > 0 ? a.valid : a.kc;
  const int64_t tiles = (rows + kMr - 1) / kMr;
  const uint8_t* const w0 = reinterpret_cast<const uint8_t*>(a.w);
  const int64_t tap_bytes = a.kc / 2 * kLdw;
  alignas(64) uint8_t abuf[2][16 * 64];
  alignas(64) float cbuf[kMr * 32];
  const __m512i no_xor = _mm512_setzero_si512();
  __m512 bias[NB];
  __mmask16 mask[NB];
  for (int v = 0; v < NB; ++v) {
    mask[v] = TailMask(a.cols - 16 * v);
    bias[v] = a.bias ? _mm512_maskz_loadu_ps(mask[v], a.bias + 16 * v) : _mm512_setzero_ps();
  }
  auto epilogue = [&](int64_t t) {
    const int64_t nrow = rows - t * kMr < kMr ? rows - t * kMr : kMr;
    for (int64_t r = 0; r < nrow; ++r) {
      const int64_t row = t * kMr + r;
      for (int v = 0; v < NB; ++v) {
        if (!mask[v]) continue;
        const int64_t at = row * a.ldy + 16 * v;
        __m512 x = _mm512_add_ps(_mm512_load_ps(cbuf + r * 32 + 16 * v), bias[v]);
        if (a.residual) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], a.residual + at));
        if (a.residual_bf16) {
          // bf16 -> fp32 is exact: the 16 bits become the float's high half.
          const __m512i r16 =
              _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask[v], a.residual_bf16 + at));
          x = _mm512_add_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(r16, 16)));
        }
        x = Activate(x, a.act, a.lo, a.hi);
        if (a.y_bf16)
          _mm256_mask_storeu_epi16(a.y_bf16 + at, mask[v], (__m256i)_mm512_cvtneps_pbh(x));
        else
          _mm512_mask_storeu_ps(a.y + at, mask[v], x);
      }
    }
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
        const int64_t off = 64 * q, left = valid - 32 * q;
        const int64_t bytes = left >= 32 ? 64 : left > 0 ? 2 * left : 0;
        const bool full = left >= 32;
        if (d0 && full) {
          _tile_loadd(0, p0 + off, s0);
        } else {
          amx::Publish(abuf[0]);
          amx::GatherRows(ind, off, bytes, no_xor, abuf[0]);
          amx::Publish(abuf[0]);
          _tile_loadd(0, abuf[0], 64);
        }
        if (d1 && full) {
          _tile_loadd(1, p1 + off, s1);
        } else {
          amx::Publish(abuf[1]);
          amx::GatherRows(ind + 16, off, bytes, no_xor, abuf[1]);
          amx::Publish(abuf[1]);
          _tile_loadd(1, abuf[1], 64);
        }
        if (t == 0) {
          // The first tile streams the panel's weights; fetch two k blocks ahead.
          const char* pf = reinterpret_cast<const char*>(w + 32 * kLdw);
          for (int64_t b = 0; b < 16 * kLdw; b += 64) _mm_prefetch(pf + b, _MM_HINT_T0);
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

// Between amx::ConfigureTiles16x64 and amx::ReleaseTiles on the calling thread
// (ConvNhwcBf16Kernels).
void IgemmBf16Amx(const IgemmBf16Args& a) {
  if (a.cols > 16)
    IgemmTiles<2>(a);
  else
    IgemmTiles<1>(a);
}

}  // namespace

extern const ConvNhwcBf16Kernels kConvNhwcBf16Amx;
const ConvNhwcBf16Kernels kConvNhwcBf16Amx = {"amx_bf16",       ConvertBf16,
                                              ConvertBf16Flat,  WidenBf16,
                                              IgemmBf16Amx,     amx::ConfigureTiles16x64,
                                              amx::ReleaseTiles};

}  // namespace kernels
}  // namespace qfold
