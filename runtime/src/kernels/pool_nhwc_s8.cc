// Channels-last pooling driver (pool_nhwc_s8.h): per output row an
// indirection buffer of tap pointers (taps outside the input point at a row
// of fill bytes), the divisors of the averages, the split of output rows
// (global pool: images and channel slices) between threads, and the
// portable row kernels used at the levels without hand-written ones (NEON:
// plain loops across channels, which the compiler vectorizes).
#include "kernels/pool_nhwc_s8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/conv_f32_nhwc.h"
#include "kernels/conv_f32_nhwc.h"  // Bf16FromFloat, FloatFromBf16
#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const PoolNhwcKernels kPoolNhwcAvx2;
extern const PoolNhwcKernels kPoolNhwcAvx512Vnni;
#elif defined(__aarch64__)
extern const PoolNhwcKernels kPoolNhwcNeon;
#endif

namespace {

// int32 sums of up to this many taps cannot overflow (255 * 2^23 < 2^31).
constexpr int64_t kMaxTaps = int64_t(1) << 23;
constexpr int64_t kMaxRowTaps = int64_t(1) << 22;

template <class T>
void GenericMax(const PoolNhwcRowArgs& a) {
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t off = a.xoff + px * a.pix_step;
    T* y = reinterpret_cast<T*>(a.y + px * a.ystride);
    const T* x0 = reinterpret_cast<const T*>(t[0] + off);
    for (int64_t i = 0; i < a.c; ++i) y[i] = x0[i];
    for (int64_t k = 1; k < a.ntaps; ++k) {
      const T* xk = reinterpret_cast<const T*>(t[k] + off);
      for (int64_t i = 0; i < a.c; ++i) y[i] = xk[i] > y[i] ? xk[i] : y[i];
    }
  }
}

// float(sum) * mult, then RoundAddSaturate (ops/quant_util.h), as
// AverageToQ in ops/quant_pool.cc.
inline uint8_t AverageScalar(int32_t sum, float mult, const PoolNhwcRowArgs& a) {
  const float v = float(sum) * mult;
  if (std::isnan(v)) return uint8_t(std::min(std::max(a.yzp, a.lo), a.hi));
  const float r = std::nearbyint(v);
  if (r <= float(a.lo - a.yzp)) return uint8_t(a.lo);
  if (r >= float(a.hi - a.yzp)) return uint8_t(a.hi);
  return uint8_t(int32_t(r) + a.yzp);
}

template <class T>
void GenericAvg(const PoolNhwcRowArgs& a) {
  int32_t* s = a.scratch;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t off = a.xoff + px * a.pix_step;
    for (int64_t i = 0; i < a.c; ++i) s[i] = a.corr;
    for (int64_t k = 0; k < a.ntaps; ++k) {
      const T* xk = reinterpret_cast<const T*>(t[k] + off);
      for (int64_t i = 0; i < a.c; ++i) s[i] += int32_t(xk[i]);
    }
    uint8_t* y = a.y + px * a.ystride;
    for (int64_t i = 0; i < a.c; ++i) y[i] = AverageScalar(s[i], a.mult[px], a);
  }
}

// Float data of one storage type: float32, or bfloat16 (bf16 mode's stored
// activations) widened exactly and rounded back to nearest even.
struct F32Elem {
  using T = float;
  static float Load(T v) { return v; }
  static T Store(float v) { return v; }
};
struct Bf16Elem {
  using T = uint16_t;
  static float Load(T v) { return FloatFromBf16(v); }
  static T Store(float v) { return Bf16FromFloat(v); }
};
// The reference's float max step on the loaded values (a later tap replaces
// the maximum only when it is larger, or NaN); the chosen input is copied as
// stored.
template <class E>
void GenericMaxFloat(const PoolNhwcRowArgs& a) {
  using T = typename E::T;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t off = a.xoff + px * a.pix_step;
    T* y = reinterpret_cast<T*>(a.y + px * a.ystride);
    const T* x0 = reinterpret_cast<const T*>(t[0] + off);
    for (int64_t i = 0; i < a.c; ++i) y[i] = x0[i];
    for (int64_t k = 1; k < a.ntaps; ++k) {
      const T* xk = reinterpret_cast<const T*>(t[k] + off);
      for (int64_t i = 0; i < a.c; ++i) {
        const float v = E::Load(xk[i]);
        if (v > E::Load(y[i]) || v != v) y[i] = xk[i];
      }
    }
  }
}

