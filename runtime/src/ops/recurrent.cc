// LSTM, GRU and RNN (float32), every attribute of the ONNX spec (opsets 7 to
// 22): forward, reverse and bidirectional; activations with their alpha/beta;
// clip; input_forget (LSTM); linear_before_reset (GRU); layout 0 and 1;
// sequence_lens; initial states; peepholes; Y, Y_h, Y_c each optional.
//
// One driver serves the three ops. Per direction:
//   1. the input projection of every time step at once, X (T*B rows) x W^T
//      plus the biases that do not depend on the state, as one GEMM;
//   2. per step, H_{t-1} (B rows) x R^T as one GEMM, then one pass per batch
//      row adds the projection, applies clip and the gate activations and
//      updates the state (the gates never go back to memory in between).
// With a SIMD level the GEMMs run on the packed fp32 kernels
// (kernels/gemm_f32.h; W and R packed once by prepare) and sigmoid/tanh on
// kernels/vmath.h; at QFOLD_ISA=reference on plain loops and libm, the
// oracle. Rows of a batch whose sequence_lens ends early stop updating: their
// Y rows past the end are 0 and Y_h/Y_c hold the state of their last step
// (0 for a length of 0).
// The converter turns the string-list attribute `activations` into one
// comma-separated string (converter/passes/normalize_opsets.cc).
//
// com.microsoft DynamicQuantizeLSTM (ONNX Runtime's quantize_dynamic of an
// LSTM) is the LSTM with 8-bit W [dirs, in, 4H] and R [dirs, H, 4H] (already
// transposed), their scales and zero points per tensor ([dirs]) or per gate
// column ([dirs, 4H]) as inputs 8-11. Both GEMMs are integer, as ONNX Runtime
// computes them: the input projection quantizes X (all time steps at once,
// uint8 with DynamicQuantizeLinear's parameters), each step quantizes
// H_{t-1} the same way (over the batch rows still running), and the int32
// sums are dequantized by a_scale * w_scale[column] in the GEMM epilogue
// (kernels/qlinear_s8.h); gates and state stay float.
//
// QfLSTMInteger (qfold-internal) is DynamicQuantizeLSTM whose X arrives
// quantized with a static scale (the converter's form of a QDQ LSTM whose X
// is a DequantizeLinear output): X int8/uint8, inputs 12 X_scale and 13
// X_zero_point (one value each). Its input projection is exact, the int32
// sums of (x - x_zp) * (w - w_zp) scaled by x_scale * w_scale[column]; the
// recurrent GEMM quantizes H_{t-1} as DynamicQuantizeLSTM does.
//
// QfGRUInteger (qfold-internal: a QDQ GRU's 8-bit weights) is the GRU in
// the same quantized form: W [dirs, in, 3H], R [dirs, H, 3H] transposed, inputs 8-11 their
// scales and zero points, 12-13 X_scale and X_zero_point when X is 8-bit
// (static, exact input projection as QfLSTMInteger), absent when X is float
// (quantized per run as DynamicQuantizeLSTM). Inputs 6-7 (LSTM's initial_c
// and P) stay empty. With linear_before_reset = 1 (PyTorch's and Keras'
// GRU) H_{t-1} x R^T covers all three gates (Rb_h added in that GEMM's
// epilogue), one quantized GEMM per step; without it the candidate's product
// reads r * H_{t-1}, quantized at run time like H_{t-1}, against R's h
// columns packed on their own at prepare: a second GEMM per step.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/op.h"
#include "kernels/aligned_vector.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel_config.h"
#include "kernels/qlinear_s8.h"
#include "kernels/quant_s8.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"
#include "kernels/vmath.h"
#include "ops/quant_util.h"

namespace qfold {
namespace {

enum class Cell { kLstm, kGru, kRnn };

int GatesOf(Cell c) {
  return c == Cell::kLstm ? 4 : c == Cell::kGru ? 3 : 1;
}
// Activation functions per direction: LSTM f, g, h; GRU f, g; RNN f.
int FuncsOf(Cell c) {
  return c == Cell::kLstm ? 3 : c == Cell::kGru ? 2 : 1;
}
Cell CellOf(const std::string& type) {
  if (type == "LSTM" || type == "DynamicQuantizeLSTM" || type == "QfLSTMInteger")
    return Cell::kLstm;
  return type == "GRU" || type == "QfGRUInteger" ? Cell::kGru : Cell::kRnn;
}

enum class Fn {
  kSigmoid,
  kTanh,
  kRelu,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  Fn fn = Fn::kSigmoid;
  float alpha = 0.f, beta = 0.f;
};

struct FnInfo {
  const char* name;
  Fn fn;
  int params;  // how many of alpha, beta it takes
  // Values when activation_alpha/beta run out. The spec says "as the ONNX
  // operators", which define none for Affine and ScaledTanh; these are the
  // ones ONNX Runtime uses (0 where it has none), so models agree with it.
  float alpha, beta;
};

const FnInfo kFns[] = {
    {"sigmoid", Fn::kSigmoid, 0, 0.f, 0.f},
    {"tanh", Fn::kTanh, 0, 0.f, 0.f},
    {"relu", Fn::kRelu, 0, 0.f, 0.f},
    {"affine", Fn::kAffine, 2, 0.f, 0.f},
    {"leakyrelu", Fn::kLeakyRelu, 1, 0.01f, 0.f},
    {"thresholdedrelu", Fn::kThresholdedRelu, 1, 0.f, 0.f},
    {"scaledtanh", Fn::kScaledTanh, 2, 0.f, 0.f},
    {"hardsigmoid", Fn::kHardSigmoid, 2, 0.2f, 0.5f},
    {"elu", Fn::kElu, 1, 1.f, 0.f},
    {"softsign", Fn::kSoftsign, 0, 0.f, 0.f},
    {"softplus", Fn::kSoftplus, 0, 0.f, 0.f},
};

// Input indices and output indices.
enum {
  kX = 0,
  kW,
  kR,
  kB,
  kSeqLens,
  kInitH,
  kInitC,
  kP,
  kWScale,
  kWZp,
  kRScale,
  kRZp,
  kXScale,
  kXZp
};
enum { kY = 0, kYh, kYc };

// Everything infer validates and run uses.
struct Config {
  Cell cell = Cell::kLstm;
  bool quantized = false;  // DynamicQuantizeLSTM, QfLSTMInteger, QfGRUInteger, QfRNNInteger
  bool static_x = false;   // X quantized, X_scale and X_zero_point inputs
  int dirs = 1;
  bool reverse_only = false;  // direction = reverse
  int64_t hidden = kUnknownDim;
  bool layout_batch_first = false;  // layout = 1
  bool has_clip = false;
  float clip = 0.f;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::vector<Activation> acts;  // FuncsOf(cell) per direction
};

Status ParseActivations(const KernelContext& ctx, Config* cfg) {
  const int per_dir = FuncsOf(cfg->cell);
  std::vector<std::string> names;
  const std::string joined = ctx.attr().GetString("activations", "");
  for (size_t p = 0; p < joined.size();) {
    size_t e = joined.find(',', p);
    if (e == std::string::npos) e = joined.size();
    names.push_back(joined.substr(p, e - p));
    p = e + 1;
  }
  if (names.empty()) {
    const char* dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
    if (cfg->cell == Cell::kRnn) dflt[0] = "Tanh";
    for (int d = 0; d < cfg->dirs; ++d)
      for (int i = 0; i < per_dir; ++i) names.push_back(dflt[i]);
  } else if (int(names.size()) == per_dir && cfg->dirs == 2) {
    // One direction's list for both (as ONNX Runtime accepts).
    for (int i = 0; i < per_dir; ++i) names.push_back(names[size_t(i)]);
  }
  if (int(names.size()) != per_dir * cfg->dirs)
    return ctx.Invalid("activations lists " + std::to_string(names.size()) +
                       " functions, expected " + std::to_string(per_dir * cfg->dirs));
  // alpha/beta are consumed in order by the functions that take them.
  const std::vector<float> alphas = ctx.attr().GetFloats("activation_alpha");
  const std::vector<float> betas = ctx.attr().GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  for (const std::string& raw : names) {
    std::string n = raw;
    for (char& ch : n) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    const FnInfo* info = nullptr;
    for (const FnInfo& f : kFns)
      if (n == f.name) info = &f;
    if (!info)
      return ctx.Unsupported("activation function '" + raw +
                             "' is not supported (the spec's: Relu, Tanh, Sigmoid, Affine, "
                             "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                             "Softsign, Softplus)");
    Activation a;
    a.fn = info->fn;
    a.alpha = info->alpha;
    a.beta = info->beta;
    if (info->params >= 1 && ai < alphas.size()) a.alpha = alphas[ai++];
    if (info->params >= 2 && bi < betas.size()) a.beta = betas[bi++];
    cfg->acts.push_back(a);
  }
  return Status::Ok();
}

Status ParseConfig(const KernelContext& ctx, Config* cfg) {
  cfg->cell = CellOf(*ctx.op_type);
  // QfGRUInteger, QfRNNInteger: X float (quantized per run) or 8-bit.
  const bool qgru = *ctx.op_type == "QfGRUInteger" || *ctx.op_type == "QfRNNInteger";
  const Tensor* x = ctx.input(kX);
  cfg->static_x = *ctx.op_type == "QfLSTMInteger" || (qgru && x && x->dtype != DType::kFloat32);
  cfg->quantized = cfg->static_x || qgru || *ctx.op_type == "DynamicQuantizeLSTM";
  const std::string dir = ctx.attr().GetString("direction", "forward");
  if (dir == "bidirectional") {
    cfg->dirs = 2;
  } else if (dir == "reverse") {
    cfg->reverse_only = true;
  } else if (dir != "forward") {
    return ctx.Invalid("direction '" + dir + "' (forward, reverse or bidirectional)");
  }
  const int64_t layout = ctx.attr().GetInt("layout", 0);
  if (layout != 0 && layout != 1) return ctx.Invalid("layout " + std::to_string(layout));
  cfg->layout_batch_first = layout == 1;
  if (const Attr* c = ctx.attr().Find("clip")) {
    cfg->has_clip = true;
    cfg->clip = c->f;
    if (!(cfg->clip > 0.f)) return ctx.Invalid("clip must be positive");
  }
  cfg->input_forget = cfg->cell == Cell::kLstm && ctx.attr().GetInt("input_forget", 0) != 0;
  cfg->linear_before_reset =
      cfg->cell == Cell::kGru && ctx.attr().GetInt("linear_before_reset", 0) != 0;
  if (ctx.attr().Has("hidden_size")) {
    cfg->hidden = ctx.attr().GetInt("hidden_size", 0);
    if (cfg->hidden <= 0) return ctx.Invalid("hidden_size must be positive");
  } else if (const Tensor* r = ctx.input(2); r && r->rank_known && r->rank() == 3) {
    cfg->hidden = r->shape[cfg->quantized ? 1 : 2];
  }
  return ParseActivations(ctx, cfg);
}

// Checks `t` (when present and of known rank) against `want`, where -1 in
// `want` or in t's shape matches anything.
Status CheckShape(const KernelContext& ctx, const Tensor* t, const char* what, const Shape& want) {
  if (!t || !t->rank_known) return Status::Ok();
  bool ok = t->rank() == int(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = t->shape[i] < 0 || want[i] < 0 || t->shape[i] == want[i];
  if (!ok)
    return ctx.Invalid(std::string(what) + " has shape " + ShapeToString(t->shape) + ", expected " +
                       ShapeToString(want));
  return Status::Ok();
}

// DynamicQuantizeLSTM's W [dirs, in, 4H], R [dirs, H, 4H] and their scales
// and zero points ([dirs] or [dirs, 4H], each zero point of its weight's dtype).
Status CheckQuantizedWeights(const KernelContext& ctx, int64_t dirs, int64_t gh, int64_t in,
                             int64_t h) {
  QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kW), "W", {dirs, in, gh}));
  QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kR), "R", {dirs, h, gh}));
  const char* names[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
  for (int i = kWScale; i <= kRZp; ++i) {
    const Tensor* t = ctx.input(i);
    const char* what = names[i - kWScale];
    if (!t) {
      if (i == kWScale || i == kRScale) return ctx.Invalid(std::string(what) + " is required");
      continue;
    }
    if (i == kWScale || i == kRScale) {
      if (t->dtype != DType::kFloat32) return ctx.Invalid(std::string(what) + " must be float32");
    } else {
      const Tensor* weight = ctx.input(i == kWZp ? kW : kR);
      QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, t, what, weight->dtype));
    }
    if (t->rank_known && t->rank() == 1)
      QF_RETURN_IF_ERROR(CheckShape(ctx, t, what, {dirs}));
    else
      QF_RETURN_IF_ERROR(CheckShape(ctx, t, what, {dirs, gh}));
  }
  return Status::Ok();
}

