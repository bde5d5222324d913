// Conv: N-d convolution with groups, strides, dilations, pads/auto_pad and an
// optional bias, plus the converter's fused activation. The reference kernel
// unrolls each group's input windows into a column matrix (im2col) and then
// multiplies it by the group's filters. With constant weights, prepare packs
// them for the SIMD kernels (kernels/conv_f32.h), which run 1-D and 2-D
// convolutions; the reference kernel stays the fallback and the oracle.
// channels_last = 1 (set by the converter's layout planning for 2-D float
// convolutions with constant weights): X [N, H, W, C] and Y [N, OH, OW, M]
// run on kernels/conv_f32_nhwc.h; without it, between transposes on the
// channels-first kernels.
// A fourth input R (qfold's own, from the converter's FuseConvResidual: a
// residual Add folded into the Conv) has Y's shape and layout and is added
// before the activation: Y = act(conv(X, W) + B + R).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/conv_f32.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "ops/channels_last.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

struct ConvParams {
  int64_t group = 1;
  WindowGeometry geo;
  FusedActivation act;
};

// Reads attributes and computes the geometry from X's spatial dims (which
// may be unknown during conversion). kernel_known is false when neither
// kernel_shape nor W's spatial dims are known; the output dims are then unknown.
Status ParseConv(const KernelContext& ctx, int nsp, ConvParams* p, bool* kernel_known) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  Status st;
  p->act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  p->group = ctx.attr().GetInt("group", 1);
  if (p->group <= 0) return ctx.Invalid("group must be positive");

  std::vector<int64_t> kernel;
  *kernel_known = true;
  if (ctx.attr().Has("kernel_shape")) {
    QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "kernel_shape", size_t(nsp), 1, &kernel));
    if (w->rank_known)
      for (int i = 0; i < nsp; ++i)
        if (w->shape[2 + i] >= 0 && w->shape[2 + i] != kernel[i])
          return ctx.Invalid("kernel_shape does not match W's shape " + ShapeToString(w->shape));
  } else if (w->rank_known) {
    kernel.assign(w->shape.begin() + 2, w->shape.end());
    for (int64_t k : kernel)
      if (k < 0) *kernel_known = false;
  } else {
    *kernel_known = false;
  }
  Shape in_spatial(size_t(nsp), kUnknownDim);
  if (x->rank_known) in_spatial.assign(x->shape.begin() + 2, x->shape.end());
  if (!*kernel_known) {
    p->geo.out.assign(size_t(nsp), kUnknownDim);
    return Status::Ok();
  }
  return ComputeWindowGeometry(ctx, in_spatial, kernel, /*ceil_mode=*/false, &p->geo);
}

Status InferConvChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* b = ctx.input(2);
  Tensor* y = ctx.output(0);
  if (!x || !w) return ctx.Invalid("inputs X and W are required");
  if (x->dtype != DType::kFloat32)
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype) + " (only float32)");
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return ctx.Invalid("W and B must have X's dtype");
  y->dtype = x->dtype;

  int rank = x->rank_known ? x->rank() : (w->rank_known ? w->rank() : -1);
  if (rank < 0) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  if (rank < 3) return ctx.Invalid("X must have rank >= 3, got " + std::to_string(rank));
  if (x->rank_known && w->rank_known && w->rank() != rank)
    return ctx.Invalid("W rank " + std::to_string(w->rank()) + " differs from X rank " +
                       std::to_string(rank));
  ConvParams p;
  bool kernel_known;
  QF_RETURN_IF_ERROR(ParseConv(ctx, rank - 2, &p, &kernel_known));

  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  const int64_t m = w->rank_known ? w->shape[0] : kUnknownDim;
  if (w->rank_known && c >= 0 && w->shape[1] >= 0 && w->shape[1] * p.group != c)
    return ctx.Invalid("X has " + std::to_string(c) + " channels but W " + ShapeToString(w->shape) +
                       " with group " + std::to_string(p.group) + " expects " +
                       std::to_string(w->shape[1] * p.group));
  if (m >= 0 && m % p.group != 0)
    return ctx.Invalid("W's output channels " + std::to_string(m) + " not divisible by group " +
                       std::to_string(p.group));
  if (b && b->rank_known) {
    if (b->rank() != 1) return ctx.Invalid("B must be 1-D");
    if (m >= 0 && b->shape[0] >= 0 && b->shape[0] != m)
      return ctx.Invalid("B has " + std::to_string(b->shape[0]) + " values, expected " +
                         std::to_string(m));
  }
  y->rank_known = true;
  y->shape = {x->rank_known ? x->shape[0] : kUnknownDim, m};
  y->shape.insert(y->shape.end(), p.geo.out.begin(), p.geo.out.end());
  return Status::Ok();
}

