// Gather, GatherElements, GatherND: index-driven copies. Indices are int32 or
// int64, negative values count from the end; out-of-range indices fail at run.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

int64_t IndexAt(const Tensor* t, int64_t i) {
  return t->dtype == DType::kInt64 ? t->ptr<int64_t>()[i] : int64_t(t->ptr<int32_t>()[i]);
}

// Normalizes a possibly negative index into [0, dim) or reports it.
Status FixIndex(const KernelContext& ctx, int64_t* idx, int64_t dim) {
  int64_t v = *idx < 0 ? *idx + dim : *idx;
  if (v < 0 || v >= dim)
    return ctx.Error(
        StatusCode::kInvalidArgument,
        "index " + std::to_string(*idx) + " out of range for a dim of " + std::to_string(dim));
  *idx = v;
  return Status::Ok();
}

Status AxisOf(const KernelContext& ctx, int rank, int* axis) {
  int64_t a = ctx.attr().GetInt("axis", 0);
  if (!NormalizeAxis(a, rank, axis))
    return ctx.Invalid("axis " + std::to_string(a) + " out of range for rank " +
                       std::to_string(rank));
  return Status::Ok();
}

// ---- Gather ----

Status InferGather(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, idx, "indices"));
  if (!x->rank_known || !idx->rank_known) {
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    return Status::Ok();
  }
  int axis;
  QF_RETURN_IF_ERROR(AxisOf(ctx, x->rank(), &axis));
  Shape out(x->shape.begin(), x->shape.begin() + axis);
  out.insert(out.end(), idx->shape.begin(), idx->shape.end());
  out.insert(out.end(), x->shape.begin() + axis + 1, x->shape.end());
  SetOutput(ctx.output(0), x->dtype, std::move(out));
  return Status::Ok();
}

Status RunGather(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  Tensor* y = ctx.output(0);
  int axis;
  QF_RETURN_IF_ERROR(AxisOf(ctx, x->rank(), &axis));
  int64_t outer = DimProduct(x->shape, 0, axis);
  int64_t dim = x->shape[axis];
  size_t block = size_t(DimProduct(x->shape, axis + 1, x->rank())) * dtype_size(x->dtype);
  int64_t n = idx->numel();
  const uint8_t* src = x->ptr<uint8_t>();
  uint8_t* dst = y->ptr<uint8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = IndexAt(idx, i);
      QF_RETURN_IF_ERROR(FixIndex(ctx, &k, dim));
      std::memcpy(dst, src + (o * dim + k) * block, block);
      dst += block;
    }
  }
  return Status::Ok();
}

// ---- GatherElements ----

Status InferGatherElements(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, idx, "indices"));
  if (x->rank_known && idx->rank_known) {
    if (x->rank() != idx->rank())
      return ctx.Invalid("indices rank " + std::to_string(idx->rank()) +
                         " differs from data rank " + std::to_string(x->rank()));
    int axis;
    QF_RETURN_IF_ERROR(AxisOf(ctx, x->rank(), &axis));
  }
  if (!idx->rank_known)
    SetOutputUnknownRank(ctx.output(0), x->dtype);
  else
    SetOutput(ctx.output(0), x->dtype, idx->shape);
  return Status::Ok();
}

Status RunGatherElements(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  Tensor* y = ctx.output(0);
  int r = x->rank();
  int axis;
  QF_RETURN_IF_ERROR(AxisOf(ctx, r, &axis));
  for (int d = 0; d < r; ++d)
    if (d != axis && idx->shape[d] > x->shape[d])
      return ctx.Invalid("indices shape " + ShapeToString(idx->shape) + " exceeds data shape " +
                         ShapeToString(x->shape) + " off the axis");
  std::vector<int64_t> xs = ContiguousStrides(x->shape);
  size_t esz = dtype_size(x->dtype);
  std::vector<int64_t> pos(size_t(r), 0);  // multi-index into indices
  int64_t n = idx->numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = IndexAt(idx, i);
    QF_RETURN_IF_ERROR(FixIndex(ctx, &k, x->shape[axis]));
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += (d == axis ? k : pos[d]) * xs[d];
    std::memcpy(y->ptr<uint8_t>() + i * esz, x->ptr<uint8_t>() + off * esz, esz);
    for (int d = r - 1; d >= 0; --d) {
      if (++pos[d] < idx->shape[d]) break;
      pos[d] = 0;
    }
  }
  return Status::Ok();
}

