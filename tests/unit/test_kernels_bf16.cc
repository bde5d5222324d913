// bf16 mode of the channels-last float convolutions (SessionOptions::precision):
// the bf16 kernels against a double-precision convolution of the same
// bf16-rounded activations and weights, within the bound of fp32 summation
// (so a wrong packing, tap or tail fails), on every shape edge the driver has
// (pixel counts around 32, channel tails below a k block of 32, output
// channels around a panel of 32 and 16, pads, strides, dilation, batches),
// with bias, residual and the fused activations; 1 and 2 threads give the
// same bits. Every variant the CPU runs (AMX-BF16 tiles, AVX-512 BF16
// vectors); skipped without AVX-512 BF16.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/activation.h"
#include "doctest/doctest.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_bf16.h"
#include "kernels/kernel_config.h"
#include "kernels/pool_nhwc_s8.h"
#include "kernels/thread_pool.h"
#include "op_harness.h"

namespace qfold {
namespace {

struct Bf16Case {
  int64_t n, c, m, h, w, k, stride, dil, pad;
  bool bias, residual;
  int act;  // 0 none, 1 relu, 2 clamp
  int64_t group = 1;
  int64_t kw = 0;  // the kernel's width when not k
};

float RoundBf16(float v) {
  return kernels::FloatFromBf16(kernels::Bf16FromFloat(v));
}

// Runs one case at 1 and 2 threads; returns the number of outputs checked.
int64_t RunBf16Case(const kernels::ConvNhwcF32Kernels* f32,
                    const kernels::ConvNhwcBf16Kernels* bf16, const Bf16Case& k,
                    std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // The row-tap form (fewer than 16 channels) takes dilation down the height only.
  const int64_t dh = k.dil, dw = k.c < 16 ? 1 : k.dil, kw = k.kw ? k.kw : k.k;
  const int64_t oh = (k.h + 2 * k.pad - (k.k - 1) * dh - 1) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad - (kw - 1) * dw - 1) / k.stride + 1;
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  std::vector<float> x(size_t(k.n * k.h * k.w * k.c)), wv(size_t(k.m * cg * k.k * kw));
  std::vector<float> bias(size_t(k.m)), res(size_t(k.n * oh * ow * k.m));
  for (float& v : x) v = u(rng);
  for (float& v : wv) v = u(rng);
  for (float& v : bias) v = u(rng);
  for (float& v : res) v = u(rng);
  auto w = test::F32({k.m, cg, k.k, kw}, wv);
  auto state = kernels::PrepareConvNhwcF32(f32, w->t, k.group, bf16, nullptr, dw);
  REQUIRE(state.get() != nullptr);
  kernels::ConvNhwcF32Call call;
  call.x = x.data();
  call.bias = k.bias ? bias.data() : nullptr;
  call.residual = k.residual ? res.data() : nullptr;
  call.n = k.n, call.c = k.c, call.ih = k.h, call.iw = k.w, call.oh = oh, call.ow = ow;
  call.kh = k.k;
  call.kw = kw;
  call.sh = call.sw = k.stride;
  call.dh = dh;
  call.dw = dw;
  call.pad_top = call.pad_left = k.pad;
  call.act = k.act == 1   ? kernels::F32Act::kRelu
             : k.act == 2 ? kernels::F32Act::kClamp
                          : kernels::F32Act::kNone;
  call.lo = -0.5f, call.hi = 0.75f;
  // act 3: HardSwish and an affine after the epilogue, on a block's fp32
  // outputs (checked against the fp32-stored run only).
  FusedActivation hswish;
  hswish.kind = FusedActivation::kHardSwish;
  hswish.affine = true;
  hswish.scale = 0.75f;
  hswish.shift = -0.25f;
  if (k.act == 3) call.post = &hswish;
  REQUIRE(std::string(kernels::ConvNhwcF32Method(state.get(), call)) == "bf16");
  std::vector<float> y1(res.size(), NAN), y2(res.size(), NAN);
  call.y = y1.data();
  REQUIRE(kernels::RunConvNhwcF32(state.get(), call));
  kernels::ThreadPool pool(2);
  call.pool = &pool;
  call.y = y2.data();
  REQUIRE(kernels::RunConvNhwcF32(state.get(), call));
  CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0);
  {
    // Activations stored as bf16 (the session's choice between such
    // convolutions): x and the residual read as bf16, y written as bf16
    // (in place where C is a multiple of 32, copied otherwise) give the
    // fp32-stored run's outputs on the same rounded values, rounded once.
    std::vector<uint16_t> x16(x.size()), r16(res.size());
    std::vector<float> res_rounded(res.size());
    for (size_t i = 0; i < x.size(); ++i) x16[i] = kernels::Bf16FromFloat(x[i]);
    for (size_t i = 0; i < res.size(); ++i) {
      r16[i] = kernels::Bf16FromFloat(res[i]);
      res_rounded[i] = kernels::FloatFromBf16(r16[i]);
    }
    kernels::ConvNhwcF32Call c32 = call;
    c32.pool = nullptr;
    c32.residual = k.residual ? res_rounded.data() : nullptr;
    std::vector<float> y3(res.size(), NAN);
    c32.y = y3.data();
    REQUIRE(kernels::RunConvNhwcF32(state.get(), c32));
    kernels::ConvNhwcF32Call c16 = call;
    const kernels::Bf16Io io = kernels::ConvNhwcF32Bf16Io(state.get(), c16);
    CHECK((io.x && io.y && io.residual));
    c16.x = nullptr;
    c16.x_bf16 = x16.data();
    c16.residual = nullptr;
    c16.residual_bf16 = k.residual ? r16.data() : nullptr;
    c16.y = nullptr;
    for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
      std::vector<uint16_t> y16(res.size(), 0xffff);
      c16.pool = p;
      c16.y_bf16 = y16.data();
      REQUIRE(kernels::RunConvNhwcF32(state.get(), c16));
      int64_t differ = 0;
      for (size_t i = 0; i < y16.size(); ++i)
        if (y16[i] != kernels::Bf16FromFloat(y3[i]) && differ++ < 3)
          FAIL_CHECK("bf16-stored output " << i << ": " << kernels::FloatFromBf16(y16[i]) << " vs "
                                           << y3[i]);
    }
  }
  int64_t bad = 0;
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t oc = 0; oc < k.m; ++oc) {
          double sum = 0, mag = 0;
          for (int64_t ky = 0; ky < k.k; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t iy = oy * k.stride - k.pad + ky * dh;
              const int64_t ix = ox * k.stride - k.pad + kx * dw;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              for (int64_t ch = 0; ch < cg; ++ch) {
                const int64_t xc = oc / mg * cg + ch;
                const double p =
                    double(RoundBf16(x[size_t(((b * k.h + iy) * k.w + ix) * k.c + xc)])) *
                    RoundBf16(wv[size_t(((oc * cg + ch) * k.k + ky) * kw + kx)]);
                sum += p;
                mag += std::fabs(p);
              }
            }
          const size_t at = size_t(((b * oh + oy) * ow + ox) * k.m + oc);
          if (k.bias) sum += bias[size_t(oc)], mag += std::fabs(bias[size_t(oc)]);
          if (k.residual) sum += res[at], mag += std::fabs(res[at]);
          if (k.act == 1) sum = sum > 0 ? sum : 0;
          if (k.act == 2) sum = sum < -0.5 ? -0.5 : sum > 0.75 ? 0.75 : sum;
          // fp32 sums of up to k*k*kc + 2 terms: each rounding at most 2^-24
          // of the running magnitude.
          const double terms = double(k.k * kw * ((cg + 31) / 32 * 32) + 2);
          double tol = terms * std::ldexp(1.0, -23) * mag + 1e-30;
          if (k.act == 3) {
            // HardSwish (slope at most 1.5) and the affine (0.75), each step
            // rounded once in fp32.
            const double h = sum * std::max(0.0, std::min(1.0, sum / 6 + 0.5));
            sum = h * 0.75 - 0.25;
            tol = tol * 1.5 * 0.75 + 8 * std::ldexp(1.0, -24) * (std::fabs(h) + 1);
          }
          if (!(std::fabs(double(y1[at]) - sum) <= tol) && bad++ < 5)
            FAIL_CHECK("output " << at << ": " << y1[at] << " vs " << sum << " (tol " << tol
                                 << ")");
        }
  return int64_t(y1.size());
}

