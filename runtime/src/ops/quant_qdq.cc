// QuantizeLinear and DequantizeLinear, covering the semantics of every
// opset (10 through 25): per-tensor, per-axis and blocked scales; int8,
// uint8, int16, uint16, int4 and uint4 quantized data (4-bit packed two per
// byte); float32/float16/bfloat16 scales; the `output_dtype` and `precision`
// attributes. Float8/float4/int2 types are unsupported.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/quant_s8.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// ONNX TensorProto.DataType numbers used by output_dtype and precision.
DType DTypeFromOnnxNumber(int64_t t) {
  switch (t) {
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
    case 10:
      return DType::kFloat16;
    case 11:
      return DType::kFloat64;
    case 16:
      return DType::kBFloat16;
    case 21:
      return DType::kUInt4;
    case 22:
      return DType::kInt4;
    default:
      return DType::kUndefined;
  }
}

// float8 (17-20), float4e2m1 (23), float8e8m0 (24), uint2/int2 (25, 26).
bool IsUnsupportedOnnxType(int64_t t) {
  return (t >= 17 && t <= 20) || (t >= 23 && t <= 26);
}

// How scale and zero point map onto the elements of x.
struct QuantLayout {
  enum Kind { kTensor, kAxis, kBlocked, kUnknown };
  Kind kind = kUnknown;
  int axis = 0;
  int64_t block = 0;
};

// Works out the granularity from the scale's shape (see the QuantizeLinear
// spec): one element -> per tensor; block_size == 0 -> per axis (1-D scale
// of x.shape[axis] values); block_size > 0 -> blocked (scale has x's shape
// except ceil(dim / block_size) along axis). Unknown shapes leave kUnknown.
Status ResolveLayout(const KernelContext& ctx, const Tensor* x, const Tensor* scale,
                     const Tensor* zp, QuantLayout* l) {
  const int64_t block = ctx.attr().GetInt("block_size", 0);
  if (block < 0) return ctx.Invalid("block_size must be >= 0, got " + std::to_string(block));
  // A one-element zero point may be [1] for a scalar scale (and vice versa).
  const bool both_single =
      zp && zp->shape_known() && scale->shape_known() && zp->numel() == 1 && scale->numel() == 1;
  if (zp && zp->rank_known && scale->rank_known && !both_single) {
    bool same = zp->rank() == scale->rank();
    for (int i = 0; same && i < zp->rank(); ++i)
      if (zp->shape[i] >= 0 && scale->shape[i] >= 0 && zp->shape[i] != scale->shape[i])
        same = false;
    if (!same)
      return ctx.Invalid("zero point shape " + ShapeToString(zp->shape) +
                         " differs from scale shape " + ShapeToString(scale->shape));
  }
  if (!scale->rank_known) return Status::Ok();
  if (scale->shape_known() && scale->numel() == 1) {
    l->kind = QuantLayout::kTensor;
    return Status::Ok();
  }
  if (!x->rank_known) return Status::Ok();
  const int64_t axis_attr = ctx.attr().GetInt("axis", 1);
  if (!NormalizeAxis(axis_attr, x->rank(), &l->axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " out of range for rank " +
                       std::to_string(x->rank()));
  const int64_t dim = x->shape[l->axis];
  if (block == 0) {
    if (scale->rank() != 1)
      return ctx.Invalid("per-axis scale must be 1-D, got shape " + ShapeToString(scale->shape) +
                         " (set block_size for blocked quantization)");
    if (dim >= 0 && scale->shape[0] >= 0 && scale->shape[0] != dim)
      return ctx.Invalid("scale has " + std::to_string(scale->shape[0]) + " values, axis " +
                         std::to_string(l->axis) + " of x " + ShapeToString(x->shape) + " has " +
                         std::to_string(dim));
    l->kind = QuantLayout::kAxis;
    return Status::Ok();
  }
  if (scale->rank() != x->rank())
    return ctx.Invalid("blocked scale " + ShapeToString(scale->shape) +
                       " must have the rank of x " + ShapeToString(x->shape));
  for (int i = 0; i < x->rank(); ++i) {
    const int64_t want = x->shape[i] < 0 ? kUnknownDim
                         : i == l->axis  ? (x->shape[i] + block - 1) / block
                                         : x->shape[i];
    if (want >= 0 && scale->shape[i] >= 0 && scale->shape[i] != want)
      return ctx.Invalid("blocked scale " + ShapeToString(scale->shape) + " does not match x " +
                         ShapeToString(x->shape) + " with block_size " + std::to_string(block) +
                         " on axis " + std::to_string(l->axis));
  }
  l->kind = QuantLayout::kBlocked;
  l->block = block;
  return Status::Ok();
}

// Calls f(element index, parameter index) for every element of a tensor of
// `shape` (all known), per the layout resolved at run time.
template <class F>
void ForEachElement(const Shape& shape, const Shape& scale_shape, const QuantLayout& l, F f) {
  if (l.kind == QuantLayout::kTensor) {
    const int64_t n = Product(shape);
    for (int64_t i = 0; i < n; ++i) f(i, int64_t(0));
    return;
  }
  const int64_t outer = Product(Shape(shape.begin(), shape.begin() + l.axis));
  const int64_t dim = shape[size_t(l.axis)];
  const int64_t inner = Product(Shape(shape.begin() + l.axis + 1, shape.end()));
  // Only a blocked scale has x's rank; a per-axis scale is 1-D.
  const int64_t sdim = l.kind == QuantLayout::kBlocked ? scale_shape[size_t(l.axis)] : 0;
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < dim; ++c)
      for (int64_t k = 0; k < inner; ++k, ++i) {
        if (l.kind == QuantLayout::kAxis)
          f(i, c);
        else
          f(i, (o * sdim + c / l.block) * inner + k);
      }
}

