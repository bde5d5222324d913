// Plane loops of pool_2d.h, written so the compiler vectorizes them. Each ISA
// file includes this inside its own namespace (QF_POOL_NS) and compiles it
// with its flags, so the instantiations never mix across ISA levels. Buffers
// are parts of the caller's scratch (no std::vector/std::fill): a standard-library template
// instantiated here would be compiled with this file's ISA flags and could be
// the copy the linker keeps for the whole program.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/pool_2d.h"
#include "kernels/window_taps.h"

namespace qfold {
namespace kernels {
namespace QF_POOL_NS {
namespace {

// Plain arithmetic (no ScratchLayout: an inline function of another header
// compiled here with this file's ISA flags could be the copy the program
// keeps). Parts start at multiples of 64 bytes.
inline size_t AddPart(size_t* total, size_t bytes) {
  const size_t at = *total;
  *total += (bytes + 63) / 64 * 64;
  return at;
}

// Interior outputs [first, last) of one axis: every tap inside the input.
void Interior(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_begin,
              int64_t* first, int64_t* last) {
  *first = out;
  *last = out;
  bool seen_interior = false;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t st = o * s - pad_begin;
    // (k - 1) * d fits (window_util.cc checks it), st + (k - 1) * d may not.
    const bool interior = st >= 0 && (k - 1) * d < in - st;
    if (interior && !seen_interior) {
      *first = o;
      seen_interior = true;
    }
    if (!interior && seen_interior && *last == out) *last = o;
  }
  if (!seen_interior) *first = *last = 0;
}

// One axis: for output o the window starts at input start(o); taps
// [lo[o], hi[o]) fall inside the input (lo == hi: none); `padded` counts
// taps inside input plus padding (AveragePool's count_include_pad divisor).
// Outputs [first, last) have every tap inside the input. The four arrays
// are 4 * out int64 of the caller's scratch.
struct Axis {
  int64_t *start, *lo, *hi, *padded;
  int64_t first = 0, last = 0;
};

Axis MakeAxis(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_begin,
              int64_t pad_end, int64_t* mem) {
  Axis ax;
  ax.start = mem;
  ax.lo = mem + out;
  ax.hi = mem + 2 * out;
  ax.padded = mem + 3 * out;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t st = o * s - pad_begin;
    const WindowTaps w = TapsOfWindow(st, k, d, in, pad_end);
    ax.start[o] = st;
    ax.lo[o] = w.lo;
    ax.hi[o] = w.hi;
    ax.padded[o] = w.padded;
  }
  Interior(in, out, k, s, d, pad_begin, &ax.first, &ax.last);
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
void SplitPhases(const T* __restrict row, int64_t avail, int64_t len, T* __restrict ph) {
  const int64_t full = avail / S;
  for (int64_t i = 0; i < full; ++i)
    for (int j = 0; j < S; ++j) ph[j * len + i] = row[i * S + j];
  for (int j = 0; j < S; ++j)
    if (full * S + j < avail) ph[j * len + full] = row[full * S + j];
}

// Vector-friendly lengths: loops over our own scratch run to a multiple of
// one 64-byte vector (of esize-byte elements), so no scalar remainder loop runs.
inline int64_t RoundVec(int64_t n, int64_t esize) {
  const int64_t v = 64 / esize;
  return (n + v - 1) / v * v;
}

// dst[o] = MaxStep chain over src[0][o], src[1][o], ..., in that order, with
// the running maximum kept in a register for up to 4 taps at a time.
// dst never overlaps a source (restrict: the scratch parts share one region,
// which the compiler could not tell apart otherwise).
template <class T, int K>
void ChainFixed(const T* const* src, bool init, int64_t n, T* __restrict dst) {
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

// A thread's scratch for MaxPlanes over elements of esize bytes; the sizes
// follow from the column axis' interior, computed as MakeAxis does.
struct MaxLayout {
  int64_t first = 0, nint = 0, nint_v = 0, ow_v = 0, hstride = 0;
  int64_t s = 1, avail = 0, plen = 1, row_taps = 0, col_taps = 0;
  size_t rows = 0, cols = 0, used = 0, hbuf = 0, phases = 0, src = 0, col_src = 0, vrow = 0;
  size_t total = 0;
  MaxLayout(const Pool2dArgs& a, int64_t esize) {
    int64_t last = 0;
    Interior(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, &first, &last);
    nint = last - first;
    nint_v = RoundVec(nint, esize);
    ow_v = RoundVec(a.ow, esize);
    // Row r's column maxima: hbuf[r * hstride + o]; the interior loop may
    // write up to nint_v values from first.
    hstride = RoundVec(first + nint_v > a.ow ? first + nint_v : a.ow, esize);
    // Interior windows as phases (SplitPhases) padded to whole vectors: phase
    // reads go up to (k - 1) * d / s + nint_v. The stride only separates
    // interior windows: with one (or none) it is never applied, and huge pads
    // can put several windows around a single interior one with any stride,
    // so the phases (s of them) would grow with it.
    s = nint > 1 ? a.sw : 1;
    avail = nint > 0 ? a.iw - (first * a.sw - a.pad_left) : 0;
    plen = nint > 0 ? RoundVec(avail / s + 1 + (a.kw - 1) * a.dw / s + nint_v, esize) : 1;
    // Tap pointers: row taps inside the input (at most ih), column taps of
    // interior windows (all inside: at most iw). Huge kernels that only huge
    // pads make legal never size these.
    row_taps = a.kh < a.ih ? a.kh : a.ih;
    col_taps = nint > 0 ? a.kw : 0;
    const size_t ptr = sizeof(const void*);
    rows = AddPart(&total, size_t(4 * a.oh) * sizeof(int64_t));
    cols = AddPart(&total, size_t(4 * a.ow) * sizeof(int64_t));
    used = AddPart(&total, size_t(a.ih));
    hbuf = AddPart(&total, size_t(a.ih * hstride * esize));
    phases = AddPart(&total, size_t(plen * s * esize));
    src = AddPart(&total, size_t(row_taps > col_taps ? row_taps : col_taps) * ptr);
    col_src = AddPart(&total, size_t(col_taps) * ptr);
    vrow = AddPart(&total, size_t(ow_v * esize));
  }
};

template <class T>
size_t MaxScratch(const Pool2dArgs& a) {
  return MaxLayout(a, int64_t(sizeof(T))).total;
}

// Planes [p0, p1) with `scratch` (MaxScratch bytes, this thread's).
template <class T>
void MaxPlanes(const Pool2dArgs& a, const T* x, T* y, int64_t p0, int64_t p1, uint8_t* scratch) {
  const MaxLayout l(a, int64_t(sizeof(T)));
  const Axis rows = MakeAxis(a.ih, a.oh, a.kh, a.sh, a.dh, a.pad_top, a.pad_bottom,
                             reinterpret_cast<int64_t*>(scratch + l.rows));
  const Axis cols = MakeAxis(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, a.pad_right,
                             reinterpret_cast<int64_t*>(scratch + l.cols));
  // Which input rows some output reads: only those get a column-max row.
  char* const used = reinterpret_cast<char*>(scratch + l.used);
  for (int64_t r = 0; r < a.ih; ++r) used[r] = 0;
  for (int64_t o = 0; o < a.oh; ++o)
    for (int64_t t = rows.lo[o]; t < rows.hi[o]; ++t) used[rows.start[o] + t * a.dh] = 1;
  const int64_t nint = l.nint, nint_v = l.nint_v, ow_v = l.ow_v, hstride = l.hstride;
  const int64_t s = l.s, avail = l.avail, plen = l.plen, col_taps = l.col_taps;
  T* const hbuf = reinterpret_cast<T*>(scratch + l.hbuf);
  T* const phases = reinterpret_cast<T*>(scratch + l.phases);
  const T** const src = reinterpret_cast<const T**>(scratch + l.src);
  // Where each column tap starts in the phases (divisions hoisted out of the
  // loops), and whether some output column has no tap at all.
  const T** const col_src = reinterpret_cast<const T**>(scratch + l.col_src);
  for (int64_t t = 0; t < col_taps; ++t)
    col_src[t] = phases + ((t * a.dw) % s) * plen + (t * a.dw) / s;
  bool empty_cols = false;
  for (int64_t c = 0; c < a.ow; ++c) empty_cols |= cols.lo[c] == cols.hi[c];
  T* __restrict const vrow = reinterpret_cast<T*>(scratch + l.vrow);
  const T lowest = std::numeric_limits<T>::lowest();
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * a.ih * a.iw;
    T* yp = y + p * a.oh * a.ow;
    for (int64_t r = 0; r < a.ih; ++r) {
      if (!used[r]) continue;
      const T* __restrict xr = xp + r * a.iw;
      T* __restrict h = hbuf + r * hstride;
      if (nint > 0) {
        const T* base = xr + cols.start[cols.first];
        T* ph = phases;
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
        Chain<T>(col_src, a.kw, nint_v, h + cols.first);
      }
      // Border outputs after the interior, whose padded loop may run over them.
      for (int64_t o = 0; o < a.ow; ++o) {
        if (o == cols.first && nint > 0) {
          o = cols.last - 1;
          continue;
        }
        const int64_t lo = cols.lo[o], hi = cols.hi[o];
        const int64_t st = cols.start[o];
        if (lo == hi) continue;  // no tap: the output is lowest, set below
        T acc = xr[st + lo * a.dw];
        for (int64_t t = lo + 1; t < hi; ++t) acc = MaxStep(acc, xr[st + t * a.dw]);
        h[o] = acc;
      }
    }
    for (int64_t o = 0; o < a.oh; ++o) {
      T* __restrict yr = yp + o * a.ow;
      const int64_t lo = rows.lo[o], hi = rows.hi[o];
      if (lo == hi) {
        for (int64_t c = 0; c < a.ow; ++c) yr[c] = lowest;
        continue;
      }
      const int64_t st = rows.start[o];
      for (int64_t t = lo; t < hi; ++t) src[t - lo] = hbuf + (st + t * a.dh) * hstride;
      Chain<T>(src, hi - lo, ow_v, vrow);
      for (int64_t c = 0; c < a.ow; ++c) yr[c] = vrow[c];
      if (empty_cols)
        for (int64_t c = 0; c < a.ow; ++c)
          if (cols.lo[c] == cols.hi[c]) yr[c] = lowest;
    }
  }
}

// acc[o] = (acc[o] + src[0][o]) + src[1][o] + ... in tap order, up to 4 taps
// per pass with the sum in a register.
template <int K>
void SumFixed(const float* const* src, int64_t n, double* __restrict acc) {
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

// A thread's scratch for AvgPlanes.
struct AvgLayout {
  int64_t nint = 0;
  size_t rows = 0, cols = 0, acc = 0, phases = 0, src = 0, total = 0;
  explicit AvgLayout(const Pool2dArgs& a) {
    int64_t first = 0, last = 0;
    Interior(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, &first, &last);
    nint = last - first;
    rows = AddPart(&total, size_t(4 * a.oh) * sizeof(int64_t));
    cols = AddPart(&total, size_t(4 * a.ow) * sizeof(int64_t));
    acc = AddPart(&total, size_t(a.ow) * sizeof(double));
    // RowSumInterior splits phases only for strides 2 to 4 (at most avail + 4
    // values); larger strides read the row in place, so the stride, which
    // huge pads leave unbounded, never sizes this part.
    phases = AddPart(&total, size_t(a.iw + 16) * sizeof(float));
    // Column taps of interior windows only (all inside the input: kw <= iw).
    src = AddPart(&total, size_t(nint > 0 ? a.kw : 0) * sizeof(const float*));
  }
};

size_t AvgScratch(const Pool2dArgs& a) {
  return AvgLayout(a).total;
}

void AvgPlanes(const Pool2dArgs& a, const float* x, float* y, int64_t p0, int64_t p1,
               uint8_t* scratch) {
  const AvgLayout l(a);
  const Axis rows = MakeAxis(a.ih, a.oh, a.kh, a.sh, a.dh, a.pad_top, a.pad_bottom,
                             reinterpret_cast<int64_t*>(scratch + l.rows));
  const Axis cols = MakeAxis(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, a.pad_right,
                             reinterpret_cast<int64_t*>(scratch + l.cols));
  const int64_t nint = cols.last - cols.first;
  double* __restrict const acc = reinterpret_cast<double*>(scratch + l.acc);
  float* const phases = reinterpret_cast<float*>(scratch + l.phases);
  const float** const src = reinterpret_cast<const float**>(scratch + l.src);
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
          double* ac = acc + cols.first;
          float* ph = phases;
          if (a.sw == 1)
            RowSumInterior<1>(base, avail, nint, 1, a.kw, a.dw, ph, src, ac);
          else if (a.sw == 2)
            RowSumInterior<2>(base, avail, nint, 2, a.kw, a.dw, ph, src, ac);
          else if (a.sw == 3)
            RowSumInterior<3>(base, avail, nint, 3, a.kw, a.dw, ph, src, ac);
          else if (a.sw == 4)
            RowSumInterior<4>(base, avail, nint, 4, a.kw, a.dw, ph, src, ac);
          else
            RowSumInterior<0>(base, avail, nint, a.sw, a.kw, a.dw, ph, src, ac);
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
  return {MaxPlanes<float>,  MaxPlanes<int8_t>,  MaxPlanes<uint8_t>,  AvgPlanes,
          MaxScratch<float>, MaxScratch<int8_t>, MaxScratch<uint8_t>, AvgScratch};
}

}  // namespace QF_POOL_NS
}  // namespace kernels
}  // namespace qfold
