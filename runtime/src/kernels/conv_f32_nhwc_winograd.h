// Winograd F(2x2, 3x3) for channels-last fp32 convolutions (conv_f32_nhwc.h):
// the transforms of one tile, channel by channel, shared by the portable and
// AVX2 variants (each includes this file; everything here has internal
// linkage, so each is compiled with its own file's flags).
//
// A 2x2 output tile reads a 4x4 input patch d; per channel
//   V = B^T d B,   M[xi] = sum_c V[xi][c] * U[xi][c][m]   (16 GEMMs),
//   Y = A^T M A,   U = G g G^T (the 3x3 filter g, transformed at prepare)
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5;
// .5 -.5 .5; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1]. docs/NUMERICS.md bounds the
// difference from the direct convolution.
#pragma once
#include <cstdint>

#include "kernels/gemm_f32.h"

namespace qfold {
namespace kernels {
namespace {

// V[xi * v_stride + ch] for ch in [ch0, ch1); d: the patch's 16 pixels, row-major.
inline void WinogradInputScalar(const float* const* d, int64_t ch0, int64_t ch1, float* v,
                                int64_t v_stride) {
  for (int64_t ch = ch0; ch < ch1; ++ch) {
    float t[4][4];
    for (int j = 0; j < 4; ++j) {
      const float d0 = d[j][ch], d1 = d[4 + j][ch], d2 = d[8 + j][ch], d3 = d[12 + j][ch];
      t[0][j] = d0 - d2;
      t[1][j] = d1 + d2;
      t[2][j] = d2 - d1;
      t[3][j] = d1 - d3;
    }
    for (int i = 0; i < 4; ++i) {
      v[(i * 4 + 0) * v_stride + ch] = t[i][0] - t[i][2];
      v[(i * 4 + 1) * v_stride + ch] = t[i][1] + t[i][2];
      v[(i * 4 + 2) * v_stride + ch] = t[i][2] - t[i][1];
      v[(i * 4 + 3) * v_stride + ch] = t[i][1] - t[i][3];
    }
  }
}

inline float WinogradActivate(float v, F32Act act, float lo, float hi) {
  if (act == F32Act::kRelu) return v > 0.f ? v : 0.f;
  if (act == F32Act::kClamp) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

// y[a * 2 + b][ch] = act(bias[ch] + (A^T M A)[a][b] (+ res[a * 2 + b][ch])) for ch in [ch0, ch1),
// M[xi] at m[xi * m_stride]; a null y[k] (outside the output) is skipped.
inline void WinogradOutputScalar(const float* m, int64_t m_stride, int64_t ch0, int64_t ch1,
                                 const float* bias, F32Act act, float lo, float hi,
                                 const float* const* res, float* const* y) {
  for (int64_t ch = ch0; ch < ch1; ++ch) {
    float s[2][4];
    for (int j = 0; j < 4; ++j) {
      const float m0 = m[j * m_stride + ch], m1 = m[(4 + j) * m_stride + ch];
      const float m2 = m[(8 + j) * m_stride + ch], m3 = m[(12 + j) * m_stride + ch];
      s[0][j] = m0 + m1 + m2;
      s[1][j] = m1 - m2 - m3;
    }
    const float b = bias ? bias[ch] : 0.f;
    for (int a = 0; a < 2; ++a) {
      float v[2] = {s[a][0] + s[a][1] + s[a][2] + b, s[a][1] - s[a][2] - s[a][3] + b};
      for (int e = 0; e < 2; ++e) {
        float* out = y[a * 2 + e];
        if (!out) continue;
        if (res) v[e] += res[a * 2 + e][ch];
        out[ch] = WinogradActivate(v[e], act, lo, hi);
      }
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
