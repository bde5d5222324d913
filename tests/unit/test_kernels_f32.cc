// The fast fp32 kernels (runtime/src/kernels/gemm_f32*, conv_f32*) against
// independent computations: the packed GEMM against a double-precision
// product, and the Conv/MatMul/Gemm ops at every ISA level this CPU supports
// against their reference kernels (QFOLD_ISA=reference), on random shapes
// at tile edges, with padding, strides, dilations, groups, depthwise, 1-D,
// batches and fused activations. Summation orders differ, so results must
// agree within |d| <= 1e-5 * sum|a * b| + 1e-6 (the magnitude computed by the
// reference on absolute values); 1 and 2 threads must agree bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "doctest/doctest.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel_config.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;
using kernels::Isa;

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<float> RandomFloats(int64_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

TensorPtr RandomF32(Shape s, std::mt19937& rng) {
  const int64_t n = Numel(s);
  return F32(std::move(s), RandomFloats(n, rng));
}

TensorPtr Abs(const TensorPtr& t) {
  if (!t) return nullptr;
  const float* p = t->t.ptr<float>();
  std::vector<float> v(p, p + t->t.numel());
  for (auto& x : v) x = std::fabs(x);
  return F32(t->t.shape, v);
}

// Output of one op run: infer, allocate (with a guard zone that must stay
// untouched), optionally prepare, run.
struct Runner {
  std::string type, name = "t";
  const OpDef* def = nullptr;
  KernelContext ctx;
  OwnedTensor out;
  static constexpr size_t kGuard = 256;

  Runner(const std::string& t, const std::vector<TensorPtr>& inputs, const AttrMap& attrs,
         const kernels::KernelConfig& kc)
      : type(t) {
    def = FindOp(type);
    REQUIRE(def != nullptr);
    ctx.kernels = &kc;
    ctx.op_type = &type;
    ctx.op_name = &name;
    ctx.attrs = &attrs;
    for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
    ctx.outputs = {&out.t};
    const Status st = def->infer(ctx);
    CAPTURE(st.message());
    REQUIRE(st.ok());
  }

  std::vector<float> Run(void* state, int threads) {
    out.storage.assign(out.t.bytes() + kGuard, 0xCD);
    out.t.data = out.storage.data();
    ctx.state = state;
    ctx.pool = test::TestPool(threads);
    const Status st = def->run(ctx);
    CAPTURE(st.message());
    REQUIRE(st.ok());
    for (size_t i = out.t.bytes(); i < out.storage.size(); ++i) REQUIRE(out.storage[i] == 0xCD);
    const float* p = out.t.ptr<float>();
    ctx.state = nullptr;
    return std::vector<float>(p, p + out.t.numel());
  }

  // Runs again into the output of the previous Run (for timing).
  void Rerun(void* state, int threads) {
    ctx.state = state;
    ctx.pool = test::TestPool(threads);
    REQUIRE(def->run(ctx).ok());
    ctx.state = nullptr;
  }
};

// Runs `type` with the reference kernel, then at every SIMD level (with and
// without prepare, 1 and 2 threads). `mag` holds sum|a * b| per output (the
// reference op on absolute values); `slope` bounds the activation's
// Lipschitz constant. Returns the number of fast runs compared.
int CompareF32(const std::string& type, const std::vector<TensorPtr>& inputs, const AttrMap& attrs,
               const std::vector<TensorPtr>& abs_inputs, const AttrMap& abs_attrs, float slope,
               bool expect_state, const std::string& what) {
  INFO(what);
  const kernels::KernelConfig& reference = IsaConfig(Isa::kReference);
  Runner ref(type, inputs, attrs, reference);
  const std::vector<float> want = ref.Run(nullptr, 1);
  Runner mag_run(type, abs_inputs, abs_attrs, reference);
  const std::vector<float> mag = mag_run.Run(nullptr, 1);
  REQUIRE(mag.size() == want.size());
  int runs = 0;
  // Each ISA level, and the highest with the portable channels-last kernels
  // in place of its own (what pre-AVX2 x86 runs).
  std::vector<std::pair<std::string, kernels::KernelConfig>> configs;
  for (Isa isa : kernels::SupportedIsas())
    if (IsaConfig(isa).gemm_f32) configs.emplace_back(kernels::IsaName(isa), IsaConfig(isa));
  if (!configs.empty() && configs.back().second.conv_nhwc_f32 != kernels::ConvNhwcF32Portable()) {
    configs.push_back(configs.back());
    configs.back().first += " + portable conv_nhwc_f32";
    configs.back().second.conv_nhwc_f32 = kernels::ConvNhwcF32Portable();
  }
  // The highest level in bf16 mode, where this CPU has it: each product's
  // two roundings to bf16 (8 significant bits: each at most 2^-8 of the
  // value) add at most 2^-7 + 2^-16 of its magnitude.
  if (!configs.empty()) {
    kernels::KernelConfig bf16 = IsaConfig(kernels::SupportedIsas().back());
    // Correct on Intel too, where sessions skip them as slower than fp32.
    bf16.features.avx512bf16_fast = bf16.features.avx512bf16;
    kernels::EnableBf16(&bf16);
    if (bf16.conv_nhwc_bf16 || bf16.gemm_bf16) configs.emplace_back("bf16", bf16);
    // fp16 mode (Armv8.2 FEAT_FP16): two roundings to half (each at most
    // 2^-11 of the value) and the fp16 sums of 32 products (each step at most
    // 2^-11 of their magnitude), docs/NUMERICS.md.
    kernels::KernelConfig fp16 = IsaConfig(kernels::SupportedIsas().back());
    kernels::EnableFp16(&fp16);
    if (fp16.conv_nhwc_fp16 || fp16.gemm_fp16) configs.emplace_back("fp16", fp16);
  }
  for (const auto& named : configs) {
    const kernels::KernelConfig& kc = named.second;
    const std::string& isa_name = named.first;
    const double rel = isa_name == "bf16"   ? 1e-5 + std::ldexp(1.0, -7) + std::ldexp(1.0, -16)
                       : isa_name == "fp16" ? 1e-5 + std::ldexp(1.0, -10) + std::ldexp(33.0, -11)
                                            : 1e-5;
    CAPTURE(isa_name);
    Runner fast(type, inputs, attrs, kc);
    for (bool prepared : {true, false}) {
      CAPTURE(prepared);
      std::shared_ptr<void> state;
      if (prepared) {
        REQUIRE(bool(fast.def->prepare));
        REQUIRE(fast.def->prepare(fast.ctx, &state).ok());
        CHECK((state != nullptr) == expect_state);
      }
      std::vector<float> first;
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        const std::vector<float> got = fast.Run(state.get(), threads);
        REQUIRE(got.size() == want.size());
        size_t bad = 0;
        for (; bad < got.size(); ++bad) {
          const double tol = slope * (rel * double(mag[bad]) + 1e-6);
          const bool both_nan = std::isnan(got[bad]) && std::isnan(want[bad]);
          if (!both_nan && !(std::fabs(double(got[bad]) - double(want[bad])) <= tol)) break;
        }
        if (bad < got.size()) {
          CAPTURE(bad);
          CAPTURE(got[bad]);
          CAPTURE(want[bad]);
          CAPTURE(mag[bad]);
          REQUIRE(bad == got.size());
        }
        if (threads == 1) {
          first = got;
        } else {
          REQUIRE(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)) == 0);
        }
        ++runs;
      }
    }
  }
  return runs;
}

// ---- GEMM kernel against double precision ------------------------------------

