// OneHot: output[..., j, ...] = values[1] where j == indices[...] (negative
// indices count from depth), values[0] elsewhere; the new axis is `axis`.
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/shape_common.h"

namespace qfold {
namespace {

// Depth as an integer (the spec allows any numeric type; floats truncate).
bool ReadDepth(const Tensor* t, int64_t* depth) {
  if (!t->data || !t->shape_known() || t->numel() != 1) return false;
  bool ok = true;
  QF_DISPATCH_NUMERIC(t->dtype, ok = false, {
    const T v = *t->ptr<T>();
    // NaN, Inf and floats beyond int64 have no integer depth: report it as invalid (0).
    if (std::is_floating_point_v<T> && !(std::fabs(double(v)) < 9.2e18))
      *depth = 0;
    else
      *depth = int64_t(v);
  });
  return ok;
}

Status InferOneHot(KernelContext& ctx) {
  const Tensor* idx = ctx.input(0);
  const Tensor* depth_t = ctx.input(1);
  const Tensor* values = ctx.input(2);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, values, "values"));
  bool numeric_idx = true;
  QF_DISPATCH_NUMERIC(idx->dtype, numeric_idx = false, (void)sizeof(T));
  if (!numeric_idx)
    return ctx.Unsupported(std::string("indices dtype ") + dtype_name(idx->dtype) +
                           " is not supported");
  bool numeric_depth = true;
  QF_DISPATCH_NUMERIC(depth_t->dtype, numeric_depth = false, (void)sizeof(T));
  if (!numeric_depth)
    return ctx.Unsupported(std::string("depth dtype ") + dtype_name(depth_t->dtype) +
                           " is not supported");
  if (values->shape_known() && values->numel() != 2)
    return ctx.Invalid("values must have two elements");
  if (!idx->rank_known) {
    SetOutputUnknownRank(ctx.output(0), values->dtype);
    return Status::Ok();
  }
  int r = idx->rank() + 1;
  int axis;
  int64_t a = ctx.attr().GetInt("axis", -1);
  if (!NormalizeAxis(a, r, &axis))
    return ctx.Invalid("axis " + std::to_string(a) + " out of range for output rank " +
                       std::to_string(r));
  int64_t depth = kUnknownDim;
  if (ReadDepth(depth_t, &depth) && depth < 1)
    return ctx.Invalid("depth must be positive, got " + std::to_string(depth));
  Shape out = idx->shape;
  out.insert(out.begin() + axis, depth);
  SetOutput(ctx.output(0), values->dtype, std::move(out));
  return Status::Ok();
}

Status RunOneHot(KernelContext& ctx) {
  const Tensor* idx = ctx.input(0);
  const Tensor* values = ctx.input(2);
  Tensor* y = ctx.output(0);
  int r = y->rank();
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", -1), r, &axis);
  int64_t depth = y->shape[axis];
  int64_t outer = DimProduct(y->shape, 0, axis);
  int64_t inner = DimProduct(y->shape, axis + 1, r);
  size_t esz = dtype_size(y->dtype);
  const uint8_t* off_v = values->ptr<uint8_t>();
  const uint8_t* on_v = off_v + esz;
  uint8_t* dst = y->ptr<uint8_t>();
  std::vector<int64_t> ind(size_t(idx->numel()));
  QF_DISPATCH_NUMERIC(idx->dtype, return ctx.Unsupported("indices dtype"), {
    for (size_t i = 0; i < ind.size(); ++i) {
      double v = double(idx->ptr<T>()[i]);
      // Out-of-range (and NaN) indices give an all-off row.
      ind[i] = std::isfinite(v) && std::fabs(v) < 9e18 ? int64_t(v) : depth;
    }
  });
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t d = 0; d < depth; ++d) {
      for (int64_t in = 0; in < inner; ++in) {
        int64_t k = ind[size_t(o * inner + in)];
        if (k < 0) k += depth;
        std::memcpy(dst, k == d ? on_v : off_v, esz);
        dst += esz;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_OneHot() {
  static const OpDef def{"OneHot", InferOneHot, RunOneHot, 1u << 1, false, 3, 3};
  return def;
}

}  // namespace qfold
