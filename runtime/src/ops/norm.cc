// Normalization ops (inference): BatchNormalization, InstanceNormalization,
// LayerNormalization, GroupNormalization (opset 21: per-channel scale/bias),
// and LRN.
// Statistics accumulate in double so long rows keep their precision.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel_config.h"
#include "kernels/quant_s8.h"
#include "kernels/rowops_f32.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"
#include "kernels/vmath.h"
#include "ops/channels_last.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

Status RequireFloat32(const KernelContext& ctx) {
  for (const Tensor* t : ctx.inputs)
    if (t && t->dtype != DType::kFloat32)
      return ctx.Unsupported(std::string("dtype ") + dtype_name(t->dtype) + " (only float32)");
  return Status::Ok();
}

// Checks that an optional 1-D per-channel input has `channels` entries (when known).
Status CheckChannelVector(const KernelContext& ctx, int i, const char* what, int64_t channels) {
  const Tensor* t = ctx.input(i);
  if (!t || !t->rank_known) return Status::Ok();
  if (t->rank() != 1) return ctx.Invalid(std::string(what) + " must be 1-D");
  if (channels >= 0 && t->shape[0] >= 0 && t->shape[0] != channels)
    return ctx.Invalid(std::string(what) + " has " + std::to_string(t->shape[0]) +
                       " values, X has " + std::to_string(channels) + " channels");
  return Status::Ok();
}

void CopyShape(const Tensor& x, Tensor* y) {
  y->dtype = x.dtype;
  y->rank_known = x.rank_known;
  y->shape = x.shape;
}

// Mean and 1/sqrt(var + eps) of n contiguous values (population variance).
void Moments(const float* x, int64_t n, double eps, double* mean, double* inv_std) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double m = n > 0 ? sum / double(n) : 0.0;
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - m) * (x[i] - m);
  *mean = m;
  *inv_std = 1.0 / std::sqrt((n > 0 ? sq / double(n) : 0.0) + eps);
}

// ---- BatchNormalization -------------------------------------------------

Status InferBatchNormalizationChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(RequireFloat32(ctx));
  if (ctx.attr().GetInt("training_mode", 0) != 0)
    return ctx.Unsupported("training_mode=1 (only inference is supported)");
  if (ctx.attr().Has("spatial") && ctx.attr().GetInt("spatial", 1) == 0)
    return ctx.Unsupported("spatial=0");
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.output(i)) return ctx.Unsupported("outputs beyond Y (training statistics)");
  for (int i = 1; i < 5; ++i)
    if (!ctx.input(i)) return ctx.Invalid("scale, B, input_mean and input_var are required");
  if (x->rank_known && x->rank() < 2) return ctx.Invalid("X must have rank >= 2");
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) QF_RETURN_IF_ERROR(CheckChannelVector(ctx, i, names[i], c));
  CopyShape(*x, ctx.output(0));
  return Status::Ok();
}

// channels_last = 1 (set by the converter's layout planning between
// channels-last ops): X is [N, spatial..., C].
Status InferBatchNormalization(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  Status st;
  FusedActivation::FromAttrs(ctx.attr(), &st);
  QF_RETURN_IF_ERROR(st);
  return cl ? InferViaChannelsFirst(ctx, InferBatchNormalizationChannelsFirst)
            : InferBatchNormalizationChannelsFirst(ctx);
}

// y = act(fma(x - mean, a, bias)) with a = scale / sqrt(var + eps), in both
// layouts: one fused multiply-add per element (kernels::ChannelAffineRef),
// which the vector kernels (rowops_f32.h) reproduce bit for bit. The Relu or
// Clip the converter fused (DenseNet's BatchNormalization + Relu) is applied
// in the same pass; other activations afterwards, row by row.
struct BatchNormMap {
  const float* scale;
  const float* bias;
  const float* mean;
  const float* var;
  float eps;
  kernels::F32Act act;
  float lo, hi;
  const FusedActivation* post;         // applied after the map, or null
  const kernels::RowOpsF32Kernels* k;  // null: the reference loops
};

