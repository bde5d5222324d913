// Pooling driver (pool_2d.h): picks the plane kernels compiled for the active
// ISA and splits the planes between threads; each plane is computed the same
// way whatever the split, so results do not depend on the thread count.
#include "kernels/pool_2d.h"

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"

#define QF_POOL_NS generic
#include "kernels/pool_2d_impl.h"
#undef QF_POOL_NS

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const Pool2dKernels kPool2dAvx2;
extern const Pool2dKernels kPool2dAvx512F;
#endif

namespace {

constexpr Pool2dKernels kPool2dGeneric = generic::MakePool2dKernels();

template <class T, class Fn>
void Run(const Pool2dArgs& a, const T* x, T* y, Fn fn) {
  // Small tensors: the pool's hand-off costs more than the work.
  const bool small = a.planes * (a.ih * a.iw + a.oh * a.ow) < (int64_t(1) << 15);
  ParallelFor(small ? nullptr : a.pool, a.planes,
              [&](int64_t p0, int64_t p1, int) { fn(a, x, y, p0, p1); });
}

}  // namespace

const Pool2dKernels* Pool2dFor(const CpuFeatures& f, const char** variant) {
  const Pool2dKernels* k = nullptr;
  const char* name = nullptr;
  if (HighestIsa(f) != Isa::kReference) {
    k = &kPool2dGeneric;  // baseline SIMD of the target (SSE2 / NEON) through the same loops
    name = "generic";
  }
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = f.avx512f ? &kPool2dAvx512F : &kPool2dAvx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
  if (variant) *variant = name;
  return k;
}

void MaxPool2dF32(const Pool2dKernels& k, const Pool2dArgs& a, const float* x, float* y) {
  Run(a, x, y, k.max_f32);
}
void MaxPool2dS8(const Pool2dKernels& k, const Pool2dArgs& a, const int8_t* x, int8_t* y) {
  Run(a, x, y, k.max_s8);
}
void MaxPool2dU8(const Pool2dKernels& k, const Pool2dArgs& a, const uint8_t* x, uint8_t* y) {
  Run(a, x, y, k.max_u8);
}
void AvgPool2dF32(const Pool2dKernels& k, const Pool2dArgs& a, const float* x, float* y) {
  Run(a, x, y, k.avg_f32);
}

}  // namespace kernels
}  // namespace qfold
