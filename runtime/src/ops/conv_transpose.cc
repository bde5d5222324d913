// ConvTranspose: the gradient of Conv with respect to its input. Supports
// N-d, groups, strides, dilations, pads, output_padding, output_shape,
// auto_pad, an optional bias and the converter's fused activation. The
// reference kernel multiplies each group's filters by the input (giving one
// column per input position and one row per output channel and kernel tap),
// then scatters the columns into the output (col2im). With constant float
// weights the product runs on the packed GEMM (kernels/gemm_f32.h), W packed
// once at prepare; the column scatter is the same.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/aligned_vector.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "ops/conv_transpose_geometry.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

struct ConvTransposeParams {
  int64_t group = 1;
  WindowGeometry geo;  // strides/dilations/pads as for Conv; out = output spatial dims
  FusedActivation act;
};

// Reads attributes; in_spatial may hold kUnknownDim (then that output dim is unknown).
Status ParseConvTranspose(const KernelContext& ctx, const Shape& in_spatial,
                          ConvTransposeParams* p) {
  Status st;
  p->act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  return ParseConvTransposeGeometry(ctx, ctx.input(1), in_spatial, &p->group, &p->geo);
}

Status InferConvTranspose(KernelContext& ctx) {
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
  const int rank = x->rank_known ? x->rank() : (w->rank_known ? w->rank() : -1);
  if (rank < 0) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  if (rank < 3) return ctx.Invalid("X must have rank >= 3");
  if (x->rank_known && w->rank_known && w->rank() != rank)
    return ctx.Invalid("W rank differs from X rank");
  Shape in(size_t(rank - 2), kUnknownDim);
  if (x->rank_known) in.assign(x->shape.begin() + 2, x->shape.end());
  ConvTransposeParams p;
  QF_RETURN_IF_ERROR(ParseConvTranspose(ctx, in, &p));
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  if (w->rank_known && c >= 0 && w->shape[0] >= 0 && w->shape[0] != c)
    return ctx.Invalid("W " + ShapeToString(w->shape) + " does not match X's " + std::to_string(c) +
                       " channels");
  if (c >= 0 && c % p.group != 0) return ctx.Invalid("channels not divisible by group");
  const int64_t m = w->rank_known && w->shape[1] >= 0 ? w->shape[1] * p.group : kUnknownDim;
  if (b && b->rank_known && (b->rank() != 1 || (m >= 0 && b->shape[0] >= 0 && b->shape[0] != m)))
    return ctx.Invalid("B must be 1-D with one value per output channel");
  y->rank_known = true;
  y->shape = {x->rank_known ? x->shape[0] : kUnknownDim, m};
  y->shape.insert(y->shape.end(), p.geo.out.begin(), p.geo.out.end());
  return Status::Ok();
}

// Adds col ([channels * prod(kernel)] x [prod(in)]) into `channels` output
// planes of spatial dims g.out: each column entry lands at
// in_pos * stride - pad_begin + tap * dilation, when inside the output.
void Col2Im(const float* col, int64_t channels, const Shape& in, const WindowGeometry& g,
            float* y) {
  const size_t nsp = in.size();
  const int64_t out_size = Product(g.out);
  const int64_t in_inner = in.back();
  std::vector<int64_t> outer(in.begin(), in.end() - 1);
  std::vector<int64_t> out_strides = ContiguousStrides(g.out);
  std::vector<int64_t> tap(nsp, 0), ip(nsp - 1, 0);
  const float* src = col;
  for (int64_t ch = 0; ch < channels; ++ch) {
    float* plane = y + ch * out_size;
    std::fill(tap.begin(), tap.end(), 0);
    do {
      std::fill(ip.begin(), ip.end(), 0);
      do {
        int64_t base = 0;
        bool inside = true;
        for (size_t a = 0; a + 1 < nsp; ++a) {
          int64_t pos = ip[a] * g.strides[a] - g.pad_begin[a] + tap[a] * g.dilations[a];
          if (pos < 0 || pos >= g.out[a]) inside = false;
          base += pos * out_strides[a];
        }
        const size_t last = nsp - 1;
        const int64_t start = tap[last] * g.dilations[last] - g.pad_begin[last];
        for (int64_t j = 0; j < in_inner && inside; ++j) {
          const int64_t pos = start + j * g.strides[last];
          if (pos >= 0 && pos < g.out[last]) plane[base + pos] += src[j];
        }
        src += in_inner;
      } while (!outer.empty() && NextIndex(outer, &ip));
    } while (NextIndex(g.kernel, &tap));
  }
}

