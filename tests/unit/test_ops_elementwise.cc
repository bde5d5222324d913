// Unit tests for the elementwise, activation, cast, comparison, softmax and
// reduction ops. Expected values are hand-computed unless a comment says they
// came from onnxruntime 1.32 (CPU provider).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/op.h"
#include "doctest/doctest.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::fabs(got[i] - want[i]) <= tol * (1.f + std::fabs(want[i])));
    }
  }
}

template <class T>
std::shared_ptr<OwnedTensor> Typed(DType dt, Shape shape, std::vector<T> v) {
  return Make<T>(dt, std::move(shape), std::move(v));
}
std::shared_ptr<OwnedTensor> Bool(Shape shape, std::vector<uint8_t> v) {
  return Make<uint8_t>(DType::kBool, std::move(shape), std::move(v));
}
std::shared_ptr<OwnedTensor> I32(Shape shape, std::vector<int32_t> v) {
  return Make<int32_t>(DType::kInt32, std::move(shape), std::move(v));
}

std::vector<uint8_t> BoolValues(const OpRun& r) {
  return r.values<uint8_t>();
}

AttrMap Ints(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  AttrMap a;
  for (auto& p : kv) a.SetInt(p.first, p.second);
  return a;
}

// Runs only infer on tensors without data (converter-style shape inference).
Status InferOnly(const std::string& type, std::vector<Tensor*> ins, Tensor* out,
                 const AttrMap& attrs = AttrMap()) {
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "n";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.inputs = std::move(ins);
  ctx.outputs = {out};
  return def->infer(ctx);
}

// ---------------------------------------------------------------- binary

TEST_CASE("elementwise: Add broadcasts a row over a matrix") {
  auto r = RunOp("Add", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {10, 20, 30})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
}

