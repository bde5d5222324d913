// The dwconv_nhwc_s8_x86.h row kernel on 256-bit vectors (vpmaddwd).
#include "kernels/dwconv_nhwc_s8_x86.h"

namespace qfold {
namespace kernels {

extern const DwConvNhwcKernels kDwConvNhwcAvx2;
constexpr DwConvNhwcKernels kDwConvNhwcAvx2 = MakeDwConvNhwcKernels<X86Avx2>();

}  // namespace kernels
}  // namespace qfold
