// AVX2 microkernels of the a16w8 channels-last convolution (conv_a16_nhwc.h):
// the 256-bit kernels of conv_a16_nhwc_x86.h on vpmaddwd + vpaddd.
#include <immintrin.h>

#include "kernels/conv_a16_nhwc.h"
#include "kernels/conv_a16_nhwc_x86.h"

namespace qfold {
namespace kernels {
namespace {

struct MaddAvx2 {
  static __m256i Add(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
};

}  // namespace

extern const A16GemmFn kA16GemmAvx2 = Gemm256<MaddAvx2>;
extern const A16DepthwiseFn kA16DepthwiseAvx2 = Depthwise256<MaddAvx2>;

}  // namespace kernels
}  // namespace qfold
