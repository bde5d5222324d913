// QLinearConv and ConvInteger: N-d integer convolution with groups, strides,
// dilations and pads/auto_pad. Both accumulate
//   acc = sum((x - x_zp) * (w - w_zp))  in int32
// over each window, skipping taps that read padding (padding holds x_zp, so
// its term is 0). ConvInteger outputs acc; QLinearConv adds the int32 bias
// and requantizes per docs/NUMERICS.md. QLinearConv also takes 16-bit
// activations (x and/or y int16/uint16, weights 8-bit: a16w8), which
// accumulate exactly in int64 and requantize in double (RequantizeWide).
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/channel_fold.h"
#include "kernels/conv_a16_nhwc.h"
#include "kernels/conv_nhwc_s8.h"
#include "kernels/dwconv_nhwc_s8.h"
#include "kernels/kernel_config.h"
#include "kernels/qlinear_s8.h"
#include "kernels/scratch.h"
#include "ops/channels_last.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// Input positions of the operands in each op's input list.
struct ConvInputs {
  int x, x_zp, w, w_zp;
};
constexpr ConvInputs kQLinearConvInputs{0, 2, 3, 5};
constexpr ConvInputs kConvIntegerInputs{0, 2, 1, 3};

struct QConvParams {
  int64_t group = 1;
  WindowGeometry geo;
};

// Reads group, kernel_shape and the window attributes; the output spatial
// dims are unknown when the kernel dims are.
Status ParseQConv(const KernelContext& ctx, const ConvInputs& in, int nsp, QConvParams* p) {
  const Tensor* x = ctx.input(in.x);
  const Tensor* w = ctx.input(in.w);
  p->group = ctx.attr().GetInt("group", 1);
  if (p->group <= 0) return ctx.Invalid("group must be positive");
  std::vector<int64_t> kernel;
  bool kernel_known = true;
  if (ctx.attr().Has("kernel_shape")) {
    QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "kernel_shape", size_t(nsp), 1, &kernel));
    if (w->rank_known)
      for (int i = 0; i < nsp; ++i)
        if (w->shape[2 + i] >= 0 && w->shape[2 + i] != kernel[i])
          return ctx.Invalid("kernel_shape does not match W's shape " + ShapeToString(w->shape));
  } else if (w->rank_known) {
    kernel.assign(w->shape.begin() + 2, w->shape.end());
    for (int64_t k : kernel)
      if (k < 0) kernel_known = false;
  } else {
    kernel_known = false;
  }
  Shape in_spatial(size_t(nsp), kUnknownDim);
  if (x->rank_known) in_spatial.assign(x->shape.begin() + 2, x->shape.end());
  if (!kernel_known) {
    p->geo.out.assign(size_t(nsp), kUnknownDim);
    return Status::Ok();
  }
  return ComputeWindowGeometry(ctx, in_spatial, kernel, /*ceil_mode=*/false, &p->geo);
}

// Shared shape and dtype checks; sets y's shape (dtype is the caller's).
// *m receives W's output channel count (kUnknownDim if unknown).
Status InferQConvShape(KernelContext& ctx, const ConvInputs& in, int64_t* m, bool a16 = false) {
  const Tensor* x = ctx.input(in.x);
  const Tensor* w = ctx.input(in.w);
  const Tensor* x_zp = ctx.input(in.x_zp);
  const Tensor* w_zp = ctx.input(in.w_zp);
  Tensor* y = ctx.output(0);
  if (!x || !w) return ctx.Invalid("inputs x and w are required");
  if (!Is8Bit(x->dtype) && !(a16 && Is16Bit(x->dtype)))
    return ctx.Unsupported(std::string("x dtype ") + dtype_name(x->dtype));
  if (!Is8Bit(w->dtype)) return ctx.Unsupported(std::string("w dtype ") + dtype_name(w->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, x_zp, "x_zero_point", x->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, w_zp, "w_zero_point", w->dtype));
  *m = kUnknownDim;
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, x_zp, "x_zero_point", 0, ""));

  const int rank = x->rank_known ? x->rank() : (w->rank_known ? w->rank() : -1);
  if (rank < 0) {
    QF_RETURN_IF_ERROR(CheckParamShape(ctx, w_zp, "w_zero_point", *m, "output channel"));
    const DType dt = y->dtype;
    SetOutputsUnknown(ctx);
    y->dtype = dt;
    return Status::Ok();
  }
  if (rank < 3) return ctx.Invalid("x must have rank >= 3, got " + std::to_string(rank));
  // w's rank is checked before its dims are read: a rank-0 w has no shape[0].
  if (w->rank_known && w->rank() != rank)
    return ctx.Invalid("w rank " + std::to_string(w->rank()) + " differs from x rank " +
                       std::to_string(rank));
  *m = w->rank_known ? w->shape[0] : kUnknownDim;
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, w_zp, "w_zero_point", *m, "output channel"));
  QConvParams p;
  QF_RETURN_IF_ERROR(ParseQConv(ctx, in, rank - 2, &p));
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  if (w->rank_known && c >= 0 && w->shape[1] >= 0 && w->shape[1] * p.group != c)
    return ctx.Invalid("x has " + std::to_string(c) + " channels but w " + ShapeToString(w->shape) +
                       " with group " + std::to_string(p.group) + " expects " +
                       std::to_string(w->shape[1] * p.group));
  if (*m >= 0 && *m % p.group != 0)
    return ctx.Invalid("w's output channels " + std::to_string(*m) + " not divisible by group " +
                       std::to_string(p.group));
  y->rank_known = true;
  y->shape = {x->rank_known ? x->shape[0] : kUnknownDim, *m};
  y->shape.insert(y->shape.end(), p.geo.out.begin(), p.geo.out.end());
  return Status::Ok();
}