// The [outer, dim, inner] view of `shape` for a per-tensor or per-axis
// layout (per tensor: one block of every element). False for other layouts.
bool AxisView(const Shape& shape, const QuantLayout& l, int64_t* outer, int64_t* dim,
              int64_t* inner) {
  if (l.kind == QuantLayout::kTensor) {
    *outer = *dim = 1;
    *inner = Product(shape);
    return true;
  }
  if (l.kind != QuantLayout::kAxis) return false;
  *outer = Product(Shape(shape.begin(), shape.begin() + l.axis));
  *dim = shape[size_t(l.axis)];
  *inner = Product(Shape(shape.begin() + l.axis + 1, shape.end()));
  return true;
}

// Per-axis zero points with one value per scale (absent -> zeros).
std::vector<int32_t> ExpandZeroPoints(const std::vector<int32_t>& z, size_t n) {
  return z.size() == n ? z : std::vector<int32_t>(n, z[0]);
}

void CopyShape(const Tensor* x, Tensor* y) {
  y->rank_known = x->rank_known;
  y->shape = x->shape;
}

// ---- QuantizeLinear ---------------------------------------------------------

// The precision of x / scale: the `precision` attribute, else NumPy's type
// promotion of x and scale (what the ONNX reference implementation does).
Status QuantizePrecision(const KernelContext& ctx, DType x, DType scale, DType* prec) {
  const int64_t p = ctx.attr().GetInt("precision", 0);
  if (p != 0) {
    *prec = DTypeFromOnnxNumber(p);
    if (!dtype_is_float(*prec))
      return ctx.Unsupported("precision " + std::to_string(p) + " (only float types)");
    return Status::Ok();
  }
  if (x == DType::kInt32)
    *prec = DType::kFloat64;
  else if (x == scale)
    *prec = x;
  else
    *prec = DType::kFloat32;
  return Status::Ok();
}

Status InferQuantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  Tensor* y = ctx.output(0);
  if (!x) return ctx.Invalid("input x is required");
  if (!IsScaleDType(x->dtype) && x->dtype != DType::kInt32)
    return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, scale, "y_scale"));
  const int64_t od = ctx.attr().GetInt("output_dtype", 0);
  if (IsUnsupportedOnnxType(od))
    return ctx.Unsupported("output_dtype " + std::to_string(od) + " (float8/float4/int2)");
  DType out = DType::kUInt8;
  if (od != 0) {
    out = DTypeFromOnnxNumber(od);
    if (!IsQuantDType(out))
      return ctx.Invalid("output_dtype " + std::to_string(od) + " is not a quantized type");
  }
  if (zp) {
    if (!IsQuantDType(zp->dtype))
      return ctx.Unsupported(std::string("y_zero_point dtype ") + dtype_name(zp->dtype));
    if (od != 0 && zp->dtype != out)
      return ctx.Invalid(std::string("y_zero_point dtype ") + dtype_name(zp->dtype) +
                         " contradicts output_dtype " + dtype_name(out));
    out = zp->dtype;
  }
  DType prec;
  QF_RETURN_IF_ERROR(QuantizePrecision(ctx, x->dtype, scale->dtype, &prec));
  QuantLayout l;
  QF_RETURN_IF_ERROR(ResolveLayout(ctx, x, scale, zp, &l));
  y->dtype = out;
  CopyShape(x, y);
  return Status::Ok();
}

// Rounds a float to the nearest value of a 16-bit float type.
float RoundTo(DType t, float v) {
  if (t == DType::kFloat16) return HalfToFloat(FloatToHalf(v));
  if (t == DType::kBFloat16) return BFloat16ToFloat(FloatToBFloat16(v));
  return v;
}

