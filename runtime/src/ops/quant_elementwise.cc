// Elementwise quantized ops. ONNX Runtime's com.microsoft contrib ops
// QLinearAdd, QLinearMul, QLinearLeakyRelu, QLinearSigmoid and QLinearConcat
// (registered under their plain names), and the qfold-internal QfLookupTable
// and QfRequantize. All follow dequantize -> float op -> quantize:
//   real = float(q - zp) * scale;  q_out = saturate(nearbyint(real / out_scale) + out_zp)
// (round half to even; docs/NUMERICS.md).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/quant_s8.h"
#include "kernels/thread_pool.h"
#include "ops/elementwise_util.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// Below this many bytes a byte-wise pass (copy, table lookup) is not worth
// splitting between threads: it takes about as long as the hand-off.
constexpr int64_t kMinParallelBytes = 1 << 15;

// One per-tensor quantization: scale input, optional zero point input.
struct QParam {
  float scale = 1.f;
  int32_t zp = 0;
  float Dequant(int32_t q) const { return float(q - zp) * scale; }
};

// Validates a (scale, zero point) pair of per-tensor parameters for a
// tensor of dtype `t`.
Status CheckQParam(const KernelContext& ctx, int scale_idx, int zp_idx, DType t,
                   const std::string& what) {
  const Tensor* s = ctx.input(scale_idx);
  const Tensor* z = zp_idx >= 0 ? ctx.input(zp_idx) : nullptr;
  const std::string sn = what + "_scale", zn = what + "_zero_point";
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, s, sn.c_str()));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, s, sn.c_str(), 0, ""));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, z, zn.c_str(), t));
  return CheckParamShape(ctx, z, zn.c_str(), 0, "");
}

Status ReadQParam(const KernelContext& ctx, int scale_idx, int zp_idx, QParam* p) {
  std::vector<float> s;
  if (!ReadScales(ctx.input(scale_idx), &s) || s.size() != 1)
    return ctx.Invalid("cannot read a scale");
  p->scale = s[0];
  p->zp = ReadZeroPoints(zp_idx >= 0 ? ctx.input(zp_idx) : nullptr)[0];
  return Status::Ok();
}

void CopyShape(const Tensor* x, Tensor* y) {
  y->rank_known = x->rank_known;
  y->shape = x->shape;
}

// ---- QLinearAdd / QLinearMul ------------------------------------------------
// Inputs: A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale,
// C_zero_point?; A, B and C are int8/uint8, each its own (NNCF mixes them),
// or all one 16-bit dtype (qfold's 16-bit activations); C's dtype is that
// of C_zero_point (A's without it); NumPy broadcasting.

Status InferQLinearBinary(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  Tensor* y = ctx.output(0);
  if (!a || !b) return ctx.Invalid("inputs A and B are required");
  if (!Is8Bit(a->dtype) && !Is16Bit(a->dtype))
    return ctx.Unsupported(std::string("A dtype ") + dtype_name(a->dtype));
  const Tensor* c_zp = ctx.input(7);
  const DType c = c_zp ? c_zp->dtype : a->dtype;
  const bool all8 = Is8Bit(a->dtype) && Is8Bit(b->dtype) && Is8Bit(c);
  if (!all8 && (b->dtype != a->dtype || c != a->dtype))
    return ctx.Invalid("A, B and C must be 8-bit, or share one 16-bit dtype");
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 1, 2, a->dtype, "A"));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 4, 5, b->dtype, "B"));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 6, 7, c, "C"));
  y->dtype = c;
  return InferBroadcastShape(ctx, {a, b}, y);
}

