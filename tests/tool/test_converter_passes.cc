// Tests for the converter passes through LoadAndOptimize: support checking, opset
// normalization, shape folding, Conv+BN+activation fusion, Identity removal and fp16
// widening. Expected values are hand-computed in the comments next to them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"
#include "model_impl.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kFloat16 = onnx::TensorProto::FLOAT16;

const Node* FindNode(const Graph& g, const std::string& op_type) {
  for (const Node& n : g.nodes)
    if (n.op_type == op_type) return &n;
  return nullptr;
}

std::vector<float> ConstFloats(const Graph& g, const std::string& name) {
  const Value* v = g.Find(name);
  REQUIRE(v != nullptr);
  REQUIRE(v->is_constant());
  REQUIRE(v->dtype == DType::kFloat32);
  std::vector<float> out(v->data->size() / 4);
  std::memcpy(out.data(), v->data->data(), out.size() * 4);
  return out;
}

std::vector<int64_t> ConstInts(const Graph& g, const std::string& name) {
  const Value* v = g.Find(name);
  REQUIRE(v != nullptr);
  REQUIRE(v->is_constant());
  REQUIRE(v->dtype == DType::kInt64);
  std::vector<int64_t> out(v->data->size() / 8);
  std::memcpy(out.data(), v->data->data(), out.size() * 8);
  return out;
}

// Converts, feeds one float input and returns the one float output.
std::vector<float> ConvertAndRun(const std::string& path, const std::string& in,
                                 const Shape& in_shape, const std::vector<float>& x,
                                 const std::string& out, const Shape& out_shape,
                                 Graph* graph_out = nullptr,
                                 const ConvertOptions& opts = ConvertOptions()) {
  Converted c;
  Status st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), in, in_shape, x);
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  if (graph_out) *graph_out = c.graph;
  return FloatOutput(*c.session, out, out_shape);
}

// ---- CheckSupported -------------------------------------------------------------------------

TEST_CASE("converter CheckSupported: lists every unsupported node at once") {
  TempDir dir;
  OnnxBuilder b(17);
  b.AddOpset("com.example", 1);
  b.Input("boxes", kFloat, {1, 4, 4});
  b.Input("scores", kFloat, {1, 1, 4});
  b.Output("sel_a", kInt64, {-1, 3});
  b.Output("sel_b", kInt64, {-1, 3});
  b.Output("custom_out", kFloat, {1, 4, 4});
  b.Node("NonMaxSuppression", {"boxes", "scores"}, {"sel_a"}, "nms_first");
  b.Node("NonMaxSuppression", {"boxes", "scores"}, {"sel_b"}, "nms_second");
  b.Node("MyFancyOp", {"boxes"}, {"custom_out"}, "custom_node", "com.example");
  std::string path = b.Write(dir);

  Graph g;
  Status st = LoadAndOptimize(path, ConvertOptions(), &g);
  CHECK(st.code() == StatusCode::kUnsupported);
  const std::string& m = st.message();
  CHECK_MESSAGE(Contains(m, path), m);
  CHECK_MESSAGE(Contains(m, "3 node(s)"), m);
  CHECK_MESSAGE(Contains(m, "NonMaxSuppression (2): 'nms_first', 'nms_second'"), m);
  CHECK_MESSAGE(Contains(m, "com.example.MyFancyOp (1): 'custom_node'"), m);
}

TEST_CASE("converter CheckSupported: an unsupported op stops ConvertFile before writing") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Node("NotARealOp", {"X"}, {"Y"}, "bogus");
  const std::string out = dir.File("out.qfm");
  Status st = ConvertFile(b.Write(dir), out, ConvertOptions());
  CHECK(st.code() == StatusCode::kUnsupported);
  CHECK_MESSAGE(Contains(st.message(), "NotARealOp (1): 'bogus'"), st.message());
  CHECK_FALSE(FileExists(out));
}

// ---- NormalizeOpsets ------------------------------------------------------------------------

TEST_CASE("converter NormalizeOpsets: opset-10 Clip min/max attributes become inputs") {
  TempDir dir;
  OnnxBuilder b(10);
  b.Input("X", kFloat, {5});
  b.Output("Y", kFloat, {5});
  auto* n = b.Node("Clip", {"X"}, {"Y"}, "clip0");
  OnnxBuilder::AttrFloat(n, "min", -1.f);
  OnnxBuilder::AttrFloat(n, "max", 2.f);
  Graph g;
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {5}, {-3.f, -0.5f, 1.f, 2.5f, 7.f}, "Y", {5}, &g);
  CHECK(y == std::vector<float>{-1.f, -0.5f, 1.f, 2.f, 2.f});
  const Node* clip = FindNode(g, "Clip");
  REQUIRE(clip != nullptr);
  CHECK_FALSE(clip->attrs.Has("min"));
  CHECK_FALSE(clip->attrs.Has("max"));
  REQUIRE(clip->inputs.size() == 3);
  CHECK(ConstFloats(g, clip->inputs[1]) == std::vector<float>{-1.f});
  CHECK(ConstFloats(g, clip->inputs[2]) == std::vector<float>{2.f});
}

TEST_CASE("converter NormalizeOpsets: opset-10 Clip with only max keeps the lower bound open") {
  TempDir dir;
  OnnxBuilder b(10);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  OnnxBuilder::AttrFloat(b.Node("Clip", {"X"}, {"Y"}, "clip0"), "max", 0.5f);
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {3}, {-1e30f, 0.25f, 3.f}, "Y", {3});
  CHECK(y == std::vector<float>{-1e30f, 0.25f, 0.5f});
}

TEST_CASE("converter NormalizeOpsets: opset-12 ReduceMean axes attribute becomes input 1") {
  TempDir dir;
  OnnxBuilder b(12);
  b.Input("X", kFloat, {2, 3});
  b.Output("Y", kFloat, {2});
  auto* n = b.Node("ReduceMean", {"X"}, {"Y"}, "mean0");
  OnnxBuilder::AttrInts(n, "axes", {-1});
  OnnxBuilder::AttrInt(n, "keepdims", 0);
  Graph g;
  // Row means: (1+2+6)/3 = 3, (-3+0+4.5)/3 = 0.5.
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {2, 3}, {1.f, 2.f, 6.f, -3.f, 0.f, 4.5f}, "Y", {2}, &g);
  CHECK(y == std::vector<float>{3.f, 0.5f});
  const Node* rm = FindNode(g, "ReduceMean");
  REQUIRE(rm != nullptr);
  CHECK_FALSE(rm->attrs.Has("axes"));
  REQUIRE(rm->inputs.size() == 2);
  CHECK(ConstInts(g, rm->inputs[1]) == std::vector<int64_t>{-1});
}

TEST_CASE("converter NormalizeOpsets: opset-11 Squeeze/Unsqueeze axes attributes") {
  TempDir dir;
  OnnxBuilder b(11);
  b.Input("X", kFloat, {1, 3, 1});
  b.Output("Y", kFloat, {3, 1, 1});
  OnnxBuilder::AttrInts(b.Node("Squeeze", {"X"}, {"s"}, "squeeze0"), "axes", {0, 2});
  OnnxBuilder::AttrInts(b.Node("Unsqueeze", {"s"}, {"Y"}, "unsqueeze0"), "axes", {1, -1});
  Graph g;
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {1, 3, 1}, {4.f, 5.f, 6.f}, "Y", {3, 1, 1}, &g);
  CHECK(y == std::vector<float>{4.f, 5.f, 6.f});
  const Node* sq = FindNode(g, "Squeeze");
  const Node* us = FindNode(g, "Unsqueeze");
  REQUIRE(sq != nullptr);
  REQUIRE(us != nullptr);
  CHECK_FALSE(sq->attrs.Has("axes"));
  CHECK_FALSE(us->attrs.Has("axes"));
  CHECK(ConstInts(g, sq->input(1)) == std::vector<int64_t>{0, 2});
  CHECK(ConstInts(g, us->input(1)) == std::vector<int64_t>{1, -1});
  CHECK(g.Find("s")->shape == Shape{3});
}

