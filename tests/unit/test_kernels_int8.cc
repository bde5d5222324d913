// The fast int8 kernels (runtime/src/kernels) against the reference kernels
// of QLinearConv/QLinearMatMul: for every ISA level this CPU supports, random
// shapes at tile edges, padding, strides, dilations, groups, both 8-bit
// dtypes, per-tensor and per-channel weights, extreme zero points and scales
// (clamping, infinite and NaN multipliers) must give bit-identical bytes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/dwconv_s8.h"
#include "kernels/gemm_f32.h"
#include "kernels/gemm_s8.h"
#include "kernels/gemm_s8_avxvnni.h"
#include "kernels/quant_s8.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;
using kernels::Isa;

// Restores the ISA level chosen at start when a test case ends.
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
// prepared = false: no prepare (a weight input that is an activation), the
// kernels pack it during the run.
int CompareWithReference(const std::string& type, const std::vector<TensorPtr>& inputs,
                         const AttrMap& attrs, const std::string& what, bool prepared = true) {
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
  ctx.kernels = &IsaConfig(Isa::kReference);
  REQUIRE(def->run(ctx).ok());  // no state, reference level: the reference kernel
  const std::vector<uint8_t> want = out.storage;
  int runs = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    if (!IsaConfig(isa).gemm_s8) continue;
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    ctx.kernels = &IsaConfig(isa);
    std::shared_ptr<void> state;
    if (prepared) {
      REQUIRE(def->prepare(ctx, &state).ok());
      REQUIRE(state != nullptr);
    }
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      ctx.state = state.get();
      ctx.pool = test::TestPool(threads);
      std::fill(out.storage.begin(), out.storage.end(), 0xCD);
      std::fill(out.storage.begin() + int64_t(out.t.bytes()), out.storage.end(), 0xAB);
      ctx.reference_path = false;
      REQUIRE(def->run(ctx).ok());
      CHECK(!ctx.reference_path);  // the fast kernels ran, not a silent fallback
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
  const std::vector<Isa> levels = kernels::SupportedIsas();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == Isa::kReference);
  CHECK(levels.back() == kernels::DetectedIsa());
  const kernels::CpuFeatures& detected = kernels::DetectedCpuFeatures();
  // QFOLD_ISA and the named sets only ever remove features.
  const kernels::CpuFeatures& by_default = kernels::DefaultCpuFeatures();
  CHECK((by_default & detected) == by_default);
  for (int i = 0; i <= int(Isa::kAmx); ++i) {
    const kernels::CpuFeatures f = kernels::FeaturesForIsa(Isa(i));
    CAPTURE(kernels::IsaName(Isa(i)));
    CHECK((f & detected) == f);
  }
  // The top set of either architecture keeps everything the CPU has (a set of
  // the other architecture changes nothing).
  CHECK(kernels::FeaturesForIsa(Isa::kAmx) == detected);
  CHECK(kernels::FeaturesForIsa(Isa::kNeonI8mm) == detected);
  // avx512vnni leaves AMX out (so its zmm kernels are tested on an AMX CPU too).
  CHECK(!kernels::FeaturesForIsa(Isa::kAvx512Vnni).amx);
  Isa parsed = Isa::kReference;
  CHECK(kernels::ParseIsa("amx", &parsed));
  CHECK(parsed == Isa::kAmx);
  CHECK(std::string(kernels::IsaName(Isa::kAmx)) == "amx");
  // A CPU without AMX does not list the level (its tests are skipped).
  const bool has_amx = std::find(levels.begin(), levels.end(), Isa::kAmx) != levels.end();
  CHECK(has_amx == (detected.amx && detected.avx512_core() && detected.avx512vnni));
  if (has_amx) CHECK(kernels::DetectedIsa() == Isa::kAmx);
  CHECK(kernels::HighestIsa(kernels::IsaFeatures(Isa::kAvx512Vnni)) == Isa::kAvx512Vnni);
  CHECK(kernels::HighestIsa(kernels::IsaFeatures(Isa::kAmx)) == Isa::kAmx);
  CHECK(kernels::FeaturesForIsa(Isa::kReference) == kernels::CpuFeatures());
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kReference)) == nullptr);
  // The reference configuration has no fast kernel in any family.
  const kernels::KernelConfig& reference = kernels::ReferenceKernelConfig();
  CHECK(reference.Describe().find("=avx") == std::string::npos);
  CHECK(reference.Describe().find("=neon") == std::string::npos);
  CHECK(reference.Describe().find("=generic") == std::string::npos);
  CHECK((!reference.gemm_f32 && !reference.gemm_s8 && reference.igemm_s8.empty() &&
         !reference.dwconv_s8 && !reference.quant_s8 && !reference.pool_2d &&
         !reference.fast_loops));
  // With the reference configuration, prepare leaves no state: the reference kernel runs.
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
  ctx.kernels = &reference;
  std::shared_ptr<void> state;
  REQUIRE(def->prepare(ctx, &state).ok());
  CHECK(state == nullptr);
  MESSAGE("detected ISA: " << std::string(kernels::IsaName(kernels::DetectedIsa())) << " ("
                           << detected.ToString()
                           << "); default kernels: " << kernels::DefaultKernelConfig().Describe());
}

// The variant a configuration names for `family`.
std::string Variant(const kernels::KernelConfig& kc, const std::string& family) {
  for (const auto& fv : kc.variants)
    if (family == fv.first) return fv.second;
  return "missing";
}

