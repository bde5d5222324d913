// Indirect 8-bit GEMM microkernels of the channels-last convolution
// (conv_nhwc_s8.cc). A tile is mr output pixels x nr output channels; each
// pixel's activations come through one pointer per kernel tap (the
// "indirection buffer"), so a KxK convolution needs no im2col copy. The
// kernel broadcasts 4 consecutive channel bytes of a pixel (u8; int8
// activations are xor-ed with 0x80) and multiplies them with 4 packed s8
// weights of each of nr channels, accumulating exactly in int32 (wraparound).
//
// Packed weights of one panel (nr channels): [tap][kc4][nr][4] s8 (or s16
// where the kernel says wbytes = 2; i8mm groups 8 k, see kgroup), channels
// and the K tail (past C/group within each tap) zero-padded. The epilogue
// adds the folded bias, subtracts wzp[ch] * xsum[pixel] and requantizes as
// Requantize does (docs/NUMERICS.md), or, with yf set, dequantizes to float:
// clamp(fma(float(acc), mult[ch], fbias[ch]), flo, fhi) (QfConvDequant).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

struct IgemmS8Args {
  // Pointers [tile][tap][mr], from the first tile of this call; every
  // pointer plus a_offset must have 4 * kc4 readable activations. Rows of the last
  // tile past `rows` must hold valid pointers too (their results are dropped).
  const uint8_t* const* ind = nullptr;
  int64_t a_offset = 0;  // added to every pointer (the group's first channel)
  int64_t rows = 0;      // output pixels in this call (tiles = ceil(rows / mr))
  int64_t taps = 1, kc4 = 1;
  const uint8_t* w = nullptr;  // one packed panel
  // Weights the caller's next call reads (the next panel), prefetched into
  // L2 by this call's later tiles; null for none.
  const uint8_t* prefetch = nullptr;
  int64_t prefetch_bytes = 0;
  int64_t cols = 0;       // valid channels of the panel, 1..nr
  bool x_signed = false;  // int8 activations: xor 0x80 to u8
  // Per channel of the panel, readable up to nr entries.
  const int32_t* bias = nullptr;
  const float* mult = nullptr;
  const int32_t* wzp = nullptr;   // null when every weight zero point is 0
  const int32_t* xsum = nullptr;  // per row (with wzp): sum of u8 activations of the window
  int32_t yzp = 0, lo = 0, hi = 0;
  uint8_t* y = nullptr;  // row r, channel j at y[r * ldy + j]
  int64_t ldy = 0;
  // Float output instead of y (yzp, lo and hi unused): row r, channel j at
  // yf[r * ldy + j]; fbias per channel like mult. flo/fhi: a fused Relu/Clip.
  float* yf = nullptr;
  const float* fbias = nullptr;
  float flo = -std::numeric_limits<float>::infinity();
  float fhi = std::numeric_limits<float>::infinity();
  // Raw sums instead of y and yf (x86 kernels; bias, wzp and the
  // requantization unused): row r, channel j at yi[r * ldy + j], the first
  // `cols` channels (the integer Winograd's GEMMs, conv_nhwc_s8_winograd.h).
  int32_t* yi = nullptr;
  // Read only by kernels with kc4_align > 1 (AMX), for the driver's padded
  // plane (conv_nhwc_s8.cc): rows are plane positions, some of them in the
  // padding. out_row[r]: the y/yf row of row r, < 0 for a row not stored
  // (xsum stays indexed by r); null: r itself. overread: every pointer plus
  // a_offset has whole 64-byte k blocks readable (16 * ceil(kc4 / 16) * 4
  // bytes), so a tail block loads in place like a full one.
  const int64_t* out_row = nullptr;
  bool overread = false;
};

struct IgemmS8Kernel {
  const char* name;  // the features it needs ("avx2", "avxvnni", "avx512vnni", "amx", "neon"...)
  int mr, nr;
  int wbytes;  // 1: weights packed as s8; 2: as little-endian s16
  // 1: the pointers address u8/s8 activations (4 bytes per k step); 2: the
  // driver has widened them to u16 (already xor-ed to u8 values; x_signed
  // is then ignored), 8 bytes per k step, and a_offset counts bytes.
  int abytes;
  void (*run)(const IgemmS8Args& args);
  // k per packed group: 4 ([tap][kc4][nr][4], the unit of vpdpbusd/sdot), 2
  // ([tap][2 * kc4][nr][2], AVX2's 16-channel kernel: a vpmaddwd multiplies one
  // broadcast k pair with 8 channels' pairs) or 8 ([tap][ceil(kc4 / 2)][nr][8],
  // i8mm: 16 bytes hold 8 k of two channels).
  int kgroup;
  // Each tap's kc4 is padded to a multiple of this in the packed weights (AMX:
  // 16, a tile's 64 bytes of k; the zero weights cancel whatever activations
  // the kernel puts in the padding). Args::kc4 stays the unpadded count.
  int kc4_align = 1;
  // The driver hands it at least this many tiles per call where the rows
  // allow (AMX: each tile's epilogue overlaps the next tile's products).
  int min_chunk_tiles = 1;
  // Per-thread state around the run calls of one range of work (null: none;
  // run is called only between them). AMX: the tile configuration, loaded
  // once per range instead of per call (LDTILECFG and TILERELEASE per call
  // cost a 3x3 64 -> 64 convolution at 56x56 5-7%), and released after it,
  // so a thread between ops does not keep 8 KB of tile state that every
  // context switch saves.
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
};

// kc4 as the packed weights of `k` hold it (a multiple of k.kc4_align).
inline int64_t IgemmPackedKc4(const IgemmS8Kernel& k, int64_t kc4) {
  const int64_t a = k.kc4_align > 1 ? k.kc4_align : 1;
  return (kc4 + a - 1) / a * a;
}
// Where packed panel weights go (in elements of wbytes): k index kk of a
// tap's 4 * kc4 (zero-padded), channel j of the panel, tap t.
inline int64_t IgemmPackedIndex(const IgemmS8Kernel& k, int64_t kc4, int64_t t, int64_t kk,
                                int64_t j) {
  const int64_t g = k.kgroup, groups = (4 * IgemmPackedKc4(k, kc4) + g - 1) / g;
  return ((t * groups + kk / g) * k.nr + j) * g + kk % g;
}
// Elements of one packed panel.
inline int64_t IgemmPanelElems(const IgemmS8Kernel& k, int64_t taps, int64_t kc4) {
  const int64_t g = k.kgroup;
  return taps * ((4 * IgemmPackedKc4(k, kc4) + g - 1) / g) * k.nr * g;
}

// The microkernels `f` allows, widest panel first; empty without them (the
// driver then uses the packed GEMM). *variant (if given): their name or nullptr.
std::vector<const IgemmS8Kernel*> IgemmS8Kernels(const CpuFeatures& f,
                                                 const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
