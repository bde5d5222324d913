// fp16 mode (SessionOptions::Precision::kFloat16, igemm_fp16.h): the NEON
// FEAT_FP16 convolution and Gemm kernels against
//  1. an emulation of their arithmetic (operands rounded to half, each fused
//     multiply-add rounded to half, the fp16 sum widened into fp32 every 32
//     products in the reduction order, bias, residual and activation in
//     fp32): equal to the last bit, so a wrong packing, tap, tail or chunk
//     boundary fails;
//  2. a double-precision sum of the half-rounded operands, within the bound
//     docs/NUMERICS.md gives;
// on the drivers' shape edges (pixels around the 8-row tile and 32-pixel
// blocks, channels around 8, output channels around the 16-column panel,
// pads, strides, dilation, groups, batches, Gemm rows 1..9 and k across
// chunks); 1 and 2 threads give the same bits. Where the CPU has no FEAT_FP16
// (x86, Cortex-A72) fp16 mode must change nothing.
// QFOLD_TEST_FP16 (scripts/test_aarch64.sh): the variant this CPU must pick.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "doctest/doctest.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/cpu_features.h"
#include "kernels/igemm_fp16.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "op_harness.h"

namespace qfold {
namespace {

// d rounded to half precision, to nearest even (11 significant bits;
// multiples of 2^-24 below 2^-14): an implementation independent of the
// library's HalfFromFloat, exact for the doubles the emulation makes.
double RoundHalf(double d) {
  if (d == 0 || std::isinf(d) || std::isnan(d)) return d;
  int e = 0;
  std::frexp(d, &e);  // |d| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 11, -24));
  return std::nearbyint(d / ulp) * ulp;
}

float Act(float v, int act) {
  if (act == 1) return v > 0.f ? v : 0.f;
  if (act == 2) return v < -0.5f ? -0.5f : (v > 0.75f ? 0.75f : v);
  return v;
}

// One output as the kernel computes it: products[i] for i < n in reduction
// order (zeros included: padding taps and channels past c up to the
// multiple of 8 count toward the chunks too).
struct Emulated {
  float sum32 = 0.f;
  double h = 0;  // the running fp16 sum
  int64_t steps = 0;
  void Add(double a, double w) {
    h = RoundHalf(h + a * w);  // a * w is exact in double; the sum too
    if (++steps % kernels::kFp16Chunk == 0) Flush();
  }
  void Flush() {
    sum32 = sum32 + float(h);
    h = 0;
  }
  float Finish() {
    if (steps % kernels::kFp16Chunk != 0) Flush();
    return sum32;
  }
};

// The documented bound (docs/NUMERICS.md) of the difference from the exact
// sum of the half-rounded operands' products: every fp16 step rounds by at
// most 2^-11 of the chunk's running magnitude (<= mag), every fp32 add by
// 2^-24 of the total.
double Fp16Bound(int64_t terms, double mag) {
  const double chunks = double((terms + kernels::kFp16Chunk - 1) / kernels::kFp16Chunk);
  return (double(kernels::kFp16Chunk) * std::ldexp(1.0, -11) + (chunks + 3) * std::ldexp(1.0, -24)) *
             mag +
         1e-30;
}

struct ConvCase {
  int64_t n, c, m, h, w, k, stride, dil, pad;
  bool bias, residual;
  int act;  // 0 none, 1 relu, 2 clamp
  int64_t group = 1;
};

int64_t RunConvCase(const kernels::ConvNhwcF32Kernels* f32, const kernels::Fp16Kernels* fp16,
                    const ConvCase& k, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t oh = (k.h + 2 * k.pad - (k.k - 1) * k.dil - 1) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad - (k.k - 1) * k.dil - 1) / k.stride + 1;
  const int64_t cg = k.c / k.group, mg = k.m / k.group, kc = (cg + 7) / 8 * 8;
  std::vector<float> x(size_t(k.n * k.h * k.w * k.c)), wv(size_t(k.m * cg * k.k * k.k));
  std::vector<float> bias(size_t(k.m)), res(size_t(k.n * oh * ow * k.m));
  for (float& v : x) v = u(rng);
  for (float& v : wv) v = u(rng);
  for (float& v : bias) v = u(rng);
  for (float& v : res) v = u(rng);
  auto w = test::F32({k.m, cg, k.k, k.k}, wv);
  auto state = kernels::PrepareConvNhwcF32(f32, w->t, k.group, nullptr, fp16);
  REQUIRE(state.get() != nullptr);
  kernels::ConvNhwcF32Call call;
  call.x = x.data();
  call.bias = k.bias ? bias.data() : nullptr;
  call.residual = k.residual ? res.data() : nullptr;
  call.n = k.n, call.c = k.c, call.ih = k.h, call.iw = k.w, call.oh = oh, call.ow = ow;
  call.kh = call.kw = k.k;
  call.sh = call.sw = k.stride;
  call.dh = call.dw = k.dil;
  call.pad_top = call.pad_left = k.pad;
  call.act = k.act == 1   ? kernels::F32Act::kRelu
             : k.act == 2 ? kernels::F32Act::kClamp
                          : kernels::F32Act::kNone;
  call.lo = -0.5f, call.hi = 0.75f;
  REQUIRE(std::string(kernels::ConvNhwcF32Method(state.get(), call)) == "fp16");
  std::vector<float> y1(res.size(), NAN), y2(res.size(), NAN);
  call.y = y1.data();
  REQUIRE(kernels::RunConvNhwcF32(state.get(), call));
  kernels::ThreadPool pool(2);
  call.pool = &pool;
  call.y = y2.data();
  REQUIRE(kernels::RunConvNhwcF32(state.get(), call));
  CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0);
  int64_t bad = 0;
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t oc = 0; oc < k.m; ++oc) {
          Emulated e;
          double sum = 0, mag = 0;
          for (int64_t ky = 0; ky < k.k; ++ky)
            for (int64_t kx = 0; kx < k.k; ++kx) {
              const int64_t iy = oy * k.stride - k.pad + ky * k.dil;
              const int64_t ix = ox * k.stride - k.pad + kx * k.dil;
              const bool inside = iy >= 0 && iy < k.h && ix >= 0 && ix < k.w;
              for (int64_t ch = 0; ch < kc; ++ch) {
                double a = 0, wt = 0;
                if (inside && ch < cg) {
                  a = RoundHalf(x[size_t(((b * k.h + iy) * k.w + ix) * k.c + oc / mg * cg + ch)]);
                  wt = RoundHalf(wv[size_t(((oc * cg + ch) * k.k + ky) * k.k + kx)]);
                }
                e.Add(a, wt);
                sum += a * wt;
                mag += std::fabs(a * wt);
              }
            }
          const size_t at = size_t(((b * oh + oy) * ow + ox) * k.m + oc);
          float want = e.Finish();
          if (k.bias) want += bias[size_t(oc)], sum += bias[size_t(oc)];
          if (k.residual) want += res[at], sum += res[at];
          want = Act(want, k.act);
          const double tol = Fp16Bound(k.k * k.k * kc, mag + std::fabs(double(bias[size_t(oc)])) +
                                                           std::fabs(double(res[at])));
          const double exact = Act(float(sum), k.act);
          if (!(y1[at] == want && std::fabs(double(y1[at]) - exact) <= tol + 1e-6 * std::fabs(exact)) &&
              bad++ < 5)
            FAIL_CHECK("output " << at << ": " << y1[at] << " vs emulated " << want << ", exact "
                                 << exact << " (tol " << tol << ")");
        }
  return int64_t(y1.size());
}

