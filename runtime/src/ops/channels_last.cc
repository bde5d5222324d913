#include "ops/channels_last.h"

#include <cstring>
#include <vector>

namespace qfold {

Status ReadChannelsLast(const KernelContext& ctx, bool* channels_last) {
  const int64_t v = ctx.attr().GetInt("channels_last", 0);
  if (v != 0 && v != 1) return ctx.Invalid("channels_last must be 0 or 1");
  *channels_last = v == 1;
  return Status::Ok();
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
  if (x->rank_known) x_cf.shape = ChannelsFirstShape(x->shape);
  KernelContext cf = ctx;
  cf.inputs[0] = &x_cf;
  cf.outputs[0] = &y_cf;
  QF_RETURN_IF_ERROR(infer(cf));
  *y = y_cf;
  if (y->rank_known) y->shape = ChannelsLastShape(y_cf.shape);
  return Status::Ok();
}

Status RunViaChannelsFirst(KernelContext& ctx, Status (*run)(KernelContext&)) {
  ctx.reference_path = true;
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  const size_t xe = dtype_storage_bytes(x->dtype, 1), ye = dtype_storage_bytes(y->dtype, 1);
  const int64_t n = x->shape[0], c = x->shape.back(), s = n && c ? x->numel() / (n * c) : 0;
  const int64_t yc = y->shape.back(), ys = n && yc ? y->numel() / (n * yc) : 0;
  std::vector<uint8_t> xbuf(x->bytes() + 1), ybuf(y->bytes() + 1);
  SwapChannels(x->ptr<uint8_t>(), xbuf.data(), n, s, c, xe, /*to_channels_first=*/true);
  Tensor x_cf = *x, y_cf = *y;
  x_cf.shape = ChannelsFirstShape(x->shape);
  x_cf.data = xbuf.data();
  y_cf.shape = ChannelsFirstShape(y->shape);
  y_cf.data = ybuf.data();
  KernelContext cf = ctx;
  cf.inputs[0] = &x_cf;
  cf.outputs[0] = &y_cf;
  cf.state = nullptr;
  // The op's planned scratch is sized for its channels-last kernels; the
  // channels-first fallback allocates its own, as it does these copies.
  cf.scratch = nullptr;
  cf.scratch_size = 0;
  cf.scratch_planned = false;
  QF_RETURN_IF_ERROR(run(cf));
  SwapChannels(ybuf.data(), y->ptr<uint8_t>(), n, ys, yc, ye, /*to_channels_first=*/false);
  return Status::Ok();
}

}  // namespace qfold
