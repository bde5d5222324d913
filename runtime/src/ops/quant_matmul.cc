// QLinearMatMul and MatMulInteger: integer matrix products with NumPy MatMul
// broadcasting (1-D operands promoted to matrices, leading batch dims
// broadcast). Both accumulate acc = sum((a - a_zp) * (b - b_zp)) in int32;
// QLinearMatMul adds the optional qfold bias (input 8) and requantizes per
// docs/NUMERICS.md. QLinearMatMul also takes a 16-bit A and/or Y (a16w8),
// accumulated exactly in int64 and requantized in double (RequantizeWide).
// MatMulIntegerToFloat (com.microsoft; also what the converter fuses
// quantize_dynamic's MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add
// bias] into) dequantizes the int32 sums in the GEMM epilogue.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/conv_a16_nhwc.h"
#include "kernels/kernel_config.h"
#include "kernels/qlinear_s8.h"
#include "kernels/qmatmul_a16a16.h"
#include "kernels/quant_s8.h"
#include "kernels/scratch.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// A and B shapes after 1-D promotion.
void PromotedShapes(const Tensor& a, const Tensor& b, Shape* as, Shape* bs) {
  *as = a.shape;
  *bs = b.shape;
  if (as->size() == 1) as->insert(as->begin(), 1);
  if (bs->size() == 1) bs->push_back(1);
}

// Output shape of MatMul(a, b); *m and *n receive the matrix dims
// (kUnknownDim if unknown, both unknown if a rank is).
Status InferMatMulShape(KernelContext& ctx, const Tensor* a, const Tensor* b, int64_t* m,
                        int64_t* n) {
  Tensor* y = ctx.output(0);
  *m = *n = kUnknownDim;
  if (!a->rank_known || !b->rank_known) {
    const DType dt = y->dtype;
    SetOutputsUnknown(ctx);
    y->dtype = dt;
    return Status::Ok();
  }
  if (a->rank() == 0 || b->rank() == 0) return ctx.Invalid("operands must not be scalars");
  Shape as, bs;
  PromotedShapes(*a, *b, &as, &bs);
  const int64_t ka = as.back(), kb = bs[bs.size() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb)
    return ctx.Invalid("inner dims differ: a " + ShapeToString(a->shape) + ", b " +
                       ShapeToString(b->shape));
  Shape batch;
  std::string err;
  if (!BroadcastShapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2), &batch,
                       &err))
    return ctx.Invalid(err);
  *m = as[as.size() - 2];
  *n = bs.back();
  y->rank_known = true;
  y->shape = batch;
  if (a->rank() > 1) y->shape.push_back(*m);
  if (b->rank() > 1) y->shape.push_back(*n);
  return Status::Ok();
}

// The reference kernel's scratch (MatMulAccumulate): one row's int64 sums,
// then the batch position counters (one int64 per batch dimension). The ops
// request it beside their fast kernels' (n values and the counters, below
// those), so a fast kernel that turns a call down leaves it planned.
struct ReferenceProductLayout {
  size_t sums = 0, pos = 0, total = 0;
};
ReferenceProductLayout LayoutReferenceProduct(const Tensor& a, const Tensor& b) {
  ReferenceProductLayout r;
  if (a.rank() < 1 || b.rank() < 1) return r;
  kernels::ScratchLayout l;
  r.sums =
      l.Add(size_t(std::max<int64_t>(b.rank() == 1 ? 1 : b.shape.back(), 0)) * sizeof(int64_t));
  const int batch_rank = std::max(std::max(a.rank(), 2), std::max(b.rank(), 2)) - 2;
  r.pos = l.Add(size_t(batch_rank) * sizeof(int64_t));
  r.total = l.total();
  return r;
}
size_t ReferenceProductScratch(const Tensor& a, const Tensor& b) {
  return LayoutReferenceProduct(a, b).total;
}

