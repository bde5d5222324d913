// ReverseSequence: for each batch entry b, reverses the first
// sequence_lens[b] elements along the time axis and copies the rest. The
// batch and time axes are 0 and 1 (either way round), so every element moved
// is a contiguous run of the trailing axes.
#include <cstring>
#include <string>
#include <vector>

#include "ops/shape_common.h"

namespace qfold {
namespace {

Status ReadAxes(const KernelContext& ctx, int* batch_axis, int* time_axis) {
  const int64_t b = ctx.attr().GetInt("batch_axis", 1);
  const int64_t t = ctx.attr().GetInt("time_axis", 0);
  if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
    return ctx.Invalid("batch_axis " + std::to_string(b) + " and time_axis " + std::to_string(t) +
                       ": one must be 0 and the other 1");
  *batch_axis = int(b);
  *time_axis = int(t);
  return Status::Ok();
}

Status InferReverseSequence(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* lens = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  if (lens->dtype != DType::kInt64)
    return ctx.Invalid(std::string("sequence_lens must be int64, it is ") +
                       dtype_name(lens->dtype));
  int batch_axis, time_axis;
  QF_RETURN_IF_ERROR(ReadAxes(ctx, &batch_axis, &time_axis));
  if (!x->rank_known) {
    SetOutputUnknownRank(ctx.output(0), x->dtype);
    return Status::Ok();
  }
  if (x->rank() < 2) return ctx.Invalid("input must have rank >= 2");
  if (lens->rank_known) {
    const int64_t batch = x->shape[size_t(batch_axis)];
    if (lens->rank() != 1 || (batch >= 0 && lens->shape[0] >= 0 && lens->shape[0] != batch))
      return ctx.Invalid("sequence_lens has shape " + ShapeToString(lens->shape) + ", expected [" +
                         std::to_string(batch) + "] (the batch axis)");
  }
  SetOutput(ctx.output(0), x->dtype, x->shape);
  return Status::Ok();
}

Status RunReverseSequence(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int batch_axis, time_axis;
  QF_RETURN_IF_ERROR(ReadAxes(ctx, &batch_axis, &time_axis));
  std::vector<int64_t> lens;
  if (!ReadInts(ctx.input(1), &lens)) return ctx.Invalid("sequence_lens has no data");
  const int64_t batch = x->shape[size_t(batch_axis)];
  const int64_t steps = x->shape[size_t(time_axis)];
  if (int64_t(lens.size()) != batch)
    return ctx.Invalid("sequence_lens holds " + std::to_string(lens.size()) + " values for " +
                       std::to_string(batch) + " batch entries");
  const size_t run = size_t(DimProduct(x->shape, 2, x->rank())) * dtype_size(x->dtype);
  const uint8_t* src = x->ptr<uint8_t>();
  uint8_t* dst = y->ptr<uint8_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[size_t(b)];
    if (len < 0 || len > steps)
      return ctx.Invalid("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(len) +
                         ", outside [0, " + std::to_string(steps) + "]");
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      const int64_t out_pos = time_axis == 0 ? t * batch + b : b * steps + t;
      const int64_t in_pos = time_axis == 0 ? from * batch + b : b * steps + from;
      if (run) std::memcpy(dst + size_t(out_pos) * run, src + size_t(in_pos) * run, run);
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_ReverseSequence() {
  static const OpDef def{
      "ReverseSequence", InferReverseSequence, RunReverseSequence, 0, false, 2, 2};
  return def;
}

}  // namespace qfold
