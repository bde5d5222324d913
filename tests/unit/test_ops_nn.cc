// Unit tests for the neural-network ops (conv, gemm/matmul, pooling,
// normalization, resize, depth/space) and the fused activation. Expected
// values are hand-computed unless a comment says they came from
// onnxruntime 1.32 (CPU provider).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= tol * (1.f + std::fabs(want[i])));
  }
}

std::vector<float> Iota(int n, float start = 0.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = start + float(i);
  return v;
}

// Runs only infer, for shape propagation with unknown dims.
Status InferOnly(const std::string& type, std::vector<Tensor*> inputs, const AttrMap& attrs,
                 Tensor* out) {
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.inputs = std::move(inputs);
  ctx.outputs = {out};
  return def->infer(ctx);
}

Tensor Sym(DType dt, Shape s) {
  Tensor t;
  t.dtype = dt;
  t.shape = std::move(s);
  return t;
}

// ---- fused activation ------------------------------------------------------

TEST_CASE("nn: FusedActivation parses and applies each kind") {
  Status st;
  AttrMap none;
  CHECK_FALSE(FusedActivation::FromAttrs(none, &st).active());
  CHECK(st.ok());

  AttrMap a;
  a.SetString("_activation", "LeakyRelu");
  a.SetFloat("_act_alpha", 0.5f);
  FusedActivation act = FusedActivation::FromAttrs(a, &st);
  REQUIRE(st.ok());
  std::vector<float> v = {-2.f, 3.f};
  act.Apply(v.data(), 2);
  ExpectNear(v, {-1.f, 3.f});

  a.SetString("_activation", "Clip");
  a.SetFloat("_act_min", 0.f);  // _act_max absent: unbounded above
  v = {-2.f, 30.f};
  FusedActivation::FromAttrs(a, &st).Apply(v.data(), 2);
  ExpectNear(v, {0.f, 30.f});

  a.SetString("_activation", "HardSigmoid");  // defaults alpha 0.2, beta 0.5
  a.Erase("_act_alpha");
  v = {-5.f, 0.f, 1.f};
  FusedActivation::FromAttrs(a, &st).Apply(v.data(), 3);
  ExpectNear(v, {0.f, 0.5f, 0.7f});

  a.SetString("_activation", "HardSwish");  // x * clamp(x/6 + 0.5, 0, 1)
  v = {-4.f, 3.f, 1.f};
  FusedActivation::FromAttrs(a, &st).Apply(v.data(), 3);
  ExpectNear(v, {0.f, 3.f, 1.f * (1.f / 6.f + 0.5f)});

  a.SetString("_activation", "Gelu");
  FusedActivation::FromAttrs(a, &st);
  CHECK(st.code() == StatusCode::kUnsupported);
}

// ---- Conv --------------------------------------------------------------------

TEST_CASE("nn: Conv 3x3 ones kernel with padding sums neighbourhoods") {
  AttrMap at;
  at.SetInts("pads", {1, 1, 1, 1});
  // x = 0..8 in a 3x3 grid; each output is the sum of the (clipped) 3x3 block.
  auto r = RunOp("Conv",
                 {F32({1, 1, 3, 3}, Iota(9)), F32({1, 1, 3, 3}, std::vector<float>(9, 1.f))}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 3, 3});
  ExpectNear(r.values<float>(), {8, 15, 12, 21, 36, 27, 20, 33, 24});
}

TEST_CASE("nn: Conv strides, bias and fused Relu") {
  AttrMap at;
  at.SetInts("strides", {2, 2});
  at.SetString("_activation", "Relu");
  // 2x2 kernel [1, 0; 0, -1] on 0..15 (4x4), stride 2: x[i][j] - x[i+1][j+1] = -5; bias 3 -> -2 ->
  // 0. Second output channel: kernel of ones -> block sums + bias -10.
  auto r = RunOp("Conv",
                 {F32({1, 1, 4, 4}, Iota(16)), F32({2, 1, 2, 2}, {1, 0, 0, -1, 1, 1, 1, 1}),
                  F32({2}, {3.f, -10.f})},
                 at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 2, 2});
  // Block sums: 0+1+4+5=10, 2+3+6+7=18, 8+9+12+13=42, 50.
  ExpectNear(r.values<float>(), {0, 0, 0, 0, 0, 8, 32, 40});
}

