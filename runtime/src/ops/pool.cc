// Pooling: MaxPool (with optional Indices), AveragePool, LpPool and their
// Global* forms. All share one N-d window walker: for each output position it
// finds, per spatial axis, the kernel taps that land inside the input, so
// padding never has to be materialized.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/pool_2d.h"
#include "kernels/pool_nhwc_s8.h"
#include "kernels/rowops_f32.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"
#include "kernels/window_taps.h"
#include "ops/channels_last.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

Status CheckPoolDType(const KernelContext& ctx, PoolKind kind, DType t) {
  bool ok = t == DType::kFloat32 || t == DType::kFloat64;
  // MaxPool moves elements, so it runs on quantized 8- and 16-bit codes too.
  if (kind == PoolKind::kMax)
    ok = ok || t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
  if (!ok) return ctx.Unsupported(std::string("dtype ") + dtype_name(t));
  return Status::Ok();
}

// Reads the window attributes of a (non-global) pooling op for input spatial
// dims `in` (kUnknownDim allowed).
Status ParsePool(const KernelContext& ctx, PoolKind kind, const Shape& in, WindowGeometry* g) {
  const Attr* ks = ctx.attr().Find("kernel_shape");
  if (!ks) return ctx.Invalid("kernel_shape is required");
  std::vector<int64_t> kernel;
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "kernel_shape", in.size(), 1, &kernel));
  const int64_t ceil_mode = ctx.attr().GetInt("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) return ctx.Invalid("ceil_mode must be 0 or 1");
  if (kind == PoolKind::kMax) {
    const int64_t order = ctx.attr().GetInt("storage_order", 0);
    if (order != 0 && order != 1) return ctx.Invalid("storage_order must be 0 or 1");
  }
  if (kind == PoolKind::kLp && ctx.attr().GetInt("p", 2) <= 0)
    return ctx.Invalid("p must be positive");
  return ComputeWindowGeometry(ctx, in, kernel, ceil_mode != 0, g);
}

Status InferPool(KernelContext& ctx, PoolKind kind) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckPoolDType(ctx, kind, x->dtype));
  for (Tensor* o : ctx.outputs)
    if (o) o->dtype = x->dtype;
  if (Tensor* idx = ctx.output(1)) {
    if (kind != PoolKind::kMax) return ctx.Invalid("only MaxPool has a second output");
    idx->dtype = DType::kInt64;
  }
  const Attr* ks = ctx.attr().Find("kernel_shape");
  if (!ks) return ctx.Invalid("kernel_shape is required");
  const size_t nsp = ks->ints.size();
  if (x->rank_known && size_t(x->rank()) != nsp + 2)
    return ctx.Invalid("X " + ShapeToString(x->shape) + " does not match kernel_shape with " +
                       std::to_string(nsp) + " dims");
  Shape in(nsp, kUnknownDim);
  if (x->rank_known) in.assign(x->shape.begin() + 2, x->shape.end());
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParsePool(ctx, kind, in, &g));
  Shape out = {x->rank_known ? x->shape[0] : kUnknownDim,
               x->rank_known ? x->shape[1] : kUnknownDim};
  out.insert(out.end(), g.out.begin(), g.out.end());
  for (Tensor* o : ctx.outputs)
    if (o) {
      o->rank_known = true;
      o->shape = out;
    }
  return Status::Ok();
}

// For one output position along one axis: the first and one-past-last kernel
// taps inside the input, and how many taps fall inside input plus padding
// (the AveragePool divisor with count_include_pad).
struct AxisWindow {
  int64_t start;  // input coordinate of tap 0
  int64_t lo, hi;
  int64_t padded_taps;
};

AxisWindow MakeAxisWindow(const WindowGeometry& g, size_t a, int64_t o, int64_t in) {
  AxisWindow w;
  w.start = o * g.strides[a] - g.pad_begin[a];
  const kernels::WindowTaps t =
      kernels::TapsOfWindow(w.start, g.kernel[a], g.dilations[a], in, g.pad_end[a]);
  w.lo = t.lo;
  w.hi = t.hi;
  w.padded_taps = t.padded;
  return w;
}

// PoolKernel's window tables: per axis, one AxisWindow per output position
// (they do not depend on the plane), laid out alike for the request
// (PoolScratch) and the run.
struct PoolTables {
  kernels::ScratchLayout layout;
  size_t at[kMaxRank] = {};
};

