// Channels-last depthwise convolution and pooling kernels
// (kernels/dwconv_nhwc_s8.h, kernels/pool_nhwc_s8.h) against scalar NHWC
// references written here from docs/NUMERICS.md (the rounding and
// saturation of ops/quant_util.h): every ISA level this CPU supports, 1 and
// 2 threads, bit-identical bytes, and nothing written past the output; the
// depthwise kernels also with QfConvDequant's float epilogue.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/dwconv_nhwc_s8.h"
#include "kernels/pool_nhwc_s8.h"
#include "op_harness.h"
#include "ops/quant_util.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;

// Restores the ISA level chosen at start when a test case ends.
constexpr uint8_t kCanary = 0xAB;
constexpr int64_t kSlack = 64;  // bytes after each output that must stay untouched

std::vector<uint8_t> RandomBytes(int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

int32_t Val(uint8_t b, bool is_signed) {
  return is_signed ? int32_t(int8_t(b)) : int32_t(b);
}

// A zero point: one of the dtype's extremes, its middle, or random.
int32_t RandomZp(bool is_signed, std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return is_signed ? -128 : 0;
    case 1:
      return is_signed ? 127 : 255;
    case 2:
      return is_signed ? 0 : 128;
    default:
      return Val(uint8_t(rng()), is_signed);
  }
}

float Uniform(std::mt19937& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// Mostly a scale that spreads the results over the range; sometimes tiny
// (everything clamps), huge (everything rounds to the zero point) or 0
// (infinite multipliers, NaN for a zero accumulator).
float RandomYScale(std::mt19937& rng, float typical) {
  switch (rng() % 10) {
    case 0:
      return typical * 1e-4f;
    case 1:
      return typical * 1e4f;
    case 2:
      return rng() % 3 ? typical * 0.05f : 0.f;
    default:
      return typical * Uniform(rng, 0.3f, 3.f);
  }
}

QRange RangeOf(bool is_signed) {
  return is_signed ? QRange{-128, 127} : QRange{0, 255};
}

// Output size along one axis as ops/window_util.cc computes it.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  if (span < 0) return 0;
  int64_t out = ceil ? (span + s - 1) / s + 1 : span / s + 1;
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

// Index of the first differing byte, or -1; also checks the canary slack.
int64_t FirstMismatch(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got) {
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i]) return int64_t(i);
  for (size_t i = want.size(); i < got.size(); ++i)
    if (got[i] != kCanary) return int64_t(i);
  return -1;
}

std::vector<Isa> FastIsas() {
  std::vector<Isa> v;
  for (Isa isa : kernels::SupportedIsas())
    if (isa != Isa::kReference) v.push_back(isa);
  return v;
}

// ---- Depthwise ---------------------------------------------------------------

struct DwCase {
  int64_t n = 2, ih = 7, iw = 7, c = 16, kh = 3, kw = 3, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 1, pl = 1, pb = 1, pr = 1;
  bool one_d = false;
  bool xs = false, ws = true, ys = false;  // int8 (true) or uint8
  bool per_channel = true;
  bool relu = false;       // narrowed clamp range [y_zp, hi]
  bool float_out = false;  // QfConvDequant's float epilogue instead of requantizing
  std::string Describe() const {
    std::ostringstream o;
    o << "n" << n << " " << ih << "x" << iw << "x" << c << " k" << kh << "x" << kw << " s" << sh
      << "," << sw << " d" << dh << "," << dw << " pads " << pt << "," << pl << "," << pb << ","
      << pr << (one_d ? " 1-D" : "") << " x" << (xs ? "s8" : "u8") << " w" << (ws ? "s8" : "u8")
      << " y" << (ys ? "s8" : "u8") << (per_channel ? " per-channel" : "") << (relu ? " relu" : "")
      << (float_out ? " float" : "");
    return o.str();
  }
};

struct DwParams {
  int32_t x_zp = 0, y_zp = 0, lo = 0, hi = 0;
  std::vector<int32_t> w_zp, bias;
  float x_scale = 1, y_scale = 1;
  std::vector<float> w_scale;
  // Float epilogue: per-channel multiplier and bias, padded like the op's.
  std::vector<float> dq_mult, dq_bias;
  float dq_lo = -INFINITY, dq_hi = INFINITY;
};

