// QDQ folding of ConvTranspose (converter/passes/fold_qdq.cc, TryConvTranspose): a model
// written the way quantize_static writes it (Q/DQ of the activation, a constant integer
// weight through DQ, an int32 bias through DQ with scale x_scale * w_scale, Q after the
// op) folds to one QfQLinearConvTranspose, whose output matches the same model converted
// with fold_qdq = false (the literal float path) within one quantization step everywhere
// and exactly on >= 99% of the elements.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;

// Per-tensor quantization parameters of an activation.
struct QP {
  float s;
  int32_t zp;
  int t;  // ONNX element type
};

void InitInts(OnnxBuilder* b, const std::string& name, int elem, const std::vector<int64_t>& dims,
              const std::vector<int32_t>& v) {
  std::string s;
  if (elem == kI32) {
    s.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(&s[0], v.data(), s.size());
  } else {
    for (int32_t x : v) s.push_back(char(uint8_t(x)));
  }
  b->Init(name, elem, dims, s.data(), s.size());
}

// `base`_scale / `base`_zp initializers: scalars for per tensor, 1-D per axis.
void AddParams(OnnxBuilder* b, const std::string& base, const std::vector<float>& s,
               const std::vector<int32_t>& zp, int t) {
  std::vector<int64_t> dims;
  if (s.size() > 1) dims = {int64_t(s.size())};
  b->InitFloat(base + "_scale", dims, s);
  InitInts(b, base + "_zp", t, dims, zp);
}

std::string DQNode(OnnxBuilder* b, const std::string& in, const std::string& base,
                   const std::string& out, int64_t axis, bool per_axis) {
  auto* n =
      b->Node("DequantizeLinear", {in, base + "_scale", base + "_zp"}, {out}, base + "_dequant");
  if (per_axis) OnnxBuilder::AttrInt(n, "axis", axis);
  return out;
}

// in -> QuantizeLinear -> DequantizeLinear; returns the DQ output `out`.
std::string QDQ(OnnxBuilder* b, const std::string& in, const std::string& base, const QP& q,
                const std::string& out) {
  AddParams(b, base, {q.s}, {q.zp}, q.t);
  b->Node("QuantizeLinear", {in, base + "_scale", base + "_zp"}, {base + "_q"}, base + "_quant");
  return DQNode(b, base + "_q", base, out, 1, false);
}

struct Case {
  int xt = kU8;
  int wt = kI8;
  int64_t group = 1;
  bool per_channel = true;
  bool relu = false;
  uint32_t seed = 1;
  int64_t m = 6;
  // Kernel 2 = stride 2, no padding: lowered to QLinearConv 1x1 + DepthToSpace
  // (converter/passes/lower_conv_transpose.cc) instead of QfQLinearConvTranspose.
  bool kernel_is_stride = false;
};

