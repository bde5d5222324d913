// AVX2 float binary kernels (binary_f32.h): 8 lanes, tails through
// vmaskmovps (masked-off lanes are neither read nor written).
#include <immintrin.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_f32_impl.h"

namespace qfold {
namespace kernels {
namespace {

struct V8 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static __m256i Part(int m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F LoadPart(const float* p, int m) { return _mm256_maskload_ps(p, Part(m)); }
  static void StorePart(float* p, F v, int m) { _mm256_maskstore_ps(p, Part(m), v); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  static F Less(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static F Unordered(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
  static F Select(F mask, F a, F b) { return _mm256_blendv_ps(b, a, mask); }
};

}  // namespace

extern const BinaryF32Kernels kBinaryF32Avx2;
const BinaryF32Kernels kBinaryF32Avx2 = binary_f32::Make<V8>("avx2");

}  // namespace kernels
}  // namespace qfold
