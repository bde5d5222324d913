// QDQ dialects of other producers (docs/QDQ.md, "Dialects"): duplicate Q/DQ pairs merged by
// MergeDuplicateQdq (converter/passes/merge_duplicate_qdq.cc), com.microsoft Q/DQ read as the
// standard ops (NormalizeOpsets), float weights through QuantizeLinear folded into integer
// weights, and the reasons FoldQdq records for ops that stay float.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "converter/check/check.h"
#include "converter/onnx_reader.h"
#include "converter/passes/passes.h"
#include "model_impl.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kU16 = onnx::TensorProto::UINT16;
constexpr int kI16 = onnx::TensorProto::INT16;
constexpr int kI4 = 22;  // by number: the generated onnx.proto may predate INT4/UINT4
constexpr int kU4 = 21;

// Scalar scale `name`_s and zero point `name`_z of element type t (no zero point when
// t is 0).
void Params(OnnxBuilder* b, const std::string& name, float s, int32_t zp, int t) {
  b->InitFloat(name + "_s", {}, {s});
  if (t == 0) return;
  int64_t z64 = zp;
  std::string bytes;
  if (t == kI16 || t == kU16) {
    int16_t v = int16_t(zp);
    bytes.assign(reinterpret_cast<const char*>(&v), 2);
  } else {
    bytes.assign(1, char(uint8_t(z64 & (t == kI4 || t == kU4 ? 0xF : 0xFF))));
  }
  b->Init(name + "_z", t, {}, bytes.data(), bytes.size());
}

std::vector<std::string> QIn(const std::string& x, const std::string& p, int t) {
  if (t == 0) return {x, p + "_s"};
  return {x, p + "_s", p + "_z"};
}