TEST_CASE("nn: Conv group, asymmetric pads, strides and dilations") {
  AttrMap at;
  at.SetInt("group", 2);
  at.SetInts("pads", {1, 0, 0, 1});
  at.SetInts("strides", {1, 2});
  at.SetInts("dilations", {1, 2});
  at.SetInts("kernel_shape", {2, 2});
  std::vector<float> x = Iota(16);
  for (float& v : x) v = v / 4 - 1;
  // Expected values from onnxruntime.
  auto r = RunOp("Conv",
                 {F32({1, 2, 2, 4}, x), F32({2, 1, 2, 2}, {1, -1, 2, 0.5f, 0, 1, -2, 1}),
                  F32({2}, {0.5f, -1.f})},
                 at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 2, 2});
  ExpectNear(r.values<float>(), {-1.75f, -0.5f, 0.25f, 1.f, -1.5f, -4.f, -1.f, -6.f});
}

TEST_CASE("nn: Conv 1-D with SAME_UPPER auto_pad") {
  AttrMap at;
  at.SetString("auto_pad", "SAME_UPPER");
  at.SetInts("strides", {2});
  // in 5, stride 2 -> out 3; total pad = (3-1)*2 + 2 - 5 = 1 -> begin 0, end 1.
  // Kernel [1, 10]: y[i] = x[2i] + 10 * x[2i+1] with x[5] = 0.
  auto r = RunOp("Conv", {F32({1, 1, 5}, {1, 2, 3, 4, 5}), F32({1, 1, 2}, {1, 10})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 3});
  ExpectNear(r.values<float>(), {21, 43, 5});
}

TEST_CASE("nn: Conv infer propagates unknown dims and rejects bad inputs") {
  AttrMap at;
  at.SetInts("pads", {1, 1, 1, 1});
  Tensor x = Sym(DType::kFloat32, {-1, 3, -1, 8});
  Tensor w = Sym(DType::kFloat32, {4, 3, 3, 3});
  Tensor y;
  REQUIRE(InferOnly("Conv", {&x, &w}, at, &y).ok());
  CHECK(y.shape == Shape{-1, 4, -1, 8});

  Tensor wbad = Sym(DType::kFloat32, {4, 2, 3, 3});  // 2 channels != 3
  CHECK(InferOnly("Conv", {&x, &wbad}, at, &y).code() == StatusCode::kInvalidModel);

  AttrMap act;
  act.SetString("_activation", "Mish");  // not a fused activation
  CHECK(InferOnly("Conv", {&x, &w}, act, &y).code() == StatusCode::kUnsupported);

  Tensor xi = Sym(DType::kInt32, {1, 3, 8, 8});
  Tensor wi = Sym(DType::kInt32, {4, 3, 3, 3});
  CHECK(InferOnly("Conv", {&xi, &wi}, at, &y).code() == StatusCode::kUnsupported);

  Tensor xu;
  xu.dtype = DType::kFloat32;
  xu.rank_known = false;
  Tensor wu = w;
  wu.rank_known = false;
  REQUIRE(InferOnly("Conv", {&xu, &wu}, at, &y).ok());
  CHECK_FALSE(y.rank_known);
}

// ---- ConvTranspose -------------------------------------------------------------

TEST_CASE("nn: ConvTranspose stride 2 spreads each input over its block") {
  AttrMap at;
  at.SetInts("strides", {2, 2});
  // Non-overlapping 2x2 blocks: out block (i,j) = x[i][j] * W.
  auto r = RunOp("ConvTranspose",
                 {F32({1, 1, 2, 2}, {1, 2, 3, 4}), F32({1, 1, 2, 2}, {1, 10, 100, 1000})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 4, 4});
  ExpectNear(r.values<float>(),
             {1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300, 3000, 400, 4000});
}

TEST_CASE("nn: ConvTranspose pads and output_padding") {
  AttrMap at;
  at.SetInts("strides", {2, 2});
  at.SetInts("pads", {1, 1, 0, 0});
  at.SetInts("output_padding", {1, 0});
  // Expected values from onnxruntime.
  auto r =
      RunOp("ConvTranspose", {F32({1, 1, 2, 2}, {1, 2, 3, 4}), F32({1, 1, 3, 3}, Iota(9, 1))}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 5, 4});
  ExpectNear(r.values<float>(),
             {5, 14, 10, 12, 14, 36, 24, 30, 15, 34, 20, 24, 24, 55, 32, 36, 0, 0, 0, 0});
}

