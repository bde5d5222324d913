// Dispatch and drivers of the element-wise 8-bit quantization kernels: the
// drivers turn per-axis layouts and broadcasts into runs of contiguous
// elements and split large tensors into contiguous chunks between threads
// (element-wise, so the result is the same for any thread count).
#include "kernels/quant_s8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const QuantS8Kernels kQuantS8Avx2;
extern const QuantS8Kernels kQuantS8Avx512Core;
extern const QuantS8Kernels kQuantS8Avx512Vbmi;
#endif
#if defined(__aarch64__)
extern const QuantS8Kernels kQuantS8Neon;
#endif

const QuantS8Kernels* QuantS8For(const CpuFeatures& f, const char** variant) {
  const QuantS8Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {  // no dot products here: VNNI brings nothing
    if (f.avx512_core()) {
      k = f.avx512vbmi ? &kQuantS8Avx512Vbmi : &kQuantS8Avx512Core;
      name = f.avx512vbmi ? "avx512vbmi" : "avx512core";
    } else {
      k = &kQuantS8Avx2;
      name = "avx2";
    }
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {  // baseline Advanced SIMD
    k = &kQuantS8Neon;
    name = "neon";
  }
#endif
  if (variant) *variant = name;
  return k;
}

namespace {

// Below this many elements a tensor is not worth splitting between threads:
// at ~0.02-0.15 ns per element the work is then about as short as a hand-off.
constexpr int64_t kMinParallel = 1 << 15;
// Elements per item handed to a thread: a multiple of 64 so only the last
// range has a vector tail.
constexpr int64_t kBlock = 4096;

// Calls fn(begin, end) over contiguous ranges covering [0, n), on the pool's
// threads when n is large enough.
template <class F>
void ForChunks(int64_t n, ThreadPool* pool, const F& fn) {
  if (n < kMinParallel) pool = nullptr;
  ParallelFor(pool, (n + kBlock - 1) / kBlock,
              [&](int64_t b, int64_t e, int) { fn(b * kBlock, std::min(n, e * kBlock)); });
}

// Calls seg(begin, end, offset in period) for the parts of [begin, end) cut
// at multiples of `period`.
template <class F>
void ForPeriods(int64_t begin, int64_t end, int64_t period, F seg) {
  while (begin < end) {
    const int64_t off = begin % period;
    const int64_t len = std::min(period - off, end - begin);
    seg(begin, begin + len, off);
    begin += len;
  }
}

// Per-axis parameters as seen by a kernel: either one (scale, zp) per block
// of `inner` elements, or (when blocks are short) expanded to one per element
// over a period of dim * inner elements, so kernels get long runs.
struct AxisParams {
  bool per_elem = false;
  int64_t period = 0;
  std::vector<float> scale, zpf;
};

AxisParams MakeAxisParams(int64_t dim, int64_t inner, const float* scales, const int32_t* zps,
                          bool per_axis) {
  AxisParams a;
  if (!per_axis || dim == 1) {
    a.period = 0;
    a.scale = {scales[0]};
    a.zpf = {float(zps[0])};
  } else if (inner < 16 && dim * inner <= (1 << 16)) {
    a.per_elem = true;
    a.period = dim * inner;
    a.scale.resize(size_t(a.period));
    a.zpf.resize(size_t(a.period));
    for (int64_t c = 0; c < dim; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        a.scale[size_t(c * inner + k)] = scales[c];
        a.zpf[size_t(c * inner + k)] = float(zps[c]);
      }
  } else {
    a.period = inner;
    a.scale.assign(scales, scales + dim);
    for (int64_t c = 0; c < dim; ++c) a.zpf.push_back(float(zps[c]));
  }
  return a;
}

// Calls run(begin, end, scale*, zpf*, per_elem) for the runs of [begin, end).
template <class F>
void ForAxisRuns(const AxisParams& ap, int64_t dim, int64_t begin, int64_t end, F run) {
  if (ap.period == 0) {
    run(begin, end, ap.scale.data(), ap.zpf.data(), false);
  } else if (ap.per_elem) {
    ForPeriods(begin, end, ap.period, [&](int64_t b, int64_t e, int64_t off) {
      run(b, e, ap.scale.data() + off, ap.zpf.data() + off, true);
    });
  } else {
    ForPeriods(begin, end, ap.period, [&](int64_t b, int64_t e, int64_t) {
      const size_t c = size_t((b / ap.period) % dim);
      run(b, e, &ap.scale[c], &ap.zpf[c], false);
    });
  }
}

}  // namespace

namespace {

using QuantizeFn = decltype(QuantS8Kernels::quantize);
using DequantizeFn = decltype(QuantS8Kernels::dequantize);

bool RunQuantize(QuantizeFn fn, size_t elem, const float* x, void* y, bool is_signed, int32_t lo,
                 int32_t hi, int64_t outer, int64_t dim, int64_t inner, const float* scales,
                 const int32_t* zps, bool per_axis, ThreadPool* pool) {
  if (!fn) return false;
  const int64_t n = outer * dim * inner;
  if (n <= 0) return true;
  const AxisParams ap = MakeAxisParams(dim, inner, scales, zps, per_axis);
  uint8_t* yb = static_cast<uint8_t*>(y);
  ForChunks(n, pool, [&](int64_t begin, int64_t end) {
    ForAxisRuns(ap, dim, begin, end,
                [&](int64_t b, int64_t e, const float* s, const float* z, bool pe) {
                  fn(x + b, yb + b * elem, e - b, s, z, pe, lo, hi, is_signed);
                });
  });
  return true;
}

bool RunDequantize(DequantizeFn fn, size_t elem, const void* x, float* y, bool is_signed,
                   int64_t outer, int64_t dim, int64_t inner, const float* scales,
                   const int32_t* zps, bool per_axis, ThreadPool* pool) {
  if (!fn) return false;
  const int64_t n = outer * dim * inner;
  if (n <= 0) return true;
  const AxisParams ap = MakeAxisParams(dim, inner, scales, zps, per_axis);
  const uint8_t* xb = static_cast<const uint8_t*>(x);
  ForChunks(n, pool, [&](int64_t begin, int64_t end) {
    ForAxisRuns(ap, dim, begin, end,
                [&](int64_t b, int64_t e, const float* s, const float* z, bool pe) {
                  fn(xb + b * elem, y + b, e - b, s, z, pe, is_signed);
                });
  });
  return true;
}

}  // namespace

bool QuantizeF32ToS8(const KernelConfig& kc, const float* x, void* y, bool is_signed, int32_t lo,
                     int32_t hi, int64_t outer, int64_t dim, int64_t inner, const float* scales,
                     const int32_t* zps, bool per_axis, ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunQuantize(k->quantize, 1, x, y, is_signed, lo, hi, outer, dim, inner, scales, zps,
                          per_axis, pool);
}

bool QuantizeF32To16(const KernelConfig& kc, const float* x, void* y, bool is_signed, int32_t lo,
                     int32_t hi, int64_t outer, int64_t dim, int64_t inner, const float* scales,
                     const int32_t* zps, bool per_axis, ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunQuantize(k->quantize16, 2, x, y, is_signed, lo, hi, outer, dim, inner, scales, zps,
                          per_axis, pool);
}

bool DequantizeS8ToF32(const KernelConfig& kc, const void* x, float* y, bool is_signed,
                       int64_t outer, int64_t dim, int64_t inner, const float* scales,
                       const int32_t* zps, bool per_axis, ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunDequantize(k->dequantize, 1, x, y, is_signed, outer, dim, inner, scales, zps,
                            per_axis, pool);
}

bool Dequantize16ToF32(const KernelConfig& kc, const void* x, float* y, bool is_signed,
                       int64_t outer, int64_t dim, int64_t inner, const float* scales,
                       const int32_t* zps, bool per_axis, ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunDequantize(k->dequantize16, 2, x, y, is_signed, outer, dim, inner, scales, zps,
                            per_axis, pool);
}

namespace {

using BinaryFn = decltype(QuantS8Kernels::binary);

bool RunBinary(BinaryFn fn, int64_t elem, const QBinaryS8Params& p, const void* a,
               const std::vector<int64_t>& a_shape, const void* b,
               const std::vector<int64_t>& b_shape, void* y, const std::vector<int64_t>& y_shape,
               ThreadPool* pool) {
  if (!fn) return false;
  const int rank = int(y_shape.size());
  if (int(a_shape.size()) > rank || int(b_shape.size()) > rank) return false;
  int64_t n = 1;
  for (int64_t d : y_shape) n *= d;
  if (n <= 0) return true;
  // Broadcast strides of a and b over y's dims (0 where broadcast), then
  // drop size-1 dims and merge dims that are contiguous for both operands.
  struct Dim {
    int64_t size, sa, sb;
  };
  std::vector<Dim> dims;
  {
    std::vector<Dim> all(static_cast<size_t>(rank));
    int64_t ra = 1, rb = 1;
    for (int i = rank - 1; i >= 0; --i) {
      const int ia = i - (rank - int(a_shape.size())), ib = i - (rank - int(b_shape.size()));
      const int64_t da = ia >= 0 ? a_shape[size_t(ia)] : 1;
      const int64_t db = ib >= 0 ? b_shape[size_t(ib)] : 1;
      if ((da != 1 && da != y_shape[size_t(i)]) || (db != 1 && db != y_shape[size_t(i)]))
        return false;
      all[size_t(i)] = {y_shape[size_t(i)], da == 1 ? 0 : ra, db == 1 ? 0 : rb};
      ra *= da;
      rb *= db;
    }
    for (const Dim& d : all) {
      if (d.size == 1) continue;
      if (!dims.empty()) {
        Dim& o = dims.back();
        if (o.sa == d.sa * d.size && o.sb == d.sb * d.size) {
          o = {o.size * d.size, d.sa, d.sb};
          continue;
        }
      }
      dims.push_back(d);
    }
  }
  if (dims.empty()) dims.push_back({1, 0, 0});
  const Dim in = dims.back();
  dims.pop_back();  // the rest are outer dims
  // The innermost run has stride 0 or 1 in each operand by construction.
  const uint8_t* ab = static_cast<const uint8_t*>(a);
  const uint8_t* bb = static_cast<const uint8_t*>(b);
  uint8_t* yb = static_cast<uint8_t*>(y);
  ForChunks(n, pool, [&](int64_t begin, int64_t end) {
    ForPeriods(begin, end, in.size, [&](int64_t s, int64_t e, int64_t off) {
      int64_t row = s / in.size, oa = off * in.sa, ob = off * in.sb;
      for (int i = int(dims.size()) - 1; i >= 0 && row > 0; --i) {
        const int64_t idx = row % dims[size_t(i)].size;
        row /= dims[size_t(i)].size;
        oa += idx * dims[size_t(i)].sa;
        ob += idx * dims[size_t(i)].sb;
      }
      fn(p, ab + oa * elem, int(in.sa), bb + ob * elem, int(in.sb), yb + s * elem, e - s);
    });
  });
  return true;
}

}  // namespace

bool QBinaryS8(const KernelConfig& kc, const QBinaryS8Params& p, const void* a,
               const std::vector<int64_t>& a_shape, const void* b,
               const std::vector<int64_t>& b_shape, void* y, const std::vector<int64_t>& y_shape,
               ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunBinary(k->binary, 1, p, a, a_shape, b, b_shape, y, y_shape, pool);
}

bool QBinary16(const KernelConfig& kc, const QBinaryS8Params& p, const void* a,
               const std::vector<int64_t>& a_shape, const void* b,
               const std::vector<int64_t>& b_shape, void* y, const std::vector<int64_t>& y_shape,
               ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  return k && RunBinary(k->binary16, 2, p, a, a_shape, b, b_shape, y, y_shape, pool);
}

bool LookupU8(const KernelConfig& kc, const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n,
              ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  if (!k) return false;
  ForChunks(n, pool, [&](int64_t begin, int64_t end) {
    k->lookup(x + begin, table, y + begin, end - begin);
  });
  return true;
}

namespace {

// max over lines of (a + b * m), lines added in increasing slope b: the
// upper envelope (convex hull trick), queried by binary search.
class MaxEnvelope {
 public:
  void Add(int64_t a, int64_t b) {
    if (!b_.empty() && b_.back() == b) {
      if (a_.back() >= a) return;
      a_.pop_back(), b_.pop_back();
    }
    while (a_.size() >= 2 && Useless(a_.size() - 2, a_.size() - 1, a, b))
      a_.pop_back(), b_.pop_back();
    a_.push_back(a), b_.push_back(b);
  }
  int64_t At(int64_t m) const {
    size_t lo = 0, hi = a_.size() - 1;  // the best line: values rise, then fall
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (a_[mid] + b_[mid] * m <= a_[mid + 1] + b_[mid + 1] * m)
        lo = mid + 1;
      else
        hi = mid;
    }
    return a_[lo] + b_[lo] * m;
  }

 private:
  // Line j never wins once i (smaller slope) and the new line k exist.
  bool Useless(size_t i, size_t j, int64_t ak, int64_t bk) const {
    return (__int128)(ak - a_[i]) * (b_[j] - b_[i]) >= (__int128)(a_[j] - a_[i]) * (bk - b_[i]);
  }
  std::vector<int64_t> a_, b_;
};

}  // namespace

