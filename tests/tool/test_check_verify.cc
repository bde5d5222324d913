// Tests for `qfold verify` (converter/check/verify.cc): a 3-Conv QDQ model
// converted normally matches its unfolded reference; a .qfm built from the same
// graph with one layer's weight scales changed is caught, and that layer is
// named as the first bad one.
#include <doctest/doctest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "converter/check/verify.h"
#include "converter/qfm_writer.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI8 = onnx::TensorProto::INT8;

void InitI8(OnnxBuilder* b, const std::string& name, const std::vector<int64_t>& dims,
            const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s.push_back(char(int8_t(x)));
  b->Init(name, kI8, dims, s.data(), s.size());
}

// DQ(Q(in)) -> Conv(3x3, pad 1, per-channel int8 weights) -> Q -> `p`q (int8).
std::string Layer(OnnxBuilder* b, const std::string& in_q, const std::string& p, int c,
                  std::mt19937* rng) {
  std::uniform_int_distribution<int> code(-40, 40);
  std::vector<int32_t> w(size_t(c * c * 9));
  for (int32_t& v : w) v = code(*rng);
  InitI8(b, p + "_w", {c, c, 3, 3}, w);
  std::vector<float> ws(static_cast<size_t>(c));
  for (int i = 0; i < c; ++i) ws[size_t(i)] = 0.004f + 0.001f * float(i);
  b->InitFloat(p + "_ws", {c}, ws);
  InitI8(b, p + "_wz", {c}, std::vector<int32_t>(size_t(c), 0));
  auto* dw =
      b->Node("DequantizeLinear", {p + "_w", p + "_ws", p + "_wz"}, {p + "_wd"}, p + "_dq_w");
  OnnxBuilder::AttrInt(dw, "axis", 0);
  b->Node("DequantizeLinear", {in_q, "s", "z"}, {p + "_xd"}, p + "_dq_x");
  auto* conv = b->Node("Conv", {p + "_xd", p + "_wd"}, {p + "_y"}, p);
  OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  b->Node("QuantizeLinear", {p + "_y", "s", "z"}, {p + "_q"}, p + "_q_y");
  return p + "_q";
}

std::string ThreeConvModel(const TempDir& dir) {
  std::mt19937 rng(7);
  OnnxBuilder b(17);
  const int c = 4;
  b.Input("x", kF32, {1, c, 6, 6});
  b.InitFloat("s", {}, {1.f / 64});  // one activation scale everywhere: range +-2
  InitI8(&b, "z", {}, {0});
  b.Node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  std::string t = Layer(&b, "x_q", "conv1", c, &rng);
  t = Layer(&b, t, "conv2", c, &rng);
  t = Layer(&b, t, "conv3", c, &rng);
  b.Node("DequantizeLinear", {t, "s", "z"}, {"y"}, "dq_y");
  b.Output("y", kF32, {1, c, 6, 6});
  return b.Write(dir);
}

// Converts normally; with `broken`, conv2's weight scale of every odd channel is doubled.
std::string WriteQfm(const TempDir& dir, const std::string& onnx, bool broken,
                     const std::string& file) {
  Graph g;
  Status st = LoadAndOptimize(onnx, ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  if (broken) {
    bool found = false;
    for (const Node& n : g.nodes) {
      if (n.name != "conv2") continue;
      REQUIRE(n.op_type == "QLinearConv");
      Value* s = g.Find(n.input(4));
      REQUIRE(s != nullptr);
      std::vector<float> v(s->data->size() / 4);
      std::memcpy(v.data(), s->data->data(), s->data->size());
      REQUIRE(v.size() == 4);
      for (size_t i = 1; i < v.size(); i += 2) v[i] *= 2;
      std::vector<uint8_t> bytes(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
      s->data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
      found = true;
    }
    REQUIRE(found);
  }
  std::vector<uint8_t> bytes;
  st = SerializeQfm(g, &bytes);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::string path = dir.File(file);
  WriteBytes(path, std::string(bytes.begin(), bytes.end()));
  return path;
}

const check::TensorDiff* Find(const std::vector<check::TensorDiff>& v, const std::string& name) {
  for (const check::TensorDiff& d : v)
    if (d.name == name) return &d;
  return nullptr;
}

TEST_CASE("verify: the folded int8 model matches the unfolded reference, per output and layer") {
  TempDir dir;
  std::string onnx = ThreeConvModel(dir);
  std::string qfm = WriteQfm(dir, onnx, false, "good.qfm");
  check::VerifyOptions o;
  o.per_layer = true;
  check::VerifyResult r;
  Status st = check::VerifyModel(onnx, qfm, o, &r);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(r.first_bad.empty());
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].name == "y");
  CHECK(r.outputs[0].cosine > 0.999);
  // Each QLinearConv output is compared, in order, in quantization steps (at most 1 apart).
  std::vector<std::string> names;
  for (const check::TensorDiff& d : r.layers) names.push_back(d.name);
  const check::TensorDiff* c1 = Find(r.layers, "conv1_q");
  const check::TensorDiff* c3 = Find(r.layers, "conv3_q");
  REQUIRE(c1 != nullptr);
  REQUIRE(c3 != nullptr);
  CHECK(c1->op_type == "QLinearConv");
  CHECK(c1->node == "conv1");
  CHECK(c1->max_steps <= 1.0);
  CHECK(c1->cosine > 0.999);
  CHECK(c1 < c3);  // topological order
  CHECK(r.inputs.size() == 1);
  CHECK(r.inputs[0].shape == Shape{1, 4, 6, 6});
}

TEST_CASE("verify: a wrong weight scale in one layer is found as the first bad layer") {
  TempDir dir;
  std::string onnx = ThreeConvModel(dir);
  std::string qfm = WriteQfm(dir, onnx, true, "broken.qfm");
  check::VerifyOptions o;
  o.per_layer = true;
  check::VerifyResult r;
  Status st = check::VerifyModel(onnx, qfm, o, &r);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(r.first_bad == "conv2_q");
  const check::TensorDiff* c1 = Find(r.layers, "conv1_q");
  const check::TensorDiff* c2 = Find(r.layers, "conv2_q");
  REQUIRE(c1 != nullptr);
  REQUIRE(c2 != nullptr);
  CHECK(c1->cosine > 0.999);
  CHECK(c2->cosine < 0.99);
  CHECK(c2->node == "conv2");
  CHECK(c2->max_steps > 2);
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].cosine < 0.99);

  nlohmann::json j = nlohmann::json::parse(check::VerifyJson(r, o));
  CHECK(j["first_bad"] == "conv2_q");
  CHECK(j["threshold"] == 0.99);
  bool saw = false;
  for (const auto& l : j["layers"])
    if (l["name"] == "conv2_q") {
      saw = true;
      CHECK(l["ok"] == false);
    }
  CHECK(saw);
  std::string text = check::VerifyText(r, o);
  CHECK(Contains(text, "first bad layer: conv2_q (QLinearConv 'conv2'), cosine "));
  std::string html = check::VerifyHtml(r, o, "broken");
  CHECK(Contains(html, "<svg"));
  CHECK(Contains(html, "conv2_q"));
  CHECK(!Contains(html, "<script"));
  CHECK(!Contains(html, "<link"));

  // Without --per-layer only the output is compared, and it is the first bad one.
  o.per_layer = false;
  st = check::VerifyModel(onnx, qfm, o, &r);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(r.layers.empty());
  CHECK(r.first_bad == "y");
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