PoolTables PlanPoolTables(const WindowGeometry& g) {
  PoolTables t;
  for (size_t a = 0; a < g.out.size(); ++a)
    t.at[a] = t.layout.Add(size_t(g.out[a]) * sizeof(AxisWindow));
  return t;
}

template <class T>
void PoolKernel(const KernelContext& ctx, PoolKind kind, const WindowGeometry& g) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  Tensor* indices = ctx.output(1);
  const bool include_pad = ctx.attr().GetInt("count_include_pad", 0) != 0;
  const bool col_major = ctx.attr().GetInt("storage_order", 0) != 0;
  const double p = double(ctx.attr().GetInt("p", 2));
  const size_t nsp = g.out.size();
  const Shape in(x->shape.begin() + 2, x->shape.end());
  const int64_t planes = x->shape[0] * x->shape[1];
  const int64_t in_size = Product(in), out_size = Product(g.out);
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  // Strides for Indices: row-major, or column-major with storage_order=1.
  std::vector<int64_t> idx_strides(nsp, 1);
  for (size_t a = 1; a < nsp; ++a) idx_strides[a] = idx_strides[a - 1] * in[a - 1];

  // The windows of one output position, computed once per position since
  // they do not depend on the plane.
  const PoolTables tables = PlanPoolTables(g);
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      tables.layout.total());
  AxisWindow* axis_windows[kMaxRank];
  for (size_t a = 0; a < nsp; ++a) {
    axis_windows[a] = region.at<AxisWindow>(tables.at[a]);
    for (int64_t o = 0; o < g.out[a]; ++o) axis_windows[a][o] = MakeAxisWindow(g, a, o, in[a]);
  }

  std::vector<int64_t> o(nsp, 0), range(nsp), k(nsp);
  std::vector<const AxisWindow*> w(nsp);
  for (int64_t j = 0; j < out_size; ++j) {
    int64_t padded_count = 1, count = 1;
    for (size_t a = 0; a < nsp; ++a) {
      w[a] = &axis_windows[a][o[a]];
      range[a] = w[a]->hi - w[a]->lo;
      count *= range[a];
      padded_count = kernels::SaturatingCount(padded_count, w[a]->padded_taps);
    }
    for (int64_t plane = 0; plane < planes; ++plane) {
      const T* xp = x->ptr<T>() + plane * in_size;
      double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t best = 0;  // flat spatial offset of the max, for Indices
      if (count > 0) {
        std::fill(k.begin(), k.end(), 0);
        do {
          int64_t off = 0, idx = 0;
          for (size_t a = 0; a < nsp; ++a) {
            const int64_t pos = w[a]->start + (w[a]->lo + k[a]) * g.dilations[a];
            off += pos * in_strides[a];
            idx += pos * idx_strides[a];
          }
          const double v = double(xp[off]);
          if (kind == PoolKind::kMax) {
            if (v > acc || std::isnan(v)) {
              acc = v;
              best = col_major ? idx : off;
            }
          } else if (kind == PoolKind::kAverage) {
            acc += v;
          } else {
            acc += std::pow(std::fabs(v), p);
          }
        } while (NextIndex(range, &k));
      }
      T result;
      if (kind == PoolKind::kMax) {
        result = count > 0 ? T(acc) : std::numeric_limits<T>::lowest();
      } else if (kind == PoolKind::kAverage) {
        const int64_t div = include_pad ? padded_count : count;
        result = div > 0 ? T(acc / double(div)) : T(0);
      } else {
        result = T(std::pow(acc, 1.0 / p));
      }
      y->ptr<T>()[plane * out_size + j] = result;
      if (indices) indices->ptr<int64_t>()[plane * out_size + j] = plane * in_size + best;
    }
    NextIndex(g.out, &o);
  }
}