// The scalar reference: acc = sum over taps inside the input of
// (x - x_zp) * (w - w_zp[ch]) + bias[ch] (int32, wrapping), then
// clamp(round(float(acc) * (x_scale * w_scale[ch] / y_scale)) + y_zp).
// With float_out: the bytes of clamp(fma(float(acc without bias),
// dq_mult[ch], dq_bias[ch]), dq_lo, dq_hi) as floats.
std::vector<uint8_t> DwReference(const DwCase& k, int64_t oh, int64_t ow,
                                 const std::vector<uint8_t>& x, const std::vector<uint8_t>& w,
                                 const DwParams& p) {
  std::vector<uint8_t> y(static_cast<size_t>(k.n * oh * ow * k.c * (k.float_out ? 4 : 1)));
  const QRange r{p.lo, p.hi};
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t ch = 0; ch < k.c; ++ch) {
          const int32_t wz = p.w_zp[p.w_zp.size() == 1 ? 0 : size_t(ch)];
          uint32_t acc = 0;
          for (int64_t ky = 0; ky < k.kh; ++ky)
            for (int64_t kx = 0; kx < k.kw; ++kx) {
              const int64_t iy = oy * k.sh - k.pt + ky * k.dh, ix = ox * k.sw - k.pl + kx * k.dw;
              if (iy < 0 || iy >= k.ih || ix < 0 || ix >= k.iw) continue;
              const int32_t xv = Val(x[size_t(((b * k.ih + iy) * k.iw + ix) * k.c + ch)], k.xs);
              const int32_t wv = Val(w[size_t((ch * k.kh + ky) * k.kw + kx)], k.ws);
              acc += uint32_t((xv - p.x_zp) * (wv - wz));
            }
          if (k.float_out) {
            float f = std::fma(float(int32_t(acc)), p.dq_mult[size_t(ch)], p.dq_bias[size_t(ch)]);
            f = f < p.dq_lo ? p.dq_lo : (f > p.dq_hi ? p.dq_hi : f);
            std::memcpy(&y[size_t(((b * oh + oy) * ow + ox) * k.c + ch) * 4], &f, 4);
            continue;
          }
          acc += uint32_t(p.bias[size_t(ch)]);
          const float mult =
              p.x_scale * p.w_scale[p.w_scale.size() == 1 ? 0 : size_t(ch)] / p.y_scale;
          const int32_t q = RoundAddSaturate(float(int32_t(acc)) * mult, p.y_zp, r.lo, r.hi);
          y[size_t(((b * oh + oy) * ow + ox) * k.c + ch)] = uint8_t(q);
        }
  return y;
}

DwParams RandomDwParams(const DwCase& k, std::mt19937& rng) {
  DwParams p;
  p.x_zp = RandomZp(k.xs, rng);
  p.y_zp = RandomZp(k.ys, rng);
  const int64_t nch = k.per_channel ? k.c : 1;
  for (int64_t i = 0; i < nch; ++i) {
    p.w_zp.push_back(RandomZp(k.ws, rng));
    p.w_scale.push_back(Uniform(rng, 0.002f, 0.02f));
  }
  for (int64_t i = 0; i < k.c; ++i) {
    // Mostly modest biases; sometimes near the int32 limits, so the sums wrap.
    const int32_t big =
        rng() % 2 ? INT32_MAX - int32_t(rng() % 1000) : INT32_MIN + int32_t(rng() % 1000);
    p.bias.push_back(rng() % 16 == 0 ? big : int32_t(rng() % 40001) - 20000);
  }
  p.x_scale = Uniform(rng, 0.01f, 0.1f);
  p.y_scale = RandomYScale(
      rng, p.x_scale * p.w_scale[0] * 128.f * 64.f * std::sqrt(float(k.kh * k.kw)) / 100.f);
  const QRange full = RangeOf(k.ys);
  p.lo = k.relu ? std::max(p.y_zp, full.lo) : full.lo;
  p.hi = full.hi;
  if (k.float_out) {
    const size_t padded = size_t((k.c + 63) / 64 * 64 + 64);
    p.dq_mult.assign(padded, 0.f);
    p.dq_bias.assign(padded, 0.f);
    for (int64_t i = 0; i < k.c; ++i) {
      p.dq_mult[size_t(i)] = p.x_scale * p.w_scale[k.per_channel ? size_t(i) : 0] *
                             (rng() % 2 ? Uniform(rng, -2.f, 2.f) : 1.f);
      p.dq_bias[size_t(i)] = Uniform(rng, -1.f, 1.f);
    }
    if (k.relu) p.dq_lo = 0.f;
    if (rng() % 3 == 0) p.dq_lo = -0.3f, p.dq_hi = 0.8f;
  }
  return p;
}