// Each group's W^T ([mg * taps] x cg), packed as the GEMM's left operand.
struct ConvTransposeF32State {
  const kernels::GemmF32Kernels* k = nullptr;
  Shape w_shape;
  int64_t group = 1;
  int64_t stride = 0;  // floats per packed group
  kernels::AlignedVector<float> packed;
};

Status PrepareConvTranspose(KernelContext& ctx, std::shared_ptr<void>* state) {
  const Tensor* w = ctx.input(1);
  const kernels::GemmF32Kernels* k = ctx.kernel_config().gemm_f32;
  const int64_t group = ctx.attr().GetInt("group", 1);
  if (!k || w->dtype != DType::kFloat32 || w->rank() < 3 || group <= 0 || w->shape[0] % group != 0)
    return Status::Ok();
  auto st = std::make_shared<ConvTransposeF32State>();
  st->k = k;
  st->w_shape = w->shape;
  st->group = group;
  const int64_t cg = w->shape[0] / group;
  const int64_t rows = w->numel() / std::max<int64_t>(1, w->shape[0]);
  st->stride = kernels::PackedF32Size(rows, cg, k->mr);
  st->packed.resize(size_t(st->stride * group));
  // W_g[ci][r] is element (r, ci) of the left operand: row stride 1, column stride rows.
  for (int64_t g = 0; g < group; ++g)
    k->pack_left(w->ptr<float>() + g * cg * rows, 1, rows, rows, cg,
                 st->packed.data() + g * st->stride);
  *state = st;
  return Status::Ok();
}

// The run's sizes, for RunConvTranspose and its scratch.
struct ConvTransposeDims {
  ConvTransposeParams p;
  Shape in;  // X's spatial dims
  int64_t n = 0, c = 0, m = 0, cg = 0, mg = 0, in_size = 0, out_size = 0;
  int64_t rows = 0;  // W's row length per input channel
};

Status GetConvTransposeDims(const KernelContext& ctx, ConvTransposeDims* d) {
  const Tensor* x = ctx.input(0);
  d->in.assign(x->shape.begin() + 2, x->shape.end());
  QF_RETURN_IF_ERROR(ParseConvTranspose(ctx, d->in, &d->p));
  d->n = x->shape[0];
  d->c = x->shape[1];
  d->m = ctx.output(0)->shape[1];
  d->cg = d->c / d->p.group;
  d->mg = d->m / d->p.group;
  d->in_size = Product(d->in);
  d->out_size = Product(d->p.geo.out);
  d->rows = d->mg * Product(d->p.geo.kernel);
  return Status::Ok();
}

// The run's scratch (ConvTransposeScratch sizes the request with it): on
// the packed GEMM (W prepared for these shapes) X packed per batch entry and
// group, and every group's columns; otherwise one group's columns for the
// reference product.
struct ConvTransposeScratchLayout {
  const ConvTransposeF32State* gemm = nullptr;
  int64_t right_stride = 0;  // floats per packed X_(i, g)
  size_t right_at = 0, cols_at = 0, lefts_at = 0, rights_at = 0, outs_at = 0, bytes = 0;
};

ConvTransposeScratchLayout LayoutConvTranspose(const KernelContext& ctx,
                                               const ConvTransposeDims& d) {
  ConvTransposeScratchLayout s;
  const auto* st = static_cast<const ConvTransposeF32State*>(ctx.state);
  kernels::ScratchLayout l;
  if (st && st->w_shape == ctx.input(1)->shape && d.in_size > 0 && d.out_size > 0) {
    s.gemm = st;
    const int64_t batches = d.n * st->group;
    s.right_stride = kernels::PackedF32Size(d.in_size, d.cg, st->k->nr);
    s.right_at = l.Add(size_t(s.right_stride * batches) * sizeof(float));
    s.cols_at = l.Add(size_t(d.rows * d.in_size * batches) * sizeof(float));
    // The GEMM's operand lists: left, right and output per (batch entry, group).
    s.lefts_at = l.Add(size_t(batches) * sizeof(const float*));
    s.rights_at = l.Add(size_t(batches) * sizeof(const float*));
    s.outs_at = l.Add(size_t(batches) * sizeof(float*));
  } else {
    s.cols_at = l.Add(size_t(d.rows * d.in_size) * sizeof(float));
  }
  s.bytes = l.total();
  return s;
}