// ConvAccumulate's scratch for the current shapes: one group's column
// matrix (int32) and one filter's sums (int64), laid out alike for the
// request (ReferenceConvScratch) and the run.
struct RefConvParts {
  kernels::ScratchLayout layout;
  size_t col = 0, sum = 0;
};

Status PlanConvAccumulate(const KernelContext& ctx, const ConvInputs& in, QConvParams* p,
                          RefConvParts* parts) {
  const Tensor* x = ctx.input(in.x);
  const Tensor* w = ctx.input(in.w);
  const int nsp = x->rank() - 2;
  QF_RETURN_IF_ERROR(ParseQConv(ctx, in, nsp, p));
  const int64_t out_size = Product(p->geo.out);
  if (out_size == 0 || x->shape[0] == 0 || w->shape[0] == 0) return Status::Ok();
  const int64_t rows = x->shape[1] / p->group * Product(p->geo.kernel);
  parts->col = parts->layout.Add(size_t(rows * out_size) * sizeof(int32_t));
  parts->sum = parts->layout.Add(size_t(out_size) * sizeof(int64_t));
  return Status::Ok();
}

// The reference kernel's scratch request (OpDef::scratch), for the sessions
// whose configuration runs it: no prepared fast kernel, or one that does
// not take these shapes.
Status ReferenceConvScratch(const KernelContext& ctx, const ConvInputs& in, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(in.x);
  if (x->rank() < 3) return Status::Ok();
  QConvParams p;
  RefConvParts parts;
  QF_RETURN_IF_ERROR(PlanConvAccumulate(ctx, in, &p, &parts));
  needs->run = parts.layout.total();
  return Status::Ok();
}

// Calls emit(b, oc, sums) for every image b and output channel oc with
// sums[j] = sum((x - x_zp) * (w - w_zp[oc])) over output position j's
// window, exact (callers wrap to int32 where the op accumulates in int32).
// Each group's windows are first unrolled into a column matrix of
// (x - x_zp) values, [cg * prod(kernel)] x [prod(out)], 0 where a tap reads
// padding; then every filter of the group is multiplied into it. Both live
// in `scratch` (planned by ReferenceConvScratch, else allocated here).
template <class Emit>
Status ConvAccumulate(const KernelContext& ctx, const ConvInputs& in,
                      const kernels::ScratchSpan& scratch, Emit emit) {
  const Tensor* x = ctx.input(in.x);
  const Tensor* w = ctx.input(in.w);
  const int nsp = x->rank() - 2;
  QConvParams p;
  RefConvParts parts;
  QF_RETURN_IF_ERROR(PlanConvAccumulate(ctx, in, &p, &parts));
  const WindowGeometry& g = p.geo;
  const int32_t xzp = ReadZeroPoints(ctx.input(in.x_zp))[0];
  const std::vector<int32_t> wzp = ReadZeroPoints(ctx.input(in.w_zp));

  const int64_t n = x->shape[0], c = x->shape[1], m = w->shape[0];
  const int64_t cg = c / p.group, mg = m / p.group;
  const Shape in_sp(x->shape.begin() + 2, x->shape.end());
  const int64_t in_size = Product(in_sp), out_size = Product(g.out);
  const int64_t taps = Product(g.kernel);
  const int64_t rows = cg * taps;
  const std::vector<int64_t> in_strides = ContiguousStrides(in_sp);
  if (out_size == 0 || n == 0 || m == 0) return Status::Ok();

  const kernels::ScratchRegion region(scratch, parts.layout.total());
  int32_t* col = region.at<int32_t>(parts.col);
  int64_t* sum = region.at<int64_t>(parts.sum);
  std::vector<int64_t> tap(static_cast<size_t>(nsp)), o(static_cast<size_t>(nsp));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const int64_t plane0 = (b * c + grp * cg) * in_size;
      int32_t* dst = col;
      for (int64_t ch = 0; ch < cg; ++ch) {
        std::fill(tap.begin(), tap.end(), 0);
        do {
          std::fill(o.begin(), o.end(), 0);
          do {
            int64_t off = 0;
            bool inside = true;
            for (int a = 0; a < nsp; ++a) {
              const int64_t pos = o[a] * g.strides[a] - g.pad_begin[a] + tap[a] * g.dilations[a];
              if (pos < 0 || pos >= in_sp[a]) inside = false;
              off += pos * in_strides[a];
            }
            *dst++ = inside ? LoadQ(x->data, x->dtype, plane0 + ch * in_size + off) - xzp : 0;
          } while (NextIndex(g.out, &o));
        } while (NextIndex(g.kernel, &tap));
      }
      for (int64_t oc = grp * mg; oc < (grp + 1) * mg; ++oc) {
        const int32_t wz = wzp.size() == 1 ? wzp[0] : wzp[size_t(oc)];
        std::fill(sum, sum + out_size, 0);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t wv = LoadQ(w->data, w->dtype, oc * rows + r) - wz;
          const int32_t* crow = col + r * out_size;
          for (int64_t j = 0; j < out_size; ++j) sum[j] += wv * crow[j];
        }
        emit(b, oc, static_cast<const int64_t*>(sum));
      }
    }
  }
  return Status::Ok();
}