TEST_CASE("nn: ConvTranspose output_shape and group") {
  AttrMap at;
  at.SetInt("group", 2);
  at.SetInts("output_shape", {4});
  // 1-D, kernel 1, two groups of one channel: out = x * w, then padded to 4 at the end.
  auto r =
      RunOp("ConvTranspose",
            {F32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), F32({2, 1, 1}, {2, -1}), F32({2}, {0.5f, 0})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 4});
  ExpectNear(r.values<float>(), {2.5f, 4.5f, 6.5f, 0.5f, -4, -5, -6, 0});
}

// ---- Gemm / MatMul ---------------------------------------------------------------

TEST_CASE("nn: Gemm transA, transB, alpha, beta and row-vector C") {
  AttrMap at;
  at.SetInt("transA", 1);
  at.SetInt("transB", 1);
  at.SetFloat("alpha", 2.f);
  at.SetFloat("beta", 0.5f);
  // A^T = [[1,2],[3,4]], B^T = [[1,0],[0,1]] -> A^T B^T = [[1,2],[3,4]]; *2 + 0.5*[10,20].
  auto r =
      RunOp("Gemm", {F32({2, 2}, {1, 3, 2, 4}), F32({2, 2}, {1, 0, 0, 1}), F32({2}, {10, 20})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  ExpectNear(r.values<float>(), {7, 14, 11, 18});
}

TEST_CASE("nn: Gemm column C, fused Clip, and errors") {
  AttrMap at;
  at.SetString("_activation", "Clip");
  at.SetFloat("_act_min", 0.f);
  at.SetFloat("_act_max", 6.f);
  // [1,2,3] . columns of B; C (2,1) broadcasts along N.
  auto r = RunOp(
      "Gemm",
      {F32({2, 3}, {1, 2, 3, -1, -2, -3}), F32({3, 2}, {1, 0, 0, 1, 1, 1}), F32({2, 1}, {1, 2})},
      at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {5, 6, 0, 0});  // [5, 6] and [-2, -3] before clipping

  auto bad = RunOp("Gemm", {F32({2, 3}, Iota(6)), F32({2, 2}, Iota(4))});
  CHECK(bad.status.code() == StatusCode::kInvalidModel);
  auto badc = RunOp("Gemm", {F32({2, 2}, Iota(4)), F32({2, 2}, Iota(4)), F32({3}, Iota(3))});
  CHECK(badc.status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("nn: MatMul 1-D promotion and batch broadcast") {
  // (3,) x (2,3,2): vector times each matrix -> (2,2).
  auto r = RunOp("MatMul", {F32({3}, {1, 2, 3}), F32({2, 3, 2}, Iota(12))});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  // [0,1;2,3;4,5]: [0+4+12, 1+6+15] = [16, 22]; [6..11]: [6+16+30, 7+18+33] = [52, 58].
  ExpectNear(r.values<float>(), {16, 22, 52, 58});

  // (2,1,2,2) x (3,2,1) broadcasts batch to (2,3).
  auto b = RunOp("MatMul", {F32({2, 1, 1, 2}, {1, 1, 2, 2}), F32({3, 2, 1}, {1, 2, 3, 4, 5, 6})});
  REQUIRE(b.status.ok());
  CHECK(b.shape() == Shape{2, 3, 1, 1});
  ExpectNear(b.values<float>(), {3, 7, 11, 6, 14, 22});
}

TEST_CASE("nn: MatMul int32 and infer") {
  auto r = RunOp("MatMul", {Make<int32_t>(DType::kInt32, {2, 2}, {1, 2, 3, 4}),
                            Make<int32_t>(DType::kInt32, {2, 1}, {5, 6})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{17, 39});

  Tensor a = Sym(DType::kFloat32, {-1, 4, 8});
  Tensor b = Sym(DType::kFloat32, {8, -1});
  Tensor y;
  REQUIRE(InferOnly("MatMul", {&a, &b}, AttrMap(), &y).ok());
  CHECK(y.shape == Shape{-1, 4, -1});
  Tensor c = Sym(DType::kFloat32, {7, 2});
  CHECK(InferOnly("MatMul", {&a, &c}, AttrMap(), &y).code() == StatusCode::kInvalidModel);
}

// ---- pooling -----------------------------------------------------------------

TEST_CASE("nn: MaxPool with Indices, pads and storage_order") {
  AttrMap at;
  at.SetInts("kernel_shape", {2, 2});
  // x = 0..8 (3x3), 2x2 windows stride 1: maxima at the bottom-right of each window.
  auto r = RunOp("MaxPool", {F32({1, 1, 3, 3}, Iota(9))}, at, 2);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 2, 2});
  ExpectNear(r.values<float>(), {4, 5, 7, 8});
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{4, 5, 7, 8});

  at.SetInt("storage_order", 1);  // column-major indices: (h, w) -> h + w * 3
  auto c = RunOp("MaxPool", {F32({1, 1, 3, 3}, Iota(9))}, at, 2);
  REQUIRE(c.status.ok());
  CHECK(c.values<int64_t>(1) == std::vector<int64_t>{4, 7, 5, 8});

  AttrMap p;
  p.SetInts("kernel_shape", {3});
  p.SetInts("pads", {1, 1});
  p.SetInts("strides", {2});
  auto q = RunOp("MaxPool", {F32({1, 1, 4}, {-1, -5, -2, -7})}, p);
  REQUIRE(q.status.ok());
  ExpectNear(q.values<float>(), {-1, -2});  // padding never wins
}

TEST_CASE("nn: MaxPool ceil_mode output size and uint8") {
  AttrMap at;
  at.SetInts("kernel_shape", {2});
  at.SetInts("strides", {2});
  at.SetInt("ceil_mode", 1);
  // in 5: ceil((5-2)/2)+1 = 3 windows; the last covers only x[4].
  auto r = RunOp("MaxPool", {Make<uint8_t>(DType::kUInt8, {1, 1, 5}, {1, 9, 3, 4, 200})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 3});
  CHECK(r.values<uint8_t>() == std::vector<uint8_t>{9, 4, 200});
}

TEST_CASE("nn: AveragePool count_include_pad and dilations") {
  AttrMap at;
  at.SetInts("kernel_shape", {3});
  at.SetInts("pads", {1, 1});
  // x = [3, 6, 9]: windows [pad,3,6], [3,6,9], [6,9,pad].
  auto r = RunOp("AveragePool", {F32({1, 1, 3}, {3, 6, 9})}, at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {4.5f, 6, 7.5f});
  at.SetInt("count_include_pad", 1);
  auto p = RunOp("AveragePool", {F32({1, 1, 3}, {3, 6, 9})}, at);
  REQUIRE(p.status.ok());
  ExpectNear(p.values<float>(), {3, 6, 5});

  AttrMap d;
  d.SetInts("kernel_shape", {2});
  d.SetInts("dilations", {2});
  auto q = RunOp("AveragePool", {F32({1, 1, 4}, {1, 2, 3, 4})}, d);
  REQUIRE(q.status.ok());
  ExpectNear(q.values<float>(), {2, 3});  // (1+3)/2, (2+4)/2
}

TEST_CASE("nn: LpPool and global pools") {
  AttrMap at;
  at.SetInts("kernel_shape", {2});
  at.SetInt("p", 2);
  auto r = RunOp("LpPool", {F32({1, 1, 3}, {3, 4, 12})}, at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {5, std::sqrt(160.f)});

  auto g = RunOp("GlobalAveragePool", {F32({1, 2, 2, 2}, Iota(8))});
  REQUIRE(g.status.ok());
  CHECK(g.shape() == Shape{1, 2, 1, 1});
  ExpectNear(g.values<float>(), {1.5f, 5.5f});
  auto m = RunOp("GlobalMaxPool", {F32({2, 1, 3}, {1, 5, 2, -3, -1, -2})});
  REQUIRE(m.status.ok());
  CHECK(m.shape() == Shape{2, 1, 1});
  ExpectNear(m.values<float>(), {5, -1});
}

TEST_CASE("nn: pooling infer and errors") {
  AttrMap at;
  at.SetInts("kernel_shape", {3, 3});
  at.SetInts("strides", {2, 2});
  Tensor x = Sym(DType::kFloat32, {1, 8, -1, 9});
  Tensor y;
  REQUIRE(InferOnly("MaxPool", {&x}, at, &y).ok());
  CHECK(y.shape == Shape{1, 8, -1, 4});

  Tensor x3 = Sym(DType::kFloat32, {1, 8, 9});
  CHECK(InferOnly("MaxPool", {&x3}, at, &y).code() == StatusCode::kInvalidModel);
  CHECK(InferOnly("AveragePool", {&x}, AttrMap(), &y).code() == StatusCode::kInvalidModel);
  AttrMap bad = at;
  bad.SetString("auto_pad", "SAME");
  CHECK(InferOnly("MaxPool", {&x}, bad, &y).code() == StatusCode::kInvalidModel);
}

// ---- normalization ---------------------------------------------------------------

TEST_CASE("nn: BatchNormalization inference") {
  // Channel 0: (x - 1) / sqrt(4) * 2 + 1 = x; channel 1: (x - 0) / 1 * 1 + (-1).
  AttrMap at;
  at.SetFloat("epsilon", 0.f);
  auto r = RunOp("BatchNormalization",
                 {F32({1, 2, 2}, {3, 5, 7, 9}), F32({2}, {2, 1}), F32({2}, {1, -1}),
                  F32({2}, {1, 0}), F32({2}, {4, 1})},
                 at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {3, 5, 6, 8});

  at.SetInt("training_mode", 1);
  auto t = RunOp(
      "BatchNormalization",
      {F32({1, 2}, {1, 2}), F32({2}, {1, 1}), F32({2}, {0, 0}), F32({2}, {0, 0}), F32({2}, {1, 1})},
      at);
  CHECK(t.status.code() == StatusCode::kUnsupported);
}

TEST_CASE("nn: LayerNormalization with Mean and InvStdDev outputs") {
  // Expected values from onnxruntime (opset 17, epsilon 1e-5).
  auto r = RunOp("LayerNormalization",
                 {F32({2, 4}, {1, 2, 4, 8, -1, 0, 1, 3}), F32({4}, {1, 2, 0.5f, -1}),
                  F32({4}, {0, 0.1f, 0.2f, 0.3f})},
                 AttrMap(), 3);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(0), {-1.025755f, -1.205506f, 0.246625f, -1.285257f, -1.183213f,
                                  -0.914183f, 0.284515f, -1.221274f});
  CHECK(r.shape(1) == Shape{2, 1});
  ExpectNear(r.values<float>(1), {3.75f, 0.75f});
  ExpectNear(r.values<float>(2), {0.373002f, 0.676122f});

  AttrMap at;
  at.SetInt("axis", 2);
  Tensor x = Sym(DType::kFloat32, {2, 3});
  Tensor s = Sym(DType::kFloat32, {3});
  Tensor y;
  CHECK(InferOnly("LayerNormalization", {&x, &s}, at, &y).code() == StatusCode::kInvalidModel);
}

TEST_CASE("nn: InstanceNormalization and GroupNormalization") {
  // Expected values from onnxruntime.
  auto r = RunOp("InstanceNormalization", {F32({1, 2, 4}, {1, 2, 4, 8, -1, 0, 1, 3}),
                                           F32({2}, {2, 1}), F32({2}, {0.5f, -0.5f})});
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {-1.551509f, -0.805506f, 0.686501f, 3.670514f, -1.683213f,
                                 -1.007091f, -0.33097f, 1.021274f});

  AttrMap at;
  at.SetInt("num_groups", 2);
  // Expected values from onnxruntime (opset 21).
  auto g = RunOp(
      "GroupNormalization",
      {F32({1, 4, 2}, {1, 2, 4, 8, -1, 0, 1, 3}), F32({4}, {1, 2, 3, 4}), F32({4}, {0, 0, 1, 1})},
      at);
  REQUIRE(g.status.ok());
  ExpectNear(g.values<float>(), {-1.025755f, -0.652753f, 0.186501f, 3.170514f, -2.54964f,
                                 -0.521274f, 1.676122f, 7.085097f});
}

