// The float row kernels (runtime/src/kernels/rowops_f32*) at every ISA level
// this CPU supports, against sums and LayerNormalization computed in double,
// within the bounds docs/NUMERICS.md states (scaled by the row length through
// the accumulation depth k); then the ops that use them (LayerNormalization,
// Softmax, ReduceSum/Mean/SumSquare) against their reference kernels, at one
// and two threads, including the shapes that must fall back; and the
// vectorized unary ops split between threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/kernel_config.h"
#include "kernels/rowops_f32.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;

constexpr double kU = 1.0 / (1 << 24);  // float unit roundoff

// Row lengths around the vector, 4-vector and tail boundaries of 4, 8 and 16 lanes.
const int64_t kLengths[] = {0,  1,  3,  4,   5,   7,   8,   9,   15,  16,  17,  31,   32,  33,
                            63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 768, 1000, 4099};

std::vector<float> Normal(std::mt19937* rng, int64_t n, float mean, float stddev) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(size_t(n) + 1);  // one spare element: kernels must not touch it
  for (float& f : v) f = d(*rng);
  return v;
}

// The distinct fast variants of the levels this CPU supports.
std::vector<const kernels::RowOpsF32Kernels*> Variants() {
  std::vector<const kernels::RowOpsF32Kernels*> v;
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::RowOpsF32Kernels* k = IsaConfig(isa).rowops_f32;
    if (k && std::find(v.begin(), v.end(), k) == v.end()) v.push_back(k);
  }
  return v;
}

TEST_CASE("kernels: rowops_f32 sums within k u sum|x| at every ISA level") {
  std::mt19937 rng(11);
  const auto variants = Variants();
  MESSAGE("rowops_f32 variants here: " << variants.size());
  for (const kernels::RowOpsF32Kernels* k : variants) {
    CAPTURE(k->lanes);
    for (int64_t n : kLengths) {
      CAPTURE(n);
      for (float offset : {0.f, 3.f, -100.f}) {
        std::vector<float> x = Normal(&rng, n, offset, 1.f);
        double sum = 0, abs_sum = 0, sq = 0;
        for (int64_t i = 0; i < n; ++i) {
          sum += x[size_t(i)];
          abs_sum += std::fabs(x[size_t(i)]);
          sq += double(x[size_t(i)]) * x[size_t(i)];
        }
        const double depth = double(kernels::RowSumDepth(*k, n));
        CHECK(std::fabs(k->sum(x.data(), n) - sum) <= depth * kU * abs_sum);
        // Each square adds one rounding.
        CHECK(std::fabs(k->sum_squares(x.data(), n) - sq) <= (depth + 1) * kU * sq);
      }
    }
  }
}

// LayerNormalization of one row in double (the op's reference computes the
// same way): y, mean, 1/std.
void LayerNormExact(const float* x, int64_t n, const float* scale, const float* bias, double eps,
                    std::vector<double>* y, double* mean, double* inv) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  *mean = n ? s / double(n) : 0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) v += (x[i] - *mean) * (x[i] - *mean);
  *inv = 1 / std::sqrt((n ? v / double(n) : 0) + eps);
  y->resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    (*y)[size_t(i)] = (x[i] - *mean) * *inv * scale[i] + (bias ? bias[i] : 0.0);
}