// Sums in double, as the reference; the average rounded to float, then stored.
template <class E>
void GenericAvgFloat(const PoolNhwcRowArgs& a) {
  using T = typename E::T;
  constexpr int64_t kBlock = 16;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    const int64_t off = a.xoff + px * a.pix_step;
    T* y = reinterpret_cast<T*>(a.y + px * a.ystride);
    const double div = double(a.div[px]);
    for (int64_t c0 = 0; c0 < a.c; c0 += kBlock) {
      const int64_t n = std::min(kBlock, a.c - c0);
      double s[kBlock] = {};
      for (int64_t k = 0; k < a.ntaps; ++k) {
        const T* xk = reinterpret_cast<const T*>(t[k] + off) + c0;
        for (int64_t i = 0; i < n; ++i) s[i] += double(E::Load(xk[i]));
      }
      for (int64_t i = 0; i < n; ++i) y[c0 + i] = E::Store(div > 0 ? float(s[i] / div) : 0.f);
    }
  }
}

constexpr PoolNhwcKernels kPoolNhwcGeneric = {GenericMax<int8_t>,       GenericMax<uint8_t>,
                                              GenericAvg<int8_t>,       GenericAvg<uint8_t>,
                                              GenericMaxFloat<F32Elem>, GenericAvgFloat<F32Elem>};

bool ValidArgs(const PoolNhwcArgs& a) {
  return a.n >= 0 && a.ih >= 0 && a.iw >= 0 && a.c >= 0 && a.oh >= 0 && a.ow >= 0 && a.kh >= 1 &&
         a.kw >= 1 && a.sh >= 1 && a.sw >= 1 && a.dh >= 1 && a.dw >= 1 && a.pad_top >= 0 &&
         a.pad_left >= 0 && a.pad_bottom >= 0 && a.pad_right >= 0 && a.kh <= kMaxTaps &&
         a.kw <= kMaxTaps / a.kh &&
         // One output row's tap pointers (per thread): huge kernels that only
         // huge pads make legal take the reference kernel instead.
         a.ow <= kMaxRowTaps / (a.kh * a.kw);
}

// Taps of output o along one axis inside the input, and inside input plus
// padding (positions past in + pad_end never count, as in the reference).
void AxisCounts(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad_begin,
                int64_t pad_end, int64_t* inside, int64_t* padded) {
  for (int64_t o = 0; o < out; ++o) {
    inside[o] = 0;
    padded[o] = 0;
    for (int64_t t = 0; t < k; ++t) {
      const int64_t pos = o * s - pad_begin + t * d;
      if (pos >= 0 && pos < in) ++inside[o];
      if (pos < in + pad_end) ++padded[o];
    }
  }
}

ThreadPool* WindowedPool(const PoolNhwcArgs& a, int64_t esize) {
  return a.n * a.oh * a.ow * a.c * esize * a.kh * a.kw < (int64_t(1) << 16) ? nullptr : a.pool;
}

// A windowed call's scratch: the per-axis tap counts and the fill row, read
// by every thread, then per thread one output row's tap pointers, divisors,
// multipliers and the portable kernels' sums.
struct WindowedLayout {
  size_t rin, rpad, cin, cpad, fill, slots;  // offsets in the region
  size_t ind, div, mult, sums, slice;        // offsets in a thread's slice
  size_t total;
  WindowedLayout(const PoolNhwcArgs& a, int64_t esize, int threads) {
    ScratchLayout l;
    rin = l.Add(size_t(a.oh) * sizeof(int64_t));
    rpad = l.Add(size_t(a.oh) * sizeof(int64_t));
    cin = l.Add(size_t(a.ow) * sizeof(int64_t));
    cpad = l.Add(size_t(a.ow) * sizeof(int64_t));
    fill = l.Add(size_t(a.c * esize));
    ScratchLayout t;
    ind = t.Add(size_t(a.ow * a.kh * a.kw) * sizeof(const uint8_t*));
    div = t.Add(size_t(a.ow) * sizeof(float));
    mult = t.Add(size_t(a.ow) * sizeof(float));
    sums = t.Add(size_t(a.c) * sizeof(int32_t));
    slice = t.total();
    slots = l.Add(slice * size_t(threads));
    total = l.total();
  }
};

