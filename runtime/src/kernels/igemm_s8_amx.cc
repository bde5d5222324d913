// AMX-INT8 indirect GEMM microkernels (igemm_s8.h): tdpbusd multiplies a
// 16x64 u8 tile (16 pixels x 16 k-groups of 4) by a 16x64 s8 tile (16
// k-groups x 16 channels x 4) into 16x16 int32, exactly. A 32x32 block uses
// all 8 tile registers: A rows 0-15 and 16-31 (tmm0, tmm1), B channels 0-15
// and 16-31 (tmm2, tmm3), C (tmm4..7); a 32x16 variant serves narrow panels.
//
// The packed weights [tap][kc4][nr][4] are B tiles as they stand (row stride
// nr * 4), with each tap's kc4 padded to 16 (kc4_align) so every k block is
// one full tile. A tiles load straight from the activations when a tap's 16
// pointers are equally spaced (1x1 convolutions, stride-1 KxK ones over the
// driver's padded plane); otherwise, for int8 activations (xor 0x80) and for
// the last, partial k block unless Args::overread (masked loads: only
// 4 * kc4 bytes per pointer are readable), the 16 rows are gathered into an
// aligned buffer first. The
// accumulators go through memory to the AVX-512 epilogue of the zmm kernels.
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/igemm_s8_v512.h"

namespace qfold {
namespace kernels {
namespace {

using amx::EquallySpaced;
using amx::GatherRows;
using amx::Publish;

// NB B tiles (nr = 16 * NB) by 2 A tiles (mr = 32).
template <int NB>
struct IgemmAmx {
  static constexpr int kMr = 32, kNr = 16 * NB;

