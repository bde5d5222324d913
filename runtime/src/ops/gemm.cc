// Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, with C
// unidirectionally broadcast to (M, N), plus the converter's fused activation.
// Float32 runs on the packed SIMD GEMM (kernels/gemm_f32.h) when the ISA
// level has one: a constant B is packed once by prepare, otherwise per run;
// alpha, beta * C and Relu/Clip go into its epilogue. The reference kernel
// stays the fallback and the oracle (QFOLD_ISA=reference).
#include <algorithm>
#include <memory>
#include <string>
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

namespace qfold {
namespace {

// Float types only: integer Gemm with float alpha/beta has no well-defined rounding.
bool GemmDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

Status InferGemm(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  if (!a || !b) return ctx.Invalid("inputs A and B are required");
  if (!GemmDType(a->dtype)) return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype));
  if (b->dtype != a->dtype || (c && c->dtype != a->dtype))
    return ctx.Invalid("A, B and C must have the same dtype");
  Status st;
  FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  if (act.active() && a->dtype != DType::kFloat32)
    return ctx.Unsupported("fused activation on a non-float32 Gemm");
  y->dtype = a->dtype;
  if ((a->rank_known && a->rank() != 2) || (b->rank_known && b->rank() != 2))
    return ctx.Invalid("A and B must be 2-D");
  const bool ta = ctx.attr().GetInt("transA", 0) != 0;
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  int64_t m = kUnknownDim, ka = kUnknownDim, kb = kUnknownDim, n = kUnknownDim;
  if (a->rank_known) {
    m = a->shape[ta ? 1 : 0];
    ka = a->shape[ta ? 0 : 1];
  }
  if (b->rank_known) {
    kb = b->shape[tb ? 1 : 0];
    n = b->shape[tb ? 0 : 1];
  }
  if (ka >= 0 && kb >= 0 && ka != kb)
    return ctx.Invalid("inner dims differ: A " + ShapeToString(a->shape) + ", B " +
                       ShapeToString(b->shape));
  if (c && c->rank_known) {
    if (c->rank() > 2) return ctx.Invalid("C must have rank <= 2");
    // Right-aligned against (M, N); each dim must be 1 or match.
    const int64_t out[2] = {m, n};
    for (int i = 0; i < c->rank(); ++i) {
      int64_t d = c->shape[i], o = out[2 - c->rank() + i];
      if (d >= 0 && d != 1 && o >= 0 && d != o)
        return ctx.Invalid("C " + ShapeToString(c->shape) + " does not broadcast to (" +
                           std::to_string(m) + "," + std::to_string(n) + ")");
    }
  }
  y->rank_known = true;
  y->shape = {m, n};
  return Status::Ok();
}

template <class T>
void GemmKernel(const T* a, const T* b, const T* c, const Shape& c_shape, T* y, int64_t m,
                int64_t k, int64_t n, bool ta, bool tb, float alpha, float beta,
                const kernels::ScratchSpan& scratch) {
  // C's strides over (M, N), zero on broadcast axes.
  int64_t cs_m = 0, cs_n = 0;
  if (c) {
    const int cr = int(c_shape.size());
    const int64_t cm = cr == 2 ? c_shape[0] : 1;
    const int64_t cn = cr >= 1 ? c_shape[cr - 1] : 1;
    cs_n = cn == 1 ? 0 : 1;
    cs_m = cm == 1 ? 0 : cn;
  }
  // Loop orders keep the innermost loop contiguous in B. One row of
  // accumulators in scratch (GemmScratch).
  const kernels::ScratchRegion region(scratch, size_t(n) * sizeof(T));
  T* acc = region.at<T>(0);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc, acc + n, T(0));
    for (int64_t j = 0; j < n && tb; ++j) {
      const T* brow = b + j * k;
      T sum = T(0);
      for (int64_t p = 0; p < k; ++p) sum += (ta ? a[p * m + i] : a[i * k + p]) * brow[p];
      acc[j] = sum;
    }
    for (int64_t p = 0; p < k && !tb; ++p) {
      const T av = ta ? a[p * m + i] : a[i * k + p];
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      T v = T(alpha) * acc[j];
      if (c) v += T(beta) * c[i * cs_m + j * cs_n];
      y[i * n + j] = v;
    }
  }
}

