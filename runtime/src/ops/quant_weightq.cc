// QfMatMulWeightQ: weight-only quantized MatMul (qfold-internal, in the
// spirit of ONNX Runtime's MatMulNBits). Inputs:
//   A      float32 [..., K]
//   B      int4/uint4/int8/uint8 [K, N] (4-bit packed two per byte, row-major)
//   scales float32 (or float16/bfloat16): one value, [N] per column, or
//          [ceil(K / block_size), N] when block_size > 0 (blocks run along K)
//   zero_points (optional): B's dtype, the scales' shape
// Attributes: axis (only 0: blocks along K), block_size (default 0),
// accuracy_level (default 0; MatMulNBits' attribute): 4 lets 4-bit weights
// in blocks of a multiple of 8 multiply int8 activations, A quantized per
// row and block (kernels/gemm_wq_s8.h; its portable variant on CPUs without
// SIMD, so the results are the same everywhere); other values and weights
// compute exactly as below.
// Y = A @ dequant(B), float32 [..., N], with dequant(b) = float(b - zp) * scale
// exactly as DequantizeLinear. The reference kernel dequantizes B one block
// of rows at a time, never as a whole matrix, and accumulates the float
// products in K order; with a constant B and SIMD, prepare packs q - zp
// once for the weight-only GEMM (kernels/gemm_wq_f32.h: the same order, a
// fused multiply-add per product), which keeps B at 1 or 2 bytes a weight.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/gemm_wq_f32.h"
#include "kernels/gemm_wq_s8.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "ops/quant_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// Rows of B dequantized at once when the scales are not blocked.
constexpr int64_t kChunkRows = 32;

Status CheckWeightQ(const KernelContext& ctx, int64_t* block) {
  const int64_t axis = ctx.attr().GetInt("axis", 0);
  if (axis != 0 && axis != -2)
    return ctx.Unsupported("axis " + std::to_string(axis) + " (only 0: blocks along K)");
  *block = ctx.attr().GetInt("block_size", 0);
  if (*block < 0) return ctx.Invalid("block_size must be >= 0");
  const int64_t level = ctx.attr().GetInt("accuracy_level", 0);
  if (level < 0 || level > 4)
    return ctx.Invalid("accuracy_level " + std::to_string(level) + " (0 to 4)");
  return Status::Ok();
}

Status InferQfMatMulWeightQ(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* s = ctx.input(2);
  const Tensor* zp = ctx.input(3);
  Tensor* y = ctx.output(0);
  if (!a || !b || !s) return ctx.Invalid("inputs A, B and scales are required");
  if (a->dtype != DType::kFloat32)
    return ctx.Unsupported(std::string("A dtype ") + dtype_name(a->dtype) + " (only float32)");
  if (!IsQuantDType(b->dtype) || b->dtype == DType::kInt16 || b->dtype == DType::kUInt16)
    return ctx.Unsupported(std::string("B dtype ") + dtype_name(b->dtype));
  QF_RETURN_IF_ERROR(CheckScaleDType(ctx, s, "scales"));
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, zp, "zero_points", b->dtype));
  int64_t block;
  QF_RETURN_IF_ERROR(CheckWeightQ(ctx, &block));
  y->dtype = DType::kFloat32;
  if (b->rank_known && b->rank() != 2)
    return ctx.Invalid("B must be 2-D [K, N], got " + ShapeToString(b->shape));
  const int64_t k = b->rank_known ? b->shape[0] : kUnknownDim;
  const int64_t n = b->rank_known ? b->shape[1] : kUnknownDim;
  // Expected scale shape; zero points must match it.
  for (const Tensor* t : {s, zp}) {
    if (!t || !t->rank_known) continue;
    const char* what = t == s ? "scales" : "zero_points";
    if (block == 0) {
      QF_RETURN_IF_ERROR(CheckParamShape(ctx, t, what, n, "column of B"));
      continue;
    }
    const int64_t blocks = k < 0 ? kUnknownDim : (k + block - 1) / block;
    const bool ok = t->rank() == 2 && (blocks < 0 || t->shape[0] < 0 || t->shape[0] == blocks) &&
                    (n < 0 || t->shape[1] < 0 || t->shape[1] == n);
    if (!ok)
      return ctx.Invalid(std::string(what) + " shape " + ShapeToString(t->shape) +
                         " does not match B " + ShapeToString(b->shape) + " with block_size " +
                         std::to_string(block));
  }
  if (!a->rank_known) {
    SetOutputsUnknown(ctx);
    y->dtype = DType::kFloat32;
    return Status::Ok();
  }
  if (a->rank() < 1) return ctx.Invalid("A must have rank >= 1");
  if (k >= 0 && a->shape.back() >= 0 && a->shape.back() != k)
    return ctx.Invalid("A " + ShapeToString(a->shape) + " does not match B " +
                       ShapeToString(b->shape));
  y->rank_known = true;
  y->shape = a->shape;
  y->shape.back() = n;
  return Status::Ok();
}

