// AVX-VNNI microkernels of the a16w8 channels-last convolution (conv_a16_nhwc.h):
// the 256-bit kernels of conv_a16_nhwc_x86.h on VEX vpdpwssd (one instruction where AVX2 needs
// two; the same exact int32 sums).
#include <immintrin.h>

#include "kernels/conv_a16_nhwc.h"
#include "kernels/conv_a16_nhwc_x86.h"

namespace qfold {
namespace kernels {
namespace {

struct DpwssdAvx {
  static __m256i Add(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_avx_epi32(acc, a, b);
  }
};

}  // namespace

extern const A16GemmFn kA16GemmAvxVnni = Gemm256<DpwssdAvx>;
extern const A16DepthwiseFn kA16DepthwiseAvxVnni = Depthwise256<DpwssdAvx>;

}  // namespace kernels
}  // namespace qfold
