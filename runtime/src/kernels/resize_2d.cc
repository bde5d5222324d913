// Resize driver (resize_2d.h): the plane loops of the active ISA, planes
// split between threads (each plane computed the same way for any split).
#include "kernels/resize_2d.h"

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

#define QF_RESIZE_NS generic
#include "kernels/resize_2d_impl.h"
#undef QF_RESIZE_NS

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const ResizeKernels kResizeAvx2;
extern const ResizeKernels kResizeAvx512Vnni;
#endif

namespace {

constexpr ResizeKernels kResizeGeneric = generic::MakeResizeKernels();

const ResizeKernels& KernelsFor(Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx2:
    case Isa::kAvxVnni:
      return kResizeAvx2;
    case Isa::kAvx512Vnni:
      return kResizeAvx512Vnni;
#endif
    default:
      return kResizeGeneric;
  }
}

}  // namespace

void ResizeLinearF32(const ResizeLinearArgs& a, const float* x, float* y) {
  const auto fn = KernelsFor(ActiveIsa()).linear_f32;
  const bool small = a.planes * a.oh * a.ow < (int64_t(1) << 14);
  ParallelFor(small ? nullptr : a.pool, a.planes,
              [&](int64_t p0, int64_t p1, int) { fn(a, x, y, p0, p1); });
}

}  // namespace kernels
}  // namespace qfold
