// Pieces every AMX microkernel uses (include only from *_amx.cc files, which
// are compiled with the AMX flags): the tile configuration, the ordering
// barrier around buffers that tile loads read, and the row gathers.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace qfold {
namespace kernels {
namespace amx {

// The LDTILECFG memory operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile
  uint8_t rows[16] = {};
};

// GCC's tile load and ldtilecfg asm statements declare no memory operand
// (ldtilecfg: 8 bytes), so stores into a buffer they read could be dropped or
// sunk past them, or the next gather's stores hoisted above them; a call
// before and after the gather orders it with the tile loads around it.
inline void Publish(const void* p) {
  __asm__ volatile("" : : "r"(p) : "memory");
}

// Tiles 0-7 as 16 rows of 64 bytes, for this thread until ReleaseTiles.
inline void ConfigureTiles16x64() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = 16;
  }
  Publish(&cfg);
  _tile_loadconfig(&cfg);
}

// The end of a thread's tile use (the kernel tables' `end`).
inline void ReleaseTiles() {
  _tile_release();
}

// Whether the 16 pointers are p[0] + r * stride (then *stride, in bytes, is set).
template <class T>
inline bool EquallySpaced(const T* const* p, int64_t* stride) {
  const intptr_t s = reinterpret_cast<intptr_t>(p[1]) - reinterpret_cast<intptr_t>(p[0]);
  intptr_t expect = reinterpret_cast<intptr_t>(p[0]);
  bool ok = true;
  for (int r = 1; r < 16; ++r) {
    expect += s;
    ok &= reinterpret_cast<intptr_t>(p[r]) == expect;
  }
  *stride = s;
  return ok;
}

// Gathers 16 rows of `bytes` (<= 64) bytes at p[r] + off (in bytes) into buf
// (64-byte rows), xor-ed with `x` (0 or 0x80 in every byte). Masked loads
// never touch the bytes past `bytes`.
template <class T>
inline void GatherRows(const T* const* p, int64_t off, int64_t bytes, __m512i x, uint8_t* buf) {
  const __mmask64 m = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    const __m512i v = _mm512_maskz_loadu_epi8(m, reinterpret_cast<const uint8_t*>(p[r]) + off);
    _mm512_store_si512(buf + 64 * r, _mm512_xor_si512(v, x));
  }
}

}  // namespace amx
}  // namespace kernels
}  // namespace qfold
