// Broadcasting comparisons (-> bool), boolean logic, BitShift, and Where.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/op.h"
#include "core/shape_util.h"
#include "ops/elementwise_util.h"

namespace qfold {
namespace {

Status CheckSameDType(const KernelContext& ctx, const Tensor* a, const Tensor* b) {
  if (a->dtype != b->dtype)
    return ctx.Invalid(std::string("input dtypes differ: ") + dtype_name(a->dtype) + " and " +
                       dtype_name(b->dtype));
  return Status::Ok();
}

// ---- Comparisons: numeric inputs (and bool for Equal), bool output ----

template <bool kAllowBool>
Status InferCompare(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  QF_RETURN_IF_ERROR(RejectLegacyBroadcast(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckSameDType(ctx, a, b));
  if (!IsNumericDType(a->dtype) && !(kAllowBool && a->dtype == DType::kBool))
    return UnsupportedDType(ctx, a->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = DType::kBool;
  return InferBroadcastShape(ctx, {a, b}, y);
}

struct EqualFn {
  template <class T>
  static bool Apply(T a, T b) {
    return a == b;
  }
};
struct LessFn {
  template <class T>
  static bool Apply(T a, T b) {
    return a < b;
  }
};
struct GreaterFn {
  template <class T>
  static bool Apply(T a, T b) {
    return a > b;
  }
};
struct LessOrEqualFn {
  template <class T>
  static bool Apply(T a, T b) {
    return a <= b;
  }
};
struct GreaterOrEqualFn {
  template <class T>
  static bool Apply(T a, T b) {
    return a >= b;
  }
};

template <class Fn>
Status RunCompare(KernelContext& ctx) {
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  QF_DISPATCH_ALL(
      a.dtype, return UnsupportedDType(ctx, a.dtype),
      BinaryLoop<T, T, bool>(a, b, y, [](T u, T v) { return Fn::template Apply<T>(u, v); }));
  return Status::Ok();
}

// ---- And, Or, Xor on bool ----

Status InferLogic(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  QF_RETURN_IF_ERROR(RejectLegacyBroadcast(ctx));
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckSameDType(ctx, a, b));
  if (a->dtype != DType::kBool) return UnsupportedDType(ctx, a->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = DType::kBool;
  return InferBroadcastShape(ctx, {a, b}, y);
}

struct AndFn {
  static bool Apply(bool a, bool b) { return a && b; }
};
struct OrFn {
  static bool Apply(bool a, bool b) { return a || b; }
};
struct XorFn {
  static bool Apply(bool a, bool b) { return a != b; }
};

template <class Fn>
Status RunLogic(KernelContext& ctx) {
  BinaryLoop<bool, bool, bool>(*ctx.input(0), *ctx.input(1), *ctx.output(0),
                               [](bool u, bool v) { return Fn::Apply(u, v); });
  return Status::Ok();
}

// ---- BitShift (opset 28: signed types too) ----

Status InferBitShift(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 2));
  const std::string dir = ctx.attr().GetString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.Invalid("direction must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckSameDType(ctx, a, b));
  if (!IsIntDType(a->dtype)) return UnsupportedDType(ctx, a->dtype);
  Tensor* y = ctx.output(0);
  y->dtype = a->dtype;
  return InferBroadcastShape(ctx, {a, b}, y);
}

// Left shifts discard bits past the top (done in uint64 to avoid signed
// overflow); signed right shifts are arithmetic. A negative or too-large
// shift leaves only the sign fill: -1 for a right shift of a negative value,
// else 0.
template <class T>
T ShiftOne(T x, T amount, bool left) {
  constexpr int64_t kBits = int64_t(sizeof(T) * 8);
  // Compared as uint64: a uint64 amount of 2^63 or more is not negative as int64.
  if (IsNegative(amount) || uint64_t(amount) >= uint64_t(kBits))
    return !left && IsNegative(x) ? T(-1) : T(0);
  if (left) return T(uint64_t(x) << int(amount));
  if constexpr (std::is_signed<T>::value) {
    // Arithmetic shift written without relying on implementation-defined >>.
    return IsNegative(x) ? T(~(~int64_t(x) >> int(amount))) : T(int64_t(x) >> int(amount));
  } else {
    return T(x >> int(amount));
  }
}

Status RunBitShift(KernelContext& ctx) {
  const bool left = ctx.attr().GetString("direction", "") == "LEFT";
  const Tensor& a = *ctx.input(0);
  const Tensor& b = *ctx.input(1);
  Tensor& y = *ctx.output(0);
  QF_DISPATCH_NUMERIC(
      a.dtype, return UnsupportedDType(ctx, a.dtype),
      if constexpr (std::is_integral<T>::value) {
        BinaryLoop<T, T, T>(a, b, y, [&](T u, T v) { return ShiftOne(u, v, left); });
      } else { return UnsupportedDType(ctx, a.dtype); });
  return Status::Ok();
}

// ---- Where(condition, X, Y): a byte copy, so it works for every dtype ----

Status InferWhere(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(CheckIo(ctx, 3));
  const Tensor* c = ctx.input(0);
  const Tensor* x = ctx.input(1);
  const Tensor* y = ctx.input(2);
  if (c->dtype != DType::kBool)
    return ctx.Invalid(std::string("condition must be bool, got ") + dtype_name(c->dtype));
  QF_RETURN_IF_ERROR(CheckSameDType(ctx, x, y));
  if (dtype_size(x->dtype) == 0) return UnsupportedDType(ctx, x->dtype);
  Tensor* out = ctx.output(0);
  out->dtype = x->dtype;
  return InferBroadcastShape(ctx, {c, x, y}, out);
}

template <class U>
void WhereLoop(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  const uint8_t* pc = c.ptr<uint8_t>();  // bytes, so a stray non-0/1 value is still defined
  const U* px = static_cast<const U*>(x.data);
  const U* py = static_cast<const U*>(y.data);
  U* po = static_cast<U*>(out.data);
  ForEachBroadcast<3>({&c.shape, &x.shape, &y.shape}, out.shape,
                      [&](int64_t o, const std::array<int64_t, 3>& i) {
                        po[o] = pc[i[0]] != 0 ? px[i[1]] : py[i[2]];
                      });
}

Status RunWhere(KernelContext& ctx) {
  const Tensor& c = *ctx.input(0);
  const Tensor& x = *ctx.input(1);
  const Tensor& y = *ctx.input(2);
  Tensor& out = *ctx.output(0);
  switch (dtype_size(x.dtype)) {
    case 1:
      WhereLoop<uint8_t>(c, x, y, out);
      break;
    case 2:
      WhereLoop<uint16_t>(c, x, y, out);
      break;
    case 4:
      WhereLoop<uint32_t>(c, x, y, out);
      break;
    case 8:
      WhereLoop<uint64_t>(c, x, y, out);
      break;
    default:
      return UnsupportedDType(ctx, x.dtype);
  }
  return Status::Ok();
}

}  // namespace

// All of them broadcast their inputs; SAME_DTYPE: the inputs of one dtype
// (Where's X and Y, not its bool condition).
#define QF_DEF(NAME, INFER, RUN, NIN, SAME_DTYPE)                                        \
  const OpDef& OpDef_##NAME() {                                                          \
    static const OpDef def = [] {                                                        \
      OpDef d = WithTraits({#NAME, INFER, RUN, 0, false, NIN, NIN}, kTraitBroadcasting); \
      d.same_dtype_inputs = SAME_DTYPE;                                                  \
      return d;                                                                          \
    }();                                                                                 \
    return def;                                                                          \
  }

QF_DEF(Equal, InferCompare<true>, RunCompare<EqualFn>, 2, kAllInputs)
QF_DEF(Less, InferCompare<false>, RunCompare<LessFn>, 2, kAllInputs)
QF_DEF(Greater, InferCompare<false>, RunCompare<GreaterFn>, 2, kAllInputs)
QF_DEF(LessOrEqual, InferCompare<false>, RunCompare<LessOrEqualFn>, 2, kAllInputs)
QF_DEF(GreaterOrEqual, InferCompare<false>, RunCompare<GreaterOrEqualFn>, 2, kAllInputs)
QF_DEF(And, InferLogic, RunLogic<AndFn>, 2, kAllInputs)
QF_DEF(Or, InferLogic, RunLogic<OrFn>, 2, kAllInputs)
QF_DEF(Xor, InferLogic, RunLogic<XorFn>, 2, kAllInputs)
QF_DEF(BitShift, InferBitShift, RunBitShift, 2, kAllInputs)
QF_DEF(Where, InferWhere, RunWhere, 3, (1u << 1) | (1u << 2))
#undef QF_DEF

}  // namespace qfold