// Unrolls the windows of `channels` input planes (each of spatial dims `in`)
// into col, a [channels * prod(kernel)] x [prod(out)] row-major matrix with
// zeros where a window reads padding.
void Im2Col(const float* x, int64_t channels, const Shape& in, const WindowGeometry& g,
            float* col) {
  const size_t nsp = in.size();
  const int64_t in_size = Product(in);
  const int64_t out_inner = g.out.back();
  // Output positions are walked as an outer odometer over all axes but the
  // last, and a plain loop over the last one.
  std::vector<int64_t> outer(g.out.begin(), g.out.end() - 1);
  std::vector<int64_t> in_strides = ContiguousStrides(in);
  std::vector<int64_t> tap(nsp, 0), o(nsp - 1, 0);
  float* dst = col;
  for (int64_t ch = 0; ch < channels; ++ch) {
    const float* plane = x + ch * in_size;
    std::fill(tap.begin(), tap.end(), 0);
    do {  // each kernel tap is one row of col
      std::fill(o.begin(), o.end(), 0);
      do {
        // Offset of this output row's tap in all axes but the last; -1 if in padding.
        int64_t base = 0;
        bool inside = true;
        for (size_t a = 0; a + 1 < nsp; ++a) {
          int64_t pos = o[a] * g.strides[a] - g.pad_begin[a] + tap[a] * g.dilations[a];
          if (pos < 0 || pos >= in[a]) inside = false;
          base += pos * in_strides[a];
        }
        const size_t last = nsp - 1;
        const int64_t s = g.strides[last];
        const int64_t start = tap[last] * g.dilations[last] - g.pad_begin[last];
        for (int64_t j = 0; j < out_inner; ++j) {
          int64_t pos = start + j * s;
          dst[j] = inside && pos >= 0 && pos < in[last] ? plane[base + pos] : 0.f;
        }
        dst += out_inner;
      } while (!outer.empty() && NextIndex(outer, &o));
    } while (NextIndex(g.kernel, &tap));
  }
}

Status PrepareConv(KernelContext& ctx, std::shared_ptr<void>* state) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  const int64_t group = ctx.attr().GetInt("group", 1);
  if (cl) {
    const kernels::KernelConfig& kc = ctx.kernel_config();
    const std::vector<int64_t> dilations = ctx.attr().GetInts("dilations");
    // Y is [n, oh, ow, m] here; -1: strides or dilations that Winograd has not.
    const Tensor* y = ctx.output(0);
    bool unit = true;
    for (int64_t v : ctx.attr().GetInts("strides")) unit = unit && v == 1;
    for (int64_t v : dilations) unit = unit && v == 1;
    const int64_t pixels = !unit ? -1
                           : y && y->rank() == 4 && y->shape[1] > 0 && y->shape[2] > 0
                               ? y->shape[1] * y->shape[2]
                               : 0;
    *state = kernels::PrepareConvNhwcF32(kc.conv_nhwc_f32, *ctx.input(1), group, kc.conv_nhwc_bf16,
                                         kc.conv_nhwc_fp16,
                                         dilations.empty() ? 1 : dilations.back(), pixels);
    return Status::Ok();
  }
  *state =
      kernels::PrepareConvF32(ctx.kernel_config(), *ctx.input(1), ctx.attr().GetInt("group", 1));
  return Status::Ok();
}

// The channels-first kernels' call for a 1-D or 2-D convolution; false for
// other ranks.
bool MakeConvF32Call(const KernelContext& ctx, const ConvParams& p, kernels::ConvF32Call* call) {
  kernels::ConvF32Call& c = *call;
  const Tensor* x = ctx.input(0);
  const int nsp = x->rank() - 2;
  if (nsp != 1 && nsp != 2) return false;
  const WindowGeometry& g = p.geo;
  const int a = nsp - 1;  // the last (width) axis
  c.x = x->ptr<float>();
  c.y = ctx.output(0)->ptr<float>();
  c.bias = ctx.input(2) ? ctx.input(2)->ptr<float>() : nullptr;
  c.n = x->shape[0];
  c.c = x->shape[1];
  c.iw = x->shape[2 + a];
  c.ow = g.out[a];
  c.kw = g.kernel[a];
  c.sw = g.strides[a];
  c.dw = g.dilations[a];
  c.pad_left = g.pad_begin[a];
  if (nsp == 2) {
    c.ih = x->shape[2];
    c.oh = g.out[0];
    c.kh = g.kernel[0];
    c.sh = g.strides[0];
    c.dh = g.dilations[0];
    c.pad_top = g.pad_begin[0];
  }
  c.act = kernels::EpilogueFor(p.act, &c.lo, &c.hi, &c.post);
  c.pool = ctx.pool;
  c.scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return true;
}