// QfLSTMInteger's X (8-bit), X_scale (float32) and X_zero_point (X's dtype),
// one value each.
Status CheckStaticX(const KernelContext& ctx) {
  const Tensor* x = ctx.input(kX);
  const Tensor* scale = ctx.input(kXScale);
  const Tensor* zp = ctx.input(kXZp);
  if (!Is8Bit(x->dtype))
    return ctx.Invalid(std::string("X must be int8 or uint8, got ") + dtype_name(x->dtype));
  if (!scale) return ctx.Invalid("X_scale is required");
  if (scale->dtype != DType::kFloat32) return ctx.Invalid("X_scale must be float32");
  QF_RETURN_IF_ERROR(CheckZeroPointDType(ctx, zp, "X_zero_point", x->dtype));
  for (const Tensor* t : {scale, zp})
    if (t && t->rank_known && t->numel() != 1)
      return ctx.Invalid(std::string(t == scale ? "X_scale" : "X_zero_point") +
                         " must hold one value, has shape " + ShapeToString(t->shape));
  return Status::Ok();
}

Status InferRecurrent(KernelContext& ctx) {
  Config cfg;
  QF_RETURN_IF_ERROR(ParseConfig(ctx, &cfg));
  const Tensor* x = ctx.input(kX);
  const Tensor* w = ctx.input(kW);
  const Tensor* r = ctx.input(kR);
  if (!x || !w || !r) return ctx.Invalid("inputs X, W and R are required");
  if (cfg.static_x) {
    QF_RETURN_IF_ERROR(CheckStaticX(ctx));
  } else if (x->dtype != DType::kFloat32) {
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype) + " (float32 only)");
  }
  const int last_input = cfg.static_x              ? kXZp
                         : cfg.quantized           ? kRZp
                         : cfg.cell == Cell::kLstm ? kP
                                                   : kInitH;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) continue;
    if (i > last_input) return ctx.Invalid("too many inputs");
    if (i == kX || i == kXScale || i == kXZp) continue;  // checked above
    if (cfg.quantized && (i == kW || i == kR || i == kWZp || i == kRZp)) {
      if (!Is8Bit(t->dtype))
        return ctx.Invalid("input " + std::to_string(i) + " must be int8 or uint8, got " +
                           dtype_name(t->dtype));
    } else if (i == kSeqLens) {
      if (t->dtype != DType::kInt32) return ctx.Invalid("sequence_lens must be int32");
    } else if (t->dtype != DType::kFloat32) {
      return ctx.Invalid("input " + std::to_string(i) + " must be float32 like X");
    }
  }
  if (cfg.quantized && cfg.cell == Cell::kGru && (ctx.input(kInitC) || ctx.input(kP)))
    return ctx.Invalid("inputs 6 and 7 (an LSTM's initial_c and P) must be empty");
  if (x->rank_known && x->rank() != 3) return ctx.Invalid("X must be 3-D");
  const int64_t seq = x->rank_known ? x->shape[cfg.layout_batch_first ? 1 : 0] : kUnknownDim;
  const int64_t batch = x->rank_known ? x->shape[cfg.layout_batch_first ? 0 : 1] : kUnknownDim;
  const int64_t in = x->rank_known ? x->shape[2] : kUnknownDim;
  const int64_t h = cfg.hidden;
  const int64_t gh = h < 0 ? kUnknownDim : GatesOf(cfg.cell) * h;
  const int64_t dirs = cfg.dirs;
  if (cfg.quantized) {
    QF_RETURN_IF_ERROR(CheckQuantizedWeights(ctx, dirs, gh, in, h));
  } else {
    QF_RETURN_IF_ERROR(CheckShape(ctx, w, "W", {dirs, gh, in}));
    QF_RETURN_IF_ERROR(CheckShape(ctx, r, "R", {dirs, gh, h}));
  }
  QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kB), "B", {dirs, gh < 0 ? kUnknownDim : 2 * gh}));
  QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kSeqLens), "sequence_lens", {batch}));
  const Shape state = cfg.layout_batch_first ? Shape{batch, dirs, h} : Shape{dirs, batch, h};
  QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kInitH), "initial_h", state));
  if (cfg.cell == Cell::kLstm) {
    QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kInitC), "initial_c", state));
    QF_RETURN_IF_ERROR(CheckShape(ctx, ctx.input(kP), "P", {dirs, h < 0 ? kUnknownDim : 3 * h}));
  }
  if (ctx.num_outputs() > (cfg.cell == Cell::kLstm ? 3 : 2)) return ctx.Invalid("too many outputs");
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Tensor* o = ctx.output(i);
    if (!o) continue;
    o->dtype = DType::kFloat32;
    o->rank_known = true;
    if (i == kY)
      o->shape = cfg.layout_batch_first ? Shape{batch, seq, dirs, h} : Shape{seq, dirs, batch, h};
    else
      o->shape = state;
  }
  return Status::Ok();
}

