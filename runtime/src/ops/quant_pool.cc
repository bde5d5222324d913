// ONNX Runtime's com.microsoft QLinearAveragePool and
// QLinearGlobalAveragePool (registered under their plain names). Inputs:
// X, x_scale, x_zero_point?, y_scale, y_zero_point?; Y has X's dtype
// (int8/uint8; the global pool also int16/uint16, a16 models); attribute
// channels_last (default 0) selects NHWC layout.
// Each output is
//   y = saturate(nearbyint(float(sum(x - x_zp)) * m) + y_zp),
//   m = float(double(x_scale) / (double(count) * double(y_scale)))
// where count is the number of taps inside the input (or inside input plus
// pads with count_include_pad), per docs/NUMERICS.md
// (kernels::AverageMultiplier).
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/pool_nhwc_s8.h"
#include "kernels/scratch.h"
#include "kernels/window_taps.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

struct PoolQuant {
  float x_scale, y_scale;
  int32_t x_zp, y_zp;
};

Status CheckPoolInputs(const KernelContext& ctx, bool allow_16bit = false) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.Invalid("input X is required");
  if (!Is8Bit(x->dtype) && !(allow_16bit && Is16Bit(x->dtype)))
    return ctx.Unsupported(std::string("X dtype ") + dtype_name(x->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "x_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(3), "y_scale"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "x_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(3), "y_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(2), "x_zero_point", x->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(4), "y_zero_point", x->dtype));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(2), "x_zero_point", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(4), "y_zero_point", 0, ""));
  const int64_t cl = ctx.attr().GetInt("channels_last", 0);
  if (cl != 0 && cl != 1) return ctx.Invalid("channels_last must be 0 or 1");
  if (x->rank_known && x->rank() < 3)
    return ctx.Invalid("X must have rank >= 3, got " + ShapeToString(x->shape));
  return Status::Ok();
}

Status ReadPoolQuant(const KernelContext& ctx, PoolQuant* q) {
  std::vector<float> xs, ys;
  if (!ReadScales(ctx.input(1), &xs) || !ReadScales(ctx.input(3), &ys) || xs.size() != 1 ||
      ys.size() != 1)
    return ctx.Invalid("cannot read the scales");
  q->x_scale = xs[0];
  q->y_scale = ys[0];
  q->x_zp = ReadZeroPoints(ctx.input(2))[0];
  q->y_zp = ReadZeroPoints(ctx.input(4))[0];
  return Status::Ok();
}

int32_t AverageToQ(int64_t sum, int64_t count, const PoolQuant& q, QRange r) {
  const float m = kernels::AverageMultiplier(q.x_scale, count, q.y_scale);
  return RoundAddSaturate(float(sum) * m, q.y_zp, r.lo, r.hi);
}

// Splits a rank >= 3 shape into batch, channels and spatial dims.
void SplitLayout(const Shape& s, bool channels_last, int64_t* n, int64_t* c, Shape* spatial) {
  *n = s[0];
  *c = channels_last ? s.back() : s[1];
  spatial->assign(s.begin() + (channels_last ? 1 : 2), s.end() - (channels_last ? 1 : 0));
}

// Flat offset of (batch b, channel ch, spatial flat index sp).
int64_t Offset(bool channels_last, int64_t b, int64_t ch, int64_t sp, int64_t c, int64_t size) {
  return channels_last ? (b * size + sp) * c + ch : (b * c + ch) * size + sp;
}

kernels::QPoolParams KernelQuant(const PoolQuant& q, QRange r) {
  kernels::QPoolParams p;
  p.x_scale = q.x_scale;
  p.y_scale = q.y_scale;
  p.x_zp = q.x_zp;
  p.y_zp = q.y_zp;
  p.lo = r.lo;
  p.hi = r.hi;
  return p;
}

// ---- QLinearGlobalAveragePool -----------------------------------------------

Status InferQLinearGlobalAveragePool(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckPoolInputs(ctx, /*allow_16bit=*/true));
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  const bool cl = ctx.attr().GetInt("channels_last", 0) != 0;
  y->rank_known = true;
  y->shape = x->shape;
  for (int i = cl ? 1 : 2; i < x->rank() - (cl ? 1 : 0); ++i) y->shape[i] = 1;
  return Status::Ok();
}