// One packed GEMM through GemmF32Batched (1 and 2 threads) against a double
// product with the same epilogue.
void CheckGemm(const kernels::GemmF32Kernels& k, int64_t m, int64_t n, int64_t kd,
               std::mt19937& rng) {
  const int mode = int(rng() % 4);  // bias: none, per row, per column; or accumulate
  const int act = int(rng() % 3);
  const float alpha = rng() % 2 ? 1.f : -0.75f;
  std::ostringstream what;
  what << k.name << " M" << m << " N" << n << " K" << kd << " mode " << mode << " act " << act
       << " alpha " << alpha;
  INFO(what.str());
  // Left rows with a column stride, right transposed sometimes: every packer path.
  const bool left_cm = rng() % 2, right_cm = rng() % 2;
  const std::vector<float> a = RandomFloats(m * kd, rng), b = RandomFloats(kd * n, rng);
  const std::vector<float> bias = RandomFloats(std::max(m, n), rng);
  const std::vector<float> c0 = RandomFloats(m * n, rng);
  auto A = [&](int64_t r, int64_t q) { return a[size_t(left_cm ? q * m + r : r * kd + q)]; };
  auto B = [&](int64_t q, int64_t c) { return b[size_t(right_cm ? c * kd + q : q * n + c)]; };
  std::vector<float> lp(size_t(kernels::PackedF32Size(m, kd, k.mr)) + 1);
  std::vector<float> rp(size_t(kernels::PackedF32Size(n, kd, k.nr)) + 1);
  k.pack_left(a.data(), left_cm ? 1 : kd, left_cm ? m : 1, m, kd, lp.data());
  k.pack_right(b.data(), right_cm ? 1 : n, right_cm ? kd : 1, kd, n, rp.data());
  kernels::GemmF32Args args;
  args.rows = m;
  args.cols = n;
  args.k = kd;
  args.alpha = alpha;
  args.ldc = n + 3;  // a row stride wider than the row
  if (mode == 1 || mode == 2) {
    args.bias = bias.data();
    args.bias_per_row = mode == 1;
  }
  args.accumulate = mode == 3;
  args.act = kernels::F32Act(act);
  args.lo = -0.5f;
  args.hi = 0.75f;
  std::vector<float> first;
  for (int threads : {1, 2}) {
    std::vector<float> c(size_t(m * args.ldc + 16), 7.f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[size_t(i * args.ldc + j)] = c0[size_t(i * n + j)];
    const float *l = lp.data(), *r = rp.data();
    float* cd = c.data();
    kernels::GemmF32Batched(k, args, &l, &r, &cd, 1, test::TestPool(threads));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, sa = 0;
        for (int64_t q = 0; q < kd; ++q) {
          s += double(A(i, q)) * B(q, j);
          sa += std::fabs(double(A(i, q)) * B(q, j));
        }
        double v = alpha * s;
        if (mode == 1) v += bias[size_t(i)];
        if (mode == 2) v += bias[size_t(j)];
        if (mode == 3) v += c0[size_t(i * n + j)];
        if (act == 1) v = v > 0 ? v : 0;
        if (act == 2) v = v < -0.5 ? -0.5 : (v > 0.75 ? 0.75 : v);
        const double got = c[size_t(i * args.ldc + j)];
        if (!(std::fabs(got - v) <= 1e-5 * sa + 1e-6)) {
          CAPTURE(i);
          CAPTURE(j);
          CAPTURE(got);
          CAPTURE(v);
          REQUIRE(std::fabs(got - v) <= 1e-5 * sa + 1e-6);
        }
      }
      // Columns between n and ldc stay untouched.
      for (int64_t j = n; j < args.ldc; ++j) REQUIRE(c[size_t(i * args.ldc + j)] == 7.f);
    }
    if (threads == 1)
      first = c;
    else
      REQUIRE(std::memcmp(first.data(), c.data(), c.size() * sizeof(float)) == 0);
  }
  // Each row alone (the single-row path of a recurrent step or a batch-1
  // MatMul) equals that row of the whole product bit for bit.
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> row_lp(size_t(kernels::PackedF32Size(1, kd, k.mr)) + 1);
    // a is empty when kd == 0: no offset from its null data().
    const float* a_row = a.empty() ? a.data() : a.data() + (left_cm ? i : i * kd);
    k.pack_left(a_row, left_cm ? 1 : kd, left_cm ? m : 1, 1, kd, row_lp.data());
    std::vector<float> row(c0.begin() + i * n, c0.begin() + (i + 1) * n);
    kernels::GemmF32Args one = args;
    one.rows = 1;
    one.left = row_lp.data();
    one.right = rp.data();
    one.c = row.data();
    one.ldc = n;
    if (args.bias && args.bias_per_row) one.bias = bias.data() + i;
    k.gemm(one);
    INFO("row " << i);
    REQUIRE(std::memcmp(row.data(), first.data() + i * args.ldc, size_t(n) * sizeof(float)) == 0);
  }
}

TEST_CASE("kernels f32: packed GEMM at tile edges matches double precision") {
  std::mt19937 rng(11);
  int cases = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::GemmF32Kernels* k = IsaConfig(isa).gemm_f32;
    if (!k) continue;
    const std::vector<int64_t> ms = {1, 2, k->mr - 1, k->mr, k->mr + 1, 2 * k->mr + 3, 37};
    // 6 * nr + 17: single rows run groups of up to six panels, then a partial group.
    const std::vector<int64_t> ns = {
        1, 7, k->nr - 1, k->nr, k->nr + 1, 2 * k->nr + 5, 6 * k->nr + 17, 100};
    const std::vector<int64_t> ks = {0, 1, 3, 17, 255, 256, 257, 600};
    for (int64_t m : ms)
      for (int64_t n : ns) {
        CheckGemm(*k, m, n, ks[rng() % ks.size()], rng);
        ++cases;
      }
    for (int64_t kd : ks) {
      CheckGemm(*k, ms[rng() % ms.size()], ns[rng() % ns.size()], kd, rng);
      ++cases;
    }
    // Large enough to split between threads, by rows and by columns.
    CheckGemm(*k, 300, 9, 200, rng);
    CheckGemm(*k, 20, 500, 100, rng);
    // One row (a recurrent step) wide and deep enough to split by column panels.
    CheckGemm(*k, 1, 9 * k->nr + 5, 300, rng);
    cases += 3;
  }
  MESSAGE(cases << " GEMM cases");
}

// ---- Conv ----------------------------------------------------------------------

struct ConvCase {
  int64_t n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool one_d, bias;
  int act;                     // 0 none, 1 Relu, 2 Clip, 3 HardSwish, 4 Clip with only a max
  bool channels_last = false;  // X [N, H, W, C]: the kernels of conv_f32_nhwc.h
  bool residual = false;       // a fourth input of Y's shape, added before the activation
  bool x_planar = false;       // with channels_last: X stays [N, C, H, W] (x_channels_first)
};

std::string Describe(const ConvCase& k) {
  std::ostringstream o;
  o << "N" << k.n << " C" << k.c << " M" << k.m << " g" << k.group << " HxW " << k.h << "x" << k.w
    << " k " << k.kh << "x" << k.kw << " s " << k.sh << "," << k.sw << " d " << k.dh << "," << k.dw
    << " pads " << k.pt << "," << k.pl << "," << k.pb << "," << k.pr << (k.one_d ? " 1-D" : "")
    << (k.bias ? " bias" : "") << " act " << k.act << (k.channels_last ? " NHWC" : "")
    << (k.residual ? " residual" : "") << (k.x_planar ? " X NCHW" : "");
  return o.str();
}

void SetActivation(int act, AttrMap* attrs) {
  switch (act) {
    case 1:
      attrs->SetString("_activation", "Relu");
      break;
    case 2:
      attrs->SetString("_activation", "Clip");
      attrs->SetFloat("_act_min", -0.25f);
      attrs->SetFloat("_act_max", 0.5f);
      break;
    case 3:
      attrs->SetString("_activation", "HardSwish");
      break;
    case 4:
      attrs->SetString("_activation", "Clip");
      attrs->SetFloat("_act_max", 6.f);
      break;
    default:
      break;
  }
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
  if (k.channels_last) {
    // The reference runs channels-last convolutions channels-first between
    // transposes, so it stays the oracle.
    if (!k.x_planar) xs = Shape{k.n, k.h, k.w, k.c};
    attrs.SetInt("channels_last", 1);
    if (k.x_planar) attrs.SetInt("x_channels_first", 1);
  }
  AttrMap abs_attrs = attrs;
  SetActivation(k.act, &attrs);
  std::vector<TensorPtr> in = {RandomF32(xs, rng), RandomF32(ws, rng)};
  if (k.bias || k.residual) in.push_back(k.bias ? RandomF32({k.m}, rng) : nullptr);
  if (k.residual) {
    const int64_t oh = (k.h + k.pt + k.pb - (k.kh - 1) * k.dh - 1) / k.sh + 1;
    const int64_t ow = (k.w + k.pl + k.pr - (k.kw - 1) * k.dw - 1) / k.sw + 1;
    in.push_back(
        RandomF32(k.channels_last ? Shape{k.n, oh, ow, k.m} : Shape{k.n, k.m, oh, ow}, rng));
  }
  std::vector<TensorPtr> abs_in;
  for (auto& t : in) abs_in.push_back(Abs(t));
  return CompareF32("Conv", in, attrs, abs_in, abs_attrs, k.act == 3 ? 2.f : 1.f,
                    /*expect_state=*/true, Describe(k));
}

