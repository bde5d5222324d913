// AVX2+FMA depthwise kernel (conv_f32.h): up to 4 vectors of 8 outputs of a
// row accumulate in registers over all taps (4 independent FMA chains);
// stride 2 picks the even inputs of two loads with a shuffle and a lane
// permute. 3x3 and 5x5 broadcast their weights once per plane.
#include <immintrin.h>

#include <algorithm>

#include "kernels/conv_f32.h"

namespace qfold {
namespace kernels {
namespace {

// Lane i enabled when i < n.
inline __m256i TailMask(int64_t n) {
  const int32_t k = int32_t(std::max<int64_t>(0, std::min<int64_t>(8, n)));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 Activate(__m256 x, const DwF32Plane& a) {
  // Operand order matters for NaN (see gemm_f32_avx2.cc).
  if (a.act == F32Act::kRelu) return _mm256_max_ps(x, _mm256_setzero_ps());
  if (a.act == F32Act::kClamp) {
    const __m256 lo = _mm256_set1_ps(a.lo);
    const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_min_ps(_mm256_set1_ps(a.hi), x), lo, below);
  }
  return x;
}

// Outputs [ox0, ox0 + 8 * U) of one row, the last vector masked to the
// row's end. KH/KW > 0: a fixed kernel size with the weights in registers.
template <int S, int U, int KH, int KW>
inline void Chunk(const DwF32Plane& a, const float* base, const __m256* wv, float* y, int64_t ox0) {
  const int64_t kh = KH ? KH : a.kh, kw = KW ? KW : a.kw;
  __m256 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = _mm256_set1_ps(a.bias);
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* src = base + ky * a.dh * a.stride + ox0 * S;
    for (int64_t kx = 0; kx < kw; ++kx) {
      const __m256 w = KH ? wv[ky * kw + kx] : _mm256_set1_ps(a.w[ky * kw + kx]);
      const float* s = src + kx * a.dw;
      for (int u = 0; u < U; ++u) {
        __m256 x;
        if (S == 1) {
          x = _mm256_loadu_ps(s + 8 * u);
        } else {
          // [a0 a2 b0 b2 | a4 a6 b4 b6], then 64-bit lanes reordered 0, 2, 1, 3.
          const __m256 e =
              _mm256_shuffle_ps(_mm256_loadu_ps(s + 16 * u), _mm256_loadu_ps(s + 16 * u + 8), 0x88);
          x = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8));
        }
        acc[u] = _mm256_fmadd_ps(w, x, acc[u]);
      }
    }
  }
  // The masked store only for the row's last, partial vector: vmaskmovps
  // costs about ten plain stores on AMD Zen.
  for (int u = 0; u < U; ++u) {
    const int64_t n = a.ow - ox0 - 8 * u;
    if (n >= 8)
      _mm256_storeu_ps(y + ox0 + 8 * u, Activate(acc[u], a));
    else
      _mm256_maskstore_ps(y + ox0 + 8 * u, TailMask(n), Activate(acc[u], a));
  }
}

template <int S, int KH, int KW>
void Plane(const DwF32Plane& a) {
  __m256 wv[KH ? KH * KW : 1];
  for (int i = 0; i < KH * KW; ++i) wv[i] = _mm256_set1_ps(a.w[i]);
  const int64_t tail = a.ow % 32, tail_vectors = (tail + 7) / 8;
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const float* base = a.src + oy * a.sh * a.stride;
    float* y = a.y + oy * a.ow;
    int64_t ox = 0;
    for (; ox + 32 <= a.ow; ox += 32) Chunk<S, 4, KH, KW>(a, base, wv, y, ox);
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
      _mm_store_ss(a.y + oy * a.ow + ox,
                   _mm256_castps256_ps128(Activate(_mm256_castps128_ps256(acc), a)));
    }
  }
}

}  // namespace

void DwF32PlaneAvx2(const DwF32Plane& a) {
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
