// AVX2+FMA weight-only quantized GEMM (gemm_wq_f32.h): a panel row is two
// ymm; 4 rows of A give 8 independent FMA chains.
#include <immintrin.h>

#include "kernels/gemm_wq_f32_impl.h"
#include "kernels/vec_f32_avx2.h"

namespace qfold {
namespace kernels {
namespace {

struct WqYmm : F32x8 {
  static F Zero() { return _mm256_setzero_ps(); }
  static void Widen8(const int8_t* p, F* v) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(q, q)));
  }
  static void Widen16(const int16_t* p, F* v) {
    v[0] = _mm256_cvtepi32_ps(
        _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    v[1] = _mm256_cvtepi32_ps(
        _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8))));
  }
  static void StoreCols(float* p, F v, int n) { StoreFirst(p, v, n); }
};

}  // namespace

extern const GemmWqF32Kernels kGemmWqF32Avx2;
const GemmWqF32Kernels kGemmWqF32Avx2 = {"avx2", 4, gemm_wq::Panel<WqYmm, 4>};

}  // namespace kernels
}  // namespace qfold