TEST_CASE("nn: LRN") {
  AttrMap at;
  at.SetInt("size", 3);
  at.SetFloat("alpha", 0.1f);
  at.SetFloat("beta", 0.75f);
  // Expected values from onnxruntime.
  auto r = RunOp("LRN", {F32({1, 3, 1, 2}, Iota(6, 1))}, at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {0.805927f, 1.363463f, 1.679876f, 1.815629f, 2.83254f, 2.822486f});
}

TEST_CASE("nn: LRN fast path against the reference kernel") {
  // The fast path (any SIMD level) sums windows plane by plane in float and
  // takes b^-beta as exp(-beta * log(b)) with the vector math: within a few
  // float ulp of the double reference (forced with the reference level), for
  // several exponents, window sizes, shapes and thread counts.
  std::vector<float> x(2 * 7 * 40 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 101) - 50) * 0.173f;
  for (float beta : {0.75f, 0.5f, 0.6f})
    for (int64_t size : {1, 2, 5}) {
      AttrMap at;
      at.SetInt("size", size);
      at.SetFloat("alpha", 0.3f);
      at.SetFloat("beta", beta);
      at.SetFloat("bias", 1.5f);
      auto ref =
          RunOp("LRN", {F32({2, 7, 40, 40}, x)}, at, 1, 1, &IsaConfig(kernels::Isa::kReference));
      REQUIRE(ref.status.ok());
      for (int threads : {1, 2}) {
        CAPTURE(beta);
        CAPTURE(size);
        CAPTURE(threads);
        auto fast = RunOp("LRN", {F32({2, 7, 40, 40}, x)}, at, 1, threads);
        REQUIRE(fast.status.ok());
        const std::vector<float> a = fast.values<float>(), b = ref.values<float>();
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i)
          CHECK(std::fabs(a[i] - b[i]) <= 1e-6f * std::fabs(b[i]) + 1e-30f);
      }
    }
}