// The fast path for 1-D and 2-D convolutions with prepared weights; false
// when the kernels do not cover the case.
bool RunConvFast(const KernelContext& ctx, const ConvParams& p) {
  kernels::ConvF32Call c;
  return MakeConvF32Call(ctx, p, &c) && kernels::RunConvF32(ctx.state, c);
}

// A 1x1 kernel with unit strides and no padding reads X directly.
bool Pointwise(const WindowGeometry& g) {
  for (size_t i = 0; i < g.kernel.size(); ++i)
    if (g.kernel[i] != 1 || g.strides[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0)
      return false;
  return true;
}

// The reference kernel's scratch: one group's im2col columns (none for a
// pointwise convolution).
size_t ReferenceConvScratch(const KernelContext& ctx, const ConvParams& p) {
  const Tensor* x = ctx.input(0);
  const int64_t out_size = Product(p.geo.out);
  if (Pointwise(p.geo) || out_size == 0 || x->shape[0] == 0) return 0;
  const int64_t rows = x->shape[1] / p.group * Product(p.geo.kernel);
  return size_t(rows * out_size) * sizeof(float);
}

Status RunConvChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* b = ctx.input(2);
  Tensor* y = ctx.output(0);
  const int nsp = x->rank() - 2;
  ConvParams p;
  bool kernel_known;
  QF_RETURN_IF_ERROR(ParseConv(ctx, nsp, &p, &kernel_known));
  const WindowGeometry& g = p.geo;
  if (ctx.state && RunConvFast(ctx, p)) return Status::Ok();

  const int64_t n = x->shape[0], c = x->shape[1], m = w->shape[0];
  const int64_t cg = c / p.group, mg = m / p.group;
  const Shape in(x->shape.begin() + 2, x->shape.end());
  const int64_t in_size = Product(in), out_size = Product(g.out);
  const int64_t rows = cg * Product(g.kernel);  // reduction length per output

  const bool pointwise = Pointwise(g);
  if (out_size == 0) return Status::Ok();  // empty output: nothing to compute
  // The planned scratch when the session planned this kernel's (not a fast
  // kernel's that turned the call down: then it is allocated here).
  kernels::ConvF32Call fast;
  const bool fast_planned = ctx.state && MakeConvF32Call(ctx, p, &fast);
  const kernels::ScratchRegion region(
      fast_planned ? kernels::ScratchSpan{}
                   : kernels::ScratchSpan{ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
      ReferenceConvScratch(ctx, p));
  float* col = region.at<float>(0);

  const float* xd = x->ptr<float>();
  const float* wd = w->ptr<float>();
  const float* bd = b ? b->ptr<float>() : nullptr;
  float* yd = y->ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const float* xg = xd + (i * c + grp * cg) * in_size;
      const float* cols = xg;
      if (!pointwise) {
        Im2Col(xg, cg, in, g, col);
        cols = col;
      }
      for (int64_t oc = grp * mg; oc < (grp + 1) * mg; ++oc) {
        float* yrow = yd + (i * m + oc) * out_size;
        std::fill(yrow, yrow + out_size, bd ? bd[oc] : 0.f);
        const float* wrow = wd + oc * rows;
        for (int64_t r = 0; r < rows; ++r) {
          const float wv = wrow[r];
          const float* crow = cols + r * out_size;
          for (int64_t j = 0; j < out_size; ++j) yrow[j] += wv * crow[j];
        }
      }
    }
  }
  p.act.Apply(yd, y->numel());
  return Status::Ok();
}