// Pixels [p0, p1) of channels-last x [pixels, c]: channels in blocks whose
// multipliers sit on the stack.
void BatchNormChannelsLast(const BatchNormMap& bn, const float* x, float* y, int64_t c, int64_t p0,
                           int64_t p1) {
  constexpr int64_t kBlock = 1024;
  float a[kBlock];
  for (int64_t c0 = 0; c0 < c; c0 += kBlock) {
    const int64_t nc = std::min(kBlock, c - c0);
    for (int64_t i = 0; i < nc; ++i) a[i] = bn.scale[c0 + i] / std::sqrt(bn.var[c0 + i] + bn.eps);
    const float* m = bn.mean + c0;
    const float* b = bn.bias + c0;
    const float* xb = x + p0 * c + c0;
    float* yb = y + p0 * c + c0;
    if (bn.k) {
      bn.k->channel_affine(xb, c, yb, c, p1 - p0, nc, m, a, b, bn.act, bn.lo, bn.hi);
    } else {
      for (int64_t p = 0; p < p1 - p0; ++p)
        for (int64_t i = 0; i < nc; ++i)
          yb[p * c + i] =
              kernels::ChannelAffineRef(xb[p * c + i], m[i], a[i], b[i], bn.act, bn.lo, bn.hi);
    }
    if (bn.post)
      for (int64_t p = 0; p < p1 - p0; ++p) bn.post->Apply(yb + p * c, nc);
  }
}

// bf16 mode's stored activations (BatchNormBf16Io): x, y or both bfloat16.
// Blocks of pixels widened into floats (exact), the same map, rounded back
// to nearest even by the bf16 convolutions' converter.
constexpr int64_t kBf16BlockFloats = 4096;

void BatchNormChannelsLastBf16(const BatchNormMap& bn, const kernels::ConvNhwcBf16Kernels& k,
                               const Tensor& x, Tensor* y, int64_t c, int64_t p0, int64_t p1) {
  alignas(64) float a[kBf16BlockFloats], xf[kBf16BlockFloats], yf[kBf16BlockFloats];
  // The multipliers once per range (c <= kBf16BlockFloats), not per block.
  for (int64_t i = 0; i < c; ++i) a[i] = bn.scale[i] / std::sqrt(bn.var[i] + bn.eps);
  const bool x16 = x.dtype == DType::kBFloat16, y16 = y->dtype == DType::kBFloat16;
  const int64_t rows = std::max<int64_t>(1, kBf16BlockFloats / c);
  for (int64_t p = p0; p < p1; p += rows) {
    const int64_t nr = std::min(rows, p1 - p), n = nr * c;
    const float* xs = x.ptr<float>() + p * c;
    if (x16) {
      k.widen(x.ptr<uint16_t>() + p * c, n, xf);
      xs = xf;
    }
    float* const yd = y16 ? yf : y->ptr<float>() + p * c;
    if (bn.k) {
      bn.k->channel_affine(xs, c, yd, c, nr, c, bn.mean, a, bn.bias, bn.act, bn.lo, bn.hi);
    } else {
      for (int64_t q = 0; q < nr; ++q)
        for (int64_t i = 0; i < c; ++i)
          yd[q * c + i] = kernels::ChannelAffineRef(xs[q * c + i], bn.mean[i], a[i], bn.bias[i],
                                                    bn.act, bn.lo, bn.hi);
    }
    if (y16) k.convert_flat(yf, n, y->ptr<uint16_t>() + p * c);
  }
}

// OpDef::bf16_io: a channels-last BatchNormalization reads and writes
// bfloat16 in bf16 mode, each side on its own (DenseNet's pre-activations
// between its Concats and convolutions), unless an activation runs after
// the map on float y.
void BatchNormBf16Io(KernelContext& ctx, unsigned* inputs, unsigned* outputs) {
  bool cl = false;
  const Tensor* x = ctx.input(0);
  if (!ctx.kernel_config().conv_nhwc_bf16 || !ReadChannelsLast(ctx, &cl).ok() || !cl ||
      x->dtype != DType::kFloat32 || x->rank() < 2 || x->shape.back() <= 0 ||
      x->shape.back() > kBf16BlockFloats)
    return;
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  float lo, hi;
  const FusedActivation* post = nullptr;
  kernels::EpilogueFor(act, &lo, &hi, &post);
  if (!st.ok() || post) return;
  *inputs = 1;
  *outputs = 1;
}