double LoadFloat(const Tensor* t, int64_t i) {
  switch (t->dtype) {
    case DType::kFloat32:
      return t->ptr<float>()[i];
    case DType::kFloat16:
      return HalfToFloat(t->ptr<uint16_t>()[i]);
    case DType::kBFloat16:
      return BFloat16ToFloat(t->ptr<uint16_t>()[i]);
    case DType::kInt32:
      return t->ptr<int32_t>()[i];
    default:
      return 0.0;
  }
}

Status RunQuantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  Tensor* y = ctx.output(0);
  QuantLayout l;
  QF_RETURN_IF_ERROR(ResolveLayout(ctx, x, scale, zp, &l));
  DType prec;
  QF_RETURN_IF_ERROR(QuantizePrecision(ctx, x->dtype, scale->dtype, &prec));
  std::vector<float> s;
  if (!ReadScales(scale, &s)) return ctx.Invalid("cannot read y_scale");
  const std::vector<int32_t> z = ReadZeroPoints(zp);
  const QRange r = QuantRange(y->dtype);
  // SIMD kernels for float32 -> 8-bit per tensor / per axis (bit-identical).
  int64_t outer, dim, inner;
  if (x->dtype == DType::kFloat32 && prec == DType::kFloat32 &&
      (Is8Bit(y->dtype) || Is16Bit(y->dtype)) && AxisView(x->shape, l, &outer, &dim, &inner) &&
      s.size() == size_t(dim)) {
    const std::vector<int32_t> zs = ExpandZeroPoints(z, s.size());
    const bool is_signed = y->dtype == DType::kInt8 || y->dtype == DType::kInt16;
    const auto run = Is8Bit(y->dtype) ? kernels::QuantizeF32ToS8 : kernels::QuantizeF32To16;
    if (run(ctx.kernel_config(), x->ptr<float>(), y->data, is_signed, r.lo, r.hi, outer, dim, inner,
            s.data(), zs.data(), l.kind == QuantLayout::kAxis, ctx.pool))
      return Status::Ok();
  }
  ClearPacked(y);
  // Both x and scale are first converted to the division's precision, as
  // x.astype(p) / scale.astype(p) does; float16/bfloat16 quotients computed
  // in float and rounded once equal the narrow type's own division.
  ForEachElement(x->shape, scale->shape, l, [&](int64_t i, int64_t p) {
    const int32_t zpv = z.size() == 1 ? z[0] : z[size_t(p)];
    const double xv = LoadFloat(x, i);
    double q;
    if (prec == DType::kFloat64) {
      q = xv / double(s[size_t(p)]);
    } else {
      const float xf = RoundTo(prec, float(xv)), sf = RoundTo(prec, s[size_t(p)]);
      q = RoundTo(prec, xf / sf);
    }
    StoreQ(y->data, y->dtype, i, RoundAddSaturate(q, zpv, r.lo, r.hi));
  });
  return Status::Ok();
}

// ---- DequantizeLinear -------------------------------------------------------

Status InferDequantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  Tensor* y = ctx.output(0);
  if (!x) return ctx.Invalid("input x is required");
  if (!IsQuantDType(x->dtype) && x->dtype != DType::kInt32)
    return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, scale, "x_scale"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, zp, "x_zero_point", x->dtype));
  if (zp && x->dtype == DType::kInt32 && zp->data && zp->shape_known())
    for (int64_t i = 0; i < zp->numel(); ++i)
      if (zp->ptr<int32_t>()[i] != 0) return ctx.Invalid("int32 x requires a zero x_zero_point");
  const int64_t od = ctx.attr().GetInt("output_dtype", 0);
  DType out = scale->dtype;
  if (od != 0) {
    out = DTypeFromOnnxNumber(od);
    if (!IsScaleDType(out))
      return ctx.Invalid("output_dtype " + std::to_string(od) +
                         " must be float, float16 or bfloat16");
  }
  QuantLayout l;
  QF_RETURN_IF_ERROR(ResolveLayout(ctx, x, scale, zp, &l));
  y->dtype = out;
  CopyShape(x, y);
  return Status::Ok();
}

