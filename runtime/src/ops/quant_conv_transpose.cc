// QfQLinearConvTranspose (qfold-internal): the integer ConvTranspose the QDQ
// folder makes of DQ -> ConvTranspose -> Q. Inputs are QLinearConv's
//   x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B (int32, [M])]
// with w in ConvTranspose layout [C, M/group, k...], and the attributes are
// ConvTranspose's plus _qmin/_qmax. Every output accumulates
//   acc = sum((x - x_zp) * (w - w_zp[m]))  in int32
// over the (input position, tap) pairs that land on it, then adds B[m] and
// requantizes exactly like QLinearConv (docs/NUMERICS.md).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/qlinear_s8.h"
#include "kernels/scratch.h"
#include "ops/conv_transpose_geometry.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

Status InferQConvTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* x_zp = ctx.input(2);
  const Tensor* w = ctx.input(3);
  const Tensor* w_scale = ctx.input(4);
  const Tensor* w_zp = ctx.input(5);
  const Tensor* y_zp = ctx.input(7);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  if (!x || !w) return ctx.Invalid("inputs x and w are required");
  if (!Is8Bit(x->dtype)) return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype));
  if (!Is8Bit(w->dtype)) return ctx.Unsupported(std::string("w dtype ") + dtype_name(w->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "x_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, w_scale, "w_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(6), "y_scale"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, x_zp, "x_zero_point", x->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, w_zp, "w_zero_point", w->dtype));
  // Without y_zero_point the output has x's dtype, as for QLinearConv.
  const DType out = y_zp ? y_zp->dtype : x->dtype;
  if (!Is8Bit(out)) return ctx.Unsupported(std::string("y dtype ") + dtype_name(out));
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, out, &range));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "x_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, x_zp, "x_zero_point", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(6), "y_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, y_zp, "y_zero_point", 0, ""));

  const int rank = x->rank_known ? x->rank() : (w->rank_known ? w->rank() : -1);
  const int64_t group = ctx.attr().GetInt("group", 1);
  if (group <= 0) return ctx.Invalid("group must be positive");
  // Per-channel weights of a grouped ConvTranspose would be indexed by the
  // group-local column of w; no exporter writes them, so they are not taken.
  if (group != 1 && ((w_scale && !MaybeScalar(w_scale)) || (w_zp && !MaybeScalar(w_zp))))
    return ctx.Unsupported("per-channel w_scale/w_zero_point with group " + std::to_string(group) +
                           " (per tensor only)");
  const int64_t m =
      w->rank_known && rank >= 2 && w->shape[1] >= 0 ? w->shape[1] * group : kUnknownDim;
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, w_scale, "w_scale", m, "output channel"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, w_zp, "w_zero_point", m, "output channel"));
  if (bias) {
    if (bias->dtype != DType::kInt32)
      return ctx.Invalid(std::string("B must be int32, got ") + dtype_name(bias->dtype));
    if (bias->rank_known) {
      if (bias->rank() != 1) return ctx.Invalid("B must be 1-D");
      if (m >= 0 && bias->shape[0] >= 0 && bias->shape[0] != m)
        return ctx.Invalid("B has " + std::to_string(bias->shape[0]) + " values, expected " +
                           std::to_string(m));
    }
  }
  if (rank < 0) {
    SetOutputsUnknown(ctx);
    y->dtype = out;
    return Status::Ok();
  }
  y->dtype = out;
  if (rank < 3) return ctx.Invalid("x must have rank >= 3, got " + std::to_string(rank));
  if (x->rank_known && w->rank_known && w->rank() != rank)
    return ctx.Invalid("w rank " + std::to_string(w->rank()) + " differs from x rank " +
                       std::to_string(rank));
  Shape in(size_t(rank - 2), kUnknownDim);
  if (x->rank_known) in.assign(x->shape.begin() + 2, x->shape.end());
  int64_t g;
  WindowGeometry geo;
  QF_RETURN_IF_ERROR(ParseConvTransposeGeometry(ctx, w, in, &g, &geo));
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  if (w->rank_known && c >= 0 && w->shape[0] >= 0 && w->shape[0] != c)
    return ctx.Invalid("w " + ShapeToString(w->shape) + " does not match x's " + std::to_string(c) +
                       " channels");
  if (c >= 0 && c % group != 0) return ctx.Invalid("channels not divisible by group");
  y->rank_known = true;
  y->shape = {x->rank_known ? x->shape[0] : kUnknownDim, m};
  y->shape.insert(y->shape.end(), geo.out.begin(), geo.out.end());
  return Status::Ok();
}