// ---- QLinearConv ------------------------------------------------------------

Status InferQLinearConvChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* y_zp = ctx.input(7);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  if (!x) return ctx.Invalid("input x is required");
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "x_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(4), "w_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(6), "y_scale"));
  // Without y_zero_point the output has x's dtype (ONNX reference behaviour).
  const DType out = y_zp ? y_zp->dtype : x->dtype;
  if (!Is8Bit(out) && !Is16Bit(out))
    return ctx.Unsupported(std::string("y dtype ") + dtype_name(out));
  y->dtype = out;
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, out, &range));
  int64_t m;
  QF_RETURN_IF_ERROR(InferQConvShape(ctx, kQLinearConvInputs, &m, /*a16=*/true));
  y->dtype = out;
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "x_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(4), "w_scale", m, "output channel"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(6), "y_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, y_zp, "y_zero_point", 0, ""));
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
  return Status::Ok();
}

Status InferQLinearConv(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? InferViaChannelsFirst(ctx, InferQLinearConvChannelsFirst)
            : InferQLinearConvChannelsFirst(ctx);
}

// Prepared weights of a channels-last convolution: depthwise and GEMM-based
// convolutions have separate kernel families.
struct ChannelsLastConvState {
  bool depthwise = false;
  bool a16 = false;  // 16-bit activations (conv_a16_nhwc.h)
  std::shared_ptr<void> kernel;
};

// QfConvDequant's float epilogue: y = post(clamp(fma(float(acc), mult[m],
// bias[m]), lo, hi)). Arrays padded like kernels::ChannelParams so the
// microkernels may read a whole panel past the last channel.
struct DequantEpilogue {
  std::vector<float> mult, bias;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  FusedActivation post;  // what the clamp cannot express (Sigmoid, ...)
};

// Packs the constant weights for the SIMD kernels (kernels/qlinear_s8.h,
// conv_nhwc_s8.h, dwconv_nhwc_s8.h); no state (reference kernel only) when
// no fast kernel applies.
Status PrepareQLinearConv(KernelContext& ctx, std::shared_ptr<void>* state) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  const Tensor& w = *ctx.input(3);
  const int64_t group = ctx.attr().GetInt("group", 1);
  // a16w8: channels-last only (the layout the converter plans).
  const Tensor* x = ctx.input(0);
  const Tensor* y = ctx.output(0);
  if ((x && Is16Bit(x->dtype)) || (y && Is16Bit(y->dtype))) {
    if (!cl) return Status::Ok();
    auto s = std::make_shared<ChannelsLastConvState>();
    s->a16 = true;
    s->kernel =
        kernels::PrepareQConvA16Nhwc(ctx.kernel_config(), w, group, ReadZeroPoints(ctx.input(5)));
    if (s->kernel) *state = s;
    return Status::Ok();
  }
  if (!cl) {
    *state = kernels::PrepareQConvS8(ctx.kernel_config(), w, group);
    return Status::Ok();
  }
  auto s = std::make_shared<ChannelsLastConvState>();
  s->depthwise = w.rank() >= 3 && w.shape[1] == 1 && group > 1 && w.shape[0] == group;
  const std::vector<int64_t> dilations = ctx.attr().GetInts("dilations");
  const int64_t dilation_w = dilations.empty() ? 1 : dilations.back();
  // The integer Winograd's filters only where its calls can run it (stride
  // and dilation 1).
  const std::vector<int64_t> strides = ctx.attr().GetInts("strides");
  auto all_one = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t e) { return e == 1; });
  };
  const bool winograd = all_one(strides) && all_one(dilations);
  s->kernel = s->depthwise ? kernels::PrepareDwConvNhwcS8(ctx.kernel_config(), w, group)
                           : kernels::PrepareQConvNhwcS8(ctx.kernel_config(), w, group, dilation_w,
                                                         winograd);
  if (s->kernel) *state = s;
  return Status::Ok();
}

