// Unit tests for QfQLinearConvTranspose (quant_conv_transpose.cc). The small
// cases are hand-computed (the arithmetic is in the comments); the random
// cases compare with DequantizeLinear -> float ConvTranspose -> QuantizeLinear.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;

TensorPtr I8(Shape s, std::vector<int8_t> v) {
  return Make<int8_t>(DType::kInt8, std::move(s), std::move(v));
}
TensorPtr U8(Shape s, std::vector<uint8_t> v) {
  return Make<uint8_t>(DType::kUInt8, std::move(s), std::move(v));
}
TensorPtr I32(Shape s, std::vector<int32_t> v) {
  return Make<int32_t>(DType::kInt32, std::move(s), std::move(v));
}
TensorPtr Scalar(float v) {
  return F32({}, {v});
}

template <class T>
std::vector<int> Ints(const OpRun& r) {
  std::vector<int> out;
  for (T v : r.values<T>()) out.push_back(int(v));
  return out;
}

constexpr const char* kOp = "QfQLinearConvTranspose";

// 1-D: x uint8 [1,1,3] = {10,12,13}, x_zp 10 -> {0,2,3}; w int8 [C=1, M=2, k=2]
// = {{1,-1},{2,3}}, w_zp per channel {0,1} -> {{1,-1},{1,2}}; stride 2, so
// input i with tap t lands at 2i + t (length 2*(3-1) + 2 = 6):
//   ch0 acc = {0, 0, 2, -2, 3, -3}, ch1 acc = {0, 0, 2, 4, 3, 6}; + B {1, -2}:
//   ch0 {1, 1, 3, -1, 4, -2},       ch1 {-2, -2, 0, 2, 1, 4}.
struct SmallCase {
  TensorPtr x = U8({1, 1, 3}, {10, 12, 13});
  TensorPtr w = I8({1, 2, 2}, {1, -1, 2, 3});
  TensorPtr wzp = I8({2}, {0, 1});
  TensorPtr bias = I32({2}, {1, -2});
  OpRun Run(TensorPtr w_scale, float y_scale, const AttrMap& a) const {
    return RunOp(
        kOp, {x, Scalar(1.f), U8({}, {10}), w, w_scale, wzp, Scalar(y_scale), I8({}, {5}), bias},
        a);
  }
};

TEST_CASE("qconvtranspose: hand-computed 1-D, per-channel scales, stride 2, bias") {
  SmallCase sc;
  AttrMap a;
  a.SetInts("strides", {2});
  // w_scale {1, 0.5}, y_scale 0.5: M = {2, 1}; + y_zp 5.
  auto r = sc.Run(F32({2}, {1.f, 0.5f}), 0.5f, a);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 6});
  CHECK(r.outputs[0]->t.dtype == DType::kInt8);
  CHECK(Ints<int8_t>(r) == std::vector<int>{7, 7, 11, 3, 13, 1, 3, 3, 5, 7, 6, 9});

  // pads {1, 0} drop the first position; output_padding 1 then adds a last
  // position no tap reaches: only the bias (ch0 1 * 2 + 5 = 7, ch1 -2 + 5 = 3).
  AttrMap p = a;
  p.SetInts("pads", {1, 0});
  auto rp = sc.Run(F32({2}, {1.f, 0.5f}), 0.5f, p);
  REQUIRE(rp.status.ok());
  CHECK(Ints<int8_t>(rp) == std::vector<int>{7, 11, 3, 13, 1, 3, 5, 7, 6, 9});
  p.SetInts("output_padding", {1});
  auto ro = sc.Run(F32({2}, {1.f, 0.5f}), 0.5f, p);
  REQUIRE(ro.status.ok());
  CHECK(Ints<int8_t>(ro) == std::vector<int>{7, 11, 3, 13, 1, 7, 3, 5, 7, 6, 9, 3});
  // output_shape 4 with stride 2 gives the same padding as pads {1, 1}.
  AttrMap os = a;
  os.SetInts("output_shape", {4});
  auto rs = sc.Run(F32({2}, {1.f, 0.5f}), 0.5f, os);
  REQUIRE(rs.status.ok());
  CHECK(rs.shape() == Shape{1, 2, 4});
}