ConvCase RandomConv(std::mt19937& rng, bool depthwise, bool one_d) {
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  ConvCase k{};
  k.n = pick({1, 1, 2});
  k.one_d = one_d;
  if (depthwise) {
    k.c = pick({1, 3, 8, 17});
    k.group = k.c;
    k.m = k.c * pick({1, 1, 2});
    k.kh = pick({3, 3, 5, 1, 2});
    k.kw = pick({3, 3, 5, 1, 7});
  } else {
    k.group = pick({1, 1, 1, 2, 3});
    k.c = k.group * pick({1, 2, 5, 16});
    k.m = k.group * pick({1, 7, 8, 9, 13, 16, 17});
    k.kh = pick({1, 2, 3, 5});
    k.kw = pick({1, 2, 3, 5});
  }
  k.sh = pick({1, 1, 2, 3});
  k.sw = pick({1, 1, 2, 3});
  k.dh = pick({1, 1, 2});
  k.dw = pick({1, 1, 2});
  k.pt = pick({0, 1, 2});
  k.pl = pick({0, 1, 2});
  k.pb = pick({0, 1, 3});
  k.pr = pick({0, 1, 3});
  k.h = (k.kh - 1) * k.dh + 1 + int64_t(rng() % 12);
  k.w = (k.kw - 1) * k.dw + 1 + int64_t(rng() % 40);
  if (one_d) {
    k.h = 1;
    k.kh = 1;
    k.sh = k.dh = 1;
    k.pt = k.pb = 0;
  }
  k.bias = rng() % 3 != 0;
  k.act = int(rng() % 5);
  return k;
}

TEST_CASE("kernels f32: Conv KxK with pads, strides, dilations, groups matches the reference") {
  std::mt19937 rng(21);
  int runs = 0;
  for (int i = 0; i < 60; ++i) runs += RunConvCase(RandomConv(rng, false, false), rng);
  MESSAGE(runs << " fast Conv runs compared");
}

TEST_CASE("kernels f32: Conv depthwise matches the reference") {
  std::mt19937 rng(22);
  int runs = 0;
  for (int i = 0; i < 40; ++i) runs += RunConvCase(RandomConv(rng, true, false), rng);
  MESSAGE(runs << " fast Conv runs compared");
}

TEST_CASE("kernels f32: Conv 1-D matches the reference") {
  std::mt19937 rng(23);
  int runs = 0;
  for (int i = 0; i < 30; ++i) runs += RunConvCase(RandomConv(rng, i % 3 == 0, true), rng);
  MESSAGE(runs << " fast Conv runs compared");
}

TEST_CASE("kernels f32: Conv of one input channel into many filters matches the reference") {
  // An audio front end (the VAD model's 1-D filter banks) and its 2-D
  // counterpart: one group, one input channel, so the GEMM path (not the
  // per-channel plane kernel) runs them.
  std::mt19937 rng(25);
  int runs = 0;
  for (int64_t kw : {32, 16, 3}) {
    ConvCase k{};
    k.n = 1;
    k.c = 1;
    k.group = 1;
    k.m = 32;
    k.one_d = true;
    k.h = k.kh = k.sh = k.dh = k.dw = 1;
    k.kw = kw;
    k.sw = kw / 4 + 1;
    k.pl = k.pr = kw * 3 / 8;
    k.w = 512;
    k.bias = true;
    k.act = 1;
    runs += RunConvCase(k, rng);
    k.one_d = false;
    k.h = 9;
    k.kh = 3;
    k.pt = k.pb = 1;
    k.w = 40;
    runs += RunConvCase(k, rng);
  }
  MESSAGE(runs << " fast Conv runs compared");
  CHECK(runs >= 6);  // each case ran on the fast path at least once
}

TEST_CASE("kernels f32: Conv pointwise, tile edges and thread splits match the reference") {
  std::mt19937 rng(24);
  int runs = 0;
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  const ConvCase cases[] = {
      {1, 32, 40, 1, 24, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 1},   // 1x1, threads
      {2, 24, 17, 1, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 2},     // 49 columns
      {1, 16, 33, 1, 9, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, false, false, 0},   // strided 1x1
      {1, 8, 8, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},       // 1x1 image
      {1, 300, 5, 1, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 0},     // K > kc
      {1, 40, 16, 1, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 4},   // K = 360
      {1, 16, 16, 16, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 2},  // dw threads
      {1, 16, 16, 16, 41, 41, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 1},  // dw stride 2
      {2, 8, 8, 8, 20, 70, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, false, 3},    // dw 5x5, wide
      {1, 4, 4, 4, 9, 9, 3, 3, 3, 3, 2, 2, 4, 0, 4, 0, false, true, 0},       // dw stride 3
      {1, 6, 12, 2, 10, 10, 3, 3, 1, 2, 2, 1, 3, 3, 0, 0, false, true, 1},    // big pads
      {3, 5, 9, 1, 1, 200, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, true, true, 0},      // 1-D long
      {1, 8, 48, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 1},      // one column
      {1, 2, 3, 1, 2, 2, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, false, false, 0},      // mostly padding
  };
  for (const ConvCase& k : cases) runs += RunConvCase(k, rng);
  MESSAGE(runs << " fast Conv runs compared");
}

ConvCase ChannelsLast(ConvCase k) {
  k.channels_last = true;
  k.one_d = false;
  return k;
}

TEST_CASE("kernels f32: channels-last Conv KxK, 1x1, groups at tile edges matches the reference") {
  std::mt19937 rng(31);
  int runs = 0;
  for (int i = 0; i < 60; ++i)
    runs += RunConvCase(ChannelsLast(RandomConv(rng, false, false)), rng);
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  const ConvCase cases[] = {
      {1, 32, 40, 1, 24, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 1},  // 1x1, threads
      {2, 24, 17, 1, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 2},    // 49 pixels
      {1, 96, 24, 1, 17, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},  // M = 16 + 8
      {1, 3, 16, 1, 33, 31, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 4},   // RGB stem
      {1, 300, 5, 1, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 3},    // long K
      {1, 8, 8, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},      // 1x1 image
      {1, 6, 12, 2, 10, 10, 3, 3, 1, 2, 2, 1, 3, 3, 0, 0, false, true, 1},   // groups, big pads
      {1, 2, 3, 1, 2, 2, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, false, false, 0},     // mostly padding
      // Few channels with padding read a padded copy of x (UsePlane): tiles
      // wrapping output rows, batches, dilated rows, uneven pads, 1-D.
      {1, 1, 16, 1, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},    // 1 channel
      {2, 3, 5, 1, 7, 9, 5, 5, 2, 1, 1, 1, 2, 2, 2, 2, false, true, 2},      // batch 2
      {1, 4, 9, 1, 11, 10, 3, 3, 1, 1, 2, 1, 2, 1, 0, 2, false, true, 0},    // dilated rows
      {1, 15, 33, 1, 6, 17, 3, 2, 1, 3, 1, 1, 0, 1, 1, 0, false, false, 0},  // 15 channels
      {1, 2, 7, 1, 1, 40, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2, true, true, 1},      // 1-D
      // Stem runs (StemRunSupports: 1 or 3 channels, 3/5/7 columns, width
      // stride 1 or 2): full blocks with the last moved back, runs shorter
      // than a block, one and two vectors of channels, several panels.
      {1, 1, 16, 1, 32, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},  // text line
      {2, 1, 37, 1, 9, 21, 5, 5, 1, 2, 1, 1, 2, 2, 2, 2, false, true, 2},    // 3 vectors
      {1, 3, 24, 1, 29, 35, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, true, 1},   // RGB 7x7 s2
      {1, 3, 32, 1, 33, 31, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, 3},  // RGB 3x3 s2
      {1, 3, 8, 1, 12, 5, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1, false, true, 4},     // 5 pixels
      {1, 1, 70, 1, 6, 40, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, false, true, 0},    // 7x7, 3 panels
      {1, 3, 16, 1, 20, 41, 5, 5, 3, 1, 1, 1, 0, 2, 1, 2, false, true, 1},   // height stride 3
      // Unpadded: the stem runs read x in place (XIsPlane), including rows
      // and columns past the last window.
      {1, 3, 64, 1, 24, 27, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, false, true, 1},  // RGB 3x3 s2
      {2, 1, 20, 1, 9, 30, 5, 5, 1, 1, 2, 1, 0, 0, 0, 0, false, false, 2},  // dilated rows
      {1, 3, 9, 1, 8, 10, 7, 7, 1, 2, 1, 1, 0, 0, 0, 0, false, true, 0},    // 2 pixels
      // 1x1 inside x: one pointer stepped per pixel, across rows and strides.
      {1, 16, 6, 1, 13, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, false, true, 1},   // stride 2
      {2, 16, 16, 1, 10, 9, 1, 1, 3, 1, 1, 1, 0, 0, 0, 0, false, false, 0},  // height stride 3
      {1, 24, 12, 2, 9, 7, 1, 1, 1, 2, 1, 1, 0, 0, 0, 0, false, true, 2},    // groups
      // Weights over 4x x at 2 threads: one block, the panels split between
      // the threads (IgemmPanelChunks), partial last panel, batches.
      {1, 64, 88, 1, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 1},     // 3x3 s2 to 4x4
      {2, 96, 72, 1, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 0},     // 1x1, 2 images
      {1, 48, 40, 1, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, 2},    // 3x3, 36 pixels
      {1, 16, 192, 1, 20, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 0},  // 17 tiles: not
  };
  for (const ConvCase& k : cases) runs += RunConvCase(ChannelsLast(k), rng);
  MESSAGE(runs << " fast channels-last Conv runs compared");
}