// Selection only (no kernel runs), so CPUs this machine lacks can be named.
TEST_CASE("kernels: each family picks its variant from the features it needs") {
  kernels::CpuFeatures f;
  CHECK(kernels::MakeKernelConfig(f).Describe() == kernels::ReferenceKernelConfig().Describe());
#if defined(__x86_64__)
  f.avx2 = f.fma = true;
  kernels::KernelConfig kc = kernels::MakeKernelConfig(f);
  for (const char* family :
       {"gemm_f32", "dwconv_f32", "gemm_s8", "igemm_s8", "dwconv_s8", "dwconv_nhwc_s8",
        "pool_nhwc_s8", "pool_2d", "resize_2d", "quant_s8", "rowops_f32"})
    CHECK(Variant(kc, family) == "avx2");
  CHECK(Variant(kc, "portable_loops") == "on");
  CHECK(Variant(kc, "conv_nhwc_f32") == "avx2");
  // AVX-512F without VNNI (Knights Landing; AVX-512 with VNNI fused off): the
  // float kernels use it, the int8 ones stay on AVX2.
  f.avx512f = true;
  kc = kernels::MakeKernelConfig(f);
  for (const char* family : {"gemm_f32", "dwconv_f32", "pool_2d", "resize_2d", "conv_nhwc_f32"})
    CHECK(Variant(kc, family) == "avx512f");
  for (const char* family : {"gemm_s8", "igemm_s8", "dwconv_s8", "quant_s8"})
    CHECK(Variant(kc, family) == "avx2");
  CHECK(kc.gemm_f32->nr !=
        kernels::MakeKernelConfig(kernels::IsaFeatures(Isa::kAvx2)).gemm_f32->nr);
  // Skylake-SP: F/BW/DQ/VL, no VNNI: the quantization kernels use 512 bits.
  f.avx512bw = f.avx512dq = f.avx512vl = true;
  kc = kernels::MakeKernelConfig(f);
  CHECK(Variant(kc, "quant_s8") == "avx512core");
  CHECK(Variant(kc, "gemm_s8") == "avx2");
  f.avx512vbmi = true;
  CHECK(Variant(kernels::MakeKernelConfig(f), "quant_s8") == "avx512vbmi");
  // Cascade Lake / Ice Lake: AVX-512 VNNI for every int8 family.
  f.avx512vnni = true;
  kc = kernels::MakeKernelConfig(f);
  for (const char* family : {"gemm_s8", "igemm_s8", "dwconv_s8", "dwconv_nhwc_s8", "pool_nhwc_s8"})
    CHECK(Variant(kc, family) == "avx512vnni");
  // Sapphire Rapids has both VNNI encodings: the 512-bit kernels win.
  f.avxvnni = true;
  CHECK(Variant(kernels::MakeKernelConfig(f), "gemm_s8") == "avx512vnni");
  // bf16 mode takes its kernels only where they beat fp32. Intel without AMX
  // (Cooper Lake; Sapphire/Emerald Rapids with AMX off or hidden by a VM):
  // vdpbf16ps at half the FMA rate, so the session stays fp32.
  f.avx512bf16 = true;
  kc = kernels::MakeKernelConfig(f);
  kernels::EnableBf16(&kc);
  CHECK(kc.conv_nhwc_bf16 == nullptr);
  CHECK(kc.gemm_bf16 == nullptr);
  CHECK(Variant(kc, "conv_nhwc_bf16") == "missing");
  // AMD Zen 4/5: vdpbf16ps at the FMA's pace.
  f.avx512bf16_fast = true;
  kc = kernels::MakeKernelConfig(f);
  kernels::EnableBf16(&kc);
  CHECK(kc.conv_nhwc_bf16 == kernels::ConvNhwcBf16For(f));
  CHECK(kc.gemm_bf16 == kernels::GemmBf16For(f));
  // Intel with AMX-BF16: the tile kernels.
  f.avx512bf16_fast = false;
  f.amx = f.amx_bf16 = true;
  kc = kernels::MakeKernelConfig(f);
  kernels::EnableBf16(&kc);
  CHECK(kc.conv_nhwc_bf16 == kernels::ConvNhwcBf16For(f));
  CHECK(kc.gemm_bf16 == kernels::GemmBf16For(f));
  // Alder Lake: AVX-VNNI without AVX-512.
  kernels::CpuFeatures adl;
  adl.avx2 = adl.fma = adl.avxvnni = true;
  kc = kernels::MakeKernelConfig(adl);
  CHECK(Variant(kc, "gemm_s8") == "avxvnni");
  CHECK(Variant(kc, "igemm_s8") == "avxvnni");
  CHECK(Variant(kc, "dwconv_s8") == "avx2");  // int16 products: nothing from vpdpbusd
  CHECK(Variant(kc, "gemm_f32") == "avx2");
  // Arm features mean nothing to an x86 build.
  kernels::CpuFeatures arm;
  arm.asimd = arm.dotprod = true;
  CHECK(kernels::MakeKernelConfig(arm).gemm_s8 == nullptr);
#elif defined(__aarch64__)
  f.asimd = true;  // Cortex-A53/A72: Armv8.0
  kernels::KernelConfig kc = kernels::MakeKernelConfig(f);
  for (const char* family : {"gemm_f32", "dwconv_f32", "conv_nhwc_f32", "gemm_s8", "igemm_s8",
                             "dwconv_s8", "dwconv_nhwc_s8", "pool_nhwc_s8", "quant_s8"})
    CHECK(Variant(kc, family) == "neon");
  CHECK(Variant(kc, "pool_2d") == "generic");
  f.i8mm = true;  // i8mm is only used on top of dotprod
  CHECK(Variant(kernels::MakeKernelConfig(f), "gemm_s8") == "neon");
  f.i8mm = false;
  f.fp16 = f.dotprod = true;  // Cortex-A55/A76, Neoverse N1
  kc = kernels::MakeKernelConfig(f);
  CHECK(Variant(kc, "gemm_s8") == "neondot");
  CHECK(Variant(kc, "igemm_s8") == "neondot");
  CHECK(Variant(kc, "gemm_f32") == "neon");
  CHECK(Variant(kc, "conv_nhwc_f32") == "neon");
  f.i8mm = true;
  kc = kernels::MakeKernelConfig(f);
  CHECK(Variant(kc, "gemm_s8") == "neoni8mm");
  CHECK(Variant(kc, "igemm_s8") == "neoni8mm");
#endif
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
  // One row against many panels of 32 columns (a batch-1 fully connected
  // layer's groups of 4 panels, then 2, then 1), also split between threads.
  for (int64_t n : {129, 200, 300, 1000}) {
    MatMulCase c{RandomDType(rng), RandomDType(rng), RandomDType(rng), {1, 96}, 96, n, false,
                 rng() % 2 == 0,   rng() % 2 == 0,   rng() % 5 == 0};
    runs += RunMatMulCase(c, rng);
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

// Attention's Q.K^T and P.V: b is an activation, so there is no prepared
// state and each batch's b is packed during the run.
TEST_CASE("kernels: QLinearMatMul of two activations (batched b) matches the reference") {
  std::mt19937 rng(23);
  const std::string type = "QLinearMatMul", name = "t";
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  int runs = 0;
  for (int i = 0; i < 30; ++i) {
    const int64_t m = 1 + rng() % 20, k = 1 + rng() % 70, n = 1 + rng() % 40;
    const bool b_2d = i % 5 == 4;
    // The last case has an empty batch dim: nothing to compute, nothing to break.
    const Shape batch = i == 29 ? Shape{0} : i % 2 ? Shape{2, 3} : Shape{1 + int64_t(rng() % 4)};
    const bool per_column = i % 3 == 0;
    Shape a_shape = batch, b_shape = b_2d ? Shape{} : batch;
    a_shape.insert(a_shape.end(), {m, k});
    b_shape.insert(b_shape.end(), {k, n});
    const DType at = RandomDType(rng), bt = RandomDType(rng), yt = RandomDType(rng);
    const float as = Uniform(rng, 0.001f, 1.f), bs = Uniform(rng, 0.001f, 0.1f);
    std::vector<float> b_scales(per_column ? size_t(n) : 1, bs);
    std::vector<int32_t> b_zps;
    for (size_t j = 0; j < b_scales.size(); ++j) {
      b_scales[j] *= Uniform(rng, 0.5f, 2.f);
      b_zps.push_back(RandomZp(bt, rng));
    }
    const Shape pshape = per_column ? Shape{n} : Shape{};
    std::vector<TensorPtr> in = {Bytes(at, a_shape, rng),
                                 F32({}, {as}),
                                 Zp(at, {}, {RandomZp(at, rng)}),
                                 Bytes(bt, b_shape, rng),
                                 F32(pshape, b_scales),
                                 Zp(bt, pshape, b_zps),
                                 F32({}, {RandomYScale(rng, as, bs, k)}),
                                 Zp(yt, {}, {RandomZp(yt, rng)})};
    AttrMap attrs;
    KernelContext ctx;
    ctx.op_type = &type;
    ctx.op_name = &name;
    ctx.attrs = &attrs;
    for (auto& t : in) ctx.inputs.push_back(&t->t);
    OwnedTensor out;
    ctx.outputs = {&out.t};
    CAPTURE(i);
    REQUIRE(def->infer(ctx).ok());
    out.storage.assign(out.t.bytes() + 64, 0xAB);
    out.t.data = out.storage.data();
    ctx.kernels = &IsaConfig(Isa::kReference);
    REQUIRE(def->run(ctx).ok());
    const std::vector<uint8_t> want = out.storage;
    for (Isa isa : kernels::SupportedIsas()) {
      if (!IsaConfig(isa).gemm_s8) continue;
      CAPTURE(std::string(kernels::IsaName(isa)));
      ctx.kernels = &IsaConfig(isa);
      for (int threads : {1, 2}) {
        ctx.pool = test::TestPool(threads);
        std::fill(out.storage.begin(), out.storage.begin() + int64_t(out.t.bytes()), 0xCD);
        REQUIRE(def->run(ctx).ok());
        CHECK(out.storage == want);
        ++runs;
      }
    }
  }
  MESSAGE(runs << " fast runs compared");
}

// ---- MatMulInteger / ConvInteger (dynamic quantization): the packed GEMM
// with its int32 epilogue (GemmS8Args::y32), against the reference sums.

TEST_CASE("kernels: MatMulInteger with constant and activation B matches the reference") {
  std::mt19937 rng(24);
  int runs = 0;
  for (int i = 0; i < 60; ++i) {
    const int64_t m = 1 + rng() % 20, k = 1 + rng() % 90, n = 1 + rng() % 40;
    const bool prepared = i % 3 != 2, per_column = i % 4 == 1, with_zps = i % 5 != 4;
    const DType at = RandomDType(rng), bt = RandomDType(rng);
    Shape a_shape = i % 2 ? Shape{1 + int64_t(rng() % 3), m, k} : Shape{m, k};
    Shape b_shape = {k, n};
    if (!prepared && i % 2) b_shape.insert(b_shape.begin(), a_shape[0]);  // batched activations
    std::vector<int32_t> b_zps;
    for (int64_t j = 0; j < (per_column ? n : 1); ++j) b_zps.push_back(RandomZp(bt, rng));
    std::vector<TensorPtr> in = {Bytes(at, a_shape, rng), Bytes(bt, b_shape, rng)};
    if (with_zps) {
      in.push_back(Zp(at, {}, {RandomZp(at, rng)}));
      in.push_back(Zp(bt, per_column ? Shape{n} : Shape{}, b_zps));
    }
    std::ostringstream o;
    o << "a " << dtype_name(at) << ShapeToString(a_shape) << " b " << dtype_name(bt)
      << ShapeToString(b_shape) << (prepared ? " constant" : " activation")
      << (per_column ? " per-column zp" : "") << (with_zps ? "" : " no zps");
    runs += CompareWithReference("MatMulInteger", in, AttrMap(), o.str(), prepared);
  }
  // Large enough for two threads.
  std::vector<TensorPtr> big = {Bytes(DType::kUInt8, {200, 512}, rng),
                                Bytes(DType::kInt8, {512, 130}, rng), Zp(DType::kUInt8, {}, {255}),
                                Zp(DType::kInt8, {}, {-128})};
  runs += CompareWithReference("MatMulInteger", big, AttrMap(), "large");
  CHECK(runs > 0);
  MESSAGE(runs << " fast runs compared");
}

// MatMulIntegerToFloat / DynamicQuantizeMatMul: the int32 GEMM with the
// float epilogue (QMatMulCall::dq_mult) against the reference, bit for bit.
TEST_CASE("kernels: MatMulIntegerToFloat and DynamicQuantizeMatMul match the reference") {
  std::mt19937 rng(26);
  std::normal_distribution<float> normal(0.f, 2.f);
  auto floats = [&](Shape s, float offset) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng) + offset;
    return F32(std::move(s), v);
  };
  int runs = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t m = 1 + rng() % 20, k = 1 + rng() % 90, n = 1 + rng() % 40;
    const bool per_column = i % 2, bias = i % 3 != 0;
    const DType at = RandomDType(rng), bt = RandomDType(rng);
    const Shape a_shape = i % 4 == 1 ? Shape{2, m, k} : Shape{m, k};
    std::vector<int32_t> b_zps;
    std::vector<float> b_scales;
    for (int64_t j = 0; j < (per_column ? n : 1); ++j) {
      b_zps.push_back(RandomZp(bt, rng));
      b_scales.push_back(0.001f + float(rng() % 1000) * 1e-4f);
    }
    const Shape pshape = per_column ? Shape{n} : Shape{};
    TensorPtr b = Bytes(bt, {k, n}, rng);
    TensorPtr bias_t = bias ? floats({n}, 0.f) : nullptr;
    std::ostringstream o;
    o << "a " << dtype_name(at) << ShapeToString(a_shape) << " b " << dtype_name(bt) << " n " << n
      << (per_column ? " per-column" : "") << (bias ? " bias" : "");
    std::vector<TensorPtr> in = {Bytes(at, a_shape, rng),
                                 b,
                                 F32({}, {0.0173f}),
                                 F32(pshape, b_scales),
                                 Zp(at, {}, {RandomZp(at, rng)}),
                                 Zp(bt, pshape, b_zps),
                                 bias_t};
    if (!bias) in.pop_back();
    runs += CompareWithReference("MatMulIntegerToFloat", in, AttrMap(), o.str());
    // The same weights behind a float A that the op quantizes itself (offset:
    // zero points away from the middle).
    std::vector<TensorPtr> dyn = {floats(a_shape, float(int(rng() % 5) - 2)), b,
                                  F32(pshape, b_scales), Zp(bt, pshape, b_zps), bias_t};
    if (!bias) dyn.pop_back();
    runs += CompareWithReference("DynamicQuantizeMatMul", dyn, AttrMap(), o.str() + " dynamic");
  }
  // Large enough for two threads.
  std::vector<TensorPtr> big = {floats({200, 512}, 0.5f), Bytes(DType::kInt8, {512, 130}, rng),
                                F32({130}, std::vector<float>(130, 0.01f)),
                                Zp(DType::kInt8, {130}, std::vector<int32_t>(130, 3)),
                                floats({130}, 0.f)};
  runs += CompareWithReference("DynamicQuantizeMatMul", big, AttrMap(), "large");
  CHECK(runs > 0);
  MESSAGE(runs << " fast runs compared");
}