// The fast path: a transposed convolution is the ordinary convolution of the
// input spread out by the strides (stride - 1 zero-point bytes between
// pixels), padded by dilation * (k - 1) - pad, with the kernel flipped and its
// channel axes swapped. Every output then sums exactly the same non-zero
// terms as the reference, so the int32 accumulators (which wrap, and so do
// not depend on the order) and the outputs are identical. It wastes the MACs
// on the inserted bytes, but runs on the packed int8 GEMM (kernels/qlinear_s8.h).
// The state is PrepareQConvS8's of the flipped kernel.
Status PrepareQConvTranspose(KernelContext& ctx, std::shared_ptr<void>* state) {
  const Tensor* w = ctx.input(3);
  const int64_t group = ctx.attr().GetInt("group", 1);
  const int rank = w->rank();
  if ((rank != 3 && rank != 4) || !w->shape_known() || group <= 0 || w->shape[0] % group)
    return Status::Ok();
  const int64_t c = w->shape[0], mg = w->shape[1], cg = c / group, m = mg * group;
  const int64_t kh = rank == 4 ? w->shape[2] : 1, kw = w->shape[rank - 1], taps = kh * kw;
  std::vector<uint8_t> flipped(size_t(c * mg * taps));
  const uint8_t* src = w->ptr<uint8_t>();
  for (int64_t ci = 0; ci < c; ++ci) {
    const int64_t grp = ci / cg, cl = ci % cg;
    for (int64_t j = 0; j < mg; ++j)
      for (int64_t t = 0; t < taps; ++t)
        flipped[size_t(((grp * mg + j) * cg + cl) * taps + (taps - 1 - t))] =
            src[(ci * mg + j) * taps + t];
  }
  Tensor wc;
  wc.dtype = w->dtype;
  wc.shape = rank == 4 ? Shape{m, cg, kh, kw} : Shape{m, cg, kw};
  wc.data = flipped.data();
  std::shared_ptr<void> conv = kernels::PrepareQConvS8(ctx.kernel_config(), wc, group);
  if (!conv) return Status::Ok();
  *state = std::move(conv);
  return Status::Ok();
}

// The fast path's convolution of the spread-out input for the current
// shapes: its call without the quantization values, and its scratch (the
// spread input, then the convolution kernel's), laid out alike for the
// request and the run.
struct SpreadConv {
  int nsp = 0;
  int64_t n = 0, c = 0, ih = 1, iw = 1, sh = 1, sw = 1, uh = 1, uw = 1;
  Tensor spread;  // [n, c, (uh,) uw], data set by the run
  kernels::QConvCall call;
  kernels::ScratchLayout layout;
  size_t spread_at = 0, conv_at = 0, conv_bytes = 0;
};

// *ok false when the case is not covered (padding larger than the dilated
// kernel, say): the reference kernel runs instead.
Status PlanSpreadConv(const KernelContext& ctx, SpreadConv* p, bool* ok) {
  *ok = false;
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(3);
  const int nsp = x->rank() - 2;
  if (nsp != 1 && nsp != 2) return Status::Ok();
  const Shape in(x->shape.begin() + 2, x->shape.end());
  int64_t group;
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParseConvTransposeGeometry(ctx, w, in, &group, &g));
  int64_t spread[2] = {1, 1}, pad[2] = {0, 0};
  for (int a = 0; a < nsp; ++a) {
    const int64_t extent = g.dilations[a] * (g.kernel[a] - 1);
    spread[a] = (in[a] - 1) * g.strides[a] + 1;
    pad[a] = extent - g.pad_begin[a];
    const int64_t pad_end = g.out[a] + extent - pad[a] - spread[a];
    if (pad[a] < 0 || pad_end < 0 || in[a] <= 0) return Status::Ok();
  }
  p->nsp = nsp;
  p->n = x->shape[0];
  p->c = x->shape[1];
  p->sh = nsp == 2 ? g.strides[0] : 1;
  p->sw = g.strides[nsp - 1];
  p->ih = nsp == 2 ? in[0] : 1;
  p->iw = in[nsp - 1];
  p->uh = nsp == 2 ? spread[0] : 1;
  p->uw = spread[nsp - 1];
  p->spread.dtype = x->dtype;
  p->spread.shape = nsp == 2 ? Shape{p->n, p->c, p->uh, p->uw} : Shape{p->n, p->c, p->uw};
  kernels::QConvCall& call = p->call;
  call.x = &p->spread;
  call.y = ctx.output(0);
  call.ih = p->uh;
  call.iw = p->uw;
  call.oh = nsp == 2 ? g.out[0] : 1;
  call.ow = g.out[nsp - 1];
  call.kh = nsp == 2 ? g.kernel[0] : 1;
  call.kw = g.kernel[nsp - 1];
  call.dh = nsp == 2 ? g.dilations[0] : 1;
  call.dw = g.dilations[nsp - 1];
  call.pad_top = nsp == 2 ? pad[0] : 0;
  call.pad_left = pad[nsp - 1];
  // A constant weight zero point sizes the convolution's scratch; one
  // without a value counts as nonzero (the larger layout).
  const Tensor* wzp = ctx.input(5);
  call.w_zp = !wzp || wzp->data ? ReadZeroPoints(wzp) : std::vector<int32_t>{1};
  call.pool = ctx.pool;
  p->spread_at = p->layout.Add(size_t(p->n * p->c * p->uh * p->uw));
  p->conv_bytes = kernels::QConvS8Scratch(ctx.state, call).run;
  p->conv_at = p->layout.Add(p->conv_bytes);
  *ok = true;
  return Status::Ok();
}