const kernels::Fp16Kernels* DetectedFp16() {
  const kernels::Fp16Kernels* k = kernels::Fp16KernelsFor(kernels::DetectedCpuFeatures());
  if (const char* want = std::getenv("QFOLD_TEST_FP16"))
    CHECK(std::string(k ? k->name : "none") == want);
  return k;
}

TEST_CASE("kernels fp16: NEON fp16 channels-last Conv matches its emulation and the bound") {
  const kernels::CpuFeatures& f = kernels::DetectedCpuFeatures();
  const kernels::Fp16Kernels* fp16 = DetectedFp16();
  const kernels::ConvNhwcF32Kernels* f32 = kernels::ConvNhwcF32For(f);
  CHECK((fp16 != nullptr) == (f.asimd && f.fp16));
  if (!fp16 || !f32) {
    MESSAGE("no FEAT_FP16 arithmetic on this CPU: fp16 kernels not tested");
    return;
  }
  std::mt19937 rng(61);
  int64_t outputs = 0;
  // n, c, m, h, w, k, stride, dil, pad, bias, residual, act
  const ConvCase cases[] = {
      {1, 64, 80, 7, 9, 1, 1, 1, 0, true, false, 0},      // 1x1: 63 pixels, 5 panels
      {2, 32, 32, 8, 8, 1, 1, 1, 0, false, true, 1},      // whole tiles and blocks, batches
      {1, 48, 40, 9, 11, 3, 1, 1, 1, true, false, 2},     // 3x3 same: chunks across taps
      {1, 16, 33, 13, 12, 3, 2, 1, 1, true, true, 1},     // stride 2, 2 panels + 1 column
      {1, 100, 17, 10, 10, 3, 1, 2, 2, false, false, 0},  // dilation 2: kc 104 from 100
      {1, 24, 64, 6, 7, 5, 1, 1, 2, true, false, 1},      // 5x5
      {1, 256, 64, 10, 10, 3, 1, 1, 1, true, true, 1},    // ResNet stage: 72 chunks
      {1, 40, 16, 1, 1, 1, 1, 1, 0, true, false, 0},      // one pixel
      {1, 3, 64, 45, 38, 7, 2, 1, 3, true, false, 1},     // RGB stem: kc 8 from 3
      {2, 1, 24, 9, 10, 3, 1, 1, 1, true, true, 2},       // one channel, batches
      {1, 15, 7, 7, 8, 3, 2, 1, 0, true, false, 1},       // 7 outputs, no pads
      {1, 9, 16, 5, 5, 3, 1, 1, 1, false, false, 0},      // 9 channels: one past a block
      {1, 96, 64, 7, 7, 5, 1, 1, 2, true, false, 1, 2},     // AlexNet conv2-like groups
      {2, 60, 45, 7, 9, 3, 2, 1, 1, true, true, 2, 3},      // 20 -> 15 per group
      {1, 24, 24, 6, 6, 1, 1, 1, 0, false, false, 0, 3},    // ShuffleNet-like 8 -> 8
  };
  for (const ConvCase& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.m);
    CAPTURE(k.k);
    CAPTURE(k.group);
    outputs += RunConvCase(f32, fp16, k, rng);
  }
  MESSAGE(outputs << " fp16 Conv outputs checked");
  // Depthwise stays fp32.
  auto dw = test::F32({8, 1, 3, 3}, std::vector<float>(8 * 9, 0.5f));
  kernels::ConvNhwcF32Call call;
  call.c = 8;
  call.kh = call.kw = 3;
  auto depthwise = kernels::PrepareConvNhwcF32(f32, dw->t, 8, nullptr, fp16);
  CHECK(std::string(kernels::ConvNhwcF32Method(depthwise.get(), call)) == "depthwise");
}