TEST_CASE("converter NormalizeOpsets: opset-9 Upsample becomes Resize") {
  TempDir dir;
  OnnxBuilder b(9);
  b.Input("X", kFloat, {1, 1, 2, 2});
  b.Output("Y", kFloat, {1, 1, 4, 6});
  b.InitFloat("scales", {4}, {1.f, 1.f, 2.f, 3.f});
  OnnxBuilder::AttrString(b.Node("Upsample", {"X", "scales"}, {"Y"}, "up0"), "mode", "nearest");
  Graph g;
  // Nearest with floor(out / scale): each input pixel becomes a 2x3 block.
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {1, 1, 2, 2}, {1.f, 2.f, 3.f, 4.f}, "Y", {1, 1, 4, 6}, &g);
  CHECK(y == std::vector<float>{1, 1, 1, 2, 2, 2,  //
                                1, 1, 1, 2, 2, 2,  //
                                3, 3, 3, 4, 4, 4,  //
                                3, 3, 3, 4, 4, 4});
  CHECK(FindNode(g, "Upsample") == nullptr);
  const Node* r = FindNode(g, "Resize");
  REQUIRE(r != nullptr);
  CHECK(r->attrs.GetString("coordinate_transformation_mode") == "asymmetric");
  CHECK(r->attrs.GetString("nearest_mode") == "floor");
}

TEST_CASE("converter NormalizeOpsets: opset-7 Upsample scales attribute, bilinear") {
  TempDir dir;
  OnnxBuilder b(7);
  b.Input("X", kFloat, {1, 1, 1, 2});
  b.Output("Y", kFloat, {1, 1, 1, 4});
  auto* n = b.Node("Upsample", {"X"}, {"Y"}, "up0");
  OnnxBuilder::AttrFloats(n, "scales", {1.f, 1.f, 1.f, 2.f});
  OnnxBuilder::AttrString(n, "mode", "bilinear");
  // Asymmetric linear: x_in = x_out / 2 -> 0, 0.5, 1, 1.5 (clamped to 1): 0, 5, 10, 10.
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {1, 1, 1, 2}, {0.f, 10.f}, "Y", {1, 1, 1, 4});
  CHECK(y == std::vector<float>{0.f, 5.f, 10.f, 10.f});
}

TEST_CASE("converter NormalizeOpsets: Constant nodes become constant values") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  OnnxBuilder::AttrFloats(b.Node("Constant", {}, {"c"}, "const0"), "value_floats", {10.f, 20.f});
  b.Node("Add", {"X", "c"}, {"Y"}, "add0");
  Graph g;
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {2}, {1.f, 2.f}, "Y", {2}, &g);
  CHECK(y == std::vector<float>{11.f, 22.f});
  CHECK(g.nodes.size() == 1);
  CHECK(FindNode(g, "Constant") == nullptr);
}

// ---- InferAndFold ---------------------------------------------------------------------------

// Y = Reshape(X, Concat(Unsqueeze(Gather(Shape(X), 0), [0]), [-1])): flattens all but dim 0.
OnnxBuilder ShapeChainModel(const std::vector<int64_t>& x_dims) {
  OnnxBuilder b(17);
  b.Input("X", kFloat, x_dims);
  b.Output("Y", kFloat, {x_dims[0], 12});
  b.InitInt64("idx0", {}, {0});
  b.InitInt64("axes0", {1}, {0});
  b.InitInt64("minus1", {1}, {-1});
  b.Node("Shape", {"X"}, {"shp"}, "shape0");
  b.Node("Gather", {"shp", "idx0"}, {"d0"}, "gather0");
  b.Node("Unsqueeze", {"d0", "axes0"}, {"d0u"}, "unsqueeze0");
  OnnxBuilder::AttrInt(b.Node("Concat", {"d0u", "minus1"}, {"newshape"}, "concat0"), "axis", 0);
  b.Node("Reshape", {"X", "newshape"}, {"Y"}, "reshape0");
  return b;
}

std::vector<float> Iota(size_t n, float start = 0.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

TEST_CASE("converter InferAndFold: a shape chain on a fixed-shape input folds away") {
  TempDir dir;
  std::string path = ShapeChainModel({2, 3, 4}).Write(dir);
  Graph g;
  std::vector<float> y = ConvertAndRun(path, "X", {2, 3, 4}, Iota(24), "Y", {2, 12}, &g);
  CHECK(y == Iota(24));
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op_type == "Reshape");
  CHECK(CountOps(g, "Shape") == 0);
  CHECK(CountOps(g, "Gather") == 0);
  CHECK(CountOps(g, "Unsqueeze") == 0);
  CHECK(CountOps(g, "Concat") == 0);
  CHECK(g.IsConstant(g.nodes[0].input(1)));
  CHECK(ConstInts(g, g.nodes[0].input(1)) == std::vector<int64_t>{2, -1});
  // The folded intermediates are gone from the graph's values too.
  CHECK(g.Find("shp") == nullptr);
  CHECK(g.Find("Y")->shape == Shape{2, 12});
}

TEST_CASE("converter InferAndFold: fold_constants=false keeps the shape chain") {
  TempDir dir;
  std::string path = ShapeChainModel({2, 3, 4}).Write(dir);
  ConvertOptions opts;
  opts.fold_constants = false;
  Graph g;
  std::vector<float> y = ConvertAndRun(path, "X", {2, 3, 4}, Iota(24), "Y", {2, 12}, &g, opts);
  CHECK(y == Iota(24));
  CHECK(g.nodes.size() == 5);
}

TEST_CASE("converter InferAndFold: a symbolic dim keeps the chain, and resizing works") {
  TempDir dir;
  std::string path = ShapeChainModel({-1, 3, 4}).Write(dir);
  Converted c;
  Status st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(CountOps(c.graph, "Shape") == 1);
  CHECK(CountOps(c.graph, "Gather") == 1);
  CHECK(CountOps(c.graph, "Concat") == 1);
  CHECK(CountOps(c.graph, "Reshape") == 1);
  CHECK_FALSE(c.graph.IsConstant("newshape"));
  const Value* y = c.graph.Find("Y");
  REQUIRE(y != nullptr);
  // Inference tracks shapes, not partial values: the new shape's second entry (-1) is
  // not known once Concat mixes it with an unknown dim, so both dims stay unknown.
  CHECK(y->rank_known);
  CHECK(y->shape == Shape{kUnknownDim, kUnknownDim});
  REQUIRE(c.model->inputs().size() == 1);
  CHECK(c.model->inputs()[0].shape == Shape{-1, 3, 4});
  CHECK(c.model->inputs()[0].dim_names[0] == "N");

  for (int64_t n : {2, 5}) {
    CAPTURE(n);
    st = c.session->ResizeInput("X", {n, 3, 4});
    REQUIRE_MESSAGE(st.ok(), st.message());
    std::vector<float> x = Iota(size_t(n) * 12, float(n));
    SetFloatInput(c.session.get(), "X", {n, 3, 4}, x);
    st = c.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(FloatOutput(*c.session, "Y", {n, 12}) == x);
  }
}

TEST_CASE("converter InferAndFold: all-constant arithmetic folds to one constant") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.InitFloat("a", {2}, {1.f, 2.f});
  b.InitFloat("b", {2}, {3.f, 5.f});
  b.Node("Mul", {"a", "b"}, {"ab"}, "mul_const");  // [3, 10]
  b.Node("Add", {"X", "ab"}, {"Y"}, "add0");
  Graph g;
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {2}, {0.5f, -1.f}, "Y", {2}, &g);
  CHECK(y == std::vector<float>{3.5f, 9.f});
  REQUIRE(g.nodes.size() == 1);
  CHECK(ConstFloats(g, "ab") == std::vector<float>{3.f, 10.f});
}

TEST_CASE("converter InferAndFold: an inference error names the node") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2, 3});
  b.Input("Z", kFloat, {4, 5});
  b.Output("Y", kFloat, {});
  b.Node("Add", {"X", "Z"}, {"Y"}, "bad_broadcast");
  Graph g;
  Status st = LoadAndOptimize(b.Write(dir), ConvertOptions(), &g);
  CHECK_FALSE(st.ok());
  CHECK_MESSAGE(Contains(st.message(), "bad_broadcast"), st.message());
}

// ---- FuseConvBatchNorm + FuseActivations -----------------------------------------------------

