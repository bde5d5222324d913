// MatMul with NumPy semantics: 1-D operands are promoted to matrices (and the
// added dim removed again), leading batch dims broadcast. Optional fused
// activation (float32 only). Float32 runs on the packed SIMD GEMM
// (kernels/gemm_f32.h) when the ISA level has one: a constant B is packed
// once by prepare, otherwise per run. The reference kernel stays the
// fallback and the oracle (QFOLD_ISA=reference).
// A third input (qfold's own, from the converter's FuseMatMulBias: the Add of
// a per-column bias folded into the MatMul) holds N floats added to every row
// of Y before the activation, in the GEMM's epilogue (in the reference after
// the product is rounded, as the separate Add did).
#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/aligned_vector.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_f32.h"
#include "kernels/igemm_fp16.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
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
  if (const Tensor* bias = ctx.input(2)) {
    if (a->dtype != DType::kFloat32 || bias->dtype != DType::kFloat32)
      return ctx.Invalid("the fused bias needs float32 A, B and bias");
    if (b->rank() < 2 || !bias->rank_known || bias->rank() != 1 ||
        (bias->shape[0] >= 0 && bs.back() >= 0 && bias->shape[0] != bs.back()))
      return ctx.Invalid("the fused bias " + ShapeToString(bias->shape) +
                         " must be 1-D with one value per column of B " + ShapeToString(b->shape));
  }
  return Status::Ok();
}

// The reference kernel's scratch, where the session runs it (OpDef::scratch,
// MatMulScratch): one row of accumulators (at most 8 bytes each), then the
// batch position counters (one int64 per batch dimension), so that the run
// allocates nothing.
struct ReferenceMatMulLayout {
  size_t acc = 0, pos = 0, total = 0;
};
ReferenceMatMulLayout LayoutReferenceMatMul(const Tensor& a, const Tensor& b) {
  ReferenceMatMulLayout r;
  kernels::ScratchLayout l;
  const int64_t n = b.rank() == 1 ? 1 : b.shape.back();
  r.acc = l.Add(size_t(std::max<int64_t>(n, 0)) * sizeof(uint64_t));
  const int batch_rank = std::max(std::max(a.rank(), 2), std::max(b.rank(), 2)) - 2;
  r.pos = l.Add(size_t(batch_rank) * sizeof(int64_t));
  r.total = l.total();
  return r;
}

template <class T>
void MatMulKernel(const Tensor& a, const Tensor& b, Tensor* y,
                  const kernels::ScratchSpan& scratch) {
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
  static_assert(sizeof(Acc) <= sizeof(uint64_t), "LayoutReferenceMatMul's bound");
  const ReferenceMatMulLayout layout = LayoutReferenceMatMul(a, b);
  const kernels::ScratchRegion region(scratch, layout.total);
  Acc* acc = region.at<Acc>(layout.acc);
  const T* ad = a.ptr<T>();
  const T* bd = b.ptr<T>();
  T* yd = y->ptr<T>();
  int64_t* pos = region.at<int64_t>(layout.pos);
  std::fill(pos, pos + batch.size(), 0);
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
      std::fill(acc, acc + n, Acc(0));
      for (int64_t p = 0; p < k; ++p) {
        const Acc av = Acc(am[i * k + p]);
        const T* brow = bm + p * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * Acc(brow[j]);
      }
      for (int64_t j = 0; j < n; ++j) ym[i * n + j] = T(acc[j]);
    }
    for (int d = int(batch.size()) - 1; d >= 0; --d) {
      if (++pos[d] < batch[d]) break;
      pos[d] = 0;
    }
  }
}

// B's matrices packed for the GEMM's right operand.
// In bf16 mode (KernelConfig::gemm_bf16) a 2-D B is packed as bf16 instead,
// in fp16 mode (KernelConfig::gemm_fp16) as half.
struct MatMulF32State {
  const kernels::GemmF32Kernels* k = nullptr;
  Shape b_shape;
  int64_t stride = 0;  // floats per packed matrix
  kernels::AlignedVector<float> packed;
  const kernels::GemmBf16Kernels* bf16 = nullptr;
  kernels::PackedBf16 packed_bf16;
  const kernels::Fp16Kernels* fp16 = nullptr;
  kernels::PackedFp16 packed_fp16;
};