// MaxPool of 16-bit codes (a16 models), 2-D NCHW: one plane per work item,
// each output the max over the taps inside the input (lowest() for a window
// with none, as PoolKernel). A max is exact, so this equals the reference.
template <class T>
void MaxPool2d16(const kernels::Pool2dArgs& a, const T* x, T* y) {
  kernels::ParallelFor(a.pool, a.planes, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* in = x + p * a.ih * a.iw;
      T* out = y + p * a.oh * a.ow;
      for (int64_t oy = 0; oy < a.oh; ++oy)
        for (int64_t ox = 0; ox < a.ow; ++ox) {
          T m = std::numeric_limits<T>::lowest();
          for (int64_t ky = 0; ky < a.kh; ++ky) {
            const int64_t iy = oy * a.sh - a.pad_top + ky * a.dh;
            if (iy < 0 || iy >= a.ih) continue;
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t ix = ox * a.sw - a.pad_left + kx * a.dw;
              if (ix >= 0 && ix < a.iw) m = std::max(m, in[iy * a.iw + ix]);
            }
          }
          out[oy * a.ow + ox] = m;
        }
    }
  });
}

// The 2-D NCHW fast kernels (kernels/pool_2d.h, bit-identical to PoolKernel)
// for MaxPool without Indices (float, int8, uint8) and float AveragePool:
// their arguments, false when they do not cover the case (or the reference
// ISA level is forced).
bool Pool2dArgsFor(const KernelContext& ctx, PoolKind kind, const WindowGeometry& g,
                   kernels::Pool2dArgs* args) {
  const Tensor* x = ctx.input(0);
  const Tensor* y = ctx.output(0);
  if (x->rank() != 4 || kind == PoolKind::kLp || ctx.output(1)) return false;
  if (kind == PoolKind::kAverage && x->dtype != DType::kFloat32) return false;
  if (x->dtype != DType::kFloat32 && x->dtype != DType::kInt8 && x->dtype != DType::kUInt8)
    return false;
  if (!ctx.kernel_config().pool_2d || x->numel() == 0 || y->numel() == 0) return false;
  kernels::Pool2dArgs& a = *args;
  a.planes = x->shape[0] * x->shape[1];
  a.ih = x->shape[2];
  a.iw = x->shape[3];
  a.oh = g.out[0];
  a.ow = g.out[1];
  a.kh = g.kernel[0];
  a.kw = g.kernel[1];
  a.sh = g.strides[0];
  a.sw = g.strides[1];
  a.dh = g.dilations[0];
  a.dw = g.dilations[1];
  a.pad_top = g.pad_begin[0];
  a.pad_left = g.pad_begin[1];
  a.pad_bottom = g.pad_end[0];
  a.pad_right = g.pad_end[1];
  a.count_include_pad = ctx.attr().GetInt("count_include_pad", 0) != 0;
  a.pool = ctx.pool;
  a.scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return true;
}

bool RunPool2dFast(const KernelContext& ctx, PoolKind kind, const WindowGeometry& g) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  kernels::Pool2dArgs a;
  if (!Pool2dArgsFor(ctx, kind, g, &a)) return false;
  switch (x->dtype) {
    case DType::kFloat32:
      if (kind == PoolKind::kMax)
        kernels::MaxPool2dF32(*ctx.kernel_config().pool_2d, a, x->ptr<float>(), y->ptr<float>());
      else
        kernels::AvgPool2dF32(*ctx.kernel_config().pool_2d, a, x->ptr<float>(), y->ptr<float>());
      return true;
    case DType::kInt8:
      kernels::MaxPool2dS8(*ctx.kernel_config().pool_2d, a, x->ptr<int8_t>(), y->ptr<int8_t>());
      return true;
    case DType::kUInt8:
      kernels::MaxPool2dU8(*ctx.kernel_config().pool_2d, a, x->ptr<uint8_t>(), y->ptr<uint8_t>());
      return true;
    case DType::kInt16:
      MaxPool2d16(a, x->ptr<int16_t>(), y->ptr<int16_t>());
      return true;
    case DType::kUInt16:
      MaxPool2d16(a, x->ptr<uint16_t>(), y->ptr<uint16_t>());
      return true;
    default:
      return false;
  }
}

Status RunPool(KernelContext& ctx, PoolKind kind) {
  const Tensor* x = ctx.input(0);
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParsePool(ctx, kind, Shape(x->shape.begin() + 2, x->shape.end()), &g));
  // Nothing to compute. Returning here also keeps the per-axis window tables
  // (one entry per output position) from being built for an axis of 2^27
  // windows (huge pads) next to an empty one: 1 GiB for no output.
  if (ctx.output(0)->numel() == 0) return Status::Ok();
  if (RunPool2dFast(ctx, kind, g)) return Status::Ok();
  switch (x->dtype) {
    case DType::kFloat32:
      PoolKernel<float>(ctx, kind, g);
      break;
    case DType::kFloat64:
      PoolKernel<double>(ctx, kind, g);
      break;
    case DType::kInt8:
      PoolKernel<int8_t>(ctx, kind, g);
      break;
    case DType::kUInt8:
      PoolKernel<uint8_t>(ctx, kind, g);
      break;
    case DType::kInt16:
      PoolKernel<int16_t>(ctx, kind, g);
      break;
    case DType::kUInt16:
      PoolKernel<uint16_t>(ctx, kind, g);
      break;
    default:
      return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype));
  }
  return Status::Ok();
}