TEST_CASE("converter fusion: Conv -> BatchNormalization -> Relu becomes one Conv") {
  TempDir dir;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto rand_vec = [&](size_t n, float lo = 0.f) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng) + lo;
    return v;
  };
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 2, 5, 5});
  b.Output("Y", kFloat, {1, 3, 5, 5});
  b.InitFloat("W", {3, 2, 3, 3}, rand_vec(54));
  b.InitFloat("B", {3}, rand_vec(3));
  b.InitFloat("gamma", {3}, rand_vec(3, 1.f));
  b.InitFloat("beta", {3}, rand_vec(3));
  b.InitFloat("mean", {3}, rand_vec(3));
  b.InitFloat("var", {3}, rand_vec(3, 1.f));  // in [0.5, 1.5]
  auto* conv = b.Node("Conv", {"X", "W", "B"}, {"c"}, "conv0");
  OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::AttrInts(conv, "kernel_shape", {3, 3});
  OnnxBuilder::AttrFloat(
      b.Node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"}, "bn0"), "epsilon",
      1e-3f);
  b.Node("Relu", {"bn"}, {"Y"}, "relu0");
  std::string path = b.Write(dir);
  std::vector<float> x(50);
  std::uniform_real_distribution<float> ux(-1.f, 1.f);
  for (float& v : x) v = ux(rng);

  Graph fused, plain;
  ConvertOptions channels_first;  // no layout Transposes around the one Conv
  channels_first.channels_last = false;
  std::vector<float> y_fused =
      ConvertAndRun(path, "X", {1, 2, 5, 5}, x, "Y", {1, 3, 5, 5}, &fused, channels_first);
  ConvertOptions no_fuse = channels_first;
  no_fuse.fuse = false;
  std::vector<float> y_plain =
      ConvertAndRun(path, "X", {1, 2, 5, 5}, x, "Y", {1, 3, 5, 5}, &plain, no_fuse);

  REQUIRE(fused.nodes.size() == 1);
  const Node& n = fused.nodes[0];
  CHECK(n.op_type == "Conv");
  CHECK(n.attrs.GetString("_activation") == "Relu");
  CHECK(n.outputs == std::vector<std::string>{"Y"});
  REQUIRE(n.inputs.size() == 3);
  CHECK(fused.IsConstant(n.inputs[1]));
  CHECK(fused.IsConstant(n.inputs[2]));
  CHECK(CountOps(fused, "BatchNormalization") == 0);
  CHECK(CountOps(fused, "Relu") == 0);

  CHECK(plain.nodes.size() == 3);
  CHECK(CountOps(plain, "BatchNormalization") == 1);
  CHECK(CountOps(plain, "Relu") == 1);

  REQUIRE(y_fused.size() == y_plain.size());
  size_t zeros = 0, positives = 0;
  for (size_t i = 0; i < y_fused.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(y_fused[i] - y_plain[i]) <= 1e-5f);
    (y_plain[i] == 0.f ? zeros : positives)++;
  }
  // The random data exercises both sides of the Relu.
  CHECK(zeros > 0);
  CHECK(positives > 0);
}

// FuseConvInputTranspose: a channels-last Conv of at most 4 input channels
// reads the graph input itself (x_channels_first), its Transpose gone; the
// outputs those of the channels-first conversion. 16 channels keep theirs.
TEST_CASE("converter FuseConvInputTranspose: an RGB stem reads the NCHW graph input") {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t c : {3, 16}) {
    CAPTURE(c);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("X", kFloat, {1, c, 20, 22});
    b.Output("Y", kFloat, {1, 8, 10, 11});
    std::vector<float> w(size_t(8 * c * 9)), bias(8), x(size_t(c * 20 * 22));
    for (float& v : w) v = u(rng);
    for (float& v : bias) v = u(rng);
    for (float& v : x) v = u(rng);
    b.InitFloat("W", {8, c, 3, 3}, w);
    b.InitFloat("B", {8}, bias);
    auto* conv = b.Node("Conv", {"X", "W", "B"}, {"c"}, "stem");
    OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
    OnnxBuilder::AttrInts(conv, "strides", {2, 2});
    b.Node("Relu", {"c"}, {"Y"}, "relu");
    const std::string path = b.Write(dir);
    Graph fused, first;
    const std::vector<float> y =
        ConvertAndRun(path, "X", {1, c, 20, 22}, x, "Y", {1, 8, 10, 11}, &fused);
    ConvertOptions channels_first;
    channels_first.channels_last = false;
    const std::vector<float> want =
        ConvertAndRun(path, "X", {1, c, 20, 22}, x, "Y", {1, 8, 10, 11}, &first, channels_first);
    const Node* n = FindNode(fused, "Conv");
    REQUIRE(n != nullptr);
    CHECK(n->attrs.GetInt("channels_last", 0) == 1);
    CHECK(n->attrs.GetInt("x_channels_first", 0) == (c == 3 ? 1 : 0));
    CHECK((n->inputs[0] == "X") == (c == 3));
    CHECK(CountOps(fused, "Transpose") == (c == 3 ? 1u : 2u));  // the output's stays
    REQUIRE(y.size() == want.size());
    for (size_t i = 0; i < y.size(); ++i) {
      CAPTURE(i);
      CHECK(std::fabs(y[i] - want[i]) <= 1e-5f);
    }
  }
}

TEST_CASE("converter fusion: a Conv whose output is also read elsewhere keeps its BatchNorm") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 1, 2, 2});
  b.Output("Y", kFloat, {1, 1, 2, 2});
  b.Output("c", kFloat, {1, 1, 2, 2});
  b.InitFloat("W", {1, 1, 1, 1}, {2.f});
  b.InitFloat("gamma", {1}, {1.f});
  b.InitFloat("beta", {1}, {1.f});
  b.InitFloat("mean", {1}, {0.f});
  b.InitFloat("var", {1}, {1.f});
  b.Node("Conv", {"X", "W"}, {"c"}, "conv0");
  b.Node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"Y"}, "bn0");
  Graph g;
  Status st = LoadAndOptimize(b.Write(dir), ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(CountOps(g, "Conv") == 1);
  CHECK(CountOps(g, "BatchNormalization") == 1);
}

TEST_CASE("converter fusion: Gemm + Clip(0, 6) fuses with its bounds") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2, 2});
  b.Output("Y", kFloat, {2, 2});
  b.InitFloat("W", {2, 2}, {1.f, 2.f, 3.f, 4.f});
  b.InitFloat("lo", {}, {0.f});
  b.InitFloat("hi", {}, {6.f});
  b.Node("Gemm", {"X", "W"}, {"g"}, "gemm0");
  b.Node("Clip", {"g", "lo", "hi"}, {"Y"}, "clip0");
  Graph g;
  // [1, -1] x W = [1 - 3, 2 - 4] = [-2, -2] -> [0, 0]; [2, 1] x W = [5, 8] -> [5, 6].
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {2, 2}, {1.f, -1.f, 2.f, 1.f}, "Y", {2, 2}, &g);
  CHECK(y == std::vector<float>{0.f, 0.f, 5.f, 6.f});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].attrs.GetString("_activation") == "Clip");
  CHECK(g.nodes[0].attrs.GetFloat("_act_min", -1.f) == 0.f);
  CHECK(g.nodes[0].attrs.GetFloat("_act_max", -1.f) == 6.f);
}

TEST_CASE("converter fusion: MatMul + Add of a column bias + Relu becomes one MatMul") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 2, 3});
  b.Output("Y", kFloat, {1, 2, 2});
  b.InitFloat("W", {3, 2}, {1.f, 0.f, 0.f, 1.f, 1.f, 1.f});
  b.InitFloat("bias", {1, 1, 2}, {0.5f, -10.f});
  b.Node("MatMul", {"X", "W"}, {"mm"}, "mm0");
  b.Node("Add", {"bias", "mm"}, {"sum"}, "add0");  // the bias first: either order fuses
  b.Node("Relu", {"sum"}, {"Y"}, "relu0");
  Graph g;
  // Rows [1, 2, 3] and [4, 5, 6]: x W = [4, 5] and [10, 11]; + bias = [4.5, -5], [10.5, 1].
  std::vector<float> y =
      ConvertAndRun(b.Write(dir), "X", {1, 2, 3}, {1, 2, 3, 4, 5, 6}, "Y", {1, 2, 2}, &g);
  CHECK(y == std::vector<float>{4.5f, 0.f, 10.5f, 1.f});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op_type == "MatMul");
  REQUIRE(g.nodes[0].inputs.size() == 3);
  CHECK(ConstFloats(g, g.nodes[0].inputs[2]) == std::vector<float>{0.5f, -10.f});
  CHECK(g.Find(g.nodes[0].inputs[2])->shape == Shape{2});
  CHECK(g.nodes[0].attrs.GetString("_activation") == "Relu");
}

TEST_CASE("converter fusion: a row bias, or a MatMul read twice, keeps its Add") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2, 2});
  b.Output("Y", kFloat, {2, 2});
  b.Output("Z", kFloat, {2, 2});
  b.InitFloat("W", {2, 2}, {1.f, 2.f, 3.f, 4.f});
  b.InitFloat("rows", {2, 1}, {100.f, 200.f});  // per row: not the epilogue's per-column bias
  b.InitFloat("cols", {2}, {1.f, 2.f});
  b.Node("MatMul", {"X", "W"}, {"a"}, "mm_rows");
  b.Node("Add", {"a", "rows"}, {"Y"}, "add_rows");
  b.Node("MatMul", {"X", "W"}, {"c"}, "mm_shared");
  b.Node("Add", {"c", "cols"}, {"d"}, "add_cols");
  b.Node("Mul", {"c", "d"}, {"Z"}, "mul");  // c has a second reader
  Graph g;
  // [1, 0] x W = [1, 2]; [0, 1] x W = [3, 4].
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {2, 2}, {1, 0, 0, 1}, "Y", {2, 2}, &g);
  CHECK(y == std::vector<float>{101.f, 102.f, 203.f, 204.f});
  int adds = 0;
  for (const Node& n : g.nodes) {
    adds += n.op_type == "Add";
    if (n.op_type == "MatMul") CHECK(n.inputs.size() == 2);
  }
  CHECK(adds == 2);
}

