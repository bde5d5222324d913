// Fast 2-D pooling over NCHW planes (MaxPool for float/int8/uint8, AveragePool
// for float), bit-identical to the reference in ops/pool.cc:
// - MaxPool keeps the first maximum in row-major tap order (what the
//   reference's "v > acc || isnan(v)" scan picks, which matters for -0.f/+0.f
//   and NaN): each input row is max-reduced over the kernel columns, then the
//   output row over the kernel rows, both in tap order, which is the same
//   "first maximum" of the row-major sequence.
// - AveragePool adds the taps of each output in the reference's row-major
//   order into a double, so each sum is rounded exactly as there; SIMD lanes
//   hold different outputs, never parts of one sum.
// Padding is handled by splitting each axis into border outputs (window
// clipped to the input, done one by one) and interior ones (vector loops).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h
struct Pool2dKernels;

struct Pool2dArgs {
  int64_t planes = 0;  // N * C
  int64_t ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // AveragePool only
  ThreadPool* pool = nullptr;      // null: the calling thread only
  ScratchSpan scratch;             // sized by MaxPool2dScratch / AvgPool2dScratch
};

// x: planes x ih x iw, y: planes x oh x ow (contiguous). Output sizes must be
// the ones the op inferred; a window with no tap inside the input gives
// lowest() (max) or 0 (average), as the reference does.
void MaxPool2dF32(const Pool2dKernels& k, const Pool2dArgs& a, const float* x, float* y);
void MaxPool2dS8(const Pool2dKernels& k, const Pool2dArgs& a, const int8_t* x, int8_t* y);
void MaxPool2dU8(const Pool2dKernels& k, const Pool2dArgs& a, const uint8_t* x, uint8_t* y);
void AvgPool2dF32(const Pool2dKernels& k, const Pool2dArgs& a, const float* x, float* y);
// The scratch bytes of those calls (per thread: window tables, column maxima,
// phases); esize: 4 (float32) or 1 (8-bit).
size_t MaxPool2dScratch(const Pool2dKernels& k, const Pool2dArgs& a, int64_t esize);
size_t AvgPool2dScratch(const Pool2dKernels& k, const Pool2dArgs& a);

// Per-ISA plane kernels (pool_2d_impl.h instantiated per ISA file): planes
// [p0, p1) with a thread's scratch, of the bytes its *_scratch returns.
struct Pool2dKernels {
  void (*max_f32)(const Pool2dArgs&, const float*, float*, int64_t, int64_t, uint8_t*);
  void (*max_s8)(const Pool2dArgs&, const int8_t*, int8_t*, int64_t, int64_t, uint8_t*);
  void (*max_u8)(const Pool2dArgs&, const uint8_t*, uint8_t*, int64_t, int64_t, uint8_t*);
  void (*avg_f32)(const Pool2dArgs&, const float*, float*, int64_t, int64_t, uint8_t*);
  size_t (*max_f32_scratch)(const Pool2dArgs&);
  size_t (*max_s8_scratch)(const Pool2dArgs&);
  size_t (*max_u8_scratch)(const Pool2dArgs&);
  size_t (*avg_f32_scratch)(const Pool2dArgs&);
};

// The variant `f` allows; null without SIMD features. *variant (if given):
// its name or nullptr.
const Pool2dKernels* Pool2dFor(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