// For every output element calls emit(flat index, a matrix index, row,
// b matrix index, column, acc) with acc = sum_k (a - azp(am, i)) * (b - bzp(bm, j)),
// exact in int64 (callers wrap where the op accumulates in int32). The sums
// of a row and the batch position live in `scratch` (LayoutReferenceProduct,
// planned, else allocated here).
template <class AZp, class BZp, class Emit>
void MatMulAccumulate(const Tensor& a, const Tensor& b, const kernels::ScratchSpan& scratch,
                      AZp azp, BZp bzp, Emit emit) {
  Shape as, bs;
  PromotedShapes(a, b, &as, &bs);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch;
  BroadcastShapes(a_batch, b_batch, &batch, nullptr);
  BroadcastIndexer idx({a_batch, b_batch}, batch);
  const int64_t batches = Product(batch);
  const ReferenceProductLayout layout = LayoutReferenceProduct(a, b);
  const kernels::ScratchRegion region(scratch, layout.total);
  int64_t* sum = region.at<int64_t>(layout.sums);
  int64_t* pos = region.at<int64_t>(layout.pos);
  std::fill(pos, pos + batch.size(), 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t am = 0, bm = 0;  // matrix indices of this batch entry in A and B
    for (size_t d = 0; d < batch.size(); ++d) {
      am += pos[d] * idx.strides(0)[d];
      bm += pos[d] * idx.strides(1)[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      std::fill(sum, sum + n, 0);
      const int32_t az = azp(am, i);
      for (int64_t p = 0; p < k; ++p) {
        const int64_t av = LoadQ(a.data, a.dtype, (am * m + i) * k + p) - az;
        for (int64_t j = 0; j < n; ++j)
          sum[j] += av * (LoadQ(b.data, b.dtype, (bm * k + p) * n + j) - bzp(bm, j));
      }
      for (int64_t j = 0; j < n; ++j) emit((bi * m + i) * n + j, am, i, bm, j, sum[j]);
    }
    for (int d = int(batch.size()) - 1; d >= 0; --d) {
      if (++pos[d] < batch[size_t(d)]) break;
      pos[d] = 0;
    }
  }
}

// The b scale of calls whose multipliers come elsewhere (int32 and float outputs).
constexpr float kUnitScale = 1.f;

// KernelContext::scratch as the kernels take it.
kernels::ScratchSpan ScratchOf(const KernelContext& ctx) {
  return {ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
}

// How QLinearMatMul runs through kernels::MatMulA16A16: 2-D b, or b with
// a's batch dims (no broadcasting). Its scratch (the int64 sums, the n
// multipliers, then the kernel's planes) is laid out alike for the request
// (shapes and the zero point's size only) and the run.
struct A16A16Plan {
  int64_t k = 0, n = 0, batches = 0, rows = 0;
  kernels::ScratchLayout layout;
  size_t acc = 0, mult = 0, kernel = 0;
};

// False when not covered (the caller runs the reference); true with
// batches or n 0 for an empty output.
bool PlanQMatMulA16A16(const KernelContext& ctx, const Tensor& a, const Tensor& b, size_t bzp_count,
                       A16A16Plan* p) {
  if (a.rank() < 2 || b.rank() < 2 || !ctx.kernel_config().a16a16) return false;
  const int64_t k = b.shape[size_t(b.rank() - 2)], n = b.shape.back();
  // K = 0 (rows of A not countable from its size) is left to the reference.
  if (k <= 0 || a.shape.back() != k || (bzp_count != 1 && int64_t(bzp_count) != n)) return false;
  if (b.rank() > 2) {
    if (a.rank() != b.rank()) return false;
    for (int d = 0; d + 2 < a.rank(); ++d)
      if (a.shape[size_t(d)] != b.shape[size_t(d)]) return false;
  }
  p->k = k;
  p->n = n;
  p->batches = b.rank() > 2 ? b.numel() / std::max<int64_t>(k * n, 1) : 1;
  if (p->batches == 0 || n == 0) return true;  // an empty output
  p->rows = a.numel() / k / p->batches;
  p->acc = p->layout.Add(size_t(p->rows * n) * sizeof(int64_t));
  p->mult = p->layout.Add(size_t(n) * sizeof(double));
  p->kernel = p->layout.Add(kernels::MatMulA16A16Scratch(p->rows, k, n));
  return true;
}

bool QMatMulA16A16(KernelContext& ctx, const Tensor& a, const Tensor& b, int32_t azp,
                   const std::vector<int32_t>& bzp, float a_scale, const std::vector<float>& bs,
                   float y_scale, int32_t yzp, QRange range, const Tensor* bias) {
  A16A16Plan p;
  if (!PlanQMatMulA16A16(ctx, a, b, bzp.size(), &p)) return false;
  if (p.batches == 0 || p.n == 0) return true;
  const int64_t k = p.k, n = p.n, rows = p.rows;
  Tensor* y = ctx.output(0);
  const kernels::ScratchRegion region(ScratchOf(ctx), p.layout.total());
  int64_t* acc = region.at<int64_t>(p.acc);
  double* mult = region.at<double>(p.mult);
  for (int64_t j = 0; j < n; ++j)
    mult[j] = WideMultiplier(a_scale, bs[bs.size() == 1 ? 0 : size_t(j)], y_scale);
  const size_t a_bytes = dtype_storage_bytes(a.dtype, 1), b_bytes = dtype_storage_bytes(b.dtype, 1);
  for (int64_t bi = 0; bi < p.batches; ++bi) {
    if (!kernels::MatMulA16A16(ctx.kernel_config(), a.ptr<uint8_t>() + bi * rows * k * a_bytes,
                               a.dtype, azp, rows, k, b.ptr<uint8_t>() + bi * k * n * b_bytes,
                               b.dtype, bzp, n, acc, region.at<uint8_t>(p.kernel), ctx.pool))
      return false;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t sum = acc[i * n + j] + (bias ? bias->ptr<int32_t>()[j] : 0);
        StoreQ(y->data, y->dtype, (bi * rows + i) * n + j,
               RequantizeWide(sum, mult[j], yzp, range));
      }
  }
  return true;
}

Status CheckOperands(const KernelContext& ctx, const Tensor* a, const Tensor* b, bool a16 = false) {
  if (!a || !b) return ctx.Invalid("inputs a and b are required");
  if (!Is8Bit(a->dtype) && !(a16 && Is16Bit(a->dtype)))
    return ctx.Unsupported(std::string("a dtype ") + dtype_name(a->dtype));
  if (!Is8Bit(b->dtype) && !(a16 && Is16Bit(b->dtype)))
    return ctx.Unsupported(std::string("b dtype ") + dtype_name(b->dtype));
  return Status::Ok();
}

// The packed GEMM's scratch for a times b (shapes only): a prepared B's
// state (ctx.state), or an activation B packed batch by batch.
size_t ProductScratch(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  kernels::QMatMulCall c;
  c.a = &a;
  c.y = ctx.output(0);
  c.pool = ctx.pool;
  return ctx.state ? kernels::QMatMulS8Scratch(ctx.state, c)
                   : kernels::QMatMulS8UnpreparedScratch(ctx.kernel_config(), b, c);
}

// ---- QLinearMatMul ----------------------------------------------------------

Status InferQLinearMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  const Tensor* y_zp = ctx.input(7);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckOperands(ctx, a, b, /*a16=*/true));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(1), "a_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(4), "b_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(6), "y_scale"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(2), "a_zero_point", a->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(5), "b_zero_point", b->dtype));
  // Without y_zero_point the output has a's dtype (ONNX reference behaviour).
  const DType out = y_zp ? y_zp->dtype : a->dtype;
  if (!Is8Bit(out) && !Is16Bit(out))
    return ctx.Unsupported(std::string("y dtype ") + dtype_name(out));
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, out, &range));
  y->dtype = out;
  int64_t m, n;
  QF_RETURN_IF_ERROR(InferMatMulShape(ctx, a, b, &m, &n));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(1), "a_scale", m, "row of a"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(2), "a_zero_point", m, "row of a"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(4), "b_scale", n, "column of b"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(5), "b_zero_point", n, "column of b"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(6), "y_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, y_zp, "y_zero_point", 0, ""));
  if (bias) {
    if (bias->dtype != DType::kInt32)
      return ctx.Invalid(std::string("bias must be int32, got ") + dtype_name(bias->dtype));
    if (bias->rank_known &&
        (bias->rank() != 1 || (n >= 0 && bias->shape[0] >= 0 && bias->shape[0] != n)))
      return ctx.Invalid("bias shape " + ShapeToString(bias->shape) + ", expected [" +
                         std::to_string(n) + "]");
  }
  return Status::Ok();
}