// ---- RemoveIdentities -----------------------------------------------------------------------

// ---- CommuteReshapeTransposes ---------------------------------------------------------------

TEST_CASE(
    "converter CommuteReshapeTransposes: a channel shuffle between layout Transposes is one "
    "Transpose of two inner axes") {
  // NHWC in and out, a ShuffleNet channel shuffle (2 groups of 3) on NCHW in between.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 4, 5, 6});
  b.Output("Y", kFloat, {1, 4, 5, 6});
  b.InitInt64("split", {5}, {1, 2, 3, 4, 5});
  b.InitInt64("merge", {4}, {1, 6, 4, 5});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"X"}, {"nchw"}, "to_nchw"), "perm", {0, 3, 1, 2});
  b.Node("Reshape", {"nchw", "split"}, {"groups"}, "split_groups");
  OnnxBuilder::AttrInts(b.Node("Transpose", {"groups"}, {"swapped"}, "shuffle"), "perm",
                        {0, 2, 1, 3, 4});
  b.Node("Reshape", {"swapped", "merge"}, {"shuffled"}, "merge_groups");
  OnnxBuilder::AttrInts(b.Node("Transpose", {"shuffled"}, {"Y"}, "to_nhwc"), "perm", {0, 2, 3, 1});
  const std::string path = b.Write(dir);
  std::vector<float> x(120);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  Graph g;
  const std::vector<float> y = ConvertAndRun(path, "X", {1, 4, 5, 6}, x, "Y", {1, 4, 5, 6}, &g);
  REQUIRE(CountOps(g, "Transpose") == 1);
  CHECK(FindNode(g, "Transpose")->attrs.GetInts("perm") == std::vector<int64_t>{0, 1, 2, 4, 3});
  // Output channel c = 2 * j + i reads input channel 3 * i + j of the same pixel.
  REQUIRE(y.size() == x.size());
  for (size_t p = 0; p < 20; ++p)
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 3; ++j) {
        CAPTURE(p);
        CHECK(y[p * 6 + 2 * j + i] == x[p * 6 + 3 * i + j]);
      }

  ConvertOptions first;
  first.channels_last = false;
  Graph kept;
  CHECK(ConvertAndRun(path, "X", {1, 4, 5, 6}, x, "Y", {1, 4, 5, 6}, &kept, first) == y);
  CHECK(CountOps(kept, "Transpose") == 3);
}

// X [1, 8, 6, 6] -> Conv (pads 1; weights multiples of 1/4, so with inputs in
// halves every sum is exact in float and both layouts give the same bits)
// -> QuantizeLinear -> DequantizeLinear "d" (scale 1/8, zero point 128).
void AddExactConvQdq(OnnxBuilder* b) {
  std::vector<float> w(8 * 8 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 7 % 13) - 6) * 0.25f;
  b->InitFloat("W", {8, 8, 3, 3}, w);
  b->InitFloat("scale", {}, {0.125f});
  const uint8_t zp = 128;
  b->Init("zp", onnx::TensorProto::UINT8, {}, &zp, 1);
  OnnxBuilder::AttrInts(b->Node("Conv", {"X", "W"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b->Node("QuantizeLinear", {"c", "scale", "zp"}, {"q"}, "q");
  b->Node("DequantizeLinear", {"q", "scale", "zp"}, {"d"}, "dq");
}

// The node making the input of g's (one) DequantizeLinear.
const Node* ProducerOfDequantize(const Graph& g) {
  const Node* dq = FindNode(g, "DequantizeLinear");
  if (!dq) return nullptr;
  for (const Node& n : g.nodes)
    if (!n.outputs.empty() && n.outputs[0] == dq->inputs[0]) return &n;
  return nullptr;
}

TEST_CASE("converter PlanLayouts: a DequantizeLinear before channels-last float ops keeps NHWC") {
  // Conv -> Q -> DQ -> LRN -> Add(+1) -> Relu -> MaxPool: the Transpose back to NCHW after the
  // Conv moves past Q and then past the widening DQ, because every path from the DQ leads
  // through element-wise float ops to ops that run channels-last float (LRN, MaxPool), where
  // it cancels: only the input's and the output's Transposes remain. The Conv's products are
  // exact (multiples of 1/8), so both layouts give the same bits; with a Sigmoid reading the
  // DQ too, the Transpose stays before the DQ.
  for (const bool side_reader : {false, true}) {
    CAPTURE(side_reader);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("X", kFloat, {1, 8, 6, 6});
    b.Output("Y", kFloat, {1, 8, 3, 3});
    if (side_reader) b.Output("S", kFloat, {1, 8, 6, 6});
    AddExactConvQdq(&b);
    b.InitFloat("one", {}, {1.f});
    onnx::NodeProto* lrn = b.Node("LRN", {"d"}, {"l"}, "lrn");
    OnnxBuilder::AttrInt(lrn, "size", 5);
    OnnxBuilder::AttrFloat(lrn, "alpha", 0.01f);
    b.Node("Add", {"l", "one"}, {"a"}, "add");
    b.Node("Relu", {"a"}, {"r"}, "relu");
    onnx::NodeProto* pool = b.Node("MaxPool", {"r"}, {"Y"}, "pool");
    OnnxBuilder::AttrInts(pool, "kernel_shape", {2, 2});
    OnnxBuilder::AttrInts(pool, "strides", {2, 2});
    if (side_reader) b.Node("Sigmoid", {"d"}, {"S"}, "side");
    const std::string path = b.Write(dir);
    std::vector<float> x(8 * 36);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 13 % 29) - 14) * 0.5f;
    Graph g;
    const std::vector<float> y = ConvertAndRun(path, "X", {1, 8, 6, 6}, x, "Y", {1, 8, 3, 3}, &g);
    // side_reader: the Transpose stays before the DQ, and the LRN and MaxPool after it run
    // NCHW (alone they would only add Transposes).
    CHECK(CountOps(g, "Transpose") == 2);
    for (const char* op : {"LRN", "MaxPool"}) {
      CAPTURE(op);
      const Node* n = FindNode(g, op);
      REQUIRE(n != nullptr);
      CHECK(n->attrs.GetInt("channels_last", 0) == (side_reader ? 0 : 1));
    }
    const Node* before_dq = ProducerOfDequantize(g);
    REQUIRE(before_dq != nullptr);
    CHECK((before_dq->op_type == "Transpose") == side_reader);
    ConvertOptions first;
    first.channels_last = false;
    Graph kept;
    CHECK(ConvertAndRun(path, "X", {1, 8, 6, 6}, x, "Y", {1, 8, 3, 3}, &kept, first) == y);
    CHECK(CountOps(kept, "Transpose") == 0);
  }
}