  // kRemap: rows store through Args::out_row (a template argument: the
  // lookup and branch per row cost 1x1 convolutions, whose epilogue bounds
  // them, 5%).
  template <bool kFloatOut, bool kRemap>
  static void Tiles(const IgemmS8Args& a) {
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t kc4p = (kc4 + 15) / 16 * 16, ldw = int64_t(kNr) * 4;
    const int64_t tiles = (rows + kMr - 1) / kMr;
    const __m512i xmask = _mm512_set1_epi8(a.x_signed ? char(0x80) : 0);
    const bool gather_all = a.x_signed;
    alignas(64) uint8_t abuf[2][16 * 64];
    alignas(64) int32_t cbuf[kMr * kNr];
    const __m512 lo = _mm512_set1_ps(float(a.lo - a.yzp)), hi = _mm512_set1_ps(float(a.hi - a.yzp));
    const __m512i yzp = _mm512_set1_epi32(a.yzp);
    const __m512 flo = _mm512_set1_ps(a.flo), fhi = _mm512_set1_ps(a.fhi);
    // The channel parameters, the same for every row.
    __m512i bias[NB], wzp[NB];
    __m512 mult[NB], fbias[NB];
    for (int v = 0; v < NB; ++v) {
      bias[v] = V512::LoadI(a.bias + v * 16);
      wzp[v] = a.wzp ? V512::LoadI(a.wzp + v * 16) : _mm512_setzero_si512();
      mult[v] = V512::LoadF(a.mult + v * 16);
      fbias[v] = kFloatOut ? V512::LoadF(a.fbias + v * 16) : _mm512_setzero_ps();
    }
    // With every |mult| <= 0.5 the shared packed epilogue (V512::StorePacked)
    // bounds 1x1 convolutions of small K, whose products take a few tdpbusd.
    const bool packed_epilogue = !kFloatOut && V512::SmallMults(a.mult, a.cols);
    const V512::PackedParams q = V512::MakePackedParams(a.yzp, a.lo, a.hi);
    auto acc_at = [&](int64_t r, int v, int64_t row) {
      __m512i x = _mm512_add_epi32(_mm512_load_si512(cbuf + r * kNr + v * 16), bias[v]);
      if (a.wzp)
        x = _mm512_sub_epi32(x, _mm512_mullo_epi32(wzp[v], _mm512_set1_epi32(a.xsum[row])));
      return x;
    };
    auto packed_rows = [&](int64_t t, int64_t nrow) {
      for (int64_t r = 0; r < nrow; ++r) {
        const int64_t row = t * kMr + r, orow = kRemap ? a.out_row[row] : row;
        if (kRemap && orow < 0) continue;
        __m512i x[NB];
        for (int v = 0; v < NB; ++v) x[v] = acc_at(r, v, row);
        V512::StorePacked(x, mult, q, a.cols, a.y + orow * a.ldy);
      }
    };
    // Requantizes tile t's accumulators from cbuf.
    auto epilogue = [&](int64_t t) {
      const int64_t nrow = rows - t * kMr < kMr ? rows - t * kMr : kMr;
      if (packed_epilogue) return packed_rows(t, nrow);
      for (int64_t r = 0; r < nrow; ++r) {
        const int64_t row = t * kMr + r, orow = kRemap ? a.out_row[row] : row;
        if (kRemap && orow < 0) continue;
#pragma GCC unroll 2
        for (int v = 0; v < NB; ++v) {
          const int64_t n = a.cols - v * 16;
          if (n <= 0) continue;
          __m512i x = _mm512_add_epi32(_mm512_load_si512(cbuf + r * kNr + v * 16), bias[v]);
          if (a.wzp)
            x = _mm512_sub_epi32(x, _mm512_mullo_epi32(wzp[v], _mm512_set1_epi32(a.xsum[row])));
          if (kFloatOut)
            V512::StoreF(V512::Dequant(x, mult[v], fbias[v], flo, fhi), n,
                         a.yf + orow * a.ldy + v * 16);
          else
            V512::Store(V512::Requant(x, mult[v], lo, hi, yzp), n, a.y + orow * a.ldy + v * 16);
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
      const uint8_t* const* ind = a.ind + t * taps * kMr;
      for (int64_t tap = 0; tap < taps; ++tap, ind += kMr) {
        int64_t s0 = 0, s1 = 0;
        const bool d0 = !gather_all && EquallySpaced(ind, &s0);
        const bool d1 = !gather_all && EquallySpaced(ind + 16, &s1);
        const uint8_t* p0 = ind[0] + a_offset;
        const uint8_t* p1 = ind[16] + a_offset;
        const uint8_t* w = a.w + tap * kc4p * ldw;
        for (int64_t q0 = 0; q0 < kc4; q0 += 16, w += 16 * ldw) {
          const bool full = q0 + 16 <= kc4, in_place = full || a.overread;
          const int64_t off = 4 * q0, bytes = full ? 64 : 4 * (kc4 - q0);
          if (d0 && in_place) {
            _tile_loadd(0, p0 + off, s0);
          } else {
            Publish(abuf[0]);
            GatherRows(ind, a_offset + off, bytes, xmask, abuf[0]);
            Publish(abuf[0]);
            _tile_loadd(0, abuf[0], 64);
          }
          if (d1 && in_place) {
            _tile_loadd(1, p1 + off, s1);
          } else {
            Publish(abuf[1]);
            GatherRows(ind + 16, a_offset + off, bytes, xmask, abuf[1]);
            Publish(abuf[1]);
            _tile_loadd(1, abuf[1], 64);
          }
          if (t == 0) {
            // The first tile streams the panel's weights from memory (the
            // later tiles find them in cache); tile loads that miss stall the
            // tile unit, so fetch two k blocks ahead (past the last block:
            // the next panel's, which the next call reads).
            const char* pf = reinterpret_cast<const char*>(w + 32 * ldw);
            for (int64_t b = 0; b < 16 * ldw; b += 64) _mm_prefetch(pf + b, _MM_HINT_T0);
          }
          _tile_loadd(2, w, ldw);
          _tile_dpbusd(4, 0, 2);
          _tile_dpbusd(6, 1, 2);
          if (NB == 2) {
            _tile_loadd(3, w + 64, ldw);
            _tile_dpbusd(5, 0, 3);
            _tile_dpbusd(7, 1, 3);
          }
        }
      }
      // The previous tile's epilogue runs while the tile unit works on this
      // one's products (issued above; the stores below wait for them).
      if (t > 0) epilogue(t - 1);
      _tile_stored(4, cbuf, ldw);
      _tile_stored(6, cbuf + 16 * kNr, ldw);
      if (NB == 2) {
        _tile_stored(5, cbuf + 16, ldw);
        _tile_stored(7, cbuf + 16 * kNr + 16, ldw);
      }
    }
    if (tiles > 0) epilogue(tiles - 1);
  }

  // Between the table's begin and end on the calling thread (IgemmS8Kernel).
  static void Run(const IgemmS8Args& a) {
    if (a.yf)
      a.out_row ? Tiles<true, true>(a) : Tiles<true, false>(a);
    else
      a.out_row ? Tiles<false, true>(a) : Tiles<false, false>(a);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8Amx[];
const IgemmS8Kernel kIgemmS8Amx[] = {
    {"amx", 32, 32, 1, 1, IgemmAmx<2>::Run, 4, 16, 16, amx::ConfigureTiles16x64, amx::ReleaseTiles},
    {"amx", 32, 16, 1, 1, IgemmAmx<1>::Run, 4, 16, 16, amx::ConfigureTiles16x64, amx::ReleaseTiles},
    {"", 0, 0, 0, 0, nullptr, 0, 1, 1},
};

}  // namespace kernels
}  // namespace qfold
