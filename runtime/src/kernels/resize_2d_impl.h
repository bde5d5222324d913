// Plane loops of resize_2d.h, compiled once per ISA file inside its own
// namespace (QF_RESIZE_NS); see pool_2d_impl.h for why no std containers.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>

#include "kernels/resize_2d.h"

// The reference rounds every product and sum separately; an FMA would not
// (the ISA files are compiled with -mfma, and GCC contracts by default).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

namespace qfold {
namespace kernels {
namespace QF_RESIZE_NS {
namespace {

// acc[o] += sum over the K column taps of (wr * w_k[o]) * g_k[o], the inner
// sum starting at +0.0 as in the reference; masked taps add +0.0 (the
// mask is ANDed into the bits: a branch-free select the compiler vectorizes).
template <int K>
void AddRowTap(const ResizeLinearArgs& a, double wr, const float* g, double* acc) {
  const int64_t n = a.col_stride;
  const double* w = a.col_w;
  const uint64_t* m = a.col_mask;
  for (int64_t o = 0; o < n; ++o) {
    double inner = 0.0;
    for (int k = 0; k < K; ++k) {
      double t = (wr * w[k * n + o]) * double(g[k * n + o]);
      uint64_t bits;
      std::memcpy(&bits, &t, sizeof(bits));
      bits &= m[k * n + o];
      std::memcpy(&t, &bits, sizeof(bits));
      inner += t;
    }
    acc[o] += inner;
  }
}

void LinearPlanes(const ResizeLinearArgs& a, const float* x, float* y, int64_t p0, int64_t p1) {
  const int64_t n = a.col_stride;
  // Input rows gathered at the column taps, built once per plane and row.
  std::unique_ptr<float[]> g(new float[size_t(a.ih * a.kw * n)]());
  std::unique_ptr<int64_t[]> built(new int64_t[size_t(a.ih)]);
  for (int64_t r = 0; r < a.ih; ++r) built[r] = -1;
  std::unique_ptr<double[]> acc(new double[size_t(n)]());
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * a.ih * a.iw;
    float* yp = y + p * a.oh * a.ow;
    for (int64_t o = 0; o < a.oh; ++o) {
      float* yr = yp + o * a.ow;
      const int64_t cnt = a.row_count[o];
      if (cnt == 0) {
        for (int64_t c = 0; c < a.ow; ++c) yr[c] = a.extrapolation;
        continue;
      }
      for (int64_t c = 0; c < n; ++c) acc[c] = 0.0;
      for (int64_t t = 0; t < cnt; ++t) {
        const int64_t r = a.row_idx[o * a.kh_max + t];
        float* gr = g.get() + r * a.kw * n;
        if (built[r] != p) {
          const float* xr = xp + r * a.iw;
          for (int64_t i = 0; i < a.kw * n; ++i) gr[i] = xr[a.col_idx[i]];
          built[r] = p;
        }
        const double wr = a.row_w[o * a.kh_max + t];
        switch (a.kw) {
          case 1:
            AddRowTap<1>(a, wr, gr, acc.get());
            break;
          case 2:
            AddRowTap<2>(a, wr, gr, acc.get());
            break;
          case 3:
            AddRowTap<3>(a, wr, gr, acc.get());
            break;
          default:
            AddRowTap<4>(a, wr, gr, acc.get());
            break;
        }
      }
      for (int64_t c = 0; c < a.ow; ++c) yr[c] = float(acc[c]);
      if (a.any_col_extrapolate)
        for (int64_t c = 0; c < a.ow; ++c)
          if (a.col_extrapolate[c]) yr[c] = a.extrapolation;
    }
  }
}

}  // namespace

constexpr ResizeKernels MakeResizeKernels() {
  return {LinearPlanes};
}

}  // namespace QF_RESIZE_NS
}  // namespace kernels
}  // namespace qfold

#if !defined(__clang__) && defined(__GNUC__)
#pragma GCC pop_options
#endif
