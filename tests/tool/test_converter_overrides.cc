// Input-shape overrides, layout recording and --input-layout: what the user
// gives at conversion must keep the model's external shapes, and every
// contradiction names the input, the node and both shapes.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

// x ("batch", 3, "height", "width") -> Conv 3->2, 1x1, weights w[o][c] = o + 1 -> y.
std::string ConvModel(const TempDir& dir, std::vector<int64_t> in_dims) {
  OnnxBuilder b(13);
  b.Input("x", kFloat, in_dims, "batch");
  // Name the spatial symbolic dims so --dim can address them.
  auto* shape = b.graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  if (in_dims.size() == 4 && in_dims[2] < 0) shape->mutable_dim(2)->set_dim_param("height");
  if (in_dims.size() == 4 && in_dims[3] < 0) shape->mutable_dim(3)->set_dim_param("width");
  b.Output("y", kFloat, {-1, 2, -1, -1}, "batch");
  b.InitFloat("w", {2, 3, 1, 1}, {1, 1, 1, 2, 2, 2});
  b.Node("Conv", {"x", "w"}, {"y"}, "/stem/conv");
  return b.Write(dir);
}

TEST_CASE("overrides: --input-shape fixes symbolic dims and keeps NCHW") {
  TempDir dir;
  std::string path = ConvModel(dir, {-1, 3, -1, -1});
  ConvertOptions opts;
  opts.input_shapes["x"] = {1, 3, 416, 416};
  Converted c;
  Status st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const TensorInfo& in = c.model->inputs()[0];
  CHECK(in.shape == Shape{1, 3, 416, 416});
  CHECK(in.layout == Layout::kNCHW);
  CHECK(in.batch_axis == 0);
  CHECK(in.channel_axis == 1);
  CHECK(c.model->outputs()[0].layout == Layout::kNCHW);
  CHECK(c.model->outputs()[0].shape == Shape{1, 2, 416, 416});
}

TEST_CASE("overrides: --dim sets a named symbolic dim everywhere") {
  TempDir dir;
  std::string path = ConvModel(dir, {-1, 3, -1, -1});
  ConvertOptions opts;
  opts.dims["batch"] = 2;
  opts.dims["height"] = 8;
  Converted c;
  Status st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const TensorInfo& in = c.model->inputs()[0];
  CHECK(in.shape[0] == 2);
  CHECK(in.shape[2] == 8);
  CHECK(in.shape[3] == -1);  // width stays symbolic
  CHECK(in.dim_names[3] == "width");
}

TEST_CASE("overrides: batch/channel swap is named with the fix") {
  TempDir dir;
  std::string path = ConvModel(dir, {-1, 3, -1, -1});
  ConvertOptions opts;
  opts.input_shapes["x"] = {3, 1, 416, 416};
  Graph g;
  Status st = LoadAndOptimize(path, opts, &g);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kInvalidArgument);
  INFO(st.message());
  CHECK(Contains(st.message(), "input 'x'"));
  CHECK(Contains(st.message(), "(3,1,416,416)"));
  CHECK(Contains(st.message(), "Conv '/stem/conv' needs 3 channels at axis 1"));
  CHECK(Contains(st.message(), "axes 0 and 1 look swapped"));
  CHECK(Contains(st.message(), "(1,3,416,416)"));
}

TEST_CASE("overrides: a QLinearConv's channels come from its weight input (w, input 3)") {
  // x -> QuantizeLinear -> QLinearConv 3->2 (1x1) -> DequantizeLinear -> y.
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("x", kFloat, {-1, 3, -1, -1}, "batch");
  b.Output("y", kFloat, {-1, 2, -1, -1}, "batch");
  constexpr int kU8 = onnx::TensorProto::UINT8;
  const uint8_t zero = 0;
  const std::vector<uint8_t> w(6, 1);
  b.InitFloat("s", {}, {0.1f});
  b.Init("z", kU8, {}, &zero, 1);
  b.Init("w", kU8, {2, 3, 1, 1}, w.data(), w.size());
  b.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "/q");
  b.Node("QLinearConv", {"xq", "s", "z", "w", "s", "z", "s", "z"}, {"yq"}, "/stem/qconv");
  b.Node("DequantizeLinear", {"yq", "s", "z"}, {"y"}, "/dq");
  ConvertOptions opts;
  opts.input_shapes["x"] = {3, 1, 416, 416};
  Graph g;
  Status st = LoadAndOptimize(b.Write(dir), opts, &g);
  REQUIRE_FALSE(st.ok());
  INFO(st.message());
  CHECK(Contains(st.message(), "QLinearConv '/stem/qconv' needs 3 channels at axis 1"));
  CHECK(Contains(st.message(), "axes 0 and 1 look swapped"));
}

TEST_CASE("overrides: contradicting a fixed dim names both shapes") {
  TempDir dir;
  std::string path = ConvModel(dir, {1, 3, 32, 32});
  ConvertOptions opts;
  opts.input_shapes["x"] = {1, 3, 64, 64};
  Graph g;
  Status st = LoadAndOptimize(path, opts, &g);
  REQUIRE_FALSE(st.ok());
  INFO(st.message());
  CHECK(Contains(st.message(), "input 'x' is declared (1,3,32,32)"));
  CHECK(Contains(st.message(), "axis 2 fixed at 32"));
  CHECK(Contains(st.message(), "(1,3,64,64)"));
}