// The channels-last kernel's arguments: the window covers every pixel, one
// row of ih * iw.
kernels::PoolNhwcArgs GlobalNhwcArgs(const KernelContext& ctx, int64_t n, int64_t c, int64_t size) {
  kernels::PoolNhwcArgs a;
  a.n = n;
  a.c = c;
  a.iw = size;
  a.pool = ctx.pool;
  a.scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return a;
}

// 16-bit codes: one int64 sum per channel of an image (channels-last), or
// none (channels-first sums one contiguous row at a time).
size_t Global16Scratch(bool channels_last, int64_t c) {
  return channels_last ? size_t(c) * sizeof(int64_t) : 0;
}

// OpDef::scratch: the channels-last kernel's pixel pointers or the 16-bit
// channel sums (the reference loop needs none).
Status QLinearGlobalAveragePoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(0);
  if (ctx.attr().GetInt("channels_last", 0) == 0 || !x->shape_known() || x->rank() < 2)
    return Status::Ok();
  int64_t n, c;
  Shape spatial;
  SplitLayout(x->shape, true, &n, &c, &spatial);
  if (Is16Bit(x->dtype)) {
    needs->run = Global16Scratch(true, c);
    return Status::Ok();
  }
  needs->run = kernels::QGlobalAvgPoolNhwcScratch(ctx.kernel_config(),
                                                  GlobalNhwcArgs(ctx, n, c, Product(spatial)));
  return Status::Ok();
}

// 16-bit codes: sums of (x - x_zp) over the pixels of each (image, channel)
// in int64, the average in double: 16-bit codes over many pixels leave int32
// and float's 24-bit mantissa (docs/NUMERICS.md). Channels-last keeps one
// running sum per channel (scratch); channels-first sums one plane at a time.
template <typename T>
void RunGlobal16(const T* x, T* y, bool channels_last, int64_t n, int64_t c, int64_t size,
                 const PoolQuant& q, QRange r, int64_t* sums) {
  const double m = double(q.x_scale) / (double(size) * double(q.y_scale));
  const int64_t zp_sum = int64_t(q.x_zp) * size;
  for (int64_t b = 0; b < n; ++b) {
    const T* image = x + b * c * size;
    if (channels_last) {
      for (int64_t ch = 0; ch < c; ++ch) sums[ch] = 0;
      for (int64_t s = 0; s < size; ++s)
        for (int64_t ch = 0; ch < c; ++ch) sums[ch] += image[s * c + ch];
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t sum = 0;
      if (channels_last) {
        sum = sums[ch];
      } else {
        for (int64_t s = 0; s < size; ++s) sum += image[ch * size + s];
      }
      y[b * c + ch] = T(RoundAddSaturate(double(sum - zp_sum) * m, q.y_zp, r.lo, r.hi));
    }
  }
}