// A [8, 4, 1, 1] int8 weight, per channel on axis `axis` (or per tensor when axis < 0).
std::string Weight(OnnxBuilder* b, const std::string& name, int64_t axis,
                   const std::string& domain = "") {
  std::vector<int8_t> w(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = int8_t(int(i * 37 % 255) - 127);
  b->Init(name, kI8, {8, 4, 1, 1}, w.data(), w.size());
  const int64_t n = axis == 1 ? 4 : 8;
  if (axis < 0) {
    b->InitFloat(name + "_s", {}, {0.01f});
    b->Init(name + "_z", kI8, {}, "\0", 1);
  } else {
    std::vector<float> s(size_t(n), 0.01f);
    for (size_t i = 0; i < s.size(); ++i) s[i] += 0.001f * float(i);
    b->InitFloat(name + "_s", {n}, s);
    std::vector<int8_t> z(size_t(n), 0);
    b->Init(name + "_z", kI8, {n}, z.data(), z.size());
  }
  auto* dq = b->Node("DequantizeLinear", {name, name + "_s", name + "_z"}, {name + "_dq"},
                     name + "_dequant", domain);
  if (axis >= 0) OnnxBuilder::AttrInt(dq, "axis", axis);
  return name + "_dq";
}

Graph ReadMerged(const std::string& path) {
  Graph g;
  Status st = ReadOnnxModel(path, &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(NormalizeOpsets(&g).ok());
  REQUIRE(VerifyGraph(&g).ok());
  st = MergeDuplicateQdq(&g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(VerifyGraph(&g).ok());
  return g;
}

Graph Optimized(const std::string& path) {
  Graph g;
  Status st = LoadAndOptimize(path, ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return g;
}

const Node* Named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

// x -> {Q_i -> DQ_i -> Conv_i -> Q -> DQ -> y_i} for i = 0, 1: one pair per consumer, as
// quantize_static writes with DedicatedQDQPair. The second pair's parameters are separate
// initializers: equal contents unless `other_scale`/`other_axis`.
std::string DedicatedPairs(const TempDir& dir, bool other_scale, bool other_zp_type = false) {
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 3, 3});
  for (int i = 0; i < 2; ++i) {
    const std::string p = "xq" + std::to_string(i), s = std::to_string(i);
    Params(&b, p, i == 1 && other_scale ? 0.021f : 0.02f, 128, i == 1 && other_zp_type ? kI8 : kU8);
    b.Node("QuantizeLinear", QIn("x", p, kU8), {p + "_q"}, p + "_quant");
    b.Node("DequantizeLinear", QIn(p + "_q", p, kU8), {p + "_dq"}, p + "_dequant");
    std::string w = Weight(&b, "w" + s, 0);
    b.Node("Conv", {p + "_dq", w}, {"c" + s}, "conv" + s);
    Params(&b, "y" + s, 0.05f, 120, kU8);
    b.Node("QuantizeLinear", QIn("c" + s, "y" + s, kU8), {"y" + s + "_q"}, "y" + s + "_quant");
    b.Node("DequantizeLinear", QIn("y" + s + "_q", "y" + s, kU8), {"y" + s}, "y" + s + "_deq");
    b.Output("y" + s, kF32, {1, 8, 3, 3});
  }
  return b.Write(dir);
}

TEST_CASE("merge_duplicate_qdq: one Q -> DQ pair per consumer becomes one pair") {
  TempDir dir;
  Graph g = ReadMerged(DedicatedPairs(dir, false));
  CHECK(CountOps(g, "QuantizeLinear") == 3);    // x's one Q and the two outputs'
  CHECK(CountOps(g, "DequantizeLinear") == 5);  // x's one DQ, two weights, two outputs
  const Node* c0 = Named(g, "conv0");
  const Node* c1 = Named(g, "conv1");
  REQUIRE(c0 != nullptr);
  REQUIRE(c1 != nullptr);
  CHECK(c0->inputs[0] == c1->inputs[0]);
  CHECK(g.Find("xq1_q") == nullptr);
  CHECK(g.Find("xq1_dq") == nullptr);

  // And the whole pipeline folds both convolutions.
  Graph o = Optimized(DedicatedPairs(dir, false));
  CHECK(CountOps(o, "QLinearConv") == 2);
  CHECK(CountOps(o, "Conv") == 0);
}

TEST_CASE("merge_duplicate_qdq: other parameter contents or types stay apart") {
  TempDir dir;
  Graph g = ReadMerged(DedicatedPairs(dir, true));
  CHECK(CountOps(g, "QuantizeLinear") == 4);
  CHECK(CountOps(g, "DequantizeLinear") == 6);
  Graph h = ReadMerged(DedicatedPairs(dir, false, /*other_zp_type=*/true));
  CHECK(CountOps(h, "QuantizeLinear") == 4);
}

TEST_CASE("merge_duplicate_qdq: attributes and graph outputs are respected") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {2, 3});
  b.InitFloat("s", {2}, {0.1f, 0.2f});
  b.InitFloat("s_copy", {2}, {0.1f, 0.2f});
  // Same contents; axis 0 twice (merge), axis 1 on a [2] scale would differ in meaning.
  auto* q0 = b.Node("QuantizeLinear", {"x", "s"}, {"q0"}, "q0");
  OnnxBuilder::AttrInt(q0, "axis", 0);
  auto* q1 = b.Node("QuantizeLinear", {"x", "s_copy"}, {"q1"}, "q1");
  OnnxBuilder::AttrInt(q1, "axis", 0);
  b.InitFloat("t", {3}, {0.1f, 0.2f, 0.3f});
  b.InitFloat("t_copy", {3}, {0.1f, 0.2f, 0.3f});
  auto* q2 = b.Node("QuantizeLinear", {"x", "t"}, {"q2"}, "q2");
  OnnxBuilder::AttrInt(q2, "axis", 1);
  // A duplicate that is itself a graph output keeps its name and node.
  auto* q3 = b.Node("QuantizeLinear", {"x", "t_copy"}, {"q3"}, "q3");
  OnnxBuilder::AttrInt(q3, "axis", 1);
  b.Node("Identity", {"q1"}, {"out1"}, "id1");
  b.Node("Identity", {"q0"}, {"out0"}, "id0");
  b.Node("Identity", {"q2"}, {"out2"}, "id2");
  b.Output("out0", kU8, {2, 3});
  b.Output("out1", kU8, {2, 3});
  b.Output("out2", kU8, {2, 3});
  b.Output("q3", kU8, {2, 3});
  Graph g = ReadMerged(b.Write(dir));
  CHECK(CountOps(g, "QuantizeLinear") == 3);  // q1 merged into q0; q3 kept (graph output)
  CHECK(Named(g, "id1")->inputs[0] == "q0");
  CHECK(Named(g, "id2")->inputs[0] == "q2");
  CHECK(Named(g, "q3") != nullptr);
}

