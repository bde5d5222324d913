// The fast pooling / resize / transpose paths against the reference kernels
// (selected by forcing Isa::kReference): outputs must be bit-identical, at
// every ISA level and for 1 and 2 threads.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/pool_2d.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;
using kernels::Isa;

// RunOp with a thread count.
OpRun RunOpThreads(const std::string& type, const std::vector<TensorPtr>& inputs,
                   const AttrMap& attrs, int threads, Isa isa, int num_outputs = 1) {
  OpRun r;
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "test";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = test::TestPool(threads);
  ctx.kernels = &IsaConfig(isa);
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  for (int i = 0; i < num_outputs; ++i) {
    r.outputs.push_back(std::make_shared<OwnedTensor>());
    ctx.outputs.push_back(&r.outputs.back()->t);
  }
  r.status = def->infer(ctx);
  if (!r.status.ok()) return r;
  for (auto& o : r.outputs) {
    // Garbage, not zeros: every output element must be written.
    o->storage.assign(o->t.bytes() + 1, 0xA5);
    o->t.data = o->storage.data();
  }
  r.status = def->run(ctx);
  return r;
}

bool SameBits(const OpRun& a, const OpRun& b, bool nan_any) {
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const Tensor& x = a.outputs[i]->t;
    const Tensor& y = b.outputs[i]->t;
    if (x.shape != y.shape || x.dtype != y.dtype) return false;
    if (std::memcmp(x.data, y.data, x.bytes()) == 0) continue;
    if (x.dtype != DType::kFloat32) return false;
    // Float sums of NaNs: the payload of NaN + NaN depends on the operand
    // order the compiler picks, so any NaN matches any NaN there.
    for (int64_t e = 0; e < x.numel(); ++e) {
      const float u = x.ptr<float>()[e], v = y.ptr<float>()[e];
      if (std::isnan(u) && std::isnan(v) && nan_any) continue;
      if (std::memcmp(&u, &v, 4) != 0) return false;
    }
  }
  return true;
}

// Runs at the reference level, then at every other level with 1 and 2
// threads; every run must give the reference's bits. False when the
// reference rejects the case (nothing compared).
bool CheckAgainstReference(const std::string& type, const std::vector<TensorPtr>& inputs,
                           const AttrMap& attrs, const std::string& what, int num_outputs = 1,
                           bool nan_any = false) {
  const OpRun ref = RunOpThreads(type, inputs, attrs, 1, Isa::kReference, num_outputs);
  if (!ref.status.ok()) return false;  // invalid geometry: nothing to compare
  for (Isa isa : kernels::SupportedIsas()) {
    if (isa == Isa::kReference) continue;
    for (int threads : {1, 2}) {
      const OpRun got = RunOpThreads(type, inputs, attrs, threads, isa, num_outputs);
      INFO(what, " isa=", std::string(kernels::IsaName(isa)), " threads=", threads);
      REQUIRE(got.status.ok());
      CHECK(SameBits(ref, got, nan_any));
    }
  }
  return true;
}

// Floats with ties, signed zeros, infinities and NaNs of different payloads,
// so "first maximum" and NaN propagation are exercised.
TensorPtr RandomF32(Shape s, std::mt19937& rng, bool specials) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_int_distribution<int> pick(0, 99);
  std::uniform_real_distribution<float> val(-4.f, 4.f);
  for (float& f : v) {
    const int k = pick(rng);
    if (!specials || k >= 12) {
      f = val(rng);
    } else if (k < 3) {
      f = 0.f;
    } else if (k < 6) {
      f = -0.f;
    } else if (k < 8) {
      f = float(int(val(rng)));  // ties
    } else if (k == 8) {
      f = std::numeric_limits<float>::infinity();
    } else if (k == 9) {
      f = -std::numeric_limits<float>::infinity();
    } else {
      uint32_t bits = 0x7fc00000u | uint32_t(k * 977 + int(rng() & 0xff));
      std::memcpy(&f, &bits, 4);
    }
  }
  return F32(std::move(s), std::move(v));
}

TensorPtr RandomBytes(DType dt, Shape s, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& b : v) b = uint8_t(rng());
  return Make<uint8_t>(dt, std::move(s), std::move(v));
}