Tensor MakeTensor(DType dt, Shape s, void* data) {
  Tensor t;
  t.dtype = dt;
  t.shape = std::move(s);
  t.data = data;
  return t;
}

DType Dt(bool is_signed) {
  return is_signed ? DType::kInt8 : DType::kUInt8;
}

// Runs one case at every fast level, 1 and 2 threads; returns the runs compared.
int CheckDw(const DwCase& k, std::mt19937& rng) {
  INFO(k.Describe());
  const int64_t oh = OutSize(k.ih, k.kh, k.sh, k.dh, k.pt, k.pb, false);
  const int64_t ow = OutSize(k.iw, k.kw, k.sw, k.dw, k.pl, k.pr, false);
  REQUIRE(oh > 0);
  REQUIRE(ow > 0);
  std::vector<uint8_t> x = RandomBytes(k.n * k.ih * k.iw * k.c, rng);
  std::vector<uint8_t> w = RandomBytes(k.c * k.kh * k.kw, rng);
  const DwParams p = RandomDwParams(k, rng);
  const std::vector<uint8_t> want = DwReference(k, oh, ow, x, w, p);

  const Tensor wt =
      MakeTensor(Dt(k.ws), k.one_d ? Shape{k.c, 1, k.kw} : Shape{k.c, 1, k.kh, k.kw}, w.data());
  const Tensor xt =
      MakeTensor(Dt(k.xs), k.one_d ? Shape{k.n, k.iw, k.c} : Shape{k.n, k.ih, k.iw, k.c}, x.data());
  std::vector<uint8_t> got;
  Tensor yt = MakeTensor(k.float_out ? DType::kFloat32 : Dt(k.ys),
                         k.one_d ? Shape{k.n, ow, k.c} : Shape{k.n, oh, ow, k.c}, nullptr);
  int runs = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    const kernels::KernelConfig& kc = IsaConfig(isa);
    std::shared_ptr<void> state = kernels::PrepareDwConvNhwcS8(kc, wt, k.c);
    if (isa == Isa::kReference) {
      CHECK(!state);
      continue;
    }
    REQUIRE(state);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      got.assign(want.size() + kSlack, kCanary);
      yt.data = got.data();
      kernels::QConvCall c;
      c.x = &xt;
      c.y = &yt;
      c.ih = k.ih;
      c.iw = k.iw;
      c.oh = oh;
      c.ow = ow;
      c.kh = k.kh;
      c.kw = k.kw;
      c.sh = k.sh;
      c.sw = k.sw;
      c.dh = k.dh;
      c.dw = k.dw;
      c.pad_top = k.pt;
      c.pad_left = k.pl;
      c.x_zp = p.x_zp;
      c.w_zp = p.w_zp;
      c.x_scale = p.x_scale;
      c.y_scale = p.y_scale;
      c.w_scale = p.w_scale;
      c.y_zp = p.y_zp;
      c.lo = p.lo;
      c.hi = p.hi;
      c.bias = p.bias.data();
      c.pool = test::TestPool(threads);
      if (k.float_out) {
        c.dq_mult = p.dq_mult.data();
        c.dq_bias = p.dq_bias.data();
        c.dq_lo = p.dq_lo;
        c.dq_hi = p.dq_hi;
      }
      REQUIRE(kernels::RunDwConvNhwcS8(state.get(), c));
      const int64_t bad = FirstMismatch(want, got);
      CAPTURE(bad);
      if (bad >= 0 && bad < int64_t(want.size())) {
        const int64_t ch = bad / (k.float_out ? 4 : 1) % k.c;
        CAPTURE(ch);
        CHECK(int(got[size_t(bad)]) == int(want[size_t(bad)]));
      }
      REQUIRE(bad == -1);
      ++runs;
    }
  }
  return runs;
}

