// AVX2 float binary kernels (binary_f32.h): 8 lanes, tails through
// vmaskmovps (masked-off lanes are neither read nor written).
#include <immintrin.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_f32_impl.h"
#include "kernels/vec_f32_avx2.h"

namespace qfold {
namespace kernels {
namespace {

struct V8 : F32x8 {
  static __m256i Part(int m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F LoadPart(const float* p, int m) { return _mm256_maskload_ps(p, Part(m)); }
  static void StorePart(float* p, F v, int m) { _mm256_maskstore_ps(p, Part(m), v); }
};

}  // namespace

extern const BinaryF32Kernels kBinaryF32Avx2;
const BinaryF32Kernels kBinaryF32Avx2 = binary_f32::Make<V8>("avx2");

}  // namespace kernels
}  // namespace qfold