// B's matrix dims: a 1-D B is a K x 1 matrix.
void MatrixDimsB(const Shape& s, int64_t* rows, int64_t* cols) {
  *rows = s.size() == 1 ? s[0] : s[s.size() - 2];
  *cols = s.size() == 1 ? 1 : s.back();
}

// B's matrices: how many, and floats per packed matrix.
void PackedDimsB(const kernels::GemmF32Kernels& k, const Shape& s, int64_t* mats, int64_t* stride) {
  int64_t kd, n;
  MatrixDimsB(s, &kd, &n);
  *mats = kd > 0 && n > 0 ? Product(s) / (kd * n) : 0;
  *stride = kernels::PackedF32Size(n, kd, k.nr);
}

void PackBInto(const kernels::GemmF32Kernels& k, const Tensor& b, float* dst) {
  int64_t kd, n, mats, stride;
  MatrixDimsB(b.shape, &kd, &n);
  PackedDimsB(k, b.shape, &mats, &stride);
  for (int64_t i = 0; i < mats; ++i)
    k.pack_right(b.ptr<float>() + i * kd * n, n, 1, kd, n, dst + i * stride);
}

void PackB(const kernels::GemmF32Kernels& k, const Tensor& b, MatMulF32State* st) {
  int64_t mats;
  st->k = &k;
  st->b_shape = b.shape;
  PackedDimsB(k, b.shape, &mats, &st->stride);
  st->packed.resize(size_t(st->stride * mats));
  PackBInto(k, b, st->packed.data());
}

Status PrepareMatMul(KernelContext& ctx, std::shared_ptr<void>* state) {
  const Tensor* b = ctx.input(1);
  const kernels::GemmF32Kernels* k = ctx.kernel_config().gemm_f32;
  if (!k || b->dtype != DType::kFloat32 || ctx.input(0)->dtype != DType::kFloat32 || b->rank() < 1)
    return Status::Ok();
  auto st = std::make_shared<MatMulF32State>();
  const kernels::GemmBf16Kernels* bk = ctx.kernel_config().gemm_bf16;
  const kernels::Fp16Kernels* hk = ctx.kernel_config().gemm_fp16;
  if (hk && b->rank() == 2) {
    st->fp16 = hk;
    st->b_shape = b->shape;
    kernels::PackFp16(b->ptr<float>(), b->shape[1], 1, b->shape[0], b->shape[1], &st->packed_fp16);
  } else if (bk && b->rank() == 2) {
    st->bf16 = bk;
    st->b_shape = b->shape;
    kernels::PackBf16(b->ptr<float>(), b->shape[1], 1, b->shape[0], b->shape[1], &st->packed_bf16);
  } else {
    PackB(*k, *b, st.get());
  }
  *state = st;
  return Status::Ok();
}

// How RunMatMulF32 runs these shapes, and its scratch (MatMulScratch sizes
// the request with it): A's matrices packed, and B's when no prepared
// packing fits them (B is an input, packed per run), and the GEMM's lists
// of operands (one per batch entry); in bf16 and fp16 modes A's rows
// rounded.
struct MatMulF32Plan {
  bool reduced = false;                        // bf16 or fp16 mode: RunMatMulReduced, m rows
  const kernels::GemmF32Kernels* k = nullptr;  // null (and !reduced): the reference kernel
  const MatMulF32State* prepared = nullptr;    // B packed at prepare for these shapes
  int64_t m = 0, kd = 0, n = 0, a_mats = 0, a_stride = 0, batches = 0;
  int64_t b_stride = 0;  // floats per packed matrix of B, prepared or in scratch
  bool empty = false;    // no output element: nothing to pack
  size_t a_at = 0, b_at = 0, lefts_at = 0, rights_at = 0, outs_at = 0, pos_at = 0, bytes = 0;
};

