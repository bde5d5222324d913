// Dispatch and drivers of the element-wise 8-bit quantization kernels: the
// drivers turn per-axis layouts and broadcasts into runs of contiguous
// elements and split large tensors into contiguous chunks between threads
// (element-wise, so the result is the same for any thread count).
#include "kernels/quant_s8.h"

#include <algorithm>
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
