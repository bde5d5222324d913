// The fast int8 kernels (runtime/src/kernels) against the reference kernels
// of QLinearConv/QLinearMatMul: for every ISA level this CPU supports, random
// shapes at tile edges, padding, strides, dilations, groups, both 8-bit
// dtypes, per-tensor and per-channel weights, extreme zero points and scales
// (clamping, infinite and NaN multipliers) must give bit-identical bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_s8.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;
using kernels::Isa;

// Restores the ISA level chosen at start when a test case ends.
struct IsaGuard {
  Isa saved = kernels::ActiveIsa();
  ~IsaGuard() { kernels::SetIsaForTesting(saved); }
};

TensorPtr Bytes(DType dt, Shape s, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = uint8_t(rng());
  return Make<uint8_t>(dt, std::move(s), v);
}

TensorPtr Zp(DType dt, Shape s, const std::vector<int32_t>& v) {
  std::vector<uint8_t> b;
  for (int32_t x : v) b.push_back(uint8_t(x));
  return Make<uint8_t>(dt, std::move(s), b);
}

// A zero point: one of the dtype's extremes or a random value.
int32_t RandomZp(DType dt, std::mt19937& rng) {
  const bool s = dt == DType::kInt8;
  switch (rng() % 4) {
    case 0:
      return s ? -128 : 0;
    case 1:
      return s ? 127 : 255;
    case 2:
      return s ? 0 : 128;
    default:
      return s ? int32_t(int8_t(rng())) : int32_t(uint8_t(rng()));
  }
}

float Uniform(std::mt19937& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// Output scale: mostly so results spread over the range, sometimes tiny
// (everything clamps), large (everything rounds to the zero point) or 0
// (infinite multipliers, NaN for a zero accumulator).
float RandomYScale(std::mt19937& rng, float xs, float ws, int64_t k) {
  const float typical = xs * ws * 128.f * 64.f * std::sqrt(float(k)) / 100.f;
  switch (rng() % 10) {
    case 0:
      return typical * 1e-4f;
    case 1:
      return typical * 1e4f;
    case 2:
      return rng() % 4 ? typical * 0.05f : 0.f;
    default:
      return typical * Uniform(rng, 0.3f, 3.f);
  }
}

// Runs `type` with the reference kernel, then with the fast kernels of every
// supported level (and 1 and 2 threads); all outputs must be byte-identical.
// Returns the number of fast-path runs compared.
int CompareWithReference(const std::string& type, const std::vector<TensorPtr>& inputs,
                         const AttrMap& attrs, const std::string& what) {
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  REQUIRE(bool(def->prepare));
  std::string name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  OwnedTensor out;
  ctx.outputs = {&out.t};
  INFO(what);
  const Status st = def->infer(ctx);
  CAPTURE(st.message());
  REQUIRE(st.ok());
  out.storage.assign(out.t.bytes() + 64, 0xAB);
  out.t.data = out.storage.data();
  REQUIRE(def->run(ctx).ok());  // no state: the reference kernel
  const std::vector<uint8_t> want = out.storage;
  int runs = 0;
  IsaGuard guard;
  for (Isa isa : kernels::SupportedIsas()) {
    if (!kernels::GemmS8For(isa)) continue;
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    REQUIRE(kernels::SetIsaForTesting(isa) == isa);
    std::shared_ptr<void> state;
    REQUIRE(def->prepare(ctx, &state).ok());
    REQUIRE(state != nullptr);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ctx.state = state.get();
      ctx.num_threads = threads;
      std::fill(out.storage.begin(), out.storage.end(), 0xCD);
      std::fill(out.storage.begin() + int64_t(out.t.bytes()), out.storage.end(), 0xAB);
      REQUIRE(def->run(ctx).ok());
      size_t bad = 0;
      while (bad < want.size() && want[bad] == out.storage[bad]) ++bad;
      CAPTURE(bad);
      REQUIRE(bad == want.size());
      ++runs;
      ctx.state = nullptr;
    }
  }
  return runs;
}

struct ConvCase {
  DType xt, wt, yt;
  int64_t n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool one_d, per_channel, bias, clamp;
};

std::string Describe(const ConvCase& k) {
  std::ostringstream o;
  o << "x " << dtype_name(k.xt) << " w " << dtype_name(k.wt) << " y " << dtype_name(k.yt) << " N"
    << k.n << " C" << k.c << " M" << k.m << " g" << k.group << " HxW " << k.h << "x" << k.w << " k "
    << k.kh << "x" << k.kw << " s " << k.sh << "," << k.sw << " d " << k.dh << "," << k.dw
    << " pads " << k.pt << "," << k.pl << "," << k.pb << "," << k.pr << (k.one_d ? " 1-D" : "")
    << (k.per_channel ? " per-channel" : "") << (k.bias ? " bias" : "")
    << (k.clamp ? " _qmin/_qmax" : "");
  return o.str();
}

