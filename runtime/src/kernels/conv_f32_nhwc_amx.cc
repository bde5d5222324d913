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
// share the epilogue (StoreRow, Bf16Output) and the data movement
// (conv_bf16_x86.h) with the AVX-512 BF16 kernels.
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/conv_bf16_x86.h"

namespace qfold {
namespace kernels {
namespace {

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
const ConvNhwcBf16Kernels kConvNhwcBf16Amx = {"amx_bf16",
                                              ConvertBf16,
                                              ConvertBf16Flat,
                                              WidenBf16,
                                              IgemmBf16Amx,
                                              PlaneBf16Amx,
                                              Im2colBf16,
                                              GatherRowsBf16,
                                              amx::ConfigureTiles16x64,
                                              amx::ReleaseTiles,
                                              8};

}  // namespace kernels
}  // namespace qfold