TEST_CASE(
    "qdq dialects: com.microsoft QuantizeLinear/DequantizeLinear fold like the standard ops") {
  TempDir dir;
  OnnxBuilder b(13);
  b.AddOpset("com.microsoft", 1);
  b.Input("x", kF32, {1, 4, 3, 3});
  Params(&b, "xq", 0.02f, 128, kU8);
  b.Node("QuantizeLinear", QIn("x", "xq", kU8), {"x_q"}, "x_quant", "com.microsoft");
  b.Node("DequantizeLinear", QIn("x_q", "xq", kU8), {"x_dq"}, "x_dequant", "com.microsoft");
  std::string w = Weight(&b, "w", 0, "com.microsoft");
  b.Node("Conv", {"x_dq", w}, {"c"}, "conv");
  // No zero point: uint8 with zero point 0, as for the standard op.
  Params(&b, "yq", 0.05f, 0, 0);
  b.Node("QuantizeLinear", QIn("c", "yq", 0), {"y_q"}, "y_quant", "com.microsoft");
  b.Node("DequantizeLinear", QIn("y_q", "yq", 0), {"y"}, "y_dequant", "com.microsoft");
  b.Output("y", kF32, {1, 8, 3, 3});
  Graph g = Optimized(b.Write(dir));
  CHECK(CountOps(g, "QLinearConv") == 1);
  CHECK(CountOps(g, "Conv") == 0);
  for (const Node& n : g.nodes) {
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") CHECK(n.domain.empty());
    if (n.op_type == "QLinearConv") CHECK(g.Find(n.inputs[7])->dtype == DType::kUInt8);
  }
}

// x -> contrib Q (type t, zero point zp) -> contrib DQ -> y, run against the ONNX formula.
void RunContribRoundTrip(int t, int32_t zp, int32_t lo, int32_t hi) {
  CAPTURE(t);
  TempDir dir;
  OnnxBuilder b(13);
  b.AddOpset("com.microsoft", 1);
  b.Input("x", kF32, {64});
  const float s = 0.5f;  // a power of two: x / s and the ties below are exact
  Params(&b, "p", s, zp, t);
  b.Node("QuantizeLinear", QIn("x", "p", t), {"q"}, "quant", "com.microsoft");
  b.Node("DequantizeLinear", QIn("q", "p", t), {"y"}, "dequant", "com.microsoft");
  b.Output("y", kF32, {64});
  // Codes from 20 below the range to 20 above it, every third one a tie (k + 0.5 steps).
  std::vector<float> x(64);
  const double span = double(hi - lo + 40);
  for (size_t i = 0; i < x.size(); ++i) {
    double steps = std::floor(double(lo - zp - 20) + span * double(i) / 63.0);
    x[i] = float((steps + (i % 3 == 0 ? 0.5 : i % 3 == 1 ? 0.25 : -0.375)) * s);
  }
  x[1] = 2.5f * s;   // half to even: 2
  x[2] = -3.5f * s;  // -4
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "x", {64}, x);
  REQUIRE(c.session->Run().ok());
  std::vector<float> y = FloatOutput(*c.session, "y", {64});
  for (size_t i = 0; i < x.size(); ++i) {
    double q = std::nearbyint(double(x[i]) / double(s)) + zp;
    q = std::min<double>(hi, std::max<double>(lo, q));
    CHECK_MESSAGE(y[i] == float((q - zp) * double(s)), "element " << i << " x=" << x[i]);
  }
}

TEST_CASE("qdq dialects: com.microsoft Q/DQ of every contrib type run with ONNX semantics") {
  RunContribRoundTrip(kU8, 100, 0, 255);
  RunContribRoundTrip(kI8, -3, -128, 127);
  RunContribRoundTrip(kU16, 30000, 0, 65535);
  RunContribRoundTrip(kI16, 7, -32768, 32767);
  RunContribRoundTrip(kI4, 1, -8, 7);
  RunContribRoundTrip(kU4, 9, 0, 15);
}

