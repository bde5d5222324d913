// Identity: output = input. The converter removes most of them; the ones left
// (graph input passed straight to an output) run as a copy.
#include <cstring>

#include "core/op.h"
#include "core/sequence.h"
#include "core/shape_util.h"

namespace qfold {
namespace {

Status InferIdentity(KernelContext& ctx) {
  Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  y->is_sequence = x->is_sequence;
  y->is_optional = x->is_optional;
  y->rank_known = x->rank_known;
  y->shape = x->shape;
  return Status::Ok();
}

Status RunIdentity(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (x->boxed()) {
    if (!x->sequence || !y->sequence)
      return ctx.Unsupported("'" + x->name +
                             "' has no value: sequences and optionals run in a session");
    // Elements are immutable: the copy shares them.
    if (y->sequence != x->sequence) *y->sequence = *x->sequence;
    return Status::Ok();
  }
  if (y->data != x->data) std::memcpy(y->data, x->data, x->bytes());
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Identity() {
  static const OpDef def = [] {
    OpDef d{"Identity",           InferIdentity,    RunIdentity,
            /*value_inputs=*/0,
            /*shape_only=*/false, /*min_inputs=*/1, /*max_inputs=*/1};
    d.traits = kTraitSequence | kTraitOptional;
    return d;
  }();
  return def;
}

}  // namespace qfold