Status RunBatchNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  BatchNormMap bn;
  bn.scale = ctx.input(1)->ptr<float>();
  bn.bias = ctx.input(2)->ptr<float>();
  bn.mean = ctx.input(3)->ptr<float>();
  bn.var = ctx.input(4)->ptr<float>();
  bn.eps = ctx.attr().GetFloat("epsilon", 1e-5f);
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  QF_RETURN_IF_ERROR(st);
  act.vmath = ctx.kernel_config().vmath;
  bn.act = kernels::EpilogueFor(act, &bn.lo, &bn.hi, &bn.post);
  bn.k = ctx.kernel_config().rowops_f32;
  const float* xp = x->ptr<float>();
  float* yp = y->ptr<float>();
  // Rows (pixels or planes) between threads: each element's value does not
  // depend on the split. Pieces of at least 16K elements (memory-bound work:
  // smaller ones cost more to hand off than they take).
  constexpr int64_t kMinElements = int64_t(1) << 14;
  const bool bf16 = x->dtype == DType::kBFloat16 || y->dtype == DType::kBFloat16;
  if (bf16 &&
      (!cl || !ctx.kernel_config().conv_nhwc_bf16 || bn.post || x->shape.back() > kBf16BlockFloats))
    return ctx.Error(StatusCode::kInternal, "bfloat16 activations reached a float32 kernel");
  if (cl) {
    const int64_t c = x->shape.back(), pixels = c > 0 ? x->numel() / c : 0;
    const int64_t grain = std::max<int64_t>(1, kMinElements / std::max<int64_t>(c, 1));
    kernels::ThreadPool* pool = x->numel() >= 2 * kMinElements ? ctx.pool : nullptr;
    kernels::ParallelForShares(pool, pixels, grain, [&](int64_t p0, int64_t p1, int) {
      if (bf16)
        BatchNormChannelsLastBf16(bn, *ctx.kernel_config().conv_nhwc_bf16, *x, y, c, p0, p1);
      else
        BatchNormChannelsLast(bn, xp, yp, c, p0, p1);
    });
    return Status::Ok();
  }
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t size = Product(Shape(x->shape.begin() + 2, x->shape.end()));
  const int64_t grain = std::max<int64_t>(1, kMinElements / std::max<int64_t>(size, 1));
  kernels::ThreadPool* pool = x->numel() >= 2 * kMinElements ? ctx.pool : nullptr;
  kernels::ParallelForShares(pool, n * c, grain, [&](int64_t q0, int64_t q1, int) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t ch = q % c;
      const float a = bn.scale[ch] / std::sqrt(bn.var[ch] + bn.eps);
      const float* xq = xp + q * size;
      float* yq = yp + q * size;
      if (bn.k) {
        bn.k->plane_affine(xq, yq, size, bn.mean[ch], a, bn.bias[ch], bn.act, bn.lo, bn.hi);
      } else {
        for (int64_t j = 0; j < size; ++j)
          yq[j] =
              kernels::ChannelAffineRef(xq[j], bn.mean[ch], a, bn.bias[ch], bn.act, bn.lo, bn.hi);
      }
      if (bn.post) bn.post->Apply(yq, size);
    }
  });
  return Status::Ok();
}

// ---- InstanceNormalization ----------------------------------------------

Status InferInstanceNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(RequireFloat32(ctx));
  if (!ctx.input(1) || !ctx.input(2)) return ctx.Invalid("scale and B are required");
  if (x->rank_known && x->rank() < 3) return ctx.Invalid("X must have rank >= 3");
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  QF_RETURN_IF_ERROR(CheckChannelVector(ctx, 1, "scale", c));
  QF_RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "B", c));
  CopyShape(*x, ctx.output(0));
  return Status::Ok();
}

Status RunInstanceNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  const float* scale = ctx.input(1)->ptr<float>();
  const float* bias = ctx.input(2)->ptr<float>();
  const double eps = ctx.attr().GetFloat("epsilon", 1e-5f);
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t size = Product(Shape(x->shape.begin() + 2, x->shape.end()));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* xp = x->ptr<float>() + (i * c + ch) * size;
      float* yp = y->ptr<float>() + (i * c + ch) * size;
      double mean, inv_std;
      Moments(xp, size, eps, &mean, &inv_std);
      for (int64_t j = 0; j < size; ++j)
        yp[j] = float((xp[j] - mean) * inv_std * scale[ch] + bias[ch]);
    }
  return Status::Ok();
}

// ---- LayerNormalization -------------------------------------------------