TEST_CASE("converter PlanLayouts: a DequantizeLinear before an Add keeps NHWC only with its peer") {
  // Conv -> Q -> DQ -> Add(., z) -> Relu -> MaxPool: with z a constant the Transpose moves past
  // the DQ into the channels-last MaxPool; with z a float graph input (NCHW) it stays before the
  // DQ, where it moves int8 bytes, not float ones. Both layouts give the same bits.
  for (const bool z_input : {false, true}) {
    CAPTURE(z_input);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("X", kFloat, {1, 8, 6, 6});
    if (z_input) b.Input("z", kFloat, {1, 8, 6, 6});
    b.Output("Y", kFloat, {1, 8, 3, 3});
    AddExactConvQdq(&b);
    if (!z_input) b.InitFloat("z", {}, {1.f});
    b.Node("Add", {"d", "z"}, {"a"}, "add");
    b.Node("Relu", {"a"}, {"r"}, "relu");
    onnx::NodeProto* pool = b.Node("MaxPool", {"r"}, {"Y"}, "pool");
    OnnxBuilder::AttrInts(pool, "kernel_shape", {2, 2});
    OnnxBuilder::AttrInts(pool, "strides", {2, 2});
    const std::string path = b.Write(dir);
    std::vector<float> x(8 * 36), z(8 * 36);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 13 % 29) - 14) * 0.5f;
    for (size_t i = 0; i < z.size(); ++i) z[i] = float(int(i * 5 % 17) - 8) * 0.25f;
    ConvertOptions first;
    first.channels_last = false;
    Graph g, kept;
    std::vector<float> y, y_first;
    if (z_input) {
      auto run = [&](const ConvertOptions& opts, Graph* graph) {
        Converted c;
        Status st = ConvertAndOpen(path, opts, &c);
        REQUIRE_MESSAGE(st.ok(), st.message());
        SetFloatInput(c.session.get(), "X", {1, 8, 6, 6}, x);
        SetFloatInput(c.session.get(), "z", {1, 8, 6, 6}, z);
        st = c.session->Run();
        REQUIRE_MESSAGE(st.ok(), st.message());
        *graph = c.graph;
        return FloatOutput(*c.session, "Y", {1, 8, 3, 3});
      };
      y = run(ConvertOptions(), &g);
      y_first = run(first, &kept);
    } else {
      y = ConvertAndRun(path, "X", {1, 8, 6, 6}, x, "Y", {1, 8, 3, 3}, &g);
      y_first = ConvertAndRun(path, "X", {1, 8, 6, 6}, x, "Y", {1, 8, 3, 3}, &kept, first);
    }
    CHECK(y == y_first);
    const Node* mp = FindNode(g, "MaxPool");
    REQUIRE(mp != nullptr);
    CHECK(mp->attrs.GetInt("channels_last", 0) == (z_input ? 0 : 1));
    // Where the Transpose back to NCHW sits: before the DQ (on int8) only with z an input.
    const Node* before_dq = ProducerOfDequantize(g);
    REQUIRE(before_dq != nullptr);
    CHECK((before_dq->op_type == "Transpose") == z_input);
  }
}

TEST_CASE("converter CommuteReshapeTransposes: Transposes that cancel across a Reshape vanish") {
  // NHWC [1, 3, 4, 2] -> NCHW, H and W merged (contiguous in both layouts), back to channels
  // last: only the Reshape remains.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 3, 4, 2});
  b.Output("Y", kFloat, {1, 12, 2});
  b.InitInt64("rows", {3}, {1, 2, 12});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"X"}, {"nchw"}, "to_nchw"), "perm", {0, 3, 1, 2});
  b.Node("Reshape", {"nchw", "rows"}, {"flat"}, "merge_hw");
  OnnxBuilder::AttrInts(b.Node("Transpose", {"flat"}, {"Y"}, "back"), "perm", {0, 2, 1});
  const std::string path = b.Write(dir);
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f;
  Graph g;
  CHECK(ConvertAndRun(path, "X", {1, 3, 4, 2}, x, "Y", {1, 12, 2}, &g) == x);
  CHECK(CountOps(g, "Transpose") == 0);
  CHECK(CountOps(g, "Reshape") == 1);
}

TEST_CASE("converter CommuteReshapeTransposes: a Transpose that would split a merged run stays") {
  // [1, 2, 3, 6] -> [1, 3, 2, 6] -> Reshape [1, 6, 2, 3] merges axes the first Transpose
  // reversed and splits one the second Transpose swaps: neither can move.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 2, 3, 6});
  b.Output("Y", kFloat, {1, 6, 3, 2});
  b.InitInt64("shape", {4}, {1, 6, 2, 3});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"X"}, {"a"}, "first"), "perm", {0, 2, 1, 3});
  b.Node("Reshape", {"a", "shape"}, {"r"}, "regroup");
  OnnxBuilder::AttrInts(b.Node("Transpose", {"r"}, {"Y"}, "second"), "perm", {0, 1, 3, 2});
  const std::string path = b.Write(dir);
  std::vector<float> x(36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  Graph g;
  const std::vector<float> y = ConvertAndRun(path, "X", {1, 2, 3, 6}, x, "Y", {1, 6, 3, 2}, &g);
  CHECK(CountOps(g, "Transpose") == 2);
  // Y[0, 3 * w + h, k, j] = X[0, h, w, 3 * j + k] (h < 2, w < 3, j < 2, k < 3).
  for (size_t h = 0; h < 2; ++h)
    for (size_t w = 0; w < 3; ++w)
      for (size_t j = 0; j < 2; ++j)
        for (size_t k = 0; k < 3; ++k)
          CHECK(y[((w * 2 + h) * 3 + k) * 2 + j] == x[(h * 3 + w) * 6 + 3 * j + k]);
}

TEST_CASE("converter CancelTransposes: chains compose, inverse pairs vanish") {
  // x [1, 2, 3, 4] -> T(0,2,3,1) -> T(0,3,1,2) (inverse: both vanish) -> Relu -> r;
  // r -> T(0,2,3,1) -> T(0,1,3,2) -> T(0,2,3,1) = one T(0,1,3,2) -> Y (the last one
  // names a graph output, so the composed Transpose keeps that name).
  // 400 more inverse pairs between Relus (the bounded-time case is in
  // tests/malformed: "8000 inverse Transpose pairs convert in bounded time").
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 2, 3, 4});
  b.Output("Y", kFloat, {1, 2, 4, 3});
  std::string x = "X";
  for (int i = 0; i < 401; ++i) {
    const std::string k = std::to_string(i);
    OnnxBuilder::AttrInts(b.Node("Transpose", {x}, {"nhwc" + k}, "to_nhwc" + k), "perm",
                          {0, 2, 3, 1});
    OnnxBuilder::AttrInts(b.Node("Transpose", {"nhwc" + k}, {"nchw" + k}, "to_nchw" + k), "perm",
                          {0, 3, 1, 2});
    b.Node("Relu", {"nchw" + k}, {"r" + k}, "relu" + k);
    x = "r" + k;
  }
  OnnxBuilder::AttrInts(b.Node("Transpose", {x}, {"a"}, "t1"), "perm", {0, 2, 3, 1});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"a"}, {"b"}, "t2"), "perm", {0, 1, 3, 2});
  OnnxBuilder::AttrInts(b.Node("Transpose", {"b"}, {"Y"}, "t3"), "perm", {0, 2, 3, 1});
  const std::string path = b.Write(dir);
  std::vector<float> xv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(i) - 5.f;
  Graph g;
  const std::vector<float> y = ConvertAndRun(path, "X", {1, 2, 3, 4}, xv, "Y", {1, 2, 4, 3}, &g);
  CHECK(CountOps(g, "Transpose") == 1);
  CHECK(CountOps(g, "Relu") == 401);
  const Node* t = FindNode(g, "Transpose");
  REQUIRE(t != nullptr);
  CHECK(t->attrs.GetInts("perm") == std::vector<int64_t>{0, 1, 3, 2});
  // Y[0, c, w, h] = relu(X[0, c, h, w]).
  for (size_t c = 0; c < 2; ++c)
    for (size_t h = 0; h < 3; ++h)
      for (size_t w = 0; w < 4; ++w)
        CHECK(y[(c * 4 + w) * 3 + h] == std::max(0.f, xv[(c * 3 + h) * 4 + w]));
}

TEST_CASE("converter RemoveIdentities: Identity feeding a graph output keeps the output name") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  b.Node("Neg", {"X"}, {"r"}, "neg0");
  b.Node("Identity", {"r"}, {"Y"}, "id0");
  Graph g;
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {3}, {1.f, -2.f, 0.5f}, "Y", {3}, &g);
  CHECK(y == std::vector<float>{-1.f, 2.f, -0.5f});
  CHECK(g.outputs == std::vector<std::string>{"Y"});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op_type == "Neg");
  CHECK(g.nodes[0].outputs == std::vector<std::string>{"Y"});
  CHECK(g.Find("r") == nullptr);
}

TEST_CASE("converter RemoveIdentities: Identity between two internal nodes disappears") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  b.Node("Relu", {"X"}, {"a"}, "relu0");
  b.Node("Identity", {"a"}, {"b"}, "id0");
  b.Node("Dropout", {"b"}, {"d"}, "drop0");
  b.Node("Neg", {"d"}, {"Y"}, "neg0");
  Graph g;
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {3}, {1.f, -2.f, 0.5f}, "Y", {3}, &g);
  CHECK(y == std::vector<float>{-1.f, -0.f, -0.5f});
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op_type == "Relu");
  CHECK(g.nodes[1].op_type == "Neg");
  CHECK(g.nodes[1].inputs == std::vector<std::string>{"a"});
  CHECK(g.Find("b") == nullptr);
  CHECK(g.Find("d") == nullptr);
}

TEST_CASE("converter RemoveIdentities: a Dropout whose named mask nobody reads disappears") {
  // Exports name the mask output (inception_v1 of the model zoo) without reading it.
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  b.Node("Dropout", {"X"}, {"d", "mask"}, "drop0");
  b.Node("Neg", {"d"}, {"Y"}, "neg0");
  Graph g;
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {3}, {1.f, -2.f, 0.5f}, "Y", {3}, &g);
  CHECK(y == std::vector<float>{-1.f, 2.f, -0.5f});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op_type == "Neg");
}

