// ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp (opset 18+
// form: axes is optional input 1) and ArgMax/ArgMin.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Reads the axes (input 1, or the legacy `axes` attribute) into a per-axis
// mask. *known is false when the axes input's value is not known yet.
Status ReducedAxes(const KernelContext& ctx, int rank, std::vector<bool>* mask, bool* known) {
  *known = true;
  std::vector<int64_t> axes;
  const Tensor* axes_t = ctx.input(1);
  if (axes_t) {
    if (ctx.attr().Has("axes")) return ctx.Invalid("axes given both as input and attribute");
    if (axes_t->dtype != DType::kInt64)
      return ctx.Invalid(std::string("axes must be int64, got ") + dtype_name(axes_t->dtype));
    if (!axes_t->data || !axes_t->shape_known()) {
      *known = false;
      return Status::Ok();
    }
    ReadInts(axes_t, &axes);
  } else {
    axes = ctx.attr().GetInts("axes");
  }
  const bool noop = ctx.attr().GetInt("noop_with_empty_axes", 0) != 0;
  mask->assign(rank, axes.empty() && !noop);
  for (int64_t a : axes) {
    int n;
    if (!NormalizeAxis(a, rank, &n))
      return ctx.Invalid("axis " + std::to_string(a) + " is out of range for rank " +
                         std::to_string(rank));
    (*mask)[n] = true;
  }
  return Status::Ok();
}

bool ReduceAccepts(Red r, DType t) {
  if ((r == Red::kMax || r == Red::kMin) && t == DType::kBool) return true;
  return IsNumericDType(t);
}

template <Red kRed>
Status InferReduce(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Tensor* x = ctx.input(0);
  if (!ReduceAccepts(kRed, x->dtype)) return UnsupportedDType(ctx, x->dtype);
  const int64_t keepdims = ctx.attr().GetInt("keepdims", 1);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  std::vector<bool> mask;
  bool known;
  QF_RETURN_IF_ERROR(ReducedAxes(ctx, x->rank(), &mask, &known));
  if (!known) {
    if (keepdims) {
      y->rank_known = true;
      y->shape.assign(x->rank(), kUnknownDim);
    } else {
      SetOutputsUnknown(ctx);
    }
    return Status::Ok();
  }
  y->rank_known = true;
  y->shape.clear();
  for (int i = 0; i < x->rank(); ++i) {
    if (!mask[i])
      y->shape.push_back(x->shape[i]);
    else if (keepdims)
      y->shape.push_back(1);
  }
  return Status::Ok();
}

// Calls f(out_index, in_index) for every input element; out_index is the
// element's position in the keepdims-shaped output.
template <class F>
void ForEachReduced(const Shape& in, const std::vector<bool>& mask, F&& f) {
  Shape kept = in;
  for (size_t i = 0; i < in.size(); ++i)
    if (mask[i]) kept[i] = 1;
  // Iterating the input as the broadcast of the kept shape: index 0 is the
  // kept (output) position, index 1 the input position.
  ForEachBroadcast<2>({&kept, &in}, in,
                      [&](int64_t, const std::array<int64_t, 2>& i) { f(i[0], i[1]); });
}

// Accumulation type: double for float inputs and for the float-valued
// results (mean, norms, logs) of integer inputs; for integer sums and
// products uint64, whose wrap-around matches two's complement and has no
// overflow undefined behaviour; signed-aware 64-bit for integer max/min.
template <class T, Red kRed>
struct AccOf {
  static constexpr bool kIntegerResult =
      std::is_integral<T>::value &&
      (kRed == Red::kSum || kRed == Red::kProd || kRed == Red::kSumSquare || kRed == Red::kL1 ||
       kRed == Red::kMax || kRed == Red::kMin);
  static constexpr bool kSignedCompare = (kRed == Red::kMax || kRed == Red::kMin) &&
                                         (std::is_signed<T>::value || std::is_same<T, bool>::value);
  using type = std::conditional_t<!kIntegerResult, double,
                                  std::conditional_t<kSignedCompare, int64_t, uint64_t>>;
};