// ---- weights: raw for the reference, packed for the SIMD GEMM ----------------------------

// A weight block of `rows` rows (output features) by k, row-major, used as
// the right operand W^T of out = in x W^T.
struct WeightT {
  const float* raw = nullptr;
  int64_t rows = 0, k = 0;
  kernels::AlignedVector<float> packed;  // packed in prepare (W and R constant)
  const float* right = nullptr;          // the packed weight: `packed` or the run's scratch
};

// A DynamicQuantizeLSTM weight of one direction: B [k, n] of out = in x B.
// A run copies it (nothing here allocates on copy) to set its parameters.
struct QWeight {
  std::shared_ptr<void> state;     // kernels::PrepareQMatMulS8, owning `packed`'s arrays
  kernels::QMatMulPackedB packed;  // k null: reference loops; else prepared or the run's
  const void* raw = nullptr;
  // raw's bytes when prepare copied them (a column slice); a run that packs
  // the weights itself copies the slice into its scratch.
  std::shared_ptr<std::vector<uint8_t>> owned;
  int64_t col0 = 0;  // raw's first column in the [k, n] weight of the node
  DType dtype = DType::kInt8;
  int64_t k = 0, n = 0;
  // 1 or n values each, this run's (SetQuantParams: in the run's scratch).
  kernels::ConstSpan<float> scale;
  kernels::ConstSpan<int32_t> zp;
};

struct Packed {
  const kernels::GemmF32Kernels* gemm = nullptr;
  const kernels::GemmS8Kernels* gemm_s8 = nullptr;  // DynamicQuantizeLSTM
  // Per direction (the first `qdirs`); arrays, so that a run's copy of a
  // prepared state allocates nothing.
  int qdirs = 0;
  std::array<QWeight, 2> qw, qr;  // DynamicQuantizeLSTM
  // QfGRUInteger without linear_before_reset: R's h columns on their own,
  // multiplied by r * H_{t-1} once r is known (qr then also computes them,
  // unused).
  bool has_qr_h = false;
  std::array<QWeight, 2> qr_h;
  const void* w_data = nullptr;  // the tensors packed, to notice other inputs
  const void* r_data = nullptr;
  // Per direction: W, then R (all gates; GRU without linear_before_reset: z
  // and r), then that GRU's R_h, multiplied by r * H_{t-1} once r is known.
  std::vector<WeightT> w, r, r_h;
};

// Packs into dst (PackedF32Size(rows, k, nr) floats), or null: wt's own.
void Pack(const kernels::GemmF32Kernels* gemm, WeightT* wt, float* dst) {
  if (!gemm) return;
  if (!dst) {
    wt->packed.resize(size_t(kernels::PackedF32Size(wt->rows, wt->k, gemm->nr)));
    dst = wt->packed.data();
  }
  // Right operand (k, c) = raw[c][k].
  gemm->pack_right(wt->raw, 1, wt->k, wt->k, wt->rows, dst);
  wt->right = dst;
}

// dst: null (prepare), or where the run's scratch holds direction d's W, R
// and R_h (dst[3 * d + 0..2], laid out by PlanRecurrent).
void BuildPacked(const KernelContext& ctx, const Config& cfg, const kernels::GemmF32Kernels* gemm,
                 Packed* p, float* const* dst = nullptr) {
  const Tensor* w = ctx.input(kW);
  const Tensor* r = ctx.input(kR);
  const int64_t h = r->shape[2], gh = r->shape[1], in = w->shape[2];
  p->gemm = gemm;
  p->w_data = w->data;
  p->r_data = r->data;
  p->w.assign(size_t(cfg.dirs), WeightT());
  p->r.assign(size_t(cfg.dirs), WeightT());
  p->r_h.assign(size_t(cfg.dirs), WeightT());
  for (int d = 0; d < cfg.dirs; ++d) {
    WeightT& wt = p->w[size_t(d)];
    wt.raw = w->ptr<float>() + d * gh * in;
    wt.rows = gh;
    wt.k = in;
    Pack(gemm, &wt, dst ? dst[3 * d] : nullptr);
    const float* rd = r->ptr<float>() + d * gh * h;
    WeightT& rt = p->r[size_t(d)];
    rt.raw = rd;
    rt.rows = cfg.cell == Cell::kGru && !cfg.linear_before_reset ? 2 * h : gh;
    rt.k = h;
    Pack(gemm, &rt, dst ? dst[3 * d + 1] : nullptr);
    if (cfg.cell == Cell::kGru && !cfg.linear_before_reset) {
      WeightT& rh = p->r_h[size_t(d)];
      rh.raw = rd + 2 * h * h;
      rh.rows = h;
      rh.k = h;
      Pack(gemm, &rh, dst ? dst[3 * d + 2] : nullptr);
    }
  }
}

// Where a run that packs its quantized W and R itself (they are inputs, not
// constants) puts them: per direction W, R and R_h packed
// (kernels::PackQMatMulS8Into; none without a fast kernel), and R_h's column
// slice, which the reference loops read too.
struct QWeightParts {
  size_t w[2] = {}, r[2] = {}, r_h[2] = {}, r_h_raw[2] = {};
};

// Packs W and R per direction: at prepare (into = null: they are constants,
// each packed into its own state), or per run into `into`'s parts of `base`
// (the run's scratch). The scales and zero points may not be constants and
// are read per run by SetQuantParams.
void BuildQuantized(const KernelContext& ctx, const Config& cfg, Packed* p,
                    const QWeightParts* into = nullptr, uint8_t* base = nullptr) {
  const kernels::KernelConfig& kc = ctx.kernel_config();
  p->gemm_s8 = kc.gemm_s8;
  p->w_data = ctx.input(kW)->data;
  p->r_data = ctx.input(kR)->data;
  p->qdirs = cfg.dirs;
  auto pack = [&](QWeight& q, Tensor& view, size_t at) {
    if (!into) {
      q.state = kernels::PrepareQMatMulS8(kc, view);
      if (q.state) q.packed = kernels::QMatMulS8View(q.state.get());
    } else {
      kernels::PackQMatMulS8Into(kc, view, base + at, &q.packed);  // false: k stays null
    }
  };
  for (int which = 0; which < 2; ++which) {
    const Tensor* w = ctx.input(which ? kR : kW);
    std::array<QWeight, 2>& out = which ? p->qr : p->qw;
    for (int d = 0; d < cfg.dirs; ++d) {
      QWeight& q = out[size_t(d)];
      q = QWeight();
      q.k = w->shape[1];
      q.n = w->shape[2];
      q.dtype = w->dtype;
      q.raw = w->ptr<uint8_t>() + d * q.k * q.n;
      Tensor view;
      view.dtype = w->dtype;
      view.shape = {q.k, q.n};
      view.data = const_cast<void*>(q.raw);
      pack(q, view, into ? (which ? into->r[d] : into->w[d]) : 0);
    }
  }
  p->has_qr_h = cfg.cell == Cell::kGru && !cfg.linear_before_reset;
  if (!p->has_qr_h) return;
  const Tensor* r = ctx.input(kR);
  const int64_t h = r->shape[1], gh = r->shape[2];
  const size_t esize = dtype_size(r->dtype);
  for (int d = 0; d < cfg.dirs; ++d) {
    QWeight& q = p->qr_h[size_t(d)];
    q = QWeight();
    q.k = h;
    q.n = h;
    q.dtype = r->dtype;
    q.col0 = 2 * h;
    uint8_t* slice;
    if (into) {
      slice = base + into->r_h_raw[d];
    } else {
      q.owned = std::make_shared<std::vector<uint8_t>>(size_t(h * h) * esize);
      slice = q.owned->data();
    }
    const uint8_t* src = r->ptr<uint8_t>() + size_t(d * h * gh) * esize;
    for (int64_t k = 0; k < h; ++k)
      std::memcpy(slice + size_t(k * h) * esize, src + size_t(k * gh + 2 * h) * esize,
                  size_t(h) * esize);
    q.raw = slice;
    Tensor view;
    view.dtype = r->dtype;
    view.shape = Shape{h, h};
    view.data = slice;
    pack(q, view, into ? into->r_h[d] : 0);
  }
}