TEST_CASE(
    "qdq dialects: a com.microsoft int4 weight DequantizeLinear feeds the weight-only MatMul") {
  // A [4, 6] int4 weight, per column (axis 1), through the contrib DQ into MatMul: the same
  // QfMatMulWeightQ as the standard op gives, and the same numbers as the float path.
  TempDir dir;
  OnnxBuilder b(13);
  b.AddOpset("com.microsoft", 1);
  b.Input("a", kF32, {2, 4});
  std::string codes;
  for (int i = 0; i < 24; i += 2)
    codes.push_back(char(uint8_t(((i * 5) % 16) | ((((i + 1) * 7) % 16) << 4))));
  b.Init("w", kI4, {4, 6}, codes.data(), codes.size());
  b.InitFloat("w_s", {6}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  auto* dq = b.Node("DequantizeLinear", {"w", "w_s"}, {"w_dq"}, "w_dequant", "com.microsoft");
  OnnxBuilder::AttrInt(dq, "axis", 1);
  b.Node("MatMul", {"a", "w_dq"}, {"y"}, "matmul");
  b.Output("y", kF32, {2, 6});
  const std::string path = b.Write(dir);
  std::vector<float> a = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 0.f, -2.f};
  std::vector<std::vector<float>> outs;
  for (bool fold : {true, false}) {
    ConvertOptions opts;
    opts.fold_qdq = fold;
    Converted c;
    Status st = ConvertAndOpen(path, opts, &c);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(CountOps(c.graph, "QfMatMulWeightQ") == (fold ? 1u : 0u));
    SetFloatInput(c.session.get(), "a", {2, 4}, a);
    REQUIRE(c.session->Run().ok());
    outs.push_back(FloatOutput(*c.session, "y", {2, 6}));
  }
  // int4 codes, sign-extended, times the column scale.
  for (int r = 0; r < 2; ++r)
    for (int col = 0; col < 6; ++col) {
      double want = 0;
      for (int k = 0; k < 4; ++k) {
        const int i = k * 6 + col;
        int code = i % 2 == 0 ? (i * 5) % 16 : (i * 7) % 16;
        if (code > 7) code -= 16;
        want += double(a[size_t(r * 4 + k)]) * code * (0.1 * (col + 1));
      }
      CHECK(std::abs(outs[0][size_t(r * 6 + col)] - want) <= 1e-4);
      CHECK(std::abs(outs[1][size_t(r * 6 + col)] - want) <= 1e-4);
    }
}

TEST_CASE("qdq dialects: a float weight through QuantizeLinear folds with half-to-even rounding") {
  // W_f -> Q(per channel, int8) -> DQ -> Conv: the integer weight of the QLinearConv must be
  // saturate(round_half_even(W_f / s) + zp), computed here.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 3, 3});
  Params(&b, "xq", 0.02f, 128, kU8);
  b.Node("QuantizeLinear", QIn("x", "xq", kU8), {"x_q"}, "x_quant");
  b.Node("DequantizeLinear", QIn("x_q", "xq", kU8), {"x_dq"}, "x_dequant");
  const std::vector<float> ws = {0.5f, 0.25f};  // exact in binary: ties stay ties
  const std::vector<int8_t> wz = {0, 3};
  std::vector<float> wf(2 * 4);
  const float steps[8] = {2.5f, 3.5f, -2.5f, -0.5f, 300.f, -300.f, 1.49f, 0.51f};
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = steps[i] * ws[i / 4];
  b.InitFloat("wf", {2, 4, 1, 1}, wf);
  b.InitFloat("w_s", {2}, ws);
  b.Init("w_z", kI8, {2}, wz.data(), 2);
  auto* q = b.Node("QuantizeLinear", {"wf", "w_s", "w_z"}, {"w_q"}, "w_quant");
  OnnxBuilder::AttrInt(q, "axis", 0);
  auto* dq = b.Node("DequantizeLinear", {"w_q", "w_s", "w_z"}, {"w_dq"}, "w_dequant");
  OnnxBuilder::AttrInt(dq, "axis", 0);
  b.Node("Conv", {"x_dq", "w_dq"}, {"c"}, "conv");
  Params(&b, "yq", 0.05f, 120, kU8);
  b.Node("QuantizeLinear", QIn("c", "yq", kU8), {"y_q"}, "y_quant");
  b.Node("DequantizeLinear", QIn("y_q", "yq", kU8), {"y"}, "y_dequant");
  b.Output("y", kF32, {1, 2, 3, 3});
  Graph g = Optimized(b.Write(dir));
  REQUIRE(CountOps(g, "QLinearConv") == 1);
  const Node* qc = nullptr;
  for (const Node& n : g.nodes)
    if (n.op_type == "QLinearConv") qc = &n;
  const Value* w = g.Find(qc->inputs[3]);
  REQUIRE(w != nullptr);
  REQUIRE(w->is_constant());
  REQUIRE(w->dtype == DType::kInt8);
  // steps + zp, rounded half to even, saturated to [-128, 127].
  const int8_t want[8] = {2, 4, -2, 0, 127, -128, 4, 4};
  for (size_t i = 0; i < 8; ++i)
    CHECK_MESSAGE(int8_t((*w->data)[i]) == want[i], "weight element " << i);
}