Status ConvTransposeScratch(KernelContext& ctx, ScratchNeeds* needs) {
  ConvTransposeDims d;
  QF_RETURN_IF_ERROR(GetConvTransposeDims(ctx, &d));
  needs->run = LayoutConvTranspose(ctx, d).bytes;
  return Status::Ok();
}

// cols[(i, g)] = W_g^T x X_(i, g) for every batch entry and group on the
// packed GEMM (s.gemm set), X packed into `right`, the GEMM's operand
// lists in `lefts`, `rights` and `outs` (batches entries each).
void ColumnsOnGemm(const KernelContext& ctx, const ConvTransposeDims& d,
                   const ConvTransposeScratchLayout& s, float* right, float* cols,
                   const float** lefts, const float** rights, float** outs) {
  const ConvTransposeF32State* st = s.gemm;
  const kernels::GemmF32Kernels& k = *st->k;
  const int64_t cg = d.cg, in_size = d.in_size, rows = d.rows, batches = d.n * st->group;
  const int64_t right_stride = s.right_stride;
  const float* xd = ctx.input(0)->ptr<float>();
  for (int64_t b = 0; b < batches; ++b) {
    // X_(i, g) is [cg] x [in_size], row-major, at channel block b of X.
    k.pack_right(xd + b * cg * in_size, in_size, 1, cg, in_size, right + b * right_stride);
    lefts[b] = st->packed.data() + b % st->group * st->stride;
    rights[b] = right + b * right_stride;
    outs[b] = cols + b * rows * in_size;
  }
  kernels::GemmF32Args proto;
  proto.rows = rows;
  proto.cols = in_size;
  proto.k = cg;
  proto.ldc = in_size;
  kernels::GemmF32Batched(k, proto, lefts, rights, outs, batches, ctx.pool);
}

Status RunConvTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* b = ctx.input(2);
  Tensor* y = ctx.output(0);
  ConvTransposeDims d;
  QF_RETURN_IF_ERROR(GetConvTransposeDims(ctx, &d));
  const ConvTransposeParams& p = d.p;
  const Shape& in = d.in;
  const WindowGeometry& g = p.geo;
  const int64_t n = d.n, c = d.c, m = d.m;
  const int64_t cg = d.cg, mg = d.mg;
  const int64_t in_size = d.in_size, out_size = d.out_size;
  const int64_t rows = d.rows;
  float* yd = y->ptr<float>();
  const ConvTransposeScratchLayout layout = LayoutConvTranspose(ctx, d);
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      layout.bytes);
  float* const cols = region.at<float>(layout.cols_at);
  if (layout.gemm) {
    ColumnsOnGemm(ctx, d, layout, region.at<float>(layout.right_at), cols,
                  region.at<const float*>(layout.lefts_at),
                  region.at<const float*>(layout.rights_at), region.at<float*>(layout.outs_at));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t oc = 0; oc < m; ++oc)
        std::fill(yd + (i * m + oc) * out_size, yd + (i * m + oc + 1) * out_size,
                  b ? b->ptr<float>()[oc] : 0.f);
      for (int64_t grp = 0; grp < p.group; ++grp)
        Col2Im(cols + (i * p.group + grp) * rows * in_size, mg, in, g,
               yd + (i * m + grp * mg) * out_size);
    }
    p.act.Apply(yd, y->numel());
    return Status::Ok();
  }
  // The reference product, one group's columns at a time.
  float* const col = cols;
  const float* xd = x->ptr<float>();
  const float* wd = w->ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t oc = 0; oc < m; ++oc)
      std::fill(yd + (i * m + oc) * out_size, yd + (i * m + oc + 1) * out_size,
                b ? b->ptr<float>()[oc] : 0.f);
    for (int64_t grp = 0; grp < p.group; ++grp) {
      // col[r, :] = sum over the group's input channels ci of W[ci, r] * X[ci, :].
      std::fill(col, col + rows * in_size, 0.f);
      for (int64_t ci = grp * cg; ci < (grp + 1) * cg; ++ci) {
        const float* xrow = xd + (i * c + ci) * in_size;
        const float* wrow = wd + ci * rows;
        for (int64_t r = 0; r < rows; ++r) {
          const float wv = wrow[r];
          float* crow = col + r * in_size;
          for (int64_t j = 0; j < in_size; ++j) crow[j] += wv * xrow[j];
        }
      }
      if (in_size > 0) Col2Im(col, mg, in, g, yd + (i * m + grp * mg) * out_size);
    }
  }
  p.act.Apply(yd, y->numel());
  return Status::Ok();
}

}  // namespace