// The kernels' window geometry of a 1-D (height 1) or 2-D convolution from
// its channels-first input shape.
void SetCallGeometry(const WindowGeometry& g, const Shape& x_cf, int nsp, kernels::QConvCall* c) {
  const int a = nsp - 1;  // the last (width) axis
  c->iw = x_cf[size_t(2 + a)];
  c->ow = g.out[a];
  c->kw = g.kernel[a];
  c->sw = g.strides[a];
  c->dw = g.dilations[a];
  c->pad_left = g.pad_begin[a];
  if (nsp == 2) {
    c->ih = x_cf[2];
    c->oh = g.out[0];
    c->kh = g.kernel[0];
    c->sh = g.strides[0];
    c->dh = g.dilations[0];
    c->pad_top = g.pad_begin[0];
  }
}

// Zero points for a call; a scratch request (`run` false) is made at plan
// time, when only constants hold values: the activation's zero point is not
// read, a weight zero point without a value counts as nonzero (the kernels'
// larger layout).
void SetCallZeroPoints(const Tensor* x_zp, const Tensor* w_zp, bool run, kernels::QConvCall* c) {
  if (run) c->x_zp = ReadZeroPoints(x_zp)[0];
  c->w_zp = !w_zp || w_zp->data ? ReadZeroPoints(w_zp) : std::vector<int32_t>{1};
}

// The kernels' call for a 1-D or 2-D convolution (geometry, tensors, zero
// points, threads, scratch); *ok false for other ranks. `run` false: for the
// scratch request (SetCallZeroPoints).
Status MakeQConvCall(KernelContext& ctx, kernels::QConvCall* c, bool* cl, bool* ok,
                     bool run = true) {
  *ok = false;
  const Tensor* x = ctx.input(0);
  const int nsp = x->rank() - 2;
  if (nsp != 1 && nsp != 2) return Status::Ok();
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, cl));
  // Geometry from a channels-first view; the kernels get the real tensors.
  // Swapped in place, not copied: this runs on every inference.
  Tensor x_cf;
  x_cf.dtype = x->dtype;
  x_cf.shape = *cl ? ChannelsFirstShape(x->shape) : x->shape;
  Tensor* const x_real = ctx.inputs[0];
  ctx.inputs[0] = &x_cf;
  QConvParams p;
  const Status parsed = ParseQConv(ctx, kQLinearConvInputs, nsp, &p);
  ctx.inputs[0] = x_real;
  QF_RETURN_IF_ERROR(parsed);
  c->x = ctx.input(0);
  c->y = ctx.output(0);
  SetCallGeometry(p.geo, x_cf.shape, nsp, c);
  SetCallZeroPoints(ctx.input(2), ctx.input(5), run, c);
  c->pool = ctx.pool;
  c->scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  *ok = true;
  return Status::Ok();
}

// Whether the session planned the fast kernels' scratch (prepared weights,
// a covered rank) rather than the reference kernel's.
Status FastConvPlanned(KernelContext& ctx, bool* fast) {
  kernels::QConvCall c;
  bool cl = false;
  *fast = false;
  if (ctx.state) QF_RETURN_IF_ERROR(MakeQConvCall(ctx, &c, &cl, fast, /*run=*/false));
  return Status::Ok();
}

// The scratch the reference kernel (ConvAccumulate) runs in: the planned
// one when the session planned it, else none (a fast kernel that turned
// the call down at run time: the reference allocates its own, like the
// channels-last fallback's copies).
kernels::ScratchSpan ReferenceSpan(const KernelContext& ctx, bool fast_planned) {
  if (fast_planned) return {};
  return {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
}

// The channels-first reference kernel's scratch (ConvAccumulate), for
// QLinearConv and QfConvDequant: on a channels-first call without fast
// kernels, and on the channels-last fallback's channels-first view.
Status QConvReferenceScratch(KernelContext& ctx, ScratchNeeds* needs) {
  return ReferenceConvScratch(ctx, kQLinearConvInputs, needs);
}

// QLinearConv's and QfConvDequant's scratch (OpDef::scratch): the fast
// kernels' RunQLinearConvFast calls, or the channels-first reference
// kernel's; a channels-last call without fast kernels (FastConvPlanned, as
// the run decides) runs through RunViaChannelsFirst: its copies and the
// reference kernel's scratch.
Status QConvScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvPlanned(ctx, &fast));
  if (!fast) {
    bool cl = false;
    QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
    return cl ? ChannelsFirstScratch(ctx, QConvReferenceScratch, needs)
              : QConvReferenceScratch(ctx, needs);
  }
  kernels::QConvCall c;
  bool cl = false, ok = false;
  QF_RETURN_IF_ERROR(MakeQConvCall(ctx, &c, &cl, &ok, /*run=*/false));
  if (!cl) {  // 8-bit QLinearConv (the others prepare no channels-first state)
    *needs = kernels::QConvS8Scratch(ctx.state, c);
    return Status::Ok();
  }
  const auto& s = *static_cast<const ChannelsLastConvState*>(ctx.state);
  if (s.a16) {
    needs->run = kernels::QConvA16NhwcScratch(s.kernel.get(), c);
  } else if (s.depthwise) {
    needs->run = kernels::DwConvNhwcS8Scratch(s.kernel.get(), c);
  } else {
    *needs = kernels::QConvNhwcS8Scratch(s.kernel.get(), c);
  }
  return Status::Ok();
}

