// Data-movement ops with a channels-last variant (set by the converter's
// layout planning): DepthToSpace, 8-bit and float nearest Resize and the
// global pools on [N, H, W, C] must give the channels-first op's result,
// bit for bit, with the channels moved last, at every ISA level (the
// reference level takes the channels-first wrapper).
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
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
  for (kernels::Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const OpRun last = RunOp(op, in, attrs, 1, 1, &IsaConfig(isa));
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

TEST_CASE("channels-last float MaxPool matches NCHW (pads, strides, dilations, ceil_mode)") {
  struct Case {
    Shape cf;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil;
  };
  const Case cases[] = {{{1, 16, 32, 100}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0},
                        {{2, 17, 9, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
                        {{1, 64, 8, 25}, {2, 1}, {2, 1}, {0, 0, 0, 0}, {1, 1}, 0},
                        {{1, 5, 10, 12}, {3, 2}, {1, 3}, {2, 0, 1, 1}, {2, 1}, 1},
                        {{1, 33, 7, 7}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 0}};
  for (const Case& k : cases) {
    AttrMap a;
    a.SetInts("kernel_shape", k.kernel);
    a.SetInts("strides", k.strides);
    a.SetInts("pads", k.pads);
    a.SetInts("dilations", k.dilations);
    a.SetInt("ceil_mode", k.ceil);
    CheckBothLayouts<float>("MaxPool", DType::kFloat32, k.cf, {}, a, ShapeToString(k.cf));
  }
}

TEST_CASE("channels-last float MaxPool keeps the reference's NaN, -0 and -inf, bit for bit") {
  // [1, 3, 4, 4]: channel 0 has NaNs (one a different payload) in some
  // windows, channel 1 mixes -0 and +0, channel 2 is -inf but one value.
  const Shape cf = {1, 3, 4, 4};
  std::vector<float> x(48, 0.f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float nan2;
  const uint32_t bits = 0x7fc00123u;
  std::memcpy(&nan2, &bits, 4);
  for (int i = 0; i < 16; ++i) {
    x[size_t(i)] = float(i % 5) - 2.f;
    x[size_t(16 + i)] = i % 2 ? -0.f : 0.f;
    x[size_t(32 + i)] = -std::numeric_limits<float>::infinity();
  }
  x[1] = nan;
  x[4] = nan2;
  x[10] = nan2;
  x[32 + 15] = 3.f;
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  a.SetInts("strides", {1, 1});
  a.SetInts("pads", {1, 1, 0, 0});
  std::vector<std::shared_ptr<OwnedTensor>> in = {Make<float>(DType::kFloat32, cf, x)};
  const OpRun first = RunOp("MaxPool", in, a);
  REQUIRE(first.status.ok());
  const std::vector<float> want = ToChannelsLast(first.values<float>(), first.shape());
  in[0] = Make<float>(DType::kFloat32, ChannelsLastShape(cf), ToChannelsLast(x, cf));
  a.SetInt("channels_last", 1);
  for (kernels::Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const OpRun last = RunOp("MaxPool", in, a, 1, 1, &IsaConfig(isa));
    REQUIRE(last.status.ok());
    const std::vector<float> got = last.values<float>();
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
