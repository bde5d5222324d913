// The resize_2d_impl.h plane loops compiled with this file's ISA flags.
#include "kernels/resize_2d.h"

#define QF_RESIZE_NS avx512f
#include "kernels/resize_2d_impl.h"
#undef QF_RESIZE_NS

namespace qfold {
namespace kernels {

extern const ResizeKernels kResizeAvx512F;
constexpr ResizeKernels kResizeAvx512F = avx512f::MakeResizeKernels();

}  // namespace kernels
}  // namespace qfold
