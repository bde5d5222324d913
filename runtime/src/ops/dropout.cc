// Dropout at inference: output = data, mask = all true (nothing dropped).
// The converter removes a Dropout whose mask nobody reads; this op runs the
// ones whose mask is read or is a graph output (older exports name it), and
// training mode with ratio 0, which drops nothing either. Training mode with
// another ratio is random and refused. Opsets 7-9 typed the mask like the
// data (all ones); NormalizeOpsets marks those nodes with _mask_like_data.
#include <cstring>

#include "core/op.h"

namespace qfold {
namespace {

// Whether a present training_mode / ratio pair drops nothing; `known` is false
// while either value is not known yet (converter inference of a graph input).
Status CheckInference(KernelContext& ctx, bool* known) {
  const Tensor* ratio = ctx.input(1);
  const Tensor* training = ctx.input(2);
  *known = true;
  if (!training) return Status::Ok();
  if (training->dtype != DType::kBool || (training->shape_known() && training->numel() != 1))
    return ctx.Invalid("training_mode must be a bool scalar");
  if (!training->data) {
    *known = false;
    return Status::Ok();
  }
  if (!*training->ptr<bool>()) return Status::Ok();
  // Training mode: ratio defaults to 0.5.
  float r = 0.5f;
  if (ratio) {
    if (!ratio->data) {
      *known = false;
      return Status::Ok();
    }
    if (ratio->dtype == DType::kFloat32)
      r = *ratio->ptr<float>();
    else if (ratio->dtype == DType::kFloat64)
      r = float(*ratio->ptr<double>());
    else
      return ctx.Invalid("ratio must be float32 or float64");
  }
  if (r != 0.f) return ctx.Unsupported("training_mode=true with ratio > 0 drops values at random");
  return Status::Ok();
}

Status InferDropout(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  bool known;
  QF_RETURN_IF_ERROR(CheckInference(ctx, &known));
  Tensor* y = ctx.output(0);
  if (y) {
    y->dtype = x->dtype;
    y->rank_known = x->rank_known;
    y->shape = x->shape;
  }
  if (Tensor* mask = ctx.output(1)) {
    mask->dtype = ctx.attr().GetInt("_mask_like_data", 0) ? x->dtype : DType::kBool;
    mask->rank_known = x->rank_known;
    mask->shape = x->shape;
  }
  return Status::Ok();
}

template <class T>
void FillOnes(void* p, int64_t n) {
  T* d = static_cast<T*>(p);
  for (int64_t i = 0; i < n; ++i) d[i] = T(1);
}

Status RunDropout(KernelContext& ctx) {
  bool known;
  QF_RETURN_IF_ERROR(CheckInference(ctx, &known));
  const Tensor* x = ctx.input(0);
  if (Tensor* y = ctx.output(0))
    if (y->data != x->data) std::memcpy(y->data, x->data, x->bytes());
  if (Tensor* mask = ctx.output(1)) {
    switch (mask->dtype) {
      case DType::kBool:
        std::memset(mask->data, 1, mask->bytes());
        break;
      case DType::kFloat32:
        FillOnes<float>(mask->data, mask->numel());
        break;
      case DType::kFloat64:
        FillOnes<double>(mask->data, mask->numel());
        break;
      default:
        return ctx.Unsupported(std::string("mask of dtype ") + dtype_name(mask->dtype));
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Dropout() {
  static const OpDef def{"Dropout",
                         InferDropout,
                         RunDropout,
                         /*value_inputs=*/0,
                         /*shape_only=*/false,
                         /*min_inputs=*/1,
                         /*max_inputs=*/3};
  return def;
}

}  // namespace qfold
