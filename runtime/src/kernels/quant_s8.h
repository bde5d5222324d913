// Vectorized element-wise int8/uint8 quantization kernels: QuantizeLinear
// (float32 -> 8-bit), DequantizeLinear (8-bit -> float32) and the
// dequantize -> add/mul -> quantize of QLinearAdd/QLinearMul. Every kernel is
// bit-identical to the scalar reference (ops/quant_util.h): x / scale is a
// true division, rounding is half to even, NaN quantizes to the zero point.
// The drivers return false when the active ISA level has no kernels; the
// caller then runs the reference loop.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h

// Per-tensor parameters of QLinearAdd/QLinearMul (C is the output).
struct QBinaryS8Params {
  float a_scale = 1.f, b_scale = 1.f, c_scale = 1.f;
  int32_t a_zp = 0, b_zp = 0, c_zp = 0;
  int32_t lo = 0, hi = 0;  // output clamp range
  bool is_signed = false;  // int8 (else uint8) for A, B and C
  bool mul = false;        // QLinearMul (else QLinearAdd)

  // The result in units of C's scale, rounded half to even, + c_zp, clamped:
  //   Add: float(a - a_zp) * a_factor() + float(b - b_zp) * b_factor()
  //   Mul: (float(a - a_zp) * float(b - b_zp)) * mul_factor()
  // (each operation rounded to float, no FMA). One multiply per operand
  // instead of a division per element, which bounded the kernels (vdivps);
  // ONNX Runtime's QLinearAdd uses the same scale ratios.
  float a_factor() const { return mul ? 1.f : a_scale / c_scale; }
  float b_factor() const { return mul ? 1.f : b_scale / c_scale; }
  float mul_factor() const { return float(double(a_scale) * double(b_scale) / double(c_scale)); }
  float Combine(float va, float vb) const { return mul ? (va * vb) * mul_factor() : va + vb; }
};

// Per-channel chains of clamped lines (QfChannelLines): y = v_S with v_0 =
// x (the input value, int8 or uint8) and, per stage s and channel ch,
//   v_s = clamp((v_{s-1} * mult + add) >> shift, lo, hi)
// in int32 (the op checks that no product or sum leaves int32; >> is an
// arithmetic shift); the last stage's [lo, hi] lies in y's byte range. The
// converter fits a stage to each 8-bit result of a per-channel chain
// (DenseNet's DequantizeLinear -> BatchNormalization -> QuantizeLinear, then
// Mul, Add and Relu, each requantized): a lookup per byte of a channels-last
// tensor needs one gathered element each, a stage a few vector operations.
struct ChannelLines {
  int64_t channels = 0;
  int stages = 0;
  bool x_signed = false;
  // [stage][channel], each stage padded with zeros to a multiple of 16 channels.
  int64_t stride = 0;
  std::vector<int32_t> mult, add, shift, lo, hi;
};

// Fits clamp((x * mult + add) >> shift, lo, hi) to the n points (xs[i],
// ys[i]), xs strictly increasing within [-255, 255], ys monotone: lo and hi
// are ys's extremes, every point reproduced exactly in int32 arithmetic
// (|x * mult| + |add| < 2^31). False when no such line exists (a curve, a
// table that is not monotone).
bool FitClampedLine(const int32_t* xs, const int32_t* ys, int n, int32_t* mult, int32_t* add,
                    int32_t* shift, int32_t* lo, int32_t* hi);