// The reference of MatMulIntegerToFloat against the chain it replaces, computed
// here: DynamicQuantizeLinear, integer sums, Cast, Mul by float(a_scale *
// b_scale), Add bias, each rounded to float32.
TEST_CASE(
    "quant: DynamicQuantizeMatMul equals DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> "
    "Add") {
  std::mt19937 rng(27);
  std::normal_distribution<float> normal(0.3f, 1.5f);
  const int64_t m = 7, k = 33, n = 9;
  std::vector<float> a(static_cast<size_t>(m * k)), bias(static_cast<size_t>(n)),
      b_scale(static_cast<size_t>(n));
  for (float& x : a) x = normal(rng);
  for (float& x : bias) x = normal(rng);
  for (float& x : b_scale) x = 0.002f + float(rng() % 100) * 1e-4f;
  std::vector<int8_t> b(static_cast<size_t>(k * n));
  for (int8_t& x : b) x = int8_t(rng());
  std::vector<int8_t> b_zp(static_cast<size_t>(n));
  for (int8_t& x : b_zp) x = int8_t(int(rng() % 11) - 5);
  auto aq = RunOp("DynamicQuantizeLinear", {F32({m, k}, a)}, AttrMap(), 3);
  REQUIRE(aq.status.ok());
  const std::vector<uint8_t> q = aq.values<uint8_t>(0);
  const float a_scale = aq.values<float>(1)[0];
  const int32_t a_zp = aq.values<uint8_t>(2)[0];
  for (const kernels::KernelConfig* kc :
       {&IsaConfig(Isa::kReference), &kernels::DefaultKernelConfig()}) {
    auto r = RunOp("DynamicQuantizeMatMul",
                   {F32({m, k}, a), Make<int8_t>(DType::kInt8, {k, n}, b), F32({n}, b_scale),
                    Make<int8_t>(DType::kInt8, {n}, b_zp), F32({n}, bias)},
                   AttrMap(), 1, 1, kc);
    REQUIRE(r.status.ok());
    const std::vector<float> y = r.values<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int32_t acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (int32_t(q[size_t(i * k + p)]) - a_zp) * (b[size_t(p * n + j)] - b_zp[size_t(j)]);
        const float mult = a_scale * b_scale[size_t(j)];
        volatile float scaled = float(acc) * mult;  // rounded before the Add, as the graph does
        const float want = scaled + bias[size_t(j)];
        CHECK(y[size_t(i * n + j)] == want);
      }
  }
}