template <class T, Red kRed>
void ReduceTyped(const Tensor& x, const std::vector<bool>& mask, Tensor& y) {
  using A = typename AccOf<T, kRed>::type;
  constexpr bool kFloatAcc = std::is_floating_point<A>::value;
  const int64_t out_n = y.numel();
  const T* px = x.ptr<T>();
  T* py = y.ptr<T>();
  A init = 0;
  if constexpr (kRed == Red::kProd) init = 1;
  if constexpr (kRed == Red::kMax) {
    if constexpr (kFloatAcc)
      init = -std::numeric_limits<A>::infinity();
    else
      init = A(std::numeric_limits<T>::lowest());
  }
  if constexpr (kRed == Red::kMin) {
    if constexpr (kFloatAcc)
      init = std::numeric_limits<A>::infinity();
    else
      init = A(std::numeric_limits<T>::max());
  }
  std::vector<A> acc(size_t(out_n), init);
  // LogSumExp subtracts the group maximum first so exp cannot overflow.
  std::vector<double> shift;
  if constexpr (kRed == Red::kLogSumExp) {
    shift.assign(size_t(out_n), -std::numeric_limits<double>::infinity());
    ForEachReduced(x.shape, mask, [&](int64_t o, int64_t i) {
      if (double(px[i]) > shift[o]) shift[o] = double(px[i]);
    });
    for (double& s : shift)
      if (std::isinf(s)) s = 0;  // all-inf (or empty) groups: keep exp(x - shift) defined
  }
  ForEachReduced(x.shape, mask, [&](int64_t o, int64_t i) {
    const T t = px[i];
    A& a = acc[o];
    if constexpr (kRed == Red::kSum || kRed == Red::kMean || kRed == Red::kLogSum) {
      a += A(t);
    } else if constexpr (kRed == Red::kMax) {
      if (A(t) > a || std::isnan(double(t))) a = A(t);
    } else if constexpr (kRed == Red::kMin) {
      if (A(t) < a || std::isnan(double(t))) a = A(t);
    } else if constexpr (kRed == Red::kProd) {
      a *= A(t);
    } else if constexpr (kRed == Red::kL1) {
      a += IsNegative(t) ? A(0) - A(t) : A(t);
    } else if constexpr (kRed == Red::kL2 || kRed == Red::kSumSquare) {
      a += A(t) * A(t);
    } else {
      static_assert(kRed == Red::kLogSumExp, "unhandled reduction");
      a += std::exp(double(t) - shift[o]);
    }
  });
  const int64_t group = out_n == 0 ? 0 : x.numel() / out_n;
  for (int64_t o = 0; o < out_n; ++o) {
    A r = acc[o];
    if constexpr (kRed == Red::kMean) r = r / A(group);
    if constexpr (kRed == Red::kL2) r = std::sqrt(r);
    if constexpr (kRed == Red::kLogSum) r = std::log(r);
    if constexpr (kRed == Red::kLogSumExp) r = std::log(r) + shift[o];
    if constexpr (std::is_same<T, bool>::value) {
      py[o] = r != 0;
    } else if constexpr (std::is_integral<T>::value && kFloatAcc) {
      py[o] = FloatToInt<T>(r);
    } else {
      py[o] = T(r);
    }
  }
}

// True when the reduced axes are the last ones (at least one): each output
// element is then the reduction of one contiguous row.
bool ReducesTrailingAxes(const std::vector<bool>& mask) {
  size_t first = mask.size();
  while (first > 0 && mask[first - 1]) --first;
  if (first == mask.size()) return false;
  for (size_t i = 0; i < first; ++i)
    if (mask[i]) return false;
  return true;
}

// float32 Sum/Mean/SumSquare over trailing axes with the row kernels (float
// accumulation, kernels/rowops_f32.h), rows split between threads.
template <Red kRed>
void ReduceRowsF32(const kernels::RowOpsF32Kernels& rk, kernels::ThreadPool* pool, const Tensor& x,
                   Tensor& y) {
  const int64_t rows = y.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : 0;
  const float* px = x.ptr<float>();
  float* py = y.ptr<float>();
  const bool small = rows * n < (int64_t(1) << 15);
  kernels::ParallelFor(small ? nullptr : pool, rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = px + r * n;
      if constexpr (kRed == Red::kSumSquare) {
        py[r] = rk.sum_squares(row, n);
      } else {
        const float sum = rk.sum(row, n);
        // Mean over an empty row is 0/0 as in the reference.
        py[r] = kRed == Red::kMean ? float(double(sum) / double(n)) : sum;
      }
    }
  });
}