TEST_CASE("converter RemoveIdentities: training-mode Dropout is kept and reported") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  const bool on = true;
  b.Init("train", onnx::TensorProto::BOOL, {}, &on, 1);
  b.Init("ratio", kFloat, {}, std::vector<float>{0.5f}.data(), 4);
  b.Node("Dropout", {"X", "ratio", "train"}, {"Y"}, "drop_train");
  Graph g;
  Status st = LoadAndOptimize(b.Write(dir), ConvertOptions(), &g);
  CHECK(st.code() == StatusCode::kUnsupported);
  CHECK_MESSAGE(Contains(st.message(), "Dropout 'drop_train'"), st.message());
}

// Older exports (SqueezeNet, Inception-v1 of the model zoo) read or output the mask.
TEST_CASE(
    "converter Dropout: a mask that is a graph output is all true; opset 9 types it like the "
    "data") {
  for (int opset : {9, 13}) {
    CAPTURE(opset);
    TempDir dir;
    OnnxBuilder b(opset);
    const int mask_type = opset < 10 ? kFloat : onnx::TensorProto::BOOL;
    b.Input("X", kFloat, {2, 2});
    b.Output("Y", kFloat, {2, 2});
    b.Output("mask", mask_type, {2, 2});
    b.Node("Dropout", {"X"}, {"d", "mask"}, "n61");
    b.Node("Neg", {"d"}, {"Y"}, "neg0");
    Converted c;
    Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
    REQUIRE_MESSAGE(st.ok(), st.message());
    SetFloatInput(c.session.get(), "X", {2, 2}, {1.f, -2.f, 0.5f, 0.f});
    st = c.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(FloatOutput(*c.session, "Y", {2, 2}) == std::vector<float>{-1.f, 2.f, -0.5f, -0.f});
    DType dt;
    Shape shape;
    const void* data;
    REQUIRE(c.session->GetOutput("mask", &dt, &shape, &data).ok());
    CHECK(shape == Shape{2, 2});
    if (opset < 10) {
      REQUIRE(dt == DType::kFloat32);
      const float* m = static_cast<const float*>(data);
      CHECK(std::vector<float>(m, m + 4) == std::vector<float>{1.f, 1.f, 1.f, 1.f});
    } else {
      REQUIRE(dt == DType::kBool);
      const uint8_t* m = static_cast<const uint8_t*>(data);
      CHECK(std::vector<uint8_t>(m, m + 4) == std::vector<uint8_t>{1, 1, 1, 1});
    }
  }
}

// ---- TopK ---------------------------------------------------------------------------------

std::vector<int64_t> Int64Output(const Session& s, const std::string& name, const Shape& want) {
  DType dt = DType::kUndefined;
  Shape shape;
  const void* data = nullptr;
  Status st = s.GetOutput(name, &dt, &shape, &data);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(dt == DType::kInt64);
  REQUIRE(shape == want);
  const int64_t* p = static_cast<const int64_t*>(data);
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return std::vector<int64_t>(p, p + n);
}

TEST_CASE("converter NormalizeOpsets: opset-9 TopK k attribute becomes input 1") {
  TempDir dir;
  OnnxBuilder b(9);
  b.Input("X", kFloat, {2, 4});
  b.Output("V", kFloat, {2, 3});
  b.Output("I", onnx::TensorProto::INT64, {2, 3});
  auto* n = b.Node("TopK", {"X"}, {"V", "I"}, "topk0");
  OnnxBuilder::AttrInt(n, "k", 3);
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const Node* topk = FindNode(c.graph, "TopK");
  REQUIRE(topk != nullptr);
  CHECK_FALSE(topk->attrs.Has("k"));
  CHECK(ConstInts(c.graph, topk->input(1)) == std::vector<int64_t>{3});
  // Ties: the lower index first.
  SetFloatInput(c.session.get(), "X", {2, 4}, {2.f, 7.f, 2.f, 2.f, -1.f, 0.f, 5.f, 0.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "V", {2, 3}) == std::vector<float>{7.f, 2.f, 2.f, 5.f, 0.f, 0.f});
  CHECK(Int64Output(*c.session, "I", {2, 3}) == std::vector<int64_t>{1, 0, 2, 2, 1, 3});
}

// A constant k that is negative or exceeds the axis is refused at conversion,
// naming the node; a k given at run time is refused by Run.
TEST_CASE("converter TopK: a bad k names the node") {
  for (int64_t k : {5, -1}) {
    CAPTURE(k);
    TempDir dir;
    OnnxBuilder b(11);
    b.Input("X", kFloat, {2, 4});
    b.Output("V", kFloat, {2, -1});
    b.Output("I", onnx::TensorProto::INT64, {2, -1});
    b.InitInt64("k", {1}, {k});
    b.Node("TopK", {"X", "k"}, {"V", "I"}, "bad_topk");
    const std::string out = dir.File("model.qfm");
    Status st = ConvertFile(b.Write(dir), out, ConvertOptions());
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "TopK 'bad_topk'"), st.message());
    CHECK_MESSAGE(Contains(st.message(), k < 0 ? "must not be negative" : "larger than the axis"),
                  st.message());
    CHECK_FALSE(FileExists(out));
  }
  TempDir dir;
  OnnxBuilder b(11);
  b.Input("X", kFloat, {2, 4});
  b.Input("k", onnx::TensorProto::INT64, {1});
  b.Output("V", kFloat, {2, -1});
  b.Output("I", onnx::TensorProto::INT64, {2, -1});
  b.Node("TopK", {"X", "k"}, {"V", "I"}, "runtime_topk");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "X", {2, 4}, Iota(8));
  for (int64_t k : {9, -2}) {
    REQUIRE(c.session->SetInput("k", DType::kInt64, {1}, &k, 8).ok());
    st = c.session->Run();
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "TopK 'runtime_topk'"), st.message());
  }
  const int64_t k = 2;
  REQUIRE(c.session->SetInput("k", DType::kInt64, {1}, &k, 8).ok());
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "V", {2, 2}) == std::vector<float>{3.f, 2.f, 7.f, 6.f});
}

// ---- LowerSequences ---------------------------------------------------------------------------

// Y = SequenceAt(SplitToSequence(X, axis 1), -1) + ConcatFromSequence of the same pieces
// reversed by SequenceConstruct: X's last column plus nothing else needs a runtime sequence.
OnnxBuilder SplitAtModel(const std::vector<int64_t>& x_dims) {
  OnnxBuilder b(13);
  b.Input("X", kFloat, x_dims, "T");
  b.Output("Y", kFloat, {2, 1});
  b.InitInt64("last", {}, {-1});
  OnnxBuilder::AttrInt(b.Node("SplitToSequence", {"X"}, {"seq"}, "split_seq"), "axis", 1);
  b.Node("SequenceAt", {"seq", "last"}, {"Y"}, "pick_last");
  return b;
}

TEST_CASE("converter LowerSequences: SplitToSequence -> SequenceAt becomes Split") {
  TempDir dir;
  Graph g;
  std::vector<float> y =
      ConvertAndRun(SplitAtModel({2, 3}).Write(dir), "X", {2, 3}, Iota(6), "Y", {2, 1}, &g);
  CHECK(y == std::vector<float>{2.f, 5.f});
  CHECK(CountOps(g, "Split") == 1);
  CHECK(FindNode(g, "SplitToSequence") == nullptr);
  CHECK(FindNode(g, "SequenceAt") == nullptr);
}

TEST_CASE(
    "converter LowerSequences: a length that depends on a symbolic dim runs on sequence "
    "values; --dim lowers it") {
  TempDir dir;
  const std::string path = SplitAtModel({2, -1}).Write(dir);
  // Without --dim the sequence ops stay and the session runs them (dynamic mode).
  Graph g;
  Status st = LoadAndOptimize(path, ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FindNode(g, "SplitToSequence") != nullptr);
  CHECK(FindNode(g, "SequenceAt") != nullptr);
  const Value* seq = g.Find("seq");
  REQUIRE(seq != nullptr);
  CHECK(seq->is_sequence);
  for (int64_t t : {4, 1, 7}) {
    Converted c;
    st = ConvertAndOpen(path, ConvertOptions(), &c);
    REQUIRE_MESSAGE(st.ok(), st.message());
    REQUIRE(c.session->ResizeInput("X", {2, t}).ok());
    SetFloatInput(c.session.get(), "X", {2, t}, Iota(size_t(2 * t)));
    st = c.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(FloatOutput(*c.session, "Y", {2, 1}) ==
          std::vector<float>{float(t - 1), float(2 * t - 1)});
  }
  ConvertOptions opts;
  opts.dims["T"] = 4;
  Graph lowered;
  st = LoadAndOptimize(path, opts, &lowered);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FindNode(lowered, "SplitToSequence") == nullptr);
  Converted c;
  st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "X", {2, 4}, Iota(8));
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "Y", {2, 1}) == std::vector<float>{3.f, 7.f});
}