template <bool kMul>
Status RunQLinearBinary(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  Tensor* y = ctx.output(0);
  QParam pa, pb, pc;
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 1, 2, &pa));
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 4, 5, &pb));
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 6, 7, &pc));
  // _qmin/_qmax: a Relu/Clip folded into the output's range (converter).
  QRange r;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, y->dtype, &r));
  kernels::QBinaryS8Params kp;
  kp.a_scale = pa.scale;
  kp.b_scale = pb.scale;
  kp.c_scale = pc.scale;
  kp.a_zp = pa.zp;
  kp.b_zp = pb.zp;
  kp.c_zp = pc.zp;
  kp.lo = r.lo;
  kp.hi = r.hi;
  kp.is_signed = y->dtype == DType::kInt8 || y->dtype == DType::kInt16;
  kp.mul = kMul;
  const kernels::QBinaryS8Params ref = kp;  // the zero points before any flip below
  // An 8-bit operand of the other signedness is the same values with the
  // sign bit flipped and the zero point moved by 128 (exact): the kernels
  // take one signedness.
  std::vector<uint8_t> a_flip, b_flip;
  const void* ad = a->data;
  const void* bd = b->data;
  auto flip = [&](const Tensor* t, int32_t* zp, std::vector<uint8_t>* buf) -> const void* {
    buf->resize(size_t(t->numel()));
    const uint8_t* src = t->ptr<uint8_t>();
    for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = uint8_t(src[i] ^ 0x80);
    *zp += t->dtype == DType::kInt8 ? 128 : -128;
    return buf->data();
  };
  if (a->dtype != y->dtype) ad = flip(a, &kp.a_zp, &a_flip);
  if (b->dtype != y->dtype) bd = flip(b, &kp.b_zp, &b_flip);
  const auto fast = Is8Bit(y->dtype) ? kernels::QBinaryS8 : kernels::QBinary16;
  if (fast(ctx.kernel_config(), kp, ad, a->shape, bd, b->shape, y->data, y->shape, ctx.pool))
    return Status::Ok();
  // The kernels' arithmetic (QBinaryS8Params), not a division per element.
  const float fa = ref.a_factor(), fb = ref.b_factor();
  ForEachBroadcast<2>(
      {&a->shape, &b->shape}, y->shape, [&](int64_t o, const std::array<int64_t, 2>& i) {
        const float va = float(LoadQ(a->data, a->dtype, i[0]) - ref.a_zp) * fa;
        const float vb = float(LoadQ(b->data, b->dtype, i[1]) - ref.b_zp) * fb;
        StoreQ(y->data, y->dtype, o, RoundAddSaturate(ref.Combine(va, vb), pc.zp, r.lo, r.hi));
      });
  return Status::Ok();
}

Status RunQLinearAdd(KernelContext& ctx) {
  return RunQLinearBinary<false>(ctx);
}
Status RunQLinearMul(KernelContext& ctx) {
  return RunQLinearBinary<true>(ctx);
}

// ---- QLinearLeakyRelu / QLinearSigmoid --------------------------------------
// Inputs: X, X_scale, X_zero_point?, Y_scale, Y_zero_point?; Y has X's dtype.
// With 8-bit inputs every output is one of 256 values: build the table once.

Status InferQLinearUnary(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (!x) return ctx.Invalid("input X is required");
  if (!Is8Bit(x->dtype)) return ctx.Unsupported(std::string("X dtype ") + dtype_name(x->dtype));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 1, 2, x->dtype, "X"));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 3, 4, x->dtype, "Y"));
  y->dtype = x->dtype;
  CopyShape(x, y);
  return Status::Ok();
}

template <class F>
Status RunQLinearUnary(KernelContext& ctx, F f) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QParam px, py;
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 1, 2, &px));
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 3, 4, &py));
  const QRange r = QuantRange(y->dtype);
  std::array<int32_t, 256> table;
  for (int byte = 0; byte < 256; ++byte) {
    const int32_t q = x->dtype == DType::kInt8 ? int32_t(int8_t(uint8_t(byte))) : byte;
    table[size_t(byte)] = QuantizeValue(f(px.Dequant(q)), py.scale, py.zp, r);
  }
  const uint8_t* xd = x->ptr<uint8_t>();
  std::array<uint8_t, 256> bytes;
  for (size_t i = 0; i < 256; ++i) bytes[i] = uint8_t(table[i]);
  if (kernels::LookupU8(ctx.kernel_config(), xd, bytes.data(), y->ptr<uint8_t>(), x->numel(),
                        ctx.pool))
    return Status::Ok();
  for (int64_t i = 0; i < x->numel(); ++i) StoreQ(y->data, y->dtype, i, table[xd[i]]);
  return Status::Ok();
}

Status RunQLinearLeakyRelu(KernelContext& ctx) {
  const float alpha = ctx.attr().GetFloat("alpha", 0.01f);
  return RunQLinearUnary(ctx, [alpha](float v) { return v >= 0.f ? v : v * alpha; });
}

Status RunQLinearSigmoid(KernelContext& ctx) {
  return RunQLinearUnary(ctx, [](float v) { return 1.f / (1.f + std::exp(-v)); });
}

// ---- QLinearConcat ----------------------------------------------------------
// Inputs: Y_scale, Y_zero_point, then (X_i, X_scale_i, X_zero_point_i)
// triples; attribute axis (required). Inputs whose quantization equals the
// output's are copied; others are requantized through float.