TEST_CASE("qconvtranspose: requantization rounds ties to even, _qmin/_qmax clamp") {
  SmallCase sc;
  AttrMap a;
  a.SetInts("strides", {2});
  // Per-tensor w_scale 1, y_scale 2: M = 0.5.
  // ch0 {0.5, 0.5, 1.5, -0.5, 2, -1} -> {0, 0, 2, 0, 2, -1} + 5;
  // ch1 {-1, -1, 0, 1, 0.5, 2} -> {-1, -1, 0, 1, 0, 2} + 5.
  auto r = sc.Run(Scalar(1.f), 2.f, a);
  REQUIRE(r.status.ok());
  CHECK(Ints<int8_t>(r) == std::vector<int>{5, 5, 7, 5, 7, 4, 4, 4, 5, 6, 5, 7});
  AttrMap c = a;
  c.SetInt("_qmin", 5);
  c.SetInt("_qmax", 6);
  auto rc = sc.Run(Scalar(1.f), 2.f, c);
  REQUIRE(rc.status.ok());
  CHECK(Ints<int8_t>(rc) == std::vector<int>{5, 5, 6, 5, 6, 5, 5, 5, 5, 6, 5, 6});
  AttrMap bad = a;
  bad.SetInt("_qmax", 200);
  CHECK(sc.Run(Scalar(1.f), 2.f, bad).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("qconvtranspose: validation and unsupported cases") {
  // Grouped: x [1, 2, 2], w [C=2, M/group=1, 2], group 2 -> M = 2.
  auto x = I8({1, 2, 2}, {1, 2, 3, 4});
  auto w = I8({2, 1, 2}, {1, 1, 1, -1});
  AttrMap g2;
  g2.SetInt("group", 2);
  auto run = [&](TensorPtr ws, TensorPtr wzp, TensorPtr b, const AttrMap& a) {
    return RunOp(kOp, {x, Scalar(1.f), I8({}, {0}), w, ws, wzp, Scalar(1.f), I8({}, {0}), b}, a);
  };
  // Group 2, per tensor: ch0 = x0 * {1, 1} -> {1, 3, 2}; ch1 = x1 * {1, -1} -> {3, 1, -4}.
  auto r = run(Scalar(1.f), I8({}, {0}), nullptr, g2);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 3});
  CHECK(Ints<int8_t>(r) == std::vector<int>{1, 3, 2, 3, 1, -4});
  // Per-channel parameters with group > 1 are not supported.
  CHECK(run(F32({2}, {1.f, 1.f}), I8({}, {0}), nullptr, g2).status.code() ==
        StatusCode::kUnsupported);
  CHECK(run(Scalar(1.f), I8({2}, {0, 0}), nullptr, g2).status.code() == StatusCode::kUnsupported);
  // Wrong bias length / dtype, zero point dtype, w_scale length.
  CHECK(run(Scalar(1.f), I8({}, {0}), I32({3}, {0, 0, 0}), g2).status.code() ==
        StatusCode::kInvalidModel);
  CHECK(run(Scalar(1.f), I8({}, {0}), F32({2}, {0, 0}), g2).status.code() ==
        StatusCode::kInvalidModel);
  CHECK(run(Scalar(1.f), U8({}, {0}), nullptr, g2).status.code() == StatusCode::kInvalidModel);
  auto w1 = I8({2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});  // group 1: M = 2
  CHECK(RunOp(kOp, {x, Scalar(1.f), I8({}, {0}), w1, F32({3}, {1, 1, 1}), I8({}, {0}), Scalar(1.f),
                    I8({}, {0})})
            .status.code() == StatusCode::kInvalidModel);
  // w's first dim must be x's channel count.
  CHECK(RunOp(kOp, {x, Scalar(1.f), I8({}, {0}), I8({1, 2, 2}, {1, 1, 1, 1}), Scalar(1.f),
                    I8({}, {0}), Scalar(1.f), I8({}, {0})})
            .status.code() == StatusCode::kInvalidModel);
  // int32 x is not an 8-bit activation.
  CHECK(RunOp(kOp, {I32({1, 2, 2}, {1, 2, 3, 4}), Scalar(1.f), I32({}, {0}), w, Scalar(1.f),
                    I8({}, {0}), Scalar(1.f), I8({}, {0})})
            .status.code() == StatusCode::kUnsupported);
}