TEST_CASE("kernels nhwc: depthwise kernel sizes, strides, dilations, pads, channel counts") {
  std::mt19937 rng(1234);
  const int64_t channels[] = {1, 3, 15, 16, 17, 32, 33, 64, 100, 160};
  const int64_t kernels_hw[] = {1, 3, 5, 7};
  int runs = 0;
  for (int64_t c : channels)
    for (int64_t ks : kernels_hw)
      for (int variant = 0; variant < 3; ++variant) {
        DwCase k;
        k.c = c;
        k.kh = k.kw = ks;
        k.sh = k.sw = 1 + int64_t(rng() % 3);
        if (variant == 1) k.sw = 1 + int64_t(rng() % 3);  // different strides per axis
        k.dh = k.dw = variant == 2 ? 2 : 1;
        const int64_t ext = (ks - 1) * k.dh + 1;
        k.ih = ext + int64_t(rng() % 6);
        k.iw = ext + int64_t(rng() % 8);
        // Asymmetric pads, up to the kernel extent minus one.
        k.pt = int64_t(rng() % size_t(ext));
        k.pl = int64_t(rng() % size_t(ext));
        k.pb = int64_t(rng() % size_t(ext));
        k.pr = int64_t(rng() % size_t(ext));
        k.xs = rng() % 2;
        k.ws = rng() % 2;
        k.ys = rng() % 2;
        k.per_channel = rng() % 3 != 0;
        k.relu = rng() % 4 == 0;
        k.float_out = rng() % 3 == 0;
        runs += CheckDw(k, rng);
      }
  CHECK(runs == 120 * 2 * int(FastIsas().size()));
}

TEST_CASE("kernels nhwc: depthwise 1-D and rectangular kernels") {
  std::mt19937 rng(99);
  const int64_t kws[] = {1, 2, 3, 4, 5, 7, 9};
  for (int64_t kw : kws)
    for (int64_t c : {1, 17, 33, 64}) {
      DwCase k;
      k.one_d = true;
      k.ih = k.kh = 1;
      k.pt = k.pb = 0;
      k.c = c;
      k.kw = kw;
      k.iw = kw + int64_t(rng() % 20);
      k.sw = 1 + int64_t(rng() % 3);
      k.dw = 1 + int64_t(rng() % 2);
      k.iw += (kw - 1) * (k.dw - 1);
      k.pl = int64_t(rng() % size_t(kw));
      k.pr = int64_t(rng() % size_t(kw));
      k.xs = rng() % 2;
      k.ws = rng() % 2;
      k.ys = rng() % 2;
      k.float_out = rng() % 2;
      CheckDw(k, rng);
    }
  // Rectangular windows (pair counts other than the specialized ones).
  const int64_t shapes[][2] = {{3, 1}, {1, 3}, {2, 2}, {3, 5}, {5, 3}, {7, 1}};
  for (const auto& s : shapes) {
    DwCase k;
    k.kh = s[0];
    k.kw = s[1];
    k.c = 40;
    k.ih = 9;
    k.iw = 10;
    k.pt = k.pb = s[0] / 2;
    k.pl = k.pr = s[1] / 2;
    CheckDw(k, rng);
  }
}

TEST_CASE("kernels nhwc: depthwise every dtype combination with extreme zero points") {
  std::mt19937 rng(7);
  for (int combo = 0; combo < 8; ++combo)
    for (int rep = 0; rep < 4; ++rep) {
      DwCase k;
      k.xs = combo & 1;
      k.ws = combo & 2;
      k.ys = combo & 4;
      k.c = rep % 2 ? 33 : 24;
      k.ih = 6;
      k.iw = 9;
      k.kh = k.kw = rep < 2 ? 3 : 5;
      k.pt = k.pl = k.pb = k.pr = k.kh / 2;
      k.per_channel = rep % 2 == 0;
      k.relu = rep == 3;
      CheckDw(k, rng);
      k.float_out = true;
      CheckDw(k, rng);
    }
}

