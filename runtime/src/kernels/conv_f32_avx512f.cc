// AVX-512F depthwise kernel (conv_f32.h): up to 4 vectors of 16 outputs of
// a row accumulate in registers over all taps (4 independent FMA chains);
// stride 2 picks the even inputs of two loads with one permute. 3x3 and 5x5
// keep their broadcast weights in registers for the whole plane.
#include <immintrin.h>

#include <algorithm>

#include "kernels/conv_f32.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own intrinsics
// as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

inline __mmask16 TailMask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

inline __m512 Activate(__m512 x, const DwF32Plane& a) {
  // Operand order matters for NaN (see gemm_f32_avx512f.cc).
  if (a.act == F32Act::kRelu) return _mm512_max_ps(x, _mm512_setzero_ps());
  if (a.act == F32Act::kClamp) {
    const __m512 lo = _mm512_set1_ps(a.lo);
    const __mmask16 below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    return _mm512_mask_blend_ps(below, _mm512_min_ps(_mm512_set1_ps(a.hi), x), lo);
  }
  return x;
}

// Outputs [ox0, ox0 + 16 * U) of one row, the last vector masked to the
// row's end. KH/KW > 0: a fixed kernel size with the weights in registers.
template <int S, int U, int KH, int KW>
inline void Chunk(const DwF32Plane& a, const float* base, const __m512* wv, float* y, int64_t ox0) {
  const int64_t kh = KH ? KH : a.kh, kw = KW ? KW : a.kw;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = _mm512_set1_ps(a.bias);
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* src = base + ky * a.dh * a.stride + ox0 * S;
    for (int64_t kx = 0; kx < kw; ++kx) {
      const __m512 w = KH ? wv[ky * kw + kx] : _mm512_set1_ps(a.w[ky * kw + kx]);
      const float* s = src + kx * a.dw;
      for (int u = 0; u < U; ++u) {
        __m512 x;
        if (S == 1) {
          x = _mm512_loadu_ps(s + 16 * u);
        } else {
          x = _mm512_permutex2var_ps(_mm512_loadu_ps(s + 32 * u), even,
                                     _mm512_loadu_ps(s + 32 * u + 16));
        }
        acc[u] = _mm512_fmadd_ps(w, x, acc[u]);
      }
    }
  }
  for (int u = 0; u < U; ++u)
    _mm512_mask_storeu_ps(y + ox0 + 16 * u, TailMask(a.ow - ox0 - 16 * u), Activate(acc[u], a));
}

template <int S, int KH, int KW>
void Plane(const DwF32Plane& a) {
  __m512 wv[KH ? KH * KW : 1];
  for (int i = 0; i < KH * KW; ++i) wv[i] = _mm512_set1_ps(a.w[i]);
  const int64_t tail = a.ow % 64, tail_vectors = (tail + 15) / 16;
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const float* base = a.src + oy * a.sh * a.stride;
    float* y = a.y + oy * a.ow;
    int64_t ox = 0;
    for (; ox + 64 <= a.ow; ox += 64) Chunk<S, 4, KH, KW>(a, base, wv, y, ox);
    switch (tail_vectors) {
      case 4:
        Chunk<S, 4, KH, KW>(a, base, wv, y, ox);
        break;
      case 3:
        Chunk<S, 3, KH, KW>(a, base, wv, y, ox);
        break;
      case 2:
        Chunk<S, 2, KH, KW>(a, base, wv, y, ox);
        break;
      case 1:
        Chunk<S, 1, KH, KW>(a, base, wv, y, ox);
        break;
      default:
        break;
    }
  }
}

template <int S>
void PlaneForSize(const DwF32Plane& a) {
  if (a.kh == 3 && a.kw == 3) {
    Plane<S, 3, 3>(a);
  } else if (a.kh == 5 && a.kw == 5) {
    Plane<S, 5, 5>(a);
  } else {
    Plane<S, 0, 0>(a);
  }
}

// Other strides: one output at a time, same summation order.
void PlaneScalar(const DwF32Plane& a) {
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const float* base = a.src + oy * a.sh * a.stride;
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      __m128 acc = _mm_set_ss(a.bias);
      const float* w = a.w;
      for (int64_t ky = 0; ky < a.kh; ++ky)
        for (int64_t kx = 0; kx < a.kw; ++kx, ++w)
          acc = _mm_fmadd_ss(_mm_set_ss(*w),
                             _mm_set_ss(base[ky * a.dh * a.stride + ox * a.sw + kx * a.dw]), acc);
      _mm512_mask_storeu_ps(a.y + oy * a.ow + ox, 1, Activate(_mm512_castps128_ps512(acc), a));
    }
  }
}

}  // namespace

void DwF32PlaneAvx512F(const DwF32Plane& a) {
  if (a.sw == 1) {
    PlaneForSize<1>(a);
  } else if (a.sw == 2) {
    PlaneForSize<2>(a);
  } else {
    PlaneScalar(a);
  }
}

}  // namespace kernels
}  // namespace qfold