TEST_CASE("qconvtranspose: infer with unknown dims and unknown rank") {
  const OpDef* def = FindOp(kOp);
  REQUIRE(def != nullptr);
  auto sym = [](DType dt, Shape s) {
    Tensor t;
    t.dtype = dt;
    t.shape = std::move(s);
    return t;
  };
  Tensor x = sym(DType::kUInt8, {kUnknownDim, 4, kUnknownDim, 5});
  Tensor w = sym(DType::kInt8, {4, 3, 3, 3});
  Tensor s = sym(DType::kFloat32, {}), ws = sym(DType::kFloat32, {3});
  Tensor xz = sym(DType::kUInt8, {}), wz = sym(DType::kInt8, {3}), yz = sym(DType::kUInt8, {});
  Tensor y;
  AttrMap a;
  a.SetInts("strides", {2, 2});
  a.SetInts("pads", {1, 1, 1, 1});
  std::string type = kOp, name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &a;
  ctx.inputs = {&x, &s, &xz, &w, &ws, &wz, &s, &yz};
  ctx.outputs = {&y};
  REQUIRE(def->infer(ctx).ok());
  CHECK(y.dtype == DType::kUInt8);
  CHECK(y.shape == Shape{kUnknownDim, 3, kUnknownDim, 2 * 4 + 3 - 2});
  x.rank_known = false;
  x.shape.clear();
  w.rank_known = false;
  w.shape.clear();
  y = Tensor();
  REQUIRE(def->infer(ctx).ok());
  CHECK(y.dtype == DType::kUInt8);
  CHECK_FALSE(y.rank_known);
}

// Random data against DequantizeLinear -> ConvTranspose -> QuantizeLinear:
// within one quantization step (the float path rounds the sums differently).
template <class XT, class WT>
void CrossCheck(DType xt, DType wt, int64_t group, bool per_channel, uint32_t seed) {
  CAPTURE(group);
  CAPTURE(per_channel);
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const int lo_x = xt == DType::kInt8 ? -128 : 0, lo_w = wt == DType::kInt8 ? -128 : 0;
  std::uniform_int_distribution<int> ux(lo_x, lo_x + 255), uw(lo_w, lo_w + 255);
  std::uniform_int_distribution<int> small(-4, 4);
  const int64_t n = 2, c = 4, m = 6, h = 5, wd = 4, mg = m / group;
  std::vector<XT> xv(size_t(n * c * h * wd));
  for (auto& v : xv) v = XT(ux(rng));
  std::vector<WT> wv(size_t(c * mg * 9));
  for (auto& v : wv) v = WT(uw(rng));
  std::vector<int32_t> bv(static_cast<size_t>(m));
  for (auto& v : bv) v = small(rng) * 500;
  std::vector<float> ws = {0.004f};
  std::vector<WT> wzp = {WT(lo_w + 128 + small(rng))};
  if (per_channel) {
    ws = {0.004f, 0.006f, 0.003f, 0.0055f, 0.007f, 0.002f};
    wzp.clear();
    for (int64_t i = 0; i < m; ++i) wzp.push_back(WT(lo_w + 128 + small(rng)));
  }
  const Shape ps = per_channel ? Shape{m} : Shape{};
  const float xs = 0.021f, ys = 0.1f;
  const XT xzp = XT(lo_x + 120), yzp = XT(lo_x + 128);
  AttrMap a;
  a.SetInts("strides", {2, 2});
  a.SetInts("pads", {1, 0, 0, 1});
  a.SetInts("output_padding", {1, 0});
  a.SetInt("group", group);
  if (seed % 2) a.SetInts("dilations", {1, 2});
  auto x = Make<XT>(xt, {n, c, h, wd}, xv);
  auto w = Make<WT>(wt, {c, mg, 3, 3}, wv);
  auto x_zp = Make<XT>(xt, {}, {xzp});
  auto w_zp = Make<WT>(wt, ps, wzp);
  auto y_zp = Make<XT>(xt, {}, {yzp});
  auto q =
      RunOp(kOp, {x, Scalar(xs), x_zp, w, F32(ps, ws), w_zp, Scalar(ys), y_zp, I32({m}, bv)}, a);
  REQUIRE(q.status.ok());

  auto xf = RunOp("DequantizeLinear", {x, Scalar(xs), x_zp});
  AttrMap axis1;
  axis1.SetInt("axis", 1);  // ConvTranspose's output channel axis of w (group 1)
  auto wf = RunOp("DequantizeLinear", {w, F32(ps, ws), w_zp}, axis1);
  REQUIRE(xf.status.ok());
  REQUIRE(wf.status.ok());
  std::vector<float> bf;
  for (int64_t i = 0; i < m; ++i)
    bf.push_back(float(bv[size_t(i)]) * xs * ws[per_channel ? size_t(i) : 0]);
  auto ct = RunOp("ConvTranspose", {xf.outputs[0], wf.outputs[0], F32({m}, bf)}, a);
  REQUIRE(ct.status.ok());
  auto ref = RunOp("QuantizeLinear", {ct.outputs[0], Scalar(ys), y_zp});
  REQUIRE(ref.status.ok());
  CHECK(q.shape() == ref.shape());
  const auto got = Ints<XT>(q), want = Ints<XT>(ref);
  REQUIRE(got.size() == want.size());
  int max_diff = 0, lo = 1000, hi = -1000;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    lo = std::min(lo, got[i]);
    hi = std::max(hi, got[i]);
  }
  CHECK(max_diff <= 1);
  // The data must spread over the range for the comparison to mean something.
  CHECK(hi - lo > 50);
}