TEST_CASE("kernels: ConvInteger matches the reference") {
  std::mt19937 rng(25);
  int runs = 0;
  for (int i = 0; i < 40; ++i) {
    const bool one_d = i % 5 == 3;
    const int64_t group = i % 6 == 5 ? 2 : 1;
    const int64_t c = group * (1 + rng() % 9), m = group * (1 + rng() % 12);
    const int64_t kh = one_d ? 1 : 1 + rng() % 3, kw = 1 + rng() % 3;
    const int64_t h = one_d ? 1 : kh + rng() % 12, w = kw + rng() % 14;
    const DType xt = RandomDType(rng), wt = RandomDType(rng);
    AttrMap attrs;
    const int64_t s = 1 + rng() % 2, pad = rng() % 2;
    if (one_d) {
      attrs.SetInts("strides", {s});
      attrs.SetInts("pads", {pad, pad});
    } else {
      attrs.SetInts("strides", {s, 1});
      attrs.SetInts("pads", {pad, 0, pad, 1});
    }
    if (group > 1) attrs.SetInt("group", group);
    const Shape xs = one_d ? Shape{1, c, w} : Shape{1 + int64_t(rng() % 2), c, h, w};
    const Shape ws = one_d ? Shape{m, c / group, kw} : Shape{m, c / group, kh, kw};
    std::vector<int32_t> w_zps;
    const bool per_channel = i % 3 == 0;
    for (int64_t j = 0; j < (per_channel ? m : 1); ++j) w_zps.push_back(RandomZp(wt, rng));
    std::vector<TensorPtr> in = {Bytes(xt, xs, rng), Bytes(wt, ws, rng),
                                 Zp(xt, {}, {RandomZp(xt, rng)}),
                                 Zp(wt, per_channel ? Shape{m} : Shape{}, w_zps)};
    std::ostringstream o;
    o << "x " << dtype_name(xt) << ShapeToString(xs) << " w " << dtype_name(wt) << ShapeToString(ws)
      << " group " << group << (per_channel ? " per-channel zp" : "");
    runs += CompareWithReference("ConvInteger", in, attrs, o.str());
  }
  // Depthwise (the depthwise kernels' int32 stores): every kernel kind
  // (stride 1, stride 2, general strides/dilations), widths past the vectors.
  struct Dw {
    int64_t c, h, w, k, s, d;
  };
  for (const Dw& dw : {Dw{5, 9, 37, 3, 1, 1}, Dw{3, 7, 40, 3, 2, 1}, Dw{4, 11, 70, 5, 1, 1},
                       Dw{2, 12, 33, 3, 3, 1}, Dw{3, 13, 35, 3, 1, 2}, Dw{6, 8, 17, 7, 2, 1}}) {
    for (const DType xt : {DType::kUInt8, DType::kInt8}) {
      const DType wt = RandomDType(rng);
      AttrMap attrs;
      attrs.SetInt("group", dw.c);
      attrs.SetInts("strides", {dw.s, dw.s});
      attrs.SetInts("dilations", {dw.d, dw.d});
      const int64_t pad = dw.k / 2;
      attrs.SetInts("pads", {pad, pad, pad, pad});
      std::vector<int32_t> w_zps;
      for (int64_t j = 0; j < dw.c; ++j) w_zps.push_back(RandomZp(wt, rng));
      std::vector<TensorPtr> in = {Bytes(xt, {1, dw.c, dw.h, dw.w}, rng),
                                   Bytes(wt, {dw.c, 1, dw.k, dw.k}, rng),
                                   Zp(xt, {}, {RandomZp(xt, rng)}), Zp(wt, {dw.c}, w_zps)};
      runs += CompareWithReference("ConvInteger", in, attrs,
                                   "depthwise " + std::to_string(dw.k) + "x" +
                                       std::to_string(dw.k) + " s" + std::to_string(dw.s) + " d" +
                                       std::to_string(dw.d) + " w" + std::to_string(dw.w));
    }
  }
  std::vector<TensorPtr> big = {Bytes(DType::kUInt8, {1, 64, 40, 40}, rng),
                                Bytes(DType::kInt8, {96, 64, 3, 3}, rng),
                                Zp(DType::kUInt8, {}, {7}), Zp(DType::kInt8, {}, {0})};
  AttrMap pads;
  pads.SetInts("pads", {1, 1, 1, 1});
  runs += CompareWithReference("ConvInteger", big, pads, "large");
  MESSAGE(runs << " fast runs compared");
}

// ---- Arm levels (kernels/gemm_s8_neon*.cc: Armv8.0 4x4 tiles in 16-k blocks with
// 4-, 8- and 12-byte tails; dotprod and i8mm 8x12 tiles, i8mm in 8-k blocks) ----
// scripts/test_aarch64.sh runs these under qemu-aarch64 on several CPU models.
// The shapes also run at the x86 levels (other tile sizes, more coverage).

// Level names the script expects; unset in ordinary runs.
std::string ExpectedIsa(const char* var) {
  const char* v = std::getenv(var);
  return v ? v : "";
}

TEST_CASE("kernels: Arm ISA levels, detection and QFOLD_ISA") {
  // The default configuration: the detected features lowered by QFOLD_ISA.
  const kernels::KernelConfig& by_default = kernels::DefaultKernelConfig();
  const std::string active = kernels::IsaName(kernels::HighestIsa(by_default.features));
  const std::string want_detected = ExpectedIsa("QFOLD_TEST_DETECTED_ISA");
  const std::string want_active = ExpectedIsa("QFOLD_TEST_ACTIVE_ISA");
  const std::string detected = kernels::IsaName(kernels::DetectedIsa());
  if (!want_detected.empty()) CHECK(detected == want_detected);
  if (!want_active.empty()) CHECK(active == want_active);
  // QFOLD_TEST_KERNELS: "family=variant ..." pairs the default configuration
  // must hold (the kernels a CPU model selects).
  const std::string described = " " + by_default.Describe() + " ";
  std::istringstream want_kernels(ExpectedIsa("QFOLD_TEST_KERNELS"));
  for (std::string pair; want_kernels >> pair;) {
    CAPTURE(pair);
    CAPTURE(described);
    CHECK(described.find(" " + pair + " ") != std::string::npos);
  }
  std::vector<std::string> names;
  for (Isa isa : kernels::SupportedIsas()) {
    names.push_back(kernels::IsaName(isa));
    if (isa == Isa::kReference) continue;
    // Every level above the reference has GEMM kernels, so the cases compare them all.
    const kernels::GemmS8Kernels* k = IsaConfig(isa).gemm_s8;
    REQUIRE(k != nullptr);
    // AMX has only the channels-last microkernels; its packed GEMM is avx512vnni's.
    CHECK(std::string(k->name) == kernels::IsaName(isa == Isa::kAmx ? Isa::kAvx512Vnni : isa));
    CHECK(kernels::HighestIsa(kernels::FeaturesForIsa(isa)) == isa);
  }
#if defined(__aarch64__)
  const Isa d = kernels::DetectedIsa();
  CHECK((d == Isa::kReference || d == Isa::kNeon || d == Isa::kNeonDot || d == Isa::kNeonI8mm));
  // x86 sets leave the detected features; neon < neondot < neoni8mm.
  auto level = [](Isa isa) { return kernels::HighestIsa(kernels::FeaturesForIsa(isa)); };
  CHECK(level(Isa::kAvx2) == d);
  if (d == Isa::kNeonI8mm) CHECK(level(Isa::kNeonDot) == Isa::kNeonDot);
  if (d == Isa::kNeonDot) CHECK(level(Isa::kNeonI8mm) == Isa::kNeonDot);
  if (d == Isa::kNeon) CHECK(level(Isa::kNeonDot) == Isa::kNeon);
  if (d != Isa::kReference) CHECK(level(Isa::kNeon) == Isa::kNeon);
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeon))->mr == 4);
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeonDot))->mr == 8);
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeonI8mm))->nr == 12);
  // The float, depthwise and quantize kernels need only Armv8.0 NEON.
  CHECK(kernels::GemmF32For(kernels::IsaFeatures(Isa::kNeon)) != nullptr);
  CHECK(kernels::DwConvS8For(kernels::IsaFeatures(Isa::kNeon)) != nullptr);
  CHECK(kernels::QuantS8For(kernels::IsaFeatures(Isa::kNeon)) != nullptr);
#else
  CHECK(kernels::FeaturesForIsa(Isa::kNeonI8mm) == kernels::DetectedCpuFeatures());
  CHECK(kernels::FeaturesForIsa(Isa::kNeon) == kernels::DetectedCpuFeatures());
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeon)) == nullptr);
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeonDot)) == nullptr);
  CHECK(kernels::GemmS8For(kernels::IsaFeatures(Isa::kNeonI8mm)) == nullptr);
#endif
  std::string list;
  for (const auto& n : names) list += " " + n;
  MESSAGE("detected " << detected << " (" << kernels::DetectedCpuFeatures().ToString()
                      << "), active " << active << ", compared:" << list
                      << "; default kernels: " << by_default.Describe());
}