TEST_CASE("kernels nhwc: depthwise large enough to split between threads") {
  std::mt19937 rng(31);
  DwCase k;
  k.n = 2;
  k.ih = 23;
  k.iw = 21;
  k.c = 72;
  k.sh = k.sw = 2;
  CheckDw(k, rng);
  k.sh = k.sw = 1;
  k.c = 160;
  k.kh = k.kw = 5;
  k.pt = k.pl = k.pb = k.pr = 2;
  CheckDw(k, rng);
  k.float_out = true;
  CheckDw(k, rng);
  k.c = 75;
  k.kh = k.kw = 3;
  k.pt = k.pl = k.pb = k.pr = 1;
  CheckDw(k, rng);
}

TEST_CASE("kernels nhwc: depthwise repacks when zero points or scales change") {
  std::mt19937 rng(5);
  for (Isa isa : FastIsas()) {
    const kernels::KernelConfig& kc = IsaConfig(isa);
    DwCase k;
    k.c = 20;
    k.n = 1;
    const int64_t oh = 7, ow = 7;
    std::vector<uint8_t> x = RandomBytes(k.n * k.ih * k.iw * k.c, rng);
    std::vector<uint8_t> w = RandomBytes(k.c * 9, rng);
    const Tensor wt = MakeTensor(DType::kInt8, Shape{k.c, 1, 3, 3}, w.data());
    const Tensor xt = MakeTensor(DType::kUInt8, Shape{1, 7, 7, k.c}, x.data());
    std::vector<uint8_t> got(size_t(oh * ow * k.c));
    Tensor yt = MakeTensor(DType::kUInt8, Shape{1, oh, ow, k.c}, got.data());
    std::shared_ptr<void> state = kernels::PrepareDwConvNhwcS8(kc, wt, k.c);
    REQUIRE(state);
    for (int rep = 0; rep < 4; ++rep) {
      const DwParams p = RandomDwParams(k, rng);
      kernels::QConvCall c;
      c.x = &xt;
      c.y = &yt;
      c.ih = c.iw = 7;
      c.oh = oh;
      c.ow = ow;
      c.kh = c.kw = 3;
      c.pad_top = c.pad_left = 1;
      c.x_zp = p.x_zp;
      c.w_zp = p.w_zp;
      c.x_scale = p.x_scale;
      c.y_scale = p.y_scale;
      c.w_scale = p.w_scale;
      c.y_zp = p.y_zp;
      c.lo = p.lo;
      c.hi = p.hi;
      c.bias = rep == 2 ? nullptr : p.bias.data();
      DwParams pr = p;
      if (rep == 2) pr.bias.assign(size_t(k.c), 0);
      REQUIRE(kernels::RunDwConvNhwcS8(state.get(), c));
      CHECK(got == DwReference(k, oh, ow, x, w, pr));
    }
  }
}

// ---- Pooling -----------------------------------------------------------------

struct PoolCase {
  kernels::PoolNhwcArgs a;
  bool is_signed = false;
  std::string Describe() const {
    std::ostringstream o;
    o << "n" << a.n << " " << a.ih << "x" << a.iw << "x" << a.c << " -> " << a.oh << "x" << a.ow
      << " k" << a.kh << "x" << a.kw << " s" << a.sh << "," << a.sw << " d" << a.dh << "," << a.dw
      << " pads " << a.pad_top << "," << a.pad_left << "," << a.pad_bottom << "," << a.pad_right
      << (a.count_include_pad ? " include_pad" : "") << (is_signed ? " s8" : " u8");
    return o.str();
  }
};