TEST_CASE("converter LowerSequences: bad sequences are refused naming the node") {
  struct Case {
    const char* what;
    std::function<void(OnnxBuilder*)> build;
    StatusCode code;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"position out of range",
       [](OnnxBuilder* b) {
         b->InitInt64("pos", {}, {3});
         b->Node("SequenceConstruct", {"X", "X"}, {"seq"}, "pair");
         b->Node("SequenceAt", {"seq", "pos"}, {"Y"}, "pick");
       },
       StatusCode::kInvalidModel, "SequenceAt 'pick': position 3 is outside [-2, 1]"},
      {"sequence read by a tensor op",
       [](OnnxBuilder* b) {
         b->Node("SequenceConstruct", {"X"}, {"seq"}, "single");
         b->Node("Relu", {"seq"}, {"Y"}, "relu");
       },
       StatusCode::kInvalidModel, "Relu 'relu': input 'seq' is a sequence; this op takes tensors"},
      {"sequence where the graph declares a tensor output",
       [](OnnxBuilder* b) {
         b->Node("SequenceConstruct", {"X"}, {"seq"}, "single");
         b->Node("Identity", {"seq"}, {"Y"}, "copy");
       },
       StatusCode::kInvalidModel,
       "graph output 'Y' is declared a tensor but the op makes a sequence"},
      {"Scan body returning a sequence",
       [](OnnxBuilder* b) {
         OnnxBuilder body(13);
         body.Input("x_in", kFloat, {});
         body.Output("e", kFloat, {});
         onnx::TypeProto seq;  // e declared a sequence of float scalars
         *seq.mutable_sequence_type()->mutable_elem_type() = body.graph()->output(0).type();
         *body.graph()->mutable_output(0)->mutable_type() = seq;
         body.Node("SequenceConstruct", {"x_in"}, {"e"}, "wrap_in_body");
         onnx::NodeProto* scan = b->Node("Scan", {"X"}, {"Y"}, "scan");
         OnnxBuilder::AttrInt(scan, "num_scan_inputs", 1);
         onnx::AttributeProto* a = scan->add_attribute();
         a->set_name("body");
         a->set_type(onnx::AttributeProto::GRAPH);
         *a->mutable_g() = *body.graph();
       },
       StatusCode::kInvalidModel, "Scan 'scan': body output 'e' is a sequence"},
      {"empty ConcatFromSequence",
       [](OnnxBuilder* b) {
         b->Node("SequenceEmpty", {}, {"seq"}, "none");
         OnnxBuilder::AttrInt(b->Node("ConcatFromSequence", {"seq"}, {"Y"}, "join"), "axis", 0);
       },
       StatusCode::kInvalidModel, "ConcatFromSequence 'join': sequence 'seq' is empty"},
  };
  for (const Case& tc : cases) {
    CAPTURE(tc.what);
    TempDir dir;
    OnnxBuilder b(13);
    b.Input("X", kFloat, {2});
    b.Output("Y", kFloat, {2});
    tc.build(&b);
    const std::string out = dir.File("model.qfm");
    Status st = ConvertFile(b.Write(dir), out, ConvertOptions());
    CHECK(st.code() == tc.code);
    CHECK_MESSAGE(Contains(st.message(), tc.expect), st.message());
    CHECK_FALSE(FileExists(out));
  }
}

TEST_CASE("converter LowerSequences: a sequence graph output runs on sequence values") {
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Node("SequenceConstruct", {"X", "Y"}, {"S"}, "wrap");
  b.Node("Neg", {"X"}, {"Y"}, "neg0");
  b.graph()->add_output()->set_name("S");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(c.model->outputs().size() == 2);
  CHECK(c.model->outputs()[1].is_sequence);
  SetFloatInput(c.session.get(), "X", {2}, {1.f, -2.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<TensorView> s;
  REQUIRE(c.session->GetOutputSequence("S", &s).ok());
  REQUIRE(s.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(s[i].dtype == DType::kFloat32);
    CHECK(s[i].shape == Shape{2});
    REQUIRE(s[i].bytes == 8);
  }
  const float* a = static_cast<const float*>(s[0].data);
  const float* n = static_cast<const float*>(s[1].data);
  CHECK(std::vector<float>(a, a + 2) == std::vector<float>{1.f, -2.f});
  CHECK(std::vector<float>(n, n + 2) == std::vector<float>{-1.f, 2.f});
  // Read as a tensor, or a tensor read as a sequence: an error naming it.
  DType dt;
  Shape shape;
  const void* data = nullptr;
  st = c.session->GetOutput("S", &dt, &shape, &data);
  CHECK_MESSAGE(Contains(st.message(), "output 'S' is a sequence"), st.message());
  st = c.session->GetOutputSequence("Y", &s);
  CHECK_MESSAGE(Contains(st.message(), "output 'Y' is a tensor"), st.message());
}

TEST_CASE("sessions with sequences prepare their other ops: no reference path") {
  // Planning stops early for models with sequences (dynamic mode); the ops
  // must still get their prepared state when they first run, or a Conv takes
  // its reference kernel (measured: 3.0 ms instead of 0.19 ms for 16->32 3x3 at 56x56).
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 8, 10, 10});
  std::vector<float> w(16 * 8 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) * 0.125f;
  b.InitFloat("W", {16, 8, 3, 3}, w);
  OnnxBuilder::AttrInts(b.Node("Conv", {"X", "W"}, {"Y"}, "conv"), "pads", {1, 1, 1, 1});
  b.Node("SequenceConstruct", {"Y"}, {"S"}, "wrap");
  b.graph()->add_output()->set_name("S");
  Graph g;
  Status st = LoadAndOptimize(b.Write(dir), ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<uint8_t> bytes;
  REQUIRE(SerializeQfm(g, &bytes).ok());
  std::shared_ptr<Model> model;
  REQUIRE(Model::LoadMemory(bytes.data(), bytes.size(), &model).ok());
  SessionOptions opts;
  opts.profile = true;
  std::unique_ptr<Session> session;
  REQUIRE(Session::Create(model, opts, &session).ok());
  SetFloatInput(session.get(), "X", {1, 8, 10, 10}, std::vector<float>(800, 0.5f));
  for (int run = 0; run < 2; ++run) REQUIRE(session->Run().ok());
  bool saw_conv = false;
  for (const OpProfile& p : session->profile()) {
    if (p.type != "Conv") continue;
    saw_conv = true;
    CHECK_MESSAGE(p.reference_runs == 0, p.name);
  }
  CHECK(saw_conv);
  std::vector<TensorView> s;
  REQUIRE(session->GetOutputSequence("S", &s).ok());
  REQUIRE(s.size() == 1);
  CHECK(s[0].shape == Shape{1, 16, 10, 10});
}

TEST_CASE("converter Dropout: training mode with ratio 0 drops nothing and runs") {
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("X", kFloat, {3});
  b.Output("Y", kFloat, {3});
  b.Output("mask", onnx::TensorProto::BOOL, {3});
  const bool on = true;
  b.Init("train", onnx::TensorProto::BOOL, {}, &on, 1);
  b.Init("ratio", kFloat, {}, std::vector<float>{0.f}.data(), 4);
  b.Node("Dropout", {"X", "ratio", "train"}, {"Y", "mask"}, "drop_zero");
  std::vector<float> y = ConvertAndRun(b.Write(dir), "X", {3}, {1.f, -2.f, 0.5f}, "Y", {3});
  CHECK(y == std::vector<float>{1.f, -2.f, 0.5f});
}

TEST_CASE("converter RemoveIdentities: Identity from a graph input to a graph output stays") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Output("Z", kFloat, {2});
  b.Node("Identity", {"X"}, {"Y"}, "id0");
  b.Node("Neg", {"X"}, {"Z"}, "neg0");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(CountOps(c.graph, "Identity") == 1);
  SetFloatInput(c.session.get(), "X", {2}, {3.f, -4.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "Y", {2}) == std::vector<float>{3.f, -4.f});
  CHECK(FloatOutput(*c.session, "Z", {2}) == std::vector<float>{-3.f, 4.f});
}

// ---- WidenHalfFloats ------------------------------------------------------------------------