// Windowed pools: each output row of each image through `fn`; `avg`
// fills the divisors (count_include_pad per a). Elements of `esize` bytes;
// `fill` is one element's bytes. `empty` (max only, one element's bytes): the value of windows
// without taps inside the input, set after the run (such windows exist only
// with pads of a whole kernel; the reference gives lowest() for max).
bool RunWindowed(const PoolNhwcArgs& a, int64_t esize, const uint8_t* x, uint8_t* y,
                 const void* fill, bool avg, PoolNhwcRowArgs base,
                 void (*fn)(const PoolNhwcRowArgs&), const void* empty = nullptr) {
  if (a.n * a.oh * a.ow * a.c == 0) return true;
  const int64_t ntaps = a.kh * a.kw, c = a.c, pixel_bytes = c * esize;
  ThreadPool* pool = WindowedPool(a, esize);
  const WindowedLayout lay(a, esize, NumThreads(pool));
  const ScratchRegion region(a.scratch, lay.total);
  int64_t* const rin = region.at<int64_t>(lay.rin);
  int64_t* const rpad = region.at<int64_t>(lay.rpad);
  int64_t* const cin = region.at<int64_t>(lay.cin);
  int64_t* const cpad = region.at<int64_t>(lay.cpad);
  AxisCounts(a.ih, a.oh, a.kh, a.sh, a.dh, a.pad_top, a.pad_bottom, rin, rpad);
  AxisCounts(a.iw, a.ow, a.kw, a.sw, a.dw, a.pad_left, a.pad_right, cin, cpad);
  uint8_t* const fill_row = region.at<uint8_t>(lay.fill);
  for (int64_t i = 0; i < c; ++i) std::memcpy(fill_row + i * esize, fill, size_t(esize));
  // Output columns [in0, in1) have every tap column inside the input.
  const int64_t in0 = std::min(a.ow, (a.pad_left + a.sw - 1) / a.sw);
  const int64_t last = a.iw - 1 - (a.kw - 1) * a.dw + a.pad_left;
  const int64_t in1 = std::max(in0, last < 0 ? 0 : std::min(a.ow, last / a.sw + 1));
  const int64_t rows = a.n * a.oh;
  auto work = [&](int64_t r0, int64_t r1, int slot) {
    uint8_t* const mine = region.at<uint8_t>(lay.slots + size_t(slot) * lay.slice);
    const uint8_t** const ind = reinterpret_cast<const uint8_t**>(mine + lay.ind);
    float* const div = reinterpret_cast<float*>(mine + lay.div);
    float* const mult = reinterpret_cast<float*>(mine + lay.mult);
    PoolNhwcRowArgs r = base;
    r.ntaps = ntaps;
    r.c = c;
    r.xoff = 0;
    r.ystride = pixel_bytes;
    r.scratch = reinterpret_cast<int32_t*>(mine + lay.sums);
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t b = row / a.oh, oy = row % a.oh;
      if (avg)
        for (int64_t ox = 0; ox < a.ow; ++ox) {
          const int64_t count = a.count_include_pad ? rpad[oy] * cpad[ox] : rin[oy] * cin[ox];
          div[ox] = float(count);
          mult[ox] = AverageMultiplier(base.x_scale, count, base.y_scale);
        }
      // Fills the taps of pixels [ox0, ox1) and runs them (or only fills).
      auto pixels = [&](int64_t ox0, int64_t ox1, bool run) {
        const uint8_t** p = ind;
        for (int64_t ox = ox0; ox < ox1; ++ox)
          for (int64_t ky = 0; ky < a.kh; ++ky) {
            const int64_t iy = oy * a.sh - a.pad_top + ky * a.dh;
            const bool row_in = iy >= 0 && iy < a.ih;
            const uint8_t* xr = row_in ? x + (b * a.ih + iy) * a.iw * pixel_bytes : nullptr;
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t ix = ox * a.sw - a.pad_left + kx * a.dw;
              *p++ = row_in && ix >= 0 && ix < a.iw ? xr + ix * pixel_bytes : fill_row;
            }
          }
        r.taps = ind;
        r.tap_stride = ntaps;
        r.pix_step = 0;
        r.npix = ox1 - ox0;
        r.div = div + ox0;
        r.mult = mult + ox0;
        r.y = y + (row * a.ow + ox0) * pixel_bytes;
        if (run && ox1 > ox0) fn(r);
      };
      const int64_t iy0 = oy * a.sh - a.pad_top;
      if (iy0 >= 0 && iy0 + (a.kh - 1) * a.dh < a.ih && in0 < in1) {
        // Interior pixels: the taps of the first, shifted by sw pixels per output.
        pixels(0, in0, true);
        pixels(in0, in0 + 1, false);
        r.tap_stride = 0;
        r.pix_step = a.sw * pixel_bytes;
        r.npix = in1 - in0;
        fn(r);
        pixels(in1, a.ow, true);
      } else {
        pixels(0, a.ow, true);
      }
    }
  };
  ParallelFor(pool, rows, work);
  if (empty) {  // `esize` bytes, repeated over each such pixel's channels
    for (int64_t b = 0; b < a.n; ++b)
      for (int64_t oy = 0; oy < a.oh; ++oy)
        for (int64_t ox = 0; ox < a.ow; ++ox)
          if (rin[oy] == 0 || cin[ox] == 0) {
            uint8_t* py = y + ((b * a.oh + oy) * a.ow + ox) * pixel_bytes;
            for (int64_t i = 0; i < c; ++i) std::memcpy(py + i * esize, empty, size_t(esize));
          }
  }
  return true;
}

