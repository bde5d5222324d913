// The integer Winograd's transforms for one tile (conv_nhwc_s8_winograd.h),
// written once over a lane type, and the scalar channels every variant
// leaves after its last whole vector. Internal linkage: each ISA file
// compiles its own copy with its own flags.
#pragma once
#include <cmath>
#include <cstdint>

namespace qfold {
namespace kernels {
namespace {

// V = B^T d B for one lane type: Load(i) gives patch pixel i (row-major).
template <class T, class Load, class Add, class Sub, class Store>
inline void InputTile(const Load& load, const Add& add, const Sub& sub, const Store& store) {
  T t[4][4];  // (B^T d)[i][j]
  for (int j = 0; j < 4; ++j) {
    const T d0 = load(j), d1 = load(4 + j), d2 = load(8 + j), d3 = load(12 + j);
    t[0][j] = sub(d0, d2);
    t[1][j] = add(d1, d2);
    t[2][j] = sub(d2, d1);
    t[3][j] = sub(d1, d3);
  }
  for (int i = 0; i < 4; ++i) {
    store(i * 4 + 0, sub(t[i][0], t[i][2]));
    store(i * 4 + 1, add(t[i][1], t[i][2]));
    store(i * 4 + 2, sub(t[i][2], t[i][1]));
    store(i * 4 + 3, sub(t[i][1], t[i][3]));
  }
}

// The 4 sums A^T M A (times 4) for one lane type, out[a * 2 + e].
template <class T, class Load, class Add, class Sub>
inline void OutputTile(const Load& load, const Add& add, const Sub& sub, T (&out)[4]) {
  T s[2][4];  // (A^T M)[a][j]
  for (int j = 0; j < 4; ++j) {
    const T m0 = load(j), m1 = load(4 + j), m2 = load(8 + j), m3 = load(12 + j);
    s[0][j] = add(add(m0, m1), m2);
    s[1][j] = sub(sub(m1, m2), m3);
  }
  for (int a = 0; a < 2; ++a) {
    out[a * 2] = add(add(s[a][0], s[a][1]), s[a][2]);
    out[a * 2 + 1] = sub(sub(s[a][1], s[a][2]), s[a][3]);
  }
}

// The reference's rule (Requantize): clamp(nearbyint(f) + zp, lo, hi), NaN
// to the zero point.
inline uint8_t RequantScalar(int32_t acc, float mult, int32_t zp, int32_t lo, int32_t hi) {
  const float f = float(acc) * mult;
  if (std::isnan(f)) return uint8_t(zp < lo ? lo : (zp > hi ? hi : zp));
  const float r = std::nearbyint(f);
  if (r <= float(lo - zp)) return uint8_t(lo);
  if (r >= float(hi - zp)) return uint8_t(hi);
  return uint8_t(int32_t(r) + zp);
}

// Channel ch of a tile's V, one channel at a time (the vectors' tails).
inline void InputChannel(const uint8_t* const* d, int64_t ch, uint8_t xmask, int32_t x_zp_u,
                         int16_t* v, int64_t v_stride) {
  InputTile<int32_t>([&](int i) { return d[i] ? int32_t(uint8_t(d[i][ch] ^ xmask)) - x_zp_u : 0; },
                     [](int32_t a, int32_t b) { return a + b; },
                     [](int32_t a, int32_t b) { return a - b; },
                     [&](int xi, int32_t r) { v[xi * v_stride + ch] = int16_t(r); });
}

// Channels [ch, cp) of a tile's V one at a time: x's below c, zeros past it
// (the k padding of the packed filters).
inline void InputTail(const uint8_t* const* d, int64_t ch, int64_t c, int64_t cp, uint8_t xmask,
                      int32_t x_zp_u, int16_t* v, int64_t v_stride) {
  for (; ch < cp; ++ch) {
    if (ch >= c) {
      for (int xi = 0; xi < 16; ++xi) v[xi * v_stride + ch] = 0;
      continue;
    }
    InputChannel(d, ch, xmask, x_zp_u, v, v_stride);
  }
}

// Output channel ch of a tile, one channel at a time (the vectors' tails).
inline void OutputChannel(const int32_t* m_sums, int64_t m_stride, int64_t ch, const int32_t* bias,
                          const float* mult, int32_t yzp, int32_t lo, int32_t hi,
                          uint8_t* const* y) {
  uint32_t out[4];  // unsigned: the sums wrap like the vector lanes
  OutputTile<uint32_t>([&](int xi) { return uint32_t(m_sums[xi * m_stride + ch]); },
                       [](uint32_t a, uint32_t b) { return a + b; },
                       [](uint32_t a, uint32_t b) { return a - b; }, out);
  for (int o = 0; o < 4; ++o) {
    if (!y[o]) continue;
    // 4 * the sum, which fits in 30 bits: the division is exact.
    const int32_t sum = int32_t(out[o]) / 4;
    y[o][ch] = RequantScalar(int32_t(uint32_t(sum) + uint32_t(bias[ch])), mult[ch], yzp, lo, hi);
  }
}

// The float output of channel ch (QfConvDequant), one channel at a time:
// one rounding like std::fma, then the clamp whose comparisons let NaN
// through as the reference's do.
inline void OutputChannelFloat(const int32_t* m_sums, int64_t m_stride, int64_t ch,
                               const float* mult, const float* bias, float lo, float hi,
                               float* const* y) {
  uint32_t out[4];
  OutputTile<uint32_t>([&](int xi) { return uint32_t(m_sums[xi * m_stride + ch]); },
                       [](uint32_t a, uint32_t b) { return a + b; },
                       [](uint32_t a, uint32_t b) { return a - b; }, out);
  for (int o = 0; o < 4; ++o) {
    if (!y[o]) continue;
    const float f = std::fma(float(int32_t(out[o]) / 4), mult[ch], bias[ch]);
    y[o][ch] = f < lo ? lo : (f > hi ? hi : f);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