// MaxPool: the maximum of the taps inside the input, lowest() without any.
std::vector<uint8_t> MaxReference(const PoolCase& pc, const std::vector<uint8_t>& x) {
  const kernels::PoolNhwcArgs& a = pc.a;
  std::vector<uint8_t> y(static_cast<size_t>(a.n * a.oh * a.ow * a.c));
  for (int64_t b = 0; b < a.n; ++b)
    for (int64_t oy = 0; oy < a.oh; ++oy)
      for (int64_t ox = 0; ox < a.ow; ++ox)
        for (int64_t ch = 0; ch < a.c; ++ch) {
          int32_t m = pc.is_signed ? -128 : 0;
          for (int64_t ky = 0; ky < a.kh; ++ky)
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t iy = oy * a.sh - a.pad_top + ky * a.dh;
              const int64_t ix = ox * a.sw - a.pad_left + kx * a.dw;
              if (iy < 0 || iy >= a.ih || ix < 0 || ix >= a.iw) continue;
              m = std::max(m,
                           Val(x[size_t(((b * a.ih + iy) * a.iw + ix) * a.c + ch)], pc.is_signed));
            }
          y[size_t(((b * a.oh + oy) * a.ow + ox) * a.c + ch)] = uint8_t(m);
        }
  return y;
}

// AverageToQ of ops/quant_pool.cc: count 0 quantizes 0.
uint8_t AverageQ(int64_t sum, int64_t count, const kernels::QPoolParams& q) {
  const QRange r{q.lo, q.hi};
  if (count == 0) return uint8_t(QuantizeValue(0.f, q.y_scale, q.y_zp, r));
  return uint8_t(QuantizeValue(q.x_scale * float(sum) / float(count), q.y_scale, q.y_zp, r));
}

std::vector<uint8_t> AvgReference(const PoolCase& pc, const kernels::QPoolParams& q,
                                  const std::vector<uint8_t>& x) {
  const kernels::PoolNhwcArgs& a = pc.a;
  std::vector<uint8_t> y(static_cast<size_t>(a.n * a.oh * a.ow * a.c));
  for (int64_t b = 0; b < a.n; ++b)
    for (int64_t oy = 0; oy < a.oh; ++oy)
      for (int64_t ox = 0; ox < a.ow; ++ox)
        for (int64_t ch = 0; ch < a.c; ++ch) {
          int64_t sum = 0, count = 0, padded = 0;
          for (int64_t ky = 0; ky < a.kh; ++ky)
            for (int64_t kx = 0; kx < a.kw; ++kx) {
              const int64_t iy = oy * a.sh - a.pad_top + ky * a.dh;
              const int64_t ix = ox * a.sw - a.pad_left + kx * a.dw;
              // Taps past the end padding (ceil_mode) never count.
              if (iy < a.ih + a.pad_bottom && ix < a.iw + a.pad_right) ++padded;
              if (iy < 0 || iy >= a.ih || ix < 0 || ix >= a.iw) continue;
              ++count;
              sum +=
                  Val(x[size_t(((b * a.ih + iy) * a.iw + ix) * a.c + ch)], pc.is_signed) - q.x_zp;
            }
          y[size_t(((b * a.oh + oy) * a.ow + ox) * a.c + ch)] =
              AverageQ(sum, a.count_include_pad ? padded : count, q);
        }
  return y;
}

std::vector<uint8_t> GlobalReference(const PoolCase& pc, const kernels::QPoolParams& q,
                                     const std::vector<uint8_t>& x) {
  const kernels::PoolNhwcArgs& a = pc.a;
  std::vector<uint8_t> y(static_cast<size_t>(a.n * a.c));
  for (int64_t b = 0; b < a.n; ++b)
    for (int64_t ch = 0; ch < a.c; ++ch) {
      int64_t sum = 0;
      for (int64_t p = 0; p < a.ih * a.iw; ++p)
        sum += Val(x[size_t((b * a.ih * a.iw + p) * a.c + ch)], pc.is_signed) - q.x_zp;
      y[size_t(b * a.c + ch)] = AverageQ(sum, a.ih * a.iw, q);
    }
  return y;
}