// Scales and zero points of W, then R, read into the run's scratch: their
// counts (a missing zero point is one 0).
int64_t QuantScaleCount(const KernelContext& ctx) {
  return ctx.input(kWScale)->numel() + ctx.input(kRScale)->numel();
}
int64_t QuantZpCount(const KernelContext& ctx) {
  const Tensor* wz = ctx.input(kWZp);
  const Tensor* rz = ctx.input(kRZp);
  return (wz ? wz->numel() : 1) + (rz ? rz->numel() : 1);
}

// Direction d's values of a [dirs] or [dirs, n] parameter read into `all`
// (absent: the one 0 there).
template <class T>
kernels::ConstSpan<T> DirectionParams(const T* all, const Tensor* t, int d) {
  if (!t) return {all, 1};
  if (t->rank() == 1) return {all + d, 1};
  const int64_t per = t->shape[1];
  return {all + d * per, size_t(per)};
}

// This run's scales and zero points: read into `scales` and `zps`
// (QuantScaleCount and QuantZpCount values, the run's scratch) and viewed
// by each direction's weights.
void SetQuantParams(const KernelContext& ctx, const Config& cfg, Packed* p, float* scales,
                    int32_t* zps) {
  for (int which = 0; which < 2; ++which) {
    const Tensor* st = ctx.input(which ? kRScale : kWScale);
    const Tensor* zt = ctx.input(which ? kRZp : kWZp);
    ReadFloatsInto(st, scales);
    if (zt)
      for (int64_t i = 0; i < zt->numel(); ++i) zps[i] = LoadQ(zt->data, zt->dtype, i);
    else
      zps[0] = 0;
    for (int d = 0; d < cfg.dirs; ++d) {
      QWeight& q = (which ? p->qr : p->qw)[size_t(d)];
      q.scale = DirectionParams<float>(scales, st, d);
      q.zp = DirectionParams<int32_t>(zps, zt, d);
    }
    scales += st->numel();
    zps += zt ? zt->numel() : 1;
  }
  // R_h's columns' parameters: a slice of R's when they are per column.
  if (!p->has_qr_h) return;
  for (int d = 0; d < cfg.dirs; ++d) {
    QWeight& q = p->qr_h[size_t(d)];
    const QWeight& full = p->qr[size_t(d)];
    auto slice = [&](auto all) {
      using Span = decltype(all);
      return all.size() == 1 ? all : Span(all.data() + q.col0, size_t(q.n));
    };
    q.scale = slice(full.scale);
    q.zp = slice(full.zp);
  }
}

Status PrepareRecurrent(KernelContext& ctx, std::shared_ptr<void>* state) {
  Config cfg;
  QF_RETURN_IF_ERROR(ParseConfig(ctx, &cfg));
  if (cfg.quantized) {
    auto p = std::make_shared<Packed>();
    BuildQuantized(ctx, cfg, p.get());
    *state = p;
    return Status::Ok();
  }
  const kernels::GemmF32Kernels* gemm = ctx.kernel_config().gemm_f32;
  if (!gemm) return Status::Ok();
  auto p = std::make_shared<Packed>();
  BuildPacked(ctx, cfg, gemm, p.get());
  *state = p;
  return Status::Ok();
}

// out[r][c] = bias[c] + sum_k in[r][k] * wt.raw[c][k], rows of `in` at stride
// lda, of out at stride ldc; bias optional. `pack` holds PackedF32Size(rows,
// wt.k, mr) floats for the packed rows of `in`. With `step` (>= 0: the
// step's index) and one row, its packed panel [k][mr] keeps the rows past
// the first at 0 (the caller clears it once per direction) and each step
// writes only its k values (a batch-1 step otherwise rewrites mr times as
// many floats). A step also runs the two halves of
// the weight's column panels in the order opposite to the previous step's:
// the half read last is still in L1 when the next step starts (an LSTM's R of
// 64 KiB streams from L2 every step otherwise). Each element's sum is the same.
void MultiplyT(const WeightT& wt, const kernels::GemmF32Kernels* gemm, const float* in,
               int64_t rows, int64_t lda, const float* bias, float* out, int64_t ldc, float* pack,
               kernels::ThreadPool* pool, int64_t step = -1, const float* packed_in = nullptr) {
  if (rows == 0 || wt.rows == 0) return;
  if (gemm) {
    if (packed_in) {
      // The caller packed `in` (both directions project the same X).
    } else if (step >= 0 && rows == 1) {
      for (int64_t k = 0; k < wt.k; ++k) pack[k * gemm->mr] = in[k];
    } else {
      gemm->pack_left(in, lda, 1, rows, wt.k, pack);
    }
    kernels::GemmF32Args a;
    a.rows = rows;
    a.cols = wt.rows;
    a.k = wt.k;
    a.bias = bias;
    a.bias_per_row = false;
    a.ldc = ldc;
    a.left = packed_in ? packed_in : pack;
    a.right = wt.right;
    a.c = out;
    // A step's product is small: called directly, without the batched
    // driver's hand-off to threads (the same sums either way).
    if (!kernels::PoolForWork(pool, 2 * rows * wt.rows * wt.k)) {
      const int64_t panels = (wt.rows + gemm->nr - 1) / gemm->nr, half = panels / 2;
      if (step < 0 || half == 0) {
        gemm->gemm(a);
        return;
      }
      const bool odd = step % 2 != 0;
      a.panel_begin = odd ? half : 0;
      a.panel_end = odd ? panels : half;
      gemm->gemm(a);
      a.panel_begin = odd ? 0 : half;
      a.panel_end = odd ? half : panels;
      gemm->gemm(a);
      return;
    }
    kernels::GemmF32Batched(*gemm, a, &a.left, &a.right, &out, 1, pool);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float* a = in + i * lda;
    float* o = out + i * ldc;
    for (int64_t c = 0; c < wt.rows; ++c) {
      const float* wr = wt.raw + c * wt.k;
      float s = 0.f;
      for (int64_t k = 0; k < wt.k; ++k) s += a[k] * wr[k];
      o[c] = (bias ? bias[c] : 0.f) + s;
    }
  }
}

// The quantized products' buffers, parts of the run's scratch
// (RecurrentParts): the quantized rows, the n dequantization multipliers,
// the packed GEMM's scratch (packed rows of A) and the reference's row of
// int64 sums.
struct QScratch {
  uint8_t* q = nullptr;
  float* mult = nullptr;
  uint8_t* gemm = nullptr;
  size_t gemm_bytes = 0;
  bool planned = false;  // the session planned the region
  int64_t* sum = nullptr;
  // The product's operand views, kept across the direction's steps: their
  // 2-D shapes are assigned in place, so a step allocates nothing.
  Tensor a, y;
};

