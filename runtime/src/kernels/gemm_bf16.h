// bf16 reduced precision for float Gemm with a constant B (SessionOptions::
// precision): B is packed once as bf16 (half the bytes of fp32: the
// fully-connected layers of VGG or AlexNet at batch 1 only stream their
// weights, so this is their speed), A is rounded to bf16 per call, and the
// products are summed in fp32 (vdpbf16ps).
//
// Packed B: panels of 16 columns, [panel][kp / 2][16][2], kp = k rounded up
// to a multiple of 32, zeros past k and past the last column: 16 pair rows of
// a panel are one AMX-BF16 B tile as they stand.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/cpu_features.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;  // thread_pool.h

// One call: rows (<= 4) of A by `panels` (<= 4) consecutive panels of B,
// over kc (even) values of k:
//   y[r * ldy + j] (+)= sum_{q < kc} a[r * lda + q] * b(q, j)   for j < cols
// where panel p's kc values start at b + p * panel_stride; with accumulate
// the sums are added to y's contents, else they replace them.
struct GemvBf16Args {
  const uint16_t* a = nullptr;
  int64_t lda = 0, rows = 0, kc = 0;
  const uint16_t* b = nullptr;
  int64_t panel_stride = 0, panels = 0, cols = 0;
  bool accumulate = false;
  float* y = nullptr;
  int64_t ldy = 0;
};

// One call of the tile kernel: all `rows` rows of A (rows rounded up to 16
// are readable) by one or two consecutive panels of B over all kp values:
//   y[r * ldy + j] = sum_{q < kp} a[r * lda + q] * b(q, j)   for j < cols (<= 32)
struct TilesBf16Args {
  const uint16_t* a = nullptr;
  int64_t lda = 0, rows = 0, kp = 0;
  const uint16_t* b = nullptr;
  int64_t panel_stride = 0, cols = 0;
  // The next call's panels, fetched while this one runs (or null).
  const uint16_t* prefetch = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

struct GemmBf16Kernels {
  const char* name;  // the features it needs ("avx512bf16", "amx_bf16")
  void (*gemv)(const GemvBf16Args& args);
  // Matrix tiles (AMX), used from tile_rows rows of A on; null: gemv only.
  void (*tiles)(const TilesBf16Args& args) = nullptr;
  int64_t tile_rows = 0;
  // Per-thread state around the tiles calls of one range (the AMX tile
  // configuration), as ConvNhwcBf16Kernels'.
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
};

// The AVX-512 BF16 gemv (gemm_bf16_avx512bf16.cc), which the AMX variant
// keeps for fewer rows than a tile pays for.
void GemvBf16Avx512(const GemvBf16Args& args);

// The variant `f` allows, or nullptr (then Gemm stays fp32).
const GemmBf16Kernels* GemmBf16For(const CpuFeatures& f, const char** variant = nullptr);

struct PackedBf16 {
  int64_t k = 0, kp = 0, n = 0;
  AlignedVector<uint16_t> data;
};
// Packs op(B)(k, c) = src[k * rs + c * cs], k x n.
void PackBf16(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t n, PackedBf16* out);

// y[i * n + j] = sum_q a[i * rs + q * cs] * b(q, j) (fp32 sums of bf16
// products), m x n; a is rounded to bf16 rows here, in `scratch` of
// GemmBf16Scratch bytes (a session plans them; none: allocated for the call). Threads split column
// panels; the sums do not depend on the thread count (but on the kernel:
// tiles sum in another order than gemv).
size_t GemmBf16Scratch(int64_t m, const PackedBf16& b);
void GemmBf16(const GemmBf16Kernels& kern, const float* a, int64_t rs, int64_t cs, int64_t m,
              const PackedBf16& b, float* y, ThreadPool* pool, const ScratchSpan& scratch = {});

}  // namespace kernels
}  // namespace qfold