TEST_CASE("kernels: QLinearMatMul at the Arm tile and k-block edges") {
  std::mt19937 rng(41);
  int runs = 0;
  // K = 4 * odd and 4 * even (the i8mm tail), partial groups of 4 and 8, 16-k pack
  // chunks, several 16-k blocks with each tail (the Armv8.0 kernel's software pipeline).
  for (int64_t m : {1, 7, 8, 9, 16, 17}) {
    for (int64_t k : {1, 2, 4, 5, 7, 8, 9, 12, 13, 16, 17, 20, 24, 33, 44, 48, 65}) {
      for (int64_t n : {11, 12, 13, 24, 25, 37}) {
        MatMulCase c{RandomDType(rng), RandomDType(rng), RandomDType(rng), {m, k}, k, n, false,
                     rng() % 2 == 0,   rng() % 2 == 0,   rng() % 5 == 0};
        runs += RunMatMulCase(c, rng);
      }
    }
  }
  // One row against many panels of 32 columns (a batch-1 fully connected
  // layer's groups of 4 panels, then 2, then 1), also split between threads.
  for (int64_t n : {129, 200, 300, 1000}) {
    MatMulCase c{RandomDType(rng), RandomDType(rng), RandomDType(rng), {1, 96}, 96, n, false,
                 rng() % 2 == 0,   rng() % 2 == 0,   rng() % 5 == 0};
    runs += RunMatMulCase(c, rng);
  }
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: QLinearConv at the Arm tile and k-block edges") {
  std::mt19937 rng(42);
  int runs = 0;
  // Weights left: output channels are the 8-row tiles, positions the 12-column panels.
  for (int64_t m : {1, 7, 8, 9, 12, 16, 17, 25}) {
    for (int64_t p : {1, 11, 12, 13, 23, 24, 25, 36}) {
      ConvCase k{};
      k.xt = RandomDType(rng);
      k.wt = RandomDType(rng);
      k.yt = RandomDType(rng);
      k.n = 1;
      k.c = 1 + rng() % 18;
      k.m = m;
      k.group = 1;
      k.h = 1;
      k.w = p;
      k.kh = k.kw = k.sh = k.sw = k.dh = k.dw = 1;
      k.per_channel = rng() % 2;
      k.bias = rng() % 4 != 0;
      k.clamp = rng() % 5 == 0;
      runs += RunConvCase(k, rng);
    }
  }
  // 3x3 over 2 rows: K = 9 * C around multiples of 8, positions around 12.
  for (int64_t c : {1, 2, 3, 7, 8, 9}) {
    ConvCase k{};
    k.xt = RandomDType(rng);
    k.wt = RandomDType(rng);
    k.yt = RandomDType(rng);
    k.n = 2;
    k.c = c;
    k.m = 5 + 2 * c;
    k.group = 1;
    k.h = 2;
    k.w = 12 + c % 3;
    k.kh = k.kw = 3;
    k.sh = k.sw = k.dh = k.dw = 1;
    k.pt = k.pl = k.pb = k.pr = 1;
    k.per_channel = true;
    k.bias = true;
    runs += RunConvCase(k, rng);
  }
  MESSAGE(runs << " fast runs compared");
}

// round(v) + zp saturated to [lo, hi], NaN to the zero point: Requantize
// (ops/quant_util.h) written out again so the check below is independent.
int32_t ScalarRequant(float v, int32_t zp, int32_t lo, int32_t hi) {
  if (std::isnan(v)) return std::min(std::max(zp, lo), hi);
  const double r = std::nearbyint(double(v)) + zp;
  return r <= lo ? lo : r >= hi ? hi : int32_t(r);
}

TEST_CASE("kernels: GEMM kernels match a scalar computation at every level") {
  // pack_left/pack_right/gemm/requant_row straight through the GemmS8Kernels
  // interface: strides, xor masks, both operand orders, column-panel splits,
  // wrapping bias and zero-point terms, infinite and zero multipliers.
  std::mt19937 rng(43);
  int checked = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::GemmS8Kernels* k = IsaConfig(isa).gemm_s8;
    if (!k) continue;
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    for (int it = 0; it < 300; ++it) {
      // A third of the cases have 1-3 rows (the few-row GEMV path), half of
      // those with K past 512, where its 16-bit partial sums are flushed.
      const bool few_rows = it % 3 == 0;
      // Some of them with many column panels (a fully connected layer: the
      // one-row path runs 8 and 2 panels at once).
      const int64_t rows = few_rows ? 1 + (it / 3) % 3 : 1 + rng() % 30;
      const int64_t cols = few_rows && (it / 9) % 2 == 1 ? 200 + rng() % 400 : 1 + rng() % 40;
      const int64_t kd = few_rows && it % 2 == 0 ? 500 + rng() % 700 : 1 + rng() % 45;
      const bool wl = rng() % 2;
      const int64_t lds_l = kd + rng() % 3, lds_r = cols + rng() % 3, ldy = cols + rng() % 3;
      std::vector<uint8_t> l(size_t(rows * lds_l)), r(size_t(kd * lds_r));
      for (auto& b : l) b = uint8_t(rng());
      for (auto& b : r) b = uint8_t(rng());
      if (it % 7 == 0) std::fill(l.begin(), l.end(), wl ? 0x80 : 0xff);  // largest products
      if (it % 11 == 0) std::fill(r.begin(), r.end(), wl ? 0xff : 0x80);
      const uint8_t lmask = rng() % 2 ? 0x80 : 0, rmask = rng() % 2 ? 0x80 : 0;
      if (few_rows && it % 4 == 0 && !wl) {  // activations 255, weights -128 or 127 after the
        // masks: the largest 16-bit partial sums of the AVX2 few-row path.
        std::fill(l.begin(), l.end(), uint8_t(0xff ^ lmask));
        std::fill(r.begin(), r.end(), uint8_t((it % 8 ? 0x7f : 0x80) ^ rmask));
      }
      std::vector<uint8_t> pl(size_t(kernels::PackedBytes(rows, kd, k->mr)));
      std::vector<uint8_t> pr(size_t(kernels::PackedBytes(cols, kd, k->nr)));
      k->pack_left(l.data(), lds_l, rows, kd, lmask, pl.data());
      k->pack_right(r.data(), lds_r, kd, cols, rmask, pr.data());
      // Per-column arrays padded like qlinear_s8.cc's (x86 kernels read whole panels).
      const int64_t nch = wl ? rows : cols, npos = wl ? cols : rows;
      std::vector<int32_t> bias(size_t(nch + 64)), wzp(size_t(nch + 64)), xsum(size_t(npos + 64));
      std::vector<float> mult(size_t(nch + 64));
      for (int64_t i = 0; i < nch; ++i) {
        bias[size_t(i)] = rng() % 5 ? int32_t(rng() % 200001) - 100000 : int32_t(rng());
        wzp[size_t(i)] = int32_t(rng() % 256) - 128;
        const int s = int(rng() % 12);
        mult[size_t(i)] = s == 0 ? INFINITY : s == 1 ? 0.f : s == 2 ? 1e3f : Uniform(rng, 0, 1e-3f);
      }
      for (int64_t i = 0; i < npos; ++i) xsum[size_t(i)] = int32_t(rng());
      const bool use_wzp = rng() % 2;
      const int32_t yzp = int32_t(rng() % 256) - (rng() % 2 ? 128 : 0);
      int32_t lo = yzp >= 0 ? 0 : -128, hi = lo + 255;
      if (rng() % 3 == 0) lo = std::max(lo, yzp - 10), hi = std::min(hi, yzp + 20);
      std::vector<uint8_t> y(size_t(rows * ldy + 16), 0xEE), want = y;
      kernels::GemmS8Args a;
      a.left = pl.data();
      a.right = pr.data();
      a.rows = rows;
      a.cols = cols;
      a.k4 = (kd + 3) / 4;
      a.weights_left = wl;
      a.bias = bias.data();
      a.mult = mult.data();
      a.wzp = use_wzp ? wzp.data() : nullptr;
      a.xsum = xsum.data();
      a.yzp = yzp;
      a.lo = lo;
      a.hi = hi;
      a.y = y.data();
      a.ldy = ldy;
      const int64_t panels = (cols + k->nr - 1) / k->nr;
      if (panels > 1 && rng() % 2) {  // two "threads"
        kernels::GemmS8Args b = a;
        b.panel_end = panels / 2;
        k->gemm(b);
        b.panel_begin = panels / 2;
        b.panel_end = panels;
        k->gemm(b);
      } else {
        k->gemm(a);
      }
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          uint32_t acc = 0;  // int32 with wraparound
          for (int64_t t = 0; t < kd; ++t) {
            const uint8_t lb = l[size_t(i * lds_l + t)] ^ lmask,
                          rb = r[size_t(t * lds_r + j)] ^ rmask;
            acc += wl ? uint32_t(int32_t(int8_t(lb)) * rb) : uint32_t(lb * int32_t(int8_t(rb)));
          }
          const int64_t ch = wl ? i : j, pos = wl ? j : i;
          acc += uint32_t(bias[size_t(ch)]);
          if (use_wzp) acc -= uint32_t(wzp[size_t(ch)]) * uint32_t(xsum[size_t(pos)]);
          want[size_t(i * ldy + j)] =
              uint8_t(ScalarRequant(float(int32_t(acc)) * mult[size_t(ch)], yzp, lo, hi));
        }
      }
      INFO("rows " << rows << " cols " << cols << " k " << kd << " weights left " << wl);
      REQUIRE(y == want);
      ++checked;
    }
    for (int it = 0; it < 100; ++it) {
      const int64_t n = rng() % 50;
      std::vector<int32_t> acc(static_cast<size_t>(n));
      for (auto& v : acc) v = int32_t(rng()) >> (rng() % 31);
      const float m = it % 10 == 0 ? INFINITY : Uniform(rng, 0, 0.1f);
      const int32_t bias = int32_t(rng() % 2001) - 1000, yzp = int32_t(rng() % 256) - 128;
      std::vector<uint8_t> y(size_t(n + 8), 0xEE), want = y;
      k->requant_row(acc.data(), n, bias, m, yzp, -128, 127, y.data());
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = int32_t(uint32_t(acc[size_t(i)]) + uint32_t(bias));
        want[size_t(i)] = uint8_t(ScalarRequant(float(v) * m, yzp, -128, 127));
      }
      INFO("requant_row n " << n);
      REQUIRE(y == want);
      ++checked;
    }
  }
  MESSAGE(checked << " direct checks");
}

