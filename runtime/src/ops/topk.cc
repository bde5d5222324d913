// TopK: the k largest (or smallest) elements along an axis and their int64
// indices. Equal values keep the lower index first (the ONNX spec's tie rule),
// and the output is always sorted: with sorted = 0 the spec leaves the order
// open, so the sorted order is a valid answer too. k is input 1 (opset 10+);
// the converter moves opset 1's attribute there (converter/passes/normalize_opsets.cc).
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/shape_common.h"

namespace qfold {
namespace {

bool TopKDType(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
      return true;
    default:
      return false;
  }
}

// Reads k when known; Invalid when it is negative or exceeds the axis.
Status ReadK(const KernelContext& ctx, int64_t axis_dim, int64_t* k, bool* known) {
  std::vector<int64_t> v;
  *known = ReadInts(ctx.input(1), &v);
  if (!*known) return Status::Ok();
  if (v.size() != 1)
    return ctx.Invalid("K must hold one value, it holds " + std::to_string(v.size()));
  *k = v[0];
  if (*k < 0) return ctx.Invalid("K is " + std::to_string(*k) + ", it must not be negative");
  if (axis_dim >= 0 && *k > axis_dim)
    return ctx.Invalid("K is " + std::to_string(*k) + ", larger than the axis (" +
                       std::to_string(axis_dim) + " elements)");
  return Status::Ok();
}

Status InferTopK(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* kt = ctx.input(1);
  if (!TopKDType(x->dtype))
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype) + " is not supported");
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, kt, "K"));
  if (kt->rank_known && kt->rank() > 1) return ctx.Invalid("K must be a 1-D tensor of one value");
  if (!x->rank_known) {
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    SetOutputUnknownRank(ctx.output(1), DType::kInt64);
    return Status::Ok();
  }
  int axis;
  const int64_t axis_attr = ctx.attr().GetInt("axis", -1);
  if (x->rank() == 0 || !NormalizeAxis(axis_attr, x->rank(), &axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " out of range for rank " +
                       std::to_string(x->rank()));
  int64_t k = kUnknownDim;
  bool known;
  QF_RETURN_IF_ERROR(ReadK(ctx, x->shape[size_t(axis)], &k, &known));
  Shape out = x->shape;
  out[size_t(axis)] = known ? k : kUnknownDim;
  SetOutput(ctx.output(0), x->dtype, out);
  SetOutput(ctx.output(1), DType::kInt64, out);
  return Status::Ok();
}

// Whether a comes before b: the larger (largest) or smaller value first, NaN
// counting as larger than every number, then the lower index.
template <class T>
struct TopKOrder {
  const T* row;  // the n values of one slice, gathered contiguously
  bool largest;
  bool operator()(int64_t a, int64_t b) const {
    const T va = row[a], vb = row[b];
    if constexpr (std::is_floating_point_v<T>) {
      const bool na = std::isnan(va), nb = std::isnan(vb);
      if (na || nb) {
        if (na && nb) return a < b;
        return largest ? na : nb;
      }
    }
    if (va != vb) return largest ? va > vb : va < vb;
    return a < b;
  }
};

template <class T>
void TopKKernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                int64_t k, bool largest) {
  std::vector<T> row(static_cast<size_t>(n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* src = x + o * n * inner + in;
      for (int64_t j = 0; j < n; ++j) {
        row[size_t(j)] = src[j * inner];
        order[size_t(j)] = j;
      }
      // The order is total (index breaks ties), so partial_sort's result is unique.
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        TopKOrder<T>{row.data(), largest});
      T* vdst = values + o * k * inner + in;
      int64_t* idst = indices + o * k * inner + in;
      for (int64_t j = 0; j < k; ++j) {
        vdst[j * inner] = row[size_t(order[size_t(j)])];
        idst[j * inner] = order[size_t(j)];
      }
    }
  }
}

Status RunTopK(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* values = ctx.output(0);
  Tensor* indices = ctx.output(1);
  const int r = x->rank();
  int axis = 0;
  if (r == 0 || !NormalizeAxis(ctx.attr().GetInt("axis", -1), r, &axis))
    return ctx.Invalid("axis out of range");
  int64_t k = 0;
  bool known;
  QF_RETURN_IF_ERROR(ReadK(ctx, x->shape[size_t(axis)], &k, &known));
  if (!known) return ctx.Invalid("K is not known at run time");
  const bool largest = ctx.attr().GetInt("largest", 1) != 0;
  const int64_t outer = DimProduct(x->shape, 0, axis);
  const int64_t inner = DimProduct(x->shape, axis + 1, r);
  const int64_t n = x->shape[size_t(axis)];
  if (k == 0 || outer == 0 || inner == 0) return Status::Ok();
  // Indices are int64 whether or not the node names that output.
  std::vector<int64_t> own_indices;
  int64_t* idx = nullptr;
  if (indices) {
    idx = indices->ptr<int64_t>();
  } else {
    own_indices.resize(size_t(outer * k * inner));
    idx = own_indices.data();
  }
  std::vector<uint8_t> own_values;
  void* vals = nullptr;
  if (values) {
    vals = values->data;
  } else {
    own_values.resize(size_t(outer * k * inner) * dtype_size(x->dtype));
    vals = own_values.data();
  }
  QF_DISPATCH_NUMERIC(
      x->dtype, return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype)),
      TopKKernel<T>(x->ptr<T>(), static_cast<T*>(vals), idx, outer, n, inner, k, largest));
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_TopK() {
  static const OpDef def = [] {
    OpDef d{"TopK", InferTopK, RunTopK, /*value_inputs=*/1u << 1, false, 2, 2};
    // Exports that want only the order (argsort) may leave Values unnamed.
    d.output0_optional = true;
    return d;
  }();
  return def;
}

}  // namespace qfold
