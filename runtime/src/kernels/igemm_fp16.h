// fp16 reduced precision (SessionOptions::Precision::kFloat16) on Armv8.2
// FEAT_FP16: channels-last float convolutions and Gemm/MatMul with a constant
// 2-D B multiply IEEE half operands with NEON half arithmetic (fmla .8h).
//
// Operands: weights are rounded to half once, at prepare; activations once
// per run, into rows of kc halves (the conv's channels per group, or Gemm's
// k, rounded up to 8, zeros past them). Both to nearest even; values beyond
// +-65504 become infinities (fp16's range).
//
// Sums: every output keeps an fp16 accumulator for kFp16Chunk products (its
// fused multiply-adds round to half each step), then adds it into an fp32
// sum and starts again; after the last chunk the fp32 sum gets the bias, the
// residual and the activation, and the output stays an fp32 tensor.
// Summing all of a ResNet-50 3x3x512 reduction in fp16 (what ncnn and MNN do)
// leaves errors 17x larger; docs/NUMERICS.md has the measurement and the bound.
// The chunks follow the reduction index (tap-major, then channel), whatever
// the tile or thread: results are identical for every thread count.
#pragma once
#include <cstdint>
#include <memory>

#include "core/activation.h"
#include "core/tensor.h"
#include "kernels/aligned_vector.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_f32.h"  // F32Act
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;        // thread_pool.h
struct ConvNhwcF32Call;  // conv_f32_nhwc.h

// Products summed in fp16 before the sum is widened into fp32: the fp16
// part of the error grows with this length, its cost (two conversions and two
// fp32 adds per 8 accumulators) shrinks with it.
constexpr int64_t kFp16Chunk = 32;
// Output pixels (rows) and channels (columns) per microkernel tile.
constexpr int64_t kFp16Mr = 8, kFp16Nr = 16;

// One tile: `rows` (<= 8) rows by one panel of `cols` (<= 16) columns.
//   y[r * ldy + j] = act(bias[j] + sum_{t < taps, q < kc} a[t * 8 + r][q] * w[(t * kc + q) * 16 +
//   j]
//                        + residual[r * ldy + j])
// a holds taps * 8 pointers to kc halves (kc a multiple of 8); rows past
// `rows` must point at readable rows too (their sums are dropped). w is zero
// past `cols`; nothing past `rows` or `cols` is written.
struct IgemmFp16Args {
  const uint16_t* const* a = nullptr;
  int64_t rows = 0, taps = 0, kc = 0;
  const uint16_t* w = nullptr;
  int64_t cols = 0;
  const float* bias = nullptr;      // cols values, or null
  const float* residual = nullptr;  // laid out as y, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
};

struct Fp16Kernels {
  const char* name;  // the features it needs ("neonfp16")
  // x [rows][c] fp32 -> out [rows][kc] half (to nearest even; zeros past c).
  void (*convert)(const float* x, int64_t rows, int64_t c, uint16_t* out, int64_t kc);
  void (*igemm)(const IgemmFp16Args& args);
};

// The variant `f` allows (FEAT_FP16 arithmetic on aarch64), or nullptr: then
// everything stays fp32, bit for bit.
const Fp16Kernels* Fp16KernelsFor(const CpuFeatures& f, const char** variant = nullptr);

// IEEE half as the kernels round it (to nearest even, subnormals kept, NaN
// stays NaN); back with core/half.h's HalfToFloat.
uint16_t HalfFromFloat(float v);

// Convolution (called by the channels-last fp32 driver, conv_f32_nhwc.cc):
// W [M, C/group, kh, kw] packed as ceil(M/group / 16) panels per group of
// [kh * kw][kc][16] halves. Null for depthwise convolutions (they stay fp32)
// or a W that is not a 4-D float tensor.
std::shared_ptr<void> PrepareConvNhwcFp16(const Fp16Kernels& k, const Tensor& w, int64_t group);
// Runs `call` (checked against the weights by the caller); its scratch is
// ConvNhwcFp16Scratch bytes: the half copy of x, a zero row, tap pointers.
void RunConvNhwcFp16(const void* state, const ConvNhwcF32Call& call);
size_t ConvNhwcFp16Scratch(const void* state, const ConvNhwcF32Call& call);

// Gemm with a constant B: op(B)(q, c) = src[q * rs + c * cs], k x n, packed
// as panels of [kc][16] halves (kc = k rounded up to 8).
struct PackedFp16 {
  int64_t k = 0, kc = 0, n = 0;
  AlignedVector<uint16_t> data;
};
void PackFp16(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t n, PackedFp16* out);
// y[i * n + j] = sum_q a[i * rs + q * cs] * b(q, j), m x n (no bias); a is
// rounded to half rows here (a transposed A gathered a row at a time first),
// in `scratch` of GemmFp16Scratch bytes (a session plans them; none:
// allocated for the call). Threads
// split tiles of 8 rows by 16 columns.
size_t GemmFp16Scratch(int64_t m, int64_t cs, const PackedFp16& b);
void GemmFp16(const Fp16Kernels& kern, const float* a, int64_t rs, int64_t cs, int64_t m,
              const PackedFp16& b, float* y, ThreadPool* pool, const ScratchSpan& scratch = {});

}  // namespace kernels
}  // namespace qfold