// One ISA level's kernels over n contiguous elements.
struct QuantS8Kernels {
  // y[i] = saturate(nearbyint(x[i] / scale) + zp) in [lo, hi] (NaN -> zp).
  // per_elem: scale[i], zpf[i] for element i; else scale[0], zpf[0] for all.
  // zpf holds zero points as floats (exact).
  void (*quantize)(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                   bool per_elem, int32_t lo, int32_t hi, bool is_signed);
  // y[i] = float(x[i] - zp) * scale, parameters as for quantize.
  void (*dequantize)(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                     bool per_elem, bool is_signed);
  // y[i] = C(A(a[i * a_step]) op B(b[i * b_step])), a_step/b_step 0 or 1.
  void (*binary)(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
                 void* y, int64_t n);
  // y[i] = table[x[i]] with a 256-entry byte table.
  void (*lookup)(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n);
  // quantize and dequantize for 16-bit (int16/uint16) elements.
  void (*quantize16)(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
                     bool per_elem, int32_t lo, int32_t hi, bool is_signed);
  void (*dequantize16)(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                       bool per_elem, bool is_signed);
  // binary for 16-bit elements (p.is_signed: int16, else uint16).
  void (*binary16)(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
                   void* y, int64_t n);
  // Channels-last lookup with one 256-entry table per channel: for pixels
  // [0, pixels) and channels [c0, c1), y[p * channels + ch] =
  // table[ch * 256 + x[p * channels + ch]] (table holds channels * 256
  // bytes). Null where the level has no vector form (the caller loops).
  void (*lookup_channels)(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t pixels,
                          int64_t channels, int64_t c0, int64_t c1);
  // ChannelLines over pixels [0, pixels) of l.channels bytes each
  // (channels-last). Null where the level has no vector form.
  void (*line_channels)(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l);
};

// The kernels of `isa`, nullptr for kReference (and levels of another arch).
const QuantS8Kernels* QuantS8For(const CpuFeatures& f, const char** variant = nullptr);

// x (float32) laid out [outer, dim, inner]; per_axis: scales/zps have dim
// values, one per index along dim; else one value each. zps are in [lo, hi].
bool QuantizeF32ToS8(const KernelConfig& kc, const float* x, void* y, bool is_signed, int32_t lo,
                     int32_t hi, int64_t outer, int64_t dim, int64_t inner, const float* scales,
                     const int32_t* zps, bool per_axis, ThreadPool* pool);
// The same for 16-bit outputs (is_signed: int16, else uint16).
bool QuantizeF32To16(const KernelConfig& kc, const float* x, void* y, bool is_signed, int32_t lo,
                     int32_t hi, int64_t outer, int64_t dim, int64_t inner, const float* scales,
                     const int32_t* zps, bool per_axis, ThreadPool* pool);
// The inverse layout-wise: y (float32) = float(x - zp) * scale.
bool DequantizeS8ToF32(const KernelConfig& kc, const void* x, float* y, bool is_signed,
                       int64_t outer, int64_t dim, int64_t inner, const float* scales,
                       const int32_t* zps, bool per_axis, ThreadPool* pool);
// The same for 16-bit inputs.
bool Dequantize16ToF32(const KernelConfig& kc, const void* x, float* y, bool is_signed,
                       int64_t outer, int64_t dim, int64_t inner, const float* scales,
                       const int32_t* zps, bool per_axis, ThreadPool* pool);
// QLinearAdd/QLinearMul with NumPy broadcasting of a_shape and b_shape to
// y_shape (all known, y_shape the broadcast result).
bool QBinaryS8(const KernelConfig& kc, const QBinaryS8Params& p, const void* a,
               const std::vector<int64_t>& a_shape, const void* b,
               const std::vector<int64_t>& b_shape, void* y, const std::vector<int64_t>& y_shape,
               ThreadPool* pool);

// The same for 16-bit A, B and C (p.is_signed: int16, else uint16).
bool QBinary16(const KernelConfig& kc, const QBinaryS8Params& p, const void* a,
               const std::vector<int64_t>& a_shape, const void* b,
               const std::vector<int64_t>& b_shape, void* y, const std::vector<int64_t>& y_shape,
               ThreadPool* pool);

// y[i] = table[x[i]] (QfLookupTable, and every 8-bit -> 8-bit op that is a
// function of one input byte, through a table built by the scalar code).
bool LookupU8(const KernelConfig& kc, const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n,
              ThreadPool* pool);
// Per-channel tables over a channels-last tensor of `pixels` x `channels`
// bytes (see QuantS8Kernels::lookup_channels); false when the level has no
// kernel for it.
bool LookupChannelsU8(const KernelConfig& kc, const uint8_t* x, const uint8_t* table, uint8_t* y,
                      int64_t pixels, int64_t channels, ThreadPool* pool);
// Whether the configuration has line_channels, and the driver that splits
// pixels between threads (false without the kernel).
bool HasLineChannels(const KernelConfig& kc);
bool LineChannelsU8(const KernelConfig& kc, const uint8_t* x, uint8_t* y, int64_t pixels,
                    const ChannelLines& lines, ThreadPool* pool);

}  // namespace kernels
}  // namespace qfold