TEST_CASE("qconvtranspose: matches DQ -> ConvTranspose -> Q on random data") {
  uint32_t seed = 7;
  for (bool per_channel : {false, true}) {
    CrossCheck<uint8_t, int8_t>(DType::kUInt8, DType::kInt8, 1, per_channel, seed++);
    CrossCheck<int8_t, int8_t>(DType::kInt8, DType::kInt8, 1, per_channel, seed++);
    CrossCheck<uint8_t, uint8_t>(DType::kUInt8, DType::kUInt8, 1, per_channel, seed++);
    CrossCheck<int8_t, uint8_t>(DType::kInt8, DType::kUInt8, 1, per_channel, seed++);
  }
  CrossCheck<uint8_t, int8_t>(DType::kUInt8, DType::kInt8, 2, false, seed++);
  CrossCheck<int8_t, uint8_t>(DType::kInt8, DType::kUInt8, 2, false, seed++);
  CrossCheck<int8_t, int8_t>(DType::kInt8, DType::kInt8, 2, false, seed++);
}

// Runs the op with its prepared state (the packed-kernel path) with the
// kernels of `isa`, as a session would; the reference path has no state.
OpRun RunPrepared(const std::vector<TensorPtr>& inputs, const AttrMap& attrs, kernels::Isa isa) {
  OpRun r;
  const OpDef* def = FindOp(kOp);
  std::string type = kOp, name = "test";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = test::TestPool(2);
  ctx.kernels = &IsaConfig(isa);
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  r.outputs.push_back(std::make_shared<OwnedTensor>());
  ctx.outputs.push_back(&r.outputs[0]->t);
  r.status = def->infer(ctx);
  if (!r.status.ok()) return r;
  r.outputs[0]->storage.assign(r.outputs[0]->t.bytes() + 1, 0);
  r.outputs[0]->t.data = r.outputs[0]->storage.data();
  std::shared_ptr<void> state;
  REQUIRE(bool(def->prepare));
  r.status = def->prepare(ctx, &state);
  if (!r.status.ok()) return r;
  // Every level but the reference has kernels for these shapes: the fast
  // path must be set up, or the comparison below would test nothing.
  CHECK((state != nullptr) == (isa != kernels::Isa::kReference));
  ctx.state = state.get();
  r.status = def->run(ctx);
  return r;
}

