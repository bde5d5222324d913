// The dwconv_nhwc_s8_x86.h row kernel on 512-bit vectors (vpdpwssd, masked
// channel tails).
#include "kernels/dwconv_nhwc_s8_x86.h"

namespace qfold {
namespace kernels {

extern const DwConvNhwcKernels kDwConvNhwcAvx512Vnni;
constexpr DwConvNhwcKernels kDwConvNhwcAvx512Vnni = MakeDwConvNhwcKernels<X86Avx512>();

}  // namespace kernels
}  // namespace qfold