Status InferLayerNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(RequireFloat32(ctx));
  if (!ctx.input(1)) return ctx.Invalid("Scale is required");
  const int64_t stash = ctx.attr().GetInt("stash_type", 1);
  if (stash != 1) return ctx.Unsupported("stash_type " + std::to_string(stash));
  CopyShape(*x, ctx.output(0));
  for (int i = 1; i < 3; ++i)
    if (Tensor* o = ctx.output(i)) o->dtype = DType::kFloat32;
  if (!x->rank_known) {
    for (int i = 1; i < 3; ++i)
      if (Tensor* o = ctx.output(i)) {
        o->rank_known = false;
        o->shape.clear();
      }
    return Status::Ok();
  }
  int axis;
  if (!NormalizeAxis(ctx.attr().GetInt("axis", -1), x->rank(), &axis))
    return ctx.Invalid("axis out of range for X " + ShapeToString(x->shape));
  // Scale and B broadcast (right-aligned) to the normalized dims X[axis:].
  const Shape norm(x->shape.begin() + axis, x->shape.end());
  for (int i = 1; i < 3; ++i) {
    const Tensor* t = ctx.input(i);
    if (!t || !t->rank_known) continue;
    Shape b;
    if (t->rank() > int(norm.size()) || !BroadcastShapes(norm, t->shape, &b, nullptr) ||
        b.size() != norm.size())
      return ctx.Invalid(std::string(i == 1 ? "Scale " : "B ") + ShapeToString(t->shape) +
                         " does not broadcast to normalized shape " + ShapeToString(norm));
    for (size_t d = 0; d < b.size(); ++d)
      if (norm[d] >= 0 && b[d] != norm[d])
        return ctx.Invalid(std::string(i == 1 ? "Scale " : "B ") + ShapeToString(t->shape) +
                           " does not broadcast to normalized shape " + ShapeToString(norm));
  }
  Shape stat = x->shape;
  for (size_t d = size_t(axis); d < stat.size(); ++d) stat[d] = 1;
  for (int i = 1; i < 3; ++i)
    if (Tensor* o = ctx.output(i)) {
      o->rank_known = true;
      o->shape = stat;
    }
  return Status::Ok();
}

Status RunLayerNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* scale = ctx.input(1);
  const Tensor* bias = ctx.input(2);
  Tensor* y = ctx.output(0);
  Tensor* mean_out = ctx.output(1);
  Tensor* inv_out = ctx.output(2);
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", -1), x->rank(), &axis);
  const double eps = ctx.attr().GetFloat("epsilon", 1e-5f);
  const Shape norm(x->shape.begin() + axis, x->shape.end());
  const int64_t size = Product(norm);
  const int64_t rows = size > 0 ? x->numel() / size : 0;
  const kernels::RowOpsF32Kernels* rk = ctx.kernel_config().rowops_f32;
  // Scale and B with every normalized value (no broadcast) lie along the row.
  if (rk && size > 0 && scale->numel() == size && (!bias || bias->numel() == size)) {
    const float* xd = x->ptr<float>();
    float* yd = y->ptr<float>();
    const float* sd = scale->ptr<float>();
    const float* bd = bias ? bias->ptr<float>() : nullptr;
    float* md = mean_out ? mean_out->ptr<float>() : nullptr;
    float* id = inv_out ? inv_out->ptr<float>() : nullptr;
    const float feps = float(eps);
    const bool small = rows * size < (int64_t(1) << 15);
    kernels::ParallelFor(small ? nullptr : ctx.pool, rows, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        float m, inv;
        rk->layer_norm(xd + r * size, yd + r * size, size, sd, bd, feps, &m, &inv);
        if (md) md[r] = m;
        if (id) id[r] = inv;
      }
    });
    return Status::Ok();
  }
  // Scale/B strides over the normalized dims (0 on broadcast axes).
  BroadcastIndexer bidx({scale->shape, bias ? bias->shape : Shape()}, norm);
  std::vector<int64_t> s_off(static_cast<size_t>(size)), b_off(static_cast<size_t>(size));
  {
    std::vector<int64_t> pos(norm.size(), 0);
    for (int64_t j = 0; j < size; ++j) {
      int64_t so = 0, bo = 0;
      for (size_t d = 0; d < norm.size(); ++d) {
        so += pos[d] * bidx.strides(0)[d];
        bo += pos[d] * bidx.strides(1)[d];
      }
      s_off[size_t(j)] = so;
      b_off[size_t(j)] = bo;
      NextIndex(norm, &pos);
    }
  }
  const float* sd = scale->ptr<float>();
  const float* bd = bias ? bias->ptr<float>() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xp = x->ptr<float>() + r * size;
    float* yp = y->ptr<float>() + r * size;
    double mean, inv_std;
    Moments(xp, size, eps, &mean, &inv_std);
    for (int64_t j = 0; j < size; ++j) {
      double v = (xp[j] - mean) * inv_std * sd[s_off[size_t(j)]];
      if (bd) v += bd[b_off[size_t(j)]];
      yp[j] = float(v);
    }
    if (mean_out) mean_out->ptr<float>()[r] = float(mean);
    if (inv_out) inv_out->ptr<float>()[r] = float(inv_std);
  }
  return Status::Ok();
}