kernels::QPoolParams RandomQPool(bool is_signed, int64_t taps, std::mt19937& rng) {
  kernels::QPoolParams q;
  q.x_zp = RandomZp(is_signed, rng);
  q.y_zp = RandomZp(is_signed, rng);
  q.x_scale = Uniform(rng, 0.01f, 0.1f);
  // Averages spread over about the input's range; sometimes clamping or 0.
  q.y_scale = RandomYScale(rng, q.x_scale * 0.7f);
  if (rng() % 8 == 0) q.x_scale = 0.f;
  (void)taps;
  const QRange r = RangeOf(is_signed);
  q.lo = r.lo;
  q.hi = r.hi;
  return q;
}

enum class PoolKind { kMax, kAvg, kGlobal };

void CheckPool(PoolKind kind, const PoolCase& pc, std::mt19937& rng) {
  INFO(pc.Describe());
  const kernels::PoolNhwcArgs& a0 = pc.a;
  const std::vector<uint8_t> x = RandomBytes(a0.n * a0.ih * a0.iw * a0.c, rng);
  const kernels::QPoolParams q = RandomQPool(pc.is_signed, a0.kh * a0.kw, rng);
  const std::vector<uint8_t> want = kind == PoolKind::kMax   ? MaxReference(pc, x)
                                    : kind == PoolKind::kAvg ? AvgReference(pc, q, x)
                                                             : GlobalReference(pc, q, x);
  std::vector<uint8_t> got;
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    const kernels::KernelConfig& kc = IsaConfig(isa);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      kernels::PoolNhwcArgs a = a0;
      a.pool = test::TestPool(threads);
      got.assign(want.size() + kSlack, kCanary);
      bool ran = false;
      if (kind == PoolKind::kMax)
        ran = kernels::MaxPoolNhwcS8(kc, a, pc.is_signed, x.data(), got.data());
      else if (kind == PoolKind::kAvg)
        ran = kernels::QAvgPoolNhwcS8(kc, a, q, pc.is_signed, x.data(), got.data());
      else
        ran = kernels::QGlobalAvgPoolNhwcS8(kc, a, q, pc.is_signed, x.data(), got.data());
      if (isa == Isa::kReference) {
        CHECK(!ran);
        break;
      }
      REQUIRE(ran);
      const int64_t bad = FirstMismatch(want, got);
      CAPTURE(bad);
      if (bad >= 0 && bad < int64_t(want.size())) {
        const int64_t ch = bad % a.c;
        CAPTURE(ch);
        CHECK(int(got[size_t(bad)]) == int(want[size_t(bad)]));
      }
      REQUIRE(bad == -1);
    }
  }
}

PoolCase MakePoolCase(int64_t n, int64_t ih, int64_t iw, int64_t c, int64_t kh, int64_t kw,
                      int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl,
                      int64_t pb, int64_t pr, bool ceil, bool include_pad, bool is_signed) {
  PoolCase pc;
  kernels::PoolNhwcArgs& a = pc.a;
  a.n = n;
  a.ih = ih;
  a.iw = iw;
  a.c = c;
  a.kh = kh;
  a.kw = kw;
  a.sh = sh;
  a.sw = sw;
  a.dh = dh;
  a.dw = dw;
  a.pad_top = pt;
  a.pad_left = pl;
  a.pad_bottom = pb;
  a.pad_right = pr;
  a.oh = OutSize(ih, kh, sh, dh, pt, pb, ceil);
  a.ow = OutSize(iw, kw, sw, dw, pl, pr, ceil);
  a.count_include_pad = include_pad;
  pc.is_signed = is_signed;
  return pc;
}

