// Packed fp32 GEMM with a fused epilogue: the inner loops of the fast float
// Conv/MatMul/Gemm paths (conv_f32.h, ops/matmul.cc, ops/gemm.cc). Naming
// follows <dtype>_<op>_<isa>: gemm_f32_avx2.cc, gemm_f32_avx512vnni.cc
// (which only needs AVX-512F), gemm_f32_neon.cc.
//
// C[r][c] = epilogue(sum_k L[r][k] * R[k][c]). For convolution over NCHW the
// weights are left (out[m][p] = W[m][:] . X[:][p]); for MatMul/Gemm A is left.
//
// Packed layouts (no K padding; rows/columns past the end of a panel are 0):
//   left:  panels of mr rows:    [panel][k][row in panel]
//   right: panels of nr columns: [panel][k][col in panel]
// Sums run over k in order, split into blocks of the ISA's kc; the result of
// an element does not depend on how rows or column panels are split between
// calls or threads.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/activation.h"
#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

class ThreadPool;  // thread_pool.h

// Activations the epilogue applies. kRelu is x > 0 ? x : 0 (NaN -> 0);
// kClamp is x < lo ? lo : (x > hi ? hi : x) (NaN passes), as in core/activation.
enum class F32Act : int { kNone = 0, kRelu, kClamp };

// v = alpha * acc (+ prior c if accumulate) (+ bias), then the activation.
struct GemmF32Args {
  const float* left = nullptr;   // packed, row panels
  const float* right = nullptr;  // packed, column panels
  int64_t rows = 0, cols = 0, k = 0;
  float alpha = 1.f;
  const float* bias = nullptr;  // per row or per column (bias_per_row); optional
  bool bias_per_row = true;
  bool accumulate = false;  // adds c's prior contents (Gemm's beta * C)
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;  // kClamp bounds
  float* c = nullptr;        // row-major, row stride ldc
  int64_t ldc = 0;
  // Column-panel range to compute, for splitting the work between threads.
  int64_t panel_begin = 0, panel_end = -1;  // -1: all
};

struct GemmF32Kernels {
  const char* name;  // the features it needs ("avx2", "avx512f", "neon")
  int mr, nr;
  // src element (r, k) at src[r * rs + k * cs]; rows x k.
  void (*pack_left)(const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t k, float* dst);
  // src element (k, c) at src[k * rs + c * cs]; k x cols.
  void (*pack_right)(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t cols, float* dst);
  void (*gemm)(const GemmF32Args& args);
};

// The variant `f` allows, or nullptr (no SIMD features, or none compiled for
// this target); *variant (if given) receives its name or nullptr.
const GemmF32Kernels* GemmF32For(const CpuFeatures& f, const char** variant = nullptr);

// Floats of a packed operand of n rows (left) or columns (right).
inline int64_t PackedF32Size(int64_t n, int64_t k, int tile) {
  return (n + tile - 1) / tile * tile * k;
}

// Portable packers behind every ISA's pack_left/pack_right (gemm_f32.cc).
void PackLeftF32(const float* src, int64_t rs, int64_t cs, int64_t rows, int64_t k, int mr,
                 float* dst);
void PackRightF32(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t cols, int nr,
                  float* dst);

// Runs `proto` (rows, cols, k, epilogue, ldc) for every batch entry
// i < batches: left[i] x right[i] into c[i] (the lists are the caller's: a
// session's ops keep them in their planned scratch). Work is split between
// the pool's threads on (batch, row block, column panel) tiles, so any
// thread count gives identical results.
void GemmF32Batched(const GemmF32Kernels& k, const GemmF32Args& proto, const float* const* left,
                    const float* const* right, float* const* c, int64_t batches, ThreadPool* pool);

// Maps a fused activation to the epilogue: Relu and Clip go into it
// (*post = nullptr); others leave kNone and *post = &act, to apply after.
F32Act EpilogueFor(const FusedActivation& act, float* lo, float* hi, const FusedActivation** post);

// `pool` when `flops` of work are worth splitting between threads, else null
// (the calling thread alone).
ThreadPool* PoolForWork(ThreadPool* pool, int64_t flops);

}  // namespace kernels
}  // namespace qfold