struct WeightQState {
  const kernels::GemmWqF32Kernels* kernels = nullptr;
  kernels::WqPackedB b;
  // accuracy_level 4 on 4-bit weights: int8 activations instead.
  const kernels::GemmWqS8Kernels* s8 = nullptr;
  kernels::WqS8PackedB b8;
};

// B, its scales and zero points constant (const_inputs: B and the scales;
// the zero points checked here, being optional).
Status PrepareQfMatMulWeightQ(KernelContext& ctx, std::shared_ptr<void>* state) {
  const kernels::GemmWqF32Kernels* k = ctx.kernel_config().gemm_wq_f32;
  const kernels::GemmWqS8Kernels* k8 = ctx.kernel_config().gemm_wq_s8;
  const Tensor* b = ctx.input(1);
  const Tensor* zp = ctx.input(3);
  int64_t block;
  if (!CheckWeightQ(ctx, &block).ok() || !b->data || b->rank() != 2 || (zp && !zp->data))
    return Status::Ok();
  const bool nibbles = b->dtype == DType::kInt4 || b->dtype == DType::kUInt4;
  const bool int8_a = k8 && nibbles && block > 0 && ctx.attr().GetInt("accuracy_level", 0) == 4;
  if (!k && !int8_a) return Status::Ok();
  const int64_t kd = b->shape[0], n = b->shape[1];
  std::vector<float> s;
  if (kd <= 0 || n <= 0 || !ReadScales(ctx.input(2), &s)) return Status::Ok();
  const std::vector<int32_t> z = ReadZeroPoints(zp);
  // The scales (and zero points) as [block row][n]: one row per column
  // when not blocked, one value for all.
  const int64_t step = block > 0 ? block : kd, rows = (kd + step - 1) / step;
  auto param = [&](size_t count, int64_t row, int64_t j) {
    if (count == 1) return size_t(0);
    return size_t(block > 0 ? row * n + j : j);
  };
  std::vector<float> scales(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) scales[size_t(r * n + j)] = s[param(s.size(), r, j)];
  auto st = std::make_shared<WeightQState>();
  if (int8_a) {
    // Codes and zero points 0..15 (int4 ones moved by 8: the same differences).
    const int32_t shift = b->dtype == DType::kInt4 ? 8 : 0;
    // One byte a code: a 4096 x 11008 layer's copy is 45 MB, not 180.
    std::vector<uint8_t> q(size_t(kd * n));
    std::vector<int32_t> zq(size_t(rows * n));
    for (int64_t i = 0; i < kd * n; ++i)
      q[size_t(i)] = uint8_t(LoadQ(b->data, b->dtype, i) + shift);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) zq[size_t(r * n + j)] = z[param(z.size(), r, j)] + shift;
    if (kernels::PackWqS8B(q.data(), zq.data(), scales.data(), kd, n, block, &st->b8)) {
      st->s8 = k8;
      *state = st;
      return Status::Ok();
    }
  }
  if (!k) return Status::Ok();
  // q - zp of 4- and 8-bit weights: within [-255, 255] (16-bit B is refused by infer).
  std::vector<int16_t> d(size_t(kd * n));
  for (int64_t kk = 0; kk < kd; ++kk)
    for (int64_t j = 0; j < n; ++j)
      d[size_t(kk * n + j)] =
          int16_t(LoadQ(b->data, b->dtype, kk * n + j) - z[param(z.size(), kk / step, j)]);
  st->kernels = k;
  if (!kernels::PackWqB(d.data(), scales.data(), kd, n, step, &st->b)) return Status::Ok();
  *state = st;
  return Status::Ok();
}

