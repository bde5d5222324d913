// The vectorized functions (runtime/src/kernels/vmath*) at every ISA level
// this CPU supports, against the functions computed in double: the maximum
// error over a dense sweep of float inputs (every 256th float bit pattern with
// |x| <= 100, both signs, over every binade; log over every positive binade,
// subnormals included; QFOLD_VMATH_STRIDE=64 for the 35-million-input sweep
// docs/NUMERICS.md reports), plus the tails of short arrays, NaN and infinities.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
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
  int64_t wrong_inf = 0;
  double tiny_abs = 0;  // where the exact result is below FLT_MIN  // exact result beyond FLT_MAX
                        // without inf, or the reverse
};

// Error in units of the float spacing at the exact result, where that result
// is a normal float; absolute error elsewhere.
// With `cond`, the ulp error is divided by 1 + cond(x): the function's own
// condition number, the error any float evaluation of its argument brings.
Err Measure(void (*fn)(const float*, float*, int64_t), double (*exact)(double),
            const std::vector<float>& xs, double (*cond)(double) = nullptr) {
  std::vector<float> ys(xs.size());
  fn(xs.data(), ys.data(), int64_t(xs.size()));
  Err e;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = exact(double(xs[i]));
    if (std::isinf(float(want)) || std::isinf(ys[i])) {
      if (float(want) != ys[i]) ++e.wrong_inf;
      continue;
    }
    const double d = std::fabs(double(ys[i]) - want);
    e.abs = std::max(e.abs, d);
    if (std::fabs(want) < double(std::numeric_limits<float>::min()))
      e.tiny_abs = std::max(e.tiny_abs, d);
    if (std::fabs(want) >= double(std::numeric_limits<float>::min())) {
      const float wf = float(std::fabs(want));
      const double ulp = double(std::nextafter(wf, 2 * wf + 1)) - double(wf);
      const double err = d / ulp / (cond ? 1.0 + cond(double(xs[i])) : 1.0);
      if (err > e.ulp) {
        e.ulp = err;
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
double ExpExact(double x) {
  return std::exp(x);
}
double LogExact(double x) {
  return std::log(x);
}
double ErfExact(double x) {
  return std::erf(x);
}
double GeluExact(double x) {
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}
double GeluTanhExact(double x) {
  // 0.5 x (1 + tanh(w)) = x / (1 + exp(-2w)), without cancellation.
  return x / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
// |x f'(x) / f(x)| of gelu_tanh: reaches 200 at x = -10, where the argument
// w = sqrt(2/pi) (x + 0.044715 x^3) of the tanh (any float evaluation rounds
// it) turns each ulp of x into 200 of the result.
double GeluTanhCond(double x) {
  const double h = std::max(std::fabs(x) * 1e-7, 1e-30);
  const double f = GeluTanhExact(x);
  if (f == 0) return 0;
  return std::fabs(x * (GeluTanhExact(x + h) - GeluTanhExact(x - h)) / (2 * h) / f);
}
double SiluExact(double x) {
  return x / (1.0 + std::exp(-x));
}

// Every `stride`-th positive float up to FLT_MAX, subnormals included.
std::vector<float> PositiveSweep(uint32_t stride) {
  std::vector<float> xs;
  for (uint32_t b = 1; b < 0x7f800000u; b += stride) xs.push_back(FromBits(b));
  return xs;
}

void SiluAlpha1(const kernels::VMathKernels& k, const float* x, float* y, int64_t n) {
  k.swish(x, y, n, 1.f);
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

TEST_CASE("kernels: vmath exp/log/erf/gelu/silu error over a dense sweep at every ISA level") {
  const char* env = std::getenv("QFOLD_VMATH_STRIDE");
  const uint32_t stride = env && std::atoi(env) > 0 ? uint32_t(std::atoi(env)) : 256;
  const std::vector<float> xs = Sweep(100.f, stride);
  const std::vector<float> pos = PositiveSweep(stride);
  std::vector<const kernels::VMathKernels*> seen;
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    if (std::find(seen.begin(), seen.end(), &k) != seen.end()) continue;
    seen.push_back(&k);
    // swish through a plain function pointer: alpha 1 (SiLU).
    static const kernels::VMathKernels* current;
    current = &k;
    auto silu = [](const float* x, float* y, int64_t n) { SiluAlpha1(*current, x, y, n); };
    struct Case {
      const char* name;
      void (*fn)(const float*, float*, int64_t);
      double (*exact)(double);
      const std::vector<float>* xs;
      double max_ulp;
      double (*cond)(double);
    };
    // The bounds docs/NUMERICS.md states.
    const Case cases[] = {
        {"exp", k.exp, ExpExact, &xs, 3.0, nullptr},
        {"log", k.log, LogExact, &pos, 3.0, nullptr},
        {"erf", k.erf, ErfExact, &xs, 3.0, nullptr},
        {"gelu", k.gelu, GeluExact, &xs, 6.0, nullptr},
        {"gelu_tanh", k.gelu_tanh, GeluTanhExact, &xs, 4.0, GeluTanhCond},
        {"silu", silu, SiluExact, &xs, 4.0, nullptr},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      const Err e = Measure(c.fn, c.exact, *c.xs, c.cond);
      std::printf(
          "vmath %-10s %-9s max %.2f ulp%s (at %g), abs below FLT_MIN %.3g, wrong inf %lld over "
          "%zu "
          "inputs\n",
          kernels::IsaName(isa), c.name, e.ulp, c.cond ? " / (1 + cond)" : "", double(e.worst_x),
          e.tiny_abs, static_cast<long long>(e.wrong_inf), c.xs->size());
      CHECK(e.ulp <= c.max_ulp);
      CHECK(e.wrong_inf == 0);
      CHECK(e.tiny_abs <= double(std::numeric_limits<float>::min()));
    }
  }
}

// Erf and Gelu skip a branch when no lane of a vector needs it: every element
// must come out the same whatever its neighbours, so a vector of mixed ranges
// (small, middle, far tail, NaN, inf) equals each element computed alone.
TEST_CASE("kernels: vmath erf/gelu lanes do not depend on their neighbours") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> range(-12.f, 12.f);
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) {
    // Runs of small values with an occasional large one, and plain mixtures.
    const float v = range(rng);
    x[i] = (i / 64) % 2 ? v : (rng() % 16 ? v / 12.f : v);
  }
  x[100] = std::numeric_limits<float>::quiet_NaN();
  x[200] = std::numeric_limits<float>::infinity();
  x[300] = -std::numeric_limits<float>::infinity();
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    for (auto fn : {k.erf, k.gelu}) {
      std::vector<float> together(x.size());
      fn(x.data(), together.data(), int64_t(x.size()));
      int differ = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        float alone;
        fn(&x[i], &alone, 1);
        differ += std::memcmp(&alone, &together[i], 4) != 0;
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("kernels: vmath tails, NaN and infinities") {
  const float inf = std::numeric_limits<float>::infinity();
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    const kernels::VMathKernels& ref = kernels::VMathFor(Isa::kReference);
    // Every length up to two 16-lane vectors and a tail: each element as the
    // reference computes it alone, within the documented bound.
    for (int n = 1; n <= 35; ++n) {
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
    // The other functions: each element of short arrays (tails) and in place
    // as the reference computes it, within their bounds (values O(1) here).
    using Fn = void (*)(const float*, float*, int64_t);
    const std::pair<Fn, Fn> pairs[] = {
        {k.exp, ref.exp}, {k.erf, ref.erf}, {k.gelu, ref.gelu}, {k.gelu_tanh, ref.gelu_tanh}};
    for (const auto& fr : pairs) {
      for (int n = 1; n <= 35; ++n) {
        const size_t len = static_cast<size_t>(n);
        std::vector<float> x(len), want(len);
        for (int i = 0; i < n; ++i) x[size_t(i)] = 0.37f * float(i) - 3.1f;
        fr.second(x.data(), want.data(), n);
        fr.first(x.data(), x.data(), n);
        for (int i = 0; i < n; ++i)
          CHECK(std::fabs(x[size_t(i)] - want[size_t(i)]) <=
                1e-6f * (1 + std::fabs(want[size_t(i)])));
      }
    }
    for (int n = 1; n <= 35; ++n) {
      const size_t len = static_cast<size_t>(n);
      std::vector<float> x(len), y(len), want(len);
      for (int i = 0; i < n; ++i) x[size_t(i)] = 0.37f * float(i) + 0.01f;
      ref.log(x.data(), want.data(), n);
      k.log(x.data(), y.data(), n);
      for (int i = 0; i < n; ++i) CHECK(std::fabs(y[size_t(i)] - want[size_t(i)]) <= 1e-6f);
      ref.swish(x.data(), want.data(), n, -0.7f);
      k.swish(x.data(), y.data(), n, -0.7f);
      for (int i = 0; i < n; ++i) CHECK(std::fabs(y[size_t(i)] - want[size_t(i)]) <= 1e-6f);
      CHECK(k.max(x.data(), n) == ref.max(x.data(), n));
      float sum_ref = ref.exp_shift_sum(x.data(), want.data(), n, 1.5f);
      float sum = k.exp_shift_sum(x.data(), y.data(), n, 1.5f);
      CHECK(std::fabs(sum - sum_ref) <= 1e-6f * sum_ref);
      for (int i = 0; i < n; ++i)
        CHECK(std::fabs(y[size_t(i)] - want[size_t(i)]) <= 1e-6f * want[size_t(i)]);
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float sx[5] = {nan, inf, -inf, 0.f, -1.f};
    float ex[5], lg[5], er[5], ge[5], gt[5];
    k.exp(sx, ex, 5);
    k.log(sx, lg, 5);
    k.erf(sx, er, 5);
    k.gelu(sx, ge, 5);
    k.gelu_tanh(sx, gt, 5);
    CHECK(std::isnan(ex[0]));
    CHECK(std::isnan(lg[0]));
    CHECK(std::isnan(er[0]));
    CHECK(std::isnan(ge[0]));
    CHECK(std::isnan(gt[0]));
    CHECK(ex[1] == inf);
    CHECK(ex[2] == 0.f);
    CHECK(ex[3] == 1.f);
    CHECK(lg[1] == inf);
    CHECK(lg[3] == -inf);
    CHECK(std::isnan(lg[4]));
    CHECK(er[1] == 1.f);
    CHECK(er[2] == -1.f);
    CHECK(er[3] == 0.f);
    CHECK(ge[1] == inf);
    CHECK(ge[2] == 0.f);
    CHECK(gt[1] == inf);
    CHECK(gt[2] == 0.f);
    CHECK(k.max(sx, 0) == -inf);
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

TEST_CASE("kernels: vmath lrn equals its level's steps, and libm within a few ulp") {
  // Planes of 3..5 channels (LRN's clipped windows), lengths with tails, and
  // sums of squares from tiny to large; bias 1 or 2, beta 0.75 or 0.5.
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    for (int64_t n : {1, 7, 16, 17, 31, 100, 3136}) {
      for (int64_t count : {1, 3, 5}) {
        const int64_t stride = n + 3;
        std::vector<float> x(size_t(stride * count));
        const float mag = n % 2 ? 30.f : 0.01f;
        for (auto& v : x) v = nd(rng) * mag;
        const float bias = count == 3 ? 2.f : 1.f, scale = 1e-4f / 5.f;
        const float nbeta = count == 5 ? -0.75f : -0.5f;
        const float* xc = x.data() + (count / 2) * stride;
        std::vector<float> y(size_t(n) + 1, 9.f), d(static_cast<size_t>(n)),
            want(static_cast<size_t>(n));
        k.lrn(x.data(), stride, count, xc, y.data(), n, bias, scale, nbeta);
        CHECK(y[size_t(n)] == 9.f);  // nothing written past n
        // The same float steps through the level's own log and exp.
        for (int64_t i = 0; i < n; ++i) {
          float sq = 0.f;
          for (int64_t c = 0; c < count; ++c)
            sq = std::fma(x[size_t(c * stride + i)], x[size_t(c * stride + i)], sq);
          d[size_t(i)] = std::fma(scale, sq, bias);
        }
        if (nbeta == -0.75f) {  // the square root form
          for (int64_t i = 0; i < n; ++i) {
            const float t = std::sqrt(d[size_t(i)]);
            want[size_t(i)] = xc[i] / (t * std::sqrt(t));
          }
        } else {
          k.log(d.data(), d.data(), n);
          for (auto& v : d) v *= nbeta;
          k.exp(d.data(), d.data(), n);
          for (int64_t i = 0; i < n; ++i) want[size_t(i)] = xc[i] * d[size_t(i)];
        }
        CHECK(std::memcmp(y.data(), want.data(), size_t(n) * sizeof(float)) == 0);
        for (int64_t i = 0; i < n; ++i) {
          double sq = 0.0;
          for (int64_t c = 0; c < count; ++c)
            sq += double(x[size_t(c * stride + i)]) * x[size_t(c * stride + i)];
          const double exact =
              double(xc[i]) * std::pow(double(bias) + double(scale) * sq, double(nbeta));
          CHECK(std::fabs(double(y[size_t(i)]) - exact) <= 1e-6 * std::fabs(exact) + 1e-30);
        }
      }
    }
  }
}

TEST_CASE("kernels: vmath channels-last lrn equals the planes' lrn bit for bit") {
  // Rows of c channels against the same data as c planes (the two layouts the
  // converter may pick for one LRN), every level and the reference; sizes 1
  // to 9 (windows clipped at both ends), channel counts around the vector
  // widths, both finishing forms (beta 3/4 and another).
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<Isa> isas = kernels::SupportedIsas();
  for (Isa isa : isas) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    const kernels::VMathKernels& k = kernels::VMathFor(isa);
    for (int64_t c : {1, 3, 8, 15, 16, 17, 40, 64, 97}) {
      for (int64_t size : {1, 2, 5, 9}) {
        const int64_t rows = 11, before = (size - 1) / 2, after = size - 1 - before;
        const float nbeta = size == 5 ? -0.75f : -0.6f;
        std::vector<float> x(size_t(rows * c)), planes(x.size());
        for (auto& v : x) v = nd(rng);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t ch = 0; ch < c; ++ch) planes[size_t(ch * rows + r)] = x[size_t(r * c + ch)];
        std::vector<float> y(x.size() + 1, 5.f), yp(x.size());
        k.lrn_channels_last(x.data(), y.data(), rows, c, before, after, 2.f, 1e-3f, nbeta);
        CHECK(y.back() == 5.f);
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t k0 = std::max<int64_t>(0, ch - before), k1 = std::min(c - 1, ch + after);
          k.lrn(planes.data() + k0 * rows, rows, k1 - k0 + 1, planes.data() + ch * rows,
                yp.data() + ch * rows, rows, 2.f, 1e-3f, nbeta);
        }
        int64_t differ = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t ch = 0; ch < c; ++ch)
            differ += std::memcmp(&y[size_t(r * c + ch)], &yp[size_t(ch * rows + r)], 4) != 0;
        CAPTURE(c);
        CAPTURE(size);
        CHECK(differ == 0);
      }
    }
  }
}

// HardSwish (with and without the affine a fused activation may carry) and
// the affine alone are exactly rounded steps: every level gives the
// reference's bits, NaN for NaN and -inf (-inf * 0), tails included.
TEST_CASE("kernels: vmath hardswish and affine equal the reference bit for bit at every level") {
  std::vector<float> xs = Sweep(100.f, 4099);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.f, -0.f, 1e-40f, -3.f, 3.f})
    xs.push_back(v);
  const int64_t n = int64_t(xs.size()) - 3;  // a tail on every width
  const kernels::VMathKernels& ref = kernels::VMathFor(Isa::kReference);
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!(std::memcmp(&a[i], &b[i], 4) == 0 || (std::isnan(a[i]) && std::isnan(b[i]))))
        return false;
    return true;
  };
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::VMathKernels& vm = kernels::VMathFor(isa);
    CAPTURE(vm.name);
    for (bool affine : {false, true}) {
      std::vector<float> want(xs.size(), 7.f), got(xs.size(), 7.f);
      ref.hardswish(xs.data(), want.data(), n, affine, 0.63f, -0.4f);
      vm.hardswish(xs.data(), got.data(), n, affine, 0.63f, -0.4f);
      CHECK(same(want, got));
      CHECK(std::isnan(got[xs.size() - 8]));  // NaN
      CHECK(std::isnan(got[xs.size() - 6]));  // -inf * 0
      CHECK(got[xs.size() - 7] == (affine ? inf * 0.63f : inf));
    }
    std::vector<float> want(xs.size(), 7.f), got(xs.size(), 7.f);
    ref.affine(xs.data(), want.data(), n, 1.7f, 0.25f);
    vm.affine(xs.data(), got.data(), n, 1.7f, 0.25f);
    CHECK(same(want, got));
    CHECK(got[size_t(n)] == 7.f);  // nothing past n written
  }
  // Spot values: hardswish(3) = 3, hardswish(-3) = -0, hardswish(1) = 1 * (1/6 + 0.5).
  float in[3] = {3.f, -3.f, 1.f}, out[3];
  ref.hardswish(in, out, 3, false, 1.f, 0.f);
  CHECK(out[0] == 3.f);
  CHECK(out[1] == 0.f);
  CHECK(out[2] == 1.f * (1.f / 6.f + 0.5f));
  // The spec's alpha = 1/6 as a float product (ONNX Runtime's bits): at 1.3
  // that gives 0.9316667f where x / 6 gave 0.9316666f.
  in[0] = 1.3f;
  ref.hardswish(in, out, 1, false, 1.f, 0.f);
  CHECK(out[0] == 0.9316667f);
  CHECK(out[0] != 0.9316666f);
}