// One bf16 variant's cases and method choices.
void CheckBf16ConvVariant(const kernels::ConvNhwcF32Kernels* f32,
                          const kernels::ConvNhwcBf16Kernels* bf16) {
  CAPTURE(bf16->name);
  std::mt19937 rng(51);
  int64_t outputs = 0;
  // n, c, m, h, w, k, stride, dil, pad, bias, residual, act
  const Bf16Case cases[] = {
      {1, 64, 80, 7, 9, 1, 1, 1, 0, true, false, 0},      // 1x1: 63 pixels, 32 + 32 + 16 outputs
      {2, 32, 32, 8, 8, 1, 1, 1, 0, false, true, 1},      // 1x1 whole tiles, batches, residual
      {1, 48, 40, 9, 11, 3, 1, 1, 1, true, false, 2},     // 3x3 same: kc 64 from 48, panel 32 + 8
      {1, 16, 33, 13, 12, 3, 2, 1, 1, true, true, 1},     // stride 2, 16 channels, 32 + 1 outputs
      {1, 100, 17, 10, 10, 3, 1, 2, 2, false, false, 0},  // dilation 2: kc 128 from 100
      {1, 24, 64, 6, 7, 5, 1, 1, 2, true, false, 1},      // 5x5, rows cross the tiles
      {1, 256, 64, 14, 14, 3, 1, 1, 1, true, true, 1},    // ResNet stage: 8 k blocks
      {1, 40, 16, 1, 1, 1, 1, 1, 0, true, false, 0},      // one pixel, one B tile
      // 1x1 on the kernel-row kernel: x gathered (strided, channel tails) or
      // read in place (bf16, whole blocks: a partial last tile copied).
      {1, 64, 48, 13, 11, 1, 2, 1, 0, true, true, 1},  // stride 2: 7x6 pixels gathered
      {2, 32, 40, 5, 7, 1, 1, 1, 0, true, true, 2},    // 35 pixels an image: 3 in the tail
      {1, 20, 33, 9, 9, 1, 3, 1, 0, false, false, 0},  // stride 3, 20 channels
      {1, 32, 32, 6, 6, 1, 1, 1, 1, true, false, 1},   // padded 1x1: tap pointers
      // Fewer than 16 channels: kernel rows of kw * C values in the padded plane.
      {1, 3, 64, 45, 38, 7, 2, 1, 3, true, false, 1},  // RGB stem: 21 of 32 values per row
      {2, 2, 24, 9, 10, 9, 1, 1, 4, true, true, 2},    // two channels 9 wide, batches
      {1, 8, 40, 11, 9, 5, 1, 1, 2, false, false, 0},  // 40 values: a second, partial block
      {1, 15, 33, 7, 8, 3, 2, 1, 0, true, false, 1},   // no pads, odd width
      {1, 6, 16, 9, 9, 3, 1, 2, 2, true, false, 0},    // dilation 2 down the height
      // Kernel rows under 16 values, windows of 16 to 64: im2col rows.
      {1, 3, 64, 45, 38, 3, 2, 1, 0, true, false, 1},   // SqueezeNet's RGB stem: 27 of 32
      {2, 3, 40, 20, 21, 3, 2, 1, 1, true, true, 2},    // pads, batches, residual, 32 + 8
      {1, 1, 16, 32, 40, 5, 1, 1, 2, false, false, 0},  // one channel 5x5: 25 values
      {1, 2, 33, 11, 13, 5, 1, 2, 2, true, false, 1},   // 50 values: 2 blocks, dilated rows
      {1, 3, 16, 17, 18, 3, 1, 1, 1, true, true, 3},    // HardSwish after, y rounded
      // Kernel rows from 16 channels: positions run on across output rows at
      // stride 1 (vw = pw), by rows of 16 positions at stride 2.
      {1, 16, 64, 55, 55, 3, 1, 1, 1, true, false, 1},       // SqueezeNet's expand: 2 blocks a row
      {2, 16, 48, 7, 5, 3, 1, 1, 1, true, true, 2},          // tiny rows: tiles span images
      {1, 64, 64, 16, 16, 3, 1, 1, 1, false, true, 1},       // whole blocks, vw 18
      {1, 40, 24, 17, 19, 3, 2, 1, 1, true, false, 0},       // stride 2: 10 of 16 positions
      {1, 32, 40, 12, 10, 3, 2, 1, 0, true, true, 1},        // stride 2 without pads, 40 outputs
      {1, 24, 32, 9, 12, 7, 1, 1, 3, true, false, 1, 1, 1},  // 7x1: one tap a row
      {1, 24, 32, 9, 12, 1, 1, 1, 0, true, false, 1, 1, 7},  // 1x7 without pads
      {1, 20, 17, 8, 9, 3, 1, 2, 2, true, false, 2},         // dilation 2: taps of 20 channels
      // Groups of at least 16 channels: each group's channels padded to 32 in the copy.
      {1, 96, 256, 13, 13, 5, 1, 1, 2, true, false, 1, 2},  // AlexNet conv2: 48 -> 128 per group
      {2, 60, 45, 7, 9, 3, 2, 1, 1, true, true, 2, 3},      // 20 -> 15 per group, residual
      {1, 64, 64, 6, 6, 1, 1, 1, 0, false, false, 0, 4},    // 1x1, 16 -> 16
      // HardSwish + affine after the epilogue: y rounded after it.
      {1, 48, 40, 9, 11, 1, 1, 1, 0, true, false, 3},     // 1x1, copied x
      {2, 64, 33, 8, 9, 3, 2, 1, 1, true, true, 3},       // 3x3, residual, batches
      {1, 96, 96, 6, 6, 1, 1, 1, 0, false, false, 3, 3},  // groups of 32
  };
  for (const Bf16Case& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.m);
    CAPTURE(k.k);
    // im2col rows (windows of 16 to 64 values, kernel rows under 16) below
    // the variant's im2col_min_m outputs stay fp32 (checked below).
    const int64_t kw = k.kw ? k.kw : k.k, window = k.k * kw * k.c;
    if (k.group == 1 && k.k * kw > 1 && kw * k.c < 16 && window >= 16 && window <= 64 &&
        k.m < bf16->im2col_min_m)
      continue;
    outputs += RunBf16Case(f32, bf16, k, rng);
  }
  MESSAGE(outputs << " bf16 Conv outputs checked");
  // Groups of fewer than 16 channels stay fp32, and so do windows of fewer
  // than 16 values in rows of fewer than 16 (a 3x3 one-channel conv: 9) and
  // few-channel convolutions dilated across the width; a kernel-row packing
  // refuses a dilated call.
  auto w = test::F32({8, 3, 3, 7}, std::vector<float>(8 * 63, 0.5f));
  kernels::ConvNhwcF32Call call;
  call.c = 6;
  call.kh = 3;
  call.kw = 7;
  auto grouped = kernels::PrepareConvNhwcF32(f32, w->t, 2, bf16);
  CHECK(std::string(kernels::ConvNhwcF32Method(grouped.get(), call)) == "igemm");
  auto stem = kernels::PrepareConvNhwcF32(f32, w->t, 1, bf16);
  call.c = 3;
  CHECK(std::string(kernels::ConvNhwcF32Method(stem.get(), call)) == "bf16");
  // 3x3 RGB stems (im2col rows) from the variant's im2col_min_m outputs on.
  auto w3 = test::F32({8, 3, 3, 3}, std::vector<float>(8 * 27, 0.5f));
  auto stem3 = kernels::PrepareConvNhwcF32(f32, w3->t, 1, bf16);
  call.kw = 3;
  CHECK(std::string(kernels::ConvNhwcF32Method(stem3.get(), call)) ==
        (bf16->im2col_min_m <= 8 ? "bf16" : "igemm"));
  auto w64 = test::F32({64, 3, 3, 3}, std::vector<float>(64 * 27, 0.5f));
  auto stem64 = kernels::PrepareConvNhwcF32(f32, w64->t, 1, bf16);
  CHECK(bf16->im2col_min_m <= 64);
  CHECK(std::string(kernels::ConvNhwcF32Method(stem64.get(), call)) == "bf16");
  // 3x3 stride-1 layers of 64 channels or more and 512 output pixels or
  // more run Winograd F(4x4, 3x3) in fp32 instead (128 channels from
  // 128x128 pixels on); unknown sizes, strides (-1) and smaller layers bf16.
  {
    auto wide = test::F32({96, 128, 3, 3}, std::vector<float>(96 * 128 * 9, 0.25f));
    auto narrow = test::F32({96, 64, 3, 3}, std::vector<float>(96 * 64 * 9, 0.25f));
    kernels::ConvNhwcF32Call c3;
    c3.kh = c3.kw = 3;
    auto method = [&](const auto& wt, int64_t pixels) {
      c3.c = wt->t.shape[1];
      auto st = kernels::PrepareConvNhwcF32(f32, wt->t, 1, bf16, nullptr, 1, pixels);
      REQUIRE(st.get() != nullptr);
      return std::string(kernels::ConvNhwcF32Method(st.get(), c3));
    };
    CHECK(method(wide, 28 * 28) == "winograd4x4");
    CHECK(method(wide, 224 * 224) == "winograd4x4");
    CHECK(method(narrow, 56 * 56) == "winograd4x4");
    CHECK(method(narrow, 224 * 224) == "bf16");
    CHECK(method(wide, 14 * 14) == "bf16");
    CHECK(method(wide, 0) == "bf16");
    CHECK(method(wide, -1) == "bf16");
  }
  auto w1 = test::F32({8, 1, 3, 3}, std::vector<float>(8 * 9, 0.5f));
  auto one = kernels::PrepareConvNhwcF32(f32, w1->t, 1, bf16);
  call.c = 1;
  CHECK(std::string(kernels::ConvNhwcF32Method(one.get(), call)) == "igemm");
  call.c = 3;
  call.kw = 7;
  call.dw = 2;
  auto dilated = kernels::PrepareConvNhwcF32(f32, w->t, 1, bf16, nullptr, 2);
  CHECK(std::string(kernels::ConvNhwcF32Method(dilated.get(), call)) == "igemm");
  CHECK(std::string(kernels::ConvNhwcF32Method(stem.get(), call)) == "none");
  std::vector<float> xf(size_t(3 * 4 * 13)), yf(size_t(8 * 2 * 1));
  {
    kernels::ConvNhwcF32Call none = call;
    none.n = 1, none.ih = 4, none.iw = 13, none.oh = 2, none.ow = 1;
    none.x = xf.data();
    none.y = yf.data();
    CHECK(!kernels::RunConvNhwcF32(stem.get(), none));
    CHECK(kernels::ConvNhwcF32Scratch(stem.get(), none) == 0);
  }
  // Only the bf16 method takes bf16 activations; activations that run after
  // the epilogue run on a block's fp32 outputs before y is rounded.
  kernels::Bf16Io io = kernels::ConvNhwcF32Bf16Io(stem.get(), call);
  CHECK((!io.x && !io.y && !io.residual));
  std::vector<uint16_t> x16(size_t(3 * 4 * 4)), y16(size_t(8 * 2 * 2));
  call.n = 1, call.ih = call.iw = 4, call.oh = call.ow = 2;
  call.x_bf16 = x16.data();
  call.y_bf16 = y16.data();
  CHECK(!kernels::RunConvNhwcF32(stem.get(), call));
  call.dw = 1;
  io = kernels::ConvNhwcF32Bf16Io(stem.get(), call);
  CHECK((io.x && io.y && io.residual));
  const FusedActivation post;
  call.post = &post;
  io = kernels::ConvNhwcF32Bf16Io(stem.get(), call);
  CHECK((io.x && io.y && io.residual));
}

