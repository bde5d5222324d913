// Channels-last pooling: 8-bit MaxPool, QLinearAveragePool and
// QLinearGlobalAveragePool, float32 MaxPool and AveragePool, on
// x [N, ih, iw, C] -> y [N, oh, ow, C] (1-D: ih = oh = kh = 1), vectorized
// across channels. Bit-identical to the reference ops (ops/pool.cc,
// ops/quant_pool.cc). Float: MaxPool keeps the first maximum in row-major tap
// order, a NaN tap replacing it (the reference's "v > acc || isnan(v)"),
// AveragePool adds the taps in row-major order into a double and divides in
// double, as the reference does. 8-bit: MaxPool keeps the maximum
// of the taps inside the input (a window with none gives the dtype's lowest
// value); the average pools compute
//   y = saturate(nearbyint(float(sum(x - x_zp)) * m) + y_zp),
//   m = AverageMultiplier(x_scale, count, y_scale)
// count being the taps inside the input, or inside input plus pads
// (pad_bottom/pad_right, which with ceil_mode may be smaller than the
// window's overhang) with count_include_pad.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h

struct PoolNhwcArgs {
  int64_t n = 0, ih = 1, iw = 0, c = 0, oh = 1, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // average pool only
  ThreadPool* pool = nullptr;      // null: the calling thread only
  ScratchSpan scratch;             // sized by PoolNhwcScratch / QGlobalAvgPoolNhwcScratch
};

struct QPoolParams {
  float x_scale = 1, y_scale = 1;
  int32_t x_zp = 0, y_zp = 0;
  int32_t lo = 0, hi = 255;  // the output dtype's range
};

// The 8-bit average's multiplier: x_scale / (count * y_scale) in double,
// rounded to float once (0 for count 0). One product per output, like a
// convolution's requantization; the two float divisions it replaced
// ((x_scale * sum) / count) / y_scale, rounded three times, bound the
// kernels (vdivps) and were no more exact.
inline float AverageMultiplier(float x_scale, int64_t count, float y_scale) {
  return count > 0 ? float(double(x_scale) / (double(count) * double(y_scale))) : 0.f;
}

// is_signed: the bytes are int8 (else uint8). Each returns false when the
// case is not covered (the op then runs its reference kernel).
bool MaxPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, bool is_signed, const uint8_t* x,
                   uint8_t* y);
bool QAvgPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, const QPoolParams& q,
                    bool is_signed, const uint8_t* x, uint8_t* y);
// Global average over the ih * iw pixels of each image: y is [N, 1, 1, C].
// MaxPool of 16-bit codes (int16 when is_signed, else uint16; a16 models).
bool MaxPoolNhwc16(const KernelConfig& kc, const PoolNhwcArgs& a, bool is_signed, const uint16_t* x,
                   uint16_t* y);
// Float32 (the same geometry rules; a window without taps inside the input
// gives lowest() for max and 0 for the average, as the reference does).
bool MaxPoolNhwcF32(const KernelConfig& kc, const PoolNhwcArgs& a, const float* x, float* y);
// bfloat16 x and y (bf16 mode's stored activations): each output is one of
// its window's inputs, chosen as MaxPoolNhwcF32 chooses among their floats.
bool MaxPoolNhwcBf16(const KernelConfig& kc, const PoolNhwcArgs& a, const uint16_t* x, uint16_t* y);
bool AvgPoolNhwcF32(const KernelConfig& kc, const PoolNhwcArgs& a, const float* x, float* y);
// bfloat16 x and y: AvgPoolNhwcF32 on the widened inputs, each output rounded
// to bf16 (to nearest even), as a bf16 reader of its float output would.
bool AvgPoolNhwcBf16(const KernelConfig& kc, const PoolNhwcArgs& a, const uint16_t* x, uint16_t* y);
bool QGlobalAvgPoolNhwcS8(const KernelConfig& kc, const PoolNhwcArgs& a, const QPoolParams& q,
                          bool is_signed, const uint8_t* x, uint8_t* y);
// The scratch bytes the windowed pools (elements of `esize` bytes: 1, 2 or 4)
// and the global average use for `a` (tap pointers, divisors, counts); 0 when
// the kernels do not cover the call.
size_t PoolNhwcScratch(const KernelConfig& kc, const PoolNhwcArgs& a, int64_t esize);
// Whether MaxPoolNhwcS8/MaxPoolNhwc16/MaxPoolNhwcF32/AvgPoolNhwcF32 take `a`
// (they return false exactly when this is false).
bool PoolNhwcCovers(const KernelConfig& kc, const PoolNhwcArgs& a);
size_t QGlobalAvgPoolNhwcScratch(const KernelConfig& kc, const PoolNhwcArgs& a);

// ---- Internal: the per-ISA row kernels ----------------------------------
// Every output pixel reads ntaps pointers (taps outside the input point at a
// row of fill values: the dtype's lowest value for 8-bit max, -inf for float
// max, x_zp for the 8-bit averages, +0.0 for the float average, so no tap is
// skipped and every tap is a full vector load). Offsets and strides are in
// bytes, channel counts in elements.

struct PoolNhwcRowArgs {
  // Pixel p reads taps[p * tap_stride + i] + p * pix_step (tap_stride ntaps
  // with a buffer per pixel, 0 for one set of taps shifted along the row).
  const uint8_t* const* taps = nullptr;
  int64_t tap_stride = 0, pix_step = 0;
  int64_t ntaps = 0, npix = 0;
  int64_t c = 0;         // channels to compute, from byte xoff of each tap
  int64_t xoff = 0;      // byte offset of the first channel, added to every tap
  uint8_t* y = nullptr;  // output of pixel p at y + p * ystride (channel xoff)
  int64_t ystride = 0;
  // Averages only.
  const float* div = nullptr;      // per pixel: the divisor (count; float pools)
  const float* mult = nullptr;     // per pixel: AverageMultiplier (8-bit pools)
  int32_t corr = 0;                // -ntaps * x_zp: sum(x) + corr = sum(x - x_zp)
  float x_scale = 1, y_scale = 1;  // for the driver's multipliers
  int32_t yzp = 0, lo = 0, hi = 0;
  int32_t* scratch = nullptr;  // c int32 (portable kernels)
};

struct PoolNhwcKernels {
  void (*max_s8)(const PoolNhwcRowArgs&);
  void (*max_u8)(const PoolNhwcRowArgs&);
  void (*avg_s8)(const PoolNhwcRowArgs&);
  void (*avg_u8)(const PoolNhwcRowArgs&);
  void (*max_f32)(const PoolNhwcRowArgs&);
  void (*avg_f32)(const PoolNhwcRowArgs&);  // div: the count; sums in double
  // bfloat16 (bf16 mode's stored activations), compared as the floats they
  // widen to exactly; null: the portable loop.
  void (*max_bf16)(const PoolNhwcRowArgs&) = nullptr;
  // The float average of the widened values (avg_f32's sums), rounded to
  // bf16 (to nearest even); null: the portable loop.
  void (*avg_bf16)(const PoolNhwcRowArgs&) = nullptr;
};

// The variant `f` allows; null without SIMD features. *variant (if given):
// its name or nullptr.
const PoolNhwcKernels* PoolNhwcFor(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