PoolNhwcRowArgs AvgBase(const QPoolParams& q, int64_t ntaps) {
  PoolNhwcRowArgs r;
  // sum over every tap of x (outside taps read x_zp) minus ntaps * x_zp.
  r.corr = int32_t(-ntaps * int64_t(q.x_zp));
  r.x_scale = q.x_scale;
  r.y_scale = q.y_scale;
  r.yzp = q.y_zp;
  r.lo = q.lo;
  r.hi = q.hi;
  return r;
}

// The global average's work items: (image, slice of channels); a slice is a
// whole number of 64-byte vectors so only the last one has a tail.
constexpr int64_t kSlice = 256;

bool GlobalCovered(const KernelConfig& kc, const PoolNhwcArgs& a) {
  return kc.pool_nhwc_s8 && a.n >= 0 && a.ih >= 0 && a.iw >= 0 && a.c >= 0 &&
         a.ih * a.iw <= kMaxTaps;
}

ThreadPool* GlobalPool(const PoolNhwcArgs& a) {
  return a.n * a.ih * a.iw * a.c < (int64_t(1) << 16) ? nullptr : a.pool;
}

// Per thread: an image's pixel pointers and the portable kernels' sums.
struct GlobalLayout {
  size_t ind, sums, slice;
  explicit GlobalLayout(const PoolNhwcArgs& a) {
    ScratchLayout t;
    ind = t.Add(size_t(a.ih * a.iw) * sizeof(const uint8_t*));
    sums = t.Add(size_t(std::min(a.c, kSlice)) * sizeof(int32_t));
    slice = t.total();
  }
};

}  // namespace

bool PoolNhwcCovers(const KernelConfig& kc, const PoolNhwcArgs& a) {
  return kc.pool_nhwc_s8 && ValidArgs(a);
}

size_t PoolNhwcScratch(const KernelConfig& kc, const PoolNhwcArgs& a, int64_t esize) {
  if (!kc.pool_nhwc_s8 || !ValidArgs(a) || a.n * a.oh * a.ow * a.c == 0) return 0;
  return WindowedLayout(a, esize, NumThreads(WindowedPool(a, esize))).total;
}

size_t QGlobalAvgPoolNhwcScratch(const KernelConfig& kc, const PoolNhwcArgs& a) {
  if (!GlobalCovered(kc, a) || a.n * a.c == 0) return 0;
  return GlobalLayout(a).slice * size_t(NumThreads(GlobalPool(a)));
}

const PoolNhwcKernels* PoolNhwcFor(const CpuFeatures& f, const char** variant) {
  const PoolNhwcKernels* k = nullptr;
  const char* name = nullptr;
  if (HighestIsa(f) != Isa::kReference) {
    k = &kPoolNhwcGeneric;  // portable loops the compiler vectorizes (NEON)
    name = "generic";
  }
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    const bool vnni512 = f.avx512_core() && f.avx512vnni;
    k = vnni512 ? &kPoolNhwcAvx512Vnni : &kPoolNhwcAvx2;
    name = vnni512 ? "avx512vnni" : "avx2";
  }
#elif defined(__aarch64__)
  if (f.asimd) {
    k = &kPoolNhwcNeon;
    name = "neon";
  }
#endif
  if (variant) *variant = name;
  return k;
}

bool MaxPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, bool is_signed, const uint8_t* x,
                   uint8_t* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  // The lowest value of the dtype: max with it changes nothing, and a window
  // without taps inside gives it, as the reference does.
  const uint8_t lowest = is_signed ? uint8_t(0x80) : uint8_t(0);
  return RunWindowed(a, 1, x, y, &lowest, /*avg=*/false, PoolNhwcRowArgs(),
                     is_signed ? k->max_s8 : k->max_u8);
}

bool MaxPoolNhwc16(const KernelConfig& kc, const PoolNhwcArgs& a, bool is_signed, const uint16_t* x,
                   uint16_t* y) {
  if (!kc.pool_nhwc_s8 || !ValidArgs(a)) return false;
  // The portable row kernel: a max over a pixel's contiguous channels, which
  // the compiler vectorizes; no SIMD level has a 16-bit one.
  const uint16_t lowest = is_signed ? uint16_t(0x8000) : uint16_t(0);
  return RunWindowed(a, 2, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                     &lowest, /*avg=*/false, PoolNhwcRowArgs(),
                     is_signed ? GenericMax<int16_t> : GenericMax<uint16_t>);
}

