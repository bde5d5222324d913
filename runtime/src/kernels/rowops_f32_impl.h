// The algorithm of rowops_f32.h over a vector trait V; included only by the
// per-ISA files, which compile it with their flags.
//
// V provides: type F, kLanes, Load/Store, Set, Add, Sub, Mul, Fma(a, b, c) =
// a*b + c, HorizontalSum(v) (a pairwise tree over the lanes), for the
// affine kernels a mask type M with Less(a, b) (a < b, false for NaN) and
// Select(m, a, b) (m ? a : b), and for the double sums a type D of kDLanes
// doubles with LoadD/StoreD/AddD and Widen(v, d) (d[0..kLanes / kDLanes) =
// v's lanes in order, exactly).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/rowops_f32.h"

namespace qfold {
namespace kernels {
namespace rowops {

template <class V>
struct Kernels {
  using F = typename V::F;
  static constexpr int kL = V::kLanes;

  // Sum of map(x[i]); the last vector is padded with `pad`, where map must give 0.
  template <class Map>
  static float Reduce(const float* x, int64_t n, float pad, const Map& map) {
    F a0 = V::Set(0.f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * kL <= n; i += 4 * kL) {
      a0 = V::Add(a0, map(V::Load(x + i)));
      a1 = V::Add(a1, map(V::Load(x + i + kL)));
      a2 = V::Add(a2, map(V::Load(x + i + 2 * kL)));
      a3 = V::Add(a3, map(V::Load(x + i + 3 * kL)));
    }
    F* acc[4] = {&a0, &a1, &a2, &a3};
    for (int a = 0; i < n; i += kL, ++a) {
      float buf[kL];
      std::fill(buf, buf + kL, pad);
      std::copy(x + i, x + std::min<int64_t>(n, i + kL), buf);
      *acc[a] = V::Add(*acc[a], map(V::Load(buf)));
    }
    return V::HorizontalSum(V::Add(V::Add(a0, a1), V::Add(a2, a3)));
  }

  static float Sum(const float* x, int64_t n) {
    return Reduce(x, n, 0.f, [](F v) { return v; });
  }

  static float SumSquares(const float* x, int64_t n) {
    return Reduce(x, n, 0.f, [](F v) { return V::Mul(v, v); });
  }

  static void LayerNorm(const float* x, float* y, int64_t n, const float* scale, const float* bias,
                        float eps, float* mean_out, float* inv_out) {
    const float mean = n > 0 ? Sum(x, n) / float(n) : 0.f;
    const F vm = V::Set(mean);
    // Padded with the mean itself, whose squared deviation is exactly 0.
    const float sq = Reduce(x, n, mean, [vm](F v) {
      const F d = V::Sub(v, vm);
      return V::Mul(d, d);
    });
    const float var = n > 0 ? sq / float(n) : 0.f;
    const float inv = float(1.0 / std::sqrt(double(var) + double(eps)));
    const F vi = V::Set(inv);
    int64_t i = 0;
    for (; i + kL <= n; i += kL) {
      const F d = V::Sub(V::Load(x + i), vm);
      const F a = V::Mul(vi, V::Load(scale + i));
      V::Store(y + i, bias ? V::Fma(d, a, V::Load(bias + i)) : V::Mul(d, a));
    }
    for (; i < n; ++i) {
      const float a = inv * scale[i];
      y[i] = bias ? std::fma(x[i] - mean, a, bias[i]) : (x[i] - mean) * a;
    }
    *mean_out = mean;
    *inv_out = inv;
  }

  // act(v) as ChannelAffineRef: comparisons and selects, not max/min, whose
  // NaN and signed-zero rules differ between ISAs.
  static F Act(F v, F32Act act, F lo, F hi) {
    if (act == F32Act::kRelu) {
      const F zero = V::Set(0.f);
      return V::Select(V::Less(zero, v), v, zero);
    }
    if (act == F32Act::kClamp)
      return V::Select(V::Less(v, lo), lo, V::Select(V::Less(hi, v), hi, v));
    return v;
  }

  static void ChannelAffine(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows,
                            int64_t cols, const float* sub, const float* mul, const float* add,
                            F32Act act, float lo, float hi) {
    const F vlo = V::Set(lo), vhi = V::Set(hi);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * ldx;
      float* yr = y + r * ldy;
      int64_t i = 0;
      for (; i + kL <= cols; i += kL) {
        const F v =
            V::Fma(V::Sub(V::Load(xr + i), V::Load(sub + i)), V::Load(mul + i), V::Load(add + i));
        V::Store(yr + i, Act(v, act, vlo, vhi));
      }
      for (; i < cols; ++i) yr[i] = ChannelAffineRef(xr[i], sub[i], mul[i], add[i], act, lo, hi);
    }
  }

  static void PlaneAffine(const float* x, float* y, int64_t n, float sub, float mul, float add,
                          F32Act act, float lo, float hi) {
    const F vs = V::Set(sub), vm = V::Set(mul), va = V::Set(add), vlo = V::Set(lo),
            vhi = V::Set(hi);
    int64_t i = 0;
    for (; i + kL <= n; i += kL)
      V::Store(y + i, Act(V::Fma(V::Sub(V::Load(x + i), vs), vm, va), act, vlo, vhi));
    for (; i < n; ++i) y[i] = ChannelAffineRef(x[i], sub, mul, add, act, lo, hi);
  }

  // 4 vectors of channels at a time (4 * kLanes / kDLanes double accumulators
  // in registers through every row), then single vectors, then scalars.
  template <int kVectors>
  static void SumColumnBlock(const float* x, int64_t rows, int64_t c, double* acc) {
    constexpr int kParts = kL / V::kDLanes;
    using D = typename V::D;
    D a[kVectors * kParts];
    for (int j = 0; j < kVectors * kParts; ++j) a[j] = V::LoadD(acc + j * V::kDLanes);
    for (int64_t r = 0; r < rows; ++r, x += c)
      for (int b = 0; b < kVectors; ++b) {
        D w[kParts];
        V::Widen(V::Load(x + b * kL), w);
        for (int p = 0; p < kParts; ++p) a[b * kParts + p] = V::AddD(a[b * kParts + p], w[p]);
      }
    for (int j = 0; j < kVectors * kParts; ++j) V::StoreD(acc + j * V::kDLanes, a[j]);
  }

  static void SumColumnsF64(const float* x, int64_t rows, int64_t c, double* acc) {
    int64_t ch = 0;
    for (; ch + 4 * kL <= c; ch += 4 * kL) SumColumnBlock<4>(x + ch, rows, c, acc + ch);
    for (; ch + kL <= c; ch += kL) SumColumnBlock<1>(x + ch, rows, c, acc + ch);
    for (; ch < c; ++ch)
      for (int64_t r = 0; r < rows; ++r) acc[ch] += double(x[r * c + ch]);
  }

  static void Scale(const float* x, float* y, int64_t n, float s) {
    const F vs = V::Set(s);
    int64_t i = 0;
    for (; i + kL <= n; i += kL) V::Store(y + i, V::Mul(V::Load(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * s;
  }
};

}  // namespace rowops
}  // namespace kernels
}  // namespace qfold
