// Data-movement ops with a channels-last variant (set by the converter's
// layout planning): DepthToSpace, 8-bit and float nearest Resize and the
// global pools on [N, H, W, C] must give the channels-first op's result,
// bit for bit, with the channels moved last, at every ISA level (the
// reference level takes the channels-first wrapper).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/vmath.h"
#include "op_harness.h"
#include "ops/channels_last.h"

namespace qfold {
namespace test {
namespace {

// [N, C, H, W] -> [N, H, W, C].
template <class T>
std::vector<T> ToChannelsLast(const std::vector<T>& v, const Shape& cf) {
  const int64_t n = cf[0], c = cf[1], s = cf[2] * cf[3];
  std::vector<T> out(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < s; ++p)
        out[size_t((b * s + p) * c + ch)] = v[size_t((b * c + ch) * s + p)];
  return out;
}

// Runs `op` on x [N, C, H, W] channels-first and on its channels-last copy;
// the second must be the first with channels moved last. T is uint8_t for
// 8-bit data (dt says which), float for float32.
template <class T = uint8_t>
void CheckBothLayouts(const std::string& op, DType dt, const Shape& cf,
                      std::vector<std::shared_ptr<OwnedTensor>> params, AttrMap attrs,
                      const std::string& what) {
  CAPTURE(what);
  std::mt19937 rng(uint32_t(std::hash<std::string>()(what)));
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<T> x(size_t(cf[0] * cf[1] * cf[2] * cf[3]));
  for (T& v : x) v = dt == DType::kFloat32 ? T(u(rng)) : T(rng());
  std::vector<std::shared_ptr<OwnedTensor>> in = {Make<T>(dt, cf, x)};
  in.insert(in.end(), params.begin(), params.end());
  const OpRun first = RunOp(op, in, attrs);
  REQUIRE(first.status.ok());
  const Shape out_cf = first.shape();
  const std::vector<T> want = ToChannelsLast(first.values<T>(), out_cf);
  in[0] = Make<T>(dt, ChannelsLastShape(cf), ToChannelsLast(x, cf));
  attrs.SetInt("channels_last", 1);
  for (kernels::Isa isa : kernels::SupportedIsas())
    for (int threads : {1, 2}) {
      CAPTURE(kernels::IsaName(isa));
      CAPTURE(threads);
      const OpRun last = RunOp(op, in, attrs, 1, threads, &IsaConfig(isa));
      REQUIRE(last.status.ok());
      CHECK(last.shape() == ChannelsLastShape(out_cf));
      CHECK(last.values<T>() == want);
    }
}

TEST_CASE("channels-last DepthToSpace (DCR row copies, CRD through the wrapper) matches NCHW") {
  for (const char* mode : {"DCR", "CRD"})
    for (int64_t b : {2, 3})
      for (int64_t c : {1, 5, 16}) {
        AttrMap a;
        a.SetInt("blocksize", b);
        a.SetString("mode", mode);
        CheckBothLayouts("DepthToSpace", DType::kUInt8, {2, c * b * b, 3, 4}, {}, a,
                         std::string(mode) + " b=" + std::to_string(b) + " c=" + std::to_string(c));
      }
  // Over 32 KiB (split between threads), float runs of 8 and 16 bytes (the
  // fixed-size copies) and of 12.
  for (int64_t c : {1, 2, 3}) {
    AttrMap a;
    a.SetInt("blocksize", 2);
    CheckBothLayouts<float>("DepthToSpace", DType::kFloat32, {1, c * 4, 41, 67}, {}, a,
                            "large float c=" + std::to_string(c));
  }
}

TEST_CASE("channels-last nearest Resize of 8-bit data matches NCHW") {
  struct Case {
    std::vector<float> scales;
    const char* coord;
    const char* nearest;
  };
  const Case cases[] = {{{1, 1, 2, 2}, "asymmetric", "floor"},
                        {{1, 1, 2, 3}, "half_pixel", "round_prefer_floor"},
                        {{1, 1, 0.5f, 0.75f}, "align_corners", "ceil"},
                        {{1, 1, 1.7f, 0.6f}, "pytorch_half_pixel", "round_prefer_ceil"}};
  for (const Case& k : cases)
    for (DType dt : {DType::kUInt8, DType::kInt8}) {
      AttrMap a;
      a.SetString("mode", "nearest");
      a.SetString("coordinate_transformation_mode", k.coord);
      a.SetString("nearest_mode", k.nearest);
      CheckBothLayouts("Resize", dt, {2, 7, 5, 6}, {nullptr, F32({4}, k.scales)}, a,
                       std::string(k.coord) + " " + k.nearest);
    }
  // Sizes instead of scales, and a resize over the channels (taken by the wrapper).
  AttrMap a;
  CheckBothLayouts("Resize", DType::kUInt8, {1, 3, 4, 4},
                   {nullptr, nullptr, I64({4}, {1, 3, 9, 5})}, a, "sizes");
  CheckBothLayouts("Resize", DType::kUInt8, {1, 3, 4, 4}, {nullptr, F32({4}, {1, 2, 1, 1})}, a,
                   "channels resized");
}

TEST_CASE("channels-last nearest Resize of float data matches NCHW") {
  AttrMap a;
  a.SetString("mode", "nearest");
  CheckBothLayouts<float>("Resize", DType::kFloat32, {1, 24, 10, 10},
                          {nullptr, F32({4}, {1, 1, 2, 2})}, a, "x2 (PP-OCR det neck)");
  CheckBothLayouts<float>("Resize", DType::kFloat32, {2, 24, 37, 21},
                          {nullptr, F32({4}, {1, 1, 2, 2})}, a, "x2 over 32 KiB (threads)");
  a.SetString("coordinate_transformation_mode", "half_pixel");
  CheckBothLayouts<float>("Resize", DType::kFloat32, {2, 5, 7, 3},
                          {nullptr, F32({4}, {1, 1, 1.5f, 2.5f})}, a, "half_pixel");
  CheckBothLayouts<float>("Resize", DType::kFloat32, {1, 3, 4, 4},
                          {nullptr, F32({4}, {1, 2, 1, 1})}, a, "float channels resized");
}

TEST_CASE("channels-last global pools (float; 8-bit max) match NCHW") {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    for (const Shape& s : {Shape{1, 96, 10, 10}, Shape{2, 7, 3, 5}, Shape{1, 1, 1, 1}}) {
      const std::string what = std::string(op) + " " + ShapeToString(s);
      CheckBothLayouts<float>(op, DType::kFloat32, s, {}, AttrMap(), what + " float");
      if (std::string(op) != "GlobalMaxPool") continue;  // the only one taking 8-bit data
      CheckBothLayouts(op, DType::kUInt8, s, {}, AttrMap(), what + " uint8");
      CheckBothLayouts(op, DType::kInt8, s, {}, AttrMap(), what + " int8");
    }
}

TEST_CASE("channels-last LRN matches NCHW at the same level bit for bit") {
  // The reference level computes in double, the others in float: each level
  // against its own channels-first result, 1 and 2 threads (rows vs planes
  // split differently); sizes that clip at both ends, beta 3/4 and not, and
  // one too large for the channels-last kernels (then the reference loops,
  // equal to the reference level's).
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 5.f);
  for (const Shape& s : {Shape{1, 64, 12, 12}, Shape{2, 19, 5, 7}, Shape{1, 3, 4, 4}}) {
    for (int64_t size : {3, 5, 6, 33}) {  // 33: past the channels-last kernels' bound
      AttrMap attrs;
      attrs.SetInt("size", size);
      attrs.SetFloat("alpha", 1e-2f);
      attrs.SetFloat("beta", size == 5 ? 0.75f : 0.6f);
      attrs.SetFloat("bias", 1.5f);
      std::vector<float> x(size_t(s[0] * s[1] * s[2] * s[3]));
      for (float& v : x) v = nd(rng);
      const std::vector<std::shared_ptr<OwnedTensor>> cf = {F32(s, x)};
      const std::vector<std::shared_ptr<OwnedTensor>> cl = {
          F32(ChannelsLastShape(s), ToChannelsLast(x, s))};
      AttrMap last_attrs = attrs;
      last_attrs.SetInt("channels_last", 1);
      for (kernels::Isa isa : kernels::SupportedIsas()) {
        const std::string what =
            ShapeToString(s) + " size " + std::to_string(size) + " " + kernels::IsaName(isa);
        CAPTURE(what);
        // Past the kernels' bound channels-last runs the reference loops.
        const bool loops = size > kernels::kLrnMaxChannelsLastSize;
        const OpRun first =
            RunOp("LRN", cf, attrs, 1, 1, &IsaConfig(loops ? kernels::Isa::kReference : isa));
        REQUIRE(first.status.ok());
        const std::vector<float> want = ToChannelsLast(first.values<float>(), s);
        for (int threads : {1, 2}) {
          const OpRun last = RunOp("LRN", cl, last_attrs, 1, threads, &IsaConfig(isa));
          REQUIRE(last.status.ok());
          CHECK(last.shape() == ChannelsLastShape(s));
          const std::vector<float> got = last.values<float>();
          CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

// BatchNormalization with the activations the converter fuses into it: every
// ISA level's vector kernels and the reference loops, both layouts, 1 and 2
// threads (shapes above the size that splits), the same bits; and values
// within rounding of the formula in double.
TEST_CASE("channels-last float BatchNormalization matches NCHW") {
  struct Act {
    const char* name;
    float min, max;
  };
  const Act acts[] = {{"", 0, 0}, {"Relu", 0, 0}, {"Clip", 0.f, 6.f}, {"LeakyRelu", 0, 0}};
  for (const Shape& s : {Shape{1, 96, 7, 7}, Shape{2, 37, 5, 6}, Shape{1, 130, 3, 2},
                         Shape{1, 1100, 6, 7}, Shape{2, 24, 40, 37}}) {
    const int64_t c = s[1];
    const size_t nc = static_cast<size_t>(c);
    std::vector<float> scale(nc), bias(nc), mean(nc), var(nc);
    for (int64_t i = 0; i < c; ++i) {
      scale[size_t(i)] = 0.5f + 0.01f * float(i % 97);
      bias[size_t(i)] = 0.1f * float(i % 7) - 0.3f;
      mean[size_t(i)] = 0.05f * float(i % 11) - 0.2f;
      var[size_t(i)] = 0.3f + 0.02f * float(i % 13);
    }
    const std::vector<std::shared_ptr<OwnedTensor>> params = {F32({c}, scale), F32({c}, bias),
                                                              F32({c}, mean), F32({c}, var)};
    CheckBothLayouts<float>("BatchNormalization", DType::kFloat32, s, params, AttrMap(),
                            "BatchNormalization " + ShapeToString(s));
    std::mt19937 rng{uint32_t(c)};
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    std::vector<float> x(size_t(s[0] * s[1] * s[2] * s[3]));
    for (float& v : x) v = u(rng);
    for (const Act& a : acts) {
      const std::string what = "BatchNormalization+" + std::string(a.name) + " " + ShapeToString(s);
      CAPTURE(what);
      AttrMap attrs;
      if (*a.name) attrs.SetString("_activation", a.name);
      if (std::string(a.name) == "Clip") {
        attrs.SetFloat("_act_min", a.min);
        attrs.SetFloat("_act_max", a.max);
      }
      std::vector<std::shared_ptr<OwnedTensor>> in = {Make<float>(DType::kFloat32, s, x)};
      in.insert(in.end(), params.begin(), params.end());
      const OpRun ref =
          RunOp("BatchNormalization", in, attrs, 1, 1, &kernels::ReferenceKernelConfig());
      REQUIRE(ref.status.ok());
      const std::vector<float> want_cf = ref.values<float>();
      // The formula in double (one rounding of the fused multiply-add and of
      // x - mean apart; LeakyRelu's alpha 0.01 multiplies after).
      int far = 0;
      const int64_t plane = s[2] * s[3];
      for (size_t e = 0; e < x.size(); ++e) {
        const size_t ch = size_t(int64_t(e) / plane % c);
        double v =
            (double(x[e]) - mean[ch]) * (scale[ch] / std::sqrt(double(var[ch]) + 1e-5)) + bias[ch];
        const std::string n = a.name;
        if (n == "Relu") v = std::max(v, 0.0);
        if (n == "Clip") v = std::min(std::max(v, 0.0), 6.0);
        if (n == "LeakyRelu" && v < 0) v *= 0.01;
        far += !(std::fabs(want_cf[e] - v) <= 1e-5 * (std::fabs(v) + 1));
      }
      CHECK(far == 0);
      const std::vector<float> want_cl = ToChannelsLast(want_cf, s);
      AttrMap cl_attrs = attrs;
      cl_attrs.SetInt("channels_last", 1);
      std::vector<std::shared_ptr<OwnedTensor>> cl_in = in;
      cl_in[0] = Make<float>(DType::kFloat32, ChannelsLastShape(s), ToChannelsLast(x, s));
      for (kernels::Isa isa : kernels::SupportedIsas()) {
        CAPTURE(kernels::IsaName(isa));
        for (int threads : {1, 2}) {
          CAPTURE(threads);
          const OpRun first = RunOp("BatchNormalization", in, attrs, 1, threads, &IsaConfig(isa));
          REQUIRE(first.status.ok());
          CHECK(first.values<float>() == want_cf);
          const OpRun last =
              RunOp("BatchNormalization", cl_in, cl_attrs, 1, threads, &IsaConfig(isa));
          REQUIRE(last.status.ok());
          CHECK(last.values<float>() == want_cl);
        }
      }
    }
  }
}

// Float MaxPool/AveragePool: the channels-last kernels against the
// channels-first reference kernel, bit for bit (NaN, infinities and signed
// zeros in the data), at every ISA level and 1 and 2 threads.
void CheckFloatPool(const std::string& op, const Shape& cf, AttrMap attrs, uint32_t seed) {
  const std::string what = op + " " + ShapeToString(cf) + " seed " + std::to_string(seed);
  CAPTURE(what);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<float> x(size_t(cf[0] * cf[1] * cf[2] * cf[3]));
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -0.f, 0.f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (float& v : x) v = rng() % 50 == 0 ? specials[rng() % 5] : u(rng);
  std::vector<std::shared_ptr<OwnedTensor>> in = {Make<float>(DType::kFloat32, cf, x)};
  const OpRun first = RunOp(op, in, attrs, 1, 1, &IsaConfig(kernels::Isa::kReference));
  REQUIRE(first.status.ok());
  const Shape out_cf = first.shape();
  const std::vector<float> want = ToChannelsLast(first.values<float>(), out_cf);
  in[0] = Make<float>(DType::kFloat32, ChannelsLastShape(cf), ToChannelsLast(x, cf));
  attrs.SetInt("channels_last", 1);
  for (kernels::Isa isa : kernels::SupportedIsas())
    for (int threads : {1, 2}) {
      const std::string isa_name = kernels::IsaName(isa);
      CAPTURE(isa_name);
      CAPTURE(threads);
      const OpRun last = RunOp(op, in, attrs, 1, threads, &IsaConfig(isa));
      REQUIRE(last.status.ok());
      REQUIRE(last.shape() == ChannelsLastShape(out_cf));
      const std::vector<float> got = last.values<float>();
      REQUIRE(got.size() == want.size());
      size_t bad = 0;
      while (bad < got.size() && std::memcmp(&got[bad], &want[bad], sizeof(float)) == 0) ++bad;
      CAPTURE(bad);
      if (bad < got.size()) CHECK(got[bad] == want[bad]);
      REQUIRE(bad == got.size());
    }
}

TEST_CASE("channels-last float MaxPool and AveragePool match the NCHW reference bit for bit") {
  // kernel, stride, dilation, pads (t, l, b, r), ceil_mode, count_include_pad
  struct G {
    int64_t k[2], s[2], d[2], p[4];
    int ceil, include_pad;
  };
  const G geoms[] = {
      {{3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1, 0},  // SqueezeNet
      {{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0},  // ResNet stem
      {{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 1},  // Inception branch pool
      {{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1},  // ShuffleNet
      {{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0}, {{1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
      {{5, 3}, {1, 2}, {1, 1}, {2, 1, 2, 0}, 1, 1}, {{3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 0, 0},
      {{7, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},  // a window as large as the input
      {{2, 2}, {3, 3}, {1, 1}, {2, 2, 2, 2}, 0, 0},  // windows with no tap inside
  };
  uint32_t seed = 1;
  for (const char* op : {"MaxPool", "AveragePool"})
    for (const G& g : geoms)
      for (int64_t c : {1, 3, 8, 13, 16, 37, 64, 83}) {
        if (std::string(op) == "MaxPool" && g.include_pad) continue;
        AttrMap a;
        a.SetInts("kernel_shape", {g.k[0], g.k[1]});
        a.SetInts("strides", {g.s[0], g.s[1]});
        a.SetInts("pads", {g.p[0], g.p[1], g.p[2], g.p[3]});
        a.SetInt("ceil_mode", g.ceil);
        if (std::string(op) == "MaxPool")
          a.SetInts("dilations", {g.d[0], g.d[1]});
        else if (g.d[0] != 1)
          continue;  // AveragePool's dilations are opset 19
        if (g.include_pad) a.SetInt("count_include_pad", 1);
        CheckFloatPool(op, {2, c, 7, 9}, a, seed++);
      }
  // Large enough to be split between threads.
  AttrMap a;
  a.SetInts("kernel_shape", {3, 3});
  a.SetInts("strides", {2, 2});
  a.SetInts("pads", {1, 1, 1, 1});
  CheckFloatPool("MaxPool", {1, 48, 56, 56}, a, 99);
  CheckFloatPool("AveragePool", {1, 48, 56, 56}, a, 100);
}

// x_channels_first (the converter's FuseConvInputTranspose) is Conv's alone:
// elsewhere, or without channels_last, or other than 0/1, the op is refused
// naming it instead of inferring one layout and running kernels on another.
TEST_CASE("channels-last: x_channels_first is refused outside a channels-last Conv") {
  auto x = F32({1, 3, 4, 4}, std::vector<float>(48, 1.f));
  AttrMap pool;
  pool.SetInts("kernel_shape", {2, 2});
  pool.SetInt("channels_last", 1);
  pool.SetInt("x_channels_first", 1);
  OpRun r = RunOp("MaxPool", {x}, pool);
  CHECK(r.status.code() == StatusCode::kInvalidModel);
  CHECK(r.status.message().find("x_channels_first") != std::string::npos);
  auto w = F32({2, 3, 1, 1}, std::vector<float>(6, 0.5f));
  for (int64_t cl : {0, 1}) {
    AttrMap conv;
    conv.SetInt("channels_last", cl);
    conv.SetInt("x_channels_first", cl == 1 ? 2 : 1);
    CHECK(RunOp("Conv", {x, w}, conv).status.code() == StatusCode::kInvalidModel);
  }
  // Valid: NCHW in, NHWC out, the reference's numbers.
  AttrMap conv;
  conv.SetInt("channels_last", 1);
  conv.SetInt("x_channels_first", 1);
  OpRun ok = RunOp("Conv", {x, w}, conv);
  REQUIRE(ok.status.ok());
  CHECK(ok.shape() == Shape{1, 4, 4, 2});
  for (float v : ok.values<float>()) CHECK(v == 1.5f);
}

}  // namespace
}  // namespace test
}  // namespace qfold