// See quant_s8.h; t holds the ys. Each input gives bounds on v = x * mult + add:
// an entry strictly inside (lo, hi) needs t << shift <= v < (t + 1) <<
// shift, one at lo only v < (lo + 1) << shift, one at hi only v >= hi <<
// shift. For a fixed mult, add ranges over [max(lower - x * mult),
// min(upper - x * mult)]: the two envelopes make the width, concave in
// mult, cheap to evaluate, and a ternary search finds the widest.
bool FitClampedLine(const int32_t* xs, const int32_t* t, int n, int32_t* mult, int32_t* add,
                    int32_t* shift, int32_t* lo, int32_t* hi) {
  int32_t ymin = t[0], ymax = t[0];
  for (int i = 1; i < n; ++i) ymin = std::min(ymin, t[i]), ymax = std::max(ymax, t[i]);
  *lo = ymin;
  *hi = ymax;
  if (ymin == ymax) {
    *mult = 0, *add = ymin, *shift = 0;
    return true;
  }
  bool up = true, down = true;
  for (int i = 1; i < n; ++i) up &= t[i] >= t[i - 1], down &= t[i] <= t[i - 1];
  if (!up && !down) return false;
  // A bound on the line's slope (a step of d between neighbours allows up
  // to d + 1); the shift keeps |x * mult| + |add| below 2^30 for |x| <= 255.
  const int32_t xmax = 255;
  double slope = 0;
  for (int i = 1; i < n; ++i)
    if (t[i] != t[i - 1])
      slope = std::max(slope, (std::abs(t[i] - t[i - 1]) + 1.0) / double(xs[i] - xs[i - 1]));
  const double span = 2 * slope * xmax + std::max(std::abs(ymin), std::abs(ymax)) + 2;
  int s = 0;
  while (s < 24 && span * double(int64_t(1) << (s + 1)) < double(int64_t(1) << 30)) ++s;
  const int64_t one = int64_t(1) << s;
  // lower(m) = max(lower_i - x_i m): slopes -x_i rise as i falls;
  // -upper(m) = max(-upper_i + x_i m): slopes x_i rise with i.
  MaxEnvelope low, neg_up;
  for (int i = n - 1; i >= 0; --i)
    if (t[i] != ymin) low.Add(int64_t(t[i]) * one, -int64_t(xs[i]));
  for (int i = 0; i < n; ++i)
    if (t[i] != ymax) neg_up.Add(-((int64_t(t[i]) + 1) * one - 1), int64_t(xs[i]));
  auto width = [&](int64_t m) { return -neg_up.At(m) - low.At(m); };
  const int64_t mbound = int64_t(std::ceil(slope * double(one))) + 1;
  int64_t m0 = up ? 0 : -mbound, m1 = up ? mbound : 0;
  while (m1 - m0 > 2) {
    const int64_t a = m0 + (m1 - m0) / 3, b = m1 - (m1 - m0) / 3;
    if (width(a) < width(b))
      m0 = a + 1;
    else
      m1 = b;
  }
  int64_t best = m0;
  for (int64_t m = m0 + 1; m <= m1; ++m)
    if (width(m) > width(best)) best = m;
  if (width(best) < 0) return false;
  const int64_t a = low.At(best);
  if (std::abs(best) * xmax + std::abs(a) >= (int64_t(1) << 31)) return false;
  *mult = int32_t(best), *add = int32_t(a), *shift = s;
  // The kernels' arithmetic on every input.
  for (int i = 0; i < n; ++i) {
    const int32_t v = (xs[i] * *mult + *add) >> s;
    if (std::min(std::max(v, ymin), ymax) != t[i]) return false;
  }
  return true;
}