TEST_CASE("kernels pool: MaxPool and AveragePool 2-D match the reference") {
  std::mt19937 rng(1234);
  auto r = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  int compared = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int64_t n = r(1, 2), c = r(1, 5), ih = r(1, 17), iw = r(1, 40);
    const int64_t kh = r(1, 4), kw = r(1, 4);
    AttrMap at;
    at.SetInts("kernel_shape", {kh, kw});
    at.SetInts("strides", {r(1, 3), r(1, 3)});
    at.SetInts("dilations", {r(1, 3), r(1, 3)});
    if (r(0, 5) == 0) {
      at.SetString("auto_pad", r(0, 1) ? "SAME_UPPER" : "SAME_LOWER");
    } else {
      at.SetInts("pads",
                 {r(0, int(kh) - 1), r(0, int(kw) - 1), r(0, int(kh) - 1), r(0, int(kw) - 1)});
    }
    at.SetInt("ceil_mode", r(0, 1));
    const std::string what = "iter " + std::to_string(iter);
    const bool specials = r(0, 1) != 0;
    compared += CheckAgainstReference("MaxPool", {RandomF32({n, c, ih, iw}, rng, specials)}, at,
                                      what + " max f32");
    CheckAgainstReference("MaxPool", {RandomBytes(DType::kInt8, {n, c, ih, iw}, rng)}, at,
                          what + " max s8");
    CheckAgainstReference("MaxPool", {RandomBytes(DType::kUInt8, {n, c, ih, iw}, rng)}, at,
                          what + " max u8");
    at.SetInt("count_include_pad", r(0, 1));
    CheckAgainstReference("AveragePool", {RandomF32({n, c, ih, iw}, rng, specials)}, at,
                          what + " avg f32", 1, /*nan_any=*/true);
  }
  // Some random geometries are invalid (e.g. no output); most are compared.
  CHECK(compared > 300);
  MESSAGE("pool geometries compared: ", compared);
}

TEST_CASE("kernels pool: MaxPool with Indices keeps the reference") {
  std::mt19937 rng(7);
  AttrMap at;
  at.SetInts("kernel_shape", {3, 3});
  at.SetInts("strides", {2, 2});
  at.SetInts("pads", {1, 1, 1, 1});
  CheckAgainstReference("MaxPool", {RandomF32({1, 3, 11, 9}, rng, false)}, at, "indices", 2);
}

TEST_CASE("kernels pool: Resize over H and W matches the reference") {
  std::mt19937 rng(99);
  auto r = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const char* coords[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                          "align_corners", "asymmetric",           "tf_crop_and_resize"};
  const char* nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char* modes[] = {"nearest", "linear", "cubic"};
  int compared = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int64_t n = r(1, 2), c = r(1, 3), ih = r(1, 13), iw = r(1, 13);
    AttrMap at;
    const std::string mode = modes[r(0, 2)];
    const std::string coord = coords[r(0, 5)];
    at.SetString("mode", mode);
    at.SetString("coordinate_transformation_mode", coord);
    at.SetString("nearest_mode", nearest_modes[r(0, 3)]);
    if (r(0, 3) == 0) at.SetInt("exclude_outside", 1);
    if (r(0, 4) == 0) at.SetInt("antialias", 1);
    if (r(0, 3) == 0) at.SetFloat("cubic_coeff_a", -0.5f);
    at.SetFloat("extrapolation_value", r(0, 1) ? 0.f : -7.5f);
    TensorPtr roi;
    if (coord == "tf_crop_and_resize")
      roi = F32({8}, {0.f, 0.f, 0.1f * float(r(-2, 4)), 0.1f * float(r(-2, 4)), 1.f, 1.f,
                      0.1f * float(r(5, 12)), 0.1f * float(r(5, 12))});
    TensorPtr scales, sizes;
    if (r(0, 1)) {
      const float sc[] = {0.5f, 0.6f, 0.75f, 1.f, 1.3f, 1.5f, 2.f, 2.5f, 3.f};
      scales = F32({4}, {1.f, 1.f, sc[r(0, 8)], sc[r(0, 8)]});
    } else {
      sizes = I64({4}, {n, c, r(1, 27), r(1, 27)});
      if (r(0, 4) == 0)
        at.SetString("keep_aspect_ratio_policy", r(0, 1) ? "not_larger" : "not_smaller");
    }
    const std::string what = "iter " + std::to_string(iter) + " " + mode + " " + coord;
    compared += CheckAgainstReference(
        "Resize", {RandomF32({n, c, ih, iw}, rng, r(0, 1) != 0), roi, scales, sizes}, at,
        what + " f32", 1, /*nan_any=*/mode != "nearest");
    if (mode == "nearest") {
      CheckAgainstReference("Resize",
                            {RandomBytes(DType::kInt8, {n, c, ih, iw}, rng), roi, scales, sizes},
                            at, what + " s8");
      CheckAgainstReference("Resize",
                            {RandomBytes(DType::kUInt8, {n, c, ih, iw}, rng), roi, scales, sizes},
                            at, what + " u8");
    }
  }
  CHECK(compared > 450);
  MESSAGE("resize cases compared: ", compared);
}