TEST_CASE("kernels: rowops_f32 layer_norm within the NUMERICS.md bound at every ISA level") {
  std::mt19937 rng(12);
  for (const kernels::RowOpsF32Kernels* k : Variants()) {
    CAPTURE(k->lanes);
    for (int64_t n : kLengths) {
      if (n == 0) continue;
      CAPTURE(n);
      // Centered rows, offset rows (mean 3 std), far offset rows (mean 100 std),
      // where the mean's rounding dominates.
      for (float offset : {0.f, 3.f, 100.f}) {
        CAPTURE(offset);
        for (bool with_bias : {true, false}) {
          const std::vector<float> x = Normal(&rng, n, offset, 1.f);
          const std::vector<float> scale = Normal(&rng, n, 1.f, 0.2f);
          const std::vector<float> bias = Normal(&rng, n, 0.f, 0.5f);
          const float* b = with_bias ? bias.data() : nullptr;
          std::vector<float> y(size_t(n) + 1, 7.f);
          float mean = 0, inv = 0;
          k->layer_norm(x.data(), y.data(), n, scale.data(), b, 1e-5f, &mean, &inv);
          CHECK(y[size_t(n)] == 7.f);  // nothing written past the row
          std::vector<double> ref;
          double rmean, rinv;
          LayerNormExact(x.data(), n, scale.data(), b, 1e-5, &ref, &rmean, &rinv);
          double max_abs = 0;
          for (int64_t i = 0; i < n; ++i)
            max_abs = std::max(max_abs, std::fabs(double(x[size_t(i)])));
          const double depth = double(kernels::RowSumDepth(*k, n));
          const double ratio = max_abs * rinv;  // max|x| / std
          int bad = 0;
          for (int64_t i = 0; i < n; ++i) {
            const size_t j = size_t(i);
            const double z = std::fabs((x[j] - rmean) * rinv);
            const double tol = (depth + 8) * kU * std::fabs(scale[j]) * (ratio + z) +
                               2 * kU * (std::fabs(ref[j]) + (b ? std::fabs(b[j]) : 0.0));
            if (!(std::fabs(y[j] - ref[j]) <= tol)) ++bad;
          }
          CHECK(bad == 0);
          CHECK(std::fabs(mean - rmean) <= (depth + 1) * kU * max_abs);
          CHECK(std::fabs(inv - rinv) <= ((depth + 4) / 2 + 4) * kU * rinv + rinv * ratio * ratio *
                                                                                 (depth + 1) * kU *
                                                                                 (depth + 1) * kU);
        }
      }
    }
    // A constant row: variance 0, y = bias exactly, inv = 1/sqrt(eps).
    std::vector<float> x(37, 2.5f), scale(37, 3.f), bias(37, -1.f), y(37);
    float mean, inv;
    k->layer_norm(x.data(), y.data(), 37, scale.data(), bias.data(), 1e-5f, &mean, &inv);
    CHECK(mean == 2.5f);
    CHECK(inv == doctest::Approx(1 / std::sqrt(1e-5)).epsilon(1e-6));
    for (float v : y) CHECK(v == -1.f);
  }
}

TEST_CASE("kernels: rowops_f32 scale is x * s rounded once") {
  std::mt19937 rng(13);
  for (const kernels::RowOpsF32Kernels* k : Variants()) {
    for (int64_t n : kLengths) {
      std::vector<float> x = Normal(&rng, n, 0.f, 10.f), y(size_t(n) + 1, 7.f);
      k->scale(x.data(), y.data(), n, 0.37f);
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += y[size_t(i)] != x[size_t(i)] * 0.37f;
      CHECK(bad == 0);
      CHECK(y[size_t(n)] == 7.f);
    }
  }
}

// Column sums in double (a channels-last GlobalAveragePool): each channel's
// values added in row order from the running acc, the reference loop's bits,
// on channel counts around 1, 4 and 4-vector blocks of every width, values
// of wide range (so the order shows in the low bits), NaN and infinity.
TEST_CASE("kernels: rowops_f32 sum_columns_f64 equals the row-order double sums bit for bit") {
  std::mt19937 rng(17);
  const int64_t channels[] = {1, 3, 4, 5, 8, 9, 16, 17, 31, 32, 63, 64, 65, 96, 130, 257};
  const int64_t rows_of[] = {0, 1, 2, 7, 100};
  for (const kernels::RowOpsF32Kernels* k : Variants()) {
    for (int64_t c : channels)
      for (int64_t rows : rows_of) {
        CAPTURE(c);
        CAPTURE(rows);
        std::vector<float> x = Normal(&rng, rows * c, 0.f, 1.f);
        for (size_t i = 0; i < x.size(); i += 7) x[i] *= 1e7f;
        if (rows * c > 10) {
          x[5] = std::numeric_limits<float>::infinity();
          x[9] = std::numeric_limits<float>::quiet_NaN();
        }
        std::vector<double> want(size_t(c) + 1), got(size_t(c) + 1);
        for (int64_t i = 0; i <= c; ++i) want[size_t(i)] = got[size_t(i)] = 0.25 * double(i);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < c; ++i) want[size_t(i)] += double(x[size_t(r * c + i)]);
        k->sum_columns_f64(x.data(), rows, c, got.data());
        int bad = 0;
        for (int64_t i = 0; i <= c; ++i)
          bad += !(std::memcmp(&want[size_t(i)], &got[size_t(i)], 8) == 0 ||
                   (std::isnan(want[size_t(i)]) && std::isnan(got[size_t(i)])));
        CHECK(bad == 0);
      }
  }
}