Status RunQLinearGlobalAveragePool(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  PoolQuant q;
  QF_RETURN_IF_ERROR(ReadPoolQuant(ctx, &q));
  const bool cl = ctx.attr().GetInt("channels_last", 0) != 0;
  int64_t n, c;
  Shape spatial;
  SplitLayout(x->shape, cl, &n, &c, &spatial);
  const int64_t size = Product(spatial);
  const QRange r = QuantRange(y->dtype);
  if (Is16Bit(x->dtype)) {
    const kernels::ScratchRegion sums({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      Global16Scratch(cl, c));
    if (x->dtype == DType::kInt16)
      RunGlobal16(x->ptr<int16_t>(), y->ptr<int16_t>(), cl, n, c, size, q, r, sums.at<int64_t>(0));
    else
      RunGlobal16(x->ptr<uint16_t>(), y->ptr<uint16_t>(), cl, n, c, size, q, r,
                  sums.at<int64_t>(0));
    return Status::Ok();
  }
  if (cl) {
    const kernels::PoolNhwcArgs a = GlobalNhwcArgs(ctx, n, c, size);
    if (kernels::QGlobalAvgPoolNhwcS8(ctx.kernel_config(), a, KernelQuant(q, r),
                                      x->dtype == DType::kInt8, x->ptr<uint8_t>(),
                                      y->ptr<uint8_t>()))
      return Status::Ok();
    ctx.reference_path = true;
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t sum = 0;
      for (int64_t s = 0; s < size; ++s)
        sum += LoadQ(x->data, x->dtype, Offset(cl, b, ch, s, c, size)) - q.x_zp;
      StoreQ(y->data, y->dtype, Offset(cl, b, ch, 0, c, 1), AverageToQ(sum, size, q, r));
    }
  return Status::Ok();
}

// ---- QLinearAveragePool -----------------------------------------------------

Status ParseQPool(const KernelContext& ctx, const Shape& in, WindowGeometry* g) {
  std::vector<int64_t> kernel;
  if (!ctx.attr().Has("kernel_shape")) return ctx.Invalid("kernel_shape is required");
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "kernel_shape", in.size(), 1, &kernel));
  const int64_t ceil_mode = ctx.attr().GetInt("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) return ctx.Invalid("ceil_mode must be 0 or 1");
  return ComputeWindowGeometry(ctx, in, kernel, ceil_mode != 0, g);
}

Status InferQLinearAveragePool(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckPoolInputs(ctx));
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  const Attr* ks = ctx.attr().Find("kernel_shape");
  if (!ks) return ctx.Invalid("kernel_shape is required");
  const size_t nsp = ks->ints.size();
  if (x->rank_known && size_t(x->rank()) != nsp + 2)
    return ctx.Invalid("X " + ShapeToString(x->shape) + " does not match kernel_shape with " +
                       std::to_string(nsp) + " dims");
  const bool cl = ctx.attr().GetInt("channels_last", 0) != 0;
  Shape x_shape = x->rank_known ? x->shape : Shape(nsp + 2, kUnknownDim);
  int64_t n, c;
  Shape spatial;
  SplitLayout(x_shape, cl, &n, &c, &spatial);
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParseQPool(ctx, spatial, &g));
  y->rank_known = true;
  y->shape = {n};
  if (!cl) y->shape.push_back(c);
  y->shape.insert(y->shape.end(), g.out.begin(), g.out.end());
  if (cl) y->shape.push_back(c);
  return Status::Ok();
}

// The channels-last kernel's arguments for a 1-D or 2-D window.
kernels::PoolNhwcArgs WindowedNhwcArgs(const KernelContext& ctx, int64_t n, int64_t c,
                                       const Shape& in, const WindowGeometry& g) {
  const size_t a = in.size() - 1;
  kernels::PoolNhwcArgs p;
  p.n = n;
  p.c = c;
  p.iw = in[a];
  p.ow = g.out[a];
  p.kw = g.kernel[a];
  p.sw = g.strides[a];
  p.dw = g.dilations[a];
  p.pad_left = g.pad_begin[a];
  p.pad_right = g.pad_end[a];
  if (in.size() == 2) {
    p.ih = in[0];
    p.oh = g.out[0];
    p.kh = g.kernel[0];
    p.sh = g.strides[0];
    p.dh = g.dilations[0];
    p.pad_top = g.pad_begin[0];
    p.pad_bottom = g.pad_end[0];
  }
  p.count_include_pad = ctx.attr().GetInt("count_include_pad", 0) != 0;
  p.pool = ctx.pool;
  p.scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return p;
}