// out as MultiplyQ's (below) from `q`, rows of w.k values of dtype a_dtype
// already quantized with a_scale and a_zp.
void MultiplyQuantized(const QWeight& w, const void* q, DType a_dtype, int64_t rows, float a_scale,
                       int32_t a_zp, const float* bias, float* out, QScratch* s,
                       kernels::ThreadPool* pool) {
  if (rows == 0 || w.n == 0) return;
  for (int64_t j = 0; j < w.n; ++j)
    s->mult[j] = a_scale * w.scale[w.scale.size() == 1 ? 0 : size_t(j)];
  if (w.packed.k) {
    Tensor& a = s->a;
    Tensor& y = s->y;
    a.dtype = a_dtype;
    a.shape = {rows, w.k};
    a.data = const_cast<void*>(q);
    y.dtype = DType::kFloat32;
    y.shape = {rows, w.n};
    y.data = out;
    kernels::QMatMulCall c;
    c.a = &a;
    c.y = &y;
    c.a_zp = a_zp;
    c.b_zp = w.zp;
    static constexpr float kUnitScale = 1.f;  // the multipliers are dq_mult
    c.b_scale = {&kUnitScale, 1};
    c.dq_mult = s->mult;
    c.dq_bias = bias;
    c.pool = pool;
    c.scratch = {s->gemm, s->gemm_bytes, s->planned};
    if (kernels::RunQMatMulS8Packed(w.packed, c)) return;
  }
  // The reference: int32 sums (wrapping like the kernels) into `out`, then the
  // kernels' own epilogue, so both round alike.
  int32_t* acc = reinterpret_cast<int32_t*>(out);
  int64_t* sum = s->sum;
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(sum, sum + w.n, 0);
    for (int64_t k = 0; k < w.k; ++k) {
      const int64_t a = int64_t(LoadQ(q, a_dtype, r * w.k + k)) - a_zp;
      for (int64_t j = 0; j < w.n; ++j)
        sum[j] += a * (LoadQ(w.raw, w.dtype, k * w.n + j) - w.zp[w.zp.size() == 1 ? 0 : size_t(j)]);
    }
    for (int64_t j = 0; j < w.n; ++j) acc[r * w.n + j] = WrapInt32(sum[j]);
  }
  kernels::DequantizeColumns(out, rows, w.n, 0, w.n, s->mult, bias);
}

// out[r][c] = float(acc) * (a_scale * w.scale[c]) + bias[c] (bias optional),
// acc = sum_k (q[r][k] - a_zp) * (B[k][c] - w.zp[c]) where q is `in` (rows
// contiguous rows of w.k floats) quantized to uint8 with DynamicQuantizeLinear's
// parameters. Rows whose `row_active` entry is negative (a finished sequence)
// are left out of the range; their results are ignored by the caller.
void MultiplyQ(const QWeight& w, const kernels::KernelConfig& kc, const float* in, int64_t rows,
               const int64_t* row_active, const float* bias, float* out, QScratch* s,
               kernels::ThreadPool* pool) {
  if (rows == 0 || w.n == 0) return;
  const int64_t count = rows * w.k;
  float lo = 0.f, hi = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    if (row_active && row_active[r] < 0) continue;
    for (int64_t i = r * w.k; i < (r + 1) * w.k; ++i) {
      lo = std::min(lo, in[i]);
      hi = std::max(hi, in[i]);
    }
  }
  float a_scale;
  int32_t a_zp;
  DynamicQuantRange(lo, hi, &a_scale, &a_zp);
  if (!kernels::QuantizeF32ToS8(kc, in, s->q, /*is_signed=*/false, 0, 255, 1, 1, count, &a_scale,
                                &a_zp, /*per_axis=*/false, pool))
    for (int64_t i = 0; i < count; ++i)
      s->q[i] = uint8_t(RoundAddSaturate(in[i] / a_scale, a_zp, 0, 255));
  MultiplyQuantized(w, s->q, DType::kUInt8, rows, a_scale, a_zp, bias, out, s, pool);
}

// ---- gate activations ---------------------------------------------------------------------

void Apply(const Activation& a, const kernels::VMathKernels& vm, float* x, int64_t n) {
  switch (a.fn) {
    case Fn::kSigmoid:
      vm.sigmoid(x, x, n);
      return;
    case Fn::kTanh:
      vm.tanh(x, x, n);
      return;
    case Fn::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
      return;
    case Fn::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = a.alpha * x[i] + a.beta;
      return;
    case Fn::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.f ? x[i] : a.alpha * x[i];
      return;
    case Fn::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > a.alpha ? x[i] : 0.f;
      return;
    case Fn::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] *= a.beta;
      vm.tanh(x, x, n);
      for (int64_t i = 0; i < n; ++i) x[i] *= a.alpha;
      return;
    case Fn::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(0.f, std::min(1.f, a.alpha * x[i] + a.beta));
      return;
    case Fn::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.f ? x[i] : a.alpha * std::expm1(x[i]);
      return;
    case Fn::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.f + std::fabs(x[i]));
      return;
    case Fn::kSoftplus:
      // log(1 + e^x) without overflow for large x.
      for (int64_t i = 0; i < n; ++i)
        x[i] = x[i] > 0.f ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
      return;
  }
}

void Clip(const Config& cfg, float* x, int64_t n) {
  if (!cfg.has_clip) return;
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(-cfg.clip, std::min(cfg.clip, x[i]));
}

// ---- the driver ---------------------------------------------------------------------------

struct Dims {
  int64_t seq, batch, in, h, gh;
  int64_t scales = 0, zps = 0;  // quantized: QuantScaleCount, QuantZpCount
};

// One direction's buffers (offsets in the run's scratch).
struct DirectionParts {
  size_t step_pack = 0, q = 0, mult = 0, gemm = 0, sum = 0, in_bias = 0, rec_bias = 0, xw = 0,
         h = 0, c = 0, rec = 0, gates = 0, rh = 0, hr = 0, step_t = 0, active = 0;
};

// Where a run's buffers go, laid out alike for the request
// (RecurrentScratch) and the run. Directions that run one after another
// share one set of buffers; run side by side (ParallelDirections) each has
// its own. Float products pack on `gemm` (null: plain loops); the quantized
// ones on q's weights (prepared or built by the run).
struct RecurrentParts {
  kernels::ScratchLayout layout;
  size_t lens = 0, packed_x = 0, step_pack_bytes = 0, gemm_bytes = 0;
  size_t weights[6] = {};  // float W, R, R_h of each direction packed by the run
  QWeightParts qweights;   // quantized ones packed by the run
  size_t scales = 0, zps = 0;  // quantized: this run's (SetQuantParams)
  bool parallel = false;
  DirectionParts dir[2];
};

// A bidirectional layer on two or more threads runs its directions side by
// side, each on one thread: the steps of a direction depend on each other,
// and a step's products (a few hundred MACs per row at these sizes) are too
// small to split, while the two directions are independent start to end.
// Below ~100K MACs a direction takes a few microseconds, about what handing
// it to the other thread costs.
bool ParallelDirections(const Config& cfg, const Dims& dm, kernels::ThreadPool* pool) {
  constexpr int64_t kMinDirectionMacs = int64_t(1) << 17;
  return cfg.dirs == 2 && kernels::NumThreads(pool) >= 2 &&
         dm.seq * dm.batch * dm.gh * (dm.in + dm.h) >= kMinDirectionMacs;
}

// The packed GEMM's scratch for `rows` rows times w, 0 for a weight the
// reference loops multiply.
size_t QProductScratch(const QWeight& w, int64_t rows, kernels::ThreadPool* pool) {
  if (!w.packed.k || rows == 0 || w.n == 0) return 0;
  Tensor a, y;
  a.dtype = DType::kUInt8;
  a.shape = {rows, w.k};
  y.dtype = DType::kFloat32;
  y.shape = {rows, w.n};
  kernels::QMatMulCall c;
  c.a = &a;
  c.y = &y;
  c.pool = pool;
  return kernels::QMatMulS8PackedScratch(w.packed, c);
}

