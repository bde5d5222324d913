// AMX-BF16 tiles of the bf16 Gemm (gemm_bf16.h, TilesBf16Args): tdpbf16ps
// multiplies 16 rows of A (16 k pairs each, a 16x64-byte tile loaded straight
// from the driver's bf16 rows) by 16 k pairs of a packed panel (a B tile as
// it stands) into 16x16 fp32. Up to 32 rows by 2 panels per step use all 8
// tile registers: A rows 0-15 and 16-31 (tmm0, tmm1), B panels (tmm2, tmm3),
// C (tmm4..7). With a few dozen rows (a recognizer's classifier, 40 steps by
// 6625 classes) this is several times the AVX-512 gemv, which reloads B's
// rows for every group of 4 rows.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/f32_v512.h"
#include "kernels/gemm_bf16.h"

namespace qfold {
namespace kernels {
namespace {

// Tile register `tile` (4..7, a 16x16 fp32 C tile) to `dst` (row stride in
// bytes); GCC's tile intrinsics take the register number as a literal.
void StoreTile(int tile, void* dst, int64_t stride) {
  switch (tile) {
    case 4:
      _tile_stored(4, dst, stride);
      return;
    case 5:
      _tile_stored(5, dst, stride);
      return;
    case 6:
      _tile_stored(6, dst, stride);
      return;
    default:
      _tile_stored(7, dst, stride);
      return;
  }
}

// One C tile to y: straight when whole, else through cbuf. `rows` may exceed
// the tile's 16 (the rows left from it on); only its own are stored.
void StoreC(int tile, float* y, int64_t ldy, int64_t rows, int64_t cols, float* cbuf) {
  if (rows >= 16 && cols >= 16) return StoreTile(tile, y, ldy * int64_t(sizeof(float)));
  StoreTile(tile, cbuf, 64);
  const __mmask16 m = TailMask(cols);
  for (int64_t r = 0; r < rows && r < 16; ++r)
    _mm512_mask_storeu_ps(y + r * ldy, m, _mm512_load_ps(cbuf + 16 * r));
}

// kTwoA: 32 rows (A tiles 0 and 1), else 16; kNb: B panels (1 or 2).
template <bool kTwoA, int kNb>
void Step(const TilesBf16Args& t, int64_t r0, bool prefetch) {
  const int64_t kblocks = t.kp / 32, lda_bytes = t.lda * int64_t(sizeof(uint16_t));
  const uint16_t* a0 = t.a + r0 * t.lda;
  const uint16_t* a1 = a0 + 16 * t.lda;
  const uint16_t* b0 = t.b;
  const uint16_t* b1 = t.b + t.panel_stride;
  _tile_zero(4);
  if (kNb == 2) _tile_zero(5);
  if (kTwoA) {
    _tile_zero(6);
    if (kNb == 2) _tile_zero(7);
  }
  // A k block of a panel: 16 pair rows of 16 columns x 2 (512 values).
  for (int64_t q = 0; q < kblocks; ++q) {
    if (prefetch) {
      // The next call's two panels, one k block each per step (2 KiB): they
      // come from memory, and a tile load that misses stalls the tile unit.
      const char* pf0 = reinterpret_cast<const char*>(t.prefetch + q * 512);
      const char* pf1 = reinterpret_cast<const char*>(t.prefetch + t.panel_stride + q * 512);
      for (int b = 0; b < 1024; b += 64) {
        _mm_prefetch(pf0 + b, _MM_HINT_T0);
        _mm_prefetch(pf1 + b, _MM_HINT_T0);
      }
    }
    _tile_loadd(0, a0 + 32 * q, lda_bytes);
    _tile_loadd(2, b0 + 512 * q, 64);
    _tile_dpbf16ps(4, 0, 2);
    if (kTwoA) {
      _tile_loadd(1, a1 + 32 * q, lda_bytes);
      _tile_dpbf16ps(6, 1, 2);
    }
    if (kNb == 2) {
      _tile_loadd(3, b1 + 512 * q, 64);
      _tile_dpbf16ps(5, 0, 3);
      if (kTwoA) _tile_dpbf16ps(7, 1, 3);
    }
  }
  alignas(64) float cbuf[16 * 16];
  const int64_t rows0 = std::min<int64_t>(16, t.rows - r0), rows1 = t.rows - r0 - 16;
  float* y0 = t.y + r0 * t.ldy;
  float* y1 = y0 + 16 * t.ldy;
  StoreC(4, y0, t.ldy, rows0, t.cols, cbuf);
  if (kNb == 2) StoreC(5, y0 + 16, t.ldy, rows0, t.cols - 16, cbuf);
  if (kTwoA) {
    StoreC(6, y1, t.ldy, rows1, t.cols, cbuf);
    if (kNb == 2) StoreC(7, y1 + 16, t.ldy, rows1, t.cols - 16, cbuf);
  }
}

template <int kNb>
void Panels(const TilesBf16Args& t) {
  for (int64_t r0 = 0; r0 < t.rows; r0 += 32) {
    const bool prefetch = r0 == 0 && t.prefetch;
    if (t.rows - r0 > 16)
      Step<true, kNb>(t, r0, prefetch);
    else
      Step<false, kNb>(t, r0, prefetch);
  }
}

void TilesBf16Amx(const TilesBf16Args& t) {
  if (t.cols > 16)
    Panels<2>(t);
  else
    Panels<1>(t);
}

}  // namespace

// From 16 rows (one full A tile) on; fewer stay on the gemv.
extern const GemmBf16Kernels kGemmBf16Amx;
const GemmBf16Kernels kGemmBf16Amx = {"amx_bf16", GemvBf16Avx512,           TilesBf16Amx,
                                      16,         amx::ConfigureTiles16x64, amx::ReleaseTiles};

}  // namespace kernels
}  // namespace qfold
