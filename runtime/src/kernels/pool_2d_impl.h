// Plane loops of pool_2d.h, written so the compiler vectorizes them. Each ISA
// file includes this inside its own namespace (QF_POOL_NS) and compiles it
// with its flags, so the instantiations never mix across ISA levels. Buffers
// are plain arrays (no std::vector/std::fill): a standard-library template
// instantiated here would be compiled with this file's ISA flags and could be
// the copy the linker keeps for the whole program.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>

#include "kernels/pool_2d.h"
#include "kernels/window_taps.h"

namespace qfold {
namespace kernels {
namespace QF_POOL_NS {
namespace {

// One axis: for output o the window starts at input start(o); taps
// [lo[o], hi[o]) fall inside the input (lo == hi: none); `padded` counts
// taps inside input plus padding (AveragePool's count_include_pad divisor).
// Outputs [first, last) have every tap inside the input.
template <class T>
std::unique_ptr<T[]> Array(int64_t n) {
  return std::unique_ptr<T[]>(new T[size_t(n > 0 ? n : 1)]());
}

struct Axis {
  std::unique_ptr<int64_t[]> start, lo, hi, padded;
  int64_t first = 0, last = 0;
};

Axis MakeAxis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_begin,
              int64_t pad_end) {
  Axis ax;
  ax.start = Array<int64_t>(out);
  ax.lo = Array<int64_t>(out);
  ax.hi = Array<int64_t>(out);
  ax.padded = Array<int64_t>(out);
  ax.first = out;
  ax.last = out;
  bool seen_interior = false;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t st = o * s - pad_begin;
    const WindowTaps w = TapsOfWindow(st, k, d, in, pad_end);
    ax.start[size_t(o)] = st;
    ax.lo[size_t(o)] = w.lo;
    ax.hi[size_t(o)] = w.hi;
    ax.padded[size_t(o)] = w.padded;
    // (k - 1) * d fits (window_util.cc checks it), st + (k - 1) * d may not.
    const bool interior = st >= 0 && (k - 1) * d < in - st;
    if (interior && !seen_interior) {
      ax.first = o;
      seen_interior = true;
    }
    if (!interior && seen_interior && ax.last == out) ax.last = o;
  }
  if (!seen_interior) ax.first = ax.last = 0;
  return ax;
}

// The reference's max step: a later tap replaces the maximum only when it is
// larger, or NaN.
inline float MaxStep(float acc, float v) {
  return (v > acc || v != v) ? v : acc;
}
inline int8_t MaxStep(int8_t acc, int8_t v) {
  return v > acc ? v : acc;
}
inline uint8_t MaxStep(uint8_t acc, uint8_t v) {
  return v > acc ? v : acc;
}

// Strided windows, made contiguous: phase j of `row` is ph[j * len + i] =
// row[i * S + j] for i * S + j < avail (the load-lanes pattern compilers
// vectorize), so tap t of output o is phase (t * d) % S at o + (t * d) / S.
template <class T, int S>
void SplitPhases(const T* row, int64_t avail, int64_t len, T* ph) {
  const int64_t full = avail / S;
  for (int64_t i = 0; i < full; ++i)
    for (int j = 0; j < S; ++j) ph[j * len + i] = row[i * S + j];
  for (int j = 0; j < S; ++j)
    if (full * S + j < avail) ph[j * len + full] = row[full * S + j];
}

// Vector-friendly lengths: loops over our own scratch run to a multiple of
// one 64-byte vector, so no scalar remainder loop runs.
template <class T>
int64_t RoundVec(int64_t n) {
  const int64_t v = int64_t(64 / sizeof(T));
  return (n + v - 1) / v * v;
}

// dst[o] = MaxStep chain over src[0][o], src[1][o], ..., in that order, with
// the running maximum kept in a register for up to 4 taps at a time.
template <class T, int K>
void ChainFixed(const T* const* src, bool init, int64_t n, T* dst) {
  const T* s[K];
  for (int t = 0; t < K; ++t) s[t] = src[t];
  if (init) {
    for (int64_t o = 0; o < n; ++o) {
      T m = s[0][o];
      for (int t = 1; t < K; ++t) m = MaxStep(m, s[t][o]);
      dst[o] = m;
    }
  } else {
    for (int64_t o = 0; o < n; ++o) {
      T m = dst[o];
      for (int t = 0; t < K; ++t) m = MaxStep(m, s[t][o]);
      dst[o] = m;
    }
  }
}

template <class T>
void Chain(const T* const* src, int64_t k, int64_t n, T* dst) {
  bool init = true;
  while (k > 0) {
    const int64_t c = k < 4 ? k : 4;
    if (c == 4)
      ChainFixed<T, 4>(src, init, n, dst);
    else if (c == 3)
      ChainFixed<T, 3>(src, init, n, dst);
    else if (c == 2)
      ChainFixed<T, 2>(src, init, n, dst);
    else
      ChainFixed<T, 1>(src, init, n, dst);
    src += c;
    k -= c;
    init = false;
  }
}

template <class T>
void MaxPlanes(const Pool2dArgs& a, const T* x, T* y, int64_t p0, int64_t p1) {
  const Axis rows = MakeAxis(a.ih, a.oh, a.kh, a.sh, a.dh, a.pad_top, a.pad_bottom);
  const Axis cols = MakeAxis(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, a.pad_right);
  // Which input rows some output reads: only those get a column-max row.
  std::unique_ptr<char[]> used = Array<char>(a.ih);
  for (int64_t o = 0; o < a.oh; ++o)
    for (int64_t t = rows.lo[size_t(o)]; t < rows.hi[size_t(o)]; ++t)
      used[size_t(rows.start[size_t(o)] + t * a.dh)] = 1;
  const int64_t nint = cols.last - cols.first;
  const int64_t nint_v = RoundVec<T>(nint), ow_v = RoundVec<T>(a.ow);
  // Row r's column maxima: hbuf[r * hstride + o]; the interior loop may write
  // up to nint_v values from cols.first.
  const int64_t hstride = RoundVec<T>(cols.first + nint_v > a.ow ? cols.first + nint_v : a.ow);
  std::unique_ptr<T[]> hbuf = Array<T>(a.ih * hstride);
  // Interior windows as phases (SplitPhases) padded to whole vectors: phase
  // reads go up to (k - 1) * d / s + nint_v. The stride only separates
  // interior windows: with one (or none) it is never applied, and huge pads
  // can put several windows around a single interior one with any stride, so
  // the phases (s of them) would grow with it.
  const int64_t s = nint > 1 ? a.sw : 1;
  const int64_t avail = nint > 0 ? a.iw - cols.start[size_t(cols.first)] : 0;
  const int64_t plen = nint > 0 ? RoundVec<T>(avail / s + 1 + (a.kw - 1) * a.dw / s + nint_v) : 1;
  std::unique_ptr<T[]> phases = Array<T>(plen * s);
  // Tap pointers: row taps inside the input (at most ih), column taps of
  // interior windows (all inside: at most iw). Huge kernels that only huge pads
  // make legal never size these.
  const int64_t row_taps = a.kh < a.ih ? a.kh : a.ih;
  const int64_t col_taps = nint > 0 ? a.kw : 0;
  std::unique_ptr<const T*[]> src = Array<const T*>(row_taps > col_taps ? row_taps : col_taps);
  // Where each column tap starts in the phases (divisions hoisted out of the
  // loops), and whether some output column has no tap at all.
  std::unique_ptr<const T*[]> col_src = Array<const T*>(col_taps);
  for (int64_t t = 0; t < col_taps; ++t)
    col_src[size_t(t)] = phases.get() + ((t * a.dw) % s) * plen + (t * a.dw) / s;
  bool empty_cols = false;
  for (int64_t c = 0; c < a.ow; ++c) empty_cols |= cols.lo[size_t(c)] == cols.hi[size_t(c)];
  std::unique_ptr<T[]> vrow = Array<T>(ow_v);
  const T lowest = std::numeric_limits<T>::lowest();
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * a.ih * a.iw;
    T* yp = y + p * a.oh * a.ow;
    for (int64_t r = 0; r < a.ih; ++r) {
      if (!used[size_t(r)]) continue;
      const T* xr = xp + r * a.iw;
      T* h = hbuf.get() + r * hstride;
      if (nint > 0) {
        const T* base = xr + cols.start[size_t(cols.first)];
        T* ph = phases.get();
        switch (s) {
          case 1:
            SplitPhases<T, 1>(base, avail, plen, ph);
            break;
          case 2:
            SplitPhases<T, 2>(base, avail, plen, ph);
            break;
          case 3:
            SplitPhases<T, 3>(base, avail, plen, ph);
            break;
          default:
            for (int64_t i = 0; i < avail; ++i) ph[(i % s) * plen + i / s] = base[i];
            break;
        }
        Chain<T>(col_src.get(), a.kw, nint_v, h + cols.first);
      }
      // Border outputs after the interior, whose padded loop may run over them.
      for (int64_t o = 0; o < a.ow; ++o) {
        if (o == cols.first && nint > 0) {
          o = cols.last - 1;
          continue;
        }
        const int64_t lo = cols.lo[size_t(o)], hi = cols.hi[size_t(o)];
        const int64_t st = cols.start[size_t(o)];
        if (lo == hi) continue;  // no tap: the output is lowest, set below
        T acc = xr[st + lo * a.dw];
        for (int64_t t = lo + 1; t < hi; ++t) acc = MaxStep(acc, xr[st + t * a.dw]);
        h[o] = acc;
      }
    }
    for (int64_t o = 0; o < a.oh; ++o) {
      T* yr = yp + o * a.ow;
      const int64_t lo = rows.lo[size_t(o)], hi = rows.hi[size_t(o)];
      if (lo == hi) {
        for (int64_t c = 0; c < a.ow; ++c) yr[c] = lowest;
        continue;
      }
      const int64_t st = rows.start[size_t(o)];
      for (int64_t t = lo; t < hi; ++t)
        src[size_t(t - lo)] = hbuf.get() + (st + t * a.dh) * hstride;
      Chain<T>(src.get(), hi - lo, ow_v, vrow.get());
      for (int64_t c = 0; c < a.ow; ++c) yr[c] = vrow[c];
      if (empty_cols)
        for (int64_t c = 0; c < a.ow; ++c)
          if (cols.lo[size_t(c)] == cols.hi[size_t(c)]) yr[c] = lowest;
    }
  }
}

// acc[o] = (acc[o] + src[0][o]) + src[1][o] + ... in tap order, up to 4 taps
// per pass with the sum in a register.
template <int K>
void SumFixed(const float* const* src, int64_t n, double* acc) {
  const float* s[K];
  for (int t = 0; t < K; ++t) s[t] = src[t];
  for (int64_t o = 0; o < n; ++o) {
    double v = acc[o];
    for (int t = 0; t < K; ++t) v += double(s[t][o]);
    acc[o] = v;
  }
}

// acc[o] += the taps of one input row, in tap order, interior outputs (see
// MaxPlanes for the phases).
template <int S>
void RowSumInterior(const float* row, int64_t avail, int64_t n, int64_t s, int64_t k, int64_t d,
                    float* ph, const float** src, double* acc) {
  if constexpr (S == 0) {
    for (int64_t t = 0; t < k; ++t) {
      const float* r = row + t * d;
      for (int64_t o = 0; o < n; ++o) acc[o] += double(r[o * s]);
    }
    return;
  }
  // S == 0 returned above; kS keeps the (dead) code below free of a constant
  // division by zero, which clang rejects.
  constexpr int kS = S > 0 ? S : 1;
  const float* base = row;
  int64_t len = 0;
  if (kS > 1) {
    len = avail / kS + 1;
    SplitPhases<float, kS>(row, avail, len, ph);
    base = ph;
  }
  for (int64_t t = 0; t < k; ++t) src[t] = base + ((t * d) % kS) * len + (t * d) / kS;
  for (int64_t t = 0; t < k; t += 4) {
    const int64_t c = k - t < 4 ? k - t : 4;
    if (c == 4)
      SumFixed<4>(src + t, n, acc);
    else if (c == 3)
      SumFixed<3>(src + t, n, acc);
    else if (c == 2)
      SumFixed<2>(src + t, n, acc);
    else
      SumFixed<1>(src + t, n, acc);
  }
}

void AvgPlanes(const Pool2dArgs& a, const float* x, float* y, int64_t p0, int64_t p1) {
  const Axis rows = MakeAxis(a.ih, a.oh, a.kh, a.sh, a.dh, a.pad_top, a.pad_bottom);
  const Axis cols = MakeAxis(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, a.pad_right);
  const int64_t nint = cols.last - cols.first;
  std::unique_ptr<double[]> acc = Array<double>(a.ow);
  // RowSumInterior splits phases only for strides 2 to 4 (at most avail + 4
  // values); larger strides read the row in place, so the stride, which huge
  // pads leave unbounded, never sizes this buffer.
  std::unique_ptr<float[]> phases = Array<float>(a.iw + 16);
  // Column taps of interior windows only (all inside the input: kw <= iw).
  std::unique_ptr<const float*[]> src = Array<const float*>(nint > 0 ? a.kw : 0);
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * a.ih * a.iw;
    float* yp = y + p * a.oh * a.ow;
    for (int64_t o = 0; o < a.oh; ++o) {
      for (int64_t c = 0; c < a.ow; ++c) acc[c] = 0.0;
      const int64_t rlo = rows.lo[size_t(o)], rhi = rows.hi[size_t(o)];
      for (int64_t tr = rlo; tr < rhi; ++tr) {
        const float* xr = xp + (rows.start[size_t(o)] + tr * a.dh) * a.iw;
        for (int64_t c = 0; c < a.ow; ++c) {
          if (c == cols.first && nint > 0) {
            c = cols.last - 1;
            continue;
          }
          const int64_t st = cols.start[size_t(c)];
          for (int64_t t = cols.lo[size_t(c)]; t < cols.hi[size_t(c)]; ++t)
            acc[c] += double(xr[st + t * a.dw]);
        }
        if (nint > 0) {
          const int64_t st = cols.start[size_t(cols.first)];
          const float* base = xr + st;
          const int64_t avail = a.iw - st;
          double* ac = acc.get() + cols.first;
          float* ph = phases.get();
          if (a.sw == 1)
            RowSumInterior<1>(base, avail, nint, 1, a.kw, a.dw, ph, src.get(), ac);
          else if (a.sw == 2)
            RowSumInterior<2>(base, avail, nint, 2, a.kw, a.dw, ph, src.get(), ac);
          else if (a.sw == 3)
            RowSumInterior<3>(base, avail, nint, 3, a.kw, a.dw, ph, src.get(), ac);
          else if (a.sw == 4)
            RowSumInterior<4>(base, avail, nint, 4, a.kw, a.dw, ph, src.get(), ac);
          else
            RowSumInterior<0>(base, avail, nint, a.sw, a.kw, a.dw, ph, src.get(), ac);
        }
      }
      float* yr = yp + o * a.ow;
      const int64_t rcount = rhi - rlo, rpadded = rows.padded[size_t(o)];
      for (int64_t c = 0; c < a.ow; ++c) {
        const int64_t div = a.count_include_pad
                                ? SaturatingCount(rpadded, cols.padded[size_t(c)])
                                : rcount * (cols.hi[size_t(c)] - cols.lo[size_t(c)]);
        yr[c] = div > 0 ? float(acc[c] / double(div)) : 0.f;
      }
    }
  }
}

}  // namespace

constexpr Pool2dKernels MakePool2dKernels() {
  return {MaxPlanes<float>, MaxPlanes<int8_t>, MaxPlanes<uint8_t>, AvgPlanes};
}

}  // namespace QF_POOL_NS
}  // namespace kernels
}  // namespace qfold