// ---- GroupNormalization -------------------------------------------------

Status InferGroupNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(RequireFloat32(ctx));
  if (!ctx.input(1) || !ctx.input(2)) return ctx.Invalid("scale and bias are required");
  const Attr* g = ctx.attr().Find("num_groups");
  if (!g || g->i <= 0) return ctx.Invalid("num_groups must be given and positive");
  const int64_t stash = ctx.attr().GetInt("stash_type", 1);
  if (stash != 1) return ctx.Unsupported("stash_type " + std::to_string(stash));
  if (x->rank_known && x->rank() < 2) return ctx.Invalid("X must have rank >= 2");
  const int64_t c = x->rank_known ? x->shape[1] : kUnknownDim;
  if (c >= 0 && c % g->i != 0)
    return ctx.Invalid("channels " + std::to_string(c) + " not divisible by num_groups " +
                       std::to_string(g->i));
  // Opset 18 had per-group scale/bias; the converter rewrites those to
  // per-channel (opset 21) form, so only the per-channel layout is accepted.
  QF_RETURN_IF_ERROR(CheckChannelVector(ctx, 1, "scale", c));
  QF_RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "bias", c));
  CopyShape(*x, ctx.output(0));
  return Status::Ok();
}

Status RunGroupNormalization(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  const float* scale = ctx.input(1)->ptr<float>();
  const float* bias = ctx.input(2)->ptr<float>();
  const double eps = ctx.attr().GetFloat("epsilon", 1e-5f);
  const int64_t groups = ctx.attr().GetInt("num_groups", 1);
  const int64_t n = x->shape[0], c = x->shape[1];
  const int64_t size = Product(Shape(x->shape.begin() + 2, x->shape.end()));
  const int64_t cg = c / groups;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t grp = 0; grp < groups; ++grp) {
      // A group's channels are contiguous: normalize them as one row.
      const int64_t off = (i * c + grp * cg) * size;
      double mean, inv_std;
      Moments(x->ptr<float>() + off, cg * size, eps, &mean, &inv_std);
      for (int64_t ch = grp * cg; ch < (grp + 1) * cg; ++ch) {
        const float* xp = x->ptr<float>() + (i * c + ch) * size;
        float* yp = y->ptr<float>() + (i * c + ch) * size;
        for (int64_t j = 0; j < size; ++j)
          yp[j] = float((xp[j] - mean) * inv_std * scale[ch] + bias[ch]);
      }
    }
  return Status::Ok();
}

// ---- LRN ------------------------------------------------------------------

// Local response normalization across channels:
// y = x / (bias + alpha / size * sum of x^2 over nearby channels)^beta.
Status InferLRN(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(RequireFloat32(ctx));
  const Attr* size = ctx.attr().Find("size");
  if (!size || size->i <= 0) return ctx.Invalid("size must be given and positive");
  if (x->rank_known && x->rank() < 3) return ctx.Invalid("X must have rank >= 3");
  CopyShape(*x, ctx.output(0));
  return Status::Ok();
}