TEST_CASE("kernels pool: Resize of other axes keeps the reference") {
  std::mt19937 rng(5);
  AttrMap at;
  at.SetString("mode", "linear");
  CheckAgainstReference(
      "Resize",
      {RandomF32({2, 3, 5, 4}, rng, false), nullptr, F32({4}, {1.f, 2.f, 1.5f, 2.f}), nullptr}, at,
      "channels resized");
}

TEST_CASE("kernels pool: Transpose matches the reference") {
  std::mt19937 rng(31);
  auto r = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const DType types[] = {DType::kFloat32, DType::kInt8, DType::kInt64, DType::kFloat16};
  int compared = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = r(1, 5);
    Shape shape;
    for (int i = 0; i < rank; ++i) shape.push_back(r(0, 4) == 0 ? 1 : r(1, 21));
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) perm[size_t(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    AttrMap at;
    if (r(0, 5) != 0) at.SetInts("perm", perm);
    const DType dt = types[r(0, 3)];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * dtype_size(dt));
    for (uint8_t& b : bytes) b = uint8_t(rng());
    compared += CheckAgainstReference("Transpose", {Make<uint8_t>(dt, shape, bytes)}, at,
                                      "iter " + std::to_string(iter));
  }
  CHECK(compared == 300);
  // Channel shuffles of NHWC pixels ([.., g, C/g] -> [.., C/g, g]): few short
  // rows interleaved, the path the layout planner's shuffles take.
  for (int g = 1; g <= 5; ++g)
    for (const DType dt : types) {
      const Shape shape = {2, 3, 5, g, 7};
      std::vector<uint8_t> bytes(size_t(2 * 3 * 5 * g * 7) * dtype_size(dt));
      for (uint8_t& b : bytes) b = uint8_t(rng());
      AttrMap at;
      at.SetInts("perm", {0, 1, 2, 4, 3});
      compared += CheckAgainstReference("Transpose", {Make<uint8_t>(dt, shape, bytes)}, at,
                                        "shuffle g " + std::to_string(g));
      bytes.resize(size_t(g * 7) * dtype_size(dt));
      at.SetInts("perm", {1, 0});
      compared += CheckAgainstReference("Transpose", {Make<uint8_t>(dt, {g, 7}, bytes)}, at,
                                        "2-D g " + std::to_string(g));
    }
  CHECK(compared == 340);
}

// Tensors over the size that splits the copy between threads.
TEST_CASE("kernels pool: large Transposes split between threads match the reference") {
  std::mt19937 rng(32);
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
    DType dt;
  };
  const Case cases[] = {
      {{1, 28, 28, 4, 29}, {0, 1, 2, 4, 3}, DType::kUInt8},  // channel shuffle, tiles
      {{1, 40, 33, 37}, {0, 3, 1, 2}, DType::kFloat32},      // NHWC -> NCHW, tiles
      {{3, 50, 700}, {1, 0, 2}, DType::kInt8},               // runs of memcpy
      {{2, 300, 70}, {2, 1, 0}, DType::kInt64},              // first axis from the last
      // 128-bit tiles of every element size, with edges on both axes.
      {{1, 144, 56, 56}, {0, 2, 3, 1}, DType::kUInt8},   // NCHW -> NHWC, 16x16 byte tiles
      {{1, 57, 9, 133}, {0, 3, 1, 2}, DType::kInt8},     // NHWC -> NCHW, byte edges
      {{2, 37, 19, 70}, {0, 2, 3, 1}, DType::kFloat16},  // 8x8 tiles
      {{1, 66, 35, 3}, {0, 3, 1, 2}, DType::kFloat32},   // 4x4 tiles, 3 rows
      {{5, 67, 130}, {0, 2, 1}, DType::kFloat32},
      {{3, 9, 131}, {2, 1, 0}, DType::kInt64},  // 2x2 tiles
      // NHWC -> NCHW split between threads in whole tiles (channels, not a multiple of 32).
      {{1, 56, 56, 144}, {0, 3, 1, 2}, DType::kUInt8},
      {{1, 23, 31, 100}, {0, 3, 1, 2}, DType::kFloat16},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * dtype_size(c.dt));
    for (uint8_t& b : bytes) b = uint8_t(rng());
    AttrMap at;
    at.SetInts("perm", c.perm);
    CHECK(CheckAgainstReference("Transpose", {Make<uint8_t>(c.dt, c.shape, bytes)}, at,
                                "large " + std::to_string(n)));
  }
}

