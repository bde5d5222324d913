// Cast and CastLike between float32/64, float16, bfloat16, the 8..64-bit
// integers and bool. float16/bfloat16 go through float32.
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/half.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "ops/elementwise_util.h"
#include "ops/shape_common.h"

namespace qfold {

DType DTypeFromOnnxNumber(int64_t onnx, bool* known) {
  *known = true;
  switch (onnx) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kUInt8;
    case 3:
      return DType::kInt8;
    case 4:
      return DType::kUInt16;
    case 5:
      return DType::kInt16;
    case 6:
      return DType::kInt32;
    case 7:
      return DType::kInt64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kFloat16;
    case 11:
      return DType::kFloat64;
    case 12:
      return DType::kUInt32;
    case 13:
      return DType::kUInt64;
    case 16:
      return DType::kBFloat16;
    // string, complex, float8 variants, 4-bit ints, float4: valid but not supported.
    case 8:
    case 14:
    case 15:
    case 17:
    case 18:
    case 19:
    case 20:
    case 21:
    case 22:
    case 23:
    case 24:
    case 25:
    case 26:
      return DType::kUndefined;
    default:
      *known = false;
      return DType::kUndefined;
  }
}

namespace {

// Storage wrappers so the 16-bit float formats get their own conversions.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

bool Castable(DType t) {
  return IsNumericDType(t) || t == DType::kBool || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Source value -> a plain C++ arithmetic value.
template <class S>
auto Load(S v) {
  if constexpr (std::is_same<S, Half>::value)
    return HalfToFloat(v.bits);
  else if constexpr (std::is_same<S, BFloat16>::value)
    return BFloat16ToFloat(v.bits);
  else
    return v;
}

template <class D, class V>
D Convert(V v) {
  if constexpr (std::is_same<D, Half>::value) {
    return Half{FloatToHalf(float(v))};
  } else if constexpr (std::is_same<D, BFloat16>::value) {
    return BFloat16{FloatToBFloat16(float(v))};
  } else if constexpr (std::is_same<D, bool>::value) {
    return v != V(0);
  } else if constexpr (std::is_integral<D>::value && std::is_floating_point<V>::value) {
    return FloatToInt<D>(v);  // truncates toward zero
  } else {
    return D(v);  // int -> int wraps, int -> float rounds
  }
}

template <class S, class D>
void CastLoop(const Tensor& x, Tensor& y) {
  const S* px = static_cast<const S*>(x.data);
  D* py = static_cast<D*>(y.data);
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) py[i] = Convert<D>(Load(px[i]));
}

// Runs body with U bound to the storage type of dtype (Half/BFloat16 for the
// 16-bit float formats).
#define QF_CAST_DISPATCH(dtype, U, ...)                        \
  switch (dtype) {                                             \
    case DType::kFloat16: {                                    \
      using U = Half;                                          \
      __VA_ARGS__;                                             \
      break;                                                   \
    }                                                          \
    case DType::kBFloat16: {                                   \
      using U = BFloat16;                                      \
      __VA_ARGS__;                                             \
      break;                                                   \
    }                                                          \
    default:                                                   \
      QF_DISPATCH_ALL(dtype, break, using U = T; __VA_ARGS__); \
  }

template <class S>
void CastFrom(const Tensor& x, Tensor& y) {
  QF_CAST_DISPATCH(y.dtype, D, CastLoop<S, D>(x, y));
}

Status CastRun(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  if (!Castable(x.dtype)) return UnsupportedDType(ctx, x.dtype);
  if (!Castable(y.dtype)) return UnsupportedDType(ctx, y.dtype, "output");
  QF_CAST_DISPATCH(x.dtype, S, CastFrom<S>(x, y));
  return Status::Ok();
}

Status SetCastOutput(KernelContext& ctx, DType to) {
  const Tensor* x = ctx.input(0);
  if (!Castable(x->dtype)) return UnsupportedDType(ctx, x->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = to;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  return Status::Ok();
}

Status InferCast(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Attr* to = ctx.attr().Find("to");
  if (!to || to->kind != Attr::kInt) return ctx.Invalid("missing int attribute 'to'");
  bool known = false;
  DType dt = DTypeFromOnnxNumber(to->i, &known);
  if (!known) return ctx.Invalid("unknown target type " + std::to_string(to->i));
  if (dt == DType::kUndefined)
    return ctx.Unsupported("cast to ONNX type " + std::to_string(to->i) + " is not supported");
  return SetCastOutput(ctx, dt);
}

Status InferCastLike(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  const DType to = ctx.input(1)->dtype;
  if (!Castable(to)) return UnsupportedDType(ctx, to, "target");
  return SetCastOutput(ctx, to);
}

}  // namespace

const OpDef& OpDef_Cast() {
  static const OpDef def = [] {
    OpDef d{"Cast", InferCast, CastRun, 0, false, 1, 1};
    d.layout = LayoutRole::kElementwise;
    d.traits = kTraitPointwise;
    return d;
  }();
  return def;
}

const OpDef& OpDef_CastLike() {
  static const OpDef def{"CastLike", InferCastLike, CastRun, 0, false, 2, 2};
  return def;
}

}  // namespace qfold