// LRN of the float tensor xd (shape `shape`; channels_last: N, spatial..., C)
// into yd, with the node's attributes. QfQLinearLRN runs it on dequantized
// blocks of rows, so both give the same bits for the same kernels.
void LrnFloat(const KernelContext& ctx, const float* xd, float* yd, const Shape& shape,
              bool channels_last, kernels::ThreadPool* pool) {
  const int64_t size = ctx.attr().GetInt("size", 1);
  const double alpha = ctx.attr().GetFloat("alpha", 1e-4f);
  const double beta = ctx.attr().GetFloat("beta", 0.75f);
  const double bias = ctx.attr().GetFloat("bias", 1.f);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t n = shape[0], c = channels_last ? shape.back() : shape[1];
  const int64_t plane = n > 0 && c > 0 ? numel / (n * c) : 0;
  // Window [ch - floor((size-1)/2), ch + ceil((size-1)/2)], clipped to the channels.
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  // The fast paths' float parameters and vector math.
  const float scale = float(alpha / double(size)), fbias = float(bias), nbeta = float(-beta);
  const kernels::VMathKernels* vm = ctx.kernel_config().vmath;
  // A larger window (only a hand-written file sets channels_last on one: the
  // planner keeps those NCHW) takes the loops at the end.
  if (ctx.kernel_config().fast_loops && vm && plane > 0 && channels_last &&
      size <= kernels::kLrnMaxChannelsLastSize) {
    // Rows of C channels: each channel's window sum in the same order and the
    // same steps as the planes below (VMathKernels::lrn_channels_last), so
    // both layouts give the same bits.
    const int64_t rows = n * plane;
    const bool small = rows * c < (int64_t(1) << 14);
    kernels::ParallelFor(small ? nullptr : pool, rows, [&](int64_t r0, int64_t r1, int) {
      vm->lrn_channels_last(xd + r0 * c, yd + r0 * c, r1 - r0, c, before, after, fbias, scale,
                            nbeta);
    });
    return;
  }
  if (ctx.kernel_config().fast_loops && vm && plane > 0 && !channels_last) {
    // Fast path in float: each plane's window sums taken in the reference's
    // channel order, and d^-beta = exp(-beta * log(d)), through the session's
    // vector math in one pass per plane (VMathKernels::lrn), a few float ulp
    // from the double reference (in double with pow per element, LRN took
    // half of Inception-v1's time).
    const int64_t planes = n * c;
    const bool small = planes * plane < (int64_t(1) << 14);
    kernels::ParallelFor(small ? nullptr : pool, planes, [&](int64_t p0, int64_t p1, int) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t i = p / c, ch = p % c;
        const int64_t k0 = std::max<int64_t>(0, ch - before), k1 = std::min(c - 1, ch + after);
        vm->lrn(xd + (i * c + k0) * plane, plane, k1 - k0 + 1, xd + p * plane, yd + p * plane,
                plane, fbias, scale, nbeta);
      }
    });
    return;
  }
  // Element (i, ch, j) at i * c * plane + ch * ch_step + j * j_step.
  const int64_t ch_step = channels_last ? 1 : plane, j_step = channels_last ? c : 1;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < plane; ++j) {
        double sq = 0.0;
        const int64_t base = i * c * plane + j * j_step;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          const double v = xd[base + k * ch_step];
          sq += v * v;
        }
        const int64_t idx = base + ch * ch_step;
        yd[idx] = float(xd[idx] / std::pow(bias + alpha / double(size) * sq, beta));
      }
}

Status RunLRN(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  // channels_last = 1 (layout planning, between channels-last ops): NHWC.
  const bool channels_last = ctx.attr().GetInt("channels_last", 0) != 0;
  LrnFloat(ctx, x->ptr<float>(), ctx.output(0)->ptr<float>(), x->shape, channels_last, ctx.pool);
  return Status::Ok();
}

// ---- QfQLinearLRN ---------------------------------------------------------
// DequantizeLinear -> LRN -> QuantizeLinear as one op (the converter folds
// AlexNet's, ZFNet's and GoogLeNet's LRNs, which quantizers leave float):
// inputs X (8-bit), X_scale, X_zero_point?, Y_scale, Y_zero_point?, all per
// tensor; LRN's attributes. Y has Y_zero_point's dtype (X's without it).
// Channels-last rows go through in blocks that stay in L1: dequantized,
// normalized by LRN's own kernels and quantized, the same bits as the three
// ops apart without the float tensors between them (ZFNet's first LRN read
// and wrote 4.6 MB of floats each way, and the float MaxPool after it ran on
// four times the bytes).

// Floats per block of rows (two buffers of this many per thread).
constexpr int64_t kQLrnBlockFloats = 4096;