Status RunDequantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* zp = ctx.input(2);
  Tensor* y = ctx.output(0);
  QuantLayout l;
  QF_RETURN_IF_ERROR(ResolveLayout(ctx, x, scale, zp, &l));
  std::vector<float> s;
  if (!ReadScales(scale, &s)) return ctx.Invalid("cannot read x_scale");
  const std::vector<int32_t> z = ReadZeroPoints(zp);
  int64_t outer, dim, inner;
  if ((Is8Bit(x->dtype) || Is16Bit(x->dtype)) && y->dtype == DType::kFloat32 &&
      AxisView(x->shape, l, &outer, &dim, &inner) && s.size() == size_t(dim)) {
    const std::vector<int32_t> zs = ExpandZeroPoints(z, s.size());
    const bool is_signed = x->dtype == DType::kInt8 || x->dtype == DType::kInt16;
    const auto run = Is8Bit(x->dtype) ? kernels::DequantizeS8ToF32 : kernels::Dequantize16ToF32;
    if (run(ctx.kernel_config(), x->data, y->ptr<float>(), is_signed, outer, dim, inner, s.data(),
            zs.data(), l.kind == QuantLayout::kAxis, ctx.pool))
      return Status::Ok();
  }
  // (x - zp) is exact in float for every 4/8/16-bit type; the product is
  // computed in float32 and rounded to a 16-bit output type afterwards.
  ForEachElement(x->shape, scale->shape, l, [&](int64_t i, int64_t p) {
    const int32_t zpv = z.size() == 1 ? z[0] : z[size_t(p)];
    const float v = float(int64_t(LoadQ(x->data, x->dtype, i)) - zpv) * s[size_t(p)];
    switch (y->dtype) {
      case DType::kFloat16:
        y->ptr<uint16_t>()[i] = FloatToHalf(v);
        break;
      case DType::kBFloat16:
        y->ptr<uint16_t>()[i] = FloatToBFloat16(v);
        break;
      default:
        y->ptr<float>()[i] = v;
        break;
    }
  });
  return Status::Ok();
}

// ---- DynamicQuantizeLinear --------------------------------------------------
// uint8 quantization with parameters from x's range extended to include 0:
//   scale = (max == min ? 1 : max - min) / 255, zp = round(clamp(-min / scale, 0, 255))
//   y = saturate(round(x / scale) + zp)
// Outputs y, y_scale (float32 scalar), y_zero_point (uint8 scalar).

Status InferDynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.Invalid("input x is required");
  if (x->dtype != DType::kFloat32)
    return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype) + " (only float32)");
  if (Tensor* y = ctx.output(0)) {
    y->dtype = DType::kUInt8;
    CopyShape(x, y);
  }
  if (Tensor* s = ctx.output(1)) {
    s->dtype = DType::kFloat32;
    s->rank_known = true;
    s->shape = {};
  }
  if (Tensor* z = ctx.output(2)) {
    z->dtype = DType::kUInt8;
    z->rank_known = true;
    z->shape = {};
  }
  return Status::Ok();
}

Status RunDynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const float* xd = x->ptr<float>();
  const int64_t n = x->numel();
  float scale;
  int32_t zp;
  DynamicQuantParams(xd, n, &scale, &zp);
  if (Tensor* y = ctx.output(0)) {
    uint8_t* yd = y->ptr<uint8_t>();
    if (!kernels::QuantizeF32ToS8(ctx.kernel_config(), xd, yd, /*is_signed=*/false, 0, 255, 1, 1, n,
                                  &scale, &zp,
                                  /*per_axis=*/false, ctx.pool))
      for (int64_t i = 0; i < n; ++i) yd[i] = uint8_t(RoundAddSaturate(xd[i] / scale, zp, 0, 255));
  }
  if (Tensor* s = ctx.output(1)) *s->ptr<float>() = scale;
  if (Tensor* z = ctx.output(2)) *z->ptr<uint8_t>() = uint8_t(zp);
  return Status::Ok();
}

}  // namespace

// Per-tensor and per-axis Q/DQ work in any axis order ("axis" follows it);
// the layout planner leaves blocked ones (rank-r scales) where they are.
const OpDef& OpDef_QuantizeLinear() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QuantizeLinear", InferQuantizeLinear, RunQuantizeLinear,
                         /*min_inputs=*/2, /*max_inputs=*/3);
    d.layout = LayoutRole::kAxis;
    d.traits = kTraitPointwise;
    return d;
  }();
  return def;
}

const OpDef& OpDef_DequantizeLinear() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("DequantizeLinear", InferDequantizeLinear, RunDequantizeLinear,
                         /*min_inputs=*/2, /*max_inputs=*/3);
    d.layout = LayoutRole::kAxis;
    d.traits = kTraitPointwise;
    return d;
  }();
  return def;
}

const OpDef& OpDef_DynamicQuantizeLinear() {
  static const OpDef def = QuantOpDef("DynamicQuantizeLinear", InferDynamicQuantizeLinear,
                                      RunDynamicQuantizeLinear, /*min_inputs=*/1, /*max_inputs=*/1);
  return def;
}

}  // namespace qfold
