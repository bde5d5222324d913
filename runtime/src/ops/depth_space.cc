// DepthToSpace and SpaceToDepth: rearrange (N, C, H, W) between channel
// blocks and b x b spatial blocks. Pure data movement, so any dtype works.
// Channel layout within a block follows `mode`: DCR (depth-column-row,
// default: block offset is the major part of the channel index) or CRD.
#include <cstring>
#include <string>
#include <type_traits>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/thread_pool.h"
#include "ops/channels_last.h"

namespace qfold {
namespace {

Status ParseBlock(const KernelContext& ctx, int64_t* b, bool* crd) {
  const Attr* bs = ctx.attr().Find("blocksize");
  if (!bs || bs->i <= 0) return ctx.Invalid("blocksize must be given and positive");
  *b = bs->i;
  const std::string mode = ctx.attr().GetString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return ctx.Invalid("mode must be DCR or CRD, got " + mode);
  *crd = mode == "CRD";
  return Status::Ok();
}

Status InferBlockOp(KernelContext& ctx, bool to_space) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int64_t b;
  bool crd;
  QF_RETURN_IF_ERROR(ParseBlock(ctx, &b, &crd));
  if (dtype_size(x->dtype) == 0)
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype));
  y->dtype = x->dtype;
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  if (x->rank() != 4) return ctx.Invalid("X must be 4-D, got " + ShapeToString(x->shape));
  const Shape& s = x->shape;
  auto mul = [](int64_t d, int64_t f) { return d < 0 ? kUnknownDim : d * f; };
  y->rank_known = true;
  if (to_space) {
    if (s[1] >= 0 && s[1] % (b * b) != 0)
      return ctx.Invalid("channels " + std::to_string(s[1]) + " not divisible by blocksize^2");
    y->shape = {s[0], s[1] < 0 ? kUnknownDim : s[1] / (b * b), mul(s[2], b), mul(s[3], b)};
  } else {
    for (int i = 2; i < 4; ++i)
      if (s[i] >= 0 && s[i] % b != 0)
        return ctx.Invalid("spatial dim " + std::to_string(s[i]) + " not divisible by blocksize");
    y->shape = {s[0], mul(s[1], b * b), s[2] < 0 ? kUnknownDim : s[2] / b,
                s[3] < 0 ? kUnknownDim : s[3] / b};
  }
  return Status::Ok();
}

// Copies between the deep tensor (N, C*b*b, H, W) and the spatial tensor
// (N, C, H*b, W*b) in the direction given by to_space.
Status RunBlockOp(KernelContext& ctx, bool to_space) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int64_t b;
  bool crd;
  QF_RETURN_IF_ERROR(ParseBlock(ctx, &b, &crd));
  const Shape& deep = to_space ? x->shape : y->shape;
  const int64_t n = deep[0], c = deep[1] / (b * b), h = deep[2], w = deep[3];
  const size_t es = dtype_size(x->dtype);
  const char* src = static_cast<const char*>(x->data);
  char* dst = static_cast<char*>(y->data);
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < b; ++j) {
          const int64_t dc = crd ? (ci * b + i) * b + j : (i * b + j) * c + ci;
          for (int64_t hi = 0; hi < h; ++hi)
            for (int64_t wi = 0; wi < w; ++wi) {
              const int64_t deep_idx = ((ni * c * b * b + dc) * h + hi) * w + wi;
              const int64_t space_idx = ((ni * c + ci) * h * b + hi * b + i) * w * b + wi * b + j;
              const int64_t from = to_space ? deep_idx : space_idx;
              const int64_t to = to_space ? space_idx : deep_idx;
              std::memcpy(dst + size_t(to) * es, src + size_t(from) * es, es);
            }
        }
  return Status::Ok();
}

Status InferDepthToSpaceChannelsFirst(KernelContext& ctx) {
  return InferBlockOp(ctx, true);
}
Status RunDepthToSpaceChannelsFirst(KernelContext& ctx) {
  return RunBlockOp(ctx, true);
}