// pack_weights: a layer whose W or R is not a constant packs them per run,
// into the scratch (BuildPacked's dst; quantized: BuildQuantized's `into`,
// then `q` holds their shapes only, QuantizedShapes).
RecurrentParts PlanRecurrent(const Config& cfg, const Dims& dm, const kernels::GemmF32Kernels* gemm,
                             const Packed* q, kernels::ThreadPool* pool, bool pack_weights,
                             const kernels::KernelConfig& kc) {
  const size_t T = size_t(dm.seq), B = size_t(dm.batch), H = size_t(dm.h), GH = size_t(dm.gh);
  const size_t f = sizeof(float), i64 = sizeof(int64_t);
  RecurrentParts p;
  p.parallel = ParallelDirections(cfg, dm, pool);
  // Directions side by side run their products on their own thread.
  kernels::ThreadPool* product_pool = p.parallel ? nullptr : pool;
  kernels::ScratchLayout& l = p.layout;
  p.lens = l.Add(B * i64);
  if (pack_weights && cfg.quantized && q) {
    for (int d = 0; d < q->qdirs; ++d) {
      QWeightParts& w = p.qweights;
      const QWeight &qw = q->qw[size_t(d)], &qr = q->qr[size_t(d)];
      w.w[d] = l.Add(kernels::QMatMulS8PackedBytes(kc, qw.dtype, qw.k, qw.n));
      w.r[d] = l.Add(kernels::QMatMulS8PackedBytes(kc, qr.dtype, qr.k, qr.n));
      if (q->has_qr_h) {
        const QWeight& qh = q->qr_h[size_t(d)];
        w.r_h_raw[d] = l.Add(dtype_storage_bytes(qh.dtype, qh.k * qh.n));
        w.r_h[d] = l.Add(kernels::QMatMulS8PackedBytes(kc, qh.dtype, qh.k, qh.n));
      }
    }
  } else if (pack_weights) {
    const bool split_r = cfg.cell == Cell::kGru && !cfg.linear_before_reset;
    for (int d = 0; d < cfg.dirs; ++d) {
      p.weights[3 * d] = l.Add(size_t(kernels::PackedF32Size(dm.gh, dm.in, gemm->nr)) * f);
      p.weights[3 * d + 1] =
          l.Add(size_t(kernels::PackedF32Size(split_r ? 2 * dm.h : dm.gh, dm.h, gemm->nr)) * f);
      if (split_r)
        p.weights[3 * d + 2] = l.Add(size_t(kernels::PackedF32Size(dm.h, dm.h, gemm->nr)) * f);
    }
  }
  if (cfg.quantized) {
    p.scales = l.Add(size_t(dm.scales) * f);
    p.zps = l.Add(size_t(dm.zps) * sizeof(int32_t));
    for (int d = 0; q && d < cfg.dirs && d < q->qdirs; ++d)
      p.gemm_bytes = std::max(
          {p.gemm_bytes, QProductScratch(q->qw[size_t(d)], dm.seq * dm.batch, product_pool),
           QProductScratch(q->qr[size_t(d)], dm.batch, product_pool),
           q->has_qr_h ? QProductScratch(q->qr_h[size_t(d)], dm.batch, product_pool) : size_t(0)});
  } else if (gemm) {
    // X packed once: for both directions, or inside the one direction's product.
    p.packed_x = l.Add(size_t(kernels::PackedF32Size(dm.seq * dm.batch, dm.in, gemm->mr)) * f);
    p.step_pack_bytes = size_t(kernels::PackedF32Size(dm.batch, dm.h, gemm->mr)) * f;
  }
  for (int set = 0; set < (p.parallel ? 2 : 1); ++set) {
    DirectionParts& dp = p.dir[set];
    if (cfg.quantized) {
      const size_t x_rows = cfg.static_x ? 0 : T * B * size_t(dm.in);
      dp.q = l.Add(std::max(x_rows, B * H));
      dp.mult = l.Add(GH * f);
      dp.gemm = l.Add(p.gemm_bytes);
      dp.sum = l.Add(GH * i64);
      if (!cfg.static_x && !cfg.layout_batch_first) dp.active = l.Add(T * B * i64);
    } else if (gemm) {
      dp.step_pack = l.Add(p.step_pack_bytes);
    }
    dp.in_bias = l.Add(GH * f);
    dp.rec_bias = l.Add(GH * f);
    dp.xw = l.Add(T * B * GH * f);
    dp.h = l.Add(B * H * f);
    if (cfg.cell == Cell::kLstm) dp.c = l.Add(B * H * f);
    dp.rec = l.Add(B * GH * f);
    dp.gates = l.Add(B * GH * f);
    if (cfg.cell == Cell::kGru) dp.rh = l.Add(B * H * f);
    if (cfg.cell == Cell::kGru && !cfg.linear_before_reset) dp.hr = l.Add(B * H * f);
    dp.step_t = l.Add(B * i64);
  }
  return p;
}