// ---- depthwise kernels (kernels/dwconv_s8.h) ---------------------------------

// A depthwise QLinearConv (group = C = M) with the given zero points; 1-D when kh == 0.
int RunDepthwiseCase(DType xt, DType wt, DType yt, int64_t n, int64_t c, int64_t h, int64_t w,
                     int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                     const std::vector<int64_t>& pads, int32_t xzp, const std::vector<int32_t>& wzp,
                     bool clamp, std::mt19937& rng) {
  const bool one_d = kh == 0;
  AttrMap attrs;
  attrs.SetInt("group", c);
  Shape xs = {n, c, h, w}, ws = {c, 1, kh, kw};
  if (one_d) {
    xs = Shape{n, c, w};
    ws = Shape{c, 1, kw};
    attrs.SetInts("strides", {sw});
    attrs.SetInts("dilations", {dw});
    attrs.SetInts("pads", {pads[1], pads[3]});
  } else {
    attrs.SetInts("strides", {sh, sw});
    attrs.SetInts("dilations", {dh, dw});
    attrs.SetInts("pads", pads);
  }
  const int32_t yzp = RandomZp(yt, rng);
  if (clamp) {
    const int32_t lo = yt == DType::kInt8 ? -128 : 0, qmin = std::max(lo, yzp - 20);
    attrs.SetInt("_qmin", qmin);
    attrs.SetInt("_qmax", std::min(lo + 255, qmin + 50));
  }
  const bool per_channel = wzp.size() > 1;
  const float x_scale = Uniform(rng, 0.001f, 1.f);
  std::vector<float> w_scale;
  for (size_t i = 0; i < wzp.size(); ++i) w_scale.push_back(Uniform(rng, 0.001f, 0.1f));
  const Shape pshape = per_channel ? Shape{c} : Shape{};
  std::vector<int32_t> bias(static_cast<size_t>(c));
  for (auto& b : bias) b = rng() % 8 ? int32_t(rng() % 200001) - 100000 : int32_t(rng());
  const float y_scale = RandomYScale(rng, x_scale, w_scale[0], std::max<int64_t>(kh, 1) * kw);
  std::vector<TensorPtr> in = {
      Bytes(xt, xs, rng), F32({}, {x_scale}),   Zp(xt, {}, {xzp}),
      Bytes(wt, ws, rng), F32(pshape, w_scale), Zp(wt, pshape, wzp),
      F32({}, {y_scale}), Zp(yt, {}, {yzp}),    Make<int32_t>(DType::kInt32, {c}, bias),
  };
  if (rng() % 4 == 0) in.pop_back();  // no bias
  std::ostringstream o;
  o << "depthwise x " << dtype_name(xt) << " zp " << xzp << " w " << dtype_name(wt)
    << (per_channel ? " per-channel" : " zp " + std::to_string(wzp[0])) << " y " << dtype_name(yt)
    << " N" << n << " C" << c << " HxW " << h << "x" << w << " k " << kh << "x" << kw << " s " << sh
    << "," << sw << " d " << dh << "," << dw << " pads " << pads[0] << "," << pads[1] << ","
    << pads[2] << "," << pads[3] << (clamp ? " _qmin/_qmax" : "");
  return CompareWithReference("QLinearConv", in, attrs, o.str());
}

std::vector<int32_t> RandomWzp(DType wt, int64_t c, bool per_channel, std::mt19937& rng) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < (per_channel ? c : 1); ++i) v.push_back(RandomZp(wt, rng));
  return v;
}

TEST_CASE("kernels: depthwise kernel sizes, strides, dilations and pads match the reference") {
  std::mt19937 rng(31);
  const int64_t kernels[][2] = {{3, 3}, {5, 5}, {7, 7}, {1, 3}, {1, 5}, {3, 1},
                                {2, 2}, {1, 1}, {4, 6}, {0, 3}, {0, 5}, {0, 9}};
  int runs = 0;
  for (const auto& kk : kernels) {
    for (int64_t s : {1, 2, 3}) {
      for (int rep = 0; rep < 3; ++rep) {
        const int64_t kh = kk[0], kw = kk[1];
        const int64_t sh = kh ? (rep == 2 ? 1 + rng() % 3 : s) : 1, sw = s;
        const int64_t dh = kh && rep == 1 ? 2 : 1, dw = rep == 1 ? 1 + rng() % 3 : 1;
        std::vector<int64_t> pads(4);
        for (auto& p : pads) p = rng() % 4;
        if (!kh) pads[0] = pads[2] = 0;
        const int64_t eh = kh ? (kh - 1) * dh + 1 : 1, ew = (kw - 1) * dw + 1;
        const int64_t h = kh ? std::max<int64_t>(eh, 1 + rng() % 20) : 1;
        const int64_t w = std::max<int64_t>(ew, 1 + rng() % 70);
        const DType xt = RandomDType(rng), wt = RandomDType(rng);
        const int64_t c = 1 + rng() % 9;
        runs += RunDepthwiseCase(xt, wt, RandomDType(rng), 1 + rng() % 2, c, h, w, kh ? kh : 0, kw,
                                 sh, sw, dh, dw, pads, RandomZp(xt, rng),
                                 RandomWzp(wt, c, rng() % 2, rng), rng() % 6 == 0, rng);
      }
    }
  }
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: depthwise output widths 1..70 at the vector edges match the reference") {
  std::mt19937 rng(32);
  int runs = 0;
  for (int64_t ow = 1; ow <= 70; ++ow) {
    const int64_t k = ow % 3 ? 3 : 5, s = 1 + ow % 2;
    const int64_t pad = k / 2, w = (ow - 1) * s + k - 2 * pad;
    if (w < 1) continue;
    const DType xt = RandomDType(rng), wt = RandomDType(rng);
    runs += RunDepthwiseCase(xt, wt, RandomDType(rng), 1, 3, 4 + ow % 5, w, k, k, s, s, 1, 1,
                             {pad, pad, pad, pad}, RandomZp(xt, rng), RandomWzp(wt, 3, ow % 2, rng),
                             false, rng);
  }
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: depthwise extreme zero points for every dtype pair match the reference") {
  std::mt19937 rng(33);
  int runs = 0;
  for (DType xt : {DType::kInt8, DType::kUInt8}) {
    for (DType wt : {DType::kInt8, DType::kUInt8}) {
      const bool xs = xt == DType::kInt8, ws = wt == DType::kInt8;
      for (int32_t xzp : {xs ? -128 : 0, xs ? 127 : 255, xs ? 0 : 128}) {
        for (int32_t wzp : {ws ? -128 : 0, ws ? 127 : 255}) {
          for (DType yt : {DType::kInt8, DType::kUInt8}) {
            runs += RunDepthwiseCase(xt, wt, yt, 2, 5, 9, 37, 3, 3, 1 + rng() % 2, 1 + rng() % 2, 1,
                                     1, {1, 0, 2, 1}, xzp, {wzp}, rng() % 3 == 0, rng);
          }
        }
      }
    }
  }
  MESSAGE(runs << " fast runs compared");
}

TEST_CASE("kernels: depthwise large enough to split between threads matches the reference") {
  // CompareWithReference runs 1 and 2 threads; these exceed the single-thread size.
  std::mt19937 rng(34);
  CHECK(RunDepthwiseCase(DType::kUInt8, DType::kInt8, DType::kUInt8, 2, 24, 30, 33, 3, 3, 1, 1, 1,
                         1, {1, 1, 1, 1}, 3, RandomWzp(DType::kInt8, 24, true, rng), false,
                         rng) > 0);
  CHECK(RunDepthwiseCase(DType::kInt8, DType::kUInt8, DType::kInt8, 3, 7, 41, 29, 5, 5, 2, 2, 1, 1,
                         {2, 2, 1, 2}, -5, {131}, false, rng) > 0);
}

// ---- AVX-VNNI GEMM (kernels/gemm_s8_avxvnni.h) ----------------------------------

