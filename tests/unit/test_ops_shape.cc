// Unit tests for the shape and data-movement ops. Expected values are
// hand-computed unless a comment says they came from numpy.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <random>

#include "core/attr.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

std::shared_ptr<OwnedTensor> I32(Shape shape, std::vector<int32_t> v) {
  return Make<int32_t>(DType::kInt32, std::move(shape), std::move(v));
}
std::shared_ptr<OwnedTensor> U8(Shape shape, std::vector<uint8_t> v) {
  return Make<uint8_t>(DType::kUInt8, std::move(shape), std::move(v));
}
// Note: empty tensors below still pass one unused value, because the harness
// memcpys from values.data() (null for an empty vector).

// A tensor with a shape (possibly holding -1) but no data, as in the converter.
std::shared_ptr<OwnedTensor> Sym(DType dtype, Shape shape) {
  auto o = std::make_shared<OwnedTensor>();
  o->t.dtype = dtype;
  o->t.shape = std::move(shape);
  return o;
}
std::shared_ptr<OwnedTensor> UnknownRank(DType dtype) {
  auto o = Sym(dtype, {});
  o->t.rank_known = false;
  return o;
}
std::vector<float> Iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

struct InferResult {
  Status status;
  std::vector<Tensor> outputs;
};

// Runs only the op's infer, as the converter does.
InferResult Infer(const std::string& type, const std::vector<std::shared_ptr<OwnedTensor>>& inputs,
                  const AttrMap& attrs = AttrMap(), int num_outputs = 1) {
  InferResult r;
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "test";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  r.outputs.resize(size_t(num_outputs));
  for (auto& o : r.outputs) ctx.outputs.push_back(&o);
  r.status = def->infer(ctx);
  return r;
}

AttrMap Ints(const std::string& name, std::vector<int64_t> v) {
  AttrMap a;
  a.SetInts(name, std::move(v));
  return a;
}
AttrMap Int(const std::string& name, int64_t v) {
  AttrMap a;
  a.SetInt(name, v);
  return a;
}

// ---------------- Reshape / Flatten / Squeeze / Unsqueeze ----------------

// A float attribute read as an integer (a malformed file's, say): out of
// int64's range it saturates instead of converting (undefined; found by
// fuzz_capi), NaN gives the default.
TEST_CASE("attrs: float attributes read as integers") {
  AttrMap m;
  m.SetFloat("big", 3e38f);
  m.SetFloat("small", -3e38f);
  m.SetFloat("nan", std::numeric_limits<float>::quiet_NaN());
  m.SetFloat("two", 2.75f);
  CHECK(m.GetInt("big", 7) == std::numeric_limits<int64_t>::max());
  CHECK(m.GetInt("small", 7) == std::numeric_limits<int64_t>::min());
  CHECK(m.GetInt("nan", 7) == 7);
  CHECK(m.GetInt("two", 7) == 2);
  CHECK(m.GetInt("absent", 7) == 7);
}

TEST_CASE("shape: Reshape") {
  auto r = RunOp("Reshape", {F32({2, 3, 4}, Iota(24)), I64({3}, {4, 0, -1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{4, 3, 2});
  CHECK(r.values<float>() == Iota(24));
  // int32 shape input and a uint8 payload.
  r = RunOp("Reshape", {U8({2, 2}, {1, 2, 3, 4}), I32({1}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{4});
  CHECK(r.values<uint8_t>() == std::vector<uint8_t>{1, 2, 3, 4});
  // allowzero=1: 0 is a real zero dim.
  r = RunOp("Reshape", {F32({0, 3}, {0}), I64({2}, {3, 0})}, Int("allowzero", 1));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 0});
  // Errors.
  CHECK(!RunOp("Reshape", {F32({2, 3}, Iota(6)), I64({2}, {4, 2})}).status.ok());
  CHECK(!RunOp("Reshape", {F32({2, 3}, Iota(6)), I64({2}, {-1, -1})}).status.ok());
  CHECK(!RunOp("Reshape", {F32({6}, Iota(6)), I64({2}, {0, 0})}).status.ok());
  CHECK(!RunOp("Reshape", {F32({6}, Iota(6)), I64({2}, {-1, 0})}, Int("allowzero", 1)).status.ok());
}

TEST_CASE("shape: Reshape infer with unknowns") {
  auto r = Infer("Reshape", {Sym(DType::kFloat32, {-1, 3, 4}), I64({3}, {0, 12, 1})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0].shape == Shape{-1, 12, 1});
  r = Infer("Reshape", {Sym(DType::kFloat32, {-1, 3, 4}), I64({2}, {-1, 12})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0].shape == Shape{-1, 12});
  r = Infer("Reshape", {Sym(DType::kFloat32, {2, 3, 4}), Sym(DType::kInt64, {2})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0].rank_known);
  CHECK(r.outputs[0].shape == Shape{-1, -1});
  r = Infer("Reshape", {Sym(DType::kFloat32, {2, 3, 4}), Sym(DType::kInt64, {-1})});
  REQUIRE(r.status.ok());
  CHECK(!r.outputs[0].rank_known);
  r = Infer("Reshape", {UnknownRank(DType::kFloat32), I64({2}, {0, -1})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0].shape == Shape{-1, -1});
  // int4 payloads are not byte-addressable.
  r = Infer("Reshape", {Sym(DType::kInt4, {4}), I64({1}, {4})});
  CHECK(r.status.code() == StatusCode::kUnsupported);
}

TEST_CASE("shape: Flatten") {
  auto r = RunOp("Flatten", {F32({2, 3, 4}, Iota(24))});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 12});
  r = RunOp("Flatten", {F32({2, 3, 4}, Iota(24))}, Int("axis", -1));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{6, 4});
  r = RunOp("Flatten", {F32({2, 3, 4}, Iota(24))}, Int("axis", 0));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 24});
  r = RunOp("Flatten", {F32({2, 3, 4}, Iota(24))}, Int("axis", 3));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{24, 1});
  CHECK(r.values<float>() == Iota(24));
  CHECK(!RunOp("Flatten", {F32({2, 3}, Iota(6))}, Int("axis", 3)).status.ok());
  auto i = Infer("Flatten", {Sym(DType::kFloat32, {-1, 3, 4})}, Int("axis", 1));
  CHECK(i.outputs[0].shape == Shape{-1, 12});
  i = Infer("Flatten", {UnknownRank(DType::kFloat32)});
  CHECK(i.outputs[0].shape == Shape{-1, -1});
}