// Runs direction `d` (reverse when `reverse`) over the whole sequence.
// packed_x: X already packed as the GEMM's left operand (both directions
// project the same X), or null.
// Its buffers are parts of `region`, laid out by `parts` and `dp`; its
// products run on `pool`.
void RunDirection(const KernelContext& ctx, const Config& cfg, const Dims& dm, const Packed& p,
                  int d, bool reverse, const int64_t* lens, int64_t num_lens, const float* packed_x,
                  const RecurrentParts& parts, const DirectionParts& dp,
                  const kernels::ScratchRegion& region, bool planned, kernels::ThreadPool* pool) {
  const kernels::GemmF32Kernels* gemm = p.gemm;
  const kernels::VMathKernels& vm = *ctx.kernel_config().vmath;
  const int64_t T = dm.seq, B = dm.batch, H = dm.h, GH = dm.gh;
  const bool bf = cfg.layout_batch_first;
  const Activation* act = cfg.acts.data() + d * FuncsOf(cfg.cell);
  const Tensor* bias_t = ctx.input(kB);
  const float* wb = bias_t ? bias_t->ptr<float>() + d * 2 * GH : nullptr;
  const float* rb = wb ? wb + GH : nullptr;

  // Biases outside the recurrence: Wb + Rb, except GRU's Rb_h with
  // linear_before_reset, which sits inside r * (...): the step's GEMM adds it.
  float* in_bias = region.at<float>(dp.in_bias);
  std::fill(in_bias, in_bias + GH, 0.f);
  float* rec_bias = nullptr;  // GRU's Rb_h with linear_before_reset
  if (wb) {
    for (int64_t j = 0; j < GH; ++j) in_bias[j] = wb[j] + rb[j];
    if (cfg.linear_before_reset) {
      rec_bias = region.at<float>(dp.rec_bias);
      std::fill(rec_bias, rec_bias + GH, 0.f);
      for (int64_t j = 2 * H; j < GH; ++j) {
        in_bias[j] = wb[j];
        rec_bias[j] = rb[j];
      }
    }
  }
  float* x_pack = region.at<float>(parts.packed_x);
  float* step_pack = region.at<float>(dp.step_pack);
  // A batch-1 step writes only column 0 of its packed panel (MultiplyT).
  std::fill(step_pack, step_pack + parts.step_pack_bytes / sizeof(float), 0.f);
  QScratch qscratch;
  qscratch.q = region.at<uint8_t>(dp.q);
  qscratch.mult = region.at<float>(dp.mult);
  qscratch.gemm = region.at<uint8_t>(dp.gemm);
  qscratch.gemm_bytes = parts.gemm_bytes;
  qscratch.planned = planned;
  qscratch.sum = region.at<int64_t>(dp.sum);
  // 1. Input projection: row i of X (T*B rows of `in`) gives row i of xw.
  // Every element is written by the GEMM: no zeroing.
  float* xw = region.at<float>(dp.xw);
  if (cfg.static_x) {
    const Tensor* x = ctx.input(kX);
    const Tensor* x_zp = ctx.input(kXZp);
    float x_scale = 0.f;  // the first value (per tensor: checked at inference)
    ReadFloatsInto(ctx.input(kXScale), &x_scale, 1);
    MultiplyQuantized(p.qw[size_t(d)], x->data, x->dtype, T * B, x_scale,
                      x_zp ? LoadQ(x_zp->data, x_zp->dtype, 0) : 0, in_bias, xw, &qscratch, pool);
  } else if (cfg.quantized) {
    // ONNX Runtime quantizes the time steps up to the longest sequence (all
    // of them without sequence_lens); time-major rows of later steps are left
    // out of the range.
    const int64_t max_len = num_lens == 0 ? T : *std::max_element(lens, lens + num_lens);
    int64_t* active = nullptr;
    if (!bf && max_len < T) {
      active = region.at<int64_t>(dp.active);
      std::fill(active, active + max_len * B, 0);
      std::fill(active + max_len * B, active + T * B, -1);
    }
    MultiplyQ(p.qw[size_t(d)], ctx.kernel_config(), ctx.input(kX)->ptr<float>(), T * B, active,
              in_bias, xw, &qscratch, pool);
  } else {
    MultiplyT(p.w[size_t(d)], gemm, ctx.input(kX)->ptr<float>(), T * B, dm.in, in_bias, xw, GH,
              x_pack, pool, /*step=*/-1, packed_x);
  }

  // State, from the initial values or 0.
  float* h_prev = region.at<float>(dp.h);
  float* c_prev = nullptr;
  auto load_state = [&](const Tensor* init, float* s) {
    std::fill(s, s + B * H, 0.f);
    if (!init) return;
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(s + b * H, init->ptr<float>() + (bf ? b * cfg.dirs + d : d * B + b) * H,
                  size_t(H) * sizeof(float));
  };
  load_state(ctx.input(kInitH), h_prev);
  if (cfg.cell == Cell::kLstm) {
    c_prev = region.at<float>(dp.c);
    load_state(ctx.input(kInitC), c_prev);
  }
  const Tensor* peep = cfg.cell == Cell::kLstm ? ctx.input(kP) : nullptr;
  const float* pi = peep ? peep->ptr<float>() + d * 3 * H : nullptr;
  const float* po = pi ? pi + H : nullptr;
  const float* pf = pi ? pi + 2 * H : nullptr;

  Tensor* y = ctx.output(kY);
  float* yd = y ? y->ptr<float>() : nullptr;
  float* rec = region.at<float>(dp.rec);
  float* gates = region.at<float>(dp.gates);
  float* rh = cfg.cell == Cell::kGru ? region.at<float>(dp.rh) : nullptr;
  float* hr = nullptr;
  if (cfg.cell == Cell::kGru && !cfg.linear_before_reset) {
    hr = region.at<float>(dp.hr);
    std::fill(hr, hr + B * H, 0.f);
  }
  int64_t* step_t =
      region.at<int64_t>(dp.step_t);  // time index of each row this step, -1: finished
  const int64_t max_len = num_lens == 0 ? T : *std::max_element(lens, lens + num_lens);
  for (int64_t s = 0; s < max_len; ++s) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = num_lens == 0 ? T : lens[b];
      step_t[b] = s >= len ? -1 : reverse ? len - 1 - s : s;
    }
    auto xw_row = [&](int64_t b) {
      const int64_t t = step_t[b];
      return xw + (bf ? b * T + t : t * B + b) * GH;
    };
    // 2. Recurrent projection of every batch row (rows already finished are
    // computed too and ignored: one GEMM beats compaction at these sizes).
    if (cfg.quantized)
      MultiplyQ(p.qr[size_t(d)], ctx.kernel_config(), h_prev, B, step_t, rec_bias, rec, &qscratch,
                pool);
    else
      MultiplyT(p.r[size_t(d)], gemm, h_prev, B, H, rec_bias, rec, GH, step_pack, pool,
                /*step=*/s);
    if (cfg.cell == Cell::kGru) {
      // z and r first: the candidate needs r.
      for (int64_t b = 0; b < B; ++b) {
        if (step_t[b] < 0) continue;
        const float* xr = xw_row(b);
        const float* rr = rec + b * GH;
        float* g = gates + b * GH;
        for (int64_t j = 0; j < 2 * H; ++j) g[j] = xr[j] + rr[j];
        Clip(cfg, g, 2 * H);
        Apply(act[0], vm, g, 2 * H);
        if (!cfg.linear_before_reset)
          for (int64_t j = 0; j < H; ++j) hr[b * H + j] = g[H + j] * h_prev[b * H + j];
      }
      // Without linear_before_reset: (r * H_{t-1}) x R_h^T (with it, r multiplies
      // H_{t-1} x R_h^T + Rb_h, which the step's GEMM computed with z and r).
      if (!cfg.linear_before_reset && cfg.quantized)
        MultiplyQ(p.qr_h[size_t(d)], ctx.kernel_config(), hr, B, step_t, nullptr, rh, &qscratch,
                  pool);
      else if (!cfg.linear_before_reset)
        MultiplyT(p.r_h[size_t(d)], gemm, hr, B, H, nullptr, rh, H, step_pack, pool,
                  /*step=*/s);
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t t = step_t[b];
      if (t < 0) continue;
      const float* xr = xw_row(b);
      const float* rr = rec + b * GH;
      float* g = gates + b * GH;
      float* hp = h_prev + b * H;
      if (cfg.cell == Cell::kLstm) {
        // Gates i, o, f, c.
        for (int64_t j = 0; j < GH; ++j) g[j] = xr[j] + rr[j];
        float* gi = g;
        float* go = g + H;
        float* gf = g + 2 * H;
        float* gc = g + 3 * H;
        float* cp = c_prev + b * H;
        if (pi)
          for (int64_t j = 0; j < H; ++j) {
            gi[j] += pi[j] * cp[j];
            gf[j] += pf[j] * cp[j];
          }
        Clip(cfg, gi, H);
        Apply(act[0], vm, gi, H);
        if (cfg.input_forget) {
          for (int64_t j = 0; j < H; ++j) gf[j] = 1.f - gi[j];
        } else {
          Clip(cfg, gf, H);
          Apply(act[0], vm, gf, H);
        }
        Clip(cfg, gc, H);
        Apply(act[1], vm, gc, H);
        for (int64_t j = 0; j < H; ++j) cp[j] = gf[j] * cp[j] + gi[j] * gc[j];
        if (po)
          for (int64_t j = 0; j < H; ++j) go[j] += po[j] * cp[j];
        Clip(cfg, go, H);
        Apply(act[0], vm, go, H);
        // h(C_t) in gc, which is no longer needed.
        std::memcpy(gc, cp, size_t(H) * sizeof(float));
        Apply(act[2], vm, gc, H);
        for (int64_t j = 0; j < H; ++j) hp[j] = go[j] * gc[j];
      } else if (cfg.cell == Cell::kGru) {
        const float* gz = g;
        float* gh = g + 2 * H;
        if (cfg.linear_before_reset) {
          for (int64_t j = 0; j < H; ++j) gh[j] = xr[2 * H + j] + g[H + j] * rr[2 * H + j];
        } else {
          const float* rhb = rh + b * H;
          for (int64_t j = 0; j < H; ++j) gh[j] = xr[2 * H + j] + rhb[j];
        }
        Clip(cfg, gh, H);
        Apply(act[1], vm, gh, H);
        for (int64_t j = 0; j < H; ++j) hp[j] = (1.f - gz[j]) * gh[j] + gz[j] * hp[j];
      } else {
        for (int64_t j = 0; j < H; ++j) g[j] = xr[j] + rr[j];
        Clip(cfg, g, H);
        Apply(act[0], vm, g, H);
        std::memcpy(hp, g, size_t(H) * sizeof(float));
      }
      if (yd)
        std::memcpy(yd + (bf ? (b * T + t) * cfg.dirs + d : (t * cfg.dirs + d) * B + b) * H, hp,
                    size_t(H) * sizeof(float));
    }
  }
  // A row of length 0 has no last step: its Y_h/Y_c are 0 (as in ONNX Runtime),
  // not the initial state.
  for (int64_t b = 0; b < num_lens; ++b)
    if (lens[b] == 0) {
      std::fill(h_prev + b * H, h_prev + (b + 1) * H, 0.f);
      if (c_prev) std::fill(c_prev + b * H, c_prev + (b + 1) * H, 0.f);
    }
  auto store_state = [&](Tensor* out, const float* s) {
    if (!out) return;
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(out->ptr<float>() + (bf ? b * cfg.dirs + d : d * B + b) * H, s + b * H,
                  size_t(H) * sizeof(float));
  };
  store_state(ctx.output(kYh), h_prev);
  if (cfg.cell == Cell::kLstm) store_state(ctx.output(kYc), c_prev);
}

Dims DimsOf(const KernelContext& ctx, const Config& cfg) {
  const Tensor* x = ctx.input(kX);
  const Tensor* r = ctx.input(kR);
  Dims dm;
  dm.seq = x->shape[cfg.layout_batch_first ? 1 : 0];
  dm.batch = x->shape[cfg.layout_batch_first ? 0 : 1];
  dm.in = x->shape[2];
  dm.h = r->shape[cfg.quantized ? 1 : 2];
  dm.gh = r->shape[cfg.quantized ? 2 : 1];
  if (cfg.quantized) {
    dm.scales = QuantScaleCount(ctx);
    dm.zps = QuantZpCount(ctx);
  }
  return dm;
}

