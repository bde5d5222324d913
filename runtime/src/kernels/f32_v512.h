// What the AVX-512 float kernels share (conv_f32_nhwc_avx512f.cc, the bf16
// kernels conv_f32_nhwc_amx.cc and gemm_bf16_avx512bf16.cc): tail masks and
// the fused Relu/Clip epilogue. For files compiled with AVX-512F or more.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "core/activation.h"
#include "kernels/gemm_f32.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics
// as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

// Lane i enabled when i < n.
inline __mmask16 TailMask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

inline __m512 Activate(__m512 x, F32Act act, float lo_v, float hi_v) {
  // Operand order matters for NaN: max/min return the second operand.
  if (act == F32Act::kRelu) return _mm512_max_ps(x, _mm512_setzero_ps());
  if (act == F32Act::kClamp) {
    // x < lo ? lo : min(hi, x), exactly the reference even when lo > hi.
    const __m512 lo = _mm512_set1_ps(lo_v);
    const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    return _mm512_mask_blend_ps(below, _mm512_min_ps(_mm512_set1_ps(hi_v), x), lo);
  }
  return x;
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