#if defined(__x86_64__)
// The packed GEMM of `k` on row-major left (rows x kd) and right (kd x cols) bytes.
std::vector<uint8_t> GemmBytes(const kernels::GemmS8Kernels& k, const std::vector<uint8_t>& l,
                               const std::vector<uint8_t>& r, int64_t rows, int64_t cols,
                               int64_t kd, bool weights_left, const kernels::GemmS8Args& params) {
  std::vector<uint8_t> pl(size_t(kernels::PackedBytes(rows, kd, k.mr)));
  std::vector<uint8_t> pr(size_t(kernels::PackedBytes(cols, kd, k.nr)));
  k.pack_left(l.data(), kd, rows, kd, 0, pl.data());
  k.pack_right(r.data(), cols, kd, cols, 0, pr.data());
  std::vector<uint8_t> y(size_t(rows * cols), 0xCD);
  kernels::GemmS8Args a = params;
  a.left = pl.data();
  a.right = pr.data();
  a.rows = rows;
  a.cols = cols;
  a.k4 = (kd + 3) / 4;
  a.weights_left = weights_left;
  a.y = y.data();
  a.ldy = cols;
  k.gemm(a);
  return y;
}

TEST_CASE("kernels: AVX-VNNI GEMM matches the AVX2 GEMM and a scalar computation") {
  if (!kernels::DetectedCpuFeatures().avxvnni || kernels::DetectedIsa() == Isa::kReference) {
    MESSAGE("no AVX-VNNI on this CPU");
    return;
  }
  const kernels::GemmS8Kernels& vnni = *kernels::GemmS8AvxVnni();
  const kernels::GemmS8Kernels& avx2 = *kernels::GemmS8For(kernels::IsaFeatures(Isa::kAvx2));
  std::mt19937 rng(41);
  int compared = 0;
  for (int i = 0; i < 120; ++i) {
    const int64_t rows = 1 + rng() % 20, cols = 1 + rng() % 50, kd = 1 + rng() % 70;
    const bool wl = rng() % 2, with_wzp = rng() % 2;
    const int64_t nch = wl ? rows : cols, npos = wl ? cols : rows;
    std::vector<uint8_t> l(size_t(rows * kd)), r(size_t(kd * cols));
    for (auto& b : l) b = uint8_t(rng());
    for (auto& b : r) b = uint8_t(rng());
    if (i % 10 == 0) std::fill(l.begin(), l.end(), wl ? 0x80 : 0xff);  // extremes
    if (i % 10 == 1) std::fill(r.begin(), r.end(), wl ? 0xff : 0x80);
    const int64_t padded = (std::max(nch, npos) + 63) / 64 * 64;
    std::vector<int32_t> bias(static_cast<size_t>(padded)), wzp(bias), xsum(bias);
    std::vector<float> mult(static_cast<size_t>(padded));
    for (int64_t c = 0; c < nch; ++c) {
      bias[size_t(c)] = int32_t(rng() % 200001) - 100000;
      wzp[size_t(c)] = int32_t(rng() % 256) - 128;
      mult[size_t(c)] = rng() % 10 ? Uniform(rng, 1e-5f, 1e-2f) : (rng() % 2 ? 0.f : 1e30f);
    }
    for (int64_t p = 0; p < npos; ++p) xsum[size_t(p)] = int32_t(rng() % 20000);
    kernels::GemmS8Args params;
    params.bias = bias.data();
    params.mult = mult.data();
    params.wzp = with_wzp ? wzp.data() : nullptr;
    params.xsum = xsum.data();
    params.yzp = RandomZp(rng() % 2 ? DType::kInt8 : DType::kUInt8, rng);
    const bool y_signed = params.yzp < 0 || rng() % 2;
    params.lo = y_signed ? -128 : 0;
    params.hi = y_signed ? 127 : 255;
    if (params.yzp > params.hi) params.yzp = params.hi;
    const std::vector<uint8_t> got = GemmBytes(vnni, l, r, rows, cols, kd, wl, params);
    const std::vector<uint8_t> want = GemmBytes(avx2, l, r, rows, cols, kd, wl, params);
    CHECK(got == want);
    // Scalar: signed weights, unsigned activations; wrapping int32 epilogue.
    bool same = true;
    for (int64_t i2 = 0; i2 < rows; ++i2) {
      for (int64_t j = 0; j < cols; ++j) {
        int64_t acc = 0;
        for (int64_t q = 0; q < kd; ++q) {
          const uint8_t a = l[size_t(i2 * kd + q)], b = r[size_t(q * cols + j)];
          acc += wl ? int64_t(int8_t(a)) * b : int64_t(a) * int8_t(b);
        }
        const int64_t ch = wl ? i2 : j, pos = wl ? j : i2;
        acc += bias[size_t(ch)];
        if (with_wzp) acc -= int64_t(wzp[size_t(ch)]) * xsum[size_t(pos)];
        const float f = float(int32_t(uint32_t(uint64_t(acc)))) * mult[size_t(ch)];
        int32_t y;
        if (std::isnan(f)) {
          y = std::min(std::max(params.yzp, params.lo), params.hi);
        } else {
          const double v = std::nearbyint(double(f)) + params.yzp;
          y = int32_t(std::min<double>(std::max<double>(v, params.lo), params.hi));
        }
        same &= got[size_t(i2 * cols + j)] == uint8_t(y);
      }
    }
    CHECK(same);
    // requant_row on the same inputs.
    std::vector<int32_t> acc(static_cast<size_t>(cols));
    for (auto& v : acc) v = int32_t(rng());
    std::vector<uint8_t> y1(static_cast<size_t>(cols)), y2(y1);
    vnni.requant_row(acc.data(), cols, bias[0], mult[0], params.yzp, params.lo, params.hi,
                     y1.data());
    avx2.requant_row(acc.data(), cols, bias[0], mult[0], params.yzp, params.lo, params.hi,
                     y2.data());
    CHECK(y1 == y2);
    ++compared;
  }
  MESSAGE(compared << " shapes compared");
}
#endif

// Throughput of the depthwise and GEMM kernels; run with --no-skip.
TEST_CASE("kernels: int8 depthwise and AVX-VNNI GEMM benchmark" * doctest::skip()) {
  std::mt19937 rng(51);
  const int64_t c = 144, h = 56, w = 56;
  std::vector<TensorPtr> in = {
      Bytes(DType::kUInt8, {1, c, h, w}, rng),
      F32({}, {0.02f}),
      Zp(DType::kUInt8, {}, {128}),
      Bytes(DType::kInt8, {c, 1, 3, 3}, rng),
      F32({}, {0.01f}),
      Zp(DType::kInt8, {}, {0}),
      F32({}, {0.05f}),
      Zp(DType::kUInt8, {}, {120}),
  };
  for (int64_t s : {1, 2}) {
    for (int64_t k : {3, 5}) {
      AttrMap attrs;
      attrs.SetInt("group", c);
      attrs.SetInts("strides", {s, s});
      attrs.SetInts("pads", {k / 2, k / 2, k / 2, k / 2});
      in[3] = Bytes(DType::kInt8, {c, 1, k, k}, rng);
      const OpDef* def = FindOp("QLinearConv");
      std::string type = "QLinearConv", name = "t";
      KernelContext ctx;
      ctx.op_type = &type;
      ctx.op_name = &name;
      ctx.attrs = &attrs;
      for (auto& t : in) ctx.inputs.push_back(&t->t);
      OwnedTensor out;
      ctx.outputs = {&out.t};
      REQUIRE(def->infer(ctx).ok());
      out.storage.assign(out.t.bytes(), 0);
      out.t.data = out.storage.data();
      const double ops = 2.0 * double(out.t.numel()) * double(k * k);
      for (Isa isa : kernels::SupportedIsas()) {
        ctx.kernels = &IsaConfig(isa);
        std::shared_ptr<void> state;
        REQUIRE(def->prepare(ctx, &state).ok());
        ctx.state = state.get();
        for (int threads : {1, 2}) {
          ctx.pool = test::TestPool(threads);
          const int iters = isa == Isa::kReference ? 3 : 50;
          REQUIRE(def->run(ctx).ok());
          const auto t0 = std::chrono::steady_clock::now();
          for (int it = 0; it < iters; ++it) REQUIRE(def->run(ctx).ok());
          const double sec =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
          MESSAGE("depthwise " << k << "x" << k << " s" << s << " " << c << "ch " << h << "x" << w
                               << " " << std::string(kernels::IsaName(isa)) << " threads "
                               << threads << ": " << ops / sec * 1e-9 << " GOPS");
        }
        ctx.state = nullptr;
      }
    }
  }
#if defined(__x86_64__)
  if (kernels::DetectedCpuFeatures().avxvnni) {
    const int64_t rows = 96, cols = 3136, kd = 576;  // a 3x3 convolution's im2col GEMM
    std::vector<uint8_t> l(size_t(rows * kd)), r(size_t(kd * cols));
    for (auto& b : l) b = uint8_t(rng());
    for (auto& b : r) b = uint8_t(rng());
    std::vector<int32_t> zeros(size_t(cols + 64));
    std::vector<float> mult(size_t(cols + 64), 1e-4f);
    kernels::GemmS8Args params;
    params.bias = zeros.data();
    params.mult = mult.data();
    params.lo = 0;
    params.hi = 255;
    const kernels::GemmS8Kernels* ks[] = {
        kernels::GemmS8For(kernels::IsaFeatures(Isa::kAvx2)), kernels::GemmS8AvxVnni(),
        kernels::GemmS8For(kernels::IsaFeatures(Isa::kAvx512Vnni))};
    const char* names[] = {"avx2", "avxvnni", "avx512vnni"};
    for (int i = 0; i < 3; ++i) {
      if (!ks[i] || (i == 2 && kernels::DetectedIsa() != Isa::kAvx512Vnni &&
                     kernels::DetectedIsa() != Isa::kAmx))
        continue;
      const kernels::GemmS8Kernels& k = *ks[i];
      std::vector<uint8_t> pl(size_t(kernels::PackedBytes(rows, kd, k.mr)));
      std::vector<uint8_t> pr(size_t(kernels::PackedBytes(cols, kd, k.nr)));
      k.pack_left(l.data(), kd, rows, kd, 0, pl.data());
      k.pack_right(r.data(), cols, kd, cols, 0, pr.data());
      std::vector<uint8_t> y(size_t(rows * cols));
      kernels::GemmS8Args a = params;
      a.left = pl.data();
      a.right = pr.data();
      a.rows = rows;
      a.cols = cols;
      a.k4 = (kd + 3) / 4;
      a.y = y.data();
      a.ldy = cols;
      k.gemm(a);
      const int iters = 20;
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < iters; ++it) k.gemm(a);
      const double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      MESSAGE("GEMM " << rows << "x" << cols << "x" << kd << " " << std::string(names[i]) << ": "
                      << 2.0 * double(rows * cols * kd) / sec * 1e-9 << " GOPS");
    }
  }