Status ParseConvTransposeGeometry(const KernelContext& ctx, const Tensor* w,
                                  const Shape& in_spatial, int64_t* group, WindowGeometry* g_out) {
  const size_t nsp = in_spatial.size();
  *group = ctx.attr().GetInt("group", 1);
  if (*group <= 0) return ctx.Invalid("group must be positive");
  WindowGeometry& g = *g_out;
  g.out.assign(nsp, kUnknownDim);
  g.pad_begin.assign(nsp, 0);
  g.pad_end.assign(nsp, 0);
  if (ctx.attr().Has("kernel_shape")) {
    QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "kernel_shape", nsp, 1, &g.kernel));
    if (w->rank_known && size_t(w->rank()) == nsp + 2)
      for (size_t i = 0; i < nsp; ++i)
        if (w->shape[2 + i] >= 0 && w->shape[2 + i] != g.kernel[i])
          return ctx.Invalid("kernel_shape does not match W's shape " + ShapeToString(w->shape));
  } else if (w->rank_known) {
    g.kernel.assign(w->shape.begin() + 2, w->shape.end());
  } else {
    g.kernel.assign(nsp, kUnknownDim);
  }
  for (int64_t k : g.kernel)
    if (k == 0) return ctx.Invalid("kernel dims must be positive");
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "strides", nsp, 1, &g.strides));
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "dilations", nsp, 1, &g.dilations));
  std::vector<int64_t> out_pad = ctx.attr().GetInts("output_padding", std::vector<int64_t>(nsp, 0));
  if (out_pad.size() != nsp)
    return ctx.Invalid("output_padding must have one value per spatial axis");
  std::vector<int64_t> out_shape = ctx.attr().GetInts("output_shape");
  if (!out_shape.empty()) {
    // Older exporters give the full (N, C, ...) shape; only the spatial tail matters.
    if (out_shape.size() < nsp) return ctx.Invalid("output_shape has too few values");
    out_shape.erase(out_shape.begin(), out_shape.end() - long(nsp));
  }
  std::vector<int64_t> pads = ctx.attr().GetInts("pads", std::vector<int64_t>(2 * nsp, 0));
  if (pads.size() != 2 * nsp) return ctx.Invalid("pads must have two values per spatial axis");
  const std::string auto_pad = ctx.attr().GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    return ctx.Invalid("unknown auto_pad '" + auto_pad + "'");

  for (size_t i = 0; i < nsp; ++i) {
    if (g.kernel[i] < 0 || in_spatial[i] < 0) {
      if (!out_shape.empty()) g.out[i] = out_shape[i];
      continue;
    }
    const int64_t in = in_spatial[i], s = g.strides[i];
    const int64_t full = s * (in - 1) + out_pad[i] + (g.kernel[i] - 1) * g.dilations[i] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // The output size is given (or in * stride for SAME); padding absorbs the rest.
      const int64_t out = !out_shape.empty() ? out_shape[i] : in * s;
      const int64_t total = full - out;
      const int64_t half = FloorDiv(total, 2);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pad_end[i] = total - g.pad_begin[i];
      g.out[i] = out;
    } else if (auto_pad == "VALID") {
      g.out[i] = full;
    } else {
      g.pad_begin[i] = pads[i];
      g.pad_end[i] = pads[nsp + i];
      if (pads[i] < 0 || pads[nsp + i] < 0) return ctx.Invalid("pads must be >= 0");
      g.out[i] = full - pads[i] - pads[nsp + i];
    }
    if (g.out[i] < 0) return ctx.Invalid("computed output size is negative");
  }
  return Status::Ok();
}

const OpDef& OpDef_ConvTranspose() {
  static const OpDef def = [] {
    OpDef d{"ConvTranspose",    InferConvTranspose,   RunConvTranspose,
            /*value_inputs=*/0, /*shape_only=*/false, /*min_inputs=*/2,
            /*max_inputs=*/3};
    d.prepare = PrepareConvTranspose;
    d.scratch = ConvTransposeScratch;
    d.const_inputs = 1u << 1;  // W
    d.traits = kTraitMatrixProduct | kTraitSpatial | kTraitHalfWeights;
    d.same_dtype_inputs = 0b111;  // X, W, B
    d.weight_input = 1;
    d.bias_input = 2;
    return d;
  }();
  return def;
}

}  // namespace qfold
