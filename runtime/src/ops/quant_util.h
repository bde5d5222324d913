// Helpers shared by the quantized reference kernels (quant_*.cc): element
// access for every quantized dtype (including packed 4-bit), the rounding and
// saturation rules of docs/NUMERICS.md, and validation of scale/zero-point
// tensors. Everything here is plain scalar code: these kernels are the
// oracle that future SIMD kernels are tested against.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/op.h"
#include "core/shape_util.h"

namespace qfold {

// The integer dtypes a quantized tensor may have.
inline bool IsQuantDType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 ||
         t == DType::kInt4 || t == DType::kUInt4;
}
inline bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}
inline bool IsScaleDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Representable range of a quantized (or int32) dtype.
struct QRange {
  int32_t lo = 0, hi = 0;
};
inline QRange QuantRange(DType t) {
  switch (t) {
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt16:
      return {-32768, 32767};
    case DType::kUInt16:
      return {0, 65535};
    case DType::kInt4:
      return {-8, 7};
    case DType::kUInt4:
      return {0, 15};
    case DType::kInt32:
      return {INT32_MIN, INT32_MAX};
    default:
      return {0, 0};
  }
}

// Element i of quantized data of dtype t (int4/uint4 packed two per byte, low
// nibble first), widened to int32. t must be a quant dtype or int32.
inline int32_t LoadQ(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::kInt8:
      return static_cast<const int8_t*>(data)[i];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(data)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(data)[i];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(data)[i];
    case DType::kInt32:
      return static_cast<const int32_t*>(data)[i];
    case DType::kInt4:
    case DType::kUInt4: {
      const uint8_t byte = static_cast<const uint8_t*>(data)[i >> 1];
      const int32_t nib = (i & 1) ? byte >> 4 : byte & 0xf;
      return t == DType::kInt4 ? (nib ^ 8) - 8 : nib;  // sign-extend int4
    }
    default:
      return 0;
  }
}

// Stores v (already within t's range) as element i. For 4-bit types the
// caller must have zeroed the buffer first (ClearPacked): nibbles are OR-ed in.
inline void StoreQ(void* data, DType t, int64_t i, int32_t v) {
  switch (t) {
    case DType::kInt8:
      static_cast<int8_t*>(data)[i] = int8_t(v);
      break;
    case DType::kUInt8:
      static_cast<uint8_t*>(data)[i] = uint8_t(v);
      break;
    case DType::kInt16:
      static_cast<int16_t*>(data)[i] = int16_t(v);
      break;
    case DType::kUInt16:
      static_cast<uint16_t*>(data)[i] = uint16_t(v);
      break;
    case DType::kInt32:
      static_cast<int32_t*>(data)[i] = v;
      break;
    case DType::kInt4:
    case DType::kUInt4: {
      const uint8_t nib = uint8_t(v) & 0xf;
      static_cast<uint8_t*>(data)[i >> 1] |= uint8_t((i & 1) ? nib << 4 : nib);
      break;
    }
    default:
      break;
  }
}

// Zeroes a 4-bit output buffer before StoreQ (also makes the unused high
// nibble of an odd-sized tensor 0); no-op for byte-sized types.
inline void ClearPacked(Tensor* t) {
  if (t->dtype == DType::kInt4 || t->dtype == DType::kUInt4)
    std::memset(t->data, 0, dtype_storage_bytes(t->dtype, t->numel()));
}

// The final step of every quantizing kernel: round half to even, add the
// zero point and saturate to [lo, hi]. Clamping happens in float before the
// int conversion so infinities and huge values saturate instead of invoking
// undefined behaviour; NaN maps to the zero point (the quantized 0).
// v is a double so float64 quotients (int32 QuantizeLinear input) round
// directly; a float argument converts exactly, so float callers get nearbyintf.
inline int32_t RoundAddSaturate(double v, int32_t zp, int32_t lo, int32_t hi) {
  if (std::isnan(v)) return std::min(std::max(zp, lo), hi);
  const double lo_d = double(lo) - double(zp), hi_d = double(hi) - double(zp);
  const double r = std::nearbyint(v);
  if (r <= lo_d) return lo;
  if (r >= hi_d) return hi;
  return int32_t(int64_t(r) + zp);
}

// Quantizes a real value: saturate(nearbyint(v / scale) + zp).
inline int32_t QuantizeValue(float v, float scale, int32_t zp, QRange r) {
  return RoundAddSaturate(v / scale, zp, r.lo, r.hi);
}

// Reads a scale tensor (float32/float16/bfloat16) into floats.
inline bool ReadScales(const Tensor* t, std::vector<float>* out) {
  return ReadFloats(t, out);
}

