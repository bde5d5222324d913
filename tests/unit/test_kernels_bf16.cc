// bf16 mode of the channels-last float convolutions (SessionOptions::precision):
// the AMX-BF16 kernel against a double-precision convolution of the same
// bf16-rounded activations and weights, within the bound of fp32 summation
// (so a wrong packing, tap or tail fails), on every shape edge the driver has
// (pixel counts around 32, channel tails below a k block of 32, output
// channels around a panel of 32 and 16, pads, strides, dilation, batches),
// with bias, residual and the fused activations; 1 and 2 threads give the
// same bits. Skipped where the CPU has no AMX-BF16.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "op_harness.h"

namespace qfold {
namespace {

struct Bf16Case {
  int64_t n, c, m, h, w, k, stride, dil, pad;
  bool bias, residual;
  int act;  // 0 none, 1 relu, 2 clamp
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
  const int64_t dh = k.dil, dw = k.c < 16 ? 1 : k.dil;
  const int64_t oh = (k.h + 2 * k.pad - (k.k - 1) * dh - 1) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad - (k.k - 1) * dw - 1) / k.stride + 1;
  std::vector<float> x(size_t(k.n * k.h * k.w * k.c)), wv(size_t(k.m * k.c * k.k * k.k));
  std::vector<float> bias(size_t(k.m)), res(size_t(k.n * oh * ow * k.m));
  for (float& v : x) v = u(rng);
  for (float& v : wv) v = u(rng);
  for (float& v : bias) v = u(rng);
  for (float& v : res) v = u(rng);
  auto w = test::F32({k.m, k.c, k.k, k.k}, wv);
  auto state = kernels::PrepareConvNhwcF32(f32, w->t, 1, bf16);
  REQUIRE(state.get() != nullptr);
  kernels::ConvNhwcF32Call call;
  call.x = x.data();
  call.bias = k.bias ? bias.data() : nullptr;
  call.residual = k.residual ? res.data() : nullptr;
  call.n = k.n, call.c = k.c, call.ih = k.h, call.iw = k.w, call.oh = oh, call.ow = ow;
  call.kh = call.kw = k.k;
  call.sh = call.sw = k.stride;
  call.dh = dh;
  call.dw = dw;
  call.pad_top = call.pad_left = k.pad;
  call.act = k.act == 1   ? kernels::F32Act::kRelu
             : k.act == 2 ? kernels::F32Act::kClamp
                          : kernels::F32Act::kNone;
  call.lo = -0.5f, call.hi = 0.75f;
  REQUIRE(std::string(kernels::ConvNhwcF32Method(state.get(), call)) == "bf16");
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
          double sum = 0, mag = 0;
          for (int64_t ky = 0; ky < k.k; ++ky)
            for (int64_t kx = 0; kx < k.k; ++kx) {
              const int64_t iy = oy * k.stride - k.pad + ky * dh;
              const int64_t ix = ox * k.stride - k.pad + kx * dw;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              for (int64_t ch = 0; ch < k.c; ++ch) {
                const double p =
                    double(RoundBf16(x[size_t(((b * k.h + iy) * k.w + ix) * k.c + ch)])) *
                    RoundBf16(wv[size_t(((oc * k.c + ch) * k.k + ky) * k.k + kx)]);
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
          const double terms = double(k.k * k.k * ((k.c + 31) / 32 * 32) + 2);
          const double tol = terms * std::ldexp(1.0, -23) * mag + 1e-30;
          if (!(std::fabs(double(y1[at]) - sum) <= tol) && bad++ < 5)
            FAIL_CHECK("output " << at << ": " << y1[at] << " vs " << sum << " (tol " << tol
                                 << ")");
        }
  return int64_t(y1.size());
}

TEST_CASE("kernels bf16: AMX-BF16 channels-last Conv matches bf16-rounded double sums") {
  const kernels::CpuFeatures& f = kernels::DetectedCpuFeatures();
  const kernels::ConvNhwcBf16Kernels* bf16 = kernels::ConvNhwcBf16For(f);
  const kernels::ConvNhwcF32Kernels* f32 = kernels::ConvNhwcF32For(f);
  CHECK((bf16 != nullptr) == (f.amx_bf16 && f.avx512bf16));
  if (!bf16 || !f32) {
    MESSAGE("no AMX-BF16 on this CPU: bf16 kernels not tested");
    return;
  }
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
      // Fewer than 16 channels: kernel rows of kw * C values in the padded plane.
      {1, 3, 64, 45, 38, 7, 2, 1, 3, true, false, 1},  // RGB stem: 21 of 32 values per row
      {2, 1, 24, 9, 10, 3, 1, 1, 1, true, true, 2},    // one channel, batches
      {1, 8, 40, 11, 9, 5, 1, 1, 2, false, false, 0},  // 40 values: a second, partial block
      {1, 15, 33, 7, 8, 3, 2, 1, 0, true, false, 1},   // no pads, odd width
      {1, 6, 16, 9, 9, 3, 1, 2, 2, true, false, 0},    // dilation 2 down the height
  };
  for (const Bf16Case& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.m);
    CAPTURE(k.k);
    outputs += RunBf16Case(f32, bf16, k, rng);
  }
  MESSAGE(outputs << " bf16 Conv outputs checked");
  // Groups stay fp32, and so does a row-tap form dilated across the width.
  auto w = test::F32({8, 3, 3, 3}, std::vector<float>(8 * 27, 0.5f));
  kernels::ConvNhwcF32Call call;
  call.c = 6;
  call.kh = call.kw = 3;
  auto grouped = kernels::PrepareConvNhwcF32(f32, w->t, 2, bf16);
  CHECK(std::string(kernels::ConvNhwcF32Method(grouped.get(), call)) == "igemm");
  auto stem = kernels::PrepareConvNhwcF32(f32, w->t, 1, bf16);
  call.c = 3;
  CHECK(std::string(kernels::ConvNhwcF32Method(stem.get(), call)) == "bf16");
  call.dw = 2;
  CHECK(std::string(kernels::ConvNhwcF32Method(stem.get(), call)) == "igemm");
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