Status InferMaxPoolChannelsFirst(KernelContext& ctx) {
  return InferPool(ctx, PoolKind::kMax);
}
Status RunMaxPoolChannelsFirst(KernelContext& ctx) {
  return RunPool(ctx, PoolKind::kMax);
}

// channels_last = 1 (set by the converter's layout planning): 8-bit or
// float32 data without the Indices output, [N, spatial..., C].
Status InferChannelsLastPool(KernelContext& ctx, Status (*infer_channels_first)(KernelContext&)) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return infer_channels_first(ctx);
  if (ctx.output(1)) return ctx.Invalid("channels_last MaxPool has no Indices output");
  return InferViaChannelsFirst(ctx, infer_channels_first);
}

// The geometry of a channels-last 1-D or 2-D pool for kernels/pool_nhwc_s8.h.
bool ChannelsLastPoolArgs(const KernelContext& ctx, PoolKind kind, kernels::PoolNhwcArgs* p) {
  const Tensor* x = ctx.input(0);
  const int nsp = x->rank() - 2;
  if (nsp != 1 && nsp != 2) return false;
  WindowGeometry g;
  const Shape cf = ChannelsFirstShape(x->shape);
  if (!ParsePool(ctx, kind, Shape(cf.begin() + 2, cf.end()), &g).ok()) return false;
  const int a = nsp - 1;
  p->n = x->shape[0];
  p->c = x->shape.back();
  p->iw = cf[size_t(2 + a)];
  p->ow = g.out[size_t(a)];
  p->kw = g.kernel[size_t(a)];
  p->sw = g.strides[size_t(a)];
  p->dw = g.dilations[size_t(a)];
  p->pad_left = g.pad_begin[size_t(a)];
  p->pad_right = g.pad_end[size_t(a)];
  if (nsp == 2) {
    p->ih = cf[2];
    p->oh = g.out[0];
    p->kh = g.kernel[0];
    p->sh = g.strides[0];
    p->dh = g.dilations[0];
    p->pad_top = g.pad_begin[0];
    p->pad_bottom = g.pad_end[0];
  }
  p->count_include_pad = ctx.attr().GetInt("count_include_pad", 0) != 0;
  p->pool = ctx.pool;
  p->scratch = {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  return true;
}

// The element size the channels-last kernels pool this call with (float
// MaxPool and AveragePool, 8- and 16-bit MaxPool), 0 when they do not take
// it (dtype, geometry, configuration). The scratch request and the run both
// ask this, so the fallback's scratch is planned exactly when it is taken.
int64_t ChannelsLastPoolCovered(const KernelContext& ctx, PoolKind kind, kernels::PoolNhwcArgs* p) {
  const DType dt = ctx.input(0)->dtype;
  int64_t esize = 0;
  if (dt == DType::kFloat32 && (kind == PoolKind::kMax || kind == PoolKind::kAverage))
    esize = 4;
  else if (dt == DType::kBFloat16 && kind == PoolKind::kAverage)
    esize = 2;
  else if (kind == PoolKind::kMax && (dt == DType::kInt8 || dt == DType::kUInt8))
    esize = 1;
  else if (kind == PoolKind::kMax &&
           (dt == DType::kInt16 || dt == DType::kUInt16 || dt == DType::kBFloat16))
    esize = 2;
  if (!esize || !ChannelsLastPoolArgs(ctx, kind, p) ||
      !kernels::PoolNhwcCovers(ctx.kernel_config(), *p))
    return 0;
  return esize;
}

// The channels-first kernels' scratch: a fast kernel's or the reference
// kernel's window tables.
Status PoolScratchChannelsFirst(KernelContext& ctx, PoolKind kind, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(0);
  if (!x->shape_known() || x->rank() < 3 || ctx.output(0)->numel() == 0) return Status::Ok();
  const bool byte = x->dtype == DType::kInt8 || x->dtype == DType::kUInt8;
  WindowGeometry g;
  QF_RETURN_IF_ERROR(ParsePool(ctx, kind, Shape(x->shape.begin() + 2, x->shape.end()), &g));
  kernels::Pool2dArgs a;
  if (!Pool2dArgsFor(ctx, kind, g, &a)) {
    needs->run = PlanPoolTables(g).layout.total();
    return Status::Ok();
  }
  // 16-bit NCHW MaxPool (MaxPool2d16) needs no scratch.
  if (x->dtype == DType::kInt16 || x->dtype == DType::kUInt16) return Status::Ok();
  const kernels::Pool2dKernels& k = *ctx.kernel_config().pool_2d;
  needs->run = kind == PoolKind::kMax ? kernels::MaxPool2dScratch(k, a, byte ? 1 : 4)
                                      : kernels::AvgPool2dScratch(k, a);
  return Status::Ok();
}
Status MaxPoolScratchChannelsFirst(KernelContext& ctx, ScratchNeeds* needs) {
  return PoolScratchChannelsFirst(ctx, PoolKind::kMax, needs);
}
Status AveragePoolScratchChannelsFirst(KernelContext& ctx, ScratchNeeds* needs) {
  return PoolScratchChannelsFirst(ctx, PoolKind::kAverage, needs);
}

// OpDef::scratch of MaxPool, AveragePool and LpPool: what the kernel the
// run takes uses. A channels-last pool the channels-last kernels do not
// take (ChannelsLastPoolCovered) runs through RunViaChannelsFirst: its
// copies and the channels-first kernel's scratch.
Status PoolScratch(KernelContext& ctx, PoolKind kind, ScratchNeeds* needs) {
  const Tensor* x = ctx.input(0);
  if (!x->shape_known() || x->rank() < 3) return Status::Ok();
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return PoolScratchChannelsFirst(ctx, kind, needs);
  kernels::PoolNhwcArgs p;
  const int64_t esize = ChannelsLastPoolCovered(ctx, kind, &p);
  if (!esize)
    return ChannelsFirstScratch(
        ctx, kind == PoolKind::kMax ? MaxPoolScratchChannelsFirst : AveragePoolScratchChannelsFirst,
        needs);
  if (ctx.output(0)->numel() != 0)
    needs->run = kernels::PoolNhwcScratch(ctx.kernel_config(), p, esize);
  return Status::Ok();
}
Status MaxPoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  return PoolScratch(ctx, PoolKind::kMax, needs);
}
Status AveragePoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  return PoolScratch(ctx, PoolKind::kAverage, needs);
}
Status LpPoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  return PoolScratchChannelsFirst(ctx, PoolKind::kLp, needs);
}