// Packs a constant 1-D/2-D b for the SIMD kernels (kernels/qlinear_s8.h).
Status PrepareQLinearMatMul(KernelContext& ctx, std::shared_ptr<void>* state) {
  const Tensor* a = ctx.input(0);
  const Tensor* y = ctx.output(0);
  if ((a && Is16Bit(a->dtype)) || (y && Is16Bit(y->dtype))) {
    // a16w8 with a constant 8-bit B: the a16 kernel as a 1x1 convolution.
    if (a && Is16Bit(a->dtype) && Is8Bit(ctx.input(3)->dtype))
      *state = kernels::PrepareQMatMulA16(ctx.kernel_config(), *ctx.input(3),
                                          ReadZeroPoints(ctx.input(5)));
    return Status::Ok();
  }
  *state = kernels::PrepareQMatMulS8(ctx.kernel_config(), *ctx.input(3));
  return Status::Ok();
}

// QLinearMatMul's rows of A as the pixels of a 1x1 channels-last
// convolution (the a16w8 kernel's call, without the quantization values).
kernels::QConvCall A16RowsCall(const KernelContext& ctx) {
  const Tensor* b = ctx.input(3);
  Tensor* y = ctx.output(0);
  kernels::QConvCall c;
  c.x = ctx.input(0);
  c.y = y;
  c.iw = c.ow = b->shape[1] ? y->numel() / b->shape[1] : 0;
  c.pool = ctx.pool;
  c.scratch = ScratchOf(ctx);
  return c;
}