// X channels-first into a channels-last convolution (a graph input the
// converter's FuseConvInputTranspose hands over untransposed): the padded
// copy of few channels is made from the planes (RGB rows interleaved by the
// variant's interleave3), other methods transpose X into their scratch
// first: stems, 1 to 4 channels, unpadded, 1x1, Winograd, batches, a
// residual, at every variant, 1 and 2 threads.
TEST_CASE("kernels f32: channels-last Conv of a channels-first X matches the reference") {
  std::mt19937 rng(35);
  int runs = 0;
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  const ConvCase cases[] = {
      {1, 3, 16, 1, 33, 35, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 1},   // RGB stem, plane
      {2, 3, 8, 1, 20, 37, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 0},    // batch, 8 channels
      {1, 3, 24, 1, 29, 35, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, true, 4},   // 7x7 s2
      {1, 1, 16, 1, 32, 50, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},   // one channel
      {1, 4, 12, 1, 15, 17, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, false, false, 2},  // 4 channels, dilated
      {1, 2, 5, 1, 9, 13, 5, 3, 1, 2, 1, 1, 2, 1, 2, 1, false, true, 0},     // 2 channels
      {1, 3, 64, 1, 24, 27, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, false, true, 1},   // unpadded: copy
      {1, 3, 20, 1, 11, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 0},    // 1x1: copy
      {1, 40, 32, 1, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},  // Winograd: copy
      {1, 3, 16, 1, 12, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1, true, true},  // residual
  };
  for (ConvCase k : cases) {
    k = ChannelsLast(k);
    k.x_planar = true;
    runs += RunConvCase(k, rng);
  }
  MESSAGE(runs << " channels-first X runs compared");
}

// Winograd 3x3 stride 1 with C >= 32, M >= 16 and C + M <= 768 or 14x14
// outputs (WinogradTile): F(4x4, 3x3) with 32 tiles of 4x4 or filters of at
// most 1 MiB, else F(2x2, 3x3).
TEST_CASE("kernels f32: channels-last Winograd 3x3 matches the reference") {
  std::mt19937 rng(33);
  int runs = 0;
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  const ConvCase cases[] = {
      {1, 32, 32, 1, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},      // even, same pads
      {2, 37, 19, 1, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},      // odd, channel tails
      {1, 96, 24, 1, 30, 31, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 4},    // many blocks
      {1, 40, 40, 1, 6, 11, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, false, false, 2},    // no pads
      {1, 33, 48, 1, 5, 5, 3, 3, 1, 1, 1, 1, 2, 0, 1, 2, false, true, 3},      // uneven pads
      {1, 64, 17, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},      // one pixel
      {1, 128, 128, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},  // F(2x2)
      {1, 144, 128, 1, 23, 22, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, false, true, 4},  // 4x4, 2.6 MiB
  };
  for (const ConvCase& k : cases) {
    runs += RunConvCase(ChannelsLast(k), rng);
    // The case takes the Winograd path it should on every variant.
    const int64_t oh = k.h + k.pt + k.pb - 2, ow = k.w + k.pl + k.pr - 2;
    const bool tile4 = oh * ow / 16 >= 32 || 36 * k.c * k.m * 4 <= (1 << 20);
    for (const kernels::ConvNhwcF32Kernels* variant :
         {kernels::ConvNhwcF32Portable(),
          kernels::ConvNhwcF32For(kernels::DetectedCpuFeatures())}) {
      if (!variant) continue;
      CAPTURE(variant->name);
      auto w = RandomF32({k.m, k.c, 3, 3}, rng);
      kernels::ConvNhwcF32Call call;
      call.c = k.c;
      call.kh = call.kw = 3;
      auto sized = kernels::PrepareConvNhwcF32(variant, w->t, 1, nullptr, nullptr, 1, oh * ow);
      REQUIRE(sized);
      CHECK(std::string(kernels::ConvNhwcF32Method(sized.get(), call)) ==
            (tile4 ? "winograd4x4" : "winograd"));
      // Without the output's size at prepare: F(2x2, 3x3).
      auto unsized = kernels::PrepareConvNhwcF32(variant, w->t, 1);
      REQUIRE(unsized);
      CHECK(std::string(kernels::ConvNhwcF32Method(unsized.get(), call)) == "winograd");
      call.sw = 2;
      CHECK(std::string(kernels::ConvNhwcF32Method(sized.get(), call)) == "igemm");
    }
  }
  // Wide layers (C + M > 768) from 14x14 outputs on; not at all when the
  // size is unknown at prepare. (Prepared only: the numbers are the paths above.)
  for (const kernels::ConvNhwcF32Kernels* variant :
       {kernels::ConvNhwcF32Portable(), kernels::ConvNhwcF32For(kernels::DetectedCpuFeatures())}) {
    if (!variant) continue;
    CAPTURE(variant->name);
    auto w = RandomF32({512, 320, 3, 3}, rng);
    kernels::ConvNhwcF32Call call;
    call.c = 320;
    call.kh = call.kw = 3;
    auto method = [&](int64_t pixels) {
      auto state = kernels::PrepareConvNhwcF32(variant, w->t, 1, nullptr, nullptr, 1, pixels);
      REQUIRE(state);
      return std::string(kernels::ConvNhwcF32Method(state.get(), call));
    };
    CHECK(method(0) == "igemm");
    CHECK(method(13 * 14) == "igemm");
    CHECK(method(14 * 14) == "winograd");
    CHECK(method(23 * 23) == "winograd4x4");
  }
  MESSAGE(runs << " fast channels-last Winograd Conv runs compared");
}

// The converter's FuseConvResidual: Y = act(conv + B + R), on the igemm and
// Winograd epilogues (channels-last) and the generic path (channels-first).
TEST_CASE("kernels f32: Conv with a fused residual input matches the reference") {
  std::mt19937 rng(34);
  int runs = 0;
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  const ConvCase cases[] = {
      {1, 32, 40, 1, 9, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 1},   // 1x1, M tail
      {2, 16, 24, 1, 7, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, 0},  // no bias
      {1, 3, 16, 1, 11, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 2},  // KxK row taps
      {1, 64, 64, 1, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},  // Winograd
      {1, 37, 19, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 3},   // Winograd tails
      {1, 6, 12, 2, 10, 10, 3, 3, 1, 2, 2, 1, 3, 3, 0, 0, false, true, 4},  // groups
      {1, 24, 60, 3, 7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, 1},   // ShuffleNet 1x1 g3
      {1, 8, 8, 8, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},     // depthwise
  };
  for (ConvCase k : cases) {
    k.residual = true;
    runs += RunConvCase(k, rng);
    runs += RunConvCase(ChannelsLast(k), rng);
  }
  MESSAGE(runs << " fast Conv runs with a residual compared");
}

TEST_CASE("kernels f32: channels-last depthwise Conv matches the reference") {
  std::mt19937 rng(32);
  int runs = 0;
  for (int i = 0; i < 40; ++i) runs += RunConvCase(ChannelsLast(RandomConv(rng, true, false)), rng);
  const ConvCase cases[] = {
      {1, 96, 96, 96, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 2},  // 3 x 32 channels
      {1, 45, 45, 45, 21, 21, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, false, true, 3},  // 32 + 13
      {2, 7, 7, 7, 9, 9, 3, 3, 3, 3, 2, 2, 4, 0, 4, 0, false, false, 1},      // tail only
      {1, 16, 32, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 0},    // multiplier 2
      // Column runs (DwRunF32Args): channel vectors outer once a block of
      // pixels' windows outgrows L1 (240 channels 5x5, 350 3x3), kernel rows
      // in the padding left out, stride 2 across the width, 7 columns.
      {1, 240, 240, 240, 7, 30, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, true, 3},
      {1, 350, 350, 350, 5, 27, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},
      {2, 40, 40, 40, 9, 37, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, false, 0},
      {1, 33, 33, 33, 6, 41, 5, 5, 1, 2, 1, 1, 0, 2, 4, 2, false, true, 2},
  };
  for (const ConvCase& k : cases) runs += RunConvCase(ChannelsLast(k), rng);
  MESSAGE(runs << " fast channels-last Conv runs compared");
}

