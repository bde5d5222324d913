// AVX-512F weight-only quantized GEMM (gemm_wq_f32.h): a panel row is one
// zmm; 8 rows of A give 8 independent FMA chains for the two FMA pipes.
#include <immintrin.h>

#include "kernels/gemm_wq_f32_impl.h"
#include "kernels/vec_f32_avx512f.h"

namespace qfold {
namespace kernels {
namespace {

struct WqZmm : F32x16 {
  static F Zero() { return _mm512_setzero_ps(); }
  static void Widen8(const int8_t* p, F* v) {
    v[0] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void Widen16(const int16_t* p, F* v) {
    v[0] = _mm512_cvtepi32_ps(
        _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static void StoreCols(float* p, F v, int n) { StoreFirst(p, v, n); }
};

}  // namespace

extern const GemmWqF32Kernels kGemmWqF32Avx512f;
const GemmWqF32Kernels kGemmWqF32Avx512f = {"avx512f", 8, gemm_wq::Panel<WqZmm, 8>};

}  // namespace kernels
}  // namespace qfold
