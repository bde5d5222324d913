// The pool_2d_impl.h plane loops compiled with this file's ISA flags.
#include "kernels/pool_2d.h"

#define QF_POOL_NS avx2
#include "kernels/pool_2d_impl.h"
#undef QF_POOL_NS

namespace qfold {
namespace kernels {

extern const Pool2dKernels kPool2dAvx2;
constexpr Pool2dKernels kPool2dAvx2 = avx2::MakePool2dKernels();

}  // namespace kernels
}  // namespace qfold
