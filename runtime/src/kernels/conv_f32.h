// Fast float Conv (1-D and 2-D, NCHW) on top of the packed fp32 GEMM
// (gemm_f32.h) and a depthwise kernel. The op's prepare packs the constant
// weights once (PrepareConvF32); run calls RunConvF32, which returns false
// when the case is not covered, and the op then runs its reference kernel
// (the oracle: results agree within float rounding of a different summation
// order).
//
// GEMM path: out[m][p] = W[m][:] . col[:][p], where the im2col matrix is
// never materialized: each thread packs one panel of nr output positions
// straight into the GEMM's right layout and multiplies it at once, while it
// is hot in cache. A 1x1 stride-1 unpadded conv copies X's rows directly.
// Depthwise path (one input channel per group): each output row is computed
// in registers over a zero-padded copy of the input plane.
#pragma once
#include <cstdint>
#include <memory>

#include "core/activation.h"
#include "core/tensor.h"
#include "kernels/gemm_f32.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h

// One output plane of a depthwise convolution: for every output row oy,
//   y[oy][ox] = act(bias + sum_{ky,kx} w[ky * kw + kx] * src[oy * sh + ky * dh][ox * sw + kx * dw])
// where src is a zero-padded input plane of row stride `stride`, each row
// readable kDwRowSlack floats past the last value any output uses.
struct DwF32Plane {
  const float* src = nullptr;
  int64_t stride = 0;
  const float* w = nullptr;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, oh = 0, ow = 0;
  float bias = 0.f;
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;  // oh x ow, contiguous
};
using DwF32PlaneFn = void (*)(const DwF32Plane& a);
constexpr int64_t kDwRowSlack = 32;

// The depthwise kernel of `isa`, or nullptr.
DwF32PlaneFn DwF32PlaneFor(const CpuFeatures& f, const char** variant = nullptr);

// Packs W [M, C/group, kw] or [M, C/group, kh, kw] (float32) for the active
// ISA level. Returns null when no fast kernel applies.
std::shared_ptr<void> PrepareConvF32(const KernelConfig& kc, const Tensor& w, int64_t group);

// One Conv call, 1-D or 2-D (a 1-D convolution is passed as height 1).
struct ConvF32Call {
  const float* x = nullptr;     // [n, c, ih, iw]
  float* y = nullptr;           // [n, m, oh, ow]
  const float* bias = nullptr;  // m values or null
  int64_t n = 1, c = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  F32Act act = F32Act::kNone;  // fused into the epilogue
  float lo = 0.f, hi = 0.f;
  const FusedActivation* post = nullptr;  // other activations, applied after; may be null
  ThreadPool* pool = nullptr;             // null: the calling thread only
  ScratchSpan scratch;                    // KernelContext::scratch
};
// Its scratch (a packed panel or a padded plane per thread) is call.scratch
// when planned (ConvF32Scratch), else allocated here.
bool RunConvF32(void* state, const ConvF32Call& call);
// The scratch bytes RunConvF32(state, call) uses (shapes and pool only).
size_t ConvF32Scratch(const void* state, const ConvF32Call& call);

}  // namespace kernels
}  // namespace qfold