// ---- Resize ----------------------------------------------------------------------

TEST_CASE("nn: Resize nearest upsample by scales") {
  AttrMap at;  // mode nearest, half_pixel, round_prefer_floor
  auto r = RunOp("Resize", {F32({1, 1, 1, 2}, {1, 2}), nullptr, F32({4}, {1, 1, 2, 2})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 2, 4});
  ExpectNear(r.values<float>(), {1, 1, 2, 2, 1, 1, 2, 2});
}

TEST_CASE("nn: Resize linear modes") {
  AttrMap at;
  at.SetString("mode", "linear");
  // half_pixel 2 -> 4: source coords -0.25, 0.25, 0.75, 1.25 (clamped at the edges).
  auto r = RunOp("Resize", {F32({1, 1, 1, 2}, {1, 3}), nullptr, F32({4}, {1, 1, 1, 2})}, at);
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {1, 1.5f, 2.5f, 3});

  // align_corners 2x2 -> 3x3 via sizes and axes: midpoints are averages.
  at.SetString("coordinate_transformation_mode", "align_corners");
  at.SetInts("axes", {2, 3});
  auto a =
      RunOp("Resize",
            {F32({1, 1, 2, 2}, {0, 2, 4, 6}), F32({0}, {}), F32({0}, {}), I64({2}, {3, 3})}, at);
  REQUIRE(a.status.ok());
  CHECK(a.shape() == Shape{1, 1, 3, 3});
  ExpectNear(a.values<float>(), {0, 1, 2, 2, 3, 4, 4, 5, 6});
}