TEST_CASE("overrides: unknown names, wrong rank and unknown dims are refused") {
  TempDir dir;
  std::string path = ConvModel(dir, {-1, 3, -1, -1});
  Graph g;
  ConvertOptions a;
  a.input_shapes["images"] = {1, 3, 8, 8};
  Status st = LoadAndOptimize(path, a, &g);
  CHECK(Contains(st.message(), "'images', which is not a graph input; inputs: 'x'"));
  ConvertOptions b;
  b.input_shapes["x"] = {3, 8, 8};
  st = LoadAndOptimize(path, b, &g);
  CHECK(Contains(st.message(), "rank 3"));
  ConvertOptions c;
  c.dims["seq"] = 4;
  st = LoadAndOptimize(path, c, &g);
  CHECK(Contains(st.message(), "'seq', which no input uses; symbolic dims: batch, height, width"));
}

TEST_CASE("overrides: --input-layout NHWC feeds channels-last data to an NCHW model") {
  TempDir dir;
  std::string path = ConvModel(dir, {1, 3, 2, 2});
  ConvertOptions opts;
  opts.input_layouts["x"] = "NHWC";
  Converted c;
  Status st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const TensorInfo& in = c.model->inputs()[0];
  CHECK(in.shape == Shape{1, 2, 2, 3});
  CHECK(in.layout == Layout::kNHWC);
  CHECK(in.channel_axis == 3);
  // NHWC data: pixel p has channels (p, 10p, 100p); y[o][p] = (o+1) * 111p.
  std::vector<float> x;
  for (int p = 0; p < 4; ++p) x.insert(x.end(), {float(p), 10.f * p, 100.f * p});
  SetFloatInput(c.session.get(), "x", {1, 2, 2, 3}, x);
  REQUIRE(c.session->Run().ok());
  std::vector<float> y = FloatOutput(*c.session, "y", {1, 2, 2, 2});
  for (int o = 0; o < 2; ++o)
    for (int p = 0; p < 4; ++p) CHECK(y[o * 4 + p] == doctest::Approx((o + 1) * 111.0 * p));
}

TEST_CASE("overrides: runtime resize names a batch/channel swap") {
  TempDir dir;
  std::string path = ConvModel(dir, {-1, 3, -1, -1});
  Converted c;
  Status st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  st = c.session->ResizeInput("x", {3, 1, 416, 416});
  REQUIRE_FALSE(st.ok());
  INFO(st.message());
  CHECK(Contains(st.message(), "fixed dim 3 at axis 1"));
  CHECK(Contains(st.message(), "axes 0 and 1 look swapped: did you mean (1,3,416,416)?"));
  // The same session serves two sizes.
  for (int64_t hw : {4, 6}) {
    REQUIRE(c.session->ResizeInput("x", {1, 3, hw, hw}).ok());
    std::vector<float> x(size_t(3 * hw * hw), 1.f);
    SetFloatInput(c.session.get(), "x", {1, 3, hw, hw}, x);
    REQUIRE(c.session->Run().ok());
    std::vector<float> y = FloatOutput(*c.session, "y", {1, 2, hw, hw});
    CHECK(y.front() == doctest::Approx(3.0));
    CHECK(y.back() == doctest::Approx(6.0));
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold

namespace qfold {
namespace conv {
namespace test {
namespace {

TEST_CASE("overrides: Transpose pairs cancel or compose") {
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("x", kFloat, {1, 2, 3, 4});
  b.Output("y", kFloat, {1, 2, 3, 4});
  b.Output("z", kFloat, {1, 3, 2, 4});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"x"}, {"nhwc"}, "to_nhwc"), "perm", {0, 2, 3, 1});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"nhwc"}, {"nchw"}, "to_nchw"), "perm", {0, 3, 1, 2});
  b.Node("Relu", {"nchw"}, {"y"}, "relu");
  // (0,2,3,1) then (0,1,3,2) compose into the single permutation (0,2,1,3).
  OnnxBuilder::AttrInts(b.Node("Transpose", {"x"}, {"t1"}, "t1"), "perm", {0, 2, 3, 1});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"t1"}, {"z"}, "t2"), "perm", {0, 1, 3, 2});
  std::string path = b.Write(dir);
  Converted c;
  Status st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  int transposes = 0;
  for (const Node& n : c.graph.nodes)
    if (n.op_type == "Transpose") {
      ++transposes;
      CHECK(n.attrs.GetInts("perm") == std::vector<int64_t>{0, 2, 1, 3});
    }
  CHECK(transposes == 1);
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[size_t(i)] = float(i - 12);
  SetFloatInput(c.session.get(), "x", {1, 2, 3, 4}, x);
  REQUIRE(c.session->Run().ok());
  std::vector<float> y = FloatOutput(*c.session, "y", {1, 2, 3, 4});
  for (int i = 0; i < 24; ++i) CHECK(y[size_t(i)] == std::max(0.f, x[size_t(i)]));
  std::vector<float> z = FloatOutput(*c.session, "z", {1, 3, 2, 4});
  // z[0][h][c][w] = x[0][c][h][w]
  for (int h = 0; h < 3; ++h)
    for (int ch = 0; ch < 2; ++ch)
      for (int w = 0; w < 4; ++w)
        CHECK(z[size_t((h * 2 + ch) * 4 + w)] == x[size_t((ch * 3 + h) * 4 + w)]);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