Status InferQLinearConcat(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  const Tensor* yzp = ctx.input(1);
  if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
    return ctx.Invalid(
        "expects Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got " +
        std::to_string(ctx.num_inputs()) + " inputs");
  if (!yzp) return ctx.Invalid("Y_zero_point is required");
  if (!Is8Bit(yzp->dtype)) return ctx.Unsupported(std::string("Y dtype ") + dtype_name(yzp->dtype));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 0, 1, yzp->dtype, "Y"));
  if (!ctx.attr().Has("axis")) return ctx.Invalid("attribute axis is required");
  const int64_t axis_attr = ctx.attr().GetInt("axis", 0);
  y->dtype = yzp->dtype;
  int rank = -1;
  for (int i = 2; i < ctx.num_inputs(); i += 3) {
    const Tensor* x = ctx.input(i);
    if (!x) return ctx.Invalid("input " + std::to_string(i) + " is missing");
    if (x->dtype != y->dtype)
      return ctx.Invalid(std::string("input dtype ") + dtype_name(x->dtype) + " differs from Y's " +
                         dtype_name(y->dtype));
    QF_RETURN_IF_ERROR(CheckQParam(ctx, i + 1, i + 2, x->dtype, "X" + std::to_string(i / 3)));
    if (x->rank_known) {
      if (rank >= 0 && x->rank() != rank) return ctx.Invalid("inputs have different ranks");
      rank = x->rank();
    }
  }
  if (rank < 0) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  int axis;
  if (!NormalizeAxis(axis_attr, rank, &axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " out of range for rank " +
                       std::to_string(rank));
  Shape out(size_t(rank), kUnknownDim);
  int64_t total = 0;
  for (int i = 2; i < ctx.num_inputs(); i += 3) {
    const Tensor* x = ctx.input(i);
    if (!x->rank_known) {
      total = kUnknownDim;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (out[d] >= 0 && x->shape[d] >= 0 && out[d] != x->shape[d])
        return ctx.Invalid("input " + ShapeToString(x->shape) + " does not match others off axis " +
                           std::to_string(axis));
      if (out[d] < 0) out[d] = x->shape[d];
    }
    if (total >= 0) total = x->shape[axis] < 0 ? kUnknownDim : total + x->shape[axis];
  }
  out[axis] = total;
  y->rank_known = true;
  y->shape = out;
  return Status::Ok();
}

// Inputs whose rows (x.shape[axis] * inner bytes) are shorter than this are
// looked up whole into scratch first when their scale or zero point differs
// from y's (RunQLinearConcat).
constexpr int64_t kConcatMapRow = 1024;

// The scratch of RunQLinearConcat's mapped inputs: every short-row input is
// counted (whether its parameters differ is known only when it runs).
size_t QLinearConcatMappedBytes(KernelContext& ctx) {
  const Tensor* y = ctx.output(0);
  if (!y || !y->rank_known || y->rank() == 0) return 0;
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), y->rank(), &axis);
  kernels::ScratchLayout l;
  for (int i = 2; i < ctx.num_inputs(); i += 3) {
    const Tensor* x = ctx.input(i);
    if (!x || !x->shape_known() || x->rank() != y->rank()) continue;
    const int64_t inner = Product(Shape(x->shape.begin() + axis + 1, x->shape.end()));
    if (x->shape[size_t(axis)] * inner < kConcatMapRow) l.Add(size_t(x->numel()));
  }
  return l.total();
}

Status QLinearConcatScratch(KernelContext& ctx, ScratchNeeds* needs) {
  needs->run = QLinearConcatMappedBytes(ctx);
  return Status::Ok();
}