void RunCase(const Case& cc) {
  CAPTURE(cc.xt);
  CAPTURE(cc.wt);
  CAPTURE(cc.group);
  CAPTURE(cc.per_channel);
  CAPTURE(cc.relu);
  CAPTURE(cc.m);
  CAPTURE(cc.kernel_is_stride);
  std::mt19937 rng(cc.seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto uint = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // x [1, 4, 5, 6], w [C=4, M/group, 3, 3], stride 2, pads 1, output_padding 1:
  // out = 2 * (in - 1) + 1 + 3 - 2; with kernel_is_stride, w [4, M, 2, 2]: out = 2 * in.
  const int64_t n = 1, c = 4, h = 5, wd = 6, m = cc.m, mg = m / cc.group;
  const int64_t kk = cc.kernel_is_stride ? 2 : 3;
  const int64_t oh = cc.kernel_is_stride ? 2 * h : 2 * (h - 1) + 1 + 3 - 2;
  const int64_t ow = cc.kernel_is_stride ? 2 * wd : 2 * (wd - 1) + 1 + 3 - 2;
  const QP xq = cc.xt == kU8 ? QP{2.f / 255.f, 128, kU8} : QP{2.f / 255.f, -3, kI8};
  const QP yq = cc.xt == kU8 ? QP{0.02f, 100, kU8} : QP{0.02f, -10, kI8};
  const size_t nsc = cc.per_channel ? size_t(m) : 1;
  std::vector<float> ws(nsc);
  std::vector<int32_t> wzp(nsc);
  for (size_t i = 0; i < nsc; ++i) {
    ws[i] = float(uni(0.008, 0.016));
    wzp[i] = cc.wt == kI8 ? uint(-5, 5) : uint(120, 136);  // asymmetric weights
  }
  std::vector<int32_t> wc(size_t(c * mg * kk * kk));
  for (int32_t& v : wc) v = cc.wt == kI8 ? uint(-127, 127) : uint(0, 255);
  // quantize_static's bias: int32 codes with scale x_scale * w_scale (float32 product).
  std::vector<float> bs(static_cast<size_t>(m));
  std::vector<int32_t> bc(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    bs[size_t(i)] = xq.s * ws[cc.per_channel ? size_t(i) : 0];
    bc[size_t(i)] = int32_t(std::nearbyint(uni(-0.5, 0.5) / bs[size_t(i)]));
  }

  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {n, c, h, wd});
  b.Output("y", kF32, {n, m, oh, ow});
  const std::string x_dq = QDQ(&b, "x", "xin", xq, "x_dq");
  InitInts(&b, "w", cc.wt, {c, mg, kk, kk}, wc);
  AddParams(&b, "w", ws, wzp, cc.wt);
  const std::string w_dq = DQNode(&b, "w", "w", "w_dq", 1, cc.per_channel);
  InitInts(&b, "bias", kI32, {m}, bc);
  AddParams(&b, "bias", bs, std::vector<int32_t>(bs.size(), 0), kI32);
  const std::string b_dq = DQNode(&b, "bias", "bias", "bias_dq", 0, true);
  auto* ct = b.Node("ConvTranspose", {x_dq, w_dq, b_dq}, {"ct_out"}, "convt0");
  OnnxBuilder::AttrInts(ct, "strides", {2, 2});
  if (!cc.kernel_is_stride) {
    OnnxBuilder::AttrInts(ct, "pads", {1, 1, 1, 1});
    OnnxBuilder::AttrInts(ct, "output_padding", {1, 1});
  }
  OnnxBuilder::AttrInts(ct, "kernel_shape", {kk, kk});
  if (cc.group != 1) OnnxBuilder::AttrInt(ct, "group", cc.group);
  std::string pre_q = "ct_out";
  if (cc.relu) {
    b.Node("Relu", {"ct_out"}, {"act_out"}, "relu0");
    pre_q = "act_out";
  }
  QDQ(&b, pre_q, "yout", yq, "y");
  const std::string path = b.Write(dir);

  std::vector<float> x(size_t(n * c * h * wd));
  for (float& v : x) v = float(uni(-1.0, 1.0));
  const Shape xshape = {n, c, h, wd}, yshape = {n, m, oh, ow};
  auto run = [&](bool fold, Graph* g) {
    ConvertOptions opts;
    opts.fold_qdq = fold;
    Converted cv;
    Status st = ConvertAndOpen(path, opts, &cv);
    REQUIRE_MESSAGE(st.ok(), st.message());
    SetFloatInput(cv.session.get(), "x", xshape, x);
    st = cv.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    *g = std::move(cv.graph);
    return FloatOutput(*cv.session, "y", yshape);
  };
  Graph fg, lg;
  const std::vector<float> folded = run(true, &fg);
  const std::vector<float> literal = run(false, &lg);

  const char* folded_op = cc.kernel_is_stride ? "QLinearConv" : "QfQLinearConvTranspose";
  CHECK(CountOps(fg, folded_op) == 1);
  CHECK(CountOps(fg, "DepthToSpace") == (cc.kernel_is_stride ? 1 : 0));
  CHECK(CountOps(fg, "ConvTranspose") == 0);
  CHECK(CountOps(fg, "Relu") == 0);
  CHECK(CountOps(fg, "QuantizeLinear") == 1);
  CHECK(CountOps(fg, "DequantizeLinear") == 1);
  CHECK(CountOps(lg, "QfQLinearConvTranspose") == 0);
  for (const Node& node : fg.nodes) {
    if (node.op_type != folded_op) continue;
    CHECK(node.inputs.size() == 9u);  // with the int32 bias
    if (!cc.kernel_is_stride) CHECK(node.attrs.GetInt("group", 1) == cc.group);
    if (cc.relu) {
      CHECK(node.attrs.GetInt("_qmin", -999) == yq.zp);
    } else {
      CHECK_FALSE(node.attrs.Has("_qmin"));
    }
  }

  REQUIRE(folded.size() == literal.size());
  size_t exact = 0, worst_at = 0;
  int32_t worst = 0, lo = 1 << 20, hi = -(1 << 20);
  for (size_t i = 0; i < folded.size(); ++i) {
    const int32_t a = int32_t(std::nearbyint(double(folded[i]) / yq.s)) + yq.zp;
    const int32_t l = int32_t(std::nearbyint(double(literal[i]) / yq.s)) + yq.zp;
    const int32_t d = std::abs(a - l);
    if (d == 0) ++exact;
    if (d > worst) worst = d, worst_at = i;
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  CHECK_MESSAGE(worst <= 1, "element " << worst_at << " is " << worst << " steps off");
  CHECK_MESSAGE(exact * 100 >= folded.size() * 99,
                "only " << exact << " of " << folded.size() << " exact");
  CHECK(hi - lo > 50);  // the outputs spread over the range
}

TEST_CASE("qdq: ConvTranspose stride 2 with bias -> one QfQLinearConvTranspose") {
  uint32_t seed = 100;
  for (int xt : {kU8, kI8})
    for (int wt : {kI8, kU8}) {
      Case cc;
      cc.xt = xt;
      cc.wt = wt;
      cc.seed = seed++;
      RunCase(cc);
    }
}

TEST_CASE("qdq: ConvTranspose with kernel = stride -> QLinearConv 1x1 + DepthToSpace") {
  // M = 1 with a bias (a segmentation head's last layer): the bias is still
  // repeated for each of the k*k channels (it once stayed 1 value: refused).
  uint32_t seed = 120;
  for (int64_t m : {6, 1})
    for (bool per_channel : {true, false}) {
      Case cc;
      cc.m = m;
      cc.per_channel = per_channel;
      cc.kernel_is_stride = true;
      cc.seed = seed++;
      RunCase(cc);
    }
}

TEST_CASE("qdq: ConvTranspose per-tensor weights, group 2, fused Relu") {
  Case cc;
  cc.per_channel = false;
  cc.seed = 110;
  RunCase(cc);
  cc.group = 2;
  cc.seed = 111;
  RunCase(cc);
  cc.relu = true;
  cc.xt = kI8;
  cc.seed = 112;
  RunCase(cc);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
