// Split: cuts the input along `axis` into one piece per output, sized by the
// `split` input, or equally (opset 18: ceil-sized chunks, the last smaller).
#include <cstring>
#include <limits>
#include <string>

#include "ops/shape_common.h"

namespace qfold {

Status CheckSplitSizes(const KernelContext& ctx, const std::vector<int64_t>& sizes, int64_t dim) {
  int64_t sum = 0;
  for (int64_t v : sizes) {
    if (v < 0) return ctx.Invalid("split has a negative entry");
    if (v > std::numeric_limits<int64_t>::max() - sum)
      return ctx.Invalid("split entries overflow int64");
    sum += v;
  }
  if (dim >= 0 && sum != dim)
    return ctx.Invalid("split sums to " + std::to_string(sum) + " but the axis has " +
                       std::to_string(dim));
  return Status::Ok();
}

namespace {

// Piece sizes along the axis; entries are kUnknownDim when not computable yet.
Status SplitSizes(KernelContext& ctx, int64_t dim, std::vector<int64_t>* sizes) {
  int n = ctx.num_outputs();
  if (n < 1) return ctx.Invalid("needs at least one output");
  const Tensor* s = ctx.input(1);
  if (s) {
    QF_RETURN_IF_ERROR(CheckIntDType(ctx, s, "split"));
    if (s->rank_known && s->rank() > 1) return ctx.Invalid("split must be 1-D");
    if (!ReadInts(s, sizes)) {
      sizes->assign(size_t(n), kUnknownDim);
      return Status::Ok();
    }
    if (int(sizes->size()) != n)
      return ctx.Invalid("split has " + std::to_string(sizes->size()) + " entries for " +
                         std::to_string(n) + " outputs");
    return CheckSplitSizes(ctx, *sizes, dim);
  }
  const Attr* num = ctx.attr().Find("num_outputs");
  if (num && num->i != n)
    return ctx.Invalid("num_outputs is " + std::to_string(num->i) + " but the node has " +
                       std::to_string(n) + " outputs");
  if (dim < 0) {
    sizes->assign(size_t(n), kUnknownDim);
    return Status::Ok();
  }
  int64_t chunk = (dim + n - 1) / n;
  int64_t last = dim - chunk * (n - 1);
  if (last < 0)
    return ctx.Invalid("cannot split an axis of " + std::to_string(dim) + " into " +
                       std::to_string(n) + " pieces");
  sizes->assign(size_t(n), chunk);
  sizes->back() = last;
  return Status::Ok();
}

Status InferSplit(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  int64_t axis_attr = ctx.attr().GetInt("axis", 0);
  if (!x->rank_known) {
    std::vector<int64_t> sizes;
    QF_RETURN_IF_ERROR(SplitSizes(ctx, kUnknownDim, &sizes));
    for (int i = 0; i < ctx.num_outputs(); ++i) SetOutputUnknownRank(ctx.output(i), x->dtype);
    return Status::Ok();
  }
  int axis;
  if (!NormalizeAxis(axis_attr, x->rank(), &axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " out of range for rank " +
                       std::to_string(x->rank()));
  std::vector<int64_t> sizes;
  QF_RETURN_IF_ERROR(SplitSizes(ctx, x->shape[axis], &sizes));
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Shape s = x->shape;
    s[axis] = sizes[i];
    SetOutput(ctx.output(i), x->dtype, std::move(s));
  }
  return Status::Ok();
}

Status RunSplit(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  int r = x->rank();
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), r, &axis);
  std::vector<int64_t> sizes;
  QF_RETURN_IF_ERROR(SplitSizes(ctx, x->shape[axis], &sizes));
  size_t esz = dtype_size(x->dtype);
  int64_t outer = DimProduct(x->shape, 0, axis);
  int64_t inner = DimProduct(x->shape, axis + 1, r);
  size_t in_block = size_t(x->shape[axis] * inner) * esz;
  size_t begin = 0;  // byte offset of the piece within one outer block
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    size_t block = size_t(sizes[i] * inner) * esz;
    Tensor* y = ctx.output(i);
    if (y && block > 0) {
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(y->ptr<uint8_t>() + o * block, x->ptr<uint8_t>() + o * in_block + begin, block);
    }
    begin += block;
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Split() {
  static const OpDef def = [] {
    OpDef d{"Split", InferSplit, RunSplit, 1u << 1, false, 1, 2};
    d.layout = LayoutRole::kAxis;  // input 1 holds the split sizes
    d.layout_default_axis = 0;
    d.layout_default_axis = 0;
    return d;
  }();
  return def;
}

}  // namespace qfold