// op(B) packed as the GEMM's right operand.
// In bf16 mode (KernelConfig::gemm_bf16) op(B) is packed as bf16 instead,
// in fp16 mode (KernelConfig::gemm_fp16) as half.
struct GemmF32State {
  const kernels::GemmF32Kernels* k = nullptr;
  Shape b_shape;
  bool tb = false;
  kernels::AlignedVector<float> packed;
  const kernels::GemmBf16Kernels* bf16 = nullptr;
  kernels::PackedBf16 packed_bf16;
  const kernels::Fp16Kernels* fp16 = nullptr;
  kernels::PackedFp16 packed_fp16;
};

void PackGemmBInto(const kernels::GemmF32Kernels& k, const Tensor& b, bool tb, float* dst) {
  const int64_t kd = b.shape[tb ? 1 : 0], n = b.shape[tb ? 0 : 1];
  // op(B)(k, c) = B[k][c], or B[c][k] when transposed.
  k.pack_right(b.ptr<float>(), tb ? 1 : n, tb ? kd : 1, kd, n, dst);
}

void PackGemmB(const kernels::GemmF32Kernels& k, const Tensor& b, bool tb, GemmF32State* st) {
  const int64_t kd = b.shape[tb ? 1 : 0], n = b.shape[tb ? 0 : 1];
  st->k = &k;
  st->b_shape = b.shape;
  st->tb = tb;
  st->packed.resize(size_t(kernels::PackedF32Size(n, kd, k.nr)));
  PackGemmBInto(k, b, tb, st->packed.data());
}

Status PrepareGemm(KernelContext& ctx, std::shared_ptr<void>* state) {
  const Tensor* b = ctx.input(1);
  const kernels::GemmF32Kernels* k = ctx.kernel_config().gemm_f32;
  if (!k || b->dtype != DType::kFloat32 || b->rank() != 2) return Status::Ok();
  auto st = std::make_shared<GemmF32State>();
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  if (const kernels::Fp16Kernels* hk = ctx.kernel_config().gemm_fp16) {
    const int64_t kd = b->shape[tb ? 1 : 0], n = b->shape[tb ? 0 : 1];
    st->fp16 = hk;
    st->b_shape = b->shape;
    st->tb = tb;
    kernels::PackFp16(b->ptr<float>(), tb ? 1 : n, tb ? kd : 1, kd, n, &st->packed_fp16);
    *state = st;
    return Status::Ok();
  }
  if (const kernels::GemmBf16Kernels* bk = ctx.kernel_config().gemm_bf16) {
    const int64_t kd = b->shape[tb ? 1 : 0], n = b->shape[tb ? 0 : 1];
    st->bf16 = bk;
    st->b_shape = b->shape;
    st->tb = tb;
    kernels::PackBf16(b->ptr<float>(), tb ? 1 : n, tb ? kd : 1, kd, n, &st->packed_bf16);
    *state = st;
    return Status::Ok();
  }
  PackGemmB(*k, *b, tb, st.get());
  *state = st;
  return Status::Ok();
}

// C's broadcast over (M, N): its rows (cm) and columns (cn), 1 when broadcast.
void GemmCDims(const Tensor& c, int64_t* cm, int64_t* cn) {
  const int cr = c.rank();
  *cm = cr == 2 ? c.shape[0] : 1;
  *cn = cr >= 1 ? c.shape[size_t(cr - 1)] : 1;
}

// How RunGemmF32 runs these shapes, and its scratch (GemmScratch sizes the
// request with it): op(A) packed, op(B) when no prepared packing fits it (B
// is an input, packed per run), and beta * C when C is a row or a column
// (the epilogue's bias); in bf16 and fp16 modes op(A)'s rows rounded.
struct GemmF32Plan {
  bool reduced = false;                        // bf16 or fp16 mode: RunGemmReduced
  const kernels::GemmF32Kernels* k = nullptr;  // null (and !reduced): the reference kernel
  const GemmF32State* prepared = nullptr;      // op(B) packed at prepare
  int64_t m = 0, n = 0, kd = 0;
  int64_t bias = 0;  // beta * C values: n (a row), m (a column) or 0
  size_t a_at = 0, b_at = 0, bias_at = 0, bytes = 0;
};