TEST_CASE("kernels: vmath AVX-512 variant equals the AVX2 variant bit for bit") {
  // Same operations lane for lane (vmath_avx512f.cc): every function over a
  // sweep with NaN, infinities, subnormals and lengths that leave tails.
  kernels::CpuFeatures f512 = kernels::DetectedCpuFeatures();
  if (!(f512.avx512f && f512.avx2 && f512.fma)) return;
  kernels::CpuFeatures f256 = f512;
  f256.avx512f = false;
  const kernels::VMathKernels* a = kernels::VMathFor(f512, nullptr);
  const kernels::VMathKernels* b = kernels::VMathFor(f256, nullptr);
  REQUIRE(std::string(a->name) == "avx512f");
  REQUIRE(std::string(b->name) == "avx2");
  std::vector<float> xs = Sweep(100.f, 4099);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.f, -0.f, 1e-40f, -1e-40f})
    xs.push_back(v);
  const int64_t n = int64_t(xs.size()) - 5;  // not a multiple of 8 or 16
  using Fn = void (*)(const float*, float*, int64_t);
  const std::pair<Fn, Fn> fns[] = {{a->sigmoid, b->sigmoid},
                                   {a->tanh, b->tanh},
                                   {a->exp, b->exp},
                                   {a->log, b->log},
                                   {a->erf, b->erf},
                                   {a->gelu, b->gelu},
                                   {a->gelu_tanh, b->gelu_tanh}};
  for (const auto& fn : fns) {
    std::vector<float> ya(xs.size(), 7.f), yb(xs.size(), 7.f);
    fn.first(xs.data(), ya.data(), n);
    fn.second(xs.data(), yb.data(), n);
    CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
  }
  std::vector<float> ya(xs.size()), yb(xs.size());
  a->swish(xs.data(), ya.data(), n, 1.f);
  b->swish(xs.data(), yb.data(), n, 1.f);
  CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)) == 0);
  CHECK(a->max(xs.data(), n) == b->max(xs.data(), n));
  std::vector<float> la(xs.size(), 7.f), lb(xs.size(), 7.f);
  a->lrn(xs.data(), 7, 5, xs.data() + 14, la.data(), n - 28, 1.f, 2e-5f, -0.75f);
  b->lrn(xs.data(), 7, 5, xs.data() + 14, lb.data(), n - 28, 1.f, 2e-5f, -0.75f);
  CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
  a->lrn(xs.data(), 7, 5, xs.data() + 14, la.data(), n - 28, 1.f, 2e-5f, -0.6f);
  b->lrn(xs.data(), 7, 5, xs.data() + 14, lb.data(), n - 28, 1.f, 2e-5f, -0.6f);
  CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
  // Softmax's numerator and denominator: the sum's order too (its last bit
  // moved a dynamically quantized transformer by a quantization step).
  // Lengths around the AVX-512 variant's blocks (64, 16, then one 8-lane
  // vector) and PP-OCR's 6625 classes.
  std::vector<float> sx(6625);
  for (size_t i = 0; i < sx.size(); ++i) sx[i] = float(i % 37) * 0.173f - 3.f;
  ya.resize(sx.size());
  yb.resize(sx.size());
  for (int64_t len : {1, 7, 8, 9, 15, 16, 17, 24, 33, 72, 100, 1000, 6625}) {
    const float sa = a->exp_shift_sum(sx.data(), ya.data(), len, 2.5f);
    const float sb = b->exp_shift_sum(sx.data(), yb.data(), len, 2.5f);
    CHECK(std::memcmp(&sa, &sb, sizeof(float)) == 0);
    CHECK(std::memcmp(ya.data(), yb.data(), size_t(len) * sizeof(float)) == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