int RunConvCase(const ConvCase& k, std::mt19937& rng) {
  const int64_t cg = k.c / k.group;
  Shape xs = {k.n, k.c, k.h, k.w}, ws = {k.m, cg, k.kh, k.kw};
  AttrMap attrs;
  attrs.SetInt("group", k.group);
  if (k.one_d) {
    xs = Shape{k.n, k.c, k.w};
    ws = Shape{k.m, cg, k.kw};
    attrs.SetInts("strides", {k.sw});
    attrs.SetInts("dilations", {k.dw});
    attrs.SetInts("pads", {k.pl, k.pr});
  } else {
    attrs.SetInts("strides", {k.sh, k.sw});
    attrs.SetInts("dilations", {k.dh, k.dw});
    attrs.SetInts("pads", {k.pt, k.pl, k.pb, k.pr});
  }
  const int32_t yzp = RandomZp(k.yt, rng);
  if (k.clamp) {
    const int32_t lo = k.yt == DType::kInt8 ? -128 : 0, qmin = std::max(lo, yzp - 20);
    attrs.SetInt("_qmin", qmin);
    attrs.SetInt("_qmax", std::min(lo + 255, qmin + 50));
  }
  const float x_scale = Uniform(rng, 0.001f, 1.f);
  std::vector<float> w_scale;
  std::vector<int32_t> wzp;
  for (int64_t i = 0; i < (k.per_channel ? k.m : 1); ++i) {
    w_scale.push_back(Uniform(rng, 0.001f, 0.1f));
    // Symmetric weights are the common case; asymmetric ones test the row sums.
    wzp.push_back(rng() % 2 ? (k.wt == DType::kInt8 ? 0 : 128) : RandomZp(k.wt, rng));
  }
  const Shape pshape = k.per_channel ? Shape{k.m} : Shape{};
  std::vector<int32_t> bias(static_cast<size_t>(k.m));
  for (auto& b : bias) b = int32_t(rng() % 200001) - 100000;
  if (rng() % 8 == 0)
    for (auto& b : bias) b = int32_t(rng());  // wraps around int32
  const float y_scale = RandomYScale(rng, x_scale, w_scale[0], cg * k.kh * k.kw);
  std::vector<TensorPtr> in = {
      Bytes(k.xt, xs, rng), F32({}, {x_scale}),   Zp(k.xt, {}, {RandomZp(k.xt, rng)}),
      Bytes(k.wt, ws, rng), F32(pshape, w_scale), Zp(k.wt, pshape, wzp),
      F32({}, {y_scale}),   Zp(k.yt, {}, {yzp}),
  };
  if (k.bias) in.push_back(Make<int32_t>(DType::kInt32, {k.m}, bias));
  return CompareWithReference("QLinearConv", in, attrs, Describe(k));
}

DType RandomDType(std::mt19937& rng) {
  return rng() % 2 ? DType::kInt8 : DType::kUInt8;
}

ConvCase RandomConv(std::mt19937& rng, int kind) {
  ConvCase k{};
  k.xt = RandomDType(rng);
  k.wt = RandomDType(rng);
  k.yt = RandomDType(rng);
  k.n = 1 + rng() % 2;
  k.h = 1 + rng() % 14;
  k.w = 1 + rng() % 21;
  k.sh = k.sw = k.dh = k.dw = 1;
  k.one_d = rng() % 8 == 0;
  k.per_channel = rng() % 2;
  k.bias = rng() % 4 != 0;
  k.clamp = rng() % 6 == 0;
  const int64_t sizes[] = {1, 2, 3, 5};
  k.kh = sizes[rng() % 4];
  k.kw = sizes[rng() % 4];
  if (kind == 0) {  // 1x1, no padding: the direct GEMM over NCHW
    k.kh = k.kw = 1;
    k.group = 1;
    k.c = 1 + rng() % 40;
    k.m = 1 + rng() % 40;
  } else if (kind == 1) {  // general window: im2col + GEMM
    k.group = 1;
    k.c = 1 + rng() % 12;
    k.m = 1 + rng() % 37;
  } else if (kind == 2) {  // depthwise
    k.c = k.m = k.group = 1 + rng() % 20;
  } else {  // grouped, not depthwise (includes channel multipliers)
    k.group = 2 + rng() % 3;
    k.c = k.group * (1 + rng() % 4);
    k.m = k.group * (1 + rng() % 6);
  }
  if (kind != 0) {
    k.sh = 1 + rng() % 3;
    k.sw = 1 + rng() % 3;
    k.dh = 1 + rng() % 2;
    k.dw = 1 + rng() % 2;
    k.pt = rng() % 3;
    k.pl = rng() % 3;
    k.pb = rng() % 3;
    k.pr = rng() % 3;
  }
  if (k.one_d) {
    k.h = k.kh = k.sh = k.dh = 1;
    k.pt = k.pb = 0;
  }
  // Keep at least one output position (infer rejects empty windows).
  k.h = std::max(k.h, (k.kh - 1) * k.dh + 1 - k.pt - k.pb);
  k.w = std::max(k.w, (k.kw - 1) * k.dw + 1 - k.pl - k.pr);
  return k;
}