GemmF32Plan PlanGemmF32(const KernelContext& ctx, bool ta, bool tb) {
  GemmF32Plan p;
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  if (a->dtype != DType::kFloat32) return p;
  const auto* prepared = static_cast<const GemmF32State*>(ctx.state);
  if (prepared && (prepared->bf16 || prepared->fp16) && prepared->b_shape == b->shape &&
      prepared->tb == tb) {
    // The scratch is op(A) rounded to bf16 or half (fp16 gathers a
    // transposed A's row first).
    p.reduced = true;
    p.m = ctx.output(0)->shape[0];
    p.bytes = prepared->fp16 ? kernels::GemmFp16Scratch(p.m, ta ? p.m : 1, prepared->packed_fp16)
                             : kernels::GemmBf16Scratch(p.m, prepared->packed_bf16);
    return p;
  }
  p.k = prepared && prepared->k ? prepared->k : ctx.kernel_config().gemm_f32;
  if (!p.k) return p;
  if (prepared && prepared->k && prepared->b_shape == b->shape && prepared->tb == tb)
    p.prepared = prepared;
  p.m = ctx.output(0)->shape[0];
  p.n = ctx.output(0)->shape[1];
  p.kd = a->shape[ta ? 0 : 1];
  if (p.m == 0 || p.n == 0) return p;
  kernels::ScratchLayout l;
  p.a_at = l.Add(size_t(kernels::PackedF32Size(p.m, p.kd, p.k->mr)) * sizeof(float));
  if (!p.prepared)
    p.b_at = l.Add(size_t(kernels::PackedF32Size(p.n, p.kd, p.k->nr)) * sizeof(float));
  if (c) {
    int64_t cm, cn;
    GemmCDims(*c, &cm, &cn);
    p.bias = cm == 1 ? p.n : cn == 1 ? p.m : 0;
    p.bias_at = l.Add(size_t(p.bias) * sizeof(float));
  }
  p.bytes = l.total();
  return p;
}

// bf16 and fp16 modes: the sums into Y, then alpha, beta * C (broadcast as
// the reference does) and the fused activation.
bool RunGemmReduced(const KernelContext& ctx, const GemmF32State& st, bool ta, float alpha,
                    float beta) {
  const Tensor* a = ctx.input(0);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  const int64_t m = y->shape[0], n = y->shape[1];
  const int64_t kd = a->shape[ta ? 0 : 1];
  float* yd = y->ptr<float>();
  if (m == 0 || n == 0) return true;
  const kernels::ScratchSpan scratch{ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  if (st.fp16)
    kernels::GemmFp16(*st.fp16, a->ptr<float>(), ta ? 1 : kd, ta ? m : 1, m, st.packed_fp16, yd,
                      ctx.pool, scratch);
  else
    kernels::GemmBf16(*st.bf16, a->ptr<float>(), ta ? 1 : kd, ta ? m : 1, m, st.packed_bf16, yd,
                      ctx.pool, scratch);
  int64_t cs_m = 0, cs_n = 0;
  const float* cd = c ? c->ptr<float>() : nullptr;
  if (c) {
    const int cr = c->rank();
    const int64_t cm = cr == 2 ? c->shape[0] : 1, cn = cr >= 1 ? c->shape[size_t(cr - 1)] : 1;
    cs_n = cn == 1 ? 0 : 1;
    cs_m = cm == 1 ? 0 : cn;
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float v = alpha * yd[i * n + j];
      if (cd) v += beta * cd[i * cs_m + j * cs_n];
      yd[i * n + j] = v;
    }
  Status st_act;
  FusedActivation::FromAttrs(ctx.attr(), &st_act).Apply(yd, y->numel());
  return true;
}

// Float32 Gemm on the packed GEMM; false when no SIMD kernel applies.
bool RunGemmF32(const KernelContext& ctx, bool ta, bool tb, float alpha, float beta) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  const GemmF32Plan plan = PlanGemmF32(ctx, ta, tb);
  if (plan.reduced)
    return RunGemmReduced(ctx, *static_cast<const GemmF32State*>(ctx.state), ta, alpha, beta);
  const kernels::GemmF32Kernels* k = plan.k;
  if (!k) return false;
  const int64_t m = plan.m, n = plan.n, kd = plan.kd;
  if (m == 0 || n == 0) return true;
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      plan.bytes);
  const float* packed_b;
  if (plan.prepared) {
    packed_b = plan.prepared->packed.data();
  } else {
    float* dst = region.at<float>(plan.b_at);
    PackGemmBInto(*k, *b, tb, dst);
    packed_b = dst;
  }
  float* packed_a = region.at<float>(plan.a_at);
  // op(A)(r, k) = A[r][k], or A[k][r] when transposed.
  k->pack_left(a->ptr<float>(), ta ? 1 : kd, ta ? m : 1, m, kd, packed_a);

  kernels::GemmF32Args proto;
  proto.rows = m;
  proto.cols = n;
  proto.k = kd;
  proto.alpha = alpha;
  proto.ldc = n;
  float* yd = y->ptr<float>();
  // beta * C, in the reference's float arithmetic: a row or column vector
  // becomes the bias, a full matrix is copied into Y and accumulated onto.
  if (c) {
    int64_t cm, cn;
    GemmCDims(*c, &cm, &cn);
    const float* cd = c->ptr<float>();
    float* bias = region.at<float>(plan.bias_at);
    if (cm == 1) {
      for (int64_t j = 0; j < n; ++j) bias[j] = beta * cd[cn == 1 ? 0 : j];
      proto.bias = bias;
      proto.bias_per_row = false;
    } else if (cn == 1) {
      for (int64_t i = 0; i < m; ++i) bias[i] = beta * cd[i];
      proto.bias = bias;
      proto.bias_per_row = true;
    } else {
      for (int64_t i = 0; i < m * n; ++i) yd[i] = beta * cd[i];
      proto.accumulate = true;
    }
  }
  Status st;
  const FusedActivation act = FusedActivation::FromAttrs(ctx.attr(), &st);
  const FusedActivation* post;
  proto.act = kernels::EpilogueFor(act, &proto.lo, &proto.hi, &post);
  const float* left = packed_a;
  kernels::GemmF32Batched(*k, proto, &left, &packed_b, &yd, 1, ctx.pool);
  if (post) post->Apply(yd, y->numel());
  return true;
}