// The fast path for 1-D and 2-D convolutions with prepared weights; *done
// stays false when the kernels do not cover the case.
Status RunQLinearConvFast(KernelContext& ctx, float xs, const std::vector<float>& ws, float ys,
                          int32_t yzp, QRange range, bool* done,
                          const DequantEpilogue* dq = nullptr) {
  kernels::QConvCall c;
  bool cl = false, ok = false;
  QF_RETURN_IF_ERROR(MakeQConvCall(ctx, &c, &cl, &ok));
  if (!ok) return Status::Ok();
  c.x_scale = xs;
  c.w_scale = ws;
  c.y_scale = ys;
  c.y_zp = yzp;
  c.lo = range.lo;
  c.hi = range.hi;
  c.bias = ctx.input(8) ? ctx.input(8)->ptr<int32_t>() : nullptr;
  if (dq) {
    c.dq_mult = dq->mult.data();
    c.dq_bias = dq->bias.data();
    c.dq_lo = dq->lo;
    c.dq_hi = dq->hi;
  }
  if (!cl) {
    *done = kernels::RunQConvS8(ctx.state, c);
  } else {
    const auto& s = *static_cast<const ChannelsLastConvState*>(ctx.state);
    *done = s.a16         ? kernels::RunQConvA16Nhwc(s.kernel.get(), c)
            : s.depthwise ? kernels::RunDwConvNhwcS8(s.kernel.get(), c)
                          : kernels::RunQConvNhwcS8(s.kernel.get(), c);
  }
  return Status::Ok();
}

Status RunQLinearConvChannelsFirst(KernelContext& ctx) {
  const Tensor* w = ctx.input(3);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  std::vector<float> xs, ws, ys;
  if (!ReadScales(ctx.input(1), &xs) || !ReadScales(ctx.input(4), &ws) ||
      !ReadScales(ctx.input(6), &ys) || xs.size() != 1 || ys.size() != 1)
    return ctx.Invalid("cannot read the scales");
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, y->dtype, &range));
  const int32_t yzp = ReadZeroPoints(ctx.input(7))[0];
  if (ctx.state) {
    bool done = false;
    QF_RETURN_IF_ERROR(RunQLinearConvFast(ctx, xs[0], ws, ys[0], yzp, range, &done));
    if (done) return Status::Ok();
    ctx.reference_path = true;
  }
  // The reference kernel: the fallback, and the oracle of the fast path.
  const int64_t m = w->shape[0];
  const int64_t planes = y->shape[0] * m;
  const int64_t out_size = planes ? y->numel() / planes : 0;
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvPlanned(ctx, &fast));
  const kernels::ScratchSpan scratch = ReferenceSpan(ctx, fast);
  if (Is16Bit(ctx.input(0)->dtype) || Is16Bit(y->dtype)) {
    return ConvAccumulate(
        ctx, kQLinearConvInputs, scratch, [&](int64_t b, int64_t oc, const int64_t* acc) {
          const double mult = WideMultiplier(xs[0], ws[ws.size() == 1 ? 0 : size_t(oc)], ys[0]);
          const int64_t bv = bias ? bias->ptr<int32_t>()[oc] : 0;
          const int64_t at = (b * m + oc) * out_size;
          for (int64_t j = 0; j < out_size; ++j)
            StoreQ(y->data, y->dtype, at + j, RequantizeWide(acc[j] + bv, mult, yzp, range));
        });
  }
  return ConvAccumulate(ctx, kQLinearConvInputs, scratch,
                        [&](int64_t b, int64_t oc, const int64_t* acc) {
                          // The multiplier in float32, in exactly this order (docs/NUMERICS.md).
                          const float mult = xs[0] * ws[ws.size() == 1 ? 0 : size_t(oc)] / ys[0];
                          const int32_t bv = bias ? bias->ptr<int32_t>()[oc] : 0;
                          const int64_t at = (b * m + oc) * out_size;
                          for (int64_t j = 0; j < out_size; ++j) {
                            const int32_t a = WrapInt32(int64_t(acc[j]) + bv);
                            StoreQ(y->data, y->dtype, at + j, Requantize(a, mult, yzp, range));
                          }
                        });
}