// Equal bits, or both NaN (a NaN's payload is not part of the contract).
bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST_CASE("kernels: rowops_f32 channel_affine and plane_affine equal the reference bit for bit") {
  std::mt19937 rng(16);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {nan, inf, -inf, 0.f, -0.f, 1e-40f, -1e-40f};
  struct Act {
    kernels::F32Act act;
    float lo, hi;
  };
  // Clamp with lo > hi too: x < lo ? lo : min(hi, x) then gives lo or hi.
  const Act acts[] = {{kernels::F32Act::kNone, 0, 0},
                      {kernels::F32Act::kRelu, 0, 0},
                      {kernels::F32Act::kClamp, -0.5f, 0.75f},
                      {kernels::F32Act::kClamp, 0.f, 6.f},
                      {kernels::F32Act::kClamp, 1.f, -1.f}};
  for (const kernels::RowOpsF32Kernels* k : Variants()) {
    CAPTURE(k->lanes);
    for (int64_t cols : kLengths) {
      CAPTURE(cols);
      const int64_t rows = 3, ldx = cols + 5, ldy = cols + 3;
      std::vector<float> x = Normal(&rng, rows * ldx, 0.f, 2.f);
      for (float& v : x)
        if (rng() % 16 == 0) v = specials[rng() % 7];
      std::vector<float> sub = Normal(&rng, cols, 0.f, 1.f), mul = Normal(&rng, cols, 1.f, 0.5f),
                         add = Normal(&rng, cols, 0.f, 1.f);
      // Channels whose map gives exact zeros of both signs (x - sub = 0, add = -0).
      if (cols > 2) {
        sub[1] = x[1];
        add[1] = -0.f;
        mul[2] = 0.f;
      }
      for (const Act& a : acts) {
        CAPTURE(int(a.act));
        CAPTURE(a.lo);
        std::vector<float> y(size_t(rows * ldy), 7.f);
        k->channel_affine(x.data(), ldx, y.data(), ldy, rows, cols, sub.data(), mul.data(),
                          add.data(), a.act, a.lo, a.hi);
        int bad = 0, touched = 0;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < cols; ++i)
            bad += !SameFloat(
                y[size_t(r * ldy + i)],
                kernels::ChannelAffineRef(x[size_t(r * ldx + i)], sub[size_t(i)], mul[size_t(i)],
                                          add[size_t(i)], a.act, a.lo, a.hi));
          for (int64_t i = cols; i < ldy; ++i) touched += y[size_t(r * ldy + i)] != 7.f;
        }
        CHECK(bad == 0);
        CHECK(touched == 0);
        // In place (y = x, one row stride).
        std::vector<float> z(x.begin(), x.begin() + rows * ldx);
        k->channel_affine(z.data(), ldx, z.data(), ldx, rows, cols, sub.data(), mul.data(),
                          add.data(), a.act, a.lo, a.hi);
        bad = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < cols; ++i)
            bad += !SameFloat(z[size_t(r * ldx + i)], y[size_t(r * ldy + i)]);
        CHECK(bad == 0);
        // One channel's values over a plane of cols elements.
        std::vector<float> p(size_t(cols) + 1, 7.f);
        k->plane_affine(x.data(), p.data(), cols, sub[0], mul[0], add[0], a.act, a.lo, a.hi);
        bad = 0;
        for (int64_t i = 0; i < cols; ++i)
          bad += !SameFloat(p[size_t(i)], kernels::ChannelAffineRef(x[size_t(i)], sub[0], mul[0],
                                                                    add[0], a.act, a.lo, a.hi));
        CHECK(bad == 0);
        CHECK(p[size_t(cols)] == 7.f);
      }
    }
  }
}

// max |a - b| / max(max|b|, 1e-30)
double MaxRel(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0, m = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    m = std::max(m, std::fabs(double(b[i])));
  }
  return d / m;
}