TEST_CASE("shape: Squeeze") {
  auto r = RunOp("Squeeze", {F32({1, 3, 1, 2}, Iota(6))});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 2});
  r = RunOp("Squeeze", {F32({1, 3, 1, 2}, Iota(6)), I64({1}, {-2})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 3, 2});
  CHECK(r.values<float>() == Iota(6));
  r = RunOp("Squeeze", {F32({1, 3, 1}, Iota(3)), I64({0}, {0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3});
  CHECK(!RunOp("Squeeze", {F32({1, 3}, Iota(3)), I64({1}, {1})}).status.ok());
  CHECK(!RunOp("Squeeze", {F32({1, 3}, Iota(3)), I64({1}, {2})}).status.ok());
  // Unknown dims, no axes: rank unknown. With axes: known.
  auto i = Infer("Squeeze", {Sym(DType::kFloat32, {-1, 1, 3})});
  REQUIRE(i.status.ok());
  CHECK(!i.outputs[0].rank_known);
  i = Infer("Squeeze", {Sym(DType::kFloat32, {-1, 1, 3}), I64({1}, {1})});
  CHECK(i.outputs[0].shape == Shape{-1, 3});
  i = Infer("Squeeze", {Sym(DType::kFloat32, {-1, 1, 3}), Sym(DType::kInt64, {1})});
  CHECK(i.outputs[0].shape == Shape{-1, -1});
}

TEST_CASE("shape: Unsqueeze") {
  auto r = RunOp("Unsqueeze", {F32({3, 2}, Iota(6)), I64({2}, {0, -1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 3, 2, 1});
  r = RunOp("Unsqueeze", {F32({3, 2}, Iota(6)), I64({2}, {3, 1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 1, 2, 1});
  r = RunOp("Unsqueeze", {F32({}, {7}), I64({1}, {0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1});
  CHECK(r.values<float>() == std::vector<float>{7});
  CHECK(!RunOp("Unsqueeze", {F32({3}, Iota(3)), I64({2}, {0, 0})}).status.ok());
  CHECK(!RunOp("Unsqueeze", {F32({3}, Iota(3)), I64({1}, {2})}).status.ok());
  CHECK(!RunOp("Unsqueeze", {F32({3}, Iota(3)), nullptr}).status.ok());
}

// ---------------- Transpose / Concat / Split ----------------

TEST_CASE("shape: Transpose") {
  auto r = RunOp("Transpose", {F32({2, 3}, Iota(6))});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.values<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  // perm (1,2,0) of a (2,2,3) tensor; checked against numpy.transpose.
  r = RunOp("Transpose", {F32({2, 2, 3}, Iota(12))}, Ints("perm", {1, 2, 0}));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3, 2});
  CHECK(r.values<float>() == std::vector<float>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
  auto b = Make<uint8_t>(DType::kBool, {2, 3}, {1, 0, 0, 1, 1, 0});
  r = RunOp("Transpose", {b});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kBool);
  CHECK(r.values<uint8_t>() == std::vector<uint8_t>{1, 1, 0, 1, 0, 0});
  CHECK(!RunOp("Transpose", {F32({2, 3}, Iota(6))}, Ints("perm", {0, 0})).status.ok());
  CHECK(!RunOp("Transpose", {F32({2, 3}, Iota(6))}, Ints("perm", {0})).status.ok());
}

TEST_CASE("shape: Concat") {
  auto r = RunOp("Concat", {F32({2, 1}, {0, 1}), F32({2, 2}, {2, 3, 4, 5})}, Int("axis", -1));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{0, 2, 3, 1, 4, 5});
  r = RunOp("Concat", {I64({1}, {1}), I64({0}, {0}), I64({2}, {2, 3})}, Int("axis", 0));
  REQUIRE(r.status.ok());
  CHECK(r.values<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(
      !RunOp("Concat", {F32({2, 1}, {0, 1}), F32({3, 1}, {2, 3, 4})}, Int("axis", 1)).status.ok());
  CHECK(!RunOp("Concat", {F32({2}, {0, 1}), I64({1}, {2})}, Int("axis", 0)).status.ok());
  CHECK(!RunOp("Concat", {F32({2}, {0, 1})}).status.ok());  // axis is required
  auto i = Infer("Concat", {Sym(DType::kFloat32, {-1, 2}), Sym(DType::kFloat32, {3, -1})},
                 Int("axis", 1));
  REQUIRE(i.status.ok());
  CHECK(i.outputs[0].shape == Shape{3, -1});
  i = Infer("Concat", {UnknownRank(DType::kFloat32), Sym(DType::kFloat32, {3, 2})}, Int("axis", 0));
  CHECK(i.outputs[0].shape == Shape{-1, 2});
  // Channels of a channels-last tensor, large enough for two threads to split
  // the pixels: every pixel holds its 24 + 40 channels in input order.
  const std::vector<float> a = Iota(40 * 50 * 24), b = Iota(40 * 50 * 40);
  std::vector<float> want;
  for (int64_t p = 0; p < 40 * 50; ++p) {
    want.insert(want.end(), a.begin() + p * 24, a.begin() + (p + 1) * 24);
    want.insert(want.end(), b.begin() + p * 40, b.begin() + (p + 1) * 40);
  }
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    r = RunOp("Concat", {F32({1, 40, 50, 24}, a), F32({1, 40, 50, 40}, b)}, Int("axis", 3), 1,
              threads);
    REQUIRE(r.status.ok());
    CHECK(r.shape() == Shape{1, 40, 50, 64});
    CHECK(r.values<float>() == want);
  }
}

TEST_CASE("shape: Split") {
  auto r = RunOp("Split", {F32({2, 3}, Iota(6)), I64({2}, {1, 2})}, Int("axis", 1), 2);
  REQUIRE(r.status.ok());
  CHECK(r.shape(0) == Shape{2, 1});
  CHECK(r.values<float>(0) == std::vector<float>{0, 3});
  CHECK(r.values<float>(1) == std::vector<float>{1, 2, 4, 5});
  // opset 18 uneven split: 7 into 4 -> 2,2,2,1.
  r = RunOp("Split", {F32({7}, Iota(7))}, Int("num_outputs", 4), 4);
  REQUIRE(r.status.ok());
  CHECK(r.shape(0) == Shape{2});
  CHECK(r.shape(3) == Shape{1});
  CHECK(r.values<float>(3) == std::vector<float>{6});
  r = RunOp("Split", {F32({6}, Iota(6))}, AttrMap(), 3);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>(1) == std::vector<float>{2, 3});
  CHECK(!RunOp("Split", {F32({6}, Iota(6)), I64({2}, {1, 2})}, AttrMap(), 2).status.ok());
  CHECK(!RunOp("Split", {F32({6}, Iota(6))}, Int("num_outputs", 3), 2).status.ok());
  auto i = Infer("Split", {Sym(DType::kFloat32, {-1, 4})}, Int("axis", -1), 2);
  REQUIRE(i.status.ok());
  CHECK(i.outputs[1].shape == Shape{-1, 2});
  i = Infer("Split", {Sym(DType::kFloat32, {-1, 4})}, AttrMap(), 2);
  CHECK(i.outputs[1].shape == Shape{-1, 4});
}

// ---------------- Slice ----------------

TEST_CASE("shape: Slice") {
  // x[0:2, 1:1000] of a 3x4 matrix.
  auto r = RunOp("Slice", {F32({3, 4}, Iota(12)), I64({2}, {0, 1}), I64({2}, {2, 1000})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{1, 2, 3, 5, 6, 7});
  // Negative step over the whole axis: x[::-1] via end = INT64_MIN.
  r = RunOp("Slice", {F32({4}, Iota(4)), I64({1}, {-1}), I64({1}, {INT64_MIN}), I64({1}, {0}),
                      I64({1}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{3, 2, 1, 0});
  // x[:, 3:0:-2] with axes=-1, int32 params.
  r = RunOp("Slice",
            {F32({2, 5}, Iota(10)), I32({1}, {3}), I32({1}, {0}), I32({1}, {-1}), I32({1}, {-2})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.values<float>() == std::vector<float>{3, 1, 8, 6});
  // Start past the end: empty. End INT64_MAX with step 2.
  r = RunOp("Slice", {F32({4}, Iota(4)), I64({1}, {10}), I64({1}, {20})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{0});
  r = RunOp("Slice",
            {F32({5}, Iota(5)), I64({1}, {1}), I64({1}, {INT64_MAX}), nullptr, I64({1}, {2})});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{1, 3});
  // Errors: step 0, repeated axis, length mismatch.
  CHECK(!RunOp("Slice", {F32({4}, Iota(4)), I64({1}, {0}), I64({1}, {2}), nullptr, I64({1}, {0})})
             .status.ok());
  CHECK(!RunOp("Slice",
               {F32({4, 4}, Iota(16)), I64({2}, {0, 0}), I64({2}, {1, 1}), I64({2}, {0, -2})})
             .status.ok());
  CHECK(!RunOp("Slice", {F32({4}, Iota(4)), I64({1}, {0}), I64({2}, {1, 1})}).status.ok());
}

TEST_CASE("shape: Slice against element-by-element indexing, random shapes and parameters") {
  // Runs copied whole (trailing axes kept whole, an axis before them with
  // step 1) and the per-element path (other steps), against indexing each
  // output element from its position; some cases take every axis whole.
  std::mt19937 rng(41);
  auto r = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = r(1, 4);
    Shape shape;
    for (int a = 0; a < rank; ++a) shape.push_back(r(1, 6));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<int64_t> starts, ends, axes, steps;
    for (int a = 0; a < rank; ++a) {
      if (r(0, 2) == 0) continue;  // this axis whole
      const int64_t d = shape[size_t(a)];
      int64_t step = r(0, 3) == 0 ? -r(1, 2) : r(1, 2);
      if (r(0, 1)) step = 1;
      axes.push_back(a);
      steps.push_back(step);
      starts.push_back(r(-int(d) - 1, int(d) + 1));
      ends.push_back(r(-int(d) - 1, int(d) + 1));
    }
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i);
    const int64_t k = int64_t(axes.size());
    auto res = RunOp("Slice", {F32(shape, x), I64({k}, starts), I64({k}, ends), I64({k}, axes),
                               I64({k}, steps)});
    REQUIRE(res.status.ok());
    // Each axis's kept indices, clamped as ONNX says.
    std::vector<std::vector<int64_t>> kept(static_cast<size_t>(rank));
    for (int a = 0; a < rank; ++a) {
      const int64_t d = shape[size_t(a)];
      int64_t st = 0, en = d, step = 1;
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i] == a) st = starts[i], en = ends[i], step = steps[i];
      if (st < 0) st += d;
      if (en < 0) en += d;
      if (step > 0) {
        st = std::clamp<int64_t>(st, 0, d);
        en = std::clamp<int64_t>(en, 0, d);
        for (int64_t j = st; j < en; j += step) kept[size_t(a)].push_back(j);
      } else {
        st = std::clamp<int64_t>(st, 0, d - 1);
        en = std::clamp<int64_t>(en, -1, d - 1);
        for (int64_t j = st; j > en; j += step) kept[size_t(a)].push_back(j);
      }
    }
    std::vector<float> want;
    std::vector<size_t> idx(static_cast<size_t>(rank), 0);
    bool empty = false;
    for (const auto& v : kept) empty = empty || v.empty();
    while (!empty) {
      int64_t off = 0;
      for (int a = 0; a < rank; ++a) off = off * shape[size_t(a)] + kept[size_t(a)][idx[size_t(a)]];
      want.push_back(x[size_t(off)]);
      int a = rank - 1;
      while (a >= 0 && ++idx[size_t(a)] == kept[size_t(a)].size()) idx[size_t(a--)] = 0;
      if (a < 0) break;
    }
    CAPTURE(iter);
    CHECK(res.values<float>() == want);
  }
}

TEST_CASE("shape: Slice infer with unknowns") {
  auto i =
      Infer("Slice", {Sym(DType::kFloat32, {-1, 8}), I64({1}, {2}), I64({1}, {6}), I64({1}, {1})});
  REQUIRE(i.status.ok());
  CHECK(i.outputs[0].shape == Shape{-1, 4});
  i = Infer("Slice",
            {Sym(DType::kFloat32, {5, 8}), Sym(DType::kInt64, {1}), I64({1}, {6}), I64({1}, {1})});
  CHECK(i.outputs[0].shape == Shape{5, -1});
  i = Infer("Slice", {Sym(DType::kFloat32, {5, 8}), Sym(DType::kInt64, {1}),
                      Sym(DType::kInt64, {1}), Sym(DType::kInt64, {1})});
  CHECK(i.outputs[0].shape == Shape{-1, -1});
}

// ---------------- Gather family ----------------

TEST_CASE("shape: Gather") {
  // axis 0 with negative indices, indices of shape (2,1).
  auto r = RunOp("Gather", {F32({3, 2}, Iota(6)), I64({2, 1}, {-1, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 1, 2});
  CHECK(r.values<float>() == std::vector<float>{4, 5, 0, 1});
  r = RunOp("Gather", {F32({3, 2}, Iota(6)), I32({}, {1})}, Int("axis", -1));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3});
  CHECK(r.values<float>() == std::vector<float>{1, 3, 5});
  CHECK(!RunOp("Gather", {F32({3, 2}, Iota(6)), I64({1}, {3})}).status.ok());
  CHECK(!RunOp("Gather", {F32({3, 2}, Iota(6)), I64({1}, {0})}, Int("axis", 2)).status.ok());
  auto i =
      Infer("Gather", {Sym(DType::kFloat32, {-1, 5}), Sym(DType::kInt64, {-1, 2})}, Int("axis", 1));
  CHECK(i.outputs[0].shape == Shape{-1, -1, 2});
}

TEST_CASE("shape: GatherElements") {
  // ONNX doc example: data [[1,2],[3,4]], indices [[0,0],[1,0]], axis 1.
  auto r = RunOp("GatherElements", {F32({2, 2}, {1, 2, 3, 4}), I64({2, 2}, {0, 0, 1, 0})},
                 Int("axis", 1));
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{1, 1, 4, 3});
  r = RunOp("GatherElements", {F32({3, 3}, Iota(9)), I32({2, 3}, {1, 2, 0, 2, 0, -3})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{3, 7, 2, 6, 1, 2});
  CHECK(!RunOp("GatherElements", {F32({2, 2}, {1, 2, 3, 4}), I64({1, 1}, {2})}).status.ok());
}

TEST_CASE("shape: GatherND") {
  // ONNX doc examples 1, 3 and 5.
  auto r = RunOp("GatherND", {I32({2, 2}, {0, 1, 2, 3}), I64({2, 2}, {0, 0, 1, 1})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{0, 3});
  r = RunOp("GatherND", {I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), I64({2, 2}, {0, 1, 1, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.values<int32_t>() == std::vector<int32_t>{2, 3, 4, 5});
  r = RunOp("GatherND", {I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), I64({2, 1}, {1, 0})},
            Int("batch_dims", 1));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.values<int32_t>() == std::vector<int32_t>{2, 3, 4, 5});
  CHECK(!RunOp("GatherND", {I32({2, 2}, {0, 1, 2, 3}), I64({1, 3}, {0, 0, 0})}).status.ok());
}

// ---------------- Shape / Size / ConstantOfShape / Range ----------------

TEST_CASE("shape: Shape and Size") {
  auto x = F32({2, 3, 4}, Iota(24));
  auto r = RunOp("Shape", {x});
  REQUIRE(r.status.ok());
  CHECK(r.values<int64_t>() == std::vector<int64_t>{2, 3, 4});
  AttrMap a;
  a.SetInt("start", -2);
  r = RunOp("Shape", {x}, a);
  CHECK(r.values<int64_t>() == std::vector<int64_t>{3, 4});
  a.SetInt("start", 1);
  a.SetInt("end", -5);  // clamps to 0: empty
  r = RunOp("Shape", {x}, a);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{0});
  r = RunOp("Size", {x});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{});
  CHECK(r.values<int64_t>() == std::vector<int64_t>{24});
  CHECK(FindOp("Shape")->shape_only);
  CHECK(FindOp("Size")->shape_only);
  auto i = Infer("Shape", {UnknownRank(DType::kFloat32)});
  CHECK(i.outputs[0].shape == Shape{-1});
}

TEST_CASE("shape: ConstantOfShape") {
  auto r = RunOp("ConstantOfShape", {I64({2}, {2, 3})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kFloat32);
  CHECK(r.values<float>() == std::vector<float>(6, 0.f));
  r = RunOp("ConstantOfShape", {I64({1}, {3}), I32({1}, {7})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{7, 7, 7});
  r = RunOp("ConstantOfShape", {I64({0}, {0}), F32({1}, {2.5f})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{});
  CHECK(r.values<float>() == std::vector<float>{2.5f});
  CHECK(!RunOp("ConstantOfShape", {I64({1}, {-1})}).status.ok());
  auto i = Infer("ConstantOfShape", {Sym(DType::kInt64, {3})});
  CHECK(i.outputs[0].shape == Shape{-1, -1, -1});
}

TEST_CASE("shape: Range") {
  auto r = RunOp("Range", {F32({}, {3}), F32({}, {9}), F32({}, {3})});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{3, 6});
  r = RunOp("Range", {I32({}, {10}), I32({}, {4}), I32({}, {-3})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{10, 7});
  r = RunOp("Range", {I64({}, {0}), I64({}, {5}), I64({}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{0});
  r = RunOp("Range", {F32({}, {0}), F32({}, {1}), F32({}, {0.3f})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{4});
  CHECK(!RunOp("Range", {I64({}, {0}), I64({}, {5}), I64({}, {0})}).status.ok());
  CHECK(!RunOp("Range", {I64({}, {0}), I32({}, {5}), I64({}, {1})}).status.ok());
  CHECK(RunOp("Range", {U8({}, {0}), U8({}, {5}), U8({}, {1})}).status.code() ==
        StatusCode::kUnsupported);
  auto i = Infer("Range", {Sym(DType::kFloat32, {}), F32({}, {1}), F32({}, {1})});
  CHECK(i.outputs[0].shape == Shape{-1});
}

// ---------------- Pad / Expand / Tile ----------------

TEST_CASE("shape: Pad") {
  // ONNX doc example, constant mode: pads [0,2,0,0] with 0.
  auto x = F32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto r = RunOp("Pad", {x, I64({4}, {0, 2, 0, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 4});
  CHECK(r.values<float>() ==
        std::vector<float>{0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f});
  // Reflect and edge modes (ONNX doc examples).
  AttrMap m;
  m.SetString("mode", "reflect");
  r = RunOp("Pad", {x, I64({4}, {0, 2, 0, 0})}, m);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() ==
        std::vector<float>{1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});
  m.SetString("mode", "edge");
  r = RunOp("Pad", {x, I64({4}, {0, 2, 0, 0})}, m);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() ==
        std::vector<float>{1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f});
  // Wrap over a 1-D tensor, padding more than the size (numpy.pad mode="wrap").
  m.SetString("mode", "wrap");
  r = RunOp("Pad", {F32({3}, {1, 2, 3}), I64({2}, {4, 1})}, m);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{3, 1, 2, 3, 1, 2, 3, 1});
  // Reflect with pads larger than the size (numpy.pad mode="reflect").
  m.SetString("mode", "reflect");
  r = RunOp("Pad", {F32({3}, {1, 2, 3}), I64({2}, {5, 0})}, m);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3});
  // Constant value, axes input, negative pads crop.
  r = RunOp("Pad", {F32({2, 3}, Iota(6)), I64({2}, {-1, 1}), F32({}, {9}), I64({1}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{1, 2, 9, 4, 5, 9});
  // int32 data.
  r = RunOp("Pad", {I32({2}, {5, 6}), I64({2}, {1, 0}), I32({}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{-1, 5, 6});
  // Errors.
  m.SetString("mode", "mirror");
  CHECK(RunOp("Pad", {x, I64({4}, {0, 0, 0, 0})}, m).status.code() == StatusCode::kUnsupported);
  CHECK(!RunOp("Pad", {x, I64({2}, {0, 0})}).status.ok());
  CHECK(!RunOp("Pad", {x, I64({4}, {0, -3, 0, 0})}).status.ok());
  CHECK(!RunOp("Pad", {x, I64({4}, {0, 0, 0, 0}), I32({}, {1})}).status.ok());
  auto i = Infer("Pad", {Sym(DType::kFloat32, {-1, 2}), I64({4}, {1, 1, 1, 1})});
  CHECK(i.outputs[0].shape == Shape{-1, 4});
}

TEST_CASE("shape: Expand and Tile") {
  auto r = RunOp("Expand", {F32({3, 1}, {1, 2, 3}), I64({3}, {2, 1, 2})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3, 2});
  CHECK(r.values<float>() == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // Bidirectional: the shape may be smaller than the input.
  r = RunOp("Expand", {F32({2, 2}, Iota(4)), I64({1}, {1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.values<float>() == Iota(4));
  CHECK(!RunOp("Expand", {F32({3}, Iota(3)), I64({1}, {2})}).status.ok());
  auto i = Infer("Expand", {Sym(DType::kFloat32, {3, 1}), Sym(DType::kInt64, {2})});
  CHECK(i.outputs[0].shape == Shape{3, -1});

  r = RunOp("Tile", {F32({2, 2}, Iota(4)), I64({2}, {1, 2})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 4});
  CHECK(r.values<float>() == std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3});
  r = RunOp("Tile", {U8({2}, {4, 5}), I64({1}, {0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{0});
  CHECK(!RunOp("Tile", {F32({2}, Iota(2)), I64({2}, {1, 1})}).status.ok());
}

// ---------------- CumSum / Trilu / Scatter / OneHot ----------------

TEST_CASE("shape: CumSum") {
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("CumSum", {x, I32({}, {1})});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{1, 3, 6, 4, 9, 15});
  r = RunOp("CumSum", {x, I64({}, {0})});
  CHECK(r.values<float>() == std::vector<float>{1, 2, 3, 5, 7, 9});
  AttrMap a;
  a.SetInt("exclusive", 1);
  a.SetInt("reverse", 1);
  r = RunOp("CumSum", {x, I64({1}, {-1})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{5, 3, 0, 11, 6, 0});
  r = RunOp("CumSum", {I64({4}, {1, 2, 3, 4}), I64({}, {0})}, Int("exclusive", 1));
  CHECK(r.values<int64_t>() == std::vector<int64_t>{0, 1, 3, 6});
  CHECK(!RunOp("CumSum", {x, I64({}, {2})}).status.ok());
  CHECK(RunOp("CumSum", {Make<uint8_t>(DType::kBool, {1}, {1}), I64({}, {0})}).status.code() ==
        StatusCode::kUnsupported);
}

TEST_CASE("shape: Trilu") {
  auto x = F32({3, 3}, Iota(9));
  auto r = RunOp("Trilu", {x});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{0, 1, 2, 0, 4, 5, 0, 0, 8});
  r = RunOp("Trilu", {x, I64({}, {-1})}, Int("upper", 0));
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 0});
  r = RunOp("Trilu", {I32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}), I64({}, {1})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{0, 2, 3, 0, 0, 6, 0, 2, 3, 0, 0, 6});
  CHECK(!RunOp("Trilu", {F32({3}, Iota(3))}).status.ok());
}

// ---------------- TopK / ReverseSequence / NonZero ----------------

TEST_CASE("shape: TopK") {
  // Ties keep the lower index first, for largest and for smallest.
  auto x = F32({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  auto r = RunOp("TopK", {x, I64({1}, {2})}, AttrMap(), 2);
  REQUIRE(r.status.ok());
  CHECK(r.shape(0) == Shape{2, 2});
  CHECK(r.values<float>(0) == std::vector<float>{3, 3, 5, 5});
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{1, 2, 0, 1});
  r = RunOp("TopK", {x, I64({1}, {3})}, Int("largest", 0), 2);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>(0) == std::vector<float>{1, 2, 3, 0, 5, 5});
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{0, 3, 1, 3, 0, 1});
  // axis 0 of a [3, 2] int32 tensor: columns are sorted independently.
  r = RunOp("TopK", {I32({3, 2}, {4, 9, 7, 9, 7, 1}), I64({1}, {2})}, Int("axis", 0), 2);
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>(0) == std::vector<int32_t>{7, 9, 7, 9});
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{1, 0, 2, 1});
  // NaN counts as larger than every number.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  r = RunOp("TopK", {F32({4}, {1, nan, 2, 3}), I64({1}, {2})}, AttrMap(), 2);
  REQUIRE(r.status.ok());
  CHECK(std::isnan(r.values<float>(0)[0]));
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{1, 3});
  r = RunOp("TopK", {F32({4}, {1, nan, 2, 3}), I64({1}, {2})}, Int("largest", 0), 2);
  CHECK(r.values<int64_t>(1) == std::vector<int64_t>{0, 2});
  // k = 0 gives empty outputs; a k past the axis or negative names the node.
  r = RunOp("TopK", {x, I64({1}, {0})}, AttrMap(), 2);
  REQUIRE(r.status.ok());
  CHECK(r.shape(1) == Shape{2, 0});
  r = RunOp("TopK", {x, I64({1}, {5})}, AttrMap(), 2);
  CHECK(r.status.code() == StatusCode::kInvalidModel);
  CHECK(r.status.message().find("TopK 'test'") != std::string::npos);
  CHECK(r.status.message().find("larger than the axis") != std::string::npos);
  CHECK(!RunOp("TopK", {x, I64({1}, {-1})}, AttrMap(), 2).status.ok());
  CHECK(!RunOp("TopK", {x, I64({2}, {1, 1})}, AttrMap(), 2).status.ok());
  CHECK(!RunOp("TopK", {x, I64({1}, {1})}, Int("axis", 2), 2).status.ok());
  // An unknown k leaves the axis unknown.
  auto inf = Infer("TopK", {x, Sym(DType::kInt64, {1})}, AttrMap(), 2);
  REQUIRE(inf.status.ok());
  CHECK(inf.outputs[1].shape == Shape{2, kUnknownDim});
  CHECK(inf.outputs[1].dtype == DType::kInt64);
}

TEST_CASE("shape: ReverseSequence") {
  // time_axis 1, batch_axis 0: row b reverses its first lens[b] entries.
  AttrMap a;
  a.SetInt("time_axis", 1);
  a.SetInt("batch_axis", 0);
  auto x = F32({3, 4, 2}, Iota(24));
  auto r = RunOp("ReverseSequence", {x, I64({3}, {4, 1, 2})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{6,  7,  4,  5,  2,  3,  0,  1,  8,  9,  10, 11,
                                                12, 13, 14, 15, 18, 19, 16, 17, 20, 21, 22, 23});
  // Defaults: time_axis 0, batch_axis 1.
  r = RunOp("ReverseSequence", {I32({3, 2}, {1, 2, 3, 4, 5, 6}), I64({2}, {3, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{5, 2, 3, 4, 1, 6});
  CHECK(!RunOp("ReverseSequence", {x, I64({3}, {4, 5, 2})}, a).status.ok());
  CHECK(!RunOp("ReverseSequence", {x, I64({2}, {1, 1})}, a).status.ok());
  CHECK(!RunOp("ReverseSequence", {x, I64({4}, {1, 1, 1, 1})}, Int("time_axis", 2)).status.ok());
}

TEST_CASE("shape: NonZero") {
  auto r = RunOp("NonZero", {F32({2, 3}, {0, 1.5f, -0.f, 2, 0, 3})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 1, 0, 2});
  r = RunOp("NonZero", {Make<uint8_t>(DType::kBool, {4}, {0, 1, 1, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int64_t>() == std::vector<int64_t>{1, 2});
  // A scalar counts as one element (ONNX Runtime's shape [1, count]).
  r = RunOp("NonZero", {F32({}, {7})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 1});
  r = RunOp("NonZero", {I32({2, 2}, {0, 0, 0, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 0});
  // Without data the count is unknown until run time.
  auto inf = Infer("NonZero", {Sym(DType::kFloat32, {2, 5})});
  REQUIRE(inf.status.ok());
  CHECK(inf.outputs[0].shape == Shape{2, kUnknownDim});
}

TEST_CASE("shape: ScatterElements") {
  // ONNX doc example 2: axis 1.
  auto r = RunOp("ScatterElements",
                 {F32({1, 5}, {1, 2, 3, 4, 5}), I64({1, 2}, {1, 3}), F32({1, 2}, {1.1f, 2.1f})},
                 Int("axis", 1));
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{1, 1.1f, 3, 2.1f, 5});
  // Duplicate indices with reduction add, negative index.
  AttrMap a;
  a.SetInt("axis", 1);
  a.SetString("reduction", "add");
  r = RunOp("ScatterElements",
            {F32({1, 5}, {1, 2, 3, 4, 5}), I64({1, 2}, {1, -4}), F32({1, 2}, {1.1f, 2.1f})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.values<float>()[1] == doctest::Approx(5.2f));
  a.SetString("reduction", "max");
  r = RunOp("ScatterElements", {I32({3}, {5, 5, 5}), I32({2}, {0, 2}), I32({2}, {7, 1})}, a);
  CHECK(!r.status.ok());  // axis 1 out of range for rank 1
  a.SetInt("axis", 0);
  r = RunOp("ScatterElements", {I32({3}, {5, 5, 5}), I32({2}, {0, 2}), I32({2}, {7, 1})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{7, 5, 5});
  a.SetString("reduction", "avg");
  CHECK(RunOp("ScatterElements", {I32({3}, {5, 5, 5}), I32({1}, {0}), I32({1}, {7})}, a)
            .status.code() == StatusCode::kUnsupported);
  CHECK(!RunOp("ScatterElements", {I32({3}, {5, 5, 5}), I32({1}, {3}), I32({1}, {7})}).status.ok());
}

TEST_CASE("shape: ScatterND") {
  // ONNX doc example 1.
  auto r = RunOp("ScatterND", {F32({8}, {1, 2, 3, 4, 5, 6, 7, 8}), I64({4, 1}, {4, 3, 1, 7}),
                               F32({4}, {9, 10, 11, 12})});
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12});
  // Slices of rows with reduction mul.
  AttrMap a;
  a.SetString("reduction", "mul");
  r = RunOp("ScatterND",
            {I64({2, 2}, {1, 2, 3, 4}), I64({2, 1}, {1, 1}), I64({2, 2}, {2, 2, 3, 3})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.values<int64_t>() == std::vector<int64_t>{1, 2, 18, 24});
  CHECK(!RunOp("ScatterND", {F32({2}, {1, 2}), I64({1, 1}, {0}), F32({2}, {1, 2})}).status.ok());
}

TEST_CASE("shape: OneHot") {
  // indices [1, -1, 5] depth 3 values [0, 1], axis -1: row 3 is out of range -> all off.
  auto r = RunOp("OneHot", {I64({3}, {1, -1, 5}), I64({}, {3}), F32({2}, {0, 1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 3});
  CHECK(r.values<float>() == std::vector<float>{0, 1, 0, 0, 0, 1, 0, 0, 0});
  // axis 0, float indices and depth, int32 values.
  r = RunOp("OneHot", {F32({2}, {0, 2}), F32({}, {3}), I32({2}, {-1, 7})}, Int("axis", 0));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.values<int32_t>() == std::vector<int32_t>{7, -1, -1, -1, -1, 7});
  CHECK(!RunOp("OneHot", {I64({1}, {0}), I64({}, {0}), F32({2}, {0, 1})}).status.ok());
  auto i = Infer("OneHot", {Sym(DType::kInt64, {-1, 4}), Sym(DType::kInt64, {}), F32({2}, {0, 1})},
                 Int("axis", 1));
  REQUIRE(i.status.ok());
  CHECK(i.outputs[0].shape == Shape{-1, -1, 4});
}

}  // namespace
}  // namespace test
}  // namespace qfold
