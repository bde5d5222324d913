// Resize driver (resize_2d.h): the plane loops of the active ISA, planes
// split between threads (each plane computed the same way for any split).
#include "kernels/resize_2d.h"

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"

#define QF_RESIZE_NS generic
#include "kernels/resize_2d_impl.h"
#undef QF_RESIZE_NS

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const ResizeKernels kResizeAvx2;
extern const ResizeKernels kResizeAvx512F;
#endif

namespace {

constexpr ResizeKernels kResizeGeneric = generic::MakeResizeKernels();

}  // namespace

const ResizeKernels* ResizeFor(const CpuFeatures& f, const char** variant) {
  const ResizeKernels* k = nullptr;
  const char* name = nullptr;
  if (HighestIsa(f) != Isa::kReference) {
    k = &kResizeGeneric;  // baseline SIMD of the target (SSE2 / NEON) through the same loops
    name = "generic";
  }
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = f.avx512f ? &kResizeAvx512F : &kResizeAvx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
  if (variant) *variant = name;
  return k;
}

void ResizeLinearF32(const ResizeKernels& k, const ResizeLinearArgs& a, const float* x, float* y) {
  const auto fn = k.linear_f32;
  const bool small = a.planes * a.oh * a.ow < (int64_t(1) << 14);
  ParallelFor(small ? nullptr : a.pool, a.planes,
              [&](int64_t p0, int64_t p1, int) { fn(a, x, y, p0, p1); });
}

}  // namespace kernels
}  // namespace qfold