Status RunQLinearConcat(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  QParam py;
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 0, 1, &py));
  const QRange r = QuantRange(y->dtype);
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), y->rank(), &axis);
  const int64_t outer = Product(Shape(y->shape.begin(), y->shape.begin() + axis));
  const int64_t inner = Product(Shape(y->shape.begin() + axis + 1, y->shape.end()));
  const int64_t y_row = y->shape[size_t(axis)] * inner;
  const bool fast = ctx.kernel_config().quant_s8 != nullptr;
  // Each input's slab of an output row: its rows as they stand or through a
  // table built by the scalar formula.
  struct Slab {
    const uint8_t* x;
    int64_t row;
    bool same;
    std::array<uint8_t, 256> table;
  };
  std::vector<Slab> slabs;
  for (int i = 2; i < ctx.num_inputs(); i += 3) {
    const Tensor* x = ctx.input(i);
    QParam px;
    QF_RETURN_IF_ERROR(ReadQParam(ctx, i + 1, i + 2, &px));
    Slab sl;
    sl.x = x->ptr<uint8_t>();
    sl.row = x->shape[size_t(axis)] * inner;
    sl.same = px.scale == py.scale && px.zp == py.zp;
    for (int byte = 0; !sl.same && byte < 256; ++byte) {
      const int32_t q = x->dtype == DType::kInt8 ? int32_t(int8_t(uint8_t(byte))) : byte;
      sl.table[size_t(byte)] = uint8_t(QuantizeValue(px.Dequant(q), py.scale, py.zp, r));
    }
    slabs.push_back(std::move(sl));
  }
  uint8_t* yd = y->ptr<uint8_t>();
  if (!fast) {
    int64_t offset = 0;  // start of this input's slab within each output row
    for (const Slab& sl : slabs) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < sl.row; ++k)
          yd[o * y_row + offset + k] =
              sl.same ? sl.x[o * sl.row + k] : sl.table[sl.x[o * sl.row + k]];
      offset += sl.row;
    }
    return Status::Ok();
  }
  if (outer == 1) {  // one long row (channels-first): each slab split inside the kernels
    int64_t offset = 0;
    for (const Slab& sl : slabs) {
      if (sl.same)
        std::memcpy(yd + offset, sl.x, size_t(sl.row));
      else
        kernels::LookupU8(ctx.kernel_config(), sl.x, sl.table.data(), yd + offset, sl.row,
                          ctx.pool);
      offset += sl.row;
    }
    return Status::Ok();
  }
  // Many rows (channels-last: a row is a pixel's channels). Short rows would
  // pay the vector lookup's set-up and scalar tail per row: a mapped input is
  // looked up whole first. Then each thread writes whole output rows, every
  // slab of them, so no cache line of y is written by two threads (per input
  // and row ranges, DenseNet's concatenations got slower with 2 threads).
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      QLinearConcatMappedBytes(ctx));
  kernels::ScratchLayout parts;
  for (Slab& sl : slabs) {
    if (sl.row >= kConcatMapRow) continue;
    const size_t at = parts.Add(size_t(outer * sl.row));  // in the order the request counted
    if (sl.same) continue;
    uint8_t* mapped = region.at<uint8_t>(at);
    kernels::LookupU8(ctx.kernel_config(), sl.x, sl.table.data(), mapped, outer * sl.row, ctx.pool);
    sl.x = mapped;
    sl.same = true;
  }
  kernels::ThreadPool* pool = outer * y_row < kMinParallelBytes ? nullptr : ctx.pool;
  kernels::ParallelFor(pool, outer, [&](int64_t o0, int64_t o1, int) {
    for (int64_t o = o0; o < o1; ++o) {
      uint8_t* dst = yd + o * y_row;
      for (const Slab& sl : slabs) {
        if (sl.same)
          std::memcpy(dst, sl.x + o * sl.row, size_t(sl.row));
        else
          kernels::LookupU8(ctx.kernel_config(), sl.x + o * sl.row, sl.table.data(), dst, sl.row,
                            nullptr);
        dst += sl.row;
      }
    }
  });
  return Status::Ok();
}

// ---- QfLookupTable ----------------------------------------------------------
// y[i] = table[uint8_t(x[i])]: the table is indexed by x's raw byte, so an
// int8 x value v reads entry uint8_t(v) (e.g. -1 -> 255). A table of shape
// [C, 256] holds one table per index along x's axis `axis` (C == x.shape[axis]):
// per-channel chains such as DequantizeLinear -> BatchNormalization -> Q.
// Wide forms (16-bit chains): a 16-bit x reads a [65536] table by its raw
// 16-bit value; the table (so y) may be 8- or 16-bit with either width of x.
// Those are per tensor only.

Status InferQfLookupTable(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* table = ctx.input(1);
  Tensor* y = ctx.output(0);
  if (!x || !table) return ctx.Invalid("inputs X and table are required");
  if (!Is8Bit(x->dtype) && !Is16Bit(x->dtype))
    return ctx.Unsupported(std::string("X dtype ") + dtype_name(x->dtype));
  if (!Is8Bit(table->dtype) && !Is16Bit(table->dtype))
    return ctx.Unsupported(std::string("table dtype ") + dtype_name(table->dtype));
  if (Is16Bit(x->dtype) || Is16Bit(table->dtype)) {
    const int64_t entries = Is16Bit(x->dtype) ? 65536 : 256;
    if (table->rank_known &&
        (table->rank() != 1 || (table->shape[0] >= 0 && table->shape[0] != entries)))
      return ctx.Invalid("a table for " + std::string(dtype_name(x->dtype)) +
                         " X must have shape [" + std::to_string(entries) + "], got " +
                         ShapeToString(table->shape));
  } else if (table->rank_known) {
    const bool per_axis = table->rank() == 2;
    if ((table->rank() != 1 && !per_axis) ||
        (table->shape.back() >= 0 && table->shape.back() != 256))
      return ctx.Invalid("table must have shape [256] or [C, 256], got " +
                         ShapeToString(table->shape));
    if (per_axis) {
      if (!ctx.attr().Has("axis")) return ctx.Invalid("a [C, 256] table needs the attribute axis");
      if (x->rank_known) {
        const int64_t axis = ctx.attr().GetInt("axis", 0);
        if (axis < 0 || axis >= x->rank())
          return ctx.Invalid("axis " + std::to_string(axis) + " out of range for X " +
                             ShapeToString(x->shape));
        const int64_t c = x->shape[size_t(axis)];
        if (c >= 0 && table->shape[0] >= 0 && c != table->shape[0])
          return ctx.Invalid("table " + ShapeToString(table->shape) + " does not match X " +
                             ShapeToString(x->shape) + " along axis " + std::to_string(axis));
      }
    }
  }
  y->dtype = table->dtype;
  CopyShape(x, y);
  return Status::Ok();
}