template <Red kRed>
Status RunReduce(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  std::vector<bool> mask;
  bool known;
  QF_RETURN_IF_ERROR(ReducedAxes(ctx, x.rank(), &mask, &known));
  if (!known) return ctx.Invalid("axes value is unknown at run time");
  if constexpr (kRed == Red::kSum || kRed == Red::kMean || kRed == Red::kSumSquare) {
    const kernels::RowOpsF32Kernels* rk = ctx.kernel_config().rowops_f32;
    if (rk && x.dtype == DType::kFloat32 && ReducesTrailingAxes(mask)) {
      ReduceRowsF32<kRed>(*rk, ctx.pool, x, y);
      return Status::Ok();
    }
  }
  QF_DISPATCH_ALL(x.dtype, return UnsupportedDType(ctx, x.dtype), ReduceTyped<T, kRed>(x, mask, y));
  return Status::Ok();
}

// ---- ArgMax / ArgMin ----

Status InferArg(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 1));
  const Tensor* x = ctx.input(0);
  if (!IsNumericDType(x->dtype)) return UnsupportedDType(ctx, x->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = DType::kInt64;
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  const int64_t axis = ctx.attr().GetInt("axis", 0);
  int a;
  if (!NormalizeAxis(axis, x->rank(), &a))
    return ctx.Invalid("axis " + std::to_string(axis) + " is out of range for rank " +
                       std::to_string(x->rank()));
  y->rank_known = true;
  y->shape = x->shape;
  if (ctx.attr().GetInt("keepdims", 1))
    y->shape[a] = 1;
  else
    y->shape.erase(y->shape.begin() + a);
  return Status::Ok();
}

template <class T, bool kMax>
void ArgLoop(const Tensor& x, int axis, bool last, Tensor& y) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape[i];
  for (int i = axis + 1; i < x.rank(); ++i) inner *= x.shape[i];
  const int64_t n = x.shape[axis];
  const T* px = x.ptr<T>();
  int64_t* py = y.ptr<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* p = px + o * n * inner + in;
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k) {
        const T v = p[k * inner];
        const T b = p[best * inner];
        const bool better = kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
        if (better) best = k;
      }
      py[o * inner + in] = best;
    }
  }
}

template <bool kMax>
Status RunArg(KernelContext& ctx) {
  const Tensor& x = *ctx.input(0);
  Tensor& y = *ctx.output(0);
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), x.rank(), &axis);
  const bool last = ctx.attr().GetInt("select_last_index", 0) != 0;
  if (x.shape[axis] == 0 && y.numel() > 0)
    return ctx.Invalid("cannot take ArgMax/ArgMin over an empty axis");
  QF_DISPATCH_NUMERIC(x.dtype, return UnsupportedDType(ctx, x.dtype),
                      ArgLoop<T, kMax>(x, axis, last, y));
  return Status::Ok();
}

}  // namespace

#define QF_REDUCE_DEF(NAME, RED)                                                           \
  const OpDef& OpDef_##NAME() {                                                            \
    static const OpDef def{#NAME, InferReduce<RED>, RunReduce<RED>, 1u << 1, false, 1, 2}; \
    return def;                                                                            \
  }
QF_REDUCE_DEF(ReduceSum, Red::kSum)
QF_REDUCE_DEF(ReduceMean, Red::kMean)
QF_REDUCE_DEF(ReduceMax, Red::kMax)
QF_REDUCE_DEF(ReduceMin, Red::kMin)
QF_REDUCE_DEF(ReduceProd, Red::kProd)
QF_REDUCE_DEF(ReduceL1, Red::kL1)
QF_REDUCE_DEF(ReduceL2, Red::kL2)
QF_REDUCE_DEF(ReduceSumSquare, Red::kSumSquare)
QF_REDUCE_DEF(ReduceLogSum, Red::kLogSum)
QF_REDUCE_DEF(ReduceLogSumExp, Red::kLogSumExp)
#undef QF_REDUCE_DEF

const OpDef& OpDef_ArgMax() {
  static const OpDef def{"ArgMax", InferArg, RunArg<true>, 0, false, 1, 1};
  return def;
}
const OpDef& OpDef_ArgMin() {
  static const OpDef def{"ArgMin", InferArg, RunArg<false>, 0, false, 1, 1};
  return def;
}

}  // namespace qfold
