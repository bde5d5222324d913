// Transpose: output axis i is input axis perm[i] (default: reversed axes).
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

// Validated permutation for rank r, or an error.
Status GetPerm(KernelContext& ctx, int r, std::vector<int64_t>* perm) {
  const Attr* a = ctx.attr().Find("perm");
  if (!a) {
    perm->resize(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) (*perm)[i] = r - 1 - i;
    return Status::Ok();
  }
  *perm = a->ints;
  if (int(perm->size()) != r)
    return ctx.Invalid("perm has " + std::to_string(perm->size()) + " entries for rank " +
                       std::to_string(r));
  std::vector<bool> seen(size_t(r), false);
  for (int64_t& p : *perm) {
    int n;
    // Negative entries are not in the spec, but harmless to accept.
    if (!NormalizeAxis(p, r, &n) || seen[n]) return ctx.Invalid("perm is not a permutation");
    seen[n] = true;
    p = n;
  }
  return Status::Ok();
}

Status InferTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  if (!x->rank_known) {
    const Attr* a = ctx.attr().Find("perm");
    if (a)
      SetOutput(y, x->dtype, Shape(a->ints.size(), kUnknownDim));
    else
      SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  std::vector<int64_t> perm;
  QF_RETURN_IF_ERROR(GetPerm(ctx, x->rank(), &perm));
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x->shape[perm[i]];
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

Status RunTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  std::vector<int64_t> perm;
  QF_RETURN_IF_ERROR(GetPerm(ctx, x->rank(), &perm));
  std::vector<int64_t> strides = ContiguousStrides(x->shape);
  std::vector<std::vector<int64_t>> offsets(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t n = x->shape[perm[i]];
    offsets[i].resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) offsets[i][j] = j * strides[perm[i]];
  }
  GatherCopy(offsets, dtype_size(x->dtype), x->data, y->data, nullptr);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Transpose() {
  static const OpDef def{"Transpose", InferTranspose, RunTranspose, 0, false, 1, 1};
  return def;
}

}  // namespace qfold