Status RunQLinearConv(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return RunQLinearConvChannelsFirst(ctx);
  if (ctx.state) {
    std::vector<float> xs, ws, ys;
    QRange range;
    if (!ReadScales(ctx.input(1), &xs) || !ReadScales(ctx.input(4), &ws) ||
        !ReadScales(ctx.input(6), &ys) || xs.size() != 1 || ys.size() != 1)
      return ctx.Invalid("cannot read the scales");
    QF_RETURN_IF_ERROR(ReadClampRange(ctx, ctx.output(0)->dtype, &range));
    bool done = false;
    QF_RETURN_IF_ERROR(
        RunQLinearConvFast(ctx, xs[0], ws, ys[0], ReadZeroPoints(ctx.input(7))[0], range, &done));
    if (done) return Status::Ok();
    ctx.reference_path = true;
  }
  // QConvScratch planned the fallback's scratch when no fast kernel was planned.
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvPlanned(ctx, &fast));
  return RunViaChannelsFirst(ctx, RunQLinearConvChannelsFirst, QConvReferenceScratch, !fast);
}

// ---- QfConvDequant -----------------------------------------------------------
// QLinearConv's integer convolution with a float output, for convolutions
// whose 8-bit inputs come through DequantizeLinear but whose output stays
// float (converter/passes/fold_qdq_float_output.cc):
//   y = act(fma(float(acc), x_scale * w_scale[m] (* out_scale[m]), B[m]))
// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, then optional
// float B [M] and out_scale [M] (a folded BatchNormalization's multiplier;
// B then holds the folded shift). act: the fused-activation attributes
// (core/activation.h); Relu and Clip become the epilogue's clamp.

constexpr int kDequantBias = 6, kDequantOutScale = 7;

Status CheckChannelFloats(const KernelContext& ctx, int i, const char* what, int64_t m) {
  const Tensor* t = ctx.input(i);
  if (!t) return Status::Ok();
  if (t->dtype != DType::kFloat32)
    return ctx.Invalid(std::string(what) + " must be float32, got " + dtype_name(t->dtype));
  if (t->rank_known && (t->rank() != 1 || (m >= 0 && t->shape[0] >= 0 && t->shape[0] != m)))
    return ctx.Invalid(std::string(what) + " has shape " + ShapeToString(t->shape) +
                       ", expected [" + std::to_string(m) + "] (one value per output channel)");
  return Status::Ok();
}

Status InferQfConvDequantChannelsFirst(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  if (!ctx.input(0)) return ctx.Invalid("input x is required");
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "x_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(4), "w_scale"));
  y->dtype = DType::kFloat32;
  int64_t m;
  QF_RETURN_IF_ERROR(InferQConvShape(ctx, kQLinearConvInputs, &m));
  y->dtype = DType::kFloat32;
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "x_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(4), "w_scale", m, "output channel"));
  QF_RETURN_IF_ERROR(CheckChannelFloats(ctx, kDequantBias, "B", m));
  QF_RETURN_IF_ERROR(CheckChannelFloats(ctx, kDequantOutScale, "out_scale", m));
  Status st;
  FusedActivation::FromAttrs(ctx.attr(), &st);
  return st;
}

Status InferQfConvDequant(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? InferViaChannelsFirst(ctx, InferQfConvDequantChannelsFirst)
            : InferQfConvDequantChannelsFirst(ctx);
}

// The per-channel multipliers, bias and activation for m output channels.
Status ReadDequantEpilogue(const KernelContext& ctx, int64_t m, DequantEpilogue* e) {
  std::vector<float> xs, ws;
  if (!ReadScales(ctx.input(1), &xs) || !ReadScales(ctx.input(4), &ws) || xs.size() != 1 ||
      (ws.size() != 1 && int64_t(ws.size()) != m))
    return ctx.Invalid("cannot read the scales");
  const Tensor* bias = ctx.input(kDequantBias);
  const Tensor* out_scale = ctx.input(kDequantOutScale);
  if ((bias && bias->numel() != m) || (out_scale && out_scale->numel() != m))
    return ctx.Invalid("B and out_scale need one value per output channel");
  const size_t padded = size_t(kernels::RoundUpTo(m, 64) + 64);
  e->mult.assign(padded, 0.f);
  e->bias.assign(padded, 0.f);
  for (int64_t c = 0; c < m; ++c) {
    // In this order in every path, so all kernels round alike.
    float mult = xs[0] * ws[ws.size() == 1 ? 0 : size_t(c)];
    if (out_scale) mult *= out_scale->ptr<float>()[c];
    e->mult[size_t(c)] = mult;
    e->bias[size_t(c)] = bias ? bias->ptr<float>()[c] : 0.f;
  }
  Status st;
  const FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  QF_RETURN_IF_ERROR(st);
  e->lo = -std::numeric_limits<float>::infinity();
  e->hi = std::numeric_limits<float>::infinity();
  e->post = FusedActivation();
  if (act.affine) {
    e->post = act;
  } else if (act.kind == FusedActivation::kRelu) {
    e->lo = 0.f;
  } else if (act.kind == FusedActivation::kClip) {
    e->lo = act.min;
    e->hi = act.max;
  } else {
    e->post = act;
  }
  return Status::Ok();
}

