// AVX2+FMA row kernels (rowops_f32.h): the shared algorithm over 8-lane vectors.
#include <immintrin.h>

#include "kernels/rowops_f32.h"
#include "kernels/rowops_f32_impl.h"
#include "kernels/vec_f32_avx2.h"

namespace qfold {
namespace kernels {
namespace {

struct V8 : F32x8 {
  using D = __m256d;
  static constexpr int kDLanes = 4;
  static D LoadD(const double* p) { return _mm256_loadu_pd(p); }
  static void StoreD(double* p, D v) { _mm256_storeu_pd(p, v); }
  static D AddD(D a, D b) { return _mm256_add_pd(a, b); }
  static void Widen(F v, D* d) {
    d[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    d[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  }
  static float HorizontalSum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

using K = rowops::Kernels<V8>;

}  // namespace

extern const RowOpsF32Kernels kRowOpsF32Avx2;
const RowOpsF32Kernels kRowOpsF32Avx2 = {V8::kLanes,     K::Sum,          K::SumSquares,
                                         K::LayerNorm,   K::Scale,        K::ChannelAffine,
                                         K::PlaneAffine, K::SumColumnsF64};

}  // namespace kernels
}  // namespace qfold