// The channels-last kernels' call for a 2-D convolution; false when they do
// not cover the case. `p` keeps the epilogue's activation the call points to.
bool MakeConvNhwcF32Call(const KernelContext& ctx, ConvParams* params,
                         kernels::ConvNhwcF32Call* call) {
  kernels::ConvNhwcF32Call& c = *call;
  ConvParams& p = *params;
  const Tensor* x = ctx.input(0);
  if (!ctx.state || x->rank() != 4) return false;
  const bool planar = InputChannelsFirst(ctx);
  if (planar && x->dtype != DType::kFloat32) return false;
  Tensor x_cf = *x;
  if (!planar) x_cf.shape = ChannelsFirstShape(x->shape);
  KernelContext cf = ctx;
  cf.inputs[0] = &x_cf;
  bool kernel_known;
  if (!ParseConv(cf, 2, &p, &kernel_known).ok() || !kernel_known) return false;
  const WindowGeometry& g = p.geo;
  // bf16 mode stores some activations as bfloat16 (ConvBf16Io).
  Tensor* y = ctx.output(0);
  const Tensor* r = ctx.input(3);
  if (x->dtype == DType::kBFloat16)
    c.x_bf16 = x->ptr<uint16_t>();
  else
    c.x = x->ptr<float>();
  if (y->dtype == DType::kBFloat16)
    c.y_bf16 = y->ptr<uint16_t>();
  else
    c.y = y->ptr<float>();
  c.bias = ctx.input(2) ? ctx.input(2)->ptr<float>() : nullptr;
  c.n = x->shape[0];
  c.ih = x_cf.shape[2];
  c.iw = x_cf.shape[3];
  c.c = x_cf.shape[1];
  c.x_planar = planar;
  c.oh = g.out[0];
  c.ow = g.out[1];
  c.kh = g.kernel[0];
  c.kw = g.kernel[1];
  c.sh = g.strides[0];
  c.sw = g.strides[1];
  c.dh = g.dilations[0];
  c.dw = g.dilations[1];
  c.pad_top = g.pad_begin[0];
  c.pad_left = g.pad_begin[1];
  if (r && r->dtype == DType::kBFloat16)
    c.residual_bf16 = r->ptr<uint16_t>();
  else if (r)
    c.residual = r->ptr<float>();
  c.act = kernels::EpilogueFor(p.act, &c.lo, &c.hi, &c.post);
  c.pool = ctx.pool;
  c.scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return true;
}

// Whether a channels-last convolution goes to the channels-last kernels
// (prepared weights, a 2-D call): the scratch request and the run both ask
// this, so the fallback's scratch is planned exactly when it is taken.
bool ConvChannelsLastPlanned(KernelContext& ctx, ConvParams* p, kernels::ConvNhwcF32Call* c) {
  return ctx.state && MakeConvNhwcF32Call(ctx, p, c);
}

// The channels-first kernels' scratch (ConvScratch of an NCHW convolution;
// the fallback's request on its channels-first view).
Status ConvScratchChannelsFirst(KernelContext& ctx, ScratchNeeds* needs) {
  ConvParams p;
  const int nsp = ctx.input(0)->rank() - 2;
  bool kernel_known;
  if (nsp < 1 || !ParseConv(ctx, nsp, &p, &kernel_known).ok() || !kernel_known) return Status::Ok();
  kernels::ConvF32Call c;
  needs->run = ctx.state && MakeConvF32Call(ctx, p, &c) ? kernels::ConvF32Scratch(ctx.state, c)
                                                        : ReferenceConvScratch(ctx, p);
  return Status::Ok();
}

// OpDef::scratch: the fast kernels' per-thread buffers, or the
// channels-first kernels' (the reference kernel's im2col columns where the
// session runs it); a channels-last convolution the kernels do not take
// runs through RunViaChannelsFirst: its copies and the channels-first
// kernel's scratch.
Status ConvScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return ConvScratchChannelsFirst(ctx, needs);
  ConvParams p;
  kernels::ConvNhwcF32Call c;
  if (!ConvChannelsLastPlanned(ctx, &p, &c))
    return ChannelsFirstScratch(ctx, ConvScratchChannelsFirst, needs);
  needs->run = kernels::ConvNhwcF32Scratch(ctx.state, c);
  return Status::Ok();
}