bool HasLineChannels(const KernelConfig& kc) {
  return kc.quant_s8 && kc.quant_s8->line_channels;
}

bool LineChannelsU8(const KernelConfig& kc, const uint8_t* x, uint8_t* y, int64_t pixels,
                    const ChannelLines& lines, ThreadPool* pool) {
  if (!HasLineChannels(kc)) return false;
  const int64_t channels = lines.channels;
  const int64_t grain = std::max<int64_t>(1, kBlock / std::max<int64_t>(1, channels));
  if (pixels * channels < kMinParallel) pool = nullptr;
  ParallelFor(pool, (pixels + grain - 1) / grain, [&](int64_t b, int64_t e, int) {
    const int64_t p0 = b * grain, p1 = std::min(pixels, e * grain);
    kc.quant_s8->line_channels(x + p0 * channels, y + p0 * channels, p1 - p0, lines);
  });
  return true;
}

bool LookupChannelsU8(const KernelConfig& kc, const uint8_t* x, const uint8_t* table, uint8_t* y,
                      int64_t pixels, int64_t channels, ThreadPool* pool) {
  const QuantS8Kernels* k = kc.quant_s8;
  if (!k || !k->lookup_channels) return false;
  // Blocks of 64 channels (16 KB of tables stay in L1) over the pixels of a
  // thread's range; each byte's result is its own, so any split gives the
  // same bytes.
  constexpr int64_t kChannelBlock = 64;
  const int64_t grain = std::max<int64_t>(1, kBlock / std::max<int64_t>(1, channels));
  if (pixels * channels < kMinParallel) pool = nullptr;
  ParallelFor(pool, (pixels + grain - 1) / grain, [&](int64_t b, int64_t e, int) {
    const int64_t p0 = b * grain, p1 = std::min(pixels, e * grain);
    for (int64_t c0 = 0; c0 < channels; c0 += kChannelBlock)
      k->lookup_channels(x + p0 * channels, table, y + p0 * channels, p1 - p0, channels, c0,
                         std::min(channels, c0 + kChannelBlock));
  });
  return true;
}

}  // namespace kernels
}  // namespace qfold