// The AVX-512F tiles (12, 8 or 4 pixels x 32 channels, one vector for a
// panel of at most 16 channels, masked channel tails), the AVX2 ones (6 x 16)
// and NEON's (8 or 4 pixels x 8 channels, lane-wise partial vectors): M
// across the 4/8/16/32/48 boundaries, pixel counts around multiples of 4, 6,
// 8 and 12, groups, residual and activations, Winograd, depthwise channel
// tails (NEON: 8, 4, then 1 to 3 channels). CompareF32 runs every ISA level;
// this also checks the highest one reaches its own variant.
TEST_CASE("kernels f32: channels-last Conv at the AVX-512 tile edges matches the reference") {
  const kernels::KernelConfig& top = IsaConfig(kernels::SupportedIsas().back());
  const std::string top_name = top.conv_nhwc_f32 ? top.conv_nhwc_f32->name : "none";
  MESSAGE("conv_nhwc_f32 at " << std::string(kernels::IsaName(kernels::SupportedIsas().back()))
                              << ": " << top_name);
  if (kernels::DetectedCpuFeatures().avx512f) CHECK(top_name == "avx512f");
  if (kernels::DetectedCpuFeatures().asimd) CHECK(top_name == "neon");
  std::mt19937 rng(35);
  int runs = 0;
  // Pixels 1 to 12 (mod 12: the last tile's rows), then 14, 23, 36, 37
  // (every count mod 8 too).
  const int64_t sides[][2] = {{1, 1}, {1, 2}, {1, 15}, {4, 4}, {1, 17}, {2, 9},  {1, 7}, {4, 5},
                              {3, 3}, {2, 5}, {1, 11}, {3, 4}, {1, 14}, {1, 23}, {6, 6}, {37, 1}};
  for (int64_t m = 1; m <= 80; ++m) {
    const int64_t* hw = sides[m % 16];
    ConvCase k{};
    k.n = m % 7 == 0 ? 2 : 1;
    k.c = 1 + m % 9;
    k.m = m;
    k.group = 1;
    k.h = hw[0];
    k.w = hw[1];
    k.kh = k.kw = k.sh = k.sw = k.dh = k.dw = 1;
    k.bias = m % 3 != 0;
    k.act = int(m % 5);
    k.residual = m % 4 == 1;
    runs += RunConvCase(ChannelsLast(k), rng);
  }
  // n, c, m, group, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, one_d, bias, act
  ConvCase cases[] = {
      {1, 16, 48, 1, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 1},   // 3 vectors, row taps
      {1, 24, 49, 1, 9, 14, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, false, true, 2},    // 48 + 1
      {1, 8, 80, 2, 10, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 4},     // groups of 40
      {2, 12, 66, 3, 7, 8, 5, 5, 1, 1, 2, 2, 2, 2, 2, 2, false, false, 3},    // groups of 22
      {1, 3, 33, 1, 31, 29, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, true, 1},    // stem, 32 + 1
      {1, 33, 49, 1, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},    // Winograd 48 + 1
      {1, 64, 80, 1, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, 2},   // Winograd 64 + 16
      {2, 47, 17, 1, 10, 10, 3, 3, 1, 1, 1, 1, 0, 1, 2, 1, false, true, 3},   // Winograd 16 + 1
      {1, 80, 80, 80, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 2},   // dw 64 + 16
      {1, 65, 65, 65, 11, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 1},  // dw 64 + 1
      {1, 100, 100, 100, 7, 9, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, true, 0},  // dw 64 + 36
      {2, 15, 15, 15, 6, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, 4},   // dw 15
      {1, 31, 31, 31, 5, 40, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, false, true, 3},    // dw 16 + 15
      {1, 63, 63, 63, 6, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true, 1},     // dw 48 + 15
      {1, 29, 29, 29, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 0},     // dw 24 + 5
  };
  for (ConvCase& k : cases) {
    runs += RunConvCase(ChannelsLast(k), rng);
    if (k.group != k.c) {  // depthwise takes no residual
      k.residual = true;
      runs += RunConvCase(ChannelsLast(k), rng);
    }
  }
  MESSAGE(runs << " fast channels-last Conv runs compared");
}

// A NaN input through the fused Relu (0) and Clip (NaN), like the reference,
// on the igemm, Winograd and depthwise epilogues of every variant: the
// max/min operand order. (CompareF32's tolerance is NaN where the input is.)
// Infinities too: the Winograd transforms subtract them (and F(4x4, 3x3)'s
// carry NaN across the tile), so such calls run again as the direct sums
// (RunWinograd).
TEST_CASE("kernels f32: channels-last Conv activations treat NaN like the reference") {
  std::mt19937 rng(36);
  // c, m, group: igemm, Winograd F(4x4), depthwise, Winograd F(2x2)
  const int64_t shapes[][3] = {{5, 40, 1}, {33, 40, 1}, {40, 40, 40}, {128, 128, 1}};
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& sh : shapes)
    for (int act : {1, 2})
      for (float special : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
        const int64_t c = sh[0], m = sh[1], group = sh[2];
        INFO("C" << c << " M" << m << " group " << group << " act " << act << " " << special);
        std::vector<float> xv = RandomFloats(1 * 6 * 7 * c, rng);
        for (int64_t i = 0; i < int64_t(xv.size()); i += 7 * c + 3) xv[size_t(i)] = special;
        const std::vector<TensorPtr> in = {
            F32({1, 6, 7, c}, xv), RandomF32({m, c / group, 3, 3}, rng), RandomF32({m}, rng)};
        AttrMap attrs;
        attrs.SetInt("group", group);
        attrs.SetInts("pads", {1, 1, 1, 1});
        attrs.SetInt("channels_last", 1);
        SetActivation(act, &attrs);
        Runner ref("Conv", in, attrs, IsaConfig(Isa::kReference));
        const std::vector<float> want = ref.Run(nullptr, 1);
        size_t nans = 0, zeros = 0;
        for (float v : want) {
          nans += std::isnan(v);
          zeros += v == 0.f;
        }
        if (std::isnan(special)) {
          CHECK(nans + zeros > 0);
          if (act == 2) CHECK(nans > 0);
        }
        for (Isa isa : kernels::SupportedIsas()) {
          if (!IsaConfig(isa).conv_nhwc_f32) continue;
          CAPTURE(std::string(kernels::IsaName(isa)));
          Runner fast("Conv", in, attrs, IsaConfig(isa));
          std::shared_ptr<void> state;
          REQUIRE(fast.def->prepare(fast.ctx, &state).ok());
          const std::vector<float> got = fast.Run(state.get(), 1);
          REQUIRE(got.size() == want.size());
          size_t bad = 0;
          for (; bad < got.size(); ++bad) {
            const float g = got[bad], e = want[bad];
            if (std::isnan(g) != std::isnan(e) || std::isinf(g) != std::isinf(e) ||
                (std::isinf(e) && g != e) ||
                (std::isfinite(e) && std::fabs(g - e) > 1e-4f * (1.f + std::fabs(e))))
              break;
          }
          CAPTURE(bad);
          CHECK(bad == got.size());
        }
      }
}

// ---- ConvTranspose ---------------------------------------------------------------

TEST_CASE("kernels f32: ConvTranspose on the packed GEMM matches the reference") {
  std::mt19937 rng(51);
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  int runs = 0;
  for (int i = 0; i < 30; ++i) {
    // i == 0: the PP-OCR detector's upsampling (2x2, stride 2, no pads).
    const int64_t group = i == 0 ? 1 : pick({1, 1, 2, 3});
    const int64_t c = group * (i == 0 ? 24 : pick({1, 5, 8, 17})),
                  mg = i == 0 ? 24 : pick({1, 3, 8, 9});
    const int64_t kh = i == 0 ? 2 : pick({1, 2, 3, 4}), kw = i == 0 ? 2 : pick({1, 2, 3});
    const int64_t s = i == 0 ? 2 : pick({1, 2, 3}), d = i == 0 ? 1 : pick({1, 1, 2});
    const int64_t p = i == 0 ? 0 : pick({0, 0, 1}), op = s > 1 && d == 1 ? pick({0, 1}) : 0;
    const int64_t n = pick({1, 1, 2}), h = 1 + rng() % 9, w = 1 + rng() % 23;
    std::ostringstream what;
    what << "ConvTranspose n" << n << " c" << c << " m" << mg * group << " g" << group << " " << h
         << "x" << w << " k" << kh << "x" << kw << " s" << s << " d" << d << " p" << p << " op"
         << op;
    AttrMap attrs;
    attrs.SetInt("group", group);
    attrs.SetInts("strides", {s, s});
    attrs.SetInts("dilations", {d, d});
    attrs.SetInts("pads", {p, p, p, p});
    attrs.SetInts("output_padding", {op, op});
    AttrMap abs_attrs = attrs;
    const int act = int(rng() % 5);
    SetActivation(act, &attrs);
    std::vector<TensorPtr> in = {RandomF32({n, c, h, w}, rng), RandomF32({c, mg, kh, kw}, rng)};
    if (rng() % 2) in.push_back(RandomF32({mg * group}, rng));
    std::vector<TensorPtr> abs_in;
    for (auto& t : in) abs_in.push_back(Abs(t));
    runs += CompareF32("ConvTranspose", in, attrs, abs_in, abs_attrs, act == 3 ? 2.f : 1.f,
                       /*expect_state=*/true, what.str());
  }
  MESSAGE(runs << " fast ConvTranspose runs compared");
}