// The reference kernel's scratch: one batch entry's int64 sums.
size_t ReferenceQConvTransposeScratch(const KernelContext& ctx) {
  const Tensor* y = ctx.output(0);
  return size_t(Product(Shape(y->shape.begin() + 1, y->shape.end()))) * sizeof(int64_t);
}

// The fast path's scratch where it is planned for these shapes, otherwise
// the reference kernel's.
Status QConvTransposeScratch(KernelContext& ctx, ScratchNeeds* needs) {
  if (ctx.state) {
    SpreadConv p;
    bool ok = false;
    QF_RETURN_IF_ERROR(PlanSpreadConv(ctx, &p, &ok));
    if (ok) {
      needs->run = p.layout.total();
      return Status::Ok();
    }
  }
  needs->run = ReferenceQConvTransposeScratch(ctx);
  return Status::Ok();
}

// Returns with *done false when the case is not covered: the reference
// kernel runs instead. *planned: the scratch was requested for this path.
Status RunQConvTransposeFast(KernelContext& ctx, float xs, const std::vector<float>& ws, float ys,
                             int32_t xzp, int32_t yzp, QRange range, bool* done, bool* planned) {
  SpreadConv p;
  bool ok = false;
  QF_RETURN_IF_ERROR(PlanSpreadConv(ctx, &p, &ok));
  if (!ok) return Status::Ok();
  *planned = true;
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      p.layout.total());
  uint8_t* spread = region.at<uint8_t>(p.spread_at);
  const int64_t plane = p.uh * p.uw;
  // The zero point's byte, so the inserted pixels contribute nothing.
  std::fill(spread, spread + p.n * p.c * plane, uint8_t(xzp & 0xff));
  const uint8_t* xd = ctx.input(0)->ptr<uint8_t>();
  for (int64_t i = 0; i < p.n * p.c; ++i)
    for (int64_t iy = 0; iy < p.ih; ++iy)
      for (int64_t ix = 0; ix < p.iw; ++ix)
        spread[i * plane + iy * p.sh * p.uw + ix * p.sw] = xd[(i * p.ih + iy) * p.iw + ix];
  p.spread.data = spread;
  kernels::QConvCall& call = p.call;
  call.x_zp = xzp;
  call.w_zp = ReadZeroPoints(ctx.input(5));
  call.x_scale = xs;
  call.w_scale = ws;
  call.y_scale = ys;
  call.y_zp = yzp;
  call.lo = range.lo;
  call.hi = range.hi;
  call.bias = ctx.input(8) ? ctx.input(8)->ptr<int32_t>() : nullptr;
  call.scratch = {region.at<uint8_t>(p.conv_at), p.conv_bytes, ctx.scratch_planned};
  *done = kernels::RunQConvS8(ctx.state, call);
  return Status::Ok();
}