// The fast path (spread input + flipped kernel on the int8 GEMM or depthwise
// kernel) must equal the reference bit for bit at every ISA level, on
// geometries that hit strides, dilations, asymmetric and oversized pads
// (the latter fall back), output_padding, groups and 1-D.
TEST_CASE("qconvtranspose: the prepared fast path equals the reference at every ISA level") {
  std::mt19937 rng(11);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 60; ++iter) {
    const bool one_d = iter % 5 == 4;
    const int64_t group = iter % 4 == 1 ? 2 : (iter % 4 == 2 ? 0 : 1);  // 0: depthwise
    const int64_t c = group == 0 ? pick(1, 6) : pick(1, 5) * (group ? group : 1);
    const int64_t g = group == 0 ? c : group;
    const int64_t mg = group == 0 ? 1 : pick(1, 7);
    const int64_t m = mg * g, n = pick(1, 2);
    const int64_t h = one_d ? 1 : pick(1, 7), wd = pick(1, 9);
    const int64_t kh = one_d ? 1 : pick(1, 4), kw = pick(1, 4);
    const int64_t sh = pick(1, 3), sw = pick(1, 3), dh = pick(1, 2), dw = pick(1, 2);
    const bool x_signed = iter % 2, w_signed = iter % 3 != 0, per_channel = g == 1 && iter % 3;
    CAPTURE(iter);
    std::vector<uint8_t> xv(size_t(n * c * h * wd)), wv(size_t(c * mg * kh * kw));
    for (auto& v : xv) v = uint8_t(pick(0, 255));
    for (auto& v : wv) v = uint8_t(pick(0, 255));
    std::vector<float> ws(per_channel ? size_t(m) : 1);
    std::vector<uint8_t> wzp(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
      ws[i] = 0.001f * float(pick(1, 9));
      wzp[i] = uint8_t(iter % 7 == 0 ? (w_signed ? 0x7f : 0xff) : pick(0, 255));
    }
    std::vector<int32_t> bv(static_cast<size_t>(m));
    for (auto& v : bv) v = pick(-3000, 3000);
    const DType xt = x_signed ? DType::kInt8 : DType::kUInt8;
    const DType wt = w_signed ? DType::kInt8 : DType::kUInt8;
    const Shape ps = per_channel ? Shape{m} : Shape{};
    AttrMap a;
    if (one_d) {
      a.SetInts("strides", {sw});
      a.SetInts("dilations", {dw});
      a.SetInts("pads", {pick(0, 3), pick(0, 3)});
      a.SetInts("output_padding", {pick(0, int(sw) - 1)});
    } else {
      a.SetInts("strides", {sh, sw});
      a.SetInts("dilations", {dh, dw});
      a.SetInts("pads", {pick(0, 3), pick(0, 3), pick(0, 3), pick(0, 3)});
      a.SetInts("output_padding", {pick(0, int(sh) - 1), pick(0, int(sw) - 1)});
    }
    a.SetInt("group", g);
    const Shape xshape = one_d ? Shape{n, c, wd} : Shape{n, c, h, wd};
    const Shape wshape = one_d ? Shape{c, mg, kw} : Shape{c, mg, kh, kw};
    const std::vector<TensorPtr> inputs = {Make<uint8_t>(xt, xshape, xv),
                                           Scalar(0.02f),
                                           Make<uint8_t>(xt, {}, {uint8_t(pick(0, 255))}),
                                           Make<uint8_t>(wt, wshape, wv),
                                           F32(ps, ws),
                                           Make<uint8_t>(wt, ps, wzp),
                                           Scalar(0.05f * float(pick(1, 4))),
                                           Make<uint8_t>(xt, {}, {uint8_t(pick(0, 255))}),
                                           I32({m}, bv)};
    auto ref = RunOp(kOp, inputs, a);
    if (!ref.status.ok()) {
      // A random geometry may leave no output (pads larger than the span).
      CHECK_MESSAGE(ref.status.message().find("negative") != std::string::npos,
                    ref.status.message());
      continue;
    }
    for (kernels::Isa isa : kernels::SupportedIsas()) {
      CAPTURE(kernels::IsaName(isa));
      auto fast = RunPrepared(inputs, a, isa);
      REQUIRE(fast.status.ok());
      CHECK(fast.shape() == ref.shape());
      CHECK(fast.values<uint8_t>() == ref.values<uint8_t>());
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