TEST_CASE("kernels bf16: channels-last Conv matches bf16-rounded double sums") {
  kernels::CpuFeatures f = kernels::DetectedCpuFeatures();
  const kernels::ConvNhwcF32Kernels* f32 = kernels::ConvNhwcF32For(f);
  CHECK((kernels::ConvNhwcBf16For(f) != nullptr) == (f.avx512bf16 && f.avx512_core()));
  // Every variant the CPU runs: AMX tiles, then the AVX-512 BF16 vectors alone.
  int variants = 0;
  for (const kernels::ConvNhwcBf16Kernels* k = kernels::ConvNhwcBf16For(f); k && f32;
       k = kernels::ConvNhwcBf16For(f)) {
    CheckBf16ConvVariant(f32, k);
    ++variants;
    if (!f.amx) break;
    f.amx = false;
  }
  if (variants == 0) MESSAGE("no AVX-512 BF16 on this CPU: bf16 kernels not tested");
}

// bf16 mode, depthwise: the fp32 kernels, y rounded to bf16 per output row
// when the session stores it so (after the epilogue and any activation run
// after it): the fp32-stored outputs rounded once, bit for bit, at 1 and 2
// threads, through column runs, edge pixels, strides, several images and rows
// of padding; a bf16 x is refused (it stays fp32).
TEST_CASE("kernels bf16: depthwise Conv writes bf16 y as its fp32 outputs rounded") {
  const kernels::CpuFeatures f = kernels::DetectedCpuFeatures();
  const kernels::ConvNhwcBf16Kernels* bf16 = kernels::ConvNhwcBf16For(f);
  const kernels::ConvNhwcF32Kernels* f32 = kernels::ConvNhwcF32For(f);
  if (!bf16 || !f32) {
    MESSAGE("no AVX-512 BF16 on this CPU: bf16 depthwise output not tested");
    return;
  }
  std::mt19937 rng(53);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  struct G {
    int64_t n, c, h, w, k, stride, pad;
    bool post;
  };
  const G cases[] = {{1, 48, 9, 30, 3, 1, 1, false}, {2, 240, 7, 21, 5, 1, 2, true},
                     {1, 17, 8, 13, 3, 2, 1, true},  {1, 96, 6, 40, 7, 1, 3, false},
                     {3, 16, 11, 9, 3, 2, 4, false}, {2, 8, 5, 7, 5, 3, 0, true}};
  kernels::ThreadPool pool(2);
  FusedActivation hswish;
  hswish.kind = FusedActivation::kHardSwish;
  hswish.affine = true;
  hswish.scale = 0.75f;
  hswish.shift = -0.25f;
  int64_t checked = 0;
  for (const G& g : cases) {
    CAPTURE(g.c);
    CAPTURE(g.k);
    CAPTURE(g.stride);
    const int64_t oh = (g.h + 2 * g.pad - g.k) / g.stride + 1;
    const int64_t ow = (g.w + 2 * g.pad - g.k) / g.stride + 1;
    std::vector<float> x(size_t(g.n * g.h * g.w * g.c)), wv(size_t(g.c * g.k * g.k));
    std::vector<float> bias(size_t(g.c));
    for (float& v : x) v = u(rng);
    for (float& v : wv) v = u(rng);
    for (float& v : bias) v = u(rng);
    auto w = test::F32({g.c, 1, g.k, g.k}, wv);
    auto state = kernels::PrepareConvNhwcF32(f32, w->t, g.c, bf16);
    REQUIRE(state.get() != nullptr);
    kernels::ConvNhwcF32Call call;
    call.x = x.data();
    call.bias = bias.data();
    call.n = g.n, call.c = g.c, call.ih = g.h, call.iw = g.w, call.oh = oh, call.ow = ow;
    call.kh = call.kw = g.k;
    call.sh = call.sw = g.stride;
    call.pad_top = call.pad_left = g.pad;
    call.post = g.post ? &hswish : nullptr;
    REQUIRE(std::string(kernels::ConvNhwcF32Method(state.get(), call)) == "depthwise");
    const kernels::Bf16Io io = kernels::ConvNhwcF32Bf16Io(state.get(), call);
    CHECK((!io.x && io.y && !io.residual));
    std::vector<float> y32(size_t(g.n * oh * ow * g.c), NAN);
    call.y = y32.data();
    REQUIRE(kernels::RunConvNhwcF32(state.get(), call));
    for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
      kernels::ConvNhwcF32Call c16 = call;
      std::vector<uint16_t> y16(y32.size(), 0xffff);
      c16.pool = p;
      c16.y = nullptr;
      c16.y_bf16 = y16.data();
      REQUIRE(kernels::RunConvNhwcF32(state.get(), c16));
      int64_t differ = 0;
      for (size_t i = 0; i < y16.size(); ++i)
        if (y16[i] != kernels::Bf16FromFloat(y32[i]) && differ++ < 3)
          FAIL_CHECK("output " << i << ": " << kernels::FloatFromBf16(y16[i]) << " vs " << y32[i]);
      checked += int64_t(y16.size());
    }
    std::vector<uint16_t> x16(x.size(), 0);
    kernels::ConvNhwcF32Call cx = call;
    cx.x = nullptr;
    cx.x_bf16 = x16.data();
    CHECK(!kernels::RunConvNhwcF32(state.get(), cx));
  }
  MESSAGE(checked << " bf16 depthwise outputs checked");
}