// y[i] = table[x[i]] for the wide forms, x and table of 1 or 2 bytes.
template <class X, class T>
void LookupWide(const Tensor& xt, const Tensor& tt, Tensor* y, kernels::ThreadPool* pool) {
  const X* x = xt.ptr<X>();
  const T* table = tt.ptr<T>();
  T* yd = y->ptr<T>();
  const int64_t n = y->numel();
  kernels::ParallelFor(n < kMinParallelBytes ? nullptr : pool, n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) yd[i] = table[x[i]];
  });
}

Status RunQfLookupTable(KernelContext& ctx) {
  const Tensor* xt = ctx.input(0);
  const Tensor* tt = ctx.input(1);
  if (Is16Bit(xt->dtype) || Is16Bit(tt->dtype)) {
    // Indexed by the raw (unsigned) value; int16 -1 reads entry 65535.
    Tensor* y = ctx.output(0);
    const bool x16 = Is16Bit(xt->dtype), t16 = Is16Bit(tt->dtype);
    if (x16 && t16) LookupWide<uint16_t, uint16_t>(*xt, *tt, y, ctx.pool);
    if (x16 && !t16) LookupWide<uint16_t, uint8_t>(*xt, *tt, y, ctx.pool);
    if (!x16 && t16) LookupWide<uint8_t, uint16_t>(*xt, *tt, y, ctx.pool);
    return Status::Ok();
  }
  const uint8_t* x = xt->ptr<uint8_t>();
  const uint8_t* table = tt->ptr<uint8_t>();
  Tensor* y = ctx.output(0);
  uint8_t* yd = y->ptr<uint8_t>();
  if (tt->rank() == 2) {
    // [outer][C][inner]: long inner runs (channels-first) use the vector
    // lookup per run; channels-last (inner == 1) looks up channel by channel.
    const int64_t axis = ctx.attr().GetInt("axis", 0), c = xt->shape[size_t(axis)];
    int64_t inner = 1;
    for (int d = int(axis) + 1; d < xt->rank(); ++d) inner *= xt->shape[size_t(d)];
    const int64_t outer = c && inner ? xt->numel() / (c * inner) : 0;
    if (inner == 1) {
      if (kernels::LookupChannelsU8(ctx.kernel_config(), x, table, yd, outer, c, ctx.pool))
        return Status::Ok();
      // Channels-last: blocks of 64 channels (16 KB of tables, one cache line
      // of each pixel) over all pixels, so the tables stay in L1.
      // Pixels are split between threads (each byte's result is its own).
      constexpr int64_t kBlock = 64;
      const bool small = outer * c < kMinParallelBytes;
      kernels::ParallelFor(small ? nullptr : ctx.pool, outer, [&](int64_t o0, int64_t o1, int) {
        for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
          const int64_t c1 = std::min(c, c0 + kBlock);
          for (int64_t o = o0; o < o1; ++o) {
            const uint8_t* xr = x + o * c;
            uint8_t* yr = yd + o * c;
            for (int64_t ch = c0; ch < c1; ++ch) yr[ch] = table[ch << 8 | xr[ch]];
          }
        }
      });
      return Status::Ok();
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t off = (o * c + ch) * inner;
        const uint8_t* t = table + ch * 256;
        if (inner >= 64 &&
            kernels::LookupU8(ctx.kernel_config(), x + off, t, yd + off, inner, nullptr))
          continue;
        for (int64_t i = 0; i < inner; ++i) yd[off + i] = t[x[off + i]];
      }
    return Status::Ok();
  }
  if (kernels::LookupU8(ctx.kernel_config(), x, table, yd, y->numel(), ctx.pool))
    return Status::Ok();
  for (int64_t i = 0; i < y->numel(); ++i) yd[i] = table[x[i]];
  return Status::Ok();
}

// ---- QfChannelLines ---------------------------------------------------------
// y = v_S for every element of channel ch (its index along `axis`), with v_0
// = x's value (int8 or uint8) and per stage s
//   v_s = clamp((v_{s-1} * mult + add) >> shift, lo, hi)
// in integers; params is int32 [S, 5, C], rows mult, add, shift, lo, hi per
// stage; y is int8 when the attribute y_signed is 1, else uint8. The
// converter writes it for per-channel chains whose every 8-bit result is a
// clamped line of the one before (kernels::ChannelLines; CollapseBytewise).

constexpr int64_t kMaxLineStages = 16;

