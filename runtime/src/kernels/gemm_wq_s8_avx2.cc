// AVX2 weight-only 4-bit GEMM with int8 activations (gemm_wq_s8.h): a panel
// row is two ymm of 8 columns; vpmaddubsw multiplies u8 codes with s8
// activations into 16-bit pair sums (at most 2 x 15 x 127: never saturated)
// and vpmaddwd adds the pairs into the column's int32.
#include <immintrin.h>

#include "kernels/gemm_wq_s8_impl.h"
#include "kernels/vec_f32_avx2.h"

namespace qfold {
namespace kernels {
namespace {

struct WqS8Ymm {
  static constexpr int kAccumulators = 8;
  static constexpr int kLanes = 8;
  using I = __m256i;
  using F = __m256;
  using U = __m256i;
  static I Zero() { return _mm256_setzero_si256(); }
  static F ZeroF() { return _mm256_setzero_ps(); }
  static void Unpack(const uint8_t* w, U* lo, U* hi) {
    const __m256i m = _mm256_set1_epi8(15);
    for (int v = 0; v < 2; ++v) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * v));
      lo[v] = _mm256_and_si256(x, m);
      hi[v] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
    }
  }
  static I Dot(I acc, U u, int32_t a4) {
    const __m256i pairs = _mm256_maddubs_epi16(u, _mm256_set1_epi32(a4));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static F Block(I acc, const uint8_t* zp, int32_t asum, float a_scale, const float* scale, F y) {
    const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp)));
    const __m256i d = _mm256_sub_epi32(acc, _mm256_mullo_epi32(z, _mm256_set1_epi32(asum)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d),
                           _mm256_mul_ps(_mm256_set1_ps(a_scale), _mm256_loadu_ps(scale)), y);
  }
  static void StoreCols(float* p, F v, int n) { F32x8::StoreFirst(p, v, n); }
};

}  // namespace

extern const GemmWqS8Kernels kGemmWqS8Avx2;
const GemmWqS8Kernels kGemmWqS8Avx2 = {"avx2", 4, gemm_wq_s8::Panel<WqS8Ymm, 4>};

}  // namespace kernels
}  // namespace qfold