// ---- GatherND ----

Status InferGatherND(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  if (idx->dtype != DType::kInt64 && idx->dtype != DType::kInt32)
    return ctx.Invalid(std::string("indices must be int64, got ") + dtype_name(idx->dtype));
  int64_t b = ctx.attr().GetInt("batch_dims", 0);
  if (b < 0) return ctx.Invalid("batch_dims is negative");
  if (!x->rank_known || !idx->rank_known || idx->rank() == 0 || idx->shape.back() < 0) {
    if (idx->rank_known && idx->rank() == 0) return ctx.Invalid("indices must have rank >= 1");
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    return Status::Ok();
  }
  int r = x->rank(), q = idx->rank();
  int64_t k = idx->shape.back();
  if (b >= std::min(r, q))
    return ctx.Invalid("batch_dims " + std::to_string(b) + " must be below both ranks");
  if (k < 1 || k > r - b)
    return ctx.Invalid("indices last dim " + std::to_string(k) + " out of range for data rank " +
                       std::to_string(r) + " and batch_dims " + std::to_string(b));
  for (int d = 0; d < b; ++d)
    if (x->shape[d] >= 0 && idx->shape[d] >= 0 && x->shape[d] != idx->shape[d])
      return ctx.Invalid("batch dim " + std::to_string(d) + " differs between data and indices");
  Shape out(idx->shape.begin(), idx->shape.end() - 1);
  out.insert(out.end(), x->shape.begin() + b + k, x->shape.end());
  SetOutput(ctx.output(0), x->dtype, std::move(out));
  return Status::Ok();
}

Status RunGatherND(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* idx = ctx.input(1);
  Tensor* y = ctx.output(0);
  int b = int(ctx.attr().GetInt("batch_dims", 0));
  int r = x->rank(), q = idx->rank();
  int k = int(idx->shape.back());
  size_t esz = dtype_size(x->dtype);
  int64_t batches = DimProduct(x->shape, 0, b);
  int64_t per_batch = DimProduct(idx->shape, b, q - 1);  // index tuples per batch
  int64_t slice = DimProduct(x->shape, b + k, r);        // elements per gathered slice
  int64_t batch_elems = DimProduct(x->shape, b, r);
  std::vector<int64_t> xs = ContiguousStrides(x->shape);
  uint8_t* dst = y->ptr<uint8_t>();
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < per_batch; ++t) {
      int64_t base = (bi * per_batch + t) * k;
      int64_t off = bi * batch_elems;
      for (int j = 0; j < k; ++j) {
        int64_t v = IndexAt(idx, base + j);
        QF_RETURN_IF_ERROR(FixIndex(ctx, &v, x->shape[b + j]));
        off += v * xs[b + j];
      }
      std::memcpy(dst, x->ptr<uint8_t>() + off * esz, size_t(slice) * esz);
      dst += size_t(slice) * esz;
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Gather() {
  static const OpDef def =
      WithTraits({"Gather", InferGather, RunGather, 0, false, 2, 2}, kTraitMovesElements);
  return def;
}

const OpDef& OpDef_GatherElements() {
  static const OpDef def{"GatherElements", InferGatherElements, RunGatherElements, 0, false, 2, 2};
  return def;
}

const OpDef& OpDef_GatherND() {
  static const OpDef def{"GatherND", InferGatherND, RunGatherND, 0, false, 2, 2};
  return def;
}

}  // namespace qfold