// OpDef::scratch: the channels-last kernel's tap pointers and multipliers.
Status QLinearAveragePoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(0);
  if (ctx.attr().GetInt("channels_last", 0) == 0 || !x->shape_known() || x->rank() < 3 ||
      x->rank() > 4)
    return Status::Ok();
  int64_t n, c;
  Shape in;
  SplitLayout(x->shape, true, &n, &c, &in);
  WindowGeometry g;
  if (!ParseQPool(ctx, in, &g).ok() || Product(g.out) == 0) return Status::Ok();
  needs->run = kernels::PoolNhwcScratch(ctx.kernel_config(), WindowedNhwcArgs(ctx, n, c, in, g), 1);
  return Status::Ok();
}

Status RunQLinearAveragePool(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  PoolQuant q;
  QF_RETURN_IF_ERROR(ReadPoolQuant(ctx, &q));
  const bool cl = ctx.attr().GetInt("channels_last", 0) != 0;
  const bool include_pad = ctx.attr().GetInt("count_include_pad", 0) != 0;
  int64_t n, c;
  Shape in;
  SplitLayout(x->shape, cl, &n, &c, &in);
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParseQPool(ctx, in, &g));
  const size_t nsp = in.size();
  const int64_t in_size = Product(in), out_size = Product(g.out);
  if (out_size == 0) return Status::Ok();
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  const QRange r = QuantRange(y->dtype);
  if (cl && (nsp == 1 || nsp == 2)) {
    const kernels::PoolNhwcArgs p = WindowedNhwcArgs(ctx, n, c, in, g);
    if (kernels::QAvgPoolNhwcS8(ctx.kernel_config(), p, KernelQuant(q, r), x->dtype == DType::kInt8,
                                x->ptr<uint8_t>(), y->ptr<uint8_t>()))
      return Status::Ok();
  }
  ctx.reference_path = true;
  // Only the taps inside the input are visited (kernels/window_taps.h): the
  // kernel may have far more, all in padding.
  std::vector<int64_t> o(nsp, 0), tap(nsp, 0), start(nsp), range(nsp);
  std::vector<kernels::WindowTaps> w(nsp);
  for (int64_t j = 0; j < out_size; ++j) {
    int64_t count = 1, padded = 1;
    for (size_t a = 0; a < nsp; ++a) {
      start[a] = o[a] * g.strides[a] - g.pad_begin[a];
      w[a] = kernels::TapsOfWindow(start[a], g.kernel[a], g.dilations[a], in[a], g.pad_end[a]);
      range[a] = w[a].hi - w[a].lo;
      count *= range[a];
      // With ceil_mode a window may reach past the end padding; those taps never count.
      padded = kernels::SaturatingCount(padded, w[a].padded);
    }
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        int64_t sum = 0;
        if (count > 0) {
          std::fill(tap.begin(), tap.end(), 0);
          do {
            int64_t off = 0;
            for (size_t a = 0; a < nsp; ++a)
              off += (start[a] + (w[a].lo + tap[a]) * g.dilations[a]) * in_strides[a];
            sum += LoadQ(x->data, x->dtype, Offset(cl, b, ch, off, c, in_size)) - q.x_zp;
          } while (NextIndex(range, &tap));
        }
        StoreQ(y->data, y->dtype, Offset(cl, b, ch, j, c, out_size),
               AverageToQ(sum, include_pad ? padded : count, q, r));
      }
    NextIndex(g.out, &o);
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_QLinearGlobalAveragePool() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QLinearGlobalAveragePool", InferQLinearGlobalAveragePool,
                         RunQLinearGlobalAveragePool, /*min_inputs=*/4, /*max_inputs=*/5);
    d.scratch = QLinearGlobalAveragePoolScratch;
    d.layout = LayoutRole::kChannelsLast;
    d.traits = kTraitSpatial | kTraitIntegerKernel;
    return d;
  }();
  return def;
}

const OpDef& OpDef_QLinearAveragePool() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QLinearAveragePool", InferQLinearAveragePool, RunQLinearAveragePool,
                         /*min_inputs=*/4, /*max_inputs=*/5);
    d.scratch = QLinearAveragePoolScratch;
    d.layout = LayoutRole::kChannelsLast;
    d.traits = kTraitSpatial | kTraitIntegerKernel;
    return d;
  }();
  return def;
}

}  // namespace qfold