TEST_CASE("nn: Resize cubic and tf_crop_and_resize") {
  AttrMap at;
  at.SetString("mode", "cubic");
  // Expected values from onnxruntime (3x3 -> 4x4, half_pixel, A = -0.75).
  auto r =
      RunOp("Resize", {F32({1, 1, 3, 3}, Iota(9, 1)), nullptr, F32({4}, {1, 1, 1.5f, 1.5f})}, at);
  REQUIRE(r.status.ok());
  ExpectNear(
      r.values<float>(),
      {0.652778f, 1.145834f, 1.969909f, 2.613427f, 2.131945f, 2.625f, 3.449076f, 4.092593f,
       4.604172f, 5.097225f, 5.921303f, 6.56482f, 6.534727f, 7.027779f, 7.851856f, 8.495373f},
      1e-4f);

  AttrMap tf;
  tf.SetString("mode", "linear");
  tf.SetString("coordinate_transformation_mode", "tf_crop_and_resize");
  tf.SetFloat("extrapolation_value", -1.f);
  tf.SetInts("axes", {1});
  // roi [0.5, 1.5] on an axis of 3: coords 1, 2, 3 -> the last is outside.
  auto c = RunOp("Resize",
                 {F32({1, 3}, {10, 20, 30}), F32({2}, {0.5f, 1.5f}), nullptr, I64({1}, {3})}, tf);
  REQUIRE(c.status.ok());
  ExpectNear(c.values<float>(), {20, 30, -1});
}