// The prepared state when the run can use it (built for these W, R and
// kernels), else null: the run packs its own.
const Packed* UsablePrepared(const KernelContext& ctx, const Config& cfg) {
  const auto* prepared = static_cast<const Packed*>(ctx.state);
  if (!prepared || prepared->w_data != ctx.input(kW)->data ||
      prepared->r_data != ctx.input(kR)->data)
    return nullptr;
  if (cfg.quantized)
    return prepared->gemm_s8 == ctx.kernel_config().gemm_s8 && prepared->qdirs > 0 ? prepared
                                                                                   : nullptr;
  return prepared->gemm == ctx.kernel_config().gemm_f32 ? prepared : nullptr;
}

// A quantized layer's weights as shapes only (W or R not a constant: the
// run packs them, BuildQuantized into its scratch): what PlanRecurrent
// sizes their parts and products from.
void QuantizedShapes(const KernelContext& ctx, const Config& cfg, Packed* p) {
  const kernels::KernelConfig& kc = ctx.kernel_config();
  const Tensor* w = ctx.input(kW);
  const Tensor* r = ctx.input(kR);
  p->gemm_s8 = kc.gemm_s8;
  p->qdirs = cfg.dirs;
  p->has_qr_h = cfg.cell == Cell::kGru && !cfg.linear_before_reset;
  auto shape = [&](QWeight& q, DType dt, int64_t k, int64_t n) {
    q = QWeight();
    q.dtype = dt;
    q.k = k;
    q.n = n;
    q.packed = kernels::QMatMulS8Shape(kc, dt, k, n);
  };
  for (int d = 0; d < cfg.dirs; ++d) {
    shape(p->qw[size_t(d)], w->dtype, w->shape[1], w->shape[2]);
    shape(p->qr[size_t(d)], r->dtype, r->shape[1], r->shape[2]);
    if (p->has_qr_h) shape(p->qr_h[size_t(d)], r->dtype, r->shape[1], r->shape[1]);
  }
}

// OpDef::scratch: the run's buffers (RecurrentParts). Float layers lay them
// out for the session's GEMM (packed in prepare, or plain loops); quantized
// ones for their prepared weights (W and R constant), else with the
// weights the run packs (QuantizedShapes), and this run's scales and zero
// points.
Status RecurrentScratch(KernelContext& ctx, ScratchNeeds* needs) {
  Config cfg;
  QF_RETURN_IF_ERROR(ParseConfig(ctx, &cfg));
  const Packed* prepared = UsablePrepared(ctx, cfg);
  const kernels::GemmF32Kernels* gemm = ctx.kernel_config().gemm_f32;
  Packed shapes;
  if (cfg.quantized && !prepared) QuantizedShapes(ctx, cfg, &shapes);
  needs->run =
      PlanRecurrent(cfg, DimsOf(ctx, cfg), gemm, cfg.quantized && !prepared ? &shapes : prepared,
                    ctx.pool, !prepared && (cfg.quantized || gemm), ctx.kernel_config())
          .layout.total();
  return Status::Ok();
}

Status RunRecurrent(KernelContext& ctx) {
  Config cfg;
  QF_RETURN_IF_ERROR(ParseConfig(ctx, &cfg));
  const Tensor* x = ctx.input(kX);
  const Dims dm = DimsOf(ctx, cfg);
  const kernels::GemmF32Kernels* gemm = ctx.kernel_config().gemm_f32;
  const Packed* prepared = UsablePrepared(ctx, cfg);
  // A layer without usable prepared weights (W or R not a constant) packs
  // them into the scratch, which RecurrentScratch planned with them.
  const bool pack_weights = !prepared && (cfg.quantized || gemm);
  // The quantized weights' copy (std::array and views: nothing allocated)
  // gets this run's parameters.
  Packed local;
  if (cfg.quantized) {
    if (prepared)
      local = *prepared;
    else
      QuantizedShapes(ctx, cfg, &local);
  }
  const RecurrentParts parts = PlanRecurrent(cfg, dm, gemm, cfg.quantized ? &local : prepared,
                                             ctx.pool, pack_weights, ctx.kernel_config());
  const kernels::ScratchRegion region({ctx.scratch, ctx.scratch_size, ctx.scratch_planned},
                                      parts.layout.total());
  if (cfg.quantized) {
    if (!prepared) BuildQuantized(ctx, cfg, &local, &parts.qweights, region.data());
    SetQuantParams(ctx, cfg, &local, region.at<float>(parts.scales), region.at<int32_t>(parts.zps));
    prepared = &local;
  }
  if (!prepared) {
    float* dst[6] = {};
    for (int i = 0; i < 6; ++i) dst[i] = region.at<float>(parts.weights[i]);
    BuildPacked(ctx, cfg, gemm, &local, pack_weights ? dst : nullptr);
    prepared = &local;
  }
  int64_t* lens = region.at<int64_t>(parts.lens);
  int64_t num_lens = 0;
  if (const Tensor* sl = ctx.input(kSeqLens)) {
    for (int64_t b = 0; b < dm.batch; ++b) {
      const int32_t v = sl->ptr<int32_t>()[b];
      if (v < 0 || v > dm.seq)
        return ctx.Invalid("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(v) +
                           " is outside [0, " + std::to_string(dm.seq) + "]");
      lens[b] = v;
    }
    num_lens = dm.batch;
  }
  // Steps past a row's length leave 0 in Y.
  if (Tensor* y = ctx.output(kY); y && num_lens) std::memset(y->data, 0, y->bytes());
  const float* packed_x = nullptr;
  if (!cfg.quantized && prepared->gemm && cfg.dirs == 2 && dm.seq * dm.batch > 0) {
    float* dst = region.at<float>(parts.packed_x);
    prepared->gemm->pack_left(x->ptr<float>(), dm.in, 1, dm.seq * dm.batch, dm.in, dst);
    packed_x = dst;
  }
  const bool in_arena = ctx.scratch_planned;
  if (parts.parallel) {
    // One direction per thread; a late worker leaves both to the caller.
    ctx.pool->ParallelFor(2, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t d = begin; d < end; ++d)
        RunDirection(ctx, cfg, dm, *prepared, int(d), d == 1, lens, num_lens, packed_x, parts,
                     parts.dir[d], region, in_arena, /*pool=*/nullptr);
    });
    return Status::Ok();
  }
  for (int d = 0; d < cfg.dirs; ++d)
    RunDirection(ctx, cfg, dm, *prepared, d, cfg.reverse_only || d == 1, lens, num_lens, packed_x,
                 parts, parts.dir[0], region, in_arena, ctx.pool);
  return Status::Ok();
}

OpDef MakeRecurrentDef(const char* type, int max_inputs) {
  OpDef d{type,
          InferRecurrent,
          RunRecurrent,
          /*value_inputs=*/0,
          /*shape_only=*/false,
          /*min_inputs=*/3,
          max_inputs};
  d.prepare = PrepareRecurrent;
  d.scratch = RecurrentScratch;
  d.const_inputs = (1u << kW) | (1u << kR);
  d.output0_optional = true;  // only Y_h (or Y_c) may be wanted
  return d;
}

}  // namespace

const OpDef& OpDef_LSTM() {
  static const OpDef def = MakeRecurrentDef("LSTM", 8);
  return def;
}
const OpDef& OpDef_GRU() {
  static const OpDef def = MakeRecurrentDef("GRU", 6);
  return def;
}
const OpDef& OpDef_DynamicQuantizeLSTM() {
  static const OpDef def =
      WithTraits(MakeRecurrentDef("DynamicQuantizeLSTM", 12), kTraitIntegerKernel);
  return def;
}
const OpDef& OpDef_QfLSTMInteger() {
  static const OpDef def = WithTraits(MakeRecurrentDef("QfLSTMInteger", 14), kTraitIntegerKernel);
  return def;
}
const OpDef& OpDef_QfRNNInteger() {
  static const OpDef def = WithTraits(MakeRecurrentDef("QfRNNInteger", 14), kTraitIntegerKernel);
  return def;
}
const OpDef& OpDef_QfGRUInteger() {
  static const OpDef def = WithTraits(MakeRecurrentDef("QfGRUInteger", 14), kTraitIntegerKernel);
  return def;
}
const OpDef& OpDef_RNN() {
  static const OpDef def = MakeRecurrentDef("RNN", 6);
  return def;
}

}  // namespace qfold