// The a16w8 kernel's scratch (its prepared state) or the 8-bit packed GEMM's.
Status QLinearMatMulScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  const Tensor* y = ctx.output(0);
  if (Is16Bit(a->dtype) || Is16Bit(b->dtype) || Is16Bit(y->dtype)) {
    // Per-tensor a parameters, as RunQLinearMatMul's fast paths take them.
    const bool per_tensor =
        ctx.input(1)->numel() == 1 && (!ctx.input(2) || ctx.input(2)->numel() == 1);
    if (per_tensor && ctx.state && b->rank() == 2)
      needs->run = kernels::QConvA16NhwcScratch(ctx.state, A16RowsCall(ctx));
    // What the a16w8 kernel does not cover (an activation or 16-bit B, an
    // 8-bit A) runs a16 x a16.
    A16A16Plan p;
    const Tensor* bzp = ctx.input(5);
    if (per_tensor && needs->run == 0 &&
        PlanQMatMulA16A16(ctx, *a, *b, bzp ? size_t(bzp->numel()) : 1, &p))
      needs->run = p.layout.total();
  } else if (Is8Bit(b->dtype)) {
    needs->run = ProductScratch(ctx, *a, *b);
  }
  needs->run = std::max(needs->run, ReferenceProductScratch(*a, *b));
  return Status::Ok();
}

Status RunQLinearMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(3);
  const Tensor* bias = ctx.input(8);
  Tensor* y = ctx.output(0);
  std::vector<float> as, bs, ys;
  if (!ReadScales(ctx.input(1), &as) || !ReadScales(ctx.input(4), &bs) ||
      !ReadScales(ctx.input(6), &ys) || ys.size() != 1)
    return ctx.Invalid("cannot read the scales");
  const std::vector<int32_t> azp = ReadZeroPoints(ctx.input(2));
  const std::vector<int32_t> bzp = ReadZeroPoints(ctx.input(5));
  const int32_t yzp = ReadZeroPoints(ctx.input(7))[0];
  QRange range;
  QF_RETURN_IF_ERROR(ReadClampRange(ctx, y->dtype, &range));
  // The fast path covers per-tensor a parameters with prepared b, or an
  // activation b (packed here).
  const bool wide = Is16Bit(a->dtype) || Is16Bit(b->dtype) || Is16Bit(y->dtype);
  if (wide && ctx.state && as.size() == 1 && azp.size() == 1 && b->rank() == 2) {
    kernels::QConvCall c = A16RowsCall(ctx);
    c.x_zp = azp[0];
    c.x_scale = as[0];
    c.w_scale = bs;
    c.y_scale = ys[0];
    c.y_zp = yzp;
    c.lo = range.lo;
    c.hi = range.hi;
    c.bias = bias ? bias->ptr<int32_t>() : nullptr;
    if (kernels::RunQConvA16Nhwc(ctx.state, c)) return Status::Ok();
  }
  // 16-bit A times an activation B (a16 x a16), or what the a16w8 path left:
  // exact int64 sums on int16 pairs, then the reference's requantization.
  if (wide && as.size() == 1 && azp.size() == 1 &&
      QMatMulA16A16(ctx, *a, *b, azp[0], bzp, as[0], bs, ys[0], yzp, range, bias))
    return Status::Ok();
  if (wide) ctx.reference_path = true;
  if (as.size() == 1 && azp.size() == 1 && !wide && Is8Bit(b->dtype)) {
    kernels::QMatMulCall c;
    c.a = a;
    c.y = y;
    c.a_scale = as[0];
    c.y_scale = ys[0];
    c.a_zp = azp[0];
    c.b_zp = bzp;
    c.b_scale = bs;
    c.y_zp = yzp;
    c.lo = range.lo;
    c.hi = range.hi;
    c.bias = bias ? bias->ptr<int32_t>() : nullptr;
    c.pool = ctx.pool;
    c.scratch = ScratchOf(ctx);
    // Without prepared state b is an activation (attention): packed per call.
    if (ctx.state ? kernels::RunQMatMulS8(ctx.state, c)
                  : kernels::RunQMatMulS8Unprepared(ctx.kernel_config(), *b, c))
      return Status::Ok();
  }
  // The reference kernel: the fallback, and the oracle of the fast path.
  auto pick = [](const auto& v, int64_t i) { return v.size() == 1 ? v[0] : v[size_t(i)]; };
  MatMulAccumulate(
      *a, *b, ScratchOf(ctx), [&](int64_t, int64_t i) { return pick(azp, i); },
      [&](int64_t, int64_t j) { return pick(bzp, j); },
      [&](int64_t yi, int64_t, int64_t i, int64_t, int64_t j, int64_t acc) {
        const int64_t b = bias ? bias->ptr<int32_t>()[j] : 0;
        if (wide) {
          const double mult = WideMultiplier(pick(as, i), pick(bs, j), ys[0]);
          StoreQ(y->data, y->dtype, yi, RequantizeWide(acc + b, mult, yzp, range));
          return;
        }
        // The multiplier in float32, in exactly this order (docs/NUMERICS.md).
        const float mult = pick(as, i) * pick(bs, j) / ys[0];
        StoreQ(y->data, y->dtype, yi, Requantize(WrapInt32(acc + b), mult, yzp, range));
      });
  return Status::Ok();
}