TEST_CASE("nn: Resize keep_aspect_ratio_policy, infer and errors") {
  AttrMap at;
  at.SetInts("axes", {2, 3});
  at.SetString("keep_aspect_ratio_policy", "not_larger");
  // sizes (4, 9) on 2x3: scale = min(2, 3) = 2 -> (4, 6).
  auto r = RunOp("Resize", {F32({1, 1, 2, 3}, Iota(6)), nullptr, nullptr, I64({2}, {4, 9})}, at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1, 4, 6});

  // sizes with unknown value: resized axes become unknown.
  Tensor x = Sym(DType::kFloat32, {1, 3, 8, 8});
  Tensor sizes = Sym(DType::kInt64, {2});
  Tensor y;
  AttrMap ax;
  ax.SetInts("axes", {2, 3});
  REQUIRE(InferOnly("Resize", {&x, nullptr, nullptr, &sizes}, ax, &y).ok());
  CHECK(y.shape == Shape{1, 3, -1, -1});

  // Neither scales nor sizes; both; unknown mode.
  CHECK(RunOp("Resize", {F32({1, 2}, {1, 2})}).status.code() == StatusCode::kInvalidModel);
  CHECK(RunOp("Resize", {F32({2}, {1, 2}), nullptr, F32({1}, {2}), I64({1}, {4})}).status.code() ==
        StatusCode::kInvalidModel);
  AttrMap bad;
  bad.SetString("mode", "area");
  CHECK(RunOp("Resize", {F32({2}, {1, 2}), nullptr, F32({1}, {2})}, bad).status.code() ==
        StatusCode::kUnsupported);
}

// ---- DepthToSpace / SpaceToDepth -------------------------------------------------------

TEST_CASE("nn: DepthToSpace DCR and CRD, SpaceToDepth inverse") {
  AttrMap at;
  at.SetInt("blocksize", 2);
  // One output channel from 4: DCR takes block offset (i, j) from channel i*2+j.
  // Input channels hold 0..3 (c*1 + 0) at a single pixel.
  auto d = RunOp("DepthToSpace", {F32({1, 4, 1, 1}, {0, 1, 2, 3})}, at);
  REQUIRE(d.status.ok());
  CHECK(d.shape() == Shape{1, 1, 2, 2});
  ExpectNear(d.values<float>(), {0, 1, 2, 3});

  // 8 channels -> 2 output channels. DCR: output channel c, offset (i, j) reads
  // input channel (i*2+j)*2 + c; CRD reads c*4 + i*2 + j.
  auto dcr = RunOp("DepthToSpace", {F32({1, 8, 1, 1}, Iota(8))}, at);
  REQUIRE(dcr.status.ok());
  ExpectNear(dcr.values<float>(), {0, 2, 4, 6, 1, 3, 5, 7});
  at.SetString("mode", "CRD");
  auto crd = RunOp("DepthToSpace", {F32({1, 8, 1, 1}, Iota(8))}, at);
  REQUIRE(crd.status.ok());
  ExpectNear(crd.values<float>(), Iota(8));

  AttrMap s;
  s.SetInt("blocksize", 2);
  auto back = RunOp("SpaceToDepth", {F32({1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7})}, s);
  REQUIRE(back.status.ok());
  CHECK(back.shape() == Shape{1, 8, 1, 1});
  ExpectNear(back.values<float>(), Iota(8));

  auto bad = RunOp("SpaceToDepth", {F32({1, 1, 3, 2}, Iota(6))}, s);
  CHECK(bad.status.code() == StatusCode::kInvalidModel);
}

}  // namespace
}  // namespace test
}  // namespace qfold