// ---- MatMul and Gemm -----------------------------------------------------------

// bias: the converter's fused per-column bias (third input, N values).
int RunMatMulCase(const Shape& as, const Shape& bs, int act, std::mt19937& rng, bool bias = false) {
  std::ostringstream what;
  what << "MatMul A " << ShapeToString(as) << " B " << ShapeToString(bs) << " act " << act
       << " bias " << bias;
  AttrMap attrs, abs_attrs;
  SetActivation(act, &attrs);
  std::vector<TensorPtr> in = {RandomF32(as, rng), RandomF32(bs, rng)};
  if (bias) in.push_back(RandomF32({bs.back()}, rng));
  std::vector<TensorPtr> abs_in;
  for (auto& t : in) abs_in.push_back(Abs(t));
  return CompareF32("MatMul", in, attrs, abs_in, abs_attrs, act == 3 ? 2.f : 1.f,
                    /*expect_state=*/true, what.str());
}

TEST_CASE("kernels f32: MatMul tile edges, batches and 1-D operands match the reference") {
  std::mt19937 rng(31);
  int runs = 0;
  for (int64_t m : {1, 5, 6, 8, 9, 33})
    for (int64_t n : {1, 15, 16, 17, 48, 49, 97}) {
      const int64_t kd = int64_t(1 + rng() % 300);
      runs += RunMatMulCase({m, kd}, {kd, n}, int(rng() % 5), rng);
    }
  runs += RunMatMulCase({2, 3, 7, 20}, {3, 20, 50}, 1, rng);  // broadcast batch
  runs += RunMatMulCase({3, 1, 9, 20}, {4, 20, 18}, 2, rng);  // both broadcast
  runs += RunMatMulCase({30}, {30, 21}, 0, rng);              // 1-D A
  runs += RunMatMulCase({4, 10, 30}, {30}, 0, rng);           // 1-D B
  runs += RunMatMulCase({64, 700}, {700, 70}, 3, rng);        // K > kc, threads
  runs += RunMatMulCase({200, 64}, {64, 3}, 1, rng);          // rows split
  // The fused bias: tile edges, batches, threads, with and without an activation.
  for (int64_t n : {1, 7, 16, 17, 50})
    runs += RunMatMulCase({9, 40}, {40, n}, int(rng() % 5), rng, /*bias=*/true);
  runs += RunMatMulCase({2, 3, 7, 20}, {3, 20, 50}, 1, rng, true);
  runs += RunMatMulCase({1, 128, 64}, {64, 96}, 0, rng, true);
  runs += RunMatMulCase({64, 700}, {700, 70}, 3, rng, true);
  MESSAGE(runs << " fast MatMul runs compared");
}

TEST_CASE("kernels f32: a fused MatMul bias of the wrong shape or dtype is refused") {
  std::mt19937 rng(32);
  auto a = RandomF32({3, 4}, rng);
  auto b = RandomF32({4, 5}, rng);
  for (const Shape& bad : {Shape{4}, Shape{1, 5}, Shape{}}) {
    CAPTURE(ShapeToString(bad));
    const OpRun r = RunOp("MatMul", {a, b, RandomF32(bad, rng)});
    CHECK(r.status.code() == StatusCode::kInvalidModel);
    CHECK(r.status.message().find("fused bias") != std::string::npos);
  }
  auto b1 = RandomF32({4}, rng);  // 1-D B: Y has no column axis
  CHECK(RunOp("MatMul", {a, b1, RandomF32({1}, rng)}).status.code() == StatusCode::kInvalidModel);
  CHECK(RunOp("MatMul", {a, b, RandomF32({5}, rng)}).status.ok());
}

int RunGemmCase(int64_t m, int64_t kd, int64_t n, bool ta, bool tb, float alpha, float beta,
                const Shape* cs, int act, std::mt19937& rng) {
  std::ostringstream what;
  what << "Gemm M" << m << " K" << kd << " N" << n << " tA " << ta << " tB " << tb << " alpha "
       << alpha << " beta " << beta << " C " << (cs ? ShapeToString(*cs) : "none") << " act "
       << act;
  AttrMap attrs;
  attrs.SetInt("transA", ta);
  attrs.SetInt("transB", tb);
  attrs.SetFloat("alpha", alpha);
  attrs.SetFloat("beta", beta);
  AttrMap abs_attrs = attrs;
  abs_attrs.SetFloat("alpha", std::fabs(alpha));
  abs_attrs.SetFloat("beta", std::fabs(beta));
  SetActivation(act, &attrs);
  std::vector<TensorPtr> in = {RandomF32(ta ? Shape{kd, m} : Shape{m, kd}, rng),
                               RandomF32(tb ? Shape{n, kd} : Shape{kd, n}, rng)};
  if (cs) in.push_back(RandomF32(*cs, rng));
  std::vector<TensorPtr> abs_in;
  for (auto& t : in) abs_in.push_back(Abs(t));
  return CompareF32("Gemm", in, attrs, abs_in, abs_attrs, act == 3 ? 2.f : 1.f,
                    /*expect_state=*/true, what.str());
}

TEST_CASE("kernels f32: Gemm transposes, alpha, beta and C broadcasts match the reference") {
  std::mt19937 rng(41);
  int runs = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t m = 1 + rng() % 40, kd = 1 + rng() % 300, n = 1 + rng() % 120;
    const Shape c_shapes[] = {{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}};
    const int ci = int(rng() % 8);
    const float alpha = rng() % 2 ? 1.f : -1.5f, beta = rng() % 2 ? 1.f : 0.5f;
    runs += RunGemmCase(m, kd, n, rng() % 2, rng() % 2, alpha, beta,
                        ci < 7 ? &c_shapes[ci] : nullptr, int(rng() % 5), rng);
  }
  const Shape c = {1000};
  runs += RunGemmCase(1, 1280, 1000, false, true, 1.f, 1.f, &c, 0, rng);  // classifier head
  MESSAGE(runs << " fast Gemm runs compared");
}

TEST_CASE("kernels f32: prepare leaves no state at the reference level") {
  const kernels::KernelConfig& reference = IsaConfig(Isa::kReference);
  CHECK(reference.gemm_f32 == nullptr);
  CHECK(kernels::GemmF32For(kernels::CpuFeatures()) == nullptr);
  std::mt19937 rng(1);
  for (const char* type : {"Conv", "ConvTranspose", "MatMul", "Gemm"}) {
    auto x = RandomF32({1, 4, 5, 5}, rng);
    auto w = RandomF32({3, 4, 1, 1}, rng);
    auto a = RandomF32({2, 4}, rng);
    auto b = RandomF32({4, 3}, rng);
    const std::string t = type;
    AttrMap attrs;
    const bool conv = t == "Conv" || t == "ConvTranspose";
    Runner r(t,
             conv ? std::vector<TensorPtr>{x, t == "Conv" ? w : RandomF32({4, 3, 1, 1}, rng)}
                  : std::vector<TensorPtr>{a, b},
             attrs, reference);
    std::shared_ptr<void> state;
    REQUIRE(r.def->prepare(r.ctx, &state).ok());
    CHECK(state == nullptr);
  }
  CHECK(reference.conv_nhwc_f32 == nullptr);
  AttrMap cl;
  cl.SetInt("channels_last", 1);
  Runner r("Conv", {RandomF32({1, 5, 5, 4}, rng), RandomF32({3, 4, 1, 1}, rng)}, cl, reference);
  std::shared_ptr<void> state;
  REQUIRE(r.def->prepare(r.ctx, &state).ok());
  CHECK(state == nullptr);
}

// ---- speed (skipped by default: qfold_unit_tests -tc='*f32 speed*' -ns) --------

