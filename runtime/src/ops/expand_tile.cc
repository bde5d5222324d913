// Expand (bidirectional broadcast to a shape) and Tile (repeat along each
// axis): both map output indices back into the input, so both are GatherCopy.
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

// ---- Expand ----

Status InferExpand(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* s = ctx.input(1);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, s, "shape"));
  if (s->rank_known && s->rank() != 1) return ctx.Invalid("shape must be 1-D");
  if (s->rank_known && s->shape[0] > kMaxRank)
    return ctx.Invalid("shape has " + std::to_string(s->shape[0]) + " entries, more than rank " +
                       std::to_string(kMaxRank));
  std::vector<int64_t> dims;
  Shape target;
  if (ReadInts(s, &dims)) {
    for (int64_t d : dims)
      if (d < 0) return ctx.Invalid("shape has negative dim " + std::to_string(d));
    target.assign(dims.begin(), dims.end());
  } else if (s->rank_known && s->shape[0] >= 0) {
    // Each unknown target dim is 1 or matches the input: BroadcastShapes keeps d > 1.
    target.assign(size_t(s->shape[0]), kUnknownDim);
  } else {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  Shape out;
  std::string err;
  if (!BroadcastShapes(x->shape, target, &out, &err)) return ctx.Invalid(err);
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

Status RunExpand(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int r = y->rank();
  BroadcastIndexer bi({x->shape}, y->shape);
  std::vector<std::vector<int64_t>> offsets(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) {
    offsets[a].resize(size_t(y->shape[a]));
    for (int64_t i = 0; i < y->shape[a]; ++i) offsets[a][i] = i * bi.strides(0)[a];
  }
  GatherCopy(offsets, dtype_size(x->dtype), x->data, y->data, nullptr);
  return Status::Ok();
}

// ---- Tile ----

Status InferTile(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* rep = ctx.input(1);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, rep, "repeats"));
  if (rep->rank_known && rep->rank() != 1) return ctx.Invalid("repeats must be 1-D");
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  std::vector<int64_t> reps;
  Shape out(x->shape.size(), kUnknownDim);
  if (ReadInts(rep, &reps)) {
    if (int(reps.size()) != x->rank())
      return ctx.Invalid("repeats has " + std::to_string(reps.size()) + " entries for rank " +
                         std::to_string(x->rank()));
    for (int i = 0; i < x->rank(); ++i) {
      if (reps[i] < 0) return ctx.Invalid("repeats has a negative entry");
      out[i] = x->shape[i] < 0 ? (reps[i] == 0 ? 0 : kUnknownDim) : x->shape[i] * reps[i];
    }
  }
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

Status RunTile(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int r = y->rank();
  std::vector<int64_t> strides = ContiguousStrides(x->shape);
  std::vector<std::vector<int64_t>> offsets(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) {
    offsets[a].resize(size_t(y->shape[a]));
    for (int64_t i = 0; i < y->shape[a]; ++i) offsets[a][i] = (i % x->shape[a]) * strides[a];
  }
  GatherCopy(offsets, dtype_size(x->dtype), x->data, y->data, nullptr);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Expand() {
  static const OpDef def =
      WithTraits({"Expand", InferExpand, RunExpand, 1u << 1, false, 2, 2}, kTraitMovesElements);
  return def;
}

const OpDef& OpDef_Tile() {
  static const OpDef def =
      WithTraits({"Tile", InferTile, RunTile, 1u << 1, false, 2, 2}, kTraitMovesElements);
  return def;
}

}  // namespace qfold