TEST_CASE("kernels: ISA levels") {
  IsaGuard guard;
  const std::vector<Isa> levels = kernels::SupportedIsas();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == Isa::kReference);
  CHECK(levels.back() == kernels::DetectedIsa());
  CHECK(int(kernels::ActiveIsa()) <= int(kernels::DetectedIsa()));
  // Forcing a level never goes above what the CPU has.
  if (kernels::DetectedIsa() != Isa::kNeonDot)
    CHECK(kernels::SetIsaForTesting(Isa::kAvx512Vnni) == kernels::DetectedIsa());
  CHECK(kernels::SetIsaForTesting(Isa::kReference) == Isa::kReference);
  CHECK(kernels::GemmS8For(Isa::kReference) == nullptr);
  // At the reference level, prepare leaves no state: the reference kernel runs.
  std::mt19937 rng(1);
  auto w = Bytes(DType::kInt8, {4, 3, 1, 1}, rng);
  const OpDef* def = FindOp("QLinearConv");
  std::string type = "QLinearConv", name = "t";
  AttrMap attrs;
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.inputs = {nullptr, nullptr, nullptr, &w->t};
  std::shared_ptr<void> state;
  REQUIRE(def->prepare(ctx, &state).ok());
  CHECK(state == nullptr);
  MESSAGE("detected ISA: " << kernels::IsaName(kernels::DetectedIsa()));
}

TEST_CASE("kernels: QLinearConv 1x1 matches the reference") {
  std::mt19937 rng(11);
  int runs = 0;
  for (int i = 0; i < 60; ++i) runs += RunConvCase(RandomConv(rng, 0), rng);
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearConv KxK with pads, strides, dilations matches the reference") {
  std::mt19937 rng(12);
  int runs = 0;
  for (int i = 0; i < 80; ++i) runs += RunConvCase(RandomConv(rng, 1), rng);
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearConv depthwise matches the reference") {
  std::mt19937 rng(13);
  int runs = 0;
  for (int i = 0; i < 80; ++i) runs += RunConvCase(RandomConv(rng, 2), rng);
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearConv grouped matches the reference") {
  std::mt19937 rng(14);
  int runs = 0;
  for (int i = 0; i < 50; ++i) runs += RunConvCase(RandomConv(rng, 3), rng);
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearConv tile edges and extreme zero points") {
  std::mt19937 rng(15);
  // Channel counts around the tile heights (4, 8) and positions around the
  // panel widths (16, 32), every zero-point extreme and dtype combination.
  for (int64_t m : {1, 7, 8, 9, 17, 33}) {
    for (int64_t p : {1, 15, 16, 17, 31, 32, 33, 47}) {
      ConvCase k{};
      k.xt = RandomDType(rng);
      k.wt = RandomDType(rng);
      k.yt = RandomDType(rng);
      k.n = 1;
      k.c = 1 + rng() % 9;
      k.m = m;
      k.group = 1;
      k.h = 1;
      k.w = p;
      k.kh = k.kw = k.sh = k.sw = k.dh = k.dw = 1;
      k.per_channel = rng() % 2;
      k.bias = true;
      RunConvCase(k, rng);
    }
  }
  // 3x3 with K = 9 * C crossing multiples of 4, pads on every side.
  for (int64_t c : {1, 2, 3, 4, 5, 7, 8}) {
    ConvCase k{};
    k.xt = RandomDType(rng);
    k.wt = RandomDType(rng);
    k.yt = RandomDType(rng);
    k.n = 1;
    k.c = c;
    k.m = 3 + c;
    k.group = 1;
    k.h = 6;
    k.w = 19;
    k.kh = k.kw = 3;
    k.sh = k.sw = k.dh = k.dw = 1;
    k.pt = k.pl = k.pb = k.pr = 1;
    k.per_channel = true;
    k.bias = true;
    RunConvCase(k, rng);
  }
}

TEST_CASE("kernels: QLinearConv large enough to split between threads") {
  // CompareWithReference runs 1 and 2 threads; these shapes exceed the
  // size below which the GEMM stays on one thread.
  std::mt19937 rng(16);
  for (int i = 0; i < 2; ++i) {
    ConvCase k{};
    k.xt = i ? DType::kInt8 : DType::kUInt8;
    k.wt = i ? DType::kUInt8 : DType::kInt8;
    k.yt = k.xt;
    k.n = 1;
    k.c = 48;
    k.m = 40 + i;
    k.group = 1;
    k.h = 30;
    k.w = 37;
    k.kh = k.kw = 1 + 2 * i;
    k.sh = k.sw = k.dh = k.dw = 1;
    k.pt = k.pl = k.pb = k.pr = i;
    k.per_channel = true;
    k.bias = true;
    CHECK(RunConvCase(k, rng) > 0);
  }
}