Status InferQfQLinearLRN(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (!x) return ctx.Invalid("input X is required");
  if (!Is8Bit(x->dtype)) return ctx.Unsupported(std::string("X dtype ") + dtype_name(x->dtype));
  const Tensor* y_zp = ctx.input(4);
  const DType yt = y_zp ? y_zp->dtype : x->dtype;
  if (!Is8Bit(yt)) return ctx.Unsupported(std::string("Y dtype ") + dtype_name(yt));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "X_scale"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "X_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(2), "X_zero_point", x->dtype));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(2), "X_zero_point", 0, ""));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(3), "Y_scale"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(3), "Y_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, y_zp, "Y_zero_point", 0, ""));
  const Attr* size = ctx.attr().Find("size");
  if (!size || size->i <= 0) return ctx.Invalid("size must be given and positive");
  if (x->rank_known && x->rank() < 3) return ctx.Invalid("X must have rank >= 3");
  Tensor* y = ctx.output(0);
  CopyShape(*x, y);
  y->dtype = yt;
  return Status::Ok();
}

struct QLrnParams {
  float x_scale = 1.f, y_scale = 1.f, x_zpf = 0.f, y_zpf = 0.f;
  int32_t x_zp = 0, y_zp = 0;
  QRange range;
  bool x_signed = false, y_signed = false;
};

Status ReadQLrnParams(const KernelContext& ctx, QLrnParams* p) {
  std::vector<float> xs, ys;
  if (!ReadScales(ctx.input(1), &xs) || xs.size() != 1 || !ReadScales(ctx.input(3), &ys) ||
      ys.size() != 1)
    return ctx.Invalid("cannot read a scale");
  p->x_scale = xs[0];
  p->y_scale = ys[0];
  p->x_zp = ReadZeroPoints(ctx.input(2))[0];
  p->y_zp = ReadZeroPoints(ctx.input(4))[0];
  p->x_zpf = float(p->x_zp);
  p->y_zpf = float(p->y_zp);
  p->range = QuantRange(ctx.output(0)->dtype);
  p->x_signed = ctx.input(0)->dtype == DType::kInt8;
  p->y_signed = ctx.output(0)->dtype == DType::kInt8;
  return Status::Ok();
}

// n elements of x dequantized into f, by the level's kernel or the reference formula.
void DequantizeBlock(const kernels::QuantS8Kernels* qk, const QLrnParams& p, const void* x,
                     DType xt, float* f, int64_t n) {
  if (qk) return qk->dequantize(x, f, n, &p.x_scale, &p.x_zpf, false, p.x_signed);
  for (int64_t i = 0; i < n; ++i) f[i] = float(LoadQ(x, xt, i) - p.x_zp) * p.x_scale;
}

void QuantizeBlock(const kernels::QuantS8Kernels* qk, const QLrnParams& p, const float* f, void* y,
                   DType yt, int64_t n) {
  if (qk)
    return qk->quantize(f, y, n, &p.y_scale, &p.y_zpf, false, p.range.lo, p.range.hi, p.y_signed);
  for (int64_t i = 0; i < n; ++i) StoreQ(y, yt, i, QuantizeValue(f[i], p.y_scale, p.y_zp, p.range));
}

// Rows of C channels per block (channels-last), 0 when the op runs on the whole tensor.
int64_t QLrnBlockRows(const KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  if (ctx.attr().GetInt("channels_last", 0) == 0 || !x->rank_known || x->numel() == 0) return 0;
  const int64_t c = x->shape.back();
  return std::max<int64_t>(1, kQLrnBlockFloats / std::max<int64_t>(c, 1));
}

Status ScratchQfQLinearLRN(KernelContext& ctx, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(0);
  const int64_t block_rows = QLrnBlockRows(ctx);
  const int64_t floats = block_rows
                             ? 2 * block_rows * x->shape.back() * kernels::NumThreads(ctx.pool)
                             : 2 * x->numel();
  needs->run = size_t(floats) * sizeof(float);
  return Status::Ok();
}

