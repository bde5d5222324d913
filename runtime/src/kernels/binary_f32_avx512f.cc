// AVX-512F float binary kernels (binary_f32.h): 16 lanes, tails through masks.
#include <immintrin.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_f32_impl.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics as
// maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct V16 {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static M Part(int m) { return M((1u << m) - 1u); }
  static F LoadPart(const float* p, int m) { return _mm512_maskz_loadu_ps(Part(m), p); }
  static void StorePart(float* p, F v, int m) { _mm512_mask_storeu_ps(p, Part(m), v); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static M Less(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M Unordered(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
  static F Select(M mask, F a, F b) { return _mm512_mask_blend_ps(mask, b, a); }
};

}  // namespace

extern const BinaryF32Kernels kBinaryF32Avx512f;
const BinaryF32Kernels kBinaryF32Avx512f = binary_f32::Make<V16>("avx512f");

}  // namespace kernels
}  // namespace qfold