// The reference kernel: exact int32 accumulation, then the epilogue in
// scalar float with the same fused multiply-add as the microkernels.
Status RunQfConvDequantChannelsFirst(KernelContext& ctx) {
  const int64_t m = ctx.input(3)->shape[0];
  Tensor* y = ctx.output(0);
  DequantEpilogue e;
  QF_RETURN_IF_ERROR(ReadDequantEpilogue(ctx, m, &e));
  const int64_t planes = y->shape[0] * m;
  const int64_t out_size = planes ? y->numel() / planes : 0;
  float* out = y->ptr<float>();
  // Channels-first prepares no state: the session planned this kernel's scratch.
  QF_RETURN_IF_ERROR(ConvAccumulate(
      ctx, kQLinearConvInputs, ReferenceSpan(ctx, ctx.state != nullptr),
      [&](int64_t b, int64_t oc, const int64_t* acc) {
        float* o = out + (b * m + oc) * out_size;
        for (int64_t j = 0; j < out_size; ++j) {
          const float v =
              std::fma(float(WrapInt32(acc[j])), e.mult[size_t(oc)], e.bias[size_t(oc)]);
          o[j] = v < e.lo ? e.lo : (v > e.hi ? e.hi : v);  // NaN passes, as in the kernels
        }
      }));
  e.post.Apply(out, y->numel());
  return Status::Ok();
}

// Channels-last: the kernels of QLinearConv's channels-last path with their
// float epilogue. Nothing to prepare for channels-first.
Status PrepareQfConvDequant(KernelContext& ctx, std::shared_ptr<void>* state) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? PrepareQLinearConv(ctx, state) : Status::Ok();
}

Status RunQfConvDequant(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (cl && ctx.state) {
    DequantEpilogue e;
    QF_RETURN_IF_ERROR(ReadDequantEpilogue(ctx, ctx.input(3)->shape[0], &e));
    std::vector<float> xs, ws;
    ReadScales(ctx.input(1), &xs);  // checked by ReadDequantEpilogue
    ReadScales(ctx.input(4), &ws);
    bool done = false;
    QF_RETURN_IF_ERROR(RunQLinearConvFast(ctx, xs[0], ws, 1.f, 0, QRange(), &done, &e));
    if (done) {
      Tensor* y = ctx.output(0);
      e.post.Apply(y->ptr<float>(), y->numel());
      return Status::Ok();
    }
  }
  // No integer fast path here (channels-first; the packed GEMM of levels
  // without microkernels): the exact reference kernel, reported by profiling.
  ctx.reference_path = true;
  if (!cl) return RunQfConvDequantChannelsFirst(ctx);
  // QConvScratch planned the fallback's scratch when no fast kernel was planned.
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvPlanned(ctx, &fast));
  return RunViaChannelsFirst(ctx, RunQfConvDequantChannelsFirst, QConvReferenceScratch, !fast);
}

// ---- ConvInteger ------------------------------------------------------------

Status InferConvInteger(KernelContext& ctx) {
  ctx.output(0)->dtype = DType::kInt32;
  int64_t m;
  return InferQConvShape(ctx, kConvIntegerInputs, &m);
}

// Packs a constant W for the channels-first GEMM path (int32 epilogue).
Status PrepareConvInteger(KernelContext& ctx, std::shared_ptr<void>* state) {
  *state =
      kernels::PrepareQConvS8(ctx.kernel_config(), *ctx.input(1), ctx.attr().GetInt("group", 1));
  return Status::Ok();
}

