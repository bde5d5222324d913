// DepthToSpace and SpaceToDepth: rearrange (N, C, H, W) between channel
// blocks and b x b spatial blocks. Pure data movement, so any dtype works.
// Channel layout within a block follows `mode`: DCR (depth-column-row,
// default: block offset is the major part of the channel index) or CRD.
#include <cstring>
#include <string>

#include "core/op.h"
#include "core/shape_util.h"

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

Status InferDepthToSpace(KernelContext& ctx) {
  return InferBlockOp(ctx, true);
}
Status RunDepthToSpace(KernelContext& ctx) {
  return RunBlockOp(ctx, true);
}
Status InferSpaceToDepth(KernelContext& ctx) {
  return InferBlockOp(ctx, false);
}
Status RunSpaceToDepth(KernelContext& ctx) {
  return RunBlockOp(ctx, false);
}

}  // namespace

const OpDef& OpDef_DepthToSpace() {
  static const OpDef def{"DepthToSpace",       InferDepthToSpace, RunDepthToSpace,
                         /*value_inputs=*/0,
                         /*shape_only=*/false, /*min_inputs=*/1,  /*max_inputs=*/1};
  return def;
}

const OpDef& OpDef_SpaceToDepth() {
  static const OpDef def{"SpaceToDepth",       InferSpaceToDepth, RunSpaceToDepth,
                         /*value_inputs=*/0,
                         /*shape_only=*/false, /*min_inputs=*/1,  /*max_inputs=*/1};
  return def;
}

}  // namespace qfold
