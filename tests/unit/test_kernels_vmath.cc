// The vectorized sigmoid/tanh (runtime/src/kernels/vmath*) at every ISA level
// this CPU supports, against the functions computed in double: the maximum
// error over a dense sweep of float inputs (every 256th float bit pattern with
// |x| <= 100, both signs, over every binade; QFOLD_VMATH_STRIDE=64 for the
// 35-million-input sweep docs/NUMERICS.md reports), plus the tails of short
// arrays, NaN and infinities.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/vmath.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Every `stride`-th float with |x| <= limit, both signs.
std::vector<float> Sweep(float limit, uint32_t stride) {
  std::vector<float> xs;
  uint32_t top;
  std::memcpy(&top, &limit, 4);
  for (uint32_t b = 0; b <= top; b += stride) {
    xs.push_back(FromBits(b));
    xs.push_back(-FromBits(b));
  }
  return xs;
}

struct Err {
  double ulp = 0, abs = 0;
  float worst_x = 0;
};

// Error in units of the float spacing at the exact result, where that result
// is a normal float; absolute error elsewhere.
Err Measure(void (*fn)(const float*, float*, int64_t), double (*exact)(double),
            const std::vector<float>& xs) {
  std::vector<float> ys(xs.size());
  fn(xs.data(), ys.data(), int64_t(xs.size()));
  Err e;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = exact(double(xs[i]));
    const double d = std::fabs(double(ys[i]) - want);
    e.abs = std::max(e.abs, d);
    if (std::fabs(want) >= double(std::numeric_limits<float>::min())) {
      const float wf = float(std::fabs(want));
      const double ulp = double(std::nextafter(wf, 2 * wf + 1)) - double(wf);
      if (d / ulp > e.ulp) {
        e.ulp = d / ulp;
        e.worst_x = xs[i];
      }
    }
  }
  return e;
}

double SigmoidExact(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double TanhExact(double x) {
  return std::tanh(x);
}

TEST_CASE("kernels: vmath sigmoid/tanh error over a dense sweep at every ISA level") {
  // Every 256th float by default (8.8 million inputs; seconds under qemu);
  // QFOLD_VMATH_STRIDE=64 gives the denser sweep NUMERICS.md reports.
  const char* env = std::getenv("QFOLD_VMATH_STRIDE");
  const uint32_t stride = env && std::atoi(env) > 0 ? uint32_t(std::atoi(env)) : 256;
  std::vector<float> xs = Sweep(100.f, stride);
  std::vector<const kernels::VMathKernels*> seen;
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    // Levels sharing one variant (every x86 level above AVX2, every Arm level) once.
    if (std::find(seen.begin(), seen.end(), &k) != seen.end()) continue;
    seen.push_back(&k);
    const Err s = Measure(k.sigmoid, SigmoidExact, xs);
    const Err t = Measure(k.tanh, TanhExact, xs);
    std::printf(
        "vmath %-10s sigmoid max %.2f ulp (at %g), abs %.3g; tanh max %.2f ulp (at %g), abs %.3g "
        "over %zu inputs\n",
        kernels::IsaName(isa), s.ulp, double(s.worst_x), s.abs, t.ulp, double(t.worst_x), t.abs,
        xs.size());
    // The bounds docs/NUMERICS.md states.
    CHECK(s.ulp <= 3.0);
    CHECK(t.ulp <= 3.0);
    CHECK(s.abs <= 2e-7);
    CHECK(t.abs <= 2e-7);
  }
}

TEST_CASE("kernels: vmath tails, NaN and infinities") {
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    const kernels::VMathKernels& ref = kernels::VMathFor(Isa::kReference);
    // Every length up to two vectors and a tail: each element as the
    // reference computes it alone, within the documented bound.
    for (int n = 1; n <= 19; ++n) {
      const size_t len = size_t(n);
      std::vector<float> x(len), y(len, -7.f), r(len);
      for (int i = 0; i < n; ++i) x[size_t(i)] = 0.37f * float(i) - 3.1f;
      k.tanh(x.data(), y.data(), n);
      ref.tanh(x.data(), r.data(), n);
      for (int i = 0; i < n; ++i) CHECK(std::fabs(y[size_t(i)] - r[size_t(i)]) <= 4e-7f);
      k.sigmoid(x.data(), x.data(), n);  // in place
      for (int i = 0; i < n; ++i) {
        float xi = 0.37f * float(i) - 3.1f, want;
        ref.sigmoid(&xi, &want, 1);
        CHECK(std::fabs(x[size_t(i)] - want) <= 4e-7f);
      }
    }
    const float special[4] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.f};
    float s[4], t[4];
    k.sigmoid(special, s, 4);
    k.tanh(special, t, 4);
    CHECK(std::isnan(s[0]));
    CHECK(std::isnan(t[0]));
    CHECK(s[1] == 1.f);
    CHECK(s[2] <= std::numeric_limits<float>::min());
    CHECK(s[2] >= 0.f);
    CHECK(t[1] == 1.f);
    CHECK(t[2] == -1.f);
    CHECK(s[3] == 0.5f);
    CHECK(t[3] == 0.f);
    CHECK(std::signbit(t[3]));
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