// Best of `reps` runs: the machine is shared, so the minimum is the signal.
double Seconds(const std::function<void()>& fn, int reps) {
  fn();  // warm up
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// channels_last: X [1, hw, hw, c], the kernels of conv_f32_nhwc.h.
void BenchConv(const char* label, int64_t c, int64_t m, int64_t group, int64_t hw, int64_t kk,
               int64_t stride, bool channels_last = false) {
  std::mt19937 rng(5);
  const int64_t pad = kk / 2;
  auto x = RandomF32(channels_last ? Shape{1, hw, hw, c} : Shape{1, c, hw, hw}, rng);
  auto w = RandomF32({m, c / group, kk, kk}, rng);
  auto b = RandomF32({m}, rng);
  AttrMap attrs;
  attrs.SetInt("group", group);
  attrs.SetInts("strides", {stride, stride});
  attrs.SetInts("pads", {pad, pad, pad, pad});
  attrs.SetString("_activation", "Relu");
  if (channels_last) attrs.SetInt("channels_last", 1);
  for (Isa isa : kernels::SupportedIsas()) {
    Runner r("Conv", {x, w, b}, attrs, IsaConfig(isa));
    std::shared_ptr<void> state;
    REQUIRE(r.def->prepare(r.ctx, &state).ok());
    r.Run(state.get(), 1);
    const int64_t oh = (hw + 2 * pad - kk) / stride + 1;
    const double flops = 2.0 * m * oh * oh * (c / group) * kk * kk;
    for (int threads : {1, 2}) {
      if (isa == Isa::kReference && threads == 2) continue;
      const double s =
          Seconds([&] { r.Rerun(state.get(), threads); }, isa == Isa::kReference ? 1 : 10);
      MESSAGE(std::string(label) << " " << std::string(kernels::IsaName(isa)) << " threads "
                                 << threads << ": " << s * 1e3 << " ms, " << flops / s * 1e-9
                                 << " GFLOPS");
    }
  }
}

// ---- Weight-only quantized MatMul (QfMatMulWeightQ) --------------------------

// B of `dtype` (int4/uint4 two per byte, low nibble first; int8/uint8) from
// the integers q.
TensorPtr QuantB(DType dtype, Shape shape, const std::vector<int32_t>& q) {
  const bool four = dtype == DType::kInt4 || dtype == DType::kUInt4;
  std::vector<uint8_t> bytes(four ? (q.size() + 1) / 2 : q.size(), 0);
  for (size_t i = 0; i < q.size(); ++i) {
    if (four)
      bytes[i / 2] = uint8_t(bytes[i / 2] | (uint32_t(q[i]) & 15u) << (i % 2 * 4));
    else
      bytes[i] = uint8_t(q[i]);
  }
  return Make<uint8_t>(dtype, std::move(shape), bytes);
}

// The packed weight-only GEMM at every variant (each SIMD level and the
// portable one), 1 and 2 threads, against the reference kernel within
// 1e-5 * sum|a w| (it multiplies and adds separately; the variants fuse
// them) and against each other bit for bit. w = float(q - zp) * scale is
// computed here in double for the magnitudes.
TEST_CASE("kernels f32: weight-only quantized MatMul matches the reference at every variant") {
  struct Case {
    DType dtype;
    Shape a;
    int64_t k, n, block;  // block 0: scales per column (or one, `scalar`)
    bool zero_points, scalar;
  };
  const Case cases[] = {
      {DType::kInt4, {2, 5, 80}, 80, 48, 32, true, false},    // the int4 MLP's first layer
      {DType::kUInt4, {1, 50}, 50, 33, 16, true, false},      // one row, a partial block
      {DType::kUInt8, {9, 70}, 70, 17, 0, true, false},       // q - zp beyond int8: int16
      {DType::kInt8, {3, 7}, 7, 5, 0, false, true},           // one scale
      {DType::kUInt8, {4, 20}, 20, 9, 0, false, false},       // q up to 255: int16
      {DType::kInt4, {37, 256}, 256, 200, 64, false, false},  // rows and panels for 2 threads
      {DType::kUInt4, {6, 33}, 33, 16, 33, true, false},      // rows 5-8: the wide tile
      {DType::kInt4, {1, 64}, 64, 300, 32, true, false},      // one row: panels side by side
      {DType::kUInt8, {2, 40}, 40, 150, 0, true, false},      // two rows, int16, 10 panels
  };
  std::mt19937 rng(47);
  int runs = 0;
  for (const Case& c : cases) {
    CAPTURE(dtype_name(c.dtype));
    CAPTURE(c.k);
    CAPTURE(c.n);
    const bool is_signed = c.dtype == DType::kInt4 || c.dtype == DType::kInt8;
    const int bits = c.dtype == DType::kInt4 || c.dtype == DType::kUInt4 ? 4 : 8;
    const int32_t lo = is_signed ? -(1 << (bits - 1)) : 0, hi = lo + (1 << bits) - 1;
    std::uniform_int_distribution<int32_t> qd(lo, hi);
    std::vector<int32_t> q(size_t(c.k * c.n));
    for (auto& v : q) v = qd(rng);
    const int64_t rows_s = c.scalar ? 1 : c.block > 0 ? (c.k + c.block - 1) / c.block : 1;
    const int64_t cols_s = c.scalar ? 1 : c.n;
    std::vector<float> scales = RandomFloats(rows_s * cols_s, rng, 0.01f, 0.1f);
    std::vector<int32_t> zp(size_t(rows_s * cols_s), 0);
    if (c.zero_points)
      for (auto& v : zp) v = qd(rng);
    const Shape ps = c.scalar ? Shape{} : c.block > 0 ? Shape{rows_s, c.n} : Shape{c.n};
    std::vector<TensorPtr> in = {RandomF32(c.a, rng), QuantB(c.dtype, {c.k, c.n}, q),
                                 F32(ps, scales)};
    if (c.zero_points) in.push_back(QuantB(c.dtype, ps, zp));
    AttrMap attrs;
    if (c.block > 0) attrs.SetInt("block_size", c.block);
    // sum |a w| per output, in double.
    const float* a = in[0]->t.ptr<float>();
    const int64_t rows = Numel(c.a) / c.k;
    std::vector<double> mag(size_t(rows * c.n), 0.0);
    for (int64_t kk = 0; kk < c.k; ++kk)
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t p = c.scalar ? 0 : size_t((c.block > 0 ? kk / c.block * c.n : 0) + j);
        const double w = double(q[size_t(kk * c.n + j)] - zp[p]) * scales[p];
        for (int64_t r = 0; r < rows; ++r)
          mag[size_t(r * c.n + j)] += std::fabs(double(a[r * c.k + kk]) * w);
      }
    Runner ref("QfMatMulWeightQ", in, attrs, IsaConfig(Isa::kReference));
    std::shared_ptr<void> none;
    REQUIRE(ref.def->prepare(ref.ctx, &none).ok());
    CHECK(none == nullptr);  // the reference level keeps the reference kernel
    const std::vector<float> want = ref.Run(nullptr, 1);
    std::vector<kernels::KernelConfig> configs;
    for (Isa isa : kernels::SupportedIsas())
      if (IsaConfig(isa).gemm_wq_f32) configs.push_back(IsaConfig(isa));
    configs.push_back(IsaConfig(Isa::kReference));
    configs.back().gemm_wq_f32 = kernels::GemmWqF32Portable();
    std::vector<float> first;
    for (const kernels::KernelConfig& kc : configs) {
      CAPTURE(kc.gemm_wq_f32->name);
      Runner fast("QfMatMulWeightQ", in, attrs, kc);
      std::shared_ptr<void> state;
      REQUIRE(fast.def->prepare(fast.ctx, &state).ok());
      REQUIRE(state != nullptr);
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        const std::vector<float> got = fast.Run(state.get(), threads);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          CAPTURE(i);
          REQUIRE(std::fabs(double(got[i]) - double(want[i])) <= 1e-5 * mag[i] + 1e-7);
        }
        if (first.empty()) first = got;
        REQUIRE(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)) == 0);
        ++runs;
      }
    }
  }
  MESSAGE(runs << " weight-only quantized MatMul runs compared");
}