#endif
}

// Throughput of the GEMM convolution path on ResNet-like shapes; run with --no-skip.
TEST_CASE("kernels: int8 GEMM convolution benchmark" * doctest::skip()) {
  std::mt19937 rng(77);
  struct Shape2 {
    int64_t c, m, h, w, k, s;
  };
  for (const Shape2& sh : {Shape2{256, 256, 56, 56, 1, 1}, Shape2{64, 64, 56, 56, 3, 1},
                           Shape2{128, 256, 28, 28, 3, 2}}) {
    std::vector<TensorPtr> in = {
        Bytes(DType::kUInt8, {1, sh.c, sh.h, sh.w}, rng),
        F32({}, {0.02f}),
        Zp(DType::kUInt8, {}, {128}),
        Bytes(DType::kInt8, {sh.m, sh.c, sh.k, sh.k}, rng),
        F32({}, {0.01f}),
        Zp(DType::kInt8, {}, {0}),
        F32({}, {0.05f}),
        Zp(DType::kUInt8, {}, {120}),
    };
    AttrMap attrs;
    attrs.SetInts("strides", {sh.s, sh.s});
    attrs.SetInts("pads", {sh.k / 2, sh.k / 2, sh.k / 2, sh.k / 2});
    const OpDef* def = FindOp("QLinearConv");
    std::string type = "QLinearConv", name = "t";
    KernelContext ctx;
    ctx.op_type = &type;
    ctx.op_name = &name;
    ctx.attrs = &attrs;
    for (auto& t : in) ctx.inputs.push_back(&t->t);
    OwnedTensor out;
    ctx.outputs = {&out.t};
    REQUIRE(def->infer(ctx).ok());
    out.storage.assign(out.t.bytes(), 0);
    out.t.data = out.storage.data();
    const double ops = 2.0 * double(out.t.numel()) * double(sh.c * sh.k * sh.k);
    for (Isa isa : kernels::SupportedIsas()) {
      if (!IsaConfig(isa).gemm_s8) continue;
      ctx.kernels = &IsaConfig(isa);
      std::shared_ptr<void> state;
      REQUIRE(def->prepare(ctx, &state).ok());
      ctx.state = state.get();
      for (int threads : {1, 2}) {
        ctx.pool = test::TestPool(threads);
        REQUIRE(def->run(ctx).ok());
        double best = 1e9;
        // The fastest single run: the machine is shared, so means are noisy.
        for (int rep = 0; rep < 100; ++rep) {
          const int iters = 1;
          const auto t0 = std::chrono::steady_clock::now();
          for (int it = 0; it < iters; ++it) REQUIRE(def->run(ctx).ok());
          best = std::min(
              best,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
        }
        MESSAGE("conv " << sh.k << "x" << sh.k << " s" << sh.s << " " << sh.c << "->" << sh.m << " "
                        << sh.h << "x" << sh.w << " " << std::string(kernels::IsaName(isa))
                        << " threads " << threads << ": " << ops / best * 1e-9 << " GOPS");
      }
      ctx.state = nullptr;
    }
  }
}

// The GEMM convolution packs the activations block by block (~128 KB of
// packed columns per block, per thread): outputs wider than one block, blocks
// ending in a partial panel, K not a multiple of 4 with many taps, strides 1,
// 2 (vector paths) and 3, pads wider than the window, asymmetric weights
// (per-block column sums), 1-D and 1x1 (direct and strided) convolutions.
TEST_CASE("kernels: QLinearConv blocked im2col packing across blocks matches the reference") {
  std::mt19937 rng(17);
  int runs = 0;
  for (int i = 0; i < 24; ++i) {
    ConvCase k{};
    k.xt = RandomDType(rng);
    k.wt = RandomDType(rng);
    k.yt = RandomDType(rng);
    k.n = 1 + rng() % 2;
    k.group = i % 4 == 3 ? 2 : 1;
    k.c = k.group * (39 + int64_t(rng() % 34));  // odd counts give K % 4 != 0
    k.m = k.group * (1 + int64_t(rng() % 12));
    k.kh = k.kw = i % 3 == 0 ? 5 : 3;
    k.sh = 1 + rng() % 3;
    k.sw = 1 + rng() % 3;
    k.dh = 1 + rng() % 2;
    k.dw = 1 + rng() % 2;
    k.pt = rng() % 5;
    k.pl = rng() % 8;  // sometimes wider than the window's reach
    k.pb = rng() % 5;
    k.pr = rng() % 8;
    k.h = 8 + rng() % 23;
    k.w = 8 + rng() % 40;
    k.one_d = i % 8 == 5;
    if (k.one_d) {
      k.h = k.kh = k.sh = k.dh = 1;
      k.pt = k.pb = 0;
      k.w = 300 + rng() % 500;
    }
    k.per_channel = rng() % 2;
    k.bias = rng() % 4 != 0;
    k.clamp = rng() % 6 == 0;
    k.h = std::max(k.h, (k.kh - 1) * k.dh + 1 - k.pt - k.pb);
    k.w = std::max(k.w, (k.kw - 1) * k.dw + 1 - k.pl - k.pr);
    runs += RunConvCase(k, rng);
  }
  // 1x1: in place (direct) with many columns and channels, strided, padded.
  for (int i = 0; i < 9; ++i) {
    ConvCase k{};
    k.xt = RandomDType(rng);
    k.wt = RandomDType(rng);
    k.yt = RandomDType(rng);
    k.n = 1 + rng() % 2;
    k.group = 1;
    k.c = 250 + rng() % 250;
    k.m = 1 + rng() % 20;
    k.kh = k.kw = k.sh = k.sw = k.dh = k.dw = 1;
    k.h = 15 + rng() % 20;
    k.w = 15 + rng() % 30;
    if (i % 3 == 1) k.sh = k.sw = 2;
    if (i % 3 == 2) k.pt = k.pl = k.pb = k.pr = 1 + int64_t(rng() % 3);
    k.per_channel = rng() % 2;
    k.bias = true;
    runs += RunConvCase(k, rng);
  }
  MESSAGE(runs << " fast runs compared");
}

}  // namespace
}  // namespace test
}  // namespace qfold