// Reads a zero-point tensor (quant dtype or int32; nullptr -> {0}) into int32s.
inline std::vector<int32_t> ReadZeroPoints(const Tensor* t) {
  if (!t) return {0};
  std::vector<int32_t> v(size_t(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) v[size_t(i)] = LoadQ(t->data, t->dtype, i);
  return v;
}

// True when t (shape possibly unknown) could be a per-tensor parameter: a
// scalar or a 1-element tensor of any rank.
inline bool MaybeScalar(const Tensor* t) {
  if (!t->rank_known) return true;
  for (int64_t d : t->shape)
    if (d != 1 && d != kUnknownDim) return false;
  return true;
}

// Checks that t is a per-tensor parameter (scalar or one element) or, when
// allowed (n != 0), a 1-D tensor of n elements (n == kUnknownDim: any
// length). `what` names the tensor in the message.
inline Status CheckParamShape(const KernelContext& ctx, const Tensor* t, const char* what,
                              int64_t n, const char* n_what) {
  if (!t || MaybeScalar(t)) return Status::Ok();
  if (n != 0 && t->rank() == 1 &&
      (n == kUnknownDim || t->shape[0] == kUnknownDim || t->shape[0] == n))
    return Status::Ok();
  std::string want = "a scalar";
  if (n != 0) want += std::string(" or a 1-D tensor with one value per ") + n_what;
  if (n > 0) want += " (" + std::to_string(n) + ")";
  return ctx.Invalid(std::string(what) + " has shape " + ShapeToString(t->shape) + ", expected " +
                     want);
}

// Checks that a zero point, if present, has the quantized tensor's dtype.
inline Status CheckZeroPointDType(const KernelContext& ctx, const Tensor* zp, const char* what,
                                  DType want) {
  if (zp && zp->dtype != want)
    return ctx.Invalid(std::string(what) + " has dtype " + dtype_name(zp->dtype) + ", expected " +
                       dtype_name(want));
  return Status::Ok();
}

inline Status CheckScaleDType(const KernelContext& ctx, const Tensor* s, const char* what) {
  if (!s) return ctx.Invalid(std::string(what) + " is required");
  if (!IsScaleDType(s->dtype))
    return ctx.Unsupported(std::string(what) + " dtype " + dtype_name(s->dtype) +
                           " (float32, float16 or bfloat16 only)");
  return Status::Ok();
}

// The qfold extension attributes "_qmin"/"_qmax": the output clamp range in
// the quantized domain, left by the converter when it fuses Relu/Clip into a
// quantized op. Absent means the dtype's full range.
inline Status ReadClampRange(const KernelContext& ctx, DType out, QRange* r) {
  const QRange full = QuantRange(out);
  const int64_t lo = ctx.attr().GetInt("_qmin", full.lo);
  const int64_t hi = ctx.attr().GetInt("_qmax", full.hi);
  if (lo < full.lo || hi > full.hi || lo > hi)
    return ctx.Invalid("_qmin/_qmax [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "] must be an ordered range within " + dtype_name(out));
  r->lo = int32_t(lo);
  r->hi = int32_t(hi);
  return Status::Ok();
}

// Requantization of an int32 accumulator (docs/NUMERICS.md):
// clamp(nearbyintf(float(acc) * multiplier) + zp, lo, hi).
inline int32_t Requantize(int32_t acc, float multiplier, int32_t zp, QRange r) {
  return RoundAddSaturate(float(acc) * multiplier, zp, r.lo, r.hi);
}

inline bool Is16Bit(DType t) {
  return t == DType::kInt16 || t == DType::kUInt16;
}

// The multiplier of a16w8 requantization, in double, in exactly this order.
inline double WideMultiplier(float x_scale, float w_scale, float y_scale) {
  return double(x_scale) * double(w_scale) / double(y_scale);
}

// Requantization when an activation is 16-bit (a16w8; docs/NUMERICS.md): the
// exact int64 accumulator (bias included) times WideMultiplier in double, so
// no int32 wrap and no float32 rounding of a 40-bit sum:
// clamp(nearbyint(double(acc) * multiplier) + zp, lo, hi).
inline int32_t RequantizeWide(int64_t acc, double multiplier, int32_t zp, QRange r) {
  return RoundAddSaturate(double(acc) * multiplier, zp, r.lo, r.hi);
}

// Wraps an int64 sum to int32 like two's-complement int32 accumulation would.
inline int32_t WrapInt32(int64_t v) {
  return int32_t(uint32_t(uint64_t(v)));
}

// DynamicQuantizeLinear's parameters for n floats: uint8 over the range
// extended to include 0, scale = (max == min ? 1 : max - min) / 255,
// zp = nearbyint(clamp(-min / scale, 0, 255)). Also the activation
// quantization of MatMulIntegerToFloat's fused form and DynamicQuantizeLSTM.
// DynamicQuantRange: the same from a range [lo, hi] that includes 0.
inline void DynamicQuantRange(float lo, float hi, float* scale, int32_t* zp) {
  *scale = (hi == lo ? 1.f : hi - lo) / 255.f;
  *zp = int32_t(std::nearbyint(std::min(255.f, std::max(0.f, 0.f - lo / *scale))));
}
inline void DynamicQuantParams(const float* x, int64_t n, float* scale, int32_t* zp) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  DynamicQuantRange(lo, hi, scale, zp);
}

// OpDef of a quantized op (none reads input values for shapes).
inline OpDef QuantOpDef(const char* type, Status (*infer)(KernelContext&),
                        Status (*run)(KernelContext&), int min_inputs, int max_inputs) {
  return OpDef{type, infer, run, /*value_inputs=*/0, /*shape_only=*/false, min_inputs, max_inputs};
}

}  // namespace qfold