TEST_CASE("kernels fp16: NEON fp16 Gemm matches its emulation and the bound") {
  const kernels::Fp16Kernels* kern = DetectedFp16();
  if (!kern) {
    MESSAGE("no FEAT_FP16 arithmetic on this CPU: fp16 Gemm not tested");
    return;
  }
  std::mt19937 rng(62);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t shapes[][3] = {{1, 1, 1},   {1, 25, 17},  {2, 64, 64},   {3, 7, 65},  {4, 300, 130},
                               {5, 33, 48}, {8, 40, 16},  {9, 31, 33},   {1, 1000, 20},
                               {6, 2050, 7}, {1, 2048, 1000}};
  kernels::ThreadPool pool(2);
  int64_t checked = 0;
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], k = sh[1], n = sh[2];
    for (bool ta : {false, true}) {
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      CAPTURE(ta);
      std::vector<float> a(size_t(m * k)), b(size_t(k * n));
      for (float& v : a) v = u(rng);
      for (float& v : b) v = u(rng);
      kernels::PackedFp16 packed;
      kernels::PackFp16(b.data(), n, 1, k, n, &packed);  // B [k][n]
      std::vector<float> y1(size_t(m * n)), y2(size_t(m * n));
      std::vector<float> at(a.size());  // A stored [k][m]
      for (int64_t i = 0; i < m; ++i)
        for (int64_t q = 0; q < k; ++q) at[size_t(q * m + i)] = a[size_t(i * k + q)];
      const float* ad = ta ? at.data() : a.data();
      kernels::GemmFp16(*kern, ad, ta ? 1 : k, ta ? m : 1, m, packed, y1.data(), nullptr);
      kernels::GemmFp16(*kern, ad, ta ? 1 : k, ta ? m : 1, m, packed, y2.data(), &pool);
      CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0);
      int bad = 0;
      const int64_t kc = (k + 7) / 8 * 8;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          Emulated e;
          double sum = 0, mag = 0;
          for (int64_t q = 0; q < kc; ++q) {
            const double av = q < k ? RoundHalf(a[size_t(i * k + q)]) : 0;
            const double bv = q < k ? RoundHalf(b[size_t(q * n + j)]) : 0;
            e.Add(av, bv);
            sum += av * bv;
            mag += std::fabs(av * bv);
          }
          const float want = e.Finish(), got = y1[size_t(i * n + j)];
          if (!(got == want && std::fabs(double(got) - sum) <= Fp16Bound(kc, mag)) && bad++ < 5)
            FAIL_CHECK("y[" << i << "][" << j << "] " << got << " vs emulated " << want
                            << ", exact " << sum);
          ++checked;
        }
    }
  }
  MESSAGE(checked << " fp16 Gemm outputs checked");
}

