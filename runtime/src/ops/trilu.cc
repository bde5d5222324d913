// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the
// last two axes and zeroes the rest; k is the optional input 1.
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

Status InferTrilu(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  if (const Tensor* k = ctx.input(1)) {
    QF_RETURN_IF_ERROR(CheckIntDType(ctx, k, "k"));
    if (k->shape_known() && k->numel() != 1) return ctx.Invalid("k must be a scalar");
  }
  if (!x->rank_known) {
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    return Status::Ok();
  }
  if (x->rank() < 2) return ctx.Invalid("input must have rank >= 2");
  SetOutput(ctx.output(0), x->dtype, x->shape);
  return Status::Ok();
}

Status RunTrilu(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int64_t k = 0;
  if (const Tensor* kt = ctx.input(1)) {
    std::vector<int64_t> v;
    if (!ReadInts(kt, &v) || v.size() != 1) return ctx.Invalid("k must be a known scalar");
    k = v[0];
  }
  bool upper = ctx.attr().GetInt("upper", 1) != 0;
  int r = x->rank();
  int64_t rows = x->shape[r - 2], cols = x->shape[r - 1];
  int64_t mats = DimProduct(x->shape, 0, r - 2);
  size_t esz = dtype_size(x->dtype);
  const uint8_t* src = x->ptr<uint8_t>();
  uint8_t* dst = y->ptr<uint8_t>();
  // All-zero bytes are zero (or false) for every byte-sized dtype.
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        size_t off = size_t((m * rows + i) * cols + j) * esz;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          std::memcpy(dst + off, src + off, esz);
        else
          std::memset(dst + off, 0, esz);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Trilu() {
  static const OpDef def{"Trilu", InferTrilu, RunTrilu, 0, false, 1, 2};
  return def;
}

}  // namespace qfold