Status RunQConvTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(3);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  std::vector<float> xs, ws, ys;
  if (!ReadScales(ctx.input(1), &xs) || !ReadScales(ctx.input(4), &ws) ||
      !ReadScales(ctx.input(6), &ys) || xs.size() != 1 || ys.size() != 1)
    return ctx.Invalid("cannot read the scales");
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, y->dtype, &range));
  const int32_t xzp = ReadZeroPoints(ctx.input(2))[0];
  const std::vector<int32_t> wzp = ReadZeroPoints(ctx.input(5));
  const int32_t yzp = ReadZeroPoints(ctx.input(7))[0];
  bool fast_planned = false;
  if (ctx.state) {
    bool done = false;
    QF_RETURN_IF_ERROR(
        RunQConvTransposeFast(ctx, xs[0], ws, ys[0], xzp, yzp, range, &done, &fast_planned));
    if (done) return Status::Ok();
  }
  // The reference kernel: the fallback, and the oracle of the fast path.
  const Shape in(x->shape.begin() + 2, x->shape.end());
  int64_t group;
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParseConvTransposeGeometry(ctx, w, in, &group, &g));
  const size_t nsp = in.size();
  const int64_t n = x->shape[0], c = x->shape[1], m = y->shape[1];
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_size = Product(in), out_size = Product(g.out);
  const int64_t taps = Product(g.kernel);
  const std::vector<int64_t> out_strides = ContiguousStrides(g.out);

  // acc holds the int32 sums; int64 here, wrapped to int32 at the end, which
  // equals two's-complement int32 accumulation. In scratch, unless the
  // request was the fast path's (a call it turned down allocates here).
  const kernels::ScratchRegion region(
      fast_planned ? kernels::ScratchSpan{}
                   : kernels::ScratchSpan{ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
      size_t(m * out_size) * sizeof(int64_t));
  int64_t* const acc = region.at<int64_t>(0);
  std::vector<int64_t> ip(nsp), tap(nsp);
  for (int64_t b = 0; b < n; ++b) {
    std::fill(acc, acc + m * out_size, 0);
    for (int64_t ci = 0; ci < c && in_size > 0; ++ci) {
      const int64_t grp = ci / cg;
      std::fill(ip.begin(), ip.end(), 0);
      int64_t xi = (b * c + ci) * in_size;
      do {
        const int64_t xv = LoadQ(x->data, x->dtype, xi++) - xzp;
        std::fill(tap.begin(), tap.end(), 0);
        int64_t t = 0;
        do {
          // Input position ip with tap `tap` lands at ip * stride - pad + tap * dilation.
          int64_t off = 0;
          bool inside = true;
          for (size_t a = 0; a < nsp; ++a) {
            const int64_t pos = ip[a] * g.strides[a] - g.pad_begin[a] + tap[a] * g.dilations[a];
            if (pos < 0 || pos >= g.out[a]) inside = false;
            off += pos * out_strides[a];
          }
          if (inside) {
            for (int64_t j = 0; j < mg; ++j) {
              const int64_t oc = grp * mg + j;
              const int32_t wz = wzp.size() == 1 ? wzp[0] : wzp[size_t(oc)];
              const int64_t wv = LoadQ(w->data, w->dtype, (ci * mg + j) * taps + t) - wz;
              acc[oc * out_size + off] += xv * wv;
            }
          }
          ++t;
        } while (NextIndex(g.kernel, &tap));
      } while (NextIndex(in, &ip));
    }
    for (int64_t oc = 0; oc < m; ++oc) {
      // The multiplier in float32, in exactly this order (docs/NUMERICS.md).
      const float mult = xs[0] * ws[ws.size() == 1 ? 0 : size_t(oc)] / ys[0];
      const int32_t bv = bias ? bias->ptr<int32_t>()[oc] : 0;
      for (int64_t j = 0; j < out_size; ++j) {
        const int32_t a = WrapInt32(int64_t(WrapInt32(acc[oc * out_size + j])) + bv);
        StoreQ(y->data, y->dtype, (b * m + oc) * out_size + j, Requantize(a, mult, yzp, range));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_QfQLinearConvTranspose() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QfQLinearConvTranspose", InferQConvTranspose, RunQConvTranspose,
                         /*min_inputs=*/8, /*max_inputs=*/9);
    d.prepare = PrepareQConvTranspose;
    d.scratch = QConvTransposeScratch;
    d.const_inputs = 1u << 3;  // w
    // Not kTraitSpatial: its graph outputs were never labelled NCHW (the float
    // ConvTranspose's are); labelling them would change converted models.
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = 3;
    d.weight_scale_input = 4;
    d.bias_input = 8;
    return d;
  }();
  return def;
}

}  // namespace qfold