// Checks every stage of params (a shift in [0, 30], lo <= hi, no product or
// sum outside int32 for any value the previous stage can give, the last
// range inside y's) and lays them out for the kernels.
Status MakeChannelLines(KernelContext& ctx, const Tensor& x, const Tensor& params, bool y_signed,
                        kernels::ChannelLines* l) {
  if (!params.data || params.dtype != DType::kInt32 || params.rank() != 3 || params.shape[1] != 5 ||
      params.shape[0] < 1 || params.shape[0] > kMaxLineStages || params.shape[2] < 0)
    return ctx.Invalid("params must be int32 [S, 5, C] with 1 <= S <= " +
                       std::to_string(kMaxLineStages) + ", got " + ShapeToString(params.shape));
  const int64_t stages = params.shape[0], c = params.shape[2];
  l->channels = c;
  l->stages = int(stages);
  l->x_signed = x.dtype == DType::kInt8;
  l->stride = (c + 15) / 16 * 16;
  for (auto* v : {&l->mult, &l->add, &l->shift, &l->lo, &l->hi})
    v->assign(size_t(stages * l->stride), 0);
  const int32_t* p = params.ptr<int32_t>();
  for (int64_t ch = 0; ch < c; ++ch) {
    int64_t vlo = l->x_signed ? -128 : 0, vhi = l->x_signed ? 127 : 255;
    for (int64_t st = 0; st < stages; ++st) {
      const int64_t m = p[(st * 5 + 0) * c + ch], a = p[(st * 5 + 1) * c + ch];
      const int64_t sh = p[(st * 5 + 2) * c + ch], lo = p[(st * 5 + 3) * c + ch];
      const int64_t hi = p[(st * 5 + 4) * c + ch];
      const std::string where =
          "params: stage " + std::to_string(st) + ", channel " + std::to_string(ch) + ": ";
      if (sh < 0 || sh > 30) return ctx.Invalid(where + "shift " + std::to_string(sh));
      if (lo > hi) return ctx.Invalid(where + "lo > hi");
      if (std::abs(m) * std::max(std::abs(vlo), std::abs(vhi)) + std::abs(a) >= (int64_t(1) << 31))
        return ctx.Invalid(where + "products leave int32");
      vlo = lo, vhi = hi;
      const size_t o = size_t(st * l->stride + ch);
      l->mult[o] = int32_t(m), l->add[o] = int32_t(a), l->shift[o] = int32_t(sh);
      l->lo[o] = int32_t(lo), l->hi[o] = int32_t(hi);
    }
    if (vlo < (y_signed ? -128 : 0) || vhi > (y_signed ? 127 : 255))
      return ctx.Invalid("params: channel " + std::to_string(ch) + "'s last range is not in " +
                         (y_signed ? "int8" : "uint8"));
  }
  return Status::Ok();
}

Status InferQfChannelLines(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* params = ctx.input(1);
  Tensor* y = ctx.output(0);
  if (!x || !params) return ctx.Invalid("inputs X and params are required");
  if (!Is8Bit(x->dtype)) return ctx.Unsupported(std::string("X dtype ") + dtype_name(x->dtype));
  if (params->dtype != DType::kInt32) return ctx.Invalid("params must be int32");
  if (params->rank_known &&
      (params->rank() != 3 || (params->shape[1] >= 0 && params->shape[1] != 5) ||
       (params->shape[0] >= 0 && (params->shape[0] < 1 || params->shape[0] > kMaxLineStages))))
    return ctx.Invalid("params must have shape [S, 5, C] with 1 <= S <= " +
                       std::to_string(kMaxLineStages) + ", got " + ShapeToString(params->shape));
  const int64_t axis = ctx.attr().GetInt("axis", 1);
  if (x->rank_known) {
    if (axis < 0 || axis >= x->rank())
      return ctx.Invalid("axis " + std::to_string(axis) + " out of range for X " +
                         ShapeToString(x->shape));
    const int64_t c = x->shape[size_t(axis)];
    if (params->rank_known && c >= 0 && params->shape[2] >= 0 && c != params->shape[2])
      return ctx.Invalid("params " + ShapeToString(params->shape) + " does not match X " +
                         ShapeToString(x->shape) + " along axis " + std::to_string(axis));
  }
  const bool y_signed = ctx.attr().GetInt("y_signed", 0) != 0;
  if (params->data && params->shape_known() && x->rank_known) {
    kernels::ChannelLines l;
    QF_RETURN_IF_ERROR(MakeChannelLines(ctx, *x, *params, y_signed, &l));
  }
  y->dtype = y_signed ? DType::kInt8 : DType::kUInt8;
  CopyShape(x, y);
  return Status::Ok();
}

Status PrepareQfChannelLines(KernelContext& ctx, std::shared_ptr<void>* state) {
  auto l = std::make_shared<kernels::ChannelLines>();
  QF_RETURN_IF_ERROR(MakeChannelLines(ctx, *ctx.input(0), *ctx.input(1),
                                      ctx.attr().GetInt("y_signed", 0) != 0, l.get()));
  *state = l;
  return Status::Ok();
}

