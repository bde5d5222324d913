// Fast Resize over the last two axes of NCHW float tensors (linear and cubic
// filters, any coordinate mode), bit-identical to the reference in
// ops/resize.cc. The reference sums, per output, in double:
//   acc = 0; for each row tap th: { inner = 0; for each column tap tw:
//     inner += (w_th * w_tw) * x[th][tw]; acc += inner; }
// and this kernel performs exactly those operations per output, with SIMD
// lanes holding different output columns. Columns with fewer taps than the
// widest one get masked taps whose term is +0.0, which leaves the sums
// unchanged (a sum started at +0.0 is never -0.0).
#pragma once
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h
struct ResizeKernels;

// Per-axis taps in tap-major layout: entry [k * stride + o] is tap k of
// output o; mask ~0 marks a real tap, 0 a padding one (index valid, weight
// unused).
struct ResizeLinearArgs {
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int kw = 1;              // column taps per output column, 1..4
  int64_t col_stride = 0;  // >= ow, a multiple of 8
  const int64_t* col_idx = nullptr;
  const double* col_w = nullptr;
  const uint64_t* col_mask = nullptr;
  const uint8_t* col_extrapolate = nullptr;  // 1: output column is extrapolation_value
  bool any_col_extrapolate = false;
  const int64_t* row_count = nullptr;  // per output row: taps (0: extrapolation row)
  const int64_t* row_idx = nullptr;    // [o * kh_max + t]
  const double* row_w = nullptr;
  int kh_max = 1;
  float extrapolation = 0.f;
  ThreadPool* pool = nullptr;  // null: the calling thread only
};

void ResizeLinearF32(const ResizeKernels& k, const ResizeLinearArgs& a, const float* x, float* y);

struct ResizeKernels {
  void (*linear_f32)(const ResizeLinearArgs&, const float*, float*, int64_t, int64_t);
};

// The variant `f` allows; null without SIMD features. *variant (if given):
// its name or nullptr.
const ResizeKernels* ResizeFor(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