// Equal ranks, and equal dims where both are known.
bool ShapesMayMatch(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

Status InferConv(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  QF_RETURN_IF_ERROR(cl ? InferViaChannelsFirst(ctx, InferConvChannelsFirst)
                        : InferConvChannelsFirst(ctx));
  const Tensor* r = ctx.input(3);
  const Tensor* y = ctx.output(0);
  if (r && (r->dtype != DType::kFloat32 ||
            (r->rank_known && y->rank_known && !ShapesMayMatch(r->shape, y->shape))))
    return ctx.Invalid("the residual input must be float32 of Y's shape " +
                       ShapeToString(y->shape) + ", got " + ShapeToString(r->shape));
  return Status::Ok();
}

// Without a kernel that adds the residual in its epilogue: the convolution
// without its activation, then Y += R, then the activation (the unfused
// graph's operations in its order).
Status RunConvWithResidual(KernelContext& ctx, bool cl, bool fallback_planned) {
  const Tensor* r = ctx.input(3);
  Tensor* y = ctx.output(0);
  if (r->shape != y->shape)
    return ctx.Invalid("the residual input " + ShapeToString(r->shape) + " differs from Y's " +
                       ShapeToString(y->shape));
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  act.vmath = ctx.kernel_config().vmath;
  AttrMap plain = ctx.attr();
  plain.Erase("_activation");
  KernelContext conv = ctx;
  conv.attrs = &plain;
  conv.inputs.resize(3);
  QF_RETURN_IF_ERROR(cl ? RunViaChannelsFirst(conv, RunConvChannelsFirst, ConvScratchChannelsFirst,
                                              fallback_planned)
                        : RunConvChannelsFirst(conv));
  ctx.reference_path = ctx.reference_path || conv.reference_path;
  float* yd = y->ptr<float>();
  const float* rd = r->ptr<float>();
  for (int64_t i = 0, n = y->numel(); i < n; ++i) yd[i] += rd[i];
  act.Apply(yd, y->numel());
  return Status::Ok();
}

// OpDef::bf16_io: the channels-last bf16 kernels read X and the residual and
// write Y as bfloat16 too.
void ConvBf16Io(KernelContext& ctx, unsigned* inputs, unsigned* outputs) {
  bool cl = false;
  if (!ReadChannelsLast(ctx, &cl).ok() || !cl) return;
  ConvParams p;
  kernels::ConvNhwcF32Call c;
  if (!ConvChannelsLastPlanned(ctx, &p, &c)) return;
  const kernels::Bf16Io io = kernels::ConvNhwcF32Bf16Io(ctx.state, c);
  // A channels-first x stays float (the kernels read its planes as floats).
  *inputs = (io.x && !c.x_planar ? 1u : 0u) | (io.residual ? 1u << 3 : 0u);
  *outputs = io.y ? 1u : 0u;
}

bool AnyBf16(const KernelContext& ctx) {
  for (const Tensor* t : ctx.inputs)
    if (t && t->dtype == DType::kBFloat16) return true;
  return ctx.output(0)->dtype == DType::kBFloat16;
}

Status RunConv(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  // The fallback's scratch was planned when the channels-last kernels were
  // not (ConvScratch); one they turn down leaves it allocated per call.
  bool fallback_planned = false;
  if (cl) {
    ConvParams p;
    kernels::ConvNhwcF32Call c;
    if (ConvChannelsLastPlanned(ctx, &p, &c)) {
      if (kernels::RunConvNhwcF32(ctx.state, c)) return Status::Ok();
    } else {
      fallback_planned = true;
    }
  }
  // Only the bf16 kernels read or write bfloat16 activations (ConvBf16Io).
  if (AnyBf16(ctx))
    return ctx.Error(StatusCode::kInternal, "bfloat16 activations reached a float32 kernel");
  if (ctx.input(3)) return RunConvWithResidual(ctx, cl, fallback_planned);
  if (!cl) return RunConvChannelsFirst(ctx);
  return RunViaChannelsFirst(ctx, RunConvChannelsFirst, ConvScratchChannelsFirst, fallback_planned);
}

}  // namespace

const OpDef& OpDef_Conv() {
  static const OpDef def = [] {
    OpDef d{"Conv",
            InferConv,
            RunConv,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/2,
            /*max_inputs=*/4};  // 4: the fused residual
    d.prepare = PrepareConv;
    d.scratch = ConvScratch;
    d.bf16_io = ConvBf16Io;
    d.const_inputs = 1u << 1;  // W
    // Float 2-D convolutions have channels-last kernels (the planner checks
    // the rank and that W is constant).
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.traits = kTraitMatrixProduct | kTraitSpatial | kTraitHalfWeights;
    d.same_dtype_inputs = 0b111;  // X, W, B (not the fused residual)
    d.weight_input = 1;
    d.bias_input = 2;
    return d;
  }();
  return def;
}

}  // namespace qfold
