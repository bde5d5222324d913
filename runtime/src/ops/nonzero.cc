// NonZero: the indices of the non-zero elements, int64 [rank, count], in
// row-major order. The count depends on the data, so an input whose value is
// unknown before running sends the session into dynamic mode (the output
// shape is inferred again once the input holds data). A scalar counts as a
// 1-D tensor of one element, as ONNX Runtime does.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

// Whether element i is non-zero: negative zero is zero for the float types,
// every other dtype is zero exactly when all its bytes are.
bool IsNonZero(const uint8_t* p, size_t esize, DType t, int64_t i) {
  p += size_t(i) * esize;
  switch (t) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v != 0.f;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v != 0.0;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (v & 0x7fffu) != 0;
    }
    default:
      for (size_t b = 0; b < esize; ++b)
        if (p[b]) return true;
      return false;
  }
}

int64_t CountNonZero(const Tensor* x) {
  const size_t es = dtype_size(x->dtype);
  const uint8_t* p = x->ptr<uint8_t>();
  int64_t count = 0;
  for (int64_t i = 0, n = x->numel(); i < n; ++i) count += IsNonZero(p, es, x->dtype, i);
  return count;
}

Status InferNonZero(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  if (!x->rank_known) {
    SetOutputUnknownRank(ctx.output(0), DType::kInt64);
    return Status::Ok();
  }
  const int64_t rows = std::max(x->rank(), 1);
  SetOutput(ctx.output(0), DType::kInt64, {rows, x->data ? CountNonZero(x) : kUnknownDim});
  return Status::Ok();
}

Status RunNonZero(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  const int r = x->rank();
  const int64_t count = y->shape[1];
  const size_t es = dtype_size(x->dtype);
  const uint8_t* p = x->ptr<uint8_t>();
  int64_t* out = y->ptr<int64_t>();
  int64_t found = 0;
  Shape index(size_t(std::max(r, 1)), 0);
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    if (IsNonZero(p, es, x->dtype, i)) {
      if (found == count) return ctx.Invalid("the input changed after its non-zeros were counted");
      for (size_t a = 0; a < index.size(); ++a) out[int64_t(a) * count + found] = index[a];
      ++found;
    }
    // Row-major increment of the multi-index (a scalar's stays 0).
    for (int a = r - 1; a >= 0; --a) {
      if (++index[size_t(a)] < x->shape[size_t(a)]) break;
      index[size_t(a)] = 0;
    }
  }
  if (found != count) return ctx.Invalid("the input changed after its non-zeros were counted");
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_NonZero() {
  static const OpDef def{"NonZero", InferNonZero, RunNonZero, /*value_inputs=*/1u << 0, false, 1,
                         1};
  return def;
}

}  // namespace qfold
