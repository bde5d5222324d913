// The pool_nhwc_s8_x86.h row kernels on 512-bit vectors (masked channel tails).
#include "kernels/pool_nhwc_s8_x86.h"

namespace qfold {
namespace kernels {

extern const PoolNhwcKernels kPoolNhwcAvx512Vnni;
constexpr PoolNhwcKernels kPoolNhwcAvx512Vnni = MakePoolNhwcKernels<X86Avx512>();

}  // namespace kernels
}  // namespace qfold