TEST_CASE("elementwise: Sub broadcasts both ways and scalars") {
  auto r = RunOp("Sub", {F32({2, 1}, {1, 2}), F32({1, 3}, {10, 20, 30})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{-9, -19, -29, -8, -18, -28});
  auto s = RunOp("Sub", {F32({3}, {1, 2, 3}), F32({}, {1})});
  REQUIRE(s.status.ok());
  CHECK(s.values<float>() == std::vector<float>{0, 1, 2});
  auto t = RunOp("Sub", {F32({}, {5}), F32({}, {1})});
  REQUIRE(t.status.ok());
  CHECK(t.shape().empty());
  CHECK(t.values<float>() == std::vector<float>{4});
}

// The run-merging broadcast of Add/Sub/Mul/Div against an index computed per
// element here: every pair of shapes from a set with size-1 dims, missing
// leading dims and scalars in every position (contiguous runs, a repeated
// value on either side, odometer carries over several outer dims).
TEST_CASE("elementwise: arithmetic broadcast over many shape pairs matches per-element indexing") {
  const std::vector<Shape> shapes = {{},           {1},          {5},          {3, 1},
                                     {1, 5},       {3, 5},       {2, 3, 5},    {2, 1, 5},
                                     {1, 3, 1},    {2, 3, 1},    {2, 1, 3, 5}, {1, 4, 1, 1},
                                     {2, 4, 3, 5}, {1, 4, 3, 1}, {2, 1, 1, 5}};
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  auto fill = [](const Shape& s, float seed) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = seed + 0.25f * float(i % 7) + float(i) * 0.01f;
    return v;
  };
  int checked = 0;
  for (const Shape& sa : shapes) {
    for (const Shape& sb : shapes) {
      // Broadcast shape, or skip incompatible pairs.
      const size_t r = std::max(sa.size(), sb.size());
      Shape sy(r);
      bool ok = true;
      for (size_t i = 0; i < r; ++i) {
        const int64_t da = i + sa.size() >= r ? sa[i + sa.size() - r] : 1;
        const int64_t db = i + sb.size() >= r ? sb[i + sb.size() - r] : 1;
        if (da != db && da != 1 && db != 1) ok = false;
        sy[i] = std::max(da, db);
      }
      if (!ok) continue;
      const std::vector<float> va = fill(sa, 1.f), vb = fill(sb, 2.f);
      for (const char* op : ops) {
        CAPTURE(op);
        auto res = RunOp(op, {F32(sa, va), F32(sb, vb)});
        REQUIRE(res.status.ok());
        REQUIRE(res.shape() == sy);
        const std::vector<float> got = res.values<float>();
        int64_t n = 1;
        for (int64_t d : sy) n *= d;
        for (int64_t o = 0; o < n; ++o) {
          // Per-element index into a and b from y's coordinates.
          int64_t rem = o, ia = 0, ib = 0, mul_a = 1, mul_b = 1;
          for (size_t i = r; i-- > 0;) {
            const int64_t c = rem % sy[i];
            rem /= sy[i];
            if (i + sa.size() >= r) {
              const int64_t d = sa[i + sa.size() - r];
              ia += (d == 1 ? 0 : c) * mul_a;
              mul_a *= d;
            }
            if (i + sb.size() >= r) {
              const int64_t d = sb[i + sb.size() - r];
              ib += (d == 1 ? 0 : c) * mul_b;
              mul_b *= d;
            }
          }
          const float u = va[size_t(ia)], v = vb[size_t(ib)];
          const std::string o_name = op;
          const float want = o_name == "Add"   ? u + v
                             : o_name == "Sub" ? u - v
                             : o_name == "Mul" ? u * v
                                               : u / v;
          if (got[size_t(o)] != want) {
            CAPTURE(o);
            CHECK(got[size_t(o)] == want);
            break;
          }
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 300);
}

TEST_CASE("elementwise: Add on int8 wraps, Mul on int32") {
  auto r = RunOp("Add", {Typed<int8_t>(DType::kInt8, {2}, {120, -5}),
                         Typed<int8_t>(DType::kInt8, {2}, {10, 3})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int8_t>() == std::vector<int8_t>{-126, -2});
  auto m = RunOp("Mul", {I32({2, 2}, {1, 2, 3, 4}), I32({2, 1}, {-1, 3})});
  REQUIRE(m.status.ok());
  CHECK(m.values<int32_t>() == std::vector<int32_t>{-1, -2, 9, 12});
}

// NumPy and ONNX Runtime wrap int32/int64 arithmetic (two's complement); the
// runtime is built with -fwrapv so the kernels do the same, and the sanitizer
// build runs these cases without reporting undefined behaviour.
TEST_CASE("elementwise: int32 and int64 overflow wraps like NumPy") {
  const int32_t kMax32 = std::numeric_limits<int32_t>::max();
  const int32_t kMin32 = std::numeric_limits<int32_t>::min();
  auto a = RunOp("Add", {I32({2}, {kMax32, kMin32}), I32({2}, {1, -1})});
  REQUIRE(a.status.ok());
  CHECK(a.values<int32_t>() == std::vector<int32_t>{kMin32, kMax32});
  auto m = RunOp("Mul", {I32({1}, {65536}), I32({1}, {65536})});  // 2^32 wraps to 0
  REQUIRE(m.status.ok());
  CHECK(m.values<int32_t>() == std::vector<int32_t>{0});
  const int64_t kMax64 = std::numeric_limits<int64_t>::max();
  auto s = RunOp("Sub", {I64({1}, {std::numeric_limits<int64_t>::min()}), I64({1}, {1})});
  REQUIRE(s.status.ok());
  CHECK(s.values<int64_t>() == std::vector<int64_t>{kMax64});
  auto r = RunOp("ReduceSum", {I32({3}, {kMax32, kMax32, 3})}, Ints({{"keepdims", 0}}));
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{1});  // 2 * (2^31 - 1) + 3 mod 2^32
  auto c = RunOp("CumSum", {I32({3}, {kMax32, 1, 1}), I64({}, {0})});
  REQUIRE(c.status.ok());
  CHECK(c.values<int32_t>() == std::vector<int32_t>{kMax32, kMin32, kMin32 + 1});
}

TEST_CASE("elementwise: Div truncates integers toward zero and survives zero") {
  auto r = RunOp("Div", {I32({4}, {7, -7, 7, 5}), I32({4}, {2, 2, -2, 0})});
  REQUIRE(r.status.ok());
  CHECK(r.values<int32_t>() == std::vector<int32_t>{3, -3, -3, 0});
  auto f = RunOp("Div", {F32({2}, {1, 3}), F32({2}, {4, 0})});
  REQUIRE(f.status.ok());
  ExpectNear(f.values<float>(), {0.25f, kInf});
}

TEST_CASE("elementwise: binary ops reject mixed and unsupported dtypes") {
  auto r = RunOp("Add", {F32({1}, {1}), I64({1}, {1})});
  CHECK(r.status.code() == StatusCode::kInvalidModel);
  auto b = RunOp("Add", {Bool({1}, {1}), Bool({1}, {1})});
  CHECK(b.status.code() == StatusCode::kUnsupported);
  auto bad = RunOp("Add", {F32({2, 3}, std::vector<float>(6)), F32({2}, {1, 2})});
  CHECK(bad.status.code() == StatusCode::kInvalidModel);
  auto legacy = RunOp("Add", {F32({2, 3}, std::vector<float>(6)), F32({2}, {1, 2})},
                      Ints({{"broadcast", 1}, {"axis", 0}}));
  CHECK(legacy.status.code() == StatusCode::kUnsupported);
}

TEST_CASE("elementwise: Pow by a scalar 2 squares, bit for bit as pow in double") {
  std::vector<float> x = {0.f,   -0.f,   1.5f, -3.25f, 1e-30f, -1e-23f,
                          3e19f, -2e38f, kInf, -kInf,  kNaN};
  for (int i = 0; i < 40; ++i)
    x.push_back(std::ldexp(1.f + 0.0371f * float(i), i - 20) * (i % 2 ? -1.f : 1.f));
  const Shape s{int64_t(x.size())};
  for (const bool f64_exponent : {false, true}) {
    auto r = f64_exponent ? RunOp("Pow", {F32(s, x), Typed<double>(DType::kFloat64, {}, {2.0})})
                          : RunOp("Pow", {F32(s, x), F32({1}, {2.f})});
    REQUIRE(r.status.ok());
    const std::vector<float> got = r.values<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = float(std::pow(double(x[i]), 2.0));
      CAPTURE(x[i]);
      if (std::isnan(want))
        CHECK(std::isnan(got[i]));
      else
        CHECK(got[i] == want);
    }
  }
}

TEST_CASE("elementwise: Pow with mixed base and exponent types") {
  auto a = RunOp("Pow", {F32({3}, {2, 4, -2}), I32({3}, {3, -1, 2})});
  REQUIRE(a.status.ok());
  ExpectNear(a.values<float>(), {8, 0.25f, 4});
  auto b = RunOp("Pow", {I64({3}, {1, 2, 3}), F32({3}, {4, 5, 6})});
  REQUIRE(b.status.ok());
  CHECK(b.outputs[0]->t.dtype == DType::kInt64);
  CHECK(b.values<int64_t>() == std::vector<int64_t>{1, 32, 729});
  auto c = RunOp("Pow", {F32({2, 2}, {1, 2, 3, 4}), F32({}, {0.5f})});
  REQUIRE(c.status.ok());
  ExpectNear(c.values<float>(), {1, std::sqrt(2.f), std::sqrt(3.f), 2});
  auto bad = RunOp("Pow", {Bool({1}, {1}), F32({1}, {1})});
  CHECK(bad.status.code() == StatusCode::kUnsupported);
}

TEST_CASE("elementwise: Mod follows the fmod attribute") {
  // Python-style (sign of divisor) by default; C fmod (sign of dividend) with fmod=1.
  auto i0 = RunOp("Mod", {I32({4}, {-4, 7, 5, -7}), I32({4}, {3, -3, 0, -3})});
  REQUIRE(i0.status.ok());
  CHECK(i0.values<int32_t>() == std::vector<int32_t>{2, -2, 0, -1});
  auto i1 = RunOp("Mod", {I32({4}, {-4, 7, 5, -7}), I32({4}, {3, -3, 2, -3})}, Ints({{"fmod", 1}}));
  REQUIRE(i1.status.ok());
  CHECK(i1.values<int32_t>() == std::vector<int32_t>{-1, 1, 1, -1});
  auto f1 = RunOp("Mod", {F32({2}, {-4.5f, 7}), F32({2}, {2, -3})}, Ints({{"fmod", 1}}));
  REQUIRE(f1.status.ok());
  ExpectNear(f1.values<float>(), {-0.5f, 1});
  auto f0 = RunOp("Mod", {F32({2}, {-4.5f, 7}), F32({2}, {2, -3})});
  REQUIRE(f0.status.ok());
  ExpectNear(f0.values<float>(), {1.5f, -2});
  auto bad = RunOp("Mod", {I32({1}, {1}), I32({1}, {1})}, Ints({{"fmod", 2}}));
  CHECK_FALSE(bad.status.ok());
}

TEST_CASE("elementwise: variadic Max/Min/Sum/Mean broadcast all inputs") {
  auto a = F32({2, 1}, {1, 5});
  auto b = F32({3}, {3, 0, 6});
  auto c = F32({}, {2});
  auto mx = RunOp("Max", {a, b, c});
  REQUIRE(mx.status.ok());
  CHECK(mx.shape() == Shape{2, 3});
  CHECK(mx.values<float>() == std::vector<float>{3, 2, 6, 5, 5, 6});
  auto mn = RunOp("Min", {a, b, c});
  REQUIRE(mn.status.ok());
  CHECK(mn.values<float>() == std::vector<float>{1, 0, 1, 2, 0, 2});
  auto sm = RunOp("Sum", {a, b, c});
  REQUIRE(sm.status.ok());
  CHECK(sm.values<float>() == std::vector<float>{6, 3, 9, 10, 7, 13});
  auto me = RunOp("Mean", {a, b, c});
  REQUIRE(me.status.ok());
  ExpectNear(me.values<float>(), {2, 1, 3, 10.f / 3, 7.f / 3, 13.f / 3});
  auto one = RunOp("Max", {F32({2}, {1, -1})});
  REQUIRE(one.status.ok());
  CHECK(one.values<float>() == std::vector<float>{1, -1});
  auto nan = RunOp("Max", {F32({2}, {kNaN, 1}), F32({2}, {1, kNaN})});
  REQUIRE(nan.status.ok());
  CHECK(std::isnan(nan.values<float>()[0]));
  CHECK(std::isnan(nan.values<float>()[1]));
  auto ints = RunOp("Min", {I64({2}, {4, -9}), I64({1}, {0})});
  REQUIRE(ints.status.ok());
  CHECK(ints.values<int64_t>() == std::vector<int64_t>{0, -9});
  CHECK(RunOp("Mean", {I64({1}, {1})}).status.code() == StatusCode::kUnsupported);
}

TEST_CASE("elementwise: PRelu slope broadcasts to X only") {
  auto r = RunOp("PRelu", {F32({2, 3}, {-1, 2, -3, 4, -5, 6}), F32({3}, {0.5f, 1, 2})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{-0.5f, 2, -6, 4, -5, 6});
  auto bad = RunOp("PRelu", {F32({3}, {1, 2, 3}), F32({2, 3}, std::vector<float>(6))});
  CHECK(bad.status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("elementwise: broadcast infer propagates unknown dims and rank") {
  Tensor a, b, y;
  a.dtype = b.dtype = DType::kFloat32;
  a.shape = {kUnknownDim, 3};
  b.shape = {4, 1, 1};
  REQUIRE(InferOnly("Add", {&a, &b}, &y).ok());
  CHECK(y.dtype == DType::kFloat32);
  CHECK(y.shape == Shape{4, kUnknownDim, 3});
  b.rank_known = false;
  b.shape.clear();
  Tensor z;
  REQUIRE(InferOnly("Less", {&a, &b}, &z).ok());
  CHECK_FALSE(z.rank_known);
  CHECK(z.dtype == DType::kBool);
}

// ---------------------------------------------------------------- unary

struct UnaryCase {
  const char* op;
  AttrMap attrs;
  std::vector<float> want;
};

TEST_CASE("elementwise: float activations match onnxruntime") {
  // Expected values from onnxruntime 1.32 on x = {-2, -0.5, 0, 0.5, 2}.
  AttrMap tanh_gelu;
  tanh_gelu.SetString("approximate", "tanh");
  AttrMap celu2;
  celu2.SetFloat("alpha", 2.f);
  const std::vector<UnaryCase> cases = {
      {"Gelu", {}, {-0.0455002785f, -0.154268771f, 0, 0.345731229f, 1.95449972f}},
      {"Gelu", tanh_gelu, {-0.0454023480f, -0.154285997f, 0, 0.345714003f, 1.95459771f}},
      {"Mish", {}, {-0.252501458f, -0.220743775f, 0, 0.375245243f, 1.94395900f}},
      {"Selu", {}, {-1.52016652f, -0.691758156f, 0, 0.525350511f, 2.10140204f}},
      {"Erf", {}, {-0.995322287f, -0.520499885f, 0, 0.520499885f, 0.995322287f}},
      {"Softplus", {}, {0.126928002f, 0.474076986f, 0.693147182f, 0.974076986f, 2.12692809f}},
      {"Elu", {}, {-0.864664733f, -0.393469334f, 0, 0.5f, 2}},
      {"Celu", celu2, {-1.26424110f, -0.442398429f, 0, 0.5f, 2}},
      {"HardSwish", {}, {-0.333333313f, -0.208333328f, 0, 0.291666657f, 1.66666675f}},
      {"Sigmoid", {}, {0.119202912f, 0.377540708f, 0.5f, 0.622459292f, 0.880797088f}},
      // Hand-computed.
      {"Relu", {}, {0, 0, 0, 0.5f, 2}},
      {"LeakyRelu", {}, {-0.02f, -0.005f, 0, 0.5f, 2}},
      {"HardSigmoid", {}, {0.1f, 0.4f, 0.5f, 0.6f, 0.9f}},
      {"Softsign", {}, {-2.f / 3, -1.f / 3, 0, 1.f / 3, 2.f / 3}},
      {"ThresholdedRelu", {}, {0, 0, 0, 0, 2}},
      {"Shrink", {}, {-2, 0, 0, 0, 2}},
      {"Neg", {}, {2, 0.5f, 0, -0.5f, -2}},
      {"Abs", {}, {2, 0.5f, 0, 0.5f, 2}},
      {"Sign", {}, {-1, -1, 0, 1, 1}},
      {"Floor", {}, {-2, -1, 0, 0, 2}},
      {"Ceil", {}, {-2, 0, 0, 1, 2}},
      {"Tanh", {}, {std::tanh(-2.f), std::tanh(-0.5f), 0, std::tanh(0.5f), std::tanh(2.f)}},
      {"Exp", {}, {std::exp(-2.f), std::exp(-0.5f), 1, std::exp(0.5f), std::exp(2.f)}},
      {"Reciprocal", {}, {-0.5f, -2, kInf, 2, 0.5f}},
  };
  for (const auto& c : cases) {
    INFO(c.op);
    auto r = RunOp(c.op, {F32({5}, {-2, -0.5f, 0, 0.5f, 2})}, c.attrs);
    REQUIRE(r.status.ok());
    ExpectNear(r.values<float>(), c.want);
  }
}

TEST_CASE("elementwise: Round is half to even; Sqrt/Log of negatives are NaN") {
  auto r = RunOp("Round", {F32({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f})});
  REQUIRE(r.status.ok());
  ExpectNear(r.values<float>(), {0, 2, 2, -0.f, -2, 3});
  auto s = RunOp("Sqrt", {F32({2}, {4, -1})});
  REQUIRE(s.status.ok());
  ExpectNear(s.values<float>(), {2, kNaN});
  auto l = RunOp("Log", {F32({2}, {1, 0})});
  REQUIRE(l.status.ok());
  ExpectNear(l.values<float>(), {0, -kInf});
}

TEST_CASE("elementwise: integer unary ops and dtype checks") {
  auto relu = RunOp("Relu", {I32({3}, {-3, 0, 4})});
  REQUIRE(relu.status.ok());
  CHECK(relu.values<int32_t>() == std::vector<int32_t>{0, 0, 4});
  auto neg = RunOp("Neg", {Typed<int8_t>(DType::kInt8, {2}, {-128, 5})});
  REQUIRE(neg.status.ok());
  CHECK(neg.values<int8_t>() == std::vector<int8_t>{-128, -5});
  auto abs = RunOp("Abs", {Typed<uint8_t>(DType::kUInt8, {2}, {200, 0})});
  REQUIRE(abs.status.ok());
  CHECK(abs.values<uint8_t>() == std::vector<uint8_t>{200, 0});
  auto sign = RunOp("Sign", {I64({3}, {-7, 0, 9})});
  REQUIRE(sign.status.ok());
  CHECK(sign.values<int64_t>() == std::vector<int64_t>{-1, 0, 1});
  CHECK(RunOp("Neg", {Typed<uint8_t>(DType::kUInt8, {1}, {1})}).status.code() ==
        StatusCode::kUnsupported);
  CHECK(RunOp("Exp", {I32({1}, {1})}).status.code() == StatusCode::kUnsupported);
  auto d = RunOp("Sigmoid", {Typed<double>(DType::kFloat64, {1}, {0.0})});
  REQUIRE(d.status.ok());
  CHECK(d.values<double>()[0] == 0.5);
  AttrMap bad;
  bad.SetString("approximate", "fast");
  CHECK(RunOp("Gelu", {F32({1}, {1})}, bad).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("elementwise: IsNaN, IsInf, Not") {
  auto x = F32({4}, {kNaN, kInf, -kInf, 1});
  auto n = RunOp("IsNaN", {x});
  REQUIRE(n.status.ok());
  CHECK(n.outputs[0]->t.dtype == DType::kBool);
  CHECK(BoolValues(n) == std::vector<uint8_t>{1, 0, 0, 0});
  auto i = RunOp("IsInf", {x});
  REQUIRE(i.status.ok());
  CHECK(BoolValues(i) == std::vector<uint8_t>{0, 1, 1, 0});
  auto ip = RunOp("IsInf", {x}, Ints({{"detect_negative", 0}}));
  REQUIRE(ip.status.ok());
  CHECK(BoolValues(ip) == std::vector<uint8_t>{0, 1, 0, 0});
  auto in = RunOp("IsInf", {x}, Ints({{"detect_positive", 0}}));
  REQUIRE(in.status.ok());
  CHECK(BoolValues(in) == std::vector<uint8_t>{0, 0, 1, 0});
  auto nt = RunOp("Not", {Bool({3}, {1, 0, 1})});
  REQUIRE(nt.status.ok());
  CHECK(BoolValues(nt) == std::vector<uint8_t>{0, 1, 0});
  CHECK(RunOp("Not", {F32({1}, {1})}).status.code() == StatusCode::kUnsupported);
}

TEST_CASE("elementwise: Clip with optional bounds") {
  auto x = F32({5}, {-3, -1, 0, 2, kNaN});
  auto both = RunOp("Clip", {x, F32({}, {-1.5f}), F32({}, {1})});
  REQUIRE(both.status.ok());
  ExpectNear(both.values<float>(), {-1.5f, -1, 0, 1, kNaN});
  auto lo = RunOp("Clip", {x, F32({}, {0})});
  REQUIRE(lo.status.ok());
  ExpectNear(lo.values<float>(), {0, 0, 0, 2, kNaN});
  auto hi = RunOp("Clip", {x, nullptr, F32({1}, {-2})});
  REQUIRE(hi.status.ok());
  ExpectNear(hi.values<float>(), {-3, -2, -2, -2, kNaN});
  auto none = RunOp("Clip", {x});
  REQUIRE(none.status.ok());
  ExpectNear(none.values<float>(), {-3, -1, 0, 2, kNaN});
  // min > max gives max everywhere (numpy.clip semantics).
  auto swapped = RunOp("Clip", {F32({2}, {-5, 5}), F32({}, {2}), F32({}, {1})});
  REQUIRE(swapped.status.ok());
  CHECK(swapped.values<float>() == std::vector<float>{1, 1});
  auto i8 = RunOp("Clip", {Typed<int8_t>(DType::kInt8, {3}, {-100, 0, 100}),
                           Typed<int8_t>(DType::kInt8, {}, {-10})});
  REQUIRE(i8.status.ok());
  CHECK(i8.values<int8_t>() == std::vector<int8_t>{-10, 0, 100});
  CHECK(RunOp("Clip", {x, F32({2}, {0, 1})}).status.code() == StatusCode::kInvalidModel);
  CHECK(RunOp("Clip", {x, I64({}, {0})}).status.code() == StatusCode::kInvalidModel);
}

// ---------------------------------------------------------------- cast

TEST_CASE("elementwise: Cast float to integers truncates toward zero") {
  auto x = F32({5}, {-2.7f, -0.5f, 0.5f, 2.7f, 100.f});
  auto i32 = RunOp("Cast", {x}, Ints({{"to", 6}}));
  REQUIRE(i32.status.ok());
  CHECK(i32.outputs[0]->t.dtype == DType::kInt32);
  CHECK(i32.values<int32_t>() == std::vector<int32_t>{-2, 0, 0, 2, 100});
  auto b = RunOp("Cast", {x}, Ints({{"to", 9}}));
  REQUIRE(b.status.ok());
  CHECK(BoolValues(b) == std::vector<uint8_t>{1, 1, 1, 1, 1});
  auto u8 = RunOp("Cast", {F32({2}, {255.9f, 3.f})}, Ints({{"to", 2}}));
  REQUIRE(u8.status.ok());
  CHECK(u8.values<uint8_t>() == std::vector<uint8_t>{255, 3});
  auto nan = RunOp("Cast", {F32({1}, {kNaN})}, Ints({{"to", 7}}));
  REQUIRE(nan.status.ok());  // value is implementation-defined; must not crash
}

TEST_CASE("elementwise: Cast between integers, bool, double") {
  auto x = I64({4}, {-1, 0, 300, 1LL << 40});
  auto u8 = RunOp("Cast", {x}, Ints({{"to", 2}}));
  REQUIRE(u8.status.ok());
  CHECK(u8.values<uint8_t>() == std::vector<uint8_t>{255, 0, 44, 0});  // wraps modulo 256
  auto f = RunOp("Cast", {x}, Ints({{"to", 11}}));
  REQUIRE(f.status.ok());
  CHECK(f.values<double>() == std::vector<double>{-1, 0, 300, double(1LL << 40)});
  auto b = RunOp("Cast", {Bool({2}, {1, 0})}, Ints({{"to", 1}}));
  REQUIRE(b.status.ok());
  CHECK(b.values<float>() == std::vector<float>{1, 0});
  auto same = RunOp("Cast", {x}, Ints({{"to", 7}}));
  REQUIRE(same.status.ok());
  CHECK(same.values<int64_t>() == std::vector<int64_t>{-1, 0, 300, 1LL << 40});
}

TEST_CASE("elementwise: Cast to and from float16 and bfloat16") {
  auto h = RunOp("Cast", {F32({4}, {1.f, -2.f, 0.5f, 65504.f})}, Ints({{"to", 10}}));
  REQUIRE(h.status.ok());
  CHECK(h.outputs[0]->t.dtype == DType::kFloat16);
  CHECK(h.values<uint16_t>() == std::vector<uint16_t>{0x3c00, 0xc000, 0x3800, 0x7bff});
  auto back =
      RunOp("Cast", {Typed<uint16_t>(DType::kFloat16, {2}, {0x3c00, 0xc000})}, Ints({{"to", 7}}));
  REQUIRE(back.status.ok());
  CHECK(back.values<int64_t>() == std::vector<int64_t>{1, -2});
  auto bf = RunOp("Cast", {F32({2}, {1.f, -3.f})}, Ints({{"to", 16}}));
  REQUIRE(bf.status.ok());
  CHECK(bf.values<uint16_t>() == std::vector<uint16_t>{0x3f80, 0xc040});
  auto h2bf = RunOp("Cast", {Typed<uint16_t>(DType::kFloat16, {1}, {0x3800})}, Ints({{"to", 16}}));
  REQUIRE(h2bf.status.ok());
  CHECK(h2bf.values<uint16_t>() == std::vector<uint16_t>{0x3f00});
}

TEST_CASE("elementwise: Cast errors and CastLike") {
  auto x = F32({1}, {1});
  CHECK(RunOp("Cast", {x}, Ints({{"to", 8}})).status.code() == StatusCode::kUnsupported);
  CHECK(RunOp("Cast", {x}, Ints({{"to", 17}})).status.code() == StatusCode::kUnsupported);
  CHECK(RunOp("Cast", {x}, Ints({{"to", 99}})).status.code() == StatusCode::kInvalidModel);
  CHECK(RunOp("Cast", {x}).status.code() == StatusCode::kInvalidModel);
  auto cl = RunOp("CastLike", {F32({2}, {1.9f, -1.9f}), I32({0}, {})});
  REQUIRE(cl.status.ok());
  CHECK(cl.outputs[0]->t.dtype == DType::kInt32);
  CHECK(cl.values<int32_t>() == std::vector<int32_t>{1, -1});
}

// ------------------------------------------------------- compare / logic

TEST_CASE("elementwise: comparisons broadcast and output bool") {
  auto a = F32({2, 2}, {1, 2, 3, 4});
  auto b = F32({2}, {2, 3});
  auto lt = RunOp("Less", {a, b});
  REQUIRE(lt.status.ok());
  CHECK(lt.outputs[0]->t.dtype == DType::kBool);
  CHECK(BoolValues(lt) == std::vector<uint8_t>{1, 1, 0, 0});
  CHECK(BoolValues(RunOp("LessOrEqual", {a, b})) == std::vector<uint8_t>{1, 1, 0, 0});
  CHECK(BoolValues(RunOp("Greater", {a, b})) == std::vector<uint8_t>{0, 0, 1, 1});
  CHECK(BoolValues(RunOp("GreaterOrEqual", {a, b})) == std::vector<uint8_t>{0, 0, 1, 1});
  CHECK(BoolValues(RunOp("Equal", {a, F32({}, {3})})) == std::vector<uint8_t>{0, 0, 1, 0});
  auto eb = RunOp("Equal", {Bool({2}, {1, 0}), Bool({2}, {1, 1})});
  REQUIRE(eb.status.ok());
  CHECK(BoolValues(eb) == std::vector<uint8_t>{1, 0});
  CHECK(RunOp("Less", {Bool({1}, {1}), Bool({1}, {1})}).status.code() == StatusCode::kUnsupported);
  auto ints = RunOp("Greater", {I64({3}, {-1, 5, 2}), I64({1}, {2})});
  REQUIRE(ints.status.ok());
  CHECK(BoolValues(ints) == std::vector<uint8_t>{0, 1, 0});
}

TEST_CASE("elementwise: And, Or, Xor, BitShift") {
  auto a = Bool({2, 2}, {0, 0, 1, 1});
  auto b = Bool({2}, {0, 1});
  CHECK(BoolValues(RunOp("And", {a, b})) == std::vector<uint8_t>{0, 0, 0, 1});
  CHECK(BoolValues(RunOp("Or", {a, b})) == std::vector<uint8_t>{0, 1, 1, 1});
  CHECK(BoolValues(RunOp("Xor", {a, b})) == std::vector<uint8_t>{0, 1, 1, 0});
  CHECK(RunOp("And", {F32({1}, {1}), F32({1}, {1})}).status.code() == StatusCode::kUnsupported);
  AttrMap left;
  left.SetString("direction", "LEFT");
  AttrMap right;
  right.SetString("direction", "RIGHT");
  auto x = Typed<uint8_t>(DType::kUInt8, {3}, {16, 4, 1});
  auto s = Typed<uint8_t>(DType::kUInt8, {3}, {1, 2, 9});
  CHECK(RunOp("BitShift", {x, s}, left).values<uint8_t>() == std::vector<uint8_t>{32, 16, 0});
  CHECK(RunOp("BitShift", {x, s}, right).values<uint8_t>() == std::vector<uint8_t>{8, 1, 0});
  CHECK(RunOp("BitShift", {x, s}).status.code() == StatusCode::kInvalidModel);
  // Signed (opset 28): arithmetic right shift; out-of-range shifts leave the sign fill.
  auto sx = Typed<int8_t>(DType::kInt8, {4}, {-8, 64, -3, 5});
  auto ss = Typed<int8_t>(DType::kInt8, {4}, {1, 1, 8, -1});
  CHECK(RunOp("BitShift", {sx, ss}, right).values<int8_t>() == std::vector<int8_t>{-4, 32, -1, 0});
  CHECK(RunOp("BitShift", {sx, ss}, left).values<int8_t>() == std::vector<int8_t>{-16, -128, 0, 0});
  CHECK(RunOp("BitShift", {F32({1}, {1}), F32({1}, {1})}, left).status.code() ==
        StatusCode::kUnsupported);
}

TEST_CASE("elementwise: a missing required input is an error, not a crash") {
  CHECK(RunOp("Add", {F32({1}, {1}), nullptr}).status.code() == StatusCode::kInvalidModel);
  CHECK(RunOp("Where", {Bool({1}, {1}), nullptr, F32({1}, {1})}).status.code() ==
        StatusCode::kInvalidModel);
  CHECK(RunOp("Relu", {nullptr}).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("elementwise: Where broadcasts three ways for any dtype") {
  auto c = Bool({2, 1}, {1, 0});
  auto r = RunOp("Where", {c, F32({3}, {1, 2, 3}), F32({}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.values<float>() == std::vector<float>{1, 2, 3, -1, -1, -1});
  auto i = RunOp("Where", {Bool({3}, {0, 1, 0}), I64({3}, {1, 2, 3}), I64({3}, {7, 8, 9})});
  REQUIRE(i.status.ok());
  CHECK(i.values<int64_t>() == std::vector<int64_t>{7, 2, 9});
  auto h = RunOp("Where", {Bool({2}, {1, 0}), Typed<uint16_t>(DType::kFloat16, {2}, {1, 2}),
                           Typed<uint16_t>(DType::kFloat16, {2}, {3, 4})});
  REQUIRE(h.status.ok());
  CHECK(h.values<uint16_t>() == std::vector<uint16_t>{1, 4});
  CHECK(RunOp("Where", {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})}).status.code() ==
        StatusCode::kInvalidModel);
}

// ---------------------------------------------------------------- softmax

TEST_CASE("elementwise: Softmax, LogSoftmax, Hardmax along an axis") {
  // Expected values from onnxruntime 1.32.
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 7});
  auto s0 = RunOp("Softmax", {x}, Ints({{"axis", 0}}));
  REQUIRE(s0.status.ok());
  ExpectNear(s0.values<float>(), {0.0474258736f, 0.0474258736f, 0.0179862101f, 0.952574134f,
                                  0.952574134f, 0.982013762f});
  auto ls = RunOp("LogSoftmax", {x});
  REQUIRE(ls.status.ok());
  ExpectNear(ls.values<float>(), {-2.40760589f, -1.40760589f, -0.407605946f, -3.16984606f,
                                  -2.16984606f, -0.169846043f});
  auto hm = RunOp("Hardmax", {F32({2, 3}, {3, 1, 3, 0, 5, 2})}, Ints({{"axis", -1}}));
  REQUIRE(hm.status.ok());
  CHECK(hm.values<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
  auto big = RunOp("Softmax", {F32({2}, {10000, 10001})});
  REQUIRE(big.status.ok());
  ExpectNear(big.values<float>(), {0.268941432f, 0.731058598f});
  CHECK(RunOp("Softmax", {x}, Ints({{"axis", 2}})).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("elementwise: Softmax _coerce_2d flattens from axis (opset < 13)") {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = float(i) / 10;
  auto r = RunOp("Softmax", {F32({2, 3, 4}, v)}, Ints({{"_coerce_2d", 1}}));
  REQUIRE(r.status.ok());
  // onnxruntime 1.32 with an opset-11 model (default axis 1): each row of 12 sums to 1.
  const std::vector<float> row = {0.04533001f, 0.05009741f, 0.0553662f,  0.06118912f,
                                  0.06762443f, 0.07473655f, 0.08259667f, 0.09128343f,
                                  0.1008838f,  0.11149383f, 0.12321974f, 0.13617888f};
  std::vector<float> want = row;
  want.insert(want.end(), row.begin(), row.end());
  ExpectNear(r.values<float>(), want);
}

// ---------------------------------------------------------------- reduce

TEST_CASE("elementwise: ReduceSum axes, keepdims, default and noop") {
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("ReduceSum", {x, I64({1}, {1})}, Ints({{"keepdims", 0}}));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2});
  CHECK(r.values<float>() == std::vector<float>{6, 15});
  auto k = RunOp("ReduceSum", {x, I64({1}, {-2})});
  REQUIRE(k.status.ok());
  CHECK(k.shape() == Shape{1, 3});
  CHECK(k.values<float>() == std::vector<float>{5, 7, 9});
  auto all = RunOp("ReduceSum", {x});
  REQUIRE(all.status.ok());
  CHECK(all.shape() == Shape{1, 1});
  CHECK(all.values<float>() == std::vector<float>{21});
  auto all_empty = RunOp("ReduceSum", {x, I64({0}, {})}, Ints({{"keepdims", 0}}));
  REQUIRE(all_empty.status.ok());
  CHECK(all_empty.shape().empty());
  CHECK(all_empty.values<float>() == std::vector<float>{21});
  auto noop = RunOp("ReduceSum", {x, I64({0}, {})}, Ints({{"noop_with_empty_axes", 1}}));
  REQUIRE(noop.status.ok());
  CHECK(noop.shape() == Shape{2, 3});
  CHECK(noop.values<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(RunOp("ReduceSum", {x, I64({1}, {2})}).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("elementwise: other reductions") {
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 7});
  auto ax1 = I64({1}, {1});
  AttrMap nokeep = Ints({{"keepdims", 0}});
  ExpectNear(RunOp("ReduceMean", {x, ax1}, nokeep).values<float>(), {2, 16.f / 3});
  ExpectNear(RunOp("ReduceMax", {x, ax1}, nokeep).values<float>(), {3, 7});
  ExpectNear(RunOp("ReduceMin", {x, ax1}, nokeep).values<float>(), {1, 4});
  ExpectNear(RunOp("ReduceProd", {x, ax1}, nokeep).values<float>(), {6, 140});
  ExpectNear(RunOp("ReduceL1", {F32({2}, {-3, 4}), nullptr}, nokeep).values<float>(), {7});
  ExpectNear(RunOp("ReduceSumSquare", {x, ax1}, nokeep).values<float>(), {14, 90});
  ExpectNear(RunOp("ReduceLogSum", {x, ax1}, nokeep).values<float>(),
             {std::log(6.f), std::log(16.f)});
  // From onnxruntime 1.32.
  ExpectNear(RunOp("ReduceLogSumExp", {x, ax1}, nokeep).values<float>(),
             {3.40760589f, 7.16984606f});
  ExpectNear(RunOp("ReduceL2", {x, I64({1}, {0})}).values<float>(),
             {4.12310553f, 5.38516474f, 7.61577320f});
  ExpectNear(RunOp("ReduceLogSumExp", {F32({2}, {10000, 10000}), nullptr}).values<float>(),
             {10000 + std::log(2.f)});
}

TEST_CASE("elementwise: reductions on integers, bool and empty sets") {
  auto p = RunOp("ReduceProd", {I32({2, 2}, {2, 3, -4, 5}), I64({1}, {0})});
  REQUIRE(p.status.ok());
  CHECK(p.values<int32_t>() == std::vector<int32_t>{-8, 15});
  auto s = RunOp("ReduceSum", {I64({3}, {1LL << 60, 1, -2}), nullptr});
  REQUIRE(s.status.ok());
  CHECK(s.values<int64_t>() == std::vector<int64_t>{(1LL << 60) - 1});
  auto mb = RunOp("ReduceMax", {Bool({2, 2}, {0, 0, 0, 1}), I64({1}, {1})});
  REQUIRE(mb.status.ok());
  CHECK(BoolValues(mb) == std::vector<uint8_t>{0, 1});
  auto mn = RunOp("ReduceMin", {Typed<uint8_t>(DType::kUInt8, {3}, {9, 200, 7}), nullptr});
  REQUIRE(mn.status.ok());
  CHECK(mn.values<uint8_t>() == std::vector<uint8_t>{7});
  CHECK(RunOp("ReduceSum", {Bool({1}, {1}), nullptr}).status.code() == StatusCode::kUnsupported);
  // Empty reduced axis: identity of each reduction (as in the ONNX empty_set tests).
  auto empty = F32({2, 0, 4}, {});
  auto ax = I64({1}, {1});
  ExpectNear(RunOp("ReduceSum", {empty, ax}).values<float>(), std::vector<float>(8, 0));
  ExpectNear(RunOp("ReduceProd", {empty, ax}).values<float>(), std::vector<float>(8, 1));
  ExpectNear(RunOp("ReduceMax", {empty, ax}).values<float>(), std::vector<float>(8, -kInf));
  ExpectNear(RunOp("ReduceMin", {empty, ax}).values<float>(), std::vector<float>(8, kInf));
  ExpectNear(RunOp("ReduceLogSumExp", {empty, ax}).values<float>(), std::vector<float>(8, -kInf));
  ExpectNear(RunOp("ReduceLogSum", {empty, ax}).values<float>(), std::vector<float>(8, -kInf));
  ExpectNear(RunOp("ReduceL2", {empty, ax}).values<float>(), std::vector<float>(8, 0));
  auto eb = RunOp("ReduceMin", {Bool({2, 0}, {}), I64({1}, {1})});
  REQUIRE(eb.status.ok());
  CHECK(BoolValues(eb) == std::vector<uint8_t>{1, 1});
}

TEST_CASE("elementwise: reduce infer with unknown axes or dims") {
  Tensor x, axes, y;
  x.dtype = DType::kFloat32;
  x.shape = {kUnknownDim, 3, 4};
  axes.dtype = DType::kInt64;
  axes.shape = {1};  // value unknown
  REQUIRE(InferOnly("ReduceMean", {&x, &axes}, &y).ok());
  CHECK(y.rank_known);
  CHECK(y.shape == Shape{kUnknownDim, kUnknownDim, kUnknownDim});
  Tensor y2;
  REQUIRE(InferOnly("ReduceMean", {&x, &axes}, &y2, Ints({{"keepdims", 0}})).ok());
  CHECK_FALSE(y2.rank_known);
  int64_t ax = -1;
  axes.data = &ax;
  Tensor y3;
  REQUIRE(InferOnly("ReduceMean", {&x, &axes}, &y3, Ints({{"keepdims", 0}})).ok());
  CHECK(y3.shape == Shape{kUnknownDim, 3});
  Tensor y4;
  REQUIRE(InferOnly("ArgMax", {&x}, &y4, Ints({{"axis", 1}})).ok());
  CHECK(y4.dtype == DType::kInt64);
  CHECK(y4.shape == Shape{kUnknownDim, 1, 4});
}

TEST_CASE("elementwise: ArgMax and ArgMin") {
  auto x = F32({2, 3}, {1, 5, 5, 4, 0, 4});
  auto a = RunOp("ArgMax", {x}, Ints({{"axis", 1}}));
  REQUIRE(a.status.ok());
  CHECK(a.shape() == Shape{2, 1});
  CHECK(a.values<int64_t>() == std::vector<int64_t>{1, 0});
  auto last = RunOp("ArgMax", {x}, Ints({{"axis", -1}, {"keepdims", 0}, {"select_last_index", 1}}));
  REQUIRE(last.status.ok());
  CHECK(last.shape() == Shape{2});
  CHECK(last.values<int64_t>() == std::vector<int64_t>{2, 2});
  auto mn = RunOp("ArgMin", {x}, Ints({{"keepdims", 0}}));
  REQUIRE(mn.status.ok());
  CHECK(mn.shape() == Shape{3});
  CHECK(mn.values<int64_t>() == std::vector<int64_t>{0, 1, 1});
  auto mi = RunOp("ArgMin", {I32({4}, {3, 1, 2, 1})}, Ints({{"select_last_index", 1}}));
  REQUIRE(mi.status.ok());
  CHECK(mi.values<int64_t>() == std::vector<int64_t>{3});
  CHECK(RunOp("ArgMax", {x}, Ints({{"axis", 2}})).status.code() == StatusCode::kInvalidModel);
}

}  // namespace
}  // namespace test
}  // namespace qfold