Status RunQfChannelLines(KernelContext& ctx) {
  const Tensor* xt = ctx.input(0);
  Tensor* y = ctx.output(0);
  kernels::ChannelLines local;
  const auto* l = static_cast<const kernels::ChannelLines*>(ctx.state);
  if (!l) {
    QF_RETURN_IF_ERROR(
        MakeChannelLines(ctx, *xt, *ctx.input(1), ctx.attr().GetInt("y_signed", 0) != 0, &local));
    l = &local;
  }
  const int64_t axis = ctx.attr().GetInt("axis", 1);
  if (axis < 0 || axis >= xt->rank() || xt->shape[size_t(axis)] != l->channels)
    return ctx.Invalid("params for " + std::to_string(l->channels) + " channels, X " +
                       ShapeToString(xt->shape) + " along axis " + std::to_string(axis));
  const int64_t c = l->channels;
  int64_t inner = 1;
  for (int d = int(axis) + 1; d < xt->rank(); ++d) inner *= xt->shape[size_t(d)];
  const int64_t outer = c && inner ? xt->numel() / (c * inner) : 0;
  const uint8_t* x = xt->ptr<uint8_t>();
  uint8_t* yd = y->ptr<uint8_t>();
  // Channels-last (the channels contiguous): the vector kernels.
  if (inner == 1 && kernels::LineChannelsU8(ctx.kernel_config(), x, yd, outer, *l, ctx.pool))
    return Status::Ok();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (o * c + ch) * inner + i;
        int32_t v = l->x_signed ? int32_t(int8_t(x[at])) : int32_t(x[at]);
        for (int st = 0; st < l->stages; ++st) {
          const size_t k = size_t(st * l->stride + ch);
          v = std::min(std::max((v * l->mult[k] + l->add[k]) >> l->shift[k], l->lo[k]), l->hi[k]);
        }
        yd[at] = uint8_t(v);
      }
  return Status::Ok();
}

// ---- QfRequantize -----------------------------------------------------------
// Inputs: x, x_scale, x_zero_point?, y_scale, y_zero_point (its dtype is
// y's); 8/16-bit in and out, per-tensor:
//   y = saturate(nearbyint(float(x - x_zp) * (x_scale / y_scale)) + y_zp)
// between 8-bit types (a 256-entry table); with a 16-bit side it is the
// DequantizeLinear -> QuantizeLinear pair it replaces, computed literally:
//   y = saturate(nearbyint(float(x - x_zp) * x_scale / y_scale) + y_zp)

bool IsRequantDType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}

Status InferQfRequantize(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* yzp = ctx.input(4);
  Tensor* y = ctx.output(0);
  if (!x || !yzp) return ctx.Invalid("inputs x and y_zero_point are required");
  if (!IsRequantDType(x->dtype))
    return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype));
  if (!IsRequantDType(yzp->dtype))
    return ctx.Unsupported(std::string("y dtype ") + dtype_name(yzp->dtype));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 1, 2, x->dtype, "x"));
  QF_RETURN_IF_ERROR(CheckQParam(ctx, 3, 4, yzp->dtype, "y"));
  y->dtype = yzp->dtype;
  CopyShape(x, y);
  return Status::Ok();
}

Status RunQfRequantize(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QParam px, py;
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 1, 2, &px));
  QF_RETURN_IF_ERROR(ReadQParam(ctx, 3, 4, &py));
  const float mult = px.scale / py.scale;
  const QRange r = QuantRange(y->dtype);
  // 8-bit to 8-bit: each output is a function of the input byte, so the
  // scalar formula fills a 256-entry table and the SIMD lookup applies it.
  if (Is8Bit(x->dtype) && Is8Bit(y->dtype)) {
    std::array<uint8_t, 256> table;
    for (int byte = 0; byte < 256; ++byte) {
      const int32_t q = x->dtype == DType::kInt8 ? int32_t(int8_t(uint8_t(byte))) : byte;
      const float v = float(q - px.zp) * mult;
      table[size_t(byte)] = uint8_t(RoundAddSaturate(v, py.zp, r.lo, r.hi));
    }
    if (kernels::LookupU8(ctx.kernel_config(), x->ptr<uint8_t>(), table.data(), y->ptr<uint8_t>(),
                          x->numel(), ctx.pool))
      return Status::Ok();
  }
  if (Is8Bit(x->dtype) && Is8Bit(y->dtype)) {
    for (int64_t i = 0; i < x->numel(); ++i) {
      const float v = float(LoadQ(x->data, x->dtype, i) - px.zp) * mult;
      StoreQ(y->data, y->dtype, i, RoundAddSaturate(v, py.zp, r.lo, r.hi));
    }
    return Status::Ok();
  }
  // A 16-bit side: the DQ and Q kernels over blocks of float, on the stack.
  const kernels::KernelConfig& kc = ctx.kernel_config();
  const int64_t n = x->numel();
  constexpr int64_t kBlock = 4096;
  const bool x_signed = x->dtype == DType::kInt8 || x->dtype == DType::kInt16;
  const bool y_signed = y->dtype == DType::kInt8 || y->dtype == DType::kInt16;
  const size_t xe = dtype_size(x->dtype), ye = dtype_size(y->dtype);
  const int32_t xzp = px.zp, yzp = py.zp;
  kernels::ParallelFor(ctx.pool, (n + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1, int) {
    float buf[kBlock];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
      const void* xs = static_cast<const uint8_t*>(x->data) + size_t(i0) * xe;
      void* ys = static_cast<uint8_t*>(y->data) + size_t(i0) * ye;
      const auto dq = Is8Bit(x->dtype) ? kernels::DequantizeS8ToF32 : kernels::Dequantize16ToF32;
      if (!dq(kc, xs, buf, x_signed, 1, 1, len, &px.scale, &xzp, false, nullptr))
        for (int64_t i = 0; i < len; ++i) buf[i] = px.Dequant(LoadQ(x->data, x->dtype, i0 + i));
      const auto q = Is8Bit(y->dtype) ? kernels::QuantizeF32ToS8 : kernels::QuantizeF32To16;
      if (!q(kc, buf, ys, y_signed, r.lo, r.hi, 1, 1, len, &py.scale, &yzp, false, nullptr))
        for (int64_t i = 0; i < len; ++i)
          StoreQ(y->data, y->dtype, i0 + i, QuantizeValue(buf[i], py.scale, py.zp, r));
    }
  });
  return Status::Ok();
}

}  // namespace