// ConvInteger's call of the packed GEMM (1-D and 2-D); *ok false for other
// ranks. `run` false: for the scratch request (dynamic quantization's x
// zero point is an activation, unknown at plan time).
Status MakeConvIntegerCall(KernelContext& ctx, kernels::QConvCall* c, bool* ok, bool run) {
  *ok = false;
  const Tensor* x = ctx.input(0);
  const int nsp = x->rank() - 2;
  if (nsp != 1 && nsp != 2) return Status::Ok();
  QConvParams p;
  QF_RETURN_IF_ERROR(ParseQConv(ctx, kConvIntegerInputs, nsp, &p));
  c->x = x;
  c->y = ctx.output(0);
  SetCallGeometry(p.geo, x->shape, nsp, c);
  SetCallZeroPoints(ctx.input(kConvIntegerInputs.x_zp), ctx.input(kConvIntegerInputs.w_zp), run, c);
  c->w_scale = {1.f};
  c->int32_out = true;
  c->pool = ctx.pool;
  c->scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  *ok = true;
  return Status::Ok();
}

// Whether the session planned the packed GEMM's scratch (prepared weights,
// a covered rank) rather than the reference kernel's.
Status FastConvIntegerPlanned(KernelContext& ctx, bool* fast) {
  kernels::QConvCall c;
  *fast = false;
  if (ctx.state) QF_RETURN_IF_ERROR(MakeConvIntegerCall(ctx, &c, fast, /*run=*/false));
  return Status::Ok();
}

Status ConvIntegerScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvIntegerPlanned(ctx, &fast));
  if (!fast) return ReferenceConvScratch(ctx, kConvIntegerInputs, needs);
  kernels::QConvCall c;
  bool ok = false;
  QF_RETURN_IF_ERROR(MakeConvIntegerCall(ctx, &c, &ok, /*run=*/false));
  *needs = kernels::QConvS8Scratch(ctx.state, c);
  return Status::Ok();
}

// The packed GEMM for 1-D and 2-D convolutions; *done stays false when the
// kernels do not cover the case.
Status RunConvIntegerFast(KernelContext& ctx, bool* done) {
  kernels::QConvCall c;
  bool ok = false;
  QF_RETURN_IF_ERROR(MakeConvIntegerCall(ctx, &c, &ok, /*run=*/true));
  if (ok) *done = kernels::RunQConvS8(ctx.state, c);
  return Status::Ok();
}

Status RunConvInteger(KernelContext& ctx) {
  if (ctx.state) {
    bool done = false;
    QF_RETURN_IF_ERROR(RunConvIntegerFast(ctx, &done));
    if (done) return Status::Ok();
  }
  if (ctx.output(0)->numel() > 0) ctx.reference_path = true;
  Tensor* y = ctx.output(0);
  int32_t* out = y->ptr<int32_t>();
  const int64_t m = ctx.input(1)->shape[0];
  const int64_t planes = y->shape[0] * m;
  const int64_t out_size = planes ? y->numel() / planes : 0;
  bool fast = false;
  QF_RETURN_IF_ERROR(FastConvIntegerPlanned(ctx, &fast));
  return ConvAccumulate(ctx, kConvIntegerInputs, ReferenceSpan(ctx, fast),
                        [&](int64_t b, int64_t oc, const int64_t* acc) {
                          int32_t* o = out + (b * m + oc) * out_size;
                          for (int64_t j = 0; j < out_size; ++j) o[j] = WrapInt32(acc[j]);
                        });
}

}  // namespace

const OpDef& OpDef_QLinearConv() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QLinearConv", InferQLinearConv, RunQLinearConv,
                         /*min_inputs=*/8, /*max_inputs=*/9);
    d.prepare = PrepareQLinearConv;
    d.scratch = QConvScratch;
    d.const_inputs = 1u << 3;  // w
    d.layout = LayoutRole::kChannelsLast;
    d.traits = kTraitMatrixProduct | kTraitSpatial | kTraitIntegerKernel;
    d.weight_input = 3;
    d.weight_scale_input = 4;
    d.bias_input = 8;
    return d;
  }();
  return def;
}

const OpDef& OpDef_QfConvDequant() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QfConvDequant", InferQfConvDequant, RunQfConvDequant,
                         /*min_inputs=*/6, /*max_inputs=*/8);
    d.prepare = PrepareQfConvDequant;
    d.scratch = QConvScratch;
    d.const_inputs = 1u << 3;  // w
    d.layout = LayoutRole::kChannelsLast;
    d.traits = kTraitMatrixProduct | kTraitSpatial | kTraitIntegerKernel;
    d.weight_input = 3;
    d.weight_scale_input = 4;
    d.bias_input = kDequantBias;
    return d;
  }();
  return def;
}

const OpDef& OpDef_ConvInteger() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("ConvInteger", InferConvInteger, RunConvInteger,
                         /*min_inputs=*/2, /*max_inputs=*/4);
    d.prepare = PrepareConvInteger;
    d.scratch = ConvIntegerScratch;
    d.const_inputs = 1u << 1;  // w
    // Not kTraitSpatial, like QfQLinearConvTranspose (quant_conv_transpose.cc).
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = 1;  // no scale: it outputs the int32 sums
    return d;
  }();
  return def;
}

}  // namespace qfold