struct MatMulCase {
  DType at, bt, yt;
  Shape a_shape;  // [..., M, K] or [K]
  int64_t k, n;
  bool b_1d, per_column, bias, clamp;
};

int RunMatMulCase(const MatMulCase& c, std::mt19937& rng) {
  AttrMap attrs;
  const int32_t yzp = RandomZp(c.yt, rng);
  if (c.clamp) {
    const int32_t lo = c.yt == DType::kInt8 ? -128 : 0, qmin = std::max(lo, yzp - 10);
    attrs.SetInt("_qmin", qmin);
    attrs.SetInt("_qmax", std::min(lo + 255, qmin + 40));
  }
  const int64_t n = c.b_1d ? 1 : c.n;
  const float a_scale = Uniform(rng, 0.001f, 1.f);
  std::vector<float> b_scale;
  std::vector<int32_t> bzp;
  for (int64_t i = 0; i < (c.per_column ? n : 1); ++i) {
    b_scale.push_back(Uniform(rng, 0.001f, 0.1f));
    bzp.push_back(rng() % 2 ? (c.bt == DType::kInt8 ? 0 : 128) : RandomZp(c.bt, rng));
  }
  const Shape pshape = c.per_column ? Shape{n} : Shape{};
  std::vector<int32_t> bias(static_cast<size_t>(n));
  for (auto& b : bias) b = int32_t(rng() % 200001) - 100000;
  std::vector<TensorPtr> in = {
      Bytes(c.at, c.a_shape, rng),
      F32({}, {a_scale}),
      Zp(c.at, {}, {RandomZp(c.at, rng)}),
      Bytes(c.bt, c.b_1d ? Shape{c.k} : Shape{c.k, c.n}, rng),
      F32(pshape, b_scale),
      Zp(c.bt, pshape, bzp),
      F32({}, {RandomYScale(rng, a_scale, b_scale[0], c.k)}),
      Zp(c.yt, {}, {yzp}),
  };
  if (c.bias) in.push_back(Make<int32_t>(DType::kInt32, {n}, bias));
  std::ostringstream o;
  o << "a " << dtype_name(c.at) << " " << ShapeToString(c.a_shape) << " b " << dtype_name(c.bt)
    << " K" << c.k << " N" << n << " y " << dtype_name(c.yt) << (c.per_column ? " per-column" : "")
    << (c.bias ? " bias" : "") << (c.clamp ? " _qmin/_qmax" : "");
  return CompareWithReference("QLinearMatMul", in, attrs, o.str());
}

TEST_CASE("kernels: QLinearMatMul tile edges match the reference") {
  std::mt19937 rng(21);
  int runs = 0;
  for (int64_t m : {1, 3, 4, 5, 8, 9, 17}) {
    for (int64_t k : {1, 3, 4, 5, 33, 64}) {
      for (int64_t n : {1, 15, 16, 17, 32, 33, 65}) {
        MatMulCase c{RandomDType(rng), RandomDType(rng), RandomDType(rng), {m, k}, k, n, false,
                     rng() % 2 == 0,   rng() % 2 == 0,   rng() % 5 == 0};
        runs += RunMatMulCase(c, rng);
      }
    }
  }
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearMatMul batched, 1-D operands and large K") {
  std::mt19937 rng(22);
  for (int i = 0; i < 40; ++i) {
    const int64_t k = 1 + rng() % 300, n = 1 + rng() % 70;
    Shape a_shape;
    switch (i % 4) {
      case 0:
        a_shape = Shape{k};
        break;
      case 1:
        a_shape = Shape{2, 1 + int64_t(rng() % 9), k};
        break;
      case 2:
        a_shape = Shape{2, 3, 1 + int64_t(rng() % 5), k};
        break;
      default:
        a_shape = Shape{1 + int64_t(rng() % 40), k};
    }
    MatMulCase c{RandomDType(rng), RandomDType(rng), RandomDType(rng), a_shape,       k, n,
                 i % 7 == 3,       rng() % 2 == 0,   rng() % 2 == 0,   rng() % 5 == 0};
    RunMatMulCase(c, rng);
  }
  // Large enough for two threads.
  MatMulCase big{DType::kInt8, DType::kInt8, DType::kUInt8, Shape{300, 256}, 256, 97, false,
                 true,         true,         false};
  CHECK(RunMatMulCase(big, rng) > 0);
}

}  // namespace
}  // namespace test
}  // namespace qfold
