// Pooling driver (pool_2d.h): picks the plane kernels compiled for the active
// ISA and splits the planes between threads; each plane is computed the same
// way whatever the split, so results do not depend on the thread count.
#include "kernels/pool_2d.h"

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
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

ThreadPool* PoolFor(const Pool2dArgs& a) {
  // Small tensors: the pool's hand-off costs more than the work.
  const bool small = a.planes * (a.ih * a.iw + a.oh * a.ow) < (int64_t(1) << 15);
  return small ? nullptr : a.pool;
}

// Each thread's slice of `slice` bytes (64-byte multiples: the kernels' parts
// are) follows the previous one.
size_t Bytes(const Pool2dArgs& a, size_t slice) {
  return a.planes > 0 ? slice * size_t(NumThreads(PoolFor(a))) : 0;
}

template <class T, class Fn>
void Run(const Pool2dArgs& a, const T* x, T* y, Fn fn, size_t slice) {
  const ScratchRegion region(a.scratch, Bytes(a, slice));
  ParallelFor(PoolFor(a), a.planes, [&](int64_t p0, int64_t p1, int slot) {
    fn(a, x, y, p0, p1, region.data() + size_t(slot) * slice);
  });
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
  Run(a, x, y, k.max_f32, k.max_f32_scratch(a));
}
void MaxPool2dS8(const Pool2dKernels& k, const Pool2dArgs& a, const int8_t* x, int8_t* y) {
  Run(a, x, y, k.max_s8, k.max_s8_scratch(a));
}
void MaxPool2dU8(const Pool2dKernels& k, const Pool2dArgs& a, const uint8_t* x, uint8_t* y) {
  Run(a, x, y, k.max_u8, k.max_u8_scratch(a));
}
void AvgPool2dF32(const Pool2dKernels& k, const Pool2dArgs& a, const float* x, float* y) {
  Run(a, x, y, k.avg_f32, k.avg_f32_scratch(a));
}

size_t MaxPool2dScratch(const Pool2dKernels& k, const Pool2dArgs& a, int64_t esize) {
  return Bytes(a, esize == 4 ? k.max_f32_scratch(a) : k.max_u8_scratch(a));
}
size_t AvgPool2dScratch(const Pool2dKernels& k, const Pool2dArgs& a) {
  return Bytes(a, k.avg_f32_scratch(a));
}

}  // namespace kernels
}  // namespace qfold