TEST_CASE("kernels nhwc: MaxPool and QLinearAveragePool geometries and channel counts") {
  std::mt19937 rng(2024);
  const int64_t channels[] = {1, 3, 15, 16, 17, 32, 33, 64, 100, 160};
  // kh, kw, sh, sw, ceil_mode
  const int64_t geoms[][5] = {{1, 1, 1, 1, 0}, {2, 2, 2, 2, 0}, {2, 2, 2, 2, 1}, {3, 3, 2, 2, 1},
                              {3, 3, 1, 1, 0}, {5, 5, 3, 3, 1}, {7, 7, 1, 1, 0}, {3, 3, 3, 2, 1}};
  for (int64_t c : channels)
    for (const auto& g : geoms) {
      const int64_t kh = g[0], kw = g[1];
      const bool ceil = g[4] != 0;
      const int64_t dil = (rng() % 4 == 0) ? 2 : 1;
      const int64_t ih = (kh - 1) * dil + 1 + int64_t(rng() % 7);
      const int64_t iw = (kw - 1) * dil + 1 + int64_t(rng() % 7);
      const int64_t pt = int64_t(rng() % size_t(kh)), pl = int64_t(rng() % size_t(kw));
      const int64_t pb = int64_t(rng() % size_t(kh)), pr = int64_t(rng() % size_t(kw));
      const bool is_signed = rng() % 2;
      CheckPool(PoolKind::kMax,
                MakePoolCase(2, ih, iw, c, kh, kw, g[2], g[3], dil, dil, pt, pl, pb, pr, ceil,
                             false, is_signed),
                rng);
      for (bool include_pad : {false, true})
        CheckPool(PoolKind::kAvg,
                  MakePoolCase(2, ih, iw, c, kh, kw, g[2], g[3], 1, 1, pt, pl, pb, pr, ceil,
                               include_pad, !is_signed),
                  rng);
    }
}

TEST_CASE("kernels nhwc: pooling windows without taps, 1-D, large windows, threads") {
  std::mt19937 rng(77);
  for (bool is_signed : {false, true}) {
    // Pads as large as the kernel: the first and last windows see no input.
    for (bool include_pad : {false, true}) {
      CheckPool(
          PoolKind::kAvg,
          MakePoolCase(2, 5, 6, 17, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, false, include_pad, is_signed),
          rng);
      // 1-D (ih = kh = 1) with ceil_mode.
      CheckPool(
          PoolKind::kAvg,
          MakePoolCase(2, 1, 19, 33, 1, 3, 1, 2, 1, 1, 0, 1, 1, 0, true, include_pad, is_signed),
          rng);
      // More than 128 taps per window (several int16 partial sums): 13x13.
      CheckPool(PoolKind::kAvg,
                MakePoolCase(1, 15, 14, 40, 13, 13, 1, 1, 1, 1, 1, 0, 0, 1, false, include_pad,
                             is_signed),
                rng);
      // Enough work for two threads.
      CheckPool(
          PoolKind::kAvg,
          MakePoolCase(2, 24, 20, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, include_pad, is_signed),
          rng);
    }
    CheckPool(PoolKind::kMax,
              MakePoolCase(2, 5, 6, 17, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, false, false, is_signed),
              rng);
    CheckPool(PoolKind::kMax,
              MakePoolCase(2, 1, 19, 33, 1, 3, 1, 2, 1, 1, 0, 1, 1, 0, true, false, is_signed),
              rng);
    CheckPool(PoolKind::kMax,
              MakePoolCase(2, 30, 28, 80, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, true, false, is_signed),
              rng);
  }
}

TEST_CASE("kernels nhwc: QLinearGlobalAveragePool") {
  std::mt19937 rng(11);
  const int64_t channels[] = {1, 3, 15, 16, 17, 32, 33, 64, 100, 160, 300, 600};
  const int64_t sizes[][2] = {{7, 7}, {1, 1}, {3, 5}, {1, 9}, {13, 12}};
  for (int64_t c : channels)
    for (const auto& s : sizes) {
      PoolCase pc;
      pc.a.n = 2;
      pc.a.ih = s[0];
      pc.a.iw = s[1];
      pc.a.c = c;
      pc.is_signed = rng() % 2;
      CheckPool(PoolKind::kGlobal, pc, rng);
    }
  // Enough work for two threads (images x channel slices).
  PoolCase pc;
  pc.a.n = 2;
  pc.a.ih = pc.a.iw = 14;
  pc.a.c = 520;
  CheckPool(PoolKind::kGlobal, pc, rng);
  pc.is_signed = true;
  CheckPool(PoolKind::kGlobal, pc, rng);
}

}  // namespace
}  // namespace test
}  // namespace qfold