TEST_CASE("kernels pool: speed" * doctest::skip()) {
  std::mt19937 rng(1);
  // Best of several runs of the calling thread's CPU time (the machine is
  // shared, so wall time is noisy); with 2 threads this is the caller's half.
  auto now_us = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
  };
  auto time_us = [&](const std::function<void()>& fn) {
    fn();
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const double t0 = now_us();
      const int inner = 5;
      for (int i = 0; i < inner; ++i) fn();
      best = std::min(best, (now_us() - t0) / inner);
    }
    return best;
  };
  struct Case {
    std::string name, op;
    std::vector<TensorPtr> inputs;
    AttrMap at;
  };
  std::vector<Case> cases;
  {
    AttrMap at;
    at.SetInts("kernel_shape", {3, 3});
    at.SetInts("strides", {2, 2});
    at.SetInts("pads", {1, 1, 1, 1});
    cases.push_back({"MaxPool 3x3s2 1x64x112x112 f32",
                     "MaxPool",
                     {RandomF32({1, 64, 112, 112}, rng, false)},
                     at});
    cases.push_back({"MaxPool 3x3s2 1x64x112x112 s8",
                     "MaxPool",
                     {RandomBytes(DType::kInt8, {1, 64, 112, 112}, rng)},
                     at});
    cases.push_back({"AveragePool 3x3s2 1x64x112x112 f32",
                     "AveragePool",
                     {RandomF32({1, 64, 112, 112}, rng, false)},
                     at});
  }
  {
    AttrMap at;
    at.SetInts("perm", {0, 2, 1, 3});
    cases.push_back({"Transpose [1,16,4,16] perm 0,2,1,3 f32",
                     "Transpose",
                     {RandomF32({1, 16, 4, 16}, rng, false)},
                     at});
    AttrMap at2;
    at2.SetInts("perm", {0, 1, 3, 2});
    cases.push_back({"Transpose [1,16,64,64] perm 0,1,3,2 f32",
                     "Transpose",
                     {RandomF32({1, 16, 64, 64}, rng, false)},
                     at2});
  }
  for (const char* mode : {"nearest", "linear"}) {
    AttrMap at;
    at.SetString("mode", mode);
    at.SetString("coordinate_transformation_mode",
                 std::string(mode) == "nearest" ? "asymmetric" : "half_pixel");
    at.SetString("nearest_mode", "floor");
    cases.push_back(
        {std::string("Resize ") + mode + " 2x 1x96x80x80 f32",
         "Resize",
         {RandomF32({1, 96, 80, 80}, rng, false), nullptr, F32({4}, {1.f, 1.f, 2.f, 2.f}), nullptr},
         at});
  }
  {
    // The kernel alone, without the op's infer and output allocation.
    kernels::Pool2dArgs a;
    a.planes = 64;
    a.ih = a.iw = 112;
    a.oh = a.ow = 56;
    a.kh = a.kw = 3;
    a.sh = a.sw = 2;
    a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = 1;
    std::vector<float> y(size_t(a.planes * a.oh * a.ow));
    const float* x = cases[0].inputs[0]->t.ptr<float>();
    for (int threads : {1, 2}) {
      a.pool = test::TestPool(threads);
      const double us = time_us([&] {
        kernels::MaxPool2dF32(*IsaConfig(kernels::DetectedIsa()).pool_2d, a, x, y.data());
      });
      std::printf("MaxPool2dF32 kernel only threads=%d %10.1f us\n", threads, us);
    }
  }
  for (const Case& c : cases) {
    for (Isa isa : {Isa::kReference, kernels::DetectedIsa()}) {
      for (int threads : {1, 2}) {
        const double us = time_us([&] { RunOpThreads(c.op, c.inputs, c.at, threads, isa); });
        std::printf("%-45s %-12s threads=%d %10.1f us\n", c.name.c_str(), kernels::IsaName(isa),
                    threads, us);
      }
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