// OpDef::scratch: float32 on the packed GEMM, its operands, or in bf16 and
// fp16 modes op(A)'s rounded rows (PlanGemmF32, for the shapes of this
// plan); elsewhere the reference kernel's row of accumulators.
Status GemmScratch(KernelContext& ctx, ScratchNeeds* needs) {
  const bool ta = ctx.attr().GetInt("transA", 0) != 0;
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  const GemmF32Plan plan = PlanGemmF32(ctx, ta, tb);
  if (plan.k || plan.reduced)
    needs->run = plan.bytes;
  else
    needs->run =
        size_t(std::max<int64_t>(ctx.output(0)->shape[1], 0)) * dtype_size(ctx.input(0)->dtype);
  return Status::Ok();
}

Status RunGemm(KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  const Tensor* b = ctx.input(1);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  const bool ta = ctx.attr().GetInt("transA", 0) != 0;
  const bool tb = ctx.attr().GetInt("transB", 0) != 0;
  const float alpha = ctx.attr().GetFloat("alpha", 1.f);
  const float beta = ctx.attr().GetFloat("beta", 1.f);
  const int64_t m = y->shape[0], n = y->shape[1];
  const int64_t k = a->shape[ta ? 0 : 1];
  const Shape c_shape = c ? c->shape : Shape();
  if (a->dtype == DType::kFloat32 && RunGemmF32(ctx, ta, tb, alpha, beta)) return Status::Ok();
  const kernels::ScratchSpan scratch{ctx.scratch, ctx.scratch_size, ctx.scratch_planned};
  switch (a->dtype) {
    case DType::kFloat32: {
      GemmKernel(a->ptr<float>(), b->ptr<float>(), c ? c->ptr<float>() : nullptr, c_shape,
                 y->ptr<float>(), m, k, n, ta, tb, alpha, beta, scratch);
      Status st;
      FusedActivation::FromAttrs(ctx.attr(), &st).Apply(y->ptr<float>(), y->numel());
      break;
    }
    case DType::kFloat64:
      GemmKernel(a->ptr<double>(), b->ptr<double>(), c ? c->ptr<double>() : nullptr, c_shape,
                 y->ptr<double>(), m, k, n, ta, tb, alpha, beta, scratch);
      break;
    default:
      return ctx.Unsupported(std::string("dtype ") + dtype_name(a->dtype));
  }
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Gemm() {
  static const OpDef def = [] {
    OpDef d{"Gemm",
            InferGemm,
            RunGemm,
            /*value_inputs=*/0,
            /*shape_only=*/false,
            /*min_inputs=*/2,
            /*max_inputs=*/3};
    d.prepare = PrepareGemm;
    d.scratch = GemmScratch;
    d.const_inputs = 1u << 1;  // B
    d.traits = kTraitMatrixProduct | kTraitHalfWeights;
    d.same_dtype_inputs = 0b111;  // A, B, C
    d.weight_input = 1;
    d.bias_input = 2;
    return d;
  }();
  return def;
}

}  // namespace qfold
