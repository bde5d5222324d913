// The resize_2d_impl.h plane loops compiled with this file's ISA flags.
#include "kernels/resize_2d.h"

#define QF_RESIZE_NS avx2
#include "kernels/resize_2d_impl.h"
#undef QF_RESIZE_NS

namespace qfold {
namespace kernels {

extern const ResizeKernels kResizeAvx2;
constexpr ResizeKernels kResizeAvx2 = avx2::MakeResizeKernels();

}  // namespace kernels
}  // namespace qfold