TEST_CASE("converter WidenHalfFloats: an fp16 Add keeps fp16 at the boundary") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat16, {4});
  b.Output("Y", kFloat16, {4});
  std::vector<uint16_t> w;
  for (float f : {0.5f, 3.f, 0.125f, 0.1f}) w.push_back(FloatToHalf(f));
  b.Init("W", kFloat16, {4}, w.data(), w.size() * 2);
  b.Node("Add", {"X", "W"}, {"Y"}, "add0");

  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(c.model->inputs().size() == 1);
  REQUIRE(c.model->outputs().size() == 1);
  CHECK(c.model->inputs()[0].name == "X");
  CHECK(c.model->inputs()[0].dtype == DType::kFloat16);
  CHECK(c.model->outputs()[0].name == "Y");
  CHECK(c.model->outputs()[0].dtype == DType::kFloat16);
  // Inside, the weight and the Add are fp32.
  CHECK(c.graph.Find("W")->dtype == DType::kFloat32);
  const Node* add = FindNode(c.graph, "Add");
  REQUIRE(add != nullptr);
  CHECK(c.graph.Find(add->outputs[0])->dtype == DType::kFloat32);

  std::vector<uint16_t> x;
  for (float f : {1.5f, -2.f, 0.25f, 100.f}) x.push_back(FloatToHalf(f));
  st = c.session->SetInput("X", DType::kFloat16, {4}, x.data(), x.size() * 2);
  REQUIRE_MESSAGE(st.ok(), st.message());
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  DType dt;
  Shape shape;
  const void* data = nullptr;
  st = c.session->GetOutput("Y", &dt, &shape, &data);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(dt == DType::kFloat16);
  CHECK(shape == Shape{4});
  std::vector<uint16_t> y(4);
  std::memcpy(y.data(), data, 8);
  // 1.5+0.5, -2+3, 0.25+0.125 are exact; 100 + fp16(0.1) = 100.09998 rounds to 100.125
  // (fp16 spacing at 100 is 0.0625).
  CHECK(HalfToFloat(y[0]) == 2.f);
  CHECK(HalfToFloat(y[1]) == 1.f);
  CHECK(HalfToFloat(y[2]) == 0.375f);
  CHECK(std::fabs(HalfToFloat(y[3]) - 100.1f) <= 0.0625f);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold

namespace qfold {
namespace conv {
namespace test {
namespace {

// Reshape/Flatten/Squeeze/Unsqueeze share their input's buffer in the arena
// (OpDef::output0_views_input0). The shared buffer must live until the last
// reader of any view: here the views of `a` are read after several other
// tensors of the same size were written, which a planner that ended the group
// at `a`'s own last read would place over it.
TEST_CASE("arena: views share their input's buffer and live as long as their last reader") {
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("x", kFloat, {2, 3, 4});
  b.Output("v", kFloat, {6, 4});  // a view that is also a graph output
  b.Output("y", kFloat, {24});
  b.Output("r", kFloat, {4, 6});  // a view of the graph input: copied
  const int64_t to_6x4[] = {6, 4}, to_4x6[] = {4, 6}, flat[] = {24}, axes[] = {0};
  b.Init("s64", kInt64, {2}, to_6x4, sizeof(to_6x4));
  b.Init("s46", kInt64, {2}, to_4x6, sizeof(to_4x6));
  b.Init("s24", kInt64, {1}, flat, sizeof(flat));
  b.Init("ax", kInt64, {1}, axes, sizeof(axes));
  b.Node("Relu", {"x"}, {"a"}, "relu");
  b.Node("Reshape", {"a", "s64"}, {"v"}, "view_a");
  b.Node("Unsqueeze", {"v", "ax"}, {"u"}, "view_v");
  b.Node("Neg", {"a"}, {"n1"}, "neg1");
  b.Node("Abs", {"n1"}, {"n2"}, "abs");
  b.Node("Neg", {"n2"}, {"n3"}, "neg2");
  b.Node("Flatten", {"n3"}, {"f3"}, "view_n3");
  b.Node("Reshape", {"u", "s24"}, {"uf"}, "view_u");
  b.Node("Reshape", {"f3", "s24"}, {"f3f"}, "view_f3");
  b.Node("Sub", {"uf", "f3f"}, {"y"}, "sub");  // relu(x) - (-|-relu(x)|) = 2 relu(x)
  b.Node("Reshape", {"x", "s46"}, {"r"}, "view_x");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  for (int run = 0; run < 3; ++run) {
    std::vector<float> x(24);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 + size_t(run)) % 11) - 5.f;
    SetFloatInput(c.session.get(), "x", {2, 3, 4}, x);
    st = c.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    std::vector<float> relu(24), twice(24);
    for (size_t i = 0; i < x.size(); ++i) {
      relu[i] = x[i] > 0 ? x[i] : 0.f;
      twice[i] = 2 * relu[i];
    }
    CHECK(FloatOutput(*c.session, "v", {6, 4}) == relu);
    CHECK(FloatOutput(*c.session, "y", {24}) == twice);
    CHECK(FloatOutput(*c.session, "r", {4, 6}) == x);
  }
}


// ---- Optionals --------------------------------------------------------------------------------

namespace {
// Makes graph input `name` (added by OnnxBuilder::Input) an optional of its tensor type.
void MakeInputOptional(OnnxBuilder* b, const std::string& name) {
  for (onnx::ValueInfoProto& in : *b->graph()->mutable_input()) {
    if (in.name() != name) continue;
    onnx::TypeProto tensor = in.type();
    *in.mutable_type()->mutable_optional_type()->mutable_elem_type() = tensor;
  }
}
}  // namespace

TEST_CASE("converter optionals: decided statically, Optional ops fold away") {
  // Y = Relu(OptionalGetElement(Optional(X))) + OptionalHasElement(Optional(X)) and of an
  // omitted input, both as bools cast to float: nothing optional is left to run.
  TempDir dir;
  OnnxBuilder b(18);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Output("H", onnx::TensorProto::BOOL, {});
  b.Output("E", onnx::TensorProto::BOOL, {});
  b.Node("Optional", {"X"}, {"opt"}, "wrap");
  b.Node("OptionalGetElement", {"opt"}, {"x_again"}, "unwrap");
  b.Node("Relu", {"x_again"}, {"Y"}, "relu");
  b.Node("OptionalHasElement", {"opt"}, {"H"}, "has");
  b.Node("OptionalHasElement", {""}, {"E"}, "has_nothing");
  Graph g;
  const std::string path = b.Write(dir);
  Status st = LoadAndOptimize(path, ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FindNode(g, "Optional") == nullptr);
  CHECK(FindNode(g, "OptionalGetElement") == nullptr);
  CHECK(FindNode(g, "OptionalHasElement") == nullptr);
  CHECK(CountOps(g, "Relu") == 1);
  Converted c;
  st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  // Nothing optional is written: older readers still read the file.
  CHECK(c.model->impl()->fb->min_reader_version() < 7);
  SetFloatInput(c.session.get(), "X", {2}, {-1.f, 2.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "Y", {2}) == std::vector<float>{0.f, 2.f});
  for (const char* name : {"H", "E"}) {
    DType dt;
    Shape shape;
    const void* data = nullptr;
    REQUIRE(c.session->GetOutput(name, &dt, &shape, &data).ok());
    CHECK(*static_cast<const uint8_t*>(data) == (std::string(name) == "H" ? 1 : 0));
  }
}

TEST_CASE("converter optionals: an op that does not take optionals is refused naming it") {
  TempDir dir;
  OnnxBuilder b(18);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  MakeInputOptional(&b, "X");
  b.Node("Relu", {"X"}, {"Y"}, "relu");
  const std::string out = dir.File("model.qfm");
  Status st = ConvertFile(b.Write(dir), out, ConvertOptions());
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "Relu 'relu': input 'X' is an optional"), st.message());
  CHECK_FALSE(FileExists(out));
}

TEST_CASE("converter optionals: an optional graph input runs; none fails naming the node") {
  TempDir dir;
  OnnxBuilder b(18);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  MakeInputOptional(&b, "X");
  b.Node("OptionalGetElement", {"X"}, {"x_value"}, "unwrap");
  b.Node("Neg", {"x_value"}, {"Y"}, "neg");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(c.model->inputs().size() == 1);
  CHECK(c.model->inputs()[0].is_optional);
  CHECK_FALSE(c.model->inputs()[0].is_sequence);
  CHECK(c.model->impl()->fb->min_reader_version() == 7);
  SetFloatInput(c.session.get(), "X", {2}, {1.f, -2.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "Y", {2}) == std::vector<float>{-1.f, 2.f});
  REQUIRE(c.session->SetInputNone("X").ok());
  st = c.session->Run();
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "OptionalGetElement 'unwrap'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "is none"), st.message());
  // A tensor input cannot be none.
  CHECK(c.session->SetInputNone("Y").code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