// x -> Q -> DQ -> Conv(weight on `waxis`) -> `after` -> ...: returns the Conv's float_reason.
std::string ReasonFor(int xt, int64_t waxis, bool float_consumer) {
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("x", kF32, {1, 4, 3, 3});
  Params(&b, "xq", 0.02f, 100, xt);
  b.Node("QuantizeLinear", QIn("x", "xq", xt), {"x_q"}, "x_quant");
  b.Node("DequantizeLinear", QIn("x_q", "xq", xt), {"x_dq"}, "x_dequant");
  std::string w = Weight(&b, "w", waxis);
  b.Node("Conv", {"x_dq", w}, {"c"}, "conv");
  std::string pre_q = "c";
  if (float_consumer) {
    b.Node("Softmax", {"c"}, {"sm"}, "softmax");
    pre_q = "sm";
  }
  Params(&b, "yq", 0.05f, 120, xt);
  b.Node("QuantizeLinear", QIn(pre_q, "yq", xt), {"y_q"}, "y_quant");
  b.Node("DequantizeLinear", QIn("y_q", "yq", xt), {"y"}, "y_dequant");
  b.Output("y", kF32, {1, 8, 3, 3});
  Graph g = Optimized(b.Write(dir));
  const Node* conv = Named(g, "conv");
  REQUIRE(conv != nullptr);
  if (conv->op_type != "Conv") return "(folded to " + conv->op_type + ")";
  return conv->float_reason;
}

TEST_CASE("fold_qdq: an op that stays float records the rule that failed") {
  CHECK(ReasonFor(kU8, 0, false) == "(folded to QLinearConv)");
  // 16-bit activations fold too (a16w8 kernels).
  CHECK(ReasonFor(kU16, 0, false) == "(folded to QLinearConv)");
  CHECK(ReasonFor(kI16, -1, false) == "(folded to QLinearConv)");
  CHECK(ReasonFor(kU8, 1, false) == "weight axis 1 != 0");
  // A float consumer no longer keeps a Conv float: it runs integer with a float epilogue
  // (fold_qdq_float_output), so the reason FoldQdq recorded is gone with the Conv.
  CHECK(ReasonFor(kU8, 0, true) == "(folded to QfConvDequant)");
}

TEST_CASE("fold_qdq: the reason reaches the .qfm for qfold inspect") {
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("x", kF32, {1, 4, 3, 3});
  Params(&b, "xq", 0.02f, 100, kU8);
  b.Node("QuantizeLinear", QIn("x", "xq", kU8), {"x_q"}, "x_quant");
  b.Node("DequantizeLinear", QIn("x_q", "xq", kU8), {"x_dq"}, "x_dequant");
  b.Node("Conv", {"x_dq", Weight(&b, "w", 1)}, {"y"}, "conv");
  b.Output("y", kF32, {1, 8, 3, 3});
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const Node* conv = Named(c.graph, "conv");
  REQUIRE(conv != nullptr);
  CHECK(conv->float_reason == "weight axis 1 != 0");
  // The loaded model carries it on the operator (what qfold inspect reads).
  const auto* ops = c.model->impl()->fb->operators();
  bool found = false;
  for (uint32_t i = 0; i < ops->size(); ++i)
    if (ops->Get(i)->name()->str() == "conv") {
      REQUIRE(ops->Get(i)->float_reason() != nullptr);
      CHECK(ops->Get(i)->float_reason()->str() == "weight axis 1 != 0");
      found = true;
    }
  CHECK(found);

  // qfold check: a Q/DQ model whose heavy ops mostly stay float is a warning, with the reason.
  check::Report r;
  REQUIRE(check::CheckModel(dir.File("model.onnx"), check::CheckOptions(), &r).ok());
  bool warned = false;
  for (const check::Issue& i : r.issues)
    if (i.code == "quant_mostly_float") {
      warned = true;
      CHECK(i.severity == check::Severity::kWarning);
      CHECK_MESSAGE(Contains(i.message, "1 of 1"), i.message);
      CHECK_MESSAGE(Contains(i.message, "weight axis 1 != 0"), i.message);
    }
  CHECK(warned);
}

TEST_CASE("qfold check: a model whose heavy ops fold has no quant_mostly_float warning") {
  TempDir dir;
  DedicatedPairs(dir, false);
  check::Report r;
  REQUIRE(check::CheckModel(dir.File("model.onnx"), check::CheckOptions(), &r).ok());
  for (const check::Issue& i : r.issues) CHECK_MESSAGE(i.code != "quant_mostly_float", i.message);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
