// Data-movement ops with a channels-last variant (set by the converter's
// layout planning): DepthToSpace, 8-bit and float nearest Resize and the
// global pools on [N, H, W, C] must give the channels-first op's result,
// bit for bit, with the channels moved last, at every ISA level (the
// reference level takes the channels-first wrapper).
#include <functional>
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

}  // namespace
}  // namespace test
}  // namespace qfold