// bf16 and fp16 modes: B is one matrix, so A's rows of every batch are one row block.
void RunMatMulReduced(const KernelContext& ctx, const MatMulF32State& st, const MatMulF32Plan& plan,
                      const FusedActivation& act) {
  const Tensor* a = ctx.input(0);
  Tensor* y = ctx.output(0);
  const int64_t kd = plan.kd, n = plan.n, rows = plan.m;
  float* yd = y->ptr<float>();
  const kernels::ScratchSpan scratch{ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  if (st.fp16)
    kernels::GemmFp16(*st.fp16, a->ptr<float>(), kd, 1, rows, st.packed_fp16, yd, ctx.pool,
                      scratch);
  else
    kernels::GemmBf16(*st.bf16, a->ptr<float>(), kd, 1, rows, st.packed_bf16, yd, ctx.pool,
                      scratch);
  if (const Tensor* bias = ctx.input(2)) {
    const float* bd = bias->ptr<float>();
    for (int64_t r = 0; n > 0 && r < y->numel() / n; ++r)
      for (int64_t j = 0; j < n; ++j) yd[r * n + j] += bd[j];
  }
  act.Apply(yd, y->numel());
}

MatMulF32Plan PlanMatMulF32(const KernelContext& ctx) {
  MatMulF32Plan p;
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  if (a->dtype != DType::kFloat32 || b->rank() < 1) return p;
  const auto* prepared = static_cast<const MatMulF32State*>(ctx.state);
  if (prepared && (prepared->bf16 || prepared->fp16) && prepared->b_shape == b->shape) {
    // B is one matrix, so A's rows of every batch are one row block; the
    // scratch is A rounded to bf16 or half.
    p.reduced = true;
    p.kd = b->shape[0];
    p.n = b->shape[1];
    p.m = p.kd > 0 ? a->numel() / p.kd : ctx.output(0)->numel() / std::max<int64_t>(p.n, 1);
    p.bytes = prepared->fp16 ? kernels::GemmFp16Scratch(p.m, 1, prepared->packed_fp16)
                             : kernels::GemmBf16Scratch(p.m, prepared->packed_bf16);
    return p;
  }
  p.k = prepared && prepared->k ? prepared->k : ctx.kernel_config().gemm_f32;
  if (!p.k) return p;
  if (prepared && prepared->k && prepared->b_shape == b->shape) p.prepared = prepared;
  Shape as = a->shape, bs = b->shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  p.m = as[as.size() - 2];
  p.kd = as.back();
  p.n = bs.back();
  p.a_mats = Product(Shape(as.begin(), as.end() - 2));
  p.a_stride = kernels::PackedF32Size(p.m, p.kd, p.k->mr);
  p.empty = ctx.output(0)->numel() == 0;
  if (p.empty) return p;
  kernels::ScratchLayout l;
  p.a_at = l.Add(size_t(p.a_stride * p.a_mats) * sizeof(float));
  if (p.prepared) {
    p.b_stride = p.prepared->stride;
  } else {
    int64_t b_mats;
    PackedDimsB(*p.k, b->shape, &b_mats, &p.b_stride);
    p.b_at = l.Add(size_t(p.b_stride * b_mats) * sizeof(float));
  }
  Shape batch;
  BroadcastShapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2), &batch,
                  nullptr);
  p.batches = Product(batch);
  p.lefts_at = l.Add(size_t(p.batches) * sizeof(const float*));
  p.rights_at = l.Add(size_t(p.batches) * sizeof(const float*));
  p.outs_at = l.Add(size_t(p.batches) * sizeof(float*));
  p.pos_at = l.Add(batch.size() * sizeof(int64_t));  // the batch position counters
  p.bytes = l.total();
  return p;
}

