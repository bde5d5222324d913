// MatMul with NumPy semantics: 1-D operands are promoted to matrices (and the
// added dim removed again), leading batch dims broadcast. Optional fused
// activation (float32 only).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

Status InferMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  if (!a || !b) return ctx.Invalid("inputs A and B are required");
  if (a->dtype == DType::kBool || !dtype_size(a->dtype) || a->dtype == DType::kFloat16 ||
      a->dtype == DType::kBFloat16)
    return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype));
  if (b->dtype != a->dtype) return ctx.Invalid("A and B must have the same dtype");
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  if (act.active() && a->dtype != DType::kFloat32)
    return ctx.Unsupported("fused activation on a non-float32 MatMul");
  y->dtype = a->dtype;
  if (!a->rank_known || !b->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  if (a->rank() == 0 || b->rank() == 0) return ctx.Invalid("MatMul operands must not be scalars");
  Shape as = a->shape, bs = b->shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t ka = as.back(), kb = bs[bs.size() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb)
    return ctx.Invalid("inner dims differ: A " + ShapeToString(a->shape) + ", B " +
                       ShapeToString(b->shape));
  Shape batch;
  std::string err;
  if (!BroadcastShapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2), &batch,
                       &err))
    return ctx.Invalid(err);
  y->rank_known = true;
  y->shape = batch;
  if (a->rank() > 1) y->shape.push_back(as[as.size() - 2]);
  if (b->rank() > 1) y->shape.push_back(bs.back());
  return Status::Ok();
}

template <class T>
void MatMulKernel(const Tensor& a, const Tensor& b, Tensor* y) {
  Shape as = a.shape, bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch;
  BroadcastShapes(a_batch, b_batch, &batch, nullptr);
  BroadcastIndexer idx({a_batch, b_batch}, batch);
  const int64_t batches = Product(batch);

  // Integers accumulate in uint64_t: wraps like two's complement, without
  // the undefined behaviour of signed overflow.
  using Acc = std::conditional_t<std::is_floating_point<T>::value, T, uint64_t>;
  std::vector<Acc> acc(static_cast<size_t>(n));
  const T* ad = a.ptr<T>();
  const T* bd = b.ptr<T>();
  T* yd = y->ptr<T>();
  std::vector<int64_t> pos(batch.size(), 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Matrix offsets of this batch entry in A and B (strides count matrices).
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += pos[d] * idx.strides(0)[d];
      bo += pos[d] * idx.strides(1)[d];
    }
    const T* am = ad + ao * m * k;
    const T* bm = bd + bo * k * n;
    T* ym = yd + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t p = 0; p < k; ++p) {
        const Acc av = Acc(am[i * k + p]);
        const T* brow = bm + p * n;
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += av * Acc(brow[j]);
      }
      for (int64_t j = 0; j < n; ++j) ym[i * n + j] = T(acc[size_t(j)]);
    }
    for (int d = int(batch.size()) - 1; d >= 0; --d) {
      if (++pos[d] < batch[d]) break;
      pos[d] = 0;
    }
  }
}

Status RunMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  QF_DISPATCH_NUMERIC(a->dtype,
                      return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype)),
                      MatMulKernel<T>(*a, *b, y));
  if (y->dtype == DType::kFloat32) {
    Status st;
    FusedActivation::FromAttrs(ctx.attr(), &st).Apply(y->ptr<float>(), y->numel());
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_MatMul() {
  static const OpDef def{"MatMul",
                         InferMatMul,
                         RunMatMul,
                         /*value_inputs=*/0,
                         /*shape_only=*/false,
                         /*min_inputs=*/2,
                         /*max_inputs=*/2};
  return def;
}

}  // namespace qfold