TEST_CASE(
    "ops: LayerNormalization, Softmax, ReduceSum/Mean/SumSquare row kernels match the reference") {
  std::mt19937 rng(14);
  const kernels::KernelConfig& ref = kernels::ReferenceKernelConfig();
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::KernelConfig& kc = IsaConfig(isa);
    CAPTURE(kernels::IsaName(isa));
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      // [2, 96, 260]: rows split between threads (above the size that stays on one).
      const Shape shape{2, 96, 260};
      const int64_t numel = 2 * 96 * 260;
      const std::vector<float> xv = Normal(&rng, numel, 0.5f, 2.f);
      double max_abs = 0;
      for (float v : xv) max_abs = std::max(max_abs, std::fabs(double(v)));
      auto x = F32(shape, xv);

      // LayerNormalization over the last axis and over the last two, with the
      // statistics outputs; then a Scale that broadcasts (the reference path).
      for (int64_t axis : {-1, -2}) {
        CAPTURE(axis);
        const int64_t size = axis == -1 ? 260 : 96 * 260;
        const Shape norm = axis == -1 ? Shape{260} : Shape{96, 260};
        auto scale = F32(norm, Normal(&rng, size, 1.f, 0.3f));
        auto bias = F32(norm, Normal(&rng, size, 0.f, 0.3f));
        AttrMap a;
        a.SetInt("axis", axis);
        a.SetFloat("epsilon", 1e-5f);
        const OpRun fast = RunOp("LayerNormalization", {x, scale, bias}, a, 3, threads, &kc);
        const OpRun slow = RunOp("LayerNormalization", {x, scale, bias}, a, 3, 1, &ref);
        REQUIRE(fast.status.ok());
        REQUIRE(slow.status.ok());
        for (int o = 0; o < 3; ++o)
          CHECK(MaxRel(fast.values<float>(o), slow.values<float>(o)) < 1e-5);
      }
      {
        AttrMap a;
        auto scale = F32({1}, {1.5f});
        const OpRun fast = RunOp("LayerNormalization", {x, scale}, a, 1, threads, &kc);
        const OpRun slow = RunOp("LayerNormalization", {x, scale}, a, 1, 1, &ref);
        REQUIRE(fast.status.ok());
        CHECK(MaxRel(fast.values<float>(), slow.values<float>()) < 1e-5);
      }

      // Softmax over the last axis.
      {
        AttrMap a;
        a.SetInt("axis", -1);
        const OpRun fast = RunOp("Softmax", {x}, a, 1, threads, &kc);
        const OpRun slow = RunOp("Softmax", {x}, a, 1, 1, &ref);
        REQUIRE(fast.status.ok());
        CHECK(MaxRel(fast.values<float>(), slow.values<float>()) < 1e-5);
      }

      // Reductions over trailing axes (rows), and over a middle axis (the reference path).
      for (const char* op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"}) {
        for (std::vector<int64_t> axes : {std::vector<int64_t>{-1}, {1, 2}, {1}, {}}) {
          CAPTURE(op);
          CAPTURE(axes.size());
          auto ax = I64({int64_t(axes.size())}, axes);
          AttrMap a;
          a.SetInt("keepdims", 0);
          const OpRun fast = RunOp(op, {x, ax}, a, 1, threads, &kc);
          const OpRun slow = RunOp(op, {x, ax}, a, 1, 1, &ref);
          REQUIRE(fast.status.ok());
          CHECK(fast.shape() == slow.shape());
          // Sums of up to 25k values of both signs: bounded through sum|x| <= n max|x|.
          const std::vector<float> f = fast.values<float>(), s = slow.values<float>();
          const double n = double(numel) / double(f.size());
          const std::string name = op;
          const double per_value = name == "ReduceSumSquare" ? max_abs * max_abs : max_abs;
          const double bound = (n / 32 + 8) * kU * per_value * (name == "ReduceMean" ? 1 : n);
          int bad = 0;
          for (size_t i = 0; i < f.size(); ++i) bad += !(std::fabs(double(f[i]) - s[i]) <= bound);
          CHECK(bad == 0);
        }
      }
    }
  }
  // The vectorized unary ops split their elements between threads: the same
  // bits at 1 and 2 threads (a partial last chunk included).
  {
    std::mt19937 urng(15);
    auto x = F32({2, 96, 261}, Normal(&urng, 2 * 96 * 261, 0.f, 3.f));
    const kernels::KernelConfig& kc = kernels::DefaultKernelConfig();
    for (const char* op : {"Gelu", "Erf", "Sigmoid", "Tanh", "Exp"}) {
      CAPTURE(op);
      const OpRun one = RunOp(op, {x}, AttrMap(), 1, 1, &kc);
      const OpRun two = RunOp(op, {x}, AttrMap(), 1, 2, &kc);
      REQUIRE(one.status.ok());
      REQUIRE(two.status.ok());
      CHECK(one.values<float>() == two.values<float>());
      const OpRun ref = RunOp(op, {x}, AttrMap(), 1, 1, &kernels::ReferenceKernelConfig());
      CHECK(MaxRel(two.values<float>(), ref.values<float>()) < 1e-6);
    }
  }
  // An empty row: ReduceMean is 0/0 as in the reference, ReduceSum 0.
  auto empty = F32({3, 0}, {});
  auto ax = I64({1}, {1});
  const kernels::KernelConfig& kc = kernels::DefaultKernelConfig();
  const OpRun mean = RunOp("ReduceMean", {empty, ax}, AttrMap(), 1, 1, &kc);
  REQUIRE(mean.status.ok());
  for (float v : mean.values<float>()) CHECK(std::isnan(v));
  const OpRun sum = RunOp("ReduceSum", {empty, ax}, AttrMap(), 1, 1, &kc);
  REQUIRE(sum.status.ok());
  for (float v : sum.values<float>()) CHECK(v == 0.f);
}

}  // namespace
}  // namespace test
}  // namespace qfold