// The channels-last kernels when ChannelsLastPoolCovered; false otherwise
// (*covered tells whether the fallback's scratch was planned).
bool RunPoolChannelsLastFast(KernelContext& ctx, PoolKind kind, bool* covered) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  kernels::PoolNhwcArgs p;
  const int64_t esize = ChannelsLastPoolCovered(ctx, kind, &p);
  *covered = esize != 0;
  const kernels::KernelConfig& kc = ctx.kernel_config();
  if (esize == 4)
    return kind == PoolKind::kMax
               ? kernels::MaxPoolNhwcF32(kc, p, x->ptr<float>(), y->ptr<float>())
               : kernels::AvgPoolNhwcF32(kc, p, x->ptr<float>(), y->ptr<float>());
  if (esize == 2 && x->dtype == DType::kBFloat16)
    return kind == PoolKind::kMax
               ? kernels::MaxPoolNhwcBf16(kc, p, x->ptr<uint16_t>(), y->ptr<uint16_t>())
               : kernels::AvgPoolNhwcBf16(kc, p, x->ptr<uint16_t>(), y->ptr<uint16_t>());
  if (esize == 2)
    return kernels::MaxPoolNhwc16(kc, p, x->dtype == DType::kInt16, x->ptr<uint16_t>(),
                                  y->ptr<uint16_t>());
  if (esize == 1)
    return kernels::MaxPoolNhwcS8(kc, p, x->dtype == DType::kInt8, x->ptr<uint8_t>(),
                                  y->ptr<uint8_t>());
  return false;
}