// ---- MatMulInteger ----------------------------------------------------------

// MatMulInteger zero points: a scalar, per row of A (1-D [M], or A's shape
// with the last dim 1), per column of B (1-D [N], or B's shape with the
// second-to-last dim 1). `row_axis` is rank-1 for A and rank-2 for B.
Status CheckIntegerZeroPoint(const KernelContext& ctx, const Tensor* zp, const Tensor* x,
                             const char* what, bool is_a) {
  if (!zp) return Status::Ok();
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, zp, what, x->dtype));
  // A rank-0 x is refused by the shape inference that follows; it has no M or N axis.
  if (MaybeScalar(zp) || !x->rank_known || x->rank() == 0) return Status::Ok();
  Shape xs = x->shape;
  if (is_a && xs.size() == 1) xs.insert(xs.begin(), 1);
  if (!is_a && xs.size() == 1) xs.push_back(1);
  const size_t vec_axis = is_a ? xs.size() - 2 : xs.size() - 1;  // M or N
  const int64_t len = xs[vec_axis];
  if (zp->rank() == 1 && (zp->shape[0] < 0 || len < 0 || zp->shape[0] == len)) return Status::Ok();
  Shape want = xs;
  want[is_a ? xs.size() - 1 : xs.size() - 2] = 1;
  bool ok = zp->rank() == int(want.size()) && x->rank() >= 2;
  for (size_t i = 0; ok && i < want.size(); ++i)
    if (zp->shape[i] >= 0 && want[i] >= 0 && zp->shape[i] != want[i]) ok = false;
  if (!ok)
    return ctx.Invalid(std::string(what) + " has shape " + ShapeToString(zp->shape) +
                       ", expected a scalar, [" + std::to_string(len) + "] or " +
                       ShapeToString(want));
  return Status::Ok();
}

Status InferMatMulInteger(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckOperands(ctx, a, b));
  QF_RETURN_IF_ERROR(CheckIntegerZeroPoint(ctx, ctx.input(2), a, "a_zero_point", true));
  QF_RETURN_IF_ERROR(CheckIntegerZeroPoint(ctx, ctx.input(3), b, "b_zero_point", false));
  ctx.output(0)->dtype = DType::kInt32;
  int64_t m, n;
  return InferMatMulShape(ctx, a, b, &m, &n);
}

// A constant B (dynamic quantization's weights) is packed once.
Status PrepareMatMulInteger(KernelContext& ctx, std::shared_ptr<void>* state) {
  *state = kernels::PrepareQMatMulS8(ctx.kernel_config(), *ctx.input(1));
  return Status::Ok();
}

Status MatMulIntegerScratch(KernelContext& ctx, ScratchNeeds* needs) {
  needs->run = std::max(ProductScratch(ctx, *ctx.input(0), *ctx.input(1)),
                        ReferenceProductScratch(*ctx.input(0), *ctx.input(1)));
  return Status::Ok();
}