Status RunQfQLinearLRN(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QLrnParams p;
  QF_RETURN_IF_ERROR(ReadQLrnParams(ctx, &p));
  const kernels::QuantS8Kernels* qk = ctx.kernel_config().quant_s8;
  const int64_t numel = x->numel();
  const int64_t block_rows = QLrnBlockRows(ctx);
  if (block_rows == 0) {  // channels first: LRN's windows span whole planes
    const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                        size_t(2 * numel) * sizeof(float));
    float* xf = region.at<float>(0);
    float* yf = xf + numel;
    DequantizeBlock(qk, p, x->data, x->dtype, xf, numel);
    LrnFloat(ctx, xf, yf, x->shape, /*channels_last=*/false, ctx.pool);
    QuantizeBlock(qk, p, yf, y->data, y->dtype, numel);
    return Status::Ok();
  }
  const int64_t c = x->shape.back(), rows = numel / c;
  const int64_t per_thread = 2 * block_rows * c;
  const kernels::ScratchRegion region(
      {ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
      size_t(per_thread * kernels::NumThreads(ctx.pool)) * sizeof(float));
  const size_t xe = dtype_storage_bytes(x->dtype, 1), ye = dtype_storage_bytes(y->dtype, 1);
  const bool small = numel < (int64_t(1) << 14);
  kernels::ParallelFor(small ? nullptr : ctx.pool, rows, [&](int64_t r0, int64_t r1, int slot) {
    float* xf = region.at<float>(0) + slot * per_thread;
    float* yf = xf + block_rows * c;
    for (int64_t r = r0; r < r1; r += block_rows) {
      const int64_t nr = std::min(block_rows, r1 - r), count = nr * c;
      DequantizeBlock(qk, p, x->ptr<uint8_t>() + r * c * xe, x->dtype, xf, count);
      LrnFloat(ctx, xf, yf, Shape{1, nr, c}, /*channels_last=*/true, nullptr);
      QuantizeBlock(qk, p, yf, y->ptr<uint8_t>() + r * c * ye, y->dtype, count);
    }
  });
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_BatchNormalization() {
  static const OpDef def = [] {
    OpDef d = WithTraits({"BatchNormalization", InferBatchNormalization, RunBatchNormalization,
                          /*value_inputs=*/0, /*shape_only=*/false, /*min_inputs=*/5,
                          /*max_inputs=*/5},
                         kTraitSpatial | kTraitPointwise);
    // Between channels-last ops (DenseNet's pre-activation blocks after a
    // Concat) it runs channels-last instead of between two Transposes.
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.bf16_io = BatchNormBf16Io;
    return d;
  }();
  return def;
}

const OpDef& OpDef_InstanceNormalization() {
  static const OpDef def = WithTraits({"InstanceNormalization", InferInstanceNormalization,
                                       RunInstanceNormalization, /*value_inputs=*/0,
                                       /*shape_only=*/false,
                                       /*min_inputs=*/3, /*max_inputs=*/3},
                                      kTraitSpatial);
  return def;
}

const OpDef& OpDef_LayerNormalization() {
  static const OpDef def{"LayerNormalization", InferLayerNormalization, RunLayerNormalization,
                         /*value_inputs=*/0,   /*shape_only=*/false,    /*min_inputs=*/2,
                         /*max_inputs=*/3};
  return def;
}

const OpDef& OpDef_GroupNormalization() {
  static const OpDef def{"GroupNormalization", InferGroupNormalization, RunGroupNormalization,
                         /*value_inputs=*/0,   /*shape_only=*/false,    /*min_inputs=*/3,
                         /*max_inputs=*/3};
  return def;
}

const OpDef& OpDef_LRN() {
  static const OpDef def = [] {
    OpDef d{"LRN",
            InferLRN,
            RunLRN,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/1,
            /*max_inputs=*/1};
    // Channels-last between channels-last convolutions and pools (AlexNet,
    // GoogLeNet, ZFNet): the window runs along a pixel's contiguous channels,
    // and the Transposes around it (and in quantized models a float
    // Transpose-DequantizeLinear pair) disappear.
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.layout_channels_last = [](const AttrMap& attrs) {
      const int64_t size = attrs.GetInt("size", 0);
      return size > 0 && size <= kernels::kLrnMaxChannelsLastSize;
    };
    return d;
  }();
  return def;
}

const OpDef& OpDef_QfQLinearLRN() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QfQLinearLRN", InferQfQLinearLRN, RunQfQLinearLRN, 4, 5);
    d.scratch = ScratchQfQLinearLRN;
    d.traits = kTraitIntegerKernel;
    d.layout = LayoutRole::kChannelsLast;
    d.layout_channels_last = [](const AttrMap& attrs) {
      const int64_t size = attrs.GetInt("size", 0);
      return size > 0 && size <= kernels::kLrnMaxChannelsLastSize;
    };
    return d;
  }();
  return def;
}

}  // namespace qfold
