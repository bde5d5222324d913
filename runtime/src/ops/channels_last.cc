#include "ops/channels_last.h"

#include <cstring>
#include <string>
#include <vector>

#include "kernels/scratch.h"

namespace qfold {

namespace {

bool IsConv(const KernelContext& ctx) {
  return ctx.op_type && *ctx.op_type == "Conv";
}

}  // namespace

Status ReadChannelsLast(const KernelContext& ctx, bool* channels_last) {
  const int64_t v = ctx.attr().GetInt("channels_last", 0);
  if (v != 0 && v != 1) return ctx.Invalid("channels_last must be 0 or 1");
  *channels_last = v == 1;
  // Only Conv's kernels read a channels-first input 0 (a malformed file
  // setting it elsewhere would pair shapes inferred one way with kernels
  // reading the other).
  const int64_t f = ctx.attr().GetInt("x_channels_first", 0);
  if (f != 0 && (f != 1 || v != 1 || !IsConv(ctx)))
    return ctx.Invalid("x_channels_first = 1 is valid only with channels_last = 1 on a Conv, got " +
                       std::to_string(f));
  return Status::Ok();
}

bool InputChannelsFirst(const KernelContext& ctx) {
  return IsConv(ctx) && ctx.attr().GetInt("x_channels_first", 0) == 1;
}

Shape ChannelsLastShape(const Shape& s) {
  if (s.size() < 2) return s;
  Shape r = {s[0]};
  r.insert(r.end(), s.begin() + 2, s.end());
  r.push_back(s[1]);
  return r;
}

Shape ChannelsFirstShape(const Shape& s) {
  if (s.size() < 2) return s;
  Shape r = {s[0], s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}

namespace {

// Moves channels between [N, S, C] and [N, C, S] for elements of `esize` bytes.
void SwapChannels(const uint8_t* src, uint8_t* dst, int64_t n, int64_t s, int64_t c, size_t esize,
                  bool to_channels_first) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < s; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t cl = (b * s + p) * c + ch, cf = (b * c + ch) * s + p;
        const int64_t from = to_channels_first ? cl : cf, to = to_channels_first ? cf : cl;
        std::memcpy(dst + size_t(to) * esize, src + size_t(from) * esize, esize);
      }
}

}  // namespace

Status InferViaChannelsFirst(KernelContext& ctx, Status (*infer)(KernelContext&)) {
  Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (!x || !y) return infer(ctx);
  if (x->rank_known && x->rank() < 3)
    return ctx.Invalid("channels_last input must have rank >= 3, got " + ShapeToString(x->shape));
  Tensor x_cf = *x, y_cf = *y;
  if (x->rank_known && !InputChannelsFirst(ctx)) x_cf.shape = ChannelsFirstShape(x->shape);
  KernelContext cf = ctx;
  cf.inputs[0] = &x_cf;
  cf.outputs[0] = &y_cf;
  QF_RETURN_IF_ERROR(infer(cf));
  *y = y_cf;
  if (y->rank_known) y->shape = ChannelsLastShape(y_cf.shape);
  return Status::Ok();
}

namespace {

// ctx seen channels-first: input 0 and output 0 replaced by `x_cf` and
// `y_cf`, without the op's state (prepared for the channels-last kernels)
// and without its scratch.
KernelContext ChannelsFirstView(const KernelContext& ctx, Tensor* x_cf, Tensor* y_cf) {
  *x_cf = *ctx.input(0);
  *y_cf = *ctx.output(0);
  if (!InputChannelsFirst(ctx)) x_cf->shape = ChannelsFirstShape(x_cf->shape);
  y_cf->shape = ChannelsFirstShape(y_cf->shape);
  KernelContext cf = ctx;
  cf.inputs[0] = x_cf;
  cf.outputs[0] = y_cf;
  cf.state = nullptr;
  cf.scratch = nullptr;
  cf.scratch_size = 0;
  cf.scratch_planned = false;
  return cf;
}

}  // namespace

Status LayoutChannelsFirst(KernelContext& ctx, ChannelsFirstScratchFn scratch,
                           ChannelsFirstLayout* layout) {
  *layout = ChannelsFirstLayout();
  const Tensor* x = ctx.input(0);
  const Tensor* y = ctx.output(0);
  if (!x->shape_known() || !y->shape_known() || x->rank() < 2 || y->rank() < 2) return Status::Ok();
  ScratchNeeds k;
  if (scratch) {
    Tensor x_cf, y_cf;
    KernelContext cf = ChannelsFirstView(ctx, &x_cf, &y_cf);
    x_cf.data = nullptr;  // a request reads shapes and constants only
    y_cf.data = nullptr;
    QF_RETURN_IF_ERROR(scratch(cf, &k));
  }
  kernels::ScratchLayout l;
  layout->x = l.Add(InputChannelsFirst(ctx) ? 0 : x->bytes());
  layout->y = l.Add(y->bytes());
  layout->kernel = l.Add(k.run);
  layout->kernel_bytes = k.run;
  layout->kept = k.kept;
  layout->total = l.total();
  return Status::Ok();
}

Status ChannelsFirstScratch(KernelContext& ctx, ChannelsFirstScratchFn scratch,
                            ScratchNeeds* needs) {
  ChannelsFirstLayout l;
  QF_RETURN_IF_ERROR(LayoutChannelsFirst(ctx, scratch, &l));
  needs->run = l.total;
  needs->kept = l.kept;
  return Status::Ok();
}

Status RunViaChannelsFirst(KernelContext& ctx, Status (*run)(KernelContext&),
                           ChannelsFirstScratchFn scratch, bool planned_for_fallback) {
  ctx.reference_path = true;
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  const size_t xe = dtype_storage_bytes(x->dtype, 1), ye = dtype_storage_bytes(y->dtype, 1);
  const int64_t n = x->shape[0], c = x->shape.back(), s = n && c ? x->numel() / (n * c) : 0;
  const int64_t yc = y->shape.back(), ys = n && yc ? y->numel() / (n * yc) : 0;
  ChannelsFirstLayout l;
  QF_RETURN_IF_ERROR(LayoutChannelsFirst(ctx, scratch, &l));
  // The planned region holds the layout when the op requested it for these
  // shapes; otherwise it is another kernel's, and this call allocates.
  const kernels::ScratchSpan span =
      planned_for_fallback
          ? kernels::ScratchSpan{ctx.scratch, ctx.scratch_size, ctx.scratch_planned}
          : kernels::ScratchSpan{};
  const kernels::ScratchRegion region(span, l.total);
  uint8_t* xbuf = region.at<uint8_t>(l.x);
  uint8_t* ybuf = region.at<uint8_t>(l.y);
  Tensor x_cf, y_cf;
  KernelContext cf = ChannelsFirstView(ctx, &x_cf, &y_cf);
  if (InputChannelsFirst(ctx)) {
    x_cf.data = x->data;
  } else {
    if (l.total) SwapChannels(x->ptr<uint8_t>(), xbuf, n, s, c, xe, /*to_channels_first=*/true);
    x_cf.data = xbuf;
  }
  y_cf.data = ybuf;
  // The channels-first kernel's scratch, sized by its own request on these
  // shapes (planned when the fallback was: the region is ours in full).
  cf.scratch = region.at<uint8_t>(l.kernel);
  cf.scratch_size = l.kernel_bytes;
  cf.scratch_planned = span.planned;
  QF_RETURN_IF_ERROR(run(cf));
  if (l.total) SwapChannels(ybuf, y->ptr<uint8_t>(), n, ys, yc, ye, /*to_channels_first=*/false);
  return Status::Ok();
}

}  // namespace qfold