Status RunMatMulInteger(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  const std::vector<int32_t> azp = ReadZeroPoints(ctx.input(2));
  const std::vector<int32_t> bzp = ReadZeroPoints(ctx.input(3));
  // The packed GEMM covers a per-tensor a_zero_point and a scalar or
  // per-column (1-D) b_zero_point, with B constant or an activation.
  const bool b_zp_per_column = !ctx.input(3) || bzp.size() == 1 || ctx.input(3)->rank() == 1;
  if (azp.size() == 1 && b_zp_per_column && y->numel() > 0) {
    kernels::QMatMulCall c;
    c.a = a;
    c.y = y;
    c.a_zp = azp[0];
    c.b_zp = bzp;
    c.b_scale = {&kUnitScale, 1};
    c.int32_out = true;
    c.pool = ctx.pool;
    c.scratch = ScratchOf(ctx);
    if (ctx.state ? kernels::RunQMatMulS8(ctx.state, c)
                  : kernels::RunQMatMulS8Unprepared(ctx.kernel_config(), *b, c))
      return Status::Ok();
  }
  if (y->numel() > 0) ctx.reference_path = true;
  Shape as, bs;
  PromotedShapes(*a, *b, &as, &bs);
  const int64_t m = as[as.size() - 2], n = bs.back();
  // A 1-D zero point is per row/column; a larger one also varies per matrix.
  const bool a_batched = azp.size() > 1 && ctx.input(2)->rank() > 1;
  const bool b_batched = bzp.size() > 1 && ctx.input(3)->rank() > 1;
  MatMulAccumulate(
      *a, *b, ScratchOf(ctx),
      [&](int64_t am, int64_t i) {
        return azp.size() == 1 ? azp[0] : azp[size_t(a_batched ? am * m + i : i)];
      },
      [&](int64_t bm, int64_t j) {
        return bzp.size() == 1 ? bzp[0] : bzp[size_t(b_batched ? bm * n + j : j)];
      },
      [&](int64_t yi, int64_t, int64_t, int64_t, int64_t, int64_t acc) {
        y->ptr<int32_t>()[yi] = WrapInt32(acc);
      });
  return Status::Ok();
}

// ---- MatMulIntegerToFloat ---------------------------------------------------

// Inputs: A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias (ONNX
// Runtime's com.microsoft schema). y = float(acc) * (a_scale * b_scale[j]) +
// bias[j], each step rounded to float32 like the unfused Cast -> Mul -> Add.
enum { kMitfA = 0, kMitfB, kMitfAScale, kMitfBScale, kMitfAZp, kMitfBZp, kMitfBias };

// The optional float bias of the dynamically quantized MatMuls: [n] float32.
Status CheckFloatBias(KernelContext& ctx, const Tensor* bias, int64_t n) {
  if (!bias) return Status::Ok();
  if (bias->dtype != DType::kFloat32)
    return ctx.Invalid(std::string("bias must be float32, got ") + dtype_name(bias->dtype));
  if (bias->rank_known &&
      (bias->rank() != 1 || (n >= 0 && bias->shape[0] >= 0 && bias->shape[0] != n)))
    return ctx.Invalid("bias shape " + ShapeToString(bias->shape) + ", expected [" +
                       std::to_string(n) + "]");
  return Status::Ok();
}

Status InferMatMulIntegerToFloat(KernelContext& ctx) {
  const Tensor* a = ctx.input(kMitfA);
  const Tensor* b = ctx.input(kMitfB);
  QF_RETURN_IF_ERROR(CheckOperands(ctx, a, b));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(kMitfAScale), "a_scale"));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(kMitfBScale), "b_scale"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(kMitfAZp), "a_zero_point", a->dtype));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(kMitfBZp), "b_zero_point", b->dtype));
  ctx.output(0)->dtype = DType::kFloat32;
  int64_t m, n;
  QF_RETURN_IF_ERROR(InferMatMulShape(ctx, a, b, &m, &n));
  // A is quantized per tensor (dynamic quantization); B per tensor or per column.
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kMitfAScale), "a_scale", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kMitfAZp), "a_zero_point", 0, ""));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kMitfBScale), "b_scale", n, "column of b"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kMitfBZp), "b_zero_point", n, "column of b"));
  return CheckFloatBias(ctx, ctx.input(kMitfBias), n);
}

Status PrepareMatMulIntegerToFloat(KernelContext& ctx, std::shared_ptr<void>* state) {
  *state = kernels::PrepareQMatMulS8(ctx.kernel_config(), *ctx.input(kMitfB));
  return Status::Ok();
}

