// The pool_2d_impl.h plane loops compiled with this file's ISA flags.
#include "kernels/pool_2d.h"

#define QF_POOL_NS avx512f
#include "kernels/pool_2d_impl.h"
#undef QF_POOL_NS

namespace qfold {
namespace kernels {

extern const Pool2dKernels kPool2dAvx512F;
constexpr Pool2dKernels kPool2dAvx512F = avx512f::MakePool2dKernels();

}  // namespace kernels
}  // namespace qfold
