// AVX-512 VNNI weight-only 4-bit GEMM with int8 activations (gemm_wq_s8.h):
// a panel row is one zmm; vpdpbusd multiplies 4 u8 codes of each of 16
// columns with 4 s8 activations, and one 64-byte load unpacks into two such
// k-groups (low and high nibbles).
#include <immintrin.h>

#include "kernels/gemm_wq_s8_impl.h"
#include "kernels/vec_f32_avx512f.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

struct WqS8Zmm {
  static constexpr int kAccumulators = 16;
  static constexpr int kLanes = 16;
  using I = __m512i;
  using F = __m512;
  using U = __m512i;
  static I Zero() { return _mm512_setzero_si512(); }
  static F ZeroF() { return _mm512_setzero_ps(); }
  static void Unpack(const uint8_t* w, U* lo, U* hi) {
    const __m512i v = _mm512_loadu_si512(w), m = _mm512_set1_epi8(15);
    lo[0] = _mm512_and_si512(v, m);
    hi[0] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
  }
  static I Dot(I acc, U u, int32_t a4) {
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(a4));
  }
  static F Block(I acc, const uint8_t* zp, int32_t asum, float a_scale, const float* scale, F y) {
    const __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp)));
    const __m512i d = _mm512_sub_epi32(acc, _mm512_mullo_epi32(z, _mm512_set1_epi32(asum)));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(d),
                           _mm512_mul_ps(_mm512_set1_ps(a_scale), _mm512_loadu_ps(scale)), y);
  }
  static void StoreCols(float* p, F v, int n) { F32x16::StoreFirst(p, v, n); }
};

}  // namespace

extern const GemmWqS8Kernels kGemmWqS8Avx512Vnni;
const GemmWqS8Kernels kGemmWqS8Avx512Vnni = {"avx512vnni", 4, gemm_wq_s8::Panel<WqS8Zmm, 4>};

}  // namespace kernels
}  // namespace qfold