// Data inputs for the layout planner: A and B of QLinearAdd/Mul, and the
// tensors of QLinearConcat (y_scale, y_zero_point, then x, scale, zero point each).
bool BinaryDataInputs(int index, int /*num_inputs*/) {
  return index == 0 || index == 3;
}
bool ConcatDataInputs(int index, int /*num_inputs*/) {
  return index >= 2 && (index - 2) % 3 == 0;
}

#define QF_QUANT_OPDEF(NAME, INFER, MIN_IN, MAX_IN, LAYOUT, DATA_INPUTS, DEFAULT_AXIS, TRAITS) \
  const OpDef& OpDef_##NAME() {                                                                \
    static const OpDef def = [] {                                                              \
      OpDef d = QuantOpDef(#NAME, INFER, Run##NAME, MIN_IN, MAX_IN);                           \
      d.layout = LAYOUT;                                                                       \
      d.layout_input = DATA_INPUTS;                                                            \
      d.layout_default_axis = DEFAULT_AXIS;                                                    \
      d.traits = TRAITS;                                                                       \
      return d;                                                                                \
    }();                                                                                       \
    return def;                                                                                \
  }
QF_QUANT_OPDEF(QLinearAdd, InferQLinearBinary, 7, 8, LayoutRole::kElementwise, BinaryDataInputs, 1,
               kTraitIntegerKernel | kTraitPointwise)
QF_QUANT_OPDEF(QLinearMul, InferQLinearBinary, 7, 8, LayoutRole::kElementwise, BinaryDataInputs, 1,
               kTraitIntegerKernel | kTraitPointwise)
QF_QUANT_OPDEF(QLinearLeakyRelu, InferQLinearUnary, 4, 5, LayoutRole::kElementwise, FirstInputOnly,
               1, kTraitIntegerKernel | kTraitPointwise)
QF_QUANT_OPDEF(QLinearSigmoid, InferQLinearUnary, 4, 5, LayoutRole::kElementwise, FirstInputOnly, 1,
               kTraitIntegerKernel | kTraitPointwise)
const OpDef& OpDef_QLinearConcat() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QLinearConcat", InferQLinearConcat, RunQLinearConcat, 5, 2 + 3 * 4096);
    d.layout = LayoutRole::kAxis;
    d.layout_input = ConcatDataInputs;
    d.layout_default_axis = 1;
    d.traits = kTraitIntegerKernel;
    d.scratch = QLinearConcatScratch;
    return d;
  }();
  return def;
}
// A single table has no axis; a [C, 256] table's axis follows the layout.
QF_QUANT_OPDEF(QfLookupTable, InferQfLookupTable, 2, 2, LayoutRole::kAxis, FirstInputOnly,
               kNoDefaultAxis, kTraitIntegerKernel | kTraitPointwise)
const OpDef& OpDef_QfChannelLines() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QfChannelLines", InferQfChannelLines, RunQfChannelLines, 2, 2);
    d.layout = LayoutRole::kAxis;
    d.layout_input = FirstInputOnly;
    d.layout_default_axis = 1;
    d.traits = kTraitIntegerKernel | kTraitPointwise;
    d.prepare = PrepareQfChannelLines;
    d.const_inputs = 1u << 1;  // params
    return d;
  }();
  return def;
}
QF_QUANT_OPDEF(QfRequantize, InferQfRequantize, 5, 5, LayoutRole::kElementwise, FirstInputOnly, 1,
               kTraitPointwise)
#undef QF_QUANT_OPDEF

}  // namespace qfold
