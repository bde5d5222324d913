// AVX-512F row kernels (rowops_f32.h): the shared algorithm over 16-lane
// vectors (the error bound's depth follows the lane count, rowops_f32.h).
#include <immintrin.h>

#include "kernels/rowops_f32.h"
#include "kernels/rowops_f32_impl.h"
#include "kernels/vec_f32_avx512f.h"

namespace qfold {
namespace kernels {
namespace {

struct V16 : F32x16 {
  using D = __m512d;
  static constexpr int kDLanes = 8;
  static D LoadD(const double* p) { return _mm512_loadu_pd(p); }
  static void StoreD(double* p, D v) { _mm512_storeu_pd(p, v); }
  static D AddD(D a, D b) { return _mm512_add_pd(a, b); }
  static void Widen(F v, D* d) {
    d[0] = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    d[1] = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
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
const RowOpsF32Kernels kRowOpsF32Avx512f = {V16::kLanes,    K::Sum,          K::SumSquares,
                                            K::LayerNorm,   K::Scale,        K::ChannelAffine,
                                            K::PlaneAffine, K::SumColumnsF64};

}  // namespace kernels
}  // namespace qfold
