// Concat: joins inputs of equal rank along `axis`; other dims must match.
#include <cstring>
#include <string>

#include "kernels/thread_pool.h"
#include "ops/shape_common.h"

namespace qfold {
namespace {

Status InferConcat(KernelContext& ctx) {
  const Tensor* ref = nullptr;  // first input of known rank
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) return ctx.Invalid("input " + std::to_string(i) + " is missing");
    QF_RETURN_IF_ERROR(CheckByteDType(ctx, t, "input"));
    if (t->dtype != ctx.input(0)->dtype)
      return ctx.Invalid(std::string("inputs mix ") + dtype_name(ctx.input(0)->dtype) + " and " +
                         dtype_name(t->dtype));
    if (!ref && t->rank_known) ref = t;
  }
  DType dt = ctx.input(0)->dtype;
  const Attr* axis_attr = ctx.attr().Find("axis");
  if (!axis_attr) return ctx.Invalid("attribute axis is required");
  if (!ref) {
    SetOutputUnknownRank(ctx.output(0), dt);
    return Status::Ok();
  }
  int r = ref->rank();
  int axis;
  if (!NormalizeAxis(axis_attr->i, r, &axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr->i) + " out of range for rank " +
                       std::to_string(r));
  Shape out(size_t(r), kUnknownDim);
  int64_t sum = 0;
  bool sum_known = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t->rank_known) {
      sum_known = false;
      continue;
    }
    if (t->rank() != r)
      return ctx.Invalid("input " + std::to_string(i) + " has rank " + std::to_string(t->rank()) +
                         ", input " + ShapeToString(ref->shape) + " has rank " + std::to_string(r));
    for (int d = 0; d < r; ++d) {
      int64_t v = t->shape[d];
      if (d == axis) {
        if (v < 0)
          sum_known = false;
        else
          sum += v;
      } else if (v >= 0) {
        if (out[d] >= 0 && out[d] != v)
          return ctx.Invalid("dim " + std::to_string(d) + " differs between inputs: " +
                             std::to_string(out[d]) + " vs " + std::to_string(v));
        out[d] = v;
      }
    }
  }
  out[axis] = sum_known ? sum : kUnknownDim;
  SetOutput(ctx.output(0), dt, std::move(out));
  return Status::Ok();
}

Status RunConcat(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  int r = y->rank();
  int axis;
  NormalizeAxis(ctx.attr().GetInt("axis", 0), r, &axis);
  // The bytes of one dtype (bf16 mode stores the inputs and output alike).
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i)->dtype != y->dtype)
      return ctx.Error(StatusCode::kInternal, "input " + std::to_string(i) + " is " +
                                                  dtype_name(ctx.input(i)->dtype) +
                                                  ", the output " + dtype_name(y->dtype));
  const size_t esz = dtype_size(y->dtype);
  const int64_t outer = DimProduct(y->shape, 0, axis);
  const int64_t inner = DimProduct(y->shape, axis + 1, r);
  const size_t row = size_t(y->shape[axis] * inner) * esz;  // one outer index of y
  uint8_t* const out = y->ptr<uint8_t>();
  // Outer indices split between threads (a channels-last Concat copies a few
  // hundred bytes per input and pixel: SqueezeNet's 55x55x128 took 95 us on
  // one thread). Each byte is copied once, whoever copies it.
  kernels::ThreadPool* pool = kernels::PoolForWork(ctx.pool, int64_t(row) * outer, 1 << 16);
  kernels::ParallelFor(pool, outer, [&](int64_t o0, int64_t o1, int) {
    uint8_t* dst = out + size_t(o0) * row;
    for (int64_t o = o0; o < o1; ++o) {
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor* t = ctx.input(i);
        const size_t block = size_t(t->shape[axis] * inner) * esz;
        if (block == 0) continue;
        std::memcpy(dst, t->ptr<uint8_t>() + size_t(o) * block, block);
        dst += block;
      }
    }
  });
  return Status::Ok();
}

// OpDef::bf16_io: the copies move bytes of any 2-byte dtype alike; the
// session stores all of a Concat's float32 inputs and its output as bf16 or
// none (OpDef::bf16_tied).
void ConcatBf16Io(KernelContext& ctx, unsigned* inputs, unsigned* outputs) {
  if (ctx.output(0)->dtype != DType::kFloat32 || ctx.num_inputs() > 32) return;
  *inputs = ctx.num_inputs() == 32 ? ~0u : (1u << ctx.num_inputs()) - 1;
  *outputs = 1;
}

}  // namespace

const OpDef& OpDef_Concat() {
  static const OpDef def = [] {
    OpDef d{"Concat", InferConcat, RunConcat, 0, false, 1, 1 << 30};
    d.layout = LayoutRole::kAxis;
    d.layout_input = EveryInput;
    d.same_dtype_inputs = kAllInputs;
    d.bf16_io = ConcatBf16Io;
    d.bf16_tied = true;
    return d;
  }();
  return def;
}

}  // namespace qfold