TEST_CASE("kernels fp16: rounding to half, to nearest even") {
  CHECK(kernels::HalfFromFloat(1.f) == 0x3c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to the even one, 1.
  CHECK(kernels::HalfFromFloat(1.f + std::ldexp(1.f, -11)) == 0x3c00);
  CHECK(kernels::HalfFromFloat(1.f + 3 * std::ldexp(1.f, -11)) == 0x3c02);
  CHECK(kernels::HalfFromFloat(65504.f) == 0x7bff);
  CHECK(kernels::HalfFromFloat(65519.f) == 0x7bff);
  CHECK(kernels::HalfFromFloat(65520.f) == 0x7c00);  // the tie rounds to infinity
  CHECK(kernels::HalfFromFloat(-1e9f) == 0xfc00);
  CHECK(kernels::HalfFromFloat(std::ldexp(1.f, -24)) == 0x0001);  // smallest subnormal
  CHECK(kernels::HalfFromFloat(std::ldexp(1.f, -25)) == 0x0000);  // tie to even: 0
  CHECK(kernels::HalfFromFloat(std::ldexp(3.f, -26)) == 0x0001);
  CHECK(kernels::HalfFromFloat(std::ldexp(1023.5f, -24)) == 0x0400);  // up into the normals
  CHECK(std::isnan(HalfToFloat(kernels::HalfFromFloat(NAN))));
  // Every half converts back exactly (and round-trips).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaNs
    const float v = HalfToFloat(uint16_t(h));
    if (kernels::HalfFromFloat(v) != h) FAIL_CHECK("half " << h << " does not round-trip");
  }
  // Random floats of every magnitude against the independent rounding.
  std::mt19937 rng(63);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(std::uniform_real_distribution<float>(-2.f, 2.f)(rng),
                               std::uniform_int_distribution<int>(-30, 16)(rng));
    const double want = RoundHalf(v);
    const float got = HalfToFloat(kernels::HalfFromFloat(v));
    if (std::fabs(want) < 65520 && double(got) != want) {
      FAIL_CHECK(v << " -> " << got << ", want " << want);
      break;
    }
  }
#if defined(__aarch64__)
  // The hardware's conversion (fcvt, Armv8.0), which the kernels use per run.
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(std::uniform_real_distribution<float>(-2.f, 2.f)(rng),
                               std::uniform_int_distribution<int>(-30, 17)(rng));
    const __fp16 hw = __fp16(v);
    uint16_t bits;
    std::memcpy(&bits, &hw, 2);
    if (bits != kernels::HalfFromFloat(v)) {
      FAIL_CHECK(v << ": fcvt " << bits << ", HalfFromFloat " << kernels::HalfFromFloat(v));
      break;
    }
  }
#endif
}

// fp16 mode where the CPU has no FEAT_FP16 (every x86 CPU, Cortex-A53/A72,
// or QFOLD_ISA=neon): the configuration is the fp32 one, so every op runs
// exactly as in fp32.
TEST_CASE("kernels fp16: without FEAT_FP16 fp16 mode changes nothing") {
  for (kernels::Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    kernels::KernelConfig cfg = kernels::KernelConfigForIsa(isa);
    const std::string before = cfg.Describe();
    kernels::EnableFp16(&cfg);
    if (cfg.features.fp16 && cfg.features.asimd && cfg.conv_nhwc_f32) {
      CHECK(cfg.conv_nhwc_fp16 != nullptr);
      CHECK(cfg.Describe() == before + " conv_nhwc_fp16=neonfp16 gemm_fp16=neonfp16");
      continue;
    }
    CHECK(cfg.conv_nhwc_fp16 == nullptr);
    CHECK(cfg.gemm_fp16 == nullptr);
    CHECK(cfg.Describe() == before);
  }
}

}  // namespace
}  // namespace qfold