Status WeightQScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const auto* st = static_cast<const WeightQState*>(ctx.state);
  const Tensor* a = ctx.input(0);
  if (!st || !st->s8 || !a->shape_known() || a->rank() < 1) return Status::Ok();
  needs->run =
      kernels::GemmWqS8ScratchBytes(st->b8, Product(Shape(a->shape.begin(), a->shape.end() - 1)));
  return Status::Ok();
}

Status RunQfMatMulWeightQ(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  int64_t block;
  QF_RETURN_IF_ERROR(CheckWeightQ(ctx, &block));
  if (const auto* st = static_cast<const WeightQState*>(ctx.state)) {
    const int64_t rows = Product(Shape(a->shape.begin(), a->shape.end() - 1));
    if (st->s8) {
      const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                          kernels::GemmWqS8ScratchBytes(st->b8, rows));
      kernels::GemmWqS8(*st->s8, st->b8, a->ptr<float>(), rows, y->ptr<float>(), region.data(),
                        ctx.pool);
      return Status::Ok();
    }
    kernels::GemmWqF32(*st->kernels, st->b, a->ptr<float>(), rows, y->ptr<float>(), ctx.pool);
    return Status::Ok();
  }
  std::vector<float> s;
  if (!ReadScales(ctx.input(2), &s)) return ctx.Invalid("cannot read scales");
  const std::vector<int32_t> z = ReadZeroPoints(ctx.input(3));
  const int64_t k = b->shape[0], n = b->shape[1];
  const int64_t rows = Product(Shape(a->shape.begin(), a->shape.end() - 1));
  const float* ad = a->ptr<float>();
  float* yd = y->ptr<float>();
  std::fill(yd, yd + rows * n, 0.f);
  // Index of the scale/zero point of B[kk][j].
  // Index of the scale (or zero point) of B[kk][j] in a vector of `count` values.
  auto param = [&](size_t count, int64_t kk, int64_t j) {
    if (count == 1) return size_t(0);
    if (block == 0) return size_t(j);
    return size_t((kk / block) * n + j);
  };
  const int64_t step = block > 0 ? block : kChunkRows;
  std::vector<float> deq(size_t(std::min(step, std::max<int64_t>(k, 1)) * n));
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    const int64_t k1 = std::min(k, k0 + step);
    for (int64_t kk = k0; kk < k1; ++kk)
      for (int64_t j = 0; j < n; ++j) {
        const int32_t zv = z[param(z.size(), kk, j)];
        deq[size_t((kk - k0) * n + j)] =
            float(LoadQ(b->data, b->dtype, kk * n + j) - zv) * s[param(s.size(), kk, j)];
      }
    for (int64_t r = 0; r < rows; ++r) {
      float* yrow = yd + r * n;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const float av = ad[r * k + kk];
        const float* brow = deq.data() + (kk - k0) * n;
        for (int64_t j = 0; j < n; ++j) yrow[j] += av * brow[j];
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_QfMatMulWeightQ() {
  static const OpDef def = [] {
    OpDef d = WithTraits(QuantOpDef("QfMatMulWeightQ", InferQfMatMulWeightQ, RunQfMatMulWeightQ,
                                    /*min_inputs=*/3, /*max_inputs=*/4),
                         kTraitMatrixProduct | kTraitIntegerKernel);
    d.weight_input = 1;
    d.weight_scale_input = 2;
    d.prepare = PrepareQfMatMulWeightQ;
    d.const_inputs = (1u << 1) | (1u << 2);  // B, scales
    d.scratch = WeightQScratch;
    return d;
  }();
  return def;
}

}  // namespace qfold