Status InferMaxPool(KernelContext& ctx) {
  return InferChannelsLastPool(ctx, InferMaxPoolChannelsFirst);
}

// OpDef::bf16_io: a float MaxPool the channels-last kernels take reads and
// writes bfloat16 as well (the maximum is one of the inputs: exact), both
// or neither (OpDef::bf16_tied).
void PoolBf16Io(KernelContext& ctx, PoolKind kind, unsigned* inputs, unsigned* outputs) {
  bool cl = false;
  kernels::PoolNhwcArgs p;
  if (!ReadChannelsLast(ctx, &cl).ok() || !cl || ctx.input(0)->dtype != DType::kFloat32 ||
      ctx.output(1) || ChannelsLastPoolCovered(ctx, kind, &p) == 0)
    return;
  *inputs = 1;
  *outputs = 1;
}
void MaxPoolBf16Io(KernelContext& ctx, unsigned* inputs, unsigned* outputs) {
  PoolBf16Io(ctx, PoolKind::kMax, inputs, outputs);
}
// AveragePool: the float average rounded to bf16 (AvgPoolNhwcBf16).
void AveragePoolBf16Io(KernelContext& ctx, unsigned* inputs, unsigned* outputs) {
  PoolBf16Io(ctx, PoolKind::kAverage, inputs, outputs);
}

// bf16 mode stores a pool's x and y as bfloat16 together (tied), only where
// the channels-last kernels take the call.
Status CheckPoolBf16(const KernelContext& ctx, bool* bf16) {
  *bf16 = ctx.input(0)->dtype == DType::kBFloat16;
  if (*bf16 != (ctx.output(0)->dtype == DType::kBFloat16))
    return ctx.Error(StatusCode::kInternal, "bfloat16 and float32 activations mixed");
  return Status::Ok();
}

Status RunMaxPool(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return RunMaxPoolChannelsFirst(ctx);
  bool covered = false;
  bool bf16 = false;
  QF_RETURN_IF_ERROR(CheckPoolBf16(ctx, &bf16));
  if (RunPoolChannelsLastFast(ctx, PoolKind::kMax, &covered)) return Status::Ok();
  if (bf16)
    return ctx.Error(StatusCode::kInternal, "bfloat16 activations reached a float32 kernel");
  return RunViaChannelsFirst(ctx, RunMaxPoolChannelsFirst, MaxPoolScratchChannelsFirst, !covered);
}

Status InferAveragePoolChannelsFirst(KernelContext& ctx) {
  return InferPool(ctx, PoolKind::kAverage);
}
Status RunAveragePoolChannelsFirst(KernelContext& ctx) {
  return RunPool(ctx, PoolKind::kAverage);
}
Status InferAveragePool(KernelContext& ctx) {
  return InferChannelsLastPool(ctx, InferAveragePoolChannelsFirst);
}
Status RunAveragePool(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return RunAveragePoolChannelsFirst(ctx);
  bool covered = false;
  bool bf16 = false;
  QF_RETURN_IF_ERROR(CheckPoolBf16(ctx, &bf16));
  if (RunPoolChannelsLastFast(ctx, PoolKind::kAverage, &covered)) return Status::Ok();
  if (bf16)
    return ctx.Error(StatusCode::kInternal, "bfloat16 activations reached a float32 kernel");
  return RunViaChannelsFirst(ctx, RunAveragePoolChannelsFirst, AveragePoolScratchChannelsFirst,
                             !covered);
}
Status InferLpPool(KernelContext& ctx) {
  return InferPool(ctx, PoolKind::kLp);
}
Status RunLpPool(KernelContext& ctx) {
  return RunPool(ctx, PoolKind::kLp);
}

// Global pooling: one window covering all spatial dims; output (N, C, 1, ...).
Status InferGlobalPool(KernelContext& ctx, PoolKind kind) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckPoolDType(ctx, kind, x->dtype));
  if (kind == PoolKind::kLp && ctx.attr().GetInt("p", 2) <= 0)
    return ctx.Invalid("p must be positive");
  y->dtype = x->dtype;
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  if (x->rank() < 2) return ctx.Invalid("X must have rank >= 2");
  y->rank_known = true;
  y->shape = x->shape;
  std::fill(y->shape.begin() + 2, y->shape.end(), 1);
  return Status::Ok();
}

