// Shared helpers for the elementwise op files (binary arithmetic, comparisons,
// Where, variadic Max/Min/Sum/Mean): broadcast shape inference, a broadcast
// iteration loop, and dtype classification.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"

namespace qfold {

inline bool IsFloatDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}
inline bool IsSignedIntDType(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
inline bool IsUnsignedIntDType(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}
inline bool IsIntDType(DType t) {
  return IsSignedIntDType(t) || IsUnsignedIntDType(t);
}
// The types QF_DISPATCH_NUMERIC handles.
inline bool IsNumericDType(DType t) {
  return IsFloatDType(t) || IsIntDType(t);
}

inline Status UnsupportedDType(const KernelContext& ctx, DType t, const char* what = "input") {
  return ctx.Unsupported(std::string(what) + " dtype " + dtype_name(t) + " is not supported");
}

// Checks that the first n inputs and output 0 are present (an optional-input
// slot can hold nullptr even when the count is right).
inline Status CheckIo(const KernelContext& ctx, int n) {
  for (int i = 0; i < n; ++i)
    if (!ctx.input(i)) return ctx.Invalid("required input " + std::to_string(i) + " is missing");
  if (!ctx.output(0)) return ctx.Invalid("output 0 is missing");
  return Status::Ok();
}

// Opset < 7 binary ops broadcast along an `axis` attribute instead of NumPy
// rules; the converter should rewrite them, so reject rather than misalign.
inline Status RejectLegacyBroadcast(const KernelContext& ctx) {
  if (ctx.attr().Has("axis"))
    return ctx.Unsupported("legacy (opset < 7) 'axis' broadcast attribute is not supported");
  return Status::Ok();
}

// x < 0 without -Wtype-limits warnings for unsigned T.
template <class T>
constexpr bool IsNegative(T x) {
  if constexpr (std::is_signed<T>::value)
    return x < T(0);
  else
    return false;
}

// Sets y's shape to the multidirectional broadcast of the given shapes (nullptr
// entries are skipped). Unknown rank in any input makes y's rank unknown.
inline Status InferBroadcastShape(const KernelContext& ctx, const std::vector<const Tensor*>& ins,
                                  Tensor* y) {
  Shape out;
  for (const Tensor* t : ins) {
    if (!t) continue;
    if (!t->rank_known) {
      y->rank_known = false;
      y->shape.clear();
      return Status::Ok();
    }
    std::string err;
    Shape next;
    if (!BroadcastShapes(out, t->shape, &next, &err)) return ctx.Invalid(err);
    out = std::move(next);
  }
  y->rank_known = true;
  y->shape = std::move(out);
  return Status::Ok();
}

// Calls f(out_index, in_index) for every element of `out`, where in_index[k]
// is the flat index into input k whose shape (right-aligned, NumPy rules)
// broadcasts to `out`. The caller has validated the shapes.
template <size_t N, class F>
void ForEachBroadcast(const std::array<const Shape*, N>& ins, const Shape& out, F&& f) {
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  if (total == 0) return;
  bool same = true;
  for (const Shape* s : ins) same = same && *s == out;
  std::array<int64_t, N> idx{};
  if (same) {  // fast path: no broadcasting
    for (int64_t o = 0; o < total; ++o) {
      idx.fill(o);
      f(o, idx);
    }
    return;
  }
  const int rank = int(out.size());
  if (rank == 0) {  // every input is a scalar too
    f(0, idx);
    return;
  }
  std::vector<Shape> shapes;
  for (const Shape* s : ins) shapes.push_back(*s);
  BroadcastIndexer bi(shapes, out);
  const int64_t inner = out[rank - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = bi.strides(int(k))[rank - 1];
  std::vector<int64_t> counter(rank, 0);
  std::array<int64_t, N> cur;
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t j = 0; j < inner; ++j) {
      for (size_t k = 0; k < N; ++k) cur[k] = idx[k] + j * inner_stride[k];
      f(o + j, cur);
    }
    // Odometer step over the outer axes.
    for (int d = rank - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) idx[k] += bi.strides(int(k))[d];
      if (++counter[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) idx[k] -= bi.strides(int(k))[d] * out[d];
      counter[d] = 0;
    }
  }
}

// y[i] = f(a[ia], b[ib]) with broadcasting; y's shape is the broadcast shape.
template <class A, class B, class Y, class F>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& y, F&& f) {
  const A* pa = a.ptr<A>();
  const B* pb = b.ptr<B>();
  Y* py = y.ptr<Y>();
  const int64_t n = y.numel();
  if (a.shape == y.shape && b.numel() == 1) {  // fast path: tensor op scalar
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[0]);
    return;
  }
  ForEachBroadcast<2>(
      {&a.shape, &b.shape}, y.shape,
      [&](int64_t o, const std::array<int64_t, 2>& i) { py[o] = f(pa[i[0]], pb[i[1]]); });
}

// Converts a floating value to an integer type without undefined behaviour:
// NaN becomes 0 and out-of-range values wrap through int64 the way x86 and
// NumPy casts behave for in-range int64 values.
template <class T, class S>
T FloatToInt(S v) {
  static_assert(std::is_integral<T>::value, "integer target");
  if (std::isnan(v)) return T(0);
  if (std::is_same<T, uint64_t>::value && v >= S(9223372036854775808.0)) {
    if (v >= S(18446744073709551616.0)) return std::numeric_limits<T>::max();
    return T(uint64_t(v));
  }
  if (v >= S(9223372036854775808.0)) return T(std::numeric_limits<int64_t>::max());
  if (v < S(-9223372036854775808.0)) return T(std::numeric_limits<int64_t>::min());
  return T(int64_t(v));
}

}  // namespace qfold
