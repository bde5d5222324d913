// Channels-last 8-bit convolution: the fast path of QLinearConv with
// channels_last = 1 (the layout the converter plans for quantized CNNs).
// x is [N, ih, iw, C] and y [N, oh, ow, M] (1-D: [N, iw, C] and [N, ow, M],
// passed with ih = oh = kh = 1), so the C bytes of one pixel are contiguous:
// a 1x1 convolution is a GEMM straight on the activation tensor, a KxK one a
// GEMM whose rows come through an indirection buffer (one pointer per output
// pixel and tap, padding taps pointing at a row of x_zp bytes). Weights are
// packed once by Prepare. Results are bit-identical to the reference
// QLinearConv (docs/NUMERICS.md) at every ISA level and thread count.
//
// Depthwise convolutions (C == M == group) have their own kernels
// (dwconv_nhwc_s8.h); PrepareQConvNhwcS8 returns null for them.
#pragma once
#include <memory>
#include <vector>

#include "core/op.h"
#include "kernels/qlinear_s8.h"

namespace qfold {
namespace kernels {

// Packs W [M, C / group, kh(, kw)] (int8/uint8) for kc's kernels: its
// indirect microkernels (igemm_s8), else its packed GEMM (gemm_s8; a test
// clears igemm_s8 to take this path on x86). Null when no fast kernel applies
// (then the op runs its reference kernel). dilation_w: the convolution's
// dilation along the width; with 1, inputs of a few channels read a whole
// kernel row per tap (RunQConvNhwcS8 then expects it).
// winograd: calls may run the integer Winograd (stride and dilation 1);
// false saves its transformed filters.
std::shared_ptr<void> PrepareQConvNhwcS8(const KernelConfig& kc, const Tensor& w, int64_t group,
                                         int64_t dilation_w = 1, bool winograd = true);

// The microkernels a prepared state runs ("amx", "avx512vnni", ...), or
// "gemm" for the packed GEMM.
const char* QConvNhwcS8Variant(const void* state);
// Whether the state holds the integer Winograd F(2x2, 3x3)
// (conv_nhwc_s8_winograd.h), which stride-1 calls without weight zero points
// and of at least 16 tiles per image run.
bool QConvNhwcS8Winograd(const void* state);

// c.x and c.y hold NHWC tensors as described above; false when the call is
// not covered (the op then runs its reference kernel). Its scratch: the
// widened (u16) or padded copy of x, per-thread slices, zero-point sums;
// c.scratch when planned (QConvNhwcS8Scratch), else allocated for the call.
bool RunQConvNhwcS8(void* state, const QConvCall& c);

// The scratch RunQConvNhwcS8(state, c) uses (c's geometry, tensors' shapes,
// w_zp and pool; not its data): `kept` is the indirection buffer the state
// holds while x's address stays.
ScratchNeeds QConvNhwcS8Scratch(const void* state, const QConvCall& c);

// How the channels-last driver splits an indirect GEMM of `tiles` pixel
// tiles x `per_chunk` panels between `threads`: chunks of at most
// max_chunk_tiles tiles (chunk c: tiles [chunk_tile[c], chunk_tile[c + 1])),
// thread s's share items [bounds[s], bounds[s + 1]) (Item decodes them).
// Shares hold equal numbers of tile x `unit`-panel blocks (to one block;
// `unit` divides per_chunk). Pixels split (a thread's activations are its
// own, as the ops before and after split them; a tile on a share boundary is
// a chunk of its own, split by panels), or, where the units divide evenly
// and all tiles form one chunk or `weight_heavy` (the weights outweigh the
// input), panels: each thread then reads all activations but streams only
// its panels' weights, once per chunk, instead of all of them. Weight-heavy
// calls also split panels unevenly (to one unit per chunk) where each thread
// gets at least 4 units.
struct IgemmSplit {
  std::vector<int64_t> chunk_tile;  // chunks + 1 values, 0 .. tiles
  std::vector<int64_t> bounds;      // threads + 1 values, 0 .. chunks * per_chunk
  // Split by panels: thread s runs panels [panels[s], panels[s + 1]) of
  // every chunk, chunk by chunk; empty when pixels split (items are then
  // chunk * per_chunk + panel).
  std::vector<int64_t> panels;
  // Item i's chunk and its panel within the chunk.
  void Item(int64_t i, int64_t per_chunk, int64_t* chunk, int64_t* panel) const {
    if (panels.empty()) {
      *chunk = i / per_chunk;
      *panel = i % per_chunk;
      return;
    }
    size_t s = 0;
    while (i >= bounds[s + 1]) ++s;
    const int64_t width = panels[s + 1] - panels[s], local = i - bounds[s];
    *chunk = local / width;
    *panel = panels[s] + local % width;
  }
};
// min_chunk_tiles > 0: at 2 or more threads, chunks shrink to a quarter of
// a share (at least min_chunk_tiles) unless weight-heavy calls split panels.
IgemmSplit SplitIgemm(int64_t tiles, int64_t max_chunk_tiles, int64_t per_chunk, int64_t unit,
                      int threads, bool weight_heavy = false, int64_t min_chunk_tiles = 0);

}  // namespace kernels
}  // namespace qfold