// One output value per (batch, channel), each channel's values taken in the
// reference's (spatial) order in both layouts. The kind is a template
// argument: the channels-last loop over a pixel's channels then has no
// branch, and the compiler vectorizes it (SqueezeNet's 13x13x1000 average:
// 58 us with the kind tested per element).
// acc: one accumulator per channel (GlobalPoolScratch).
template <PoolKind kKind, class T>
void GlobalPoolKernel(const Tensor& x, double p, bool channels_last, double* acc, Tensor* y,
                      const kernels::RowOpsF32Kernels* rowops) {
  const int64_t n = x.shape[0], c = channels_last ? x.shape.back() : x.shape[1];
  const int64_t size = n * c != 0 ? x.numel() / (n * c) : 0;
  const double init = kKind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
  auto add = [&](double& a, double v) {
    if constexpr (kKind == PoolKind::kMax) {
      if (v > a || std::isnan(v)) a = v;
    } else if constexpr (kKind == PoolKind::kAverage) {
      a += v;
    } else {
      a += std::pow(std::fabs(v), p);
    }
  };
  const T* xd = x.ptr<T>();
  for (int64_t b = 0; b < n; ++b) {
    std::fill(acc, acc + c, init);
    if (kKind == PoolKind::kAverage && std::is_same<T, float>::value && channels_last && rowops) {
      // The same sums, vectorized (SE blocks' averages of 80x80 maps).
      rowops->sum_columns_f64(reinterpret_cast<const float*>(xd) + b * size * c, size, c, acc);
    } else if (channels_last) {
      // Pixel by pixel: each channel still sees its values in spatial order.
      for (int64_t i = 0; i < size; ++i) {
        const T* px = xd + (b * size + i) * c;
        for (int64_t ch = 0; ch < c; ++ch) add(acc[ch], double(px[ch]));
      }
    } else {
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* xp = xd + (b * c + ch) * size;
        for (int64_t i = 0; i < size; ++i) add(acc[ch], double(xp[i]));
      }
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const double a = acc[ch];
      T r;
      if (kKind == PoolKind::kMax)
        r = size > 0 ? T(a) : std::numeric_limits<T>::lowest();
      else if (kKind == PoolKind::kAverage)
        r = size > 0 ? T(a / double(size)) : T(0);
      else
        r = T(std::pow(a, 1.0 / p));
      y->ptr<T>()[b * c + ch] = r;
    }
  }
}

template <PoolKind kKind>
Status GlobalPoolOf(const KernelContext& ctx, const Tensor& x, double p, bool channels_last,
                    double* acc, Tensor* y) {
  switch (x.dtype) {
    case DType::kFloat32:
      GlobalPoolKernel<kKind, float>(x, p, channels_last, acc, y, ctx.kernel_config().rowops_f32);
      break;
    case DType::kFloat64:
      GlobalPoolKernel<kKind, double>(x, p, channels_last, acc, y, nullptr);
      break;
    case DType::kInt8:
      GlobalPoolKernel<kKind, int8_t>(x, p, channels_last, acc, y, nullptr);
      break;
    case DType::kUInt8:
      GlobalPoolKernel<kKind, uint8_t>(x, p, channels_last, acc, y, nullptr);
      break;
    default:
      return ctx.Unsupported(std::string("dtype ") + dtype_name(x.dtype));
  }
  return Status::Ok();
}

// The per channel accumulators of GlobalPoolKernel (x's shape only).
size_t GlobalPoolAccBytes(const Tensor& x, bool channels_last) {
  if (x.rank() < 2) return 0;
  return size_t(channels_last ? x.shape.back() : x.shape[1]) * sizeof(double);
}

// OpDef::scratch of the global pools.
Status GlobalPoolScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  needs->run = GlobalPoolAccBytes(*ctx.input(0), cl);
  return Status::Ok();
}

// channels_last = 1 (set by the layout planning between channels-last ops):
// x [N, spatial..., C], y [N, 1..., C].
Status RunGlobalPool(KernelContext& ctx, PoolKind kind) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  const double p = double(ctx.attr().GetInt("p", 2));
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      GlobalPoolAccBytes(*x, cl));
  double* acc = region.at<double>(0);
  if (kind == PoolKind::kMax) return GlobalPoolOf<PoolKind::kMax>(ctx, *x, p, cl, acc, y);
  if (kind == PoolKind::kAverage) return GlobalPoolOf<PoolKind::kAverage>(ctx, *x, p, cl, acc, y);
  return GlobalPoolOf<PoolKind::kLp>(ctx, *x, p, cl, acc, y);
}