// accuracy_level 4 (kernels/gemm_wq_s8.h): 4-bit weights times A quantized
// to int8 per row and block, at every variant (each SIMD level and the
// portable one), 1 and 2 threads, bit for bit against the definition
// computed here; and within the bound A's rounding allows (half a step of
// 127 per block) of the exact product.
TEST_CASE("kernels: weight-only 4-bit MatMul with int8 activations matches its definition") {
  struct Case {
    DType dtype;
    Shape a;
    int64_t k, n, block;
    bool zero_points;
  };
  const Case cases[] = {
      {DType::kUInt4, {2, 5, 80}, 80, 48, 32, true},    // a short last block
      {DType::kInt4, {1, 64}, 64, 300, 16, false},      // one row, 19 panels, int4 moved by 8
      {DType::kUInt4, {37, 256}, 256, 200, 128, true},  // row tiles and panels for 2 threads
      {DType::kInt4, {3, 40}, 40, 17, 8, true},         // 3 rows, zero and special blocks
      {DType::kUInt4, {2, 40}, 40, 24, 1 << 20, true},  // one block far past K: packed as K
  };
  std::mt19937 rng(53);
  int runs = 0;
  for (const Case& c : cases) {
    CAPTURE(dtype_name(c.dtype));
    CAPTURE(c.k);
    CAPTURE(c.n);
    const int32_t lo = c.dtype == DType::kInt4 ? -8 : 0, shift = -lo;
    std::uniform_int_distribution<int32_t> qd(lo, lo + 15);
    const int64_t blocks = (c.k + c.block - 1) / c.block, rows = Numel(c.a) / c.k;
    std::vector<int32_t> q(size_t(c.k * c.n)), zp(size_t(blocks * c.n), 0);
    for (auto& v : q) v = qd(rng);
    if (c.zero_points)
      for (auto& v : zp) v = qd(rng);
    const std::vector<float> scales = RandomFloats(blocks * c.n, rng, 0.01f, 0.1f);
    std::vector<TensorPtr> in = {RandomF32(c.a, rng), QuantB(c.dtype, {c.k, c.n}, q),
                                 F32({blocks, c.n}, scales)};
    if (c.zero_points) in.push_back(QuantB(c.dtype, {blocks, c.n}, zp));
    float* a = in[0]->t.ptr<float>();
    if (c.block == 8) {  // row 0: block 1 all zero; row 1: a NaN in block 2
      for (int64_t i = 8; i < 16; ++i) a[i] = 0.f;
      a[c.k + 17] = std::nanf("");
    }
    AttrMap attrs;
    attrs.SetInt("block_size", c.block);
    attrs.SetInt("accuracy_level", 4);
    // The definition, and the exact product's distance bound.
    std::vector<float> want(size_t(rows * c.n), 0.f);
    std::vector<double> exact(size_t(rows * c.n), 0.0), bound(size_t(rows * c.n), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t k0 = b * c.block, k1 = std::min(c.k, k0 + c.block);
        float amax = 0.f;
        bool finite = true;
        for (int64_t kk = k0; kk < k1; ++kk) {
          finite = finite && std::isfinite(a[r * c.k + kk]);
          amax = std::max(amax, std::fabs(a[r * c.k + kk]));
        }
        const float inv = amax > 0.f && finite ? 127.f / amax : 0.f;
        const float a_scale = finite ? amax / 127.f : std::nanf("");
        std::vector<int32_t> aq(size_t(k1 - k0));
        int32_t asum = 0;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const float v = std::min(127.f, std::max(-127.f, a[r * c.k + kk] * inv));
          aq[size_t(kk - k0)] = int32_t(std::nearbyint(v));
          asum += aq[size_t(kk - k0)];
        }
        for (int64_t j = 0; j < c.n; ++j) {
          const size_t p = size_t(b * c.n + j);
          int64_t dot = 0;
          double wabs = 0;
          for (int64_t kk = k0; kk < k1; ++kk) {
            const int32_t code = q[size_t(kk * c.n + j)] + shift;
            dot += int64_t(code) * aq[size_t(kk - k0)];
            const double w = double(q[size_t(kk * c.n + j)] - zp[p]) * scales[p];
            exact[size_t(r * c.n + j)] += double(a[r * c.k + kk]) * w;
            wabs += std::fabs(w);
          }
          const int32_t d = int32_t(dot) - (zp[p] + shift) * asum;
          float& y = want[size_t(r * c.n + j)];
          y = std::fma(float(d), a_scale * scales[p], y);
          bound[size_t(r * c.n + j)] += wabs * amax / 254.0;
        }
      }
    std::vector<kernels::KernelConfig> configs;
    for (Isa isa : kernels::SupportedIsas())
      if (IsaConfig(isa).gemm_wq_s8) configs.push_back(IsaConfig(isa));
    configs.push_back(IsaConfig(Isa::kReference));
    configs.back().gemm_wq_f32 = kernels::GemmWqF32Portable();
    configs.back().gemm_wq_s8 = kernels::GemmWqS8Portable();
    for (const kernels::KernelConfig& kc : configs) {
      CAPTURE(kc.gemm_wq_s8->name);
      Runner fast("QfMatMulWeightQ", in, attrs, kc);
      std::shared_ptr<void> state;
      REQUIRE(fast.def->prepare(fast.ctx, &state).ok());
      REQUIRE(state != nullptr);
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        const std::vector<float> got = fast.Run(state.get(), threads);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          CAPTURE(i);
          if (std::isnan(want[i])) {
            REQUIRE(std::isnan(got[i]));
            continue;
          }
          REQUIRE(std::memcmp(&got[i], &want[i], sizeof(float)) == 0);
          REQUIRE(std::fabs(double(got[i]) - exact[i]) <= 1.001 * bound[i] + 1e-6);
        }
        ++runs;
      }
    }
  }
  MESSAGE(runs << " int8-activation weight-only MatMul runs compared");
  // 8-bit weights (and accuracy_level < 4) keep the exact float kernel.
  std::vector<int32_t> q8(40 * 8);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = int32_t(i % 200);
  std::vector<TensorPtr> in = {RandomF32({2, 40}, rng), QuantB(DType::kUInt8, {40, 8}, q8),
                               F32({5, 8}, RandomFloats(40, rng, 0.01f, 0.1f))};
  AttrMap attrs;
  attrs.SetInt("block_size", 8);
  attrs.SetInt("accuracy_level", 4);
  Runner ref("QfMatMulWeightQ", in, attrs, IsaConfig(Isa::kReference));
  const std::vector<float> want = ref.Run(nullptr, 1);
  for (Isa isa : kernels::SupportedIsas()) {
    if (!IsaConfig(isa).gemm_wq_s8) continue;
    Runner fast("QfMatMulWeightQ", in, attrs, IsaConfig(isa));
    std::shared_ptr<void> state;
    REQUIRE(fast.def->prepare(fast.ctx, &state).ok());
    const std::vector<float> got = fast.Run(state.get(), 1);
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(std::fabs(got[i] - want[i]) <= 1e-5f * (std::fabs(want[i]) + 1.f));
  }
}

TEST_CASE("kernels f32 speed" * doctest::skip()) {
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::GemmF32Kernels* k = IsaConfig(isa).gemm_f32;
    if (!k) continue;
    for (int64_t s : {256, 512, 1024}) {
      std::mt19937 rng(3);
      const std::vector<float> a = RandomFloats(s * s, rng), b = RandomFloats(s * s, rng);
      std::vector<float> lp(size_t(kernels::PackedF32Size(s, s, k->mr)));
      std::vector<float> rp(size_t(kernels::PackedF32Size(s, s, k->nr)));
      std::vector<float> c(size_t(s * s));
      k->pack_left(a.data(), s, 1, s, s, lp.data());
      k->pack_right(b.data(), s, 1, s, s, rp.data());
      kernels::GemmF32Args args;
      args.rows = args.cols = args.k = s;
      args.ldc = s;
      for (int threads : {1, 2}) {
        const double t = Seconds(
            [&] {
              const float *l = lp.data(), *r = rp.data();
              float* cd = c.data();
              kernels::GemmF32Batched(*k, args, &l, &r, &cd, 1, test::TestPool(threads));
            },
            5);
        MESSAGE("GEMM " << s << "^3 " << std::string(kernels::IsaName(isa)) << " threads "
                        << threads << ": " << 2.0 * s * s * s / t * 1e-9 << " GFLOPS");
      }
    }
  }
  BenchConv("conv 1x1 256->256 56x56", 256, 256, 1, 56, 1, 1);
  BenchConv("conv 3x3 64->64 56x56", 64, 64, 1, 56, 3, 1);
  BenchConv("conv 3x3 s2 32->64 112x112", 32, 64, 1, 112, 3, 2);
  BenchConv("conv 3x3 256->256 14x14", 256, 256, 1, 14, 3, 1);
  BenchConv("conv 1x1 1024->256 14x14", 1024, 256, 1, 14, 1, 1);
  BenchConv("depthwise 3x3 144ch 56x56", 144, 144, 144, 56, 3, 1);
  BenchConv("depthwise 3x3 s2 144ch 56x56", 144, 144, 144, 56, 3, 2);
  BenchConv("NHWC conv 1x1 256->256 56x56", 256, 256, 1, 56, 1, 1, true);
  BenchConv("NHWC conv 1x1 1024->256 14x14", 1024, 256, 1, 14, 1, 1, true);
  BenchConv("NHWC conv 3x3 64->64 56x56 (Winograd)", 64, 64, 1, 56, 3, 1, true);
  BenchConv("NHWC conv 3x3 s2 64->128 56x56", 64, 128, 1, 56, 3, 2, true);
  BenchConv("NHWC conv 3x3 512->512 7x7", 512, 512, 1, 7, 3, 1, true);
  BenchConv("NHWC depthwise 3x3 144ch 56x56", 144, 144, 144, 56, 3, 1, true);
  BenchConv("NHWC depthwise 3x3 s2 144ch 56x56", 144, 144, 144, 56, 3, 2, true);
  BenchConv("NHWC depthwise 3x3 32ch 112x112", 32, 32, 32, 112, 3, 1, true);
}

}  // namespace
}  // namespace test
}  // namespace qfold