// bf16 mode's pools on bfloat16 activations give the float kernels' outputs
// on the widened inputs, rounded to bf16: MaxPoolNhwcBf16 (exact: each
// output is one of the inputs, an empty window's lowest() becoming -inf) and
// AvgPoolNhwcBf16 (the float average, rounded once more), on inputs with
// NaNs and infinities, at every level with channel-last pools, 1 and 2
// threads, channel counts around the 8-, 16- and 32-lane blocks, pads (with
// and without count_include_pad), dilation, ceil windows and windows without
// a tap inside. Runs on every CPU.
TEST_CASE(
    "kernels bf16: channels-last MaxPool and AveragePool of bfloat16 match the float kernels") {
  struct G {
    int64_t h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  };
  const G geoms[] = {
      {12, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // ResNet's stem pool
      {13, 11, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},  // ceil mode: a last window past the input
      {9, 10, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0},   // VGG
      {8, 9, 3, 2, 1, 2, 2, 1, 2, 1, 2, 0},    // dilation, uneven pads
      {5, 5, 2, 2, 3, 3, 1, 1, 2, 2, 2, 2},    // windows without a tap inside
  };
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.f, 0.f};
  kernels::ThreadPool pool(2);
  int64_t checked = 0;
  for (bool avg : {false, true})
    for (const G& g : geoms)
      for (int64_t c : {1, 7, 8, 17, 32, 45, 64, 70}) {
        kernels::PoolNhwcArgs a;
        a.n = 2, a.ih = g.h, a.iw = g.w, a.c = c;
        a.kh = g.kh, a.kw = g.kw, a.sh = g.sh, a.sw = g.sw, a.dh = g.dh, a.dw = g.dw;
        a.pad_top = g.pt, a.pad_left = g.pl, a.pad_bottom = g.pb, a.pad_right = g.pr;
        a.oh = (g.h + g.pt + g.pb - (g.kh - 1) * g.dh - 1) / g.sh + 1;
        a.ow = (g.w + g.pl + g.pr - (g.kw - 1) * g.dw - 1) / g.sw + 1;
        std::vector<uint16_t> x16(size_t(a.n * g.h * g.w * c));
        std::vector<float> x(x16.size());
        for (size_t i = 0; i < x.size(); ++i) {
          x16[i] = kernels::Bf16FromFloat(rng() % 40 == 0 ? specials[rng() % 5] : u(rng));
          x[i] = kernels::FloatFromBf16(x16[i]);
        }
        const size_t out = size_t(a.n * a.oh * a.ow * c);
        for (kernels::Isa isa : kernels::SupportedIsas()) {
          const kernels::KernelConfig& kc = test::IsaConfig(isa);
          if (!kc.pool_nhwc_s8 || (g.dh > 1 && avg)) continue;
          for (kernels::ThreadPool* p : {static_cast<kernels::ThreadPool*>(nullptr), &pool}) {
            CAPTURE(kernels::IsaName(isa));
            CAPTURE(c);
            CAPTURE(g.h);
            CAPTURE(avg);
            a.pool = p;
            a.count_include_pad = avg && c % 2 == 1;
            std::vector<float> want(out, 1.f);
            std::vector<uint16_t> got(out, 0x1234);
            if (avg) {
              REQUIRE(kernels::AvgPoolNhwcF32(kc, a, x.data(), want.data()));
              REQUIRE(kernels::AvgPoolNhwcBf16(kc, a, x16.data(), got.data()));
            } else {
              REQUIRE(kernels::MaxPoolNhwcF32(kc, a, x.data(), want.data()));
              REQUIRE(kernels::MaxPoolNhwcBf16(kc, a, x16.data(), got.data()));
            }
            int64_t bad = 0;
            for (size_t i = 0; i < out; ++i)
              if (got[i] != kernels::Bf16FromFloat(want[i]) && bad++ < 3)
                FAIL_CHECK("output " << i << ": " << kernels::FloatFromBf16(got[i]) << " vs "
                                     << want[i]);
            checked += int64_t(out);
          }
        }
      }
  MESSAGE(checked << " bf16 pool outputs checked");
}