// channels_last = 1 (set by the layout planning): x [N, H, W, C*b*b] and
// y [N, H*b, W*b, C]. With DCR the b*C values of output row (h*b + i),
// columns w*b .. w*b + b - 1, are contiguous in input pixel (h, w) at
// channel i*b*C, so each is one copy (what a ConvTranspose whose kernel equals its
// stride becomes: a 1x1 convolution and this).
Status RunDepthToSpaceChannelsLast(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int64_t b;
  bool crd;
  QF_RETURN_IF_ERROR(ParseBlock(ctx, &b, &crd));
  if (crd)  // DepthToSpaceScratch planned the fallback's copies
    return RunViaChannelsFirst(ctx, RunDepthToSpaceChannelsFirst, nullptr,
                               /*planned_for_fallback=*/true);
  const int64_t n = x->shape[0], h = x->shape[1], w = x->shape[2], c = y->shape[3];
  const size_t run = size_t(b * c) * dtype_size(x->dtype);
  const size_t row_bytes = size_t(w) * run * size_t(b);  // an input row, b output rows
  const char* const src = static_cast<const char*>(x->data);
  char* const dst = static_cast<char*>(y->data);
  // Input rows [r0, r1); runs of a few bytes (PP-OCRv4 det's 1-channel
  // output: 8) as fixed-size copies, not a memcpy call each.
  auto rows = [&](int64_t r0, int64_t r1, auto fixed) {
    constexpr size_t kFixed = decltype(fixed)::value;
    const size_t len = kFixed ? kFixed : run;
    for (int64_t r = r0; r < r1; ++r) {
      const char* s = src + size_t(r) * row_bytes;
      char* d = dst + size_t(r) * row_bytes;
      for (int64_t i = 0; i < b; ++i)
        for (int64_t col = 0; col < w; ++col, d += len)
          std::memcpy(d, s + (size_t(col) * size_t(b) + size_t(i)) * len, len);
    }
  };
  auto part = [&](int64_t r0, int64_t r1, int) {
    switch (run) {
      case 4:
        return rows(r0, r1, std::integral_constant<size_t, 4>{});
      case 8:
        return rows(r0, r1, std::integral_constant<size_t, 8>{});
      case 16:
        return rows(r0, r1, std::integral_constant<size_t, 16>{});
      default:
        return rows(r0, r1, std::integral_constant<size_t, 0>{});
    }
  };
  // Split between threads from 32 KiB on (it ran alone: PP-OCRv4 det's two
  // took 0.12 ms of its 2.9 at 2 threads).
  const bool small = int64_t(row_bytes) * n * h < (int64_t(1) << 15);
  kernels::ParallelFor(small ? nullptr : ctx.pool, n * h, part);
  return Status::Ok();
}

// OpDef::scratch: a channels-last CRD DepthToSpace (the mode that decides
// the fallback in the run) gets RunViaChannelsFirst's copies of input and
// output; the channels-first kernel needs no scratch.
Status DepthToSpaceScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool cl = false, crd = false;
  int64_t b;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  if (!cl) return Status::Ok();
  QF_RETURN_IF_ERROR(ParseBlock(ctx, &b, &crd));
  return crd ? ChannelsFirstScratch(ctx, nullptr, needs) : Status::Ok();
}

Status InferDepthToSpace(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? InferViaChannelsFirst(ctx, InferDepthToSpaceChannelsFirst)
            : InferDepthToSpaceChannelsFirst(ctx);
}
Status RunDepthToSpace(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? RunDepthToSpaceChannelsLast(ctx) : RunDepthToSpaceChannelsFirst(ctx);
}
Status InferSpaceToDepth(KernelContext& ctx) {
  return InferBlockOp(ctx, false);
}
Status RunSpaceToDepth(KernelContext& ctx) {
  return RunBlockOp(ctx, false);
}

}  // namespace

const OpDef& OpDef_DepthToSpace() {
  static const OpDef def = [] {
    OpDef d{"DepthToSpace",       InferDepthToSpace, RunDepthToSpace,
            /*value_inputs=*/0,
            /*shape_only=*/false, /*min_inputs=*/1,  /*max_inputs=*/1};
    // Channels-last when its input comes channels-last (DCR: row copies).
    d.layout = LayoutRole::kChannelsLast;
    d.layout_channels_last = [](const AttrMap& a) { return a.GetString("mode", "DCR") == "DCR"; };
    // The row copies move bytes of any width: float ConvTransposes lowered to
    // a channels-last 1x1 Conv and this need no Transposes between them.
    d.layout_float = true;
    d.traits = kTraitMovesElements | kTraitSpatial;
    d.scratch = DepthToSpaceScratch;
    return d;
  }();
  return def;
}

const OpDef& OpDef_SpaceToDepth() {
  static const OpDef def = WithTraits({"SpaceToDepth", InferSpaceToDepth, RunSpaceToDepth,
                                       /*value_inputs=*/0,
                                       /*shape_only=*/false, /*min_inputs=*/1, /*max_inputs=*/1},
                                      kTraitMovesElements | kTraitSpatial);
  return def;
}

}  // namespace qfold