// Float32 MatMul on the packed GEMM; false when no SIMD kernel applies.
bool RunMatMulF32(const KernelContext& ctx, const FusedActivation& act) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  const MatMulF32Plan plan = PlanMatMulF32(ctx);
  if (plan.reduced) {
    RunMatMulReduced(ctx, *static_cast<const MatMulF32State*>(ctx.state), plan, act);
    return true;
  }
  const kernels::GemmF32Kernels* k = plan.k;
  if (!k) return false;
  if (plan.empty) return true;
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      plan.bytes);
  const float* packed_b;
  if (plan.prepared) {
    packed_b = plan.prepared->packed.data();
  } else {
    float* dst = region.at<float>(plan.b_at);
    PackBInto(*k, *b, dst);
    packed_b = dst;
  }
  Shape as = a->shape, bs = b->shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = plan.m, kd = plan.kd, n = plan.n;
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch;
  BroadcastShapes(a_batch, b_batch, &batch, nullptr);
  BroadcastIndexer idx({a_batch, b_batch}, batch);
  const int64_t batches = plan.batches, a_mats = plan.a_mats;

  const int64_t a_stride = plan.a_stride;
  float* packed_a = region.at<float>(plan.a_at);
  for (int64_t i = 0; i < a_mats; ++i)
    k->pack_left(a->ptr<float>() + i * m * kd, kd, 1, m, kd, packed_a + i * a_stride);
  const float** lefts = region.at<const float*>(plan.lefts_at);
  const float** rights = region.at<const float*>(plan.rights_at);
  float** outs = region.at<float*>(plan.outs_at);
  int64_t* pos = region.at<int64_t>(plan.pos_at);
  std::fill(pos, pos + batch.size(), 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += pos[d] * idx.strides(0)[d];
      bo += pos[d] * idx.strides(1)[d];
    }
    lefts[bi] = packed_a + ao * a_stride;
    rights[bi] = packed_b + bo * plan.b_stride;
    outs[bi] = y->ptr<float>() + bi * m * n;
    for (int d = int(batch.size()) - 1; d >= 0; --d) {
      if (++pos[d] < batch[d]) break;
      pos[d] = 0;
    }
  }
  kernels::GemmF32Args proto;
  if (const Tensor* bias = ctx.input(2)) {
    proto.bias = bias->ptr<float>();
    proto.bias_per_row = false;
  }
  proto.rows = m;
  proto.cols = n;
  proto.k = kd;
  proto.ldc = n;
  const FusedActivation* post;
  proto.act = kernels::EpilogueFor(act, &proto.lo, &proto.hi, &post);
  kernels::GemmF32Batched(*k, proto, lefts, rights, outs, batches, ctx.pool);
  if (post) post->Apply(y->ptr<float>(), y->numel());
  return true;
}

// OpDef::scratch: float32 on the packed GEMM, its packed operands, or in
// bf16 and fp16 modes A's reduced rows (PlanMatMulF32, for the shapes of
// this plan); elsewhere the reference kernel's accumulators.
Status MatMulScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const Tensor* b = ctx.input(1);
  const MatMulF32Plan plan = PlanMatMulF32(ctx);
  if (plan.k || plan.reduced)
    needs->run = plan.bytes;
  else if (!plan.reduced && b->rank() >= 1)
    needs->run = LayoutReferenceMatMul(*ctx.input(0), *b).total;
  return Status::Ok();
}

Status RunMatMul(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  Tensor* y = ctx.output(0);
  if (a->dtype == DType::kFloat32) {
    Status st;
    FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
    act.vmath = ctx.kernel_config().vmath;
    if (RunMatMulF32(ctx, act)) return Status::Ok();
  }
  QF_DISPATCH_NUMERIC(
      a->dtype, return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype)),
      MatMulKernel<T>(*a, *b, y, {ctx.scratch, ctx.scratch_size, ctx.scratch_planned}));
  if (const Tensor* bias = ctx.input(2)) {  // float32 (inference checked)
    const int64_t n = bias->numel();
    float* yd = y->ptr<float>();
    for (int64_t i = 0; n > 0 && i < y->numel(); ++i) yd[i] += bias->ptr<float>()[i % n];
  }
  if (y->dtype == DType::kFloat32) {
    Status st;
    FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
    act.vmath = ctx.kernel_config().vmath;
    act.Apply(y->ptr<float>(), y->numel());
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_MatMul() {
  static const OpDef def = [] {
    OpDef d{"MatMul",
            InferMatMul,
            RunMatMul,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/2,
            /*max_inputs=*/3};  // 3: the fused bias
    d.prepare = PrepareMatMul;
    d.scratch = MatMulScratch;
    d.const_inputs = 1u << 1;  // B
    d.traits = kTraitMatrixProduct | kTraitHalfWeights;
    d.same_dtype_inputs = kAllInputs;
    d.weight_input = 1;
    d.bias_input = 2;
    return d;
  }();
  return def;
}

}  // namespace qfold