bool QAvgPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, const QPoolParams& q,
                    bool is_signed, const uint8_t* x, uint8_t* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  const uint8_t zp = uint8_t(q.x_zp);
  return RunWindowed(a, 1, x, y, &zp, /*avg=*/true, AvgBase(q, a.kh * a.kw),
                     is_signed ? k->avg_s8 : k->avg_u8);
}

bool MaxPoolNhwcF32(const KernelConfig& kc, const PoolNhwcArgs& a, const float* x, float* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  // -inf never replaces the running maximum (taps outside the input skip).
  const float fill = -std::numeric_limits<float>::infinity();
  // A window without taps inside the input: lowest(), as in the reference
  // (the average's row kernels write its 0 themselves).
  const float lowest = std::numeric_limits<float>::lowest();
  return RunWindowed(a, 4, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                     &fill, /*avg=*/false, PoolNhwcRowArgs(), k->max_f32, &lowest);
}

bool MaxPoolNhwcBf16(const KernelConfig& kc, const PoolNhwcArgs& a, const uint16_t* x,
                     uint16_t* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  const uint16_t fill = 0xff80;  // -inf
  // An empty window: MaxPoolNhwcF32's lowest(), rounded to bf16 as a reader
  // of float y would round it (to nearest even: -inf).
  const uint16_t empty = 0xff80;
  return RunWindowed(a, 2, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                     &fill, /*avg=*/false, PoolNhwcRowArgs(),
                     k->max_bf16 ? k->max_bf16 : GenericMaxFloat<Bf16Elem>, &empty);
}

bool AvgPoolNhwcBf16(const KernelConfig& kc, const PoolNhwcArgs& a, const uint16_t* x,
                     uint16_t* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  const uint16_t fill = 0;  // +0.0
  return RunWindowed(a, 2, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                     &fill, /*avg=*/true, PoolNhwcRowArgs(),
                     k->avg_bf16 ? k->avg_bf16 : GenericAvgFloat<Bf16Elem>);
}

bool AvgPoolNhwcF32(const KernelConfig& kc, const PoolNhwcArgs& a, const float* x, float* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!k || !ValidArgs(a)) return false;
  // + 0.0 leaves a double sum that starts at +0.0 unchanged.
  const float fill = 0.f;
  // The row kernels write 0 where the divisor is 0 (no tap counted).
  return RunWindowed(a, 4, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                     &fill, /*avg=*/true, PoolNhwcRowArgs(), k->avg_f32);
}

bool QGlobalAvgPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, const QPoolParams& q,
                          bool is_signed, const uint8_t* x, uint8_t* y) {
  const PoolNhwcKernels* k = kc.pool_nhwc_s8;
  if (!GlobalCovered(kc, a)) return false;
  if (a.n * a.c == 0) return true;
  const int64_t npix = a.ih * a.iw, c = a.c;
  const int64_t slices = (c + kSlice - 1) / kSlice, items = a.n * slices;
  ThreadPool* pool = GlobalPool(a);
  const GlobalLayout lay(a);
  const ScratchRegion region(a.scratch, lay.slice * size_t(NumThreads(pool)));
  const float div = float(npix), mult = AverageMultiplier(q.x_scale, npix, q.y_scale);
  void (*fn)(const PoolNhwcRowArgs&) = is_signed ? k->avg_s8 : k->avg_u8;
  auto work = [&](int64_t i0, int64_t i1, int slot) {
    uint8_t* const mine = region.at<uint8_t>(size_t(slot) * lay.slice);
    const uint8_t** const ind = reinterpret_cast<const uint8_t**>(mine + lay.ind);
    PoolNhwcRowArgs r = AvgBase(q, npix);
    r.taps = ind;
    r.tap_stride = npix;
    r.ntaps = npix;
    r.npix = 1;
    r.div = &div;
    r.mult = &mult;
    r.scratch = reinterpret_cast<int32_t*>(mine + lay.sums);
    int64_t image = -1;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / slices, c0 = i % slices * kSlice;
      if (b != image) {
        for (int64_t p = 0; p < npix; ++p) ind[p] = x + (b * npix + p) * c;
        image = b;
      }
      r.c = std::min(kSlice, c - c0);
      r.xoff = c0;
      r.y = y + b * c + c0;
      r.ystride = c;
      fn(r);
    }
  };
  ParallelFor(pool, items, work);
  return true;
}

}  // namespace kernels
}  // namespace qfold
