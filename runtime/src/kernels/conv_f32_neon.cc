// NEON depthwise kernel for aarch64 (conv_f32.h): up to 4 vectors of 4
// outputs of a row accumulate in registers over all taps; stride 2
// deinterleaves with ld2; 3x3 and 5x5 keep their weights in registers. A
// partial last vector is stored through a small buffer.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/conv_f32.h"

namespace qfold {
namespace kernels {
namespace {

inline float32x4_t Activate(float32x4_t x, const DwF32Plane& a) {
  const float32x4_t zero = vdupq_n_f32(0.f);
  if (a.act == F32Act::kRelu) return vbslq_f32(vcgtq_f32(x, zero), x, zero);  // NaN -> 0
  if (a.act == F32Act::kClamp) {
    // x < lo ? lo : (x > hi ? hi : x): NaN passes through.
    const float32x4_t lo = vdupq_n_f32(a.lo), hi = vdupq_n_f32(a.hi);
    return vbslq_f32(vcltq_f32(x, lo), lo, vbslq_f32(vcgtq_f32(x, hi), hi, x));
  }
  return x;
}

// Outputs [ox0, ox0 + 4 * U) of one row. KH/KW > 0: a fixed kernel size
// with the weights in registers.
template <int S, int U, int KH, int KW>
inline void Chunk(const DwF32Plane& a, const float* base, const float32x4_t* wv, float* y,
                  int64_t ox0) {
  const int64_t kh = KH ? KH : a.kh, kw = KW ? KW : a.kw;
  float32x4_t acc[U];
  for (int u = 0; u < U; ++u) acc[u] = vdupq_n_f32(a.bias);
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* src = base + ky * a.dh * a.stride + ox0 * S;
    for (int64_t kx = 0; kx < kw; ++kx) {
      const float32x4_t w = KH ? wv[ky * kw + kx] : vdupq_n_f32(a.w[ky * kw + kx]);
      const float* s = src + kx * a.dw;
      for (int u = 0; u < U; ++u) {
        const float32x4_t x = S == 1 ? vld1q_f32(s + 4 * u) : vld2q_f32(s + 8 * u).val[0];
        acc[u] = vfmaq_f32(acc[u], w, x);
      }
    }
  }
  for (int u = 0; u < U; ++u) {
    const int64_t n = std::min<int64_t>(4, a.ow - ox0 - 4 * u);
    if (n <= 0) break;
    const float32x4_t v = Activate(acc[u], a);
    if (n == 4) {
      vst1q_f32(y + ox0 + 4 * u, v);
    } else {
      float buf[4];
      vst1q_f32(buf, v);
      std::memcpy(y + ox0 + 4 * u, buf, size_t(n) * sizeof(float));
    }
  }
}

template <int S, int KH, int KW>
void Plane(const DwF32Plane& a) {
  float32x4_t wv[KH ? KH * KW : 1];
  for (int i = 0; i < KH * KW; ++i) wv[i] = vdupq_n_f32(a.w[i]);
  const int64_t tail = a.ow % 16, tail_vectors = (tail + 3) / 4;
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const float* base = a.src + oy * a.sh * a.stride;
    float* y = a.y + oy * a.ow;
    int64_t ox = 0;
    for (; ox + 16 <= a.ow; ox += 16) Chunk<S, 4, KH, KW>(a, base, wv, y, ox);
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
      float acc = a.bias;
      const float* w = a.w;
      for (int64_t ky = 0; ky < a.kh; ++ky)
        for (int64_t kx = 0; kx < a.kw; ++kx, ++w)
          acc = std::fma(*w, base[ky * a.dh * a.stride + ox * a.sw + kx * a.dw], acc);
      a.y[oy * a.ow + ox] = vgetq_lane_f32(Activate(vdupq_n_f32(acc), a), 0);
    }
  }
}

}  // namespace

void DwF32PlaneNeon(const DwF32Plane& a) {
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