// The bf16 Gemm: rows around its groups of 4 (gemv) and tiles of 16 and 32
// (AMX), columns around its panels of 16 and groups of 2 and 4 panels, k odd
// (padded) and across its chunks of 4096, A transposed; against double sums
// of the rounded operands within the fp32 summation bound; 1 and 2 threads
// give the same bits. Every variant the CPU runs: AMX tiles and the AVX-512
// gemv alone.
TEST_CASE("kernels bf16: bf16 Gemm matches bf16-rounded double sums") {
  std::vector<const kernels::GemmBf16Kernels*> kerns;
  kernels::CpuFeatures f = kernels::DetectedCpuFeatures();
  for (const kernels::GemmBf16Kernels* k = kernels::GemmBf16For(f); k;
       k = kernels::GemmBf16For(f)) {
    kerns.push_back(k);
    if (!f.amx) break;
    f.amx = false;  // the next variant down: AVX-512 BF16 alone
  }
  if (kerns.empty()) {
    MESSAGE("no AVX-512 BF16 on this CPU: bf16 Gemm not tested");
    return;
  }
  std::mt19937 rng(52);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t shapes[][3] = {{1, 1, 1},       {1, 25, 17},  {3, 64, 64},   {4, 7, 65},
                               {5, 300, 130},   {9, 33, 48},  {1, 4097, 20}, {2, 8200, 77},
                               {1, 2048, 1000}, {16, 32, 16}, {17, 33, 31},  {40, 120, 700},
                               {32, 64, 48},    {33, 5, 1},   {64, 4100, 40}};
  kernels::ThreadPool pool(2);
  int64_t checked = 0;
  for (const kernels::GemmBf16Kernels* kern : kerns)
    for (const auto& sh : shapes) {
      CAPTURE(kern->name);
      const int64_t m = sh[0], k = sh[1], n = sh[2];
      for (bool ta : {false, true}) {
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        CAPTURE(ta);
        std::vector<float> a(size_t(m * k)), b(size_t(k * n));
        for (float& v : a) v = u(rng);
        for (float& v : b) v = u(rng);
        kernels::PackedBf16 packed;
        kernels::PackBf16(b.data(), n, 1, k, n, &packed);  // B [k][n]
        std::vector<float> y1(size_t(m * n)), y2(size_t(m * n));
        // A stored [m][k], or [k][m] when transposed.
        std::vector<float> at(a.size());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t q = 0; q < k; ++q) at[size_t(q * m + i)] = a[size_t(i * k + q)];
        const float* ad = ta ? at.data() : a.data();
        kernels::GemmBf16(*kern, ad, ta ? 1 : k, ta ? m : 1, m, packed, y1.data(), nullptr);
        kernels::GemmBf16(*kern, ad, ta ? 1 : k, ta ? m : 1, m, packed, y2.data(), &pool);
        CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0);
        int bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0, mag = 0;
            for (int64_t q = 0; q < k; ++q) {
              const double p =
                  double(RoundBf16(a[size_t(i * k + q)])) * RoundBf16(b[size_t(q * n + j)]);
              sum += p;
              mag += std::fabs(p);
            }
            const double tol = double(k + 1) * std::ldexp(1.0, -23) * mag + 1e-30;
            if (!(std::fabs(double(y1[size_t(i * n + j)]) - sum) <= tol) && bad++ < 5)
              FAIL_CHECK("y[" << i << "][" << j << "] " << y1[size_t(i * n + j)] << " vs " << sum);
            ++checked;
          }
      }
    }
  MESSAGE(checked << " bf16 Gemm outputs checked");
}

TEST_CASE("kernels bf16: rounding to nearest even, NaN kept") {
  CHECK(kernels::Bf16FromFloat(1.f) == 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even one, 1.
  CHECK(kernels::Bf16FromFloat(1.f + std::ldexp(1.f, -8)) == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up, to the even one.
  CHECK(kernels::Bf16FromFloat(1.f + 3 * std::ldexp(1.f, -8)) == 0x3f82);
  CHECK(kernels::Bf16FromFloat(1.f + 3 * std::ldexp(1.f, -9)) == 0x3f81);
  CHECK(std::isnan(kernels::FloatFromBf16(kernels::Bf16FromFloat(NAN))));
  CHECK(kernels::FloatFromBf16(kernels::Bf16FromFloat(-2.5f)) == -2.5f);
}

}  // namespace
}  // namespace qfold
