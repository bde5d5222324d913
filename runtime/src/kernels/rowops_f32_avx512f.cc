// AVX-512F row kernels (rowops_f32.h): the shared algorithm over 16-lane
// vectors (the error bound's depth follows the lane count, rowops_f32.h).
#include <immintrin.h>

#include "kernels/rowops_f32.h"
#include "kernels/rowops_f32_impl.h"

// GCC 12 flags the _mm512_undefined_* operand inside its own
// _mm512_extractf64x4_pd as uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct V16 {
  using F = __m512;
  static constexpr int kLanes = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // A tree: halves, then the AVX2 variant's tree over 8 lanes.
  static float HorizontalSum(F v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 h = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

using K = rowops::Kernels<V16>;

}  // namespace

extern const RowOpsF32Kernels kRowOpsF32Avx512f;
const RowOpsF32Kernels kRowOpsF32Avx512f = {V16::kLanes, K::Sum, K::SumSquares, K::LayerNorm,
                                            K::Scale};

}  // namespace kernels
}  // namespace qfold