Status InferGlobalMaxPoolChannelsFirst(KernelContext& ctx) {
  return InferGlobalPool(ctx, PoolKind::kMax);
}
Status InferGlobalAveragePoolChannelsFirst(KernelContext& ctx) {
  return InferGlobalPool(ctx, PoolKind::kAverage);
}
Status InferGlobalLpPoolChannelsFirst(KernelContext& ctx) {
  return InferGlobalPool(ctx, PoolKind::kLp);
}

// Every global pool reads channels_last (RunGlobalPool does), so shapes and
// kernels always agree; the planner sets it on GlobalAveragePool only.
Status InferGlobalPoolLayout(KernelContext& ctx, Status (*infer_channels_first)(KernelContext&)) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? InferViaChannelsFirst(ctx, infer_channels_first) : infer_channels_first(ctx);
}

Status InferGlobalMaxPool(KernelContext& ctx) {
  return InferGlobalPoolLayout(ctx, InferGlobalMaxPoolChannelsFirst);
}
Status RunGlobalMaxPool(KernelContext& ctx) {
  return RunGlobalPool(ctx, PoolKind::kMax);
}
Status InferGlobalAveragePool(KernelContext& ctx) {
  return InferGlobalPoolLayout(ctx, InferGlobalAveragePoolChannelsFirst);
}
Status RunGlobalAveragePool(KernelContext& ctx) {
  return RunGlobalPool(ctx, PoolKind::kAverage);
}
Status InferGlobalLpPool(KernelContext& ctx) {
  return InferGlobalPoolLayout(ctx, InferGlobalLpPoolChannelsFirst);
}
Status RunGlobalLpPool(KernelContext& ctx) {
  return RunGlobalPool(ctx, PoolKind::kLp);
}

}  // namespace

const OpDef& OpDef_MaxPool() {
  static const OpDef def = [] {
    OpDef d{"MaxPool", InferMaxPool, RunMaxPool, 0, false, 1, 1};
    d.scratch = MaxPoolScratch;
    d.bf16_io = MaxPoolBf16Io;
    d.bf16_tied = true;
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.traits = kTraitMovesElements | kTraitSpatial;
    return d;
  }();
  return def;
}
const OpDef& OpDef_AveragePool() {
  static const OpDef def = [] {
    OpDef d{"AveragePool", InferAveragePool, RunAveragePool, 0, false, 1, 1};
    d.scratch = AveragePoolScratch;
    d.bf16_io = AveragePoolBf16Io;
    d.bf16_tied = true;
    // Float only (8-bit averages are QLinearAveragePool).
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.traits = kTraitSpatial;
    return d;
  }();
  return def;
}
// LpPool and GlobalLpPool read NCHW as well; without kTraitSpatial as long as
// the layouts of graph inputs and outputs next to them stay unlabelled.
const OpDef& OpDef_LpPool() {
  static const OpDef def = [] {
    OpDef d{"LpPool", InferLpPool, RunLpPool, 0, false, 1, 1};
    d.scratch = LpPoolScratch;
    return d;
  }();
  return def;
}
const OpDef& OpDef_GlobalMaxPool() {
  static const OpDef def = [] {
    OpDef d = WithTraits({"GlobalMaxPool", InferGlobalMaxPool, RunGlobalMaxPool, 0, false, 1, 1},
                         kTraitSpatial);
    d.scratch = GlobalPoolScratch;
    return d;
  }();
  return def;
}
const OpDef& OpDef_GlobalAveragePool() {
  static const OpDef def = [] {
    OpDef d{"GlobalAveragePool", InferGlobalAveragePool, RunGlobalAveragePool, 0, false, 1, 1};
    d.scratch = GlobalPoolScratch;
    // Channels-last for 8-bit and float data alike (the squeeze-and-excite
    // blocks between channels-last convolutions).
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.traits = kTraitSpatial;
    return d;
  }();
  return def;
}
const OpDef& OpDef_GlobalLpPool() {
  static const OpDef def = [] {
    OpDef d = WithTraits({"GlobalLpPool", InferGlobalLpPool, RunGlobalLpPool, 0, false, 1, 1}, 0);
    d.scratch = GlobalPoolScratch;
    return d;
  }();
  return def;
}

}  // namespace qfold