// y = float(acc) * (a_scale * b_scale[j]) + bias[j] for a per-tensor
// quantized A (any 8-bit dtype, zero point azp).
Status DequantizedProduct(KernelContext& ctx, const Tensor& a, float a_scale, int32_t azp,
                          const Tensor* b_scale, const Tensor* b_zp, const Tensor* bias_t,
                          kernels::ScratchSpan scratch) {
  const Tensor* b = ctx.input(kMitfB);
  Tensor* y = ctx.output(0);
  std::vector<float> bs;
  if (!ReadScales(b_scale, &bs) || bs.empty()) return ctx.Invalid("cannot read b_scale");
  const std::vector<int32_t> bzp = ReadZeroPoints(b_zp);
  const int64_t n = b->rank() == 1 ? 1 : b->shape.back();
  // The multiplier in float32 as the literal graph's Mul(a_scale, b_scale) computes it.
  std::vector<float> mult(size_t(std::max<int64_t>(n, 1)));
  for (int64_t j = 0; j < n; ++j) mult[size_t(j)] = a_scale * bs[bs.size() == 1 ? 0 : size_t(j)];
  const float* bias = bias_t ? bias_t->ptr<float>() : nullptr;
  if (y->numel() == 0) return Status::Ok();
  if (ctx.state) {
    kernels::QMatMulCall c;
    c.a = &a;
    c.y = y;
    c.a_zp = azp;
    c.b_zp = bzp;
    c.b_scale = {&kUnitScale, 1};
    c.dq_mult = mult.data();
    c.dq_bias = bias;
    c.pool = ctx.pool;
    c.scratch = scratch;
    if (kernels::RunQMatMulS8(ctx.state, c)) return Status::Ok();
  }
  ctx.reference_path = true;
  float* yd = y->ptr<float>();
  MatMulAccumulate(
      a, *b, scratch, [&](int64_t, int64_t) { return azp; },
      [&](int64_t, int64_t j) { return bzp.size() == 1 ? bzp[0] : bzp[size_t(j)]; },
      [&](int64_t yi, int64_t, int64_t, int64_t, int64_t j, int64_t acc) {
        // Rounded product, then the bias (quant_*.cc build with -ffp-contract=off).
        const float scaled = float(WrapInt32(acc)) * mult[size_t(j)];
        yd[yi] = bias ? scaled + bias[j] : scaled;
      });
  return Status::Ok();
}

Status RunMatMulIntegerToFloat(KernelContext& ctx) {
  std::vector<float> as;
  if (!ReadScales(ctx.input(kMitfAScale), &as) || as.size() != 1)
    return ctx.Invalid("cannot read a_scale");
  return DequantizedProduct(ctx, *ctx.input(kMitfA), as[0], ReadZeroPoints(ctx.input(kMitfAZp))[0],
                            ctx.input(kMitfBScale), ctx.input(kMitfBZp), ctx.input(kMitfBias),
                            ScratchOf(ctx));
}

Status MatMulIntegerToFloatScratch(KernelContext& ctx, ScratchNeeds* needs) {
  if (ctx.state) needs->run = ProductScratch(ctx, *ctx.input(kMitfA), *ctx.input(kMitfB));
  needs->run =
      std::max(needs->run, ReferenceProductScratch(*ctx.input(kMitfA), *ctx.input(kMitfB)));
  return Status::Ok();
}

// ---- DynamicQuantizeMatMul --------------------------------------------------

// com.microsoft DynamicQuantizeMatMul: A (float32) quantized to uint8 as
// DynamicQuantizeLinear does, then MatMulIntegerToFloat. Inputs: A, B,
// b_scale, b_zero_point, bias. The converter also fuses quantize_dynamic's
// DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul [-> Add] into it.
enum { kDqmA = 0, kDqmB, kDqmBScale, kDqmBZp, kDqmBias };

Status InferDynamicQuantizeMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(kDqmA);
  const Tensor* b = ctx.input(kDqmB);
  if (!a || !b) return ctx.Invalid("inputs A and B are required");
  if (a->dtype != DType::kFloat32)
    return ctx.Unsupported(std::string("A dtype ") + dtype_name(a->dtype) + " (float32 only)");
  if (!Is8Bit(b->dtype)) return ctx.Unsupported(std::string("B dtype ") + dtype_name(b->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, ctx.input(kDqmBScale), "b_scale"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, ctx.input(kDqmBZp), "b_zero_point", b->dtype));
  ctx.output(0)->dtype = DType::kFloat32;
  int64_t m, n;
  QF_RETURN_IF_ERROR(InferMatMulShape(ctx, a, b, &m, &n));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kDqmBScale), "b_scale", n, "column of b"));
  QF_RETURN_IF_ERROR(CheckParamShape(ctx, ctx.input(kDqmBZp), "b_zero_point", n, "column of b"));
  return CheckFloatBias(ctx, ctx.input(kDqmBias), n);
}

