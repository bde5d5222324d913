// The pool_nhwc_s8_x86.h row kernels on 256-bit vectors.
#include "kernels/pool_nhwc_s8_x86.h"

namespace qfold {
namespace kernels {

extern const PoolNhwcKernels kPoolNhwcAvx2;
constexpr PoolNhwcKernels kPoolNhwcAvx2 = MakePoolNhwcKernels<X86Avx2>();

}  // namespace kernels
}  // namespace qfold