// The quantized A, then the packed GEMM's scratch (shapes only): laid out
// alike for the request and the run.
struct DqmLayout {
  kernels::ScratchLayout layout;
  size_t q = 0, gemm = 0, gemm_bytes = 0;
};

DqmLayout PlanDynamicQuantizeMatMul(const KernelContext& ctx) {
  const Tensor* a = ctx.input(kDqmA);
  DqmLayout l;
  l.q = l.layout.Add(size_t(std::max<int64_t>(a->numel(), 1)));
  l.gemm_bytes = std::max(ctx.state ? ProductScratch(ctx, *a, *ctx.input(kDqmB)) : 0,
                          ReferenceProductScratch(*a, *ctx.input(kDqmB)));
  l.gemm = l.layout.Add(l.gemm_bytes);
  return l;
}

Status DynamicQuantizeMatMulScratch(KernelContext& ctx, ScratchNeeds* needs) {
  needs->run = PlanDynamicQuantizeMatMul(ctx).layout.total();
  return Status::Ok();
}

Status RunDynamicQuantizeMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(kDqmA);
  const int64_t count = a->numel();
  float scale;
  int32_t zp;
  DynamicQuantParams(a->ptr<float>(), count, &scale, &zp);
  // The quantized A lives only during the call.
  const DqmLayout l = PlanDynamicQuantizeMatMul(ctx);
  const kernels::ScratchRegion region(ScratchOf(ctx), l.layout.total());
  uint8_t* q = region.at<uint8_t>(l.q);
  if (!kernels::QuantizeF32ToS8(ctx.kernel_config(), a->ptr<float>(), q,
                                /*is_signed=*/false, 0, 255, 1, 1, count, &scale, &zp,
                                /*per_axis=*/false, ctx.pool))
    for (int64_t i = 0; i < count; ++i)
      q[i] = uint8_t(RoundAddSaturate(a->ptr<float>()[i] / scale, zp, 0, 255));
  Tensor aq = *a;
  aq.dtype = DType::kUInt8;
  aq.data = q;
  return DequantizedProduct(ctx, aq, scale, zp, ctx.input(kDqmBScale), ctx.input(kDqmBZp),
                            ctx.input(kDqmBias),
                            {region.at<uint8_t>(l.gemm), l.gemm_bytes, ctx.scratch_planned});
}

}  // namespace

const OpDef& OpDef_MatMulIntegerToFloat() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("MatMulIntegerToFloat", InferMatMulIntegerToFloat, RunMatMulIntegerToFloat,
                         /*min_inputs=*/4, /*max_inputs=*/7);
    d.prepare = PrepareMatMulIntegerToFloat;
    d.scratch = MatMulIntegerToFloatScratch;
    d.const_inputs = 1u << kMitfB;
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = kMitfB;
    d.weight_scale_input = kMitfBScale;
    d.bias_input = kMitfBias;
    return d;
  }();
  return def;
}

const OpDef& OpDef_DynamicQuantizeMatMul() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("DynamicQuantizeMatMul", InferDynamicQuantizeMatMul,
                         RunDynamicQuantizeMatMul, /*min_inputs=*/3, /*max_inputs=*/5);
    d.prepare = PrepareMatMulIntegerToFloat;  // B is input 1 in both
    d.scratch = DynamicQuantizeMatMulScratch;
    d.const_inputs = 1u << kDqmB;
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = kDqmB;
    d.weight_scale_input = kDqmBScale;
    d.bias_input = kDqmBias;
    return d;
  }();
  return def;
}

const OpDef& OpDef_QLinearMatMul() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("QLinearMatMul", InferQLinearMatMul, RunQLinearMatMul,
                         /*min_inputs=*/8, /*max_inputs=*/9);
    d.prepare = PrepareQLinearMatMul;
    d.scratch = QLinearMatMulScratch;
    d.const_inputs = 1u << 3;  // b
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = 3;
    d.weight_scale_input = 4;
    d.bias_input = 8;  // qfold's fused bias
    return d;
  }();
  return def;
}

const OpDef& OpDef_MatMulInteger() {
  static const OpDef def = [] {
    OpDef d = QuantOpDef("MatMulInteger", InferMatMulInteger, RunMatMulInteger,
                         /*min_inputs=*/2, /*max_inputs=*/4);
    d.prepare = PrepareMatMulInteger;
    d.scratch = MatMulIntegerScratch;
    d.const_inputs = 1u << 1;  // b
    d.traits = kTraitMatrixProduct | kTraitIntegerKernel;
    d.weight_input = 1;  // no scale: it outputs the int32 sums
    return d;
  }();
  return def;
}

}  // namespace qfold
