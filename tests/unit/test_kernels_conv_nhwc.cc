// The channels-last int8 convolution (kernels/conv_nhwc_s8.h) and its
// indirect GEMM microkernels (kernels/igemm_s8.h) against scalar NHWC
// computations written here: every x86 microkernel over rows/columns/K
// sweeps and tile edges, then whole convolutions (kernel sizes, strides,
// dilations, asymmetric pads, groups, 1-D, batches, both 8-bit dtypes,
// extreme zero points) at every supported level, through the microkernels
// and through the generic GEMM path, with 1 and 2 threads: bit-identical.
// The float-output epilogue of QfConvDequant is checked the same way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/conv_nhwc_s8.h"
#include "kernels/cpu_features.h"
#include "kernels/igemm_s8.h"
#include "op_harness.h"
#include "ops/quant_util.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;

// ---- microkernels -------------------------------------------------------------

// Bit-identical, except that any NaN equals any NaN (the kernels and the
// scalar code may produce NaNs with different payloads, e.g. 0 * inf).
bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

void CheckMicrokernel(const kernels::IgemmS8Kernel& k, std::mt19937& rng, int it) {
  const int mr = k.mr, nr = k.nr;
  const int64_t rows = 1 + int64_t(rng() % uint32_t(3 * mr + 2));
  // Every fourth case a wider K: the AMX kernels' 64-byte k blocks, full and
  // partial (C = 48, 80, 65: one or more blocks and a tail).
  static const int64_t kWideC[] = {16, 20, 48, 64, 65, 80, 128};
  const int64_t taps = 1 + rng() % 4;
  const int64_t cg = it % 4 == 3 ? kWideC[rng() % 7] : 1 + int64_t(rng() % 19), kc4 = (cg + 3) / 4;
  const int64_t cols = it % 5 == 0 ? nr : 1 + int64_t(rng() % uint32_t(nr));
  const int64_t a_offset = rng() % 6;
  const bool x_signed = rng() % 2;
  // Every 13th case: zero activations and bias, so acc = 0 meets an infinite
  // multiplier (NaN, which requantizes to the zero point).
  const bool zero_acc = it % 13 == 0;
  const bool use_wzp = rng() % 3 == 0 && !zero_acc;
  const int64_t tiles = (rows + mr - 1) / mr;
  // Activation rows: one buffer per (pixel, tap), 4 * kc4 readable bytes
  // after a_offset; a few pixels share a buffer like padding taps do.
  const int64_t row_len = a_offset + 4 * kc4;
  std::vector<std::vector<uint8_t>> bufs(size_t(tiles * mr * taps + 1));
  for (auto& b : bufs) {
    b.resize(static_cast<size_t>(row_len));
    for (auto& v : b) v = uint8_t(rng());
    if (it % 7 == 0) std::fill(b.begin(), b.end(), uint8_t(x_signed ? 0x7f : 0xff));
    if (it % 11 == 0 || zero_acc) std::fill(b.begin(), b.end(), uint8_t(x_signed ? 0x80 : 0));
  }
  // Kernels with abytes = 2 read the same rows widened to u16, xor-ed to u8 values.
  const int ab = k.abytes;
  std::vector<std::vector<uint16_t>> wide(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i)
    for (uint8_t v : bufs[i]) wide[i].push_back(uint16_t(uint8_t(v ^ (x_signed ? 0x80 : 0))));
  // Every other case the rows of one tap lie equally spaced in one buffer (as
  // in 1x1 and stride-1 convolutions: the AMX kernels load those directly).
  const bool spaced = ab == 1 && it % 2 == 1;
  const int64_t stride = row_len + 4 * int64_t(rng() % 3);
  // AMX over a padded plane: with the rows spaced, tail k blocks may load
  // whole 64-byte blocks (the next row's bytes or the slack, against zero
  // weights), and the rows may store elsewhere or not at all (out_row).
  const bool amx = k.kc4_align > 1;
  const bool overread = amx && spaced && rng() % 2;
  const bool remap = amx && it % 5 < 2;
  std::vector<uint8_t> flat;
  auto place = [&](size_t b) {  // buffer b's slot: tap-major, rows consecutive
    const int64_t r = int64_t(b) / taps, t = int64_t(b) % taps;
    return b + 1 == bufs.size() ? int64_t(b) : t * tiles * mr + r;
  };
  if (spaced) {
    flat.resize(size_t(int64_t(bufs.size()) * stride + 64));
    for (auto& v : flat) v = uint8_t(rng());
    for (size_t b = 0; b < bufs.size(); ++b)
      std::copy(bufs[b].begin(), bufs[b].end(), flat.begin() + place(b) * stride);
  }
  std::vector<const uint8_t*> ind(size_t(tiles * taps * mr));
  std::vector<const uint8_t*> src(size_t(tiles * mr * taps));  // [row][tap]
  for (int64_t r = 0; r < tiles * mr; ++r)
    for (int64_t t = 0; t < taps; ++t) {
      const size_t b = rng() % (spaced ? 64 : 8) == 0 ? bufs.size() - 1 : size_t(r * taps + t);
      src[size_t(r * taps + t)] = bufs[b].data();
      ind[size_t((r / mr * taps + t) * mr + r % mr)] =
          ab == 2  ? reinterpret_cast<const uint8_t*>(wide[b].data())
          : spaced ? flat.data() + place(b) * stride
                   : bufs[b].data();
    }
  // Weights [col][tap][cg] s8, packed as the kernel groups k, with zero padding.
  std::vector<int8_t> w(size_t(cols * taps * cg));
  for (auto& v : w) v = int8_t(rng());
  if (it % 7 == 0) std::fill(w.begin(), w.end(), int8_t(-128));
  const int wb = k.wbytes;
  std::vector<uint8_t> packed(size_t(kernels::IgemmPanelElems(k, taps, kc4) * wb), 0);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t c = 0; c < cg; ++c) {
        const int16_t v = w[size_t((j * taps + t) * cg + c)];
        uint8_t* d = &packed[size_t(kernels::IgemmPackedIndex(k, kc4, t, c, j) * wb)];
        d[0] = uint8_t(v);
        if (wb == 2) d[1] = uint8_t(uint16_t(v) >> 8);
      }
  std::vector<int32_t> bias(static_cast<size_t>(nr)), wzp(static_cast<size_t>(nr)),
      xsum(size_t(tiles * mr));
  std::vector<float> mult(static_cast<size_t>(nr));
  // Every fourth case only multipliers within [-0.5, 0.5] (the packed
  // epilogue of the AVX-512 kernels), large ones to saturate the packs.
  const bool small_mults = it % 4 == 1;
  for (int j = 0; j < nr; ++j) {
    bias[size_t(j)] = rng() % 5 ? int32_t(rng() % 200001) - 100000 : int32_t(rng());
    wzp[size_t(j)] = int32_t(rng() % 256) - 128;
    const int s = int(rng() % 12);
    mult[size_t(j)] = s == 0   ? INFINITY
                      : s == 1 ? 0.f
                      : s == 2 ? 1e3f
                               : std::uniform_real_distribution<float>(0, 2e-4f)(rng);
    if (small_mults)
      mult[size_t(j)] = s < 2   ? (s ? 0.5f : -0.5f)
                        : s < 6 ? std::uniform_real_distribution<float>(-0.5f, 0.5f)(rng)
                                : std::uniform_real_distribution<float>(-2e-4f, 2e-4f)(rng);
  }
  if (zero_acc) {
    std::fill(bias.begin(), bias.end(), 0);
    mult[0] = INFINITY;
  }
  for (auto& v : xsum) v = int32_t(rng());
  const int32_t yzp = int32_t(rng() % 256) - (rng() % 2 ? 128 : 0);
  int32_t lo = yzp >= 0 ? 0 : -128, hi = lo + 255;
  if (rng() % 3 == 0) lo = std::max(lo, yzp - 10), hi = std::min(hi, yzp + 20);
  const int64_t ldy = cols + rng() % 3;
  // Every third case the float epilogue (QfConvDequant): bias and clamp in float.
  const bool float_out = it % 3 == 2;
  std::vector<float> fbias(static_cast<size_t>(nr));
  for (auto& v : fbias) v = std::uniform_real_distribution<float>(-3.f, 3.f)(rng);
  float flo = -INFINITY, fhi = INFINITY;
  if (float_out && rng() % 2) flo = 0.f;
  if (float_out && rng() % 3 == 0) flo = -0.5f, fhi = 0.75f;
  std::vector<float> yf(size_t(rows * ldy + 64), -7.f), want_f = yf;
  std::vector<uint8_t> y(size_t(rows * ldy + 64), 0xEE), want = y;
  std::vector<int64_t> out_row(size_t(tiles * mr));
  for (int64_t r = 0; r < tiles * mr; ++r) out_row[size_t(r)] = rng() % 4 ? rows - 1 - r : -1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t o = remap ? out_row[size_t(r)] : r;
      if (o < 0) continue;
      int64_t acc = 0;
      for (int64_t t = 0; t < taps; ++t) {
        const uint8_t* a = src[size_t(r * taps + t)] + a_offset;
        for (int64_t c = 0; c < cg; ++c)
          acc +=
              int64_t(uint8_t(a[c] ^ (x_signed ? 0x80 : 0))) * w[size_t((j * taps + t) * cg + c)];
      }
      acc += bias[size_t(j)];
      if (use_wzp) acc -= int64_t(wzp[size_t(j)]) * xsum[size_t(r)];
      want[size_t(o * ldy + j)] =
          uint8_t(Requantize(WrapInt32(acc), mult[size_t(j)], yzp, QRange{lo, hi}));
      const float f = std::fma(float(WrapInt32(acc)), mult[size_t(j)], fbias[size_t(j)]);
      want_f[size_t(o * ldy + j)] = f < flo ? flo : (f > fhi ? fhi : f);
    }
  kernels::IgemmS8Args a;
  a.ind = ind.data();
  a.a_offset = a_offset * ab;
  a.rows = rows;
  a.taps = taps;
  a.kc4 = kc4;
  a.w = packed.data();
  a.cols = cols;
  a.x_signed = x_signed;
  a.bias = bias.data();
  a.mult = mult.data();
  a.wzp = use_wzp ? wzp.data() : nullptr;
  a.xsum = xsum.data();
  a.yzp = yzp;
  a.lo = lo;
  a.hi = hi;
  a.y = y.data();
  a.ldy = ldy;
  a.out_row = remap ? out_row.data() : nullptr;
  a.overread = overread;
  if (float_out) {
    a.y = nullptr;
    a.yf = yf.data();
    a.fbias = fbias.data();
    a.flo = flo;
    a.fhi = fhi;
  }
  if (k.begin) k.begin();
  k.run(a);
  if (k.end) k.end();
  const std::string what = std::to_string(k.mr) + "x" + std::to_string(k.nr) +
                           " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                           " taps=" + std::to_string(taps) + " cg=" + std::to_string(cg) +
                           (float_out ? " float" : "") + (spaced ? " spaced" : "") +
                           (x_signed ? " s8" : "") + (use_wzp ? " wzp" : "") +
                           (overread ? " overread" : "") + (remap ? " out_row" : "");
  CAPTURE(what);
  if (float_out)
    REQUIRE(SameFloats(yf, want_f));
  else
    REQUIRE(y == want);
}

TEST_CASE("kernels: nhwc indirect GEMM microkernels match a scalar computation") {
  std::mt19937 rng(7);
  int checked = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    for (const kernels::IgemmS8Kernel* k : IsaConfig(isa).igemm_s8) {
      // The AMX level also lists the zmm kernels (for convolutions of few
      // channels per tap), tested at their own level.
      if (isa == Isa::kAmx && std::string(k->name) == "avx512vnni") continue;
      CHECK(std::string(k->name) == isa_name);
      for (int it = 0; it < 150; ++it, ++checked) CheckMicrokernel(*k, rng, it);
    }
  }
  MESSAGE("microkernel cases: " << checked);
}

// ---- whole convolutions -----------------------------------------------------------

struct ConvCase {
  int64_t n = 1, c = 4, m = 4, group = 1, ih = 5, iw = 5, kh = 3, kw = 3, sh = 1, sw = 1;
  int64_t dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  bool one_d = false, has_bias = true;
  DType xt = DType::kUInt8, wt = DType::kInt8, yt = DType::kUInt8;
  int32_t x_zp = 0, y_zp = 0;
  bool per_channel = true, wzp_nonzero = false;
  bool float_out = false;  // QfConvDequant's float epilogue instead of requantizing
  // The AVX2 kernels must prepare the integer Winograd (checked at that level).
  bool expect_winograd = false;
  uint32_t seed = 1;
};

std::string Describe(const ConvCase& k) {
  auto d = [](DType t) { return t == DType::kInt8 ? "s8" : "u8"; };
  std::string s = "n" + std::to_string(k.n) + " c" + std::to_string(k.c) + " m" +
                  std::to_string(k.m) + " g" + std::to_string(k.group) + " in" +
                  std::to_string(k.ih) + "x" + std::to_string(k.iw) + " k" + std::to_string(k.kh) +
                  "x" + std::to_string(k.kw) + " s" + std::to_string(k.sh) + "," +
                  std::to_string(k.sw) + " d" + std::to_string(k.dh) + "," + std::to_string(k.dw) +
                  " pads" + std::to_string(k.pt) + "," + std::to_string(k.pl) + "," +
                  std::to_string(k.pb) + "," + std::to_string(k.pr);
  s += std::string(" x") + d(k.xt) + " w" + d(k.wt) + " y" + d(k.yt) + (k.one_d ? " 1d" : "") +
       (k.has_bias ? " bias" : "") + (k.wzp_nonzero ? " wzp" : "") + (k.float_out ? " float" : "") +
       " xzp" + std::to_string(k.x_zp) + " seed" + std::to_string(k.seed);
  return s;
}

// Runs one case against the scalar reference at every level, both paths and
// 1 and 2 threads. Returns the number of fast runs compared.
int RunConvCase(ConvCase k) {
  if (k.one_d) k.ih = 1, k.kh = 1, k.sh = 1, k.dh = 1, k.pt = 0, k.pb = 0;
  const std::string desc = Describe(k);
  CAPTURE(desc);
  std::mt19937 rng(k.seed);
  const int64_t oh = (k.ih + k.pt + k.pb - k.dh * (k.kh - 1) - 1) / k.sh + 1;
  const int64_t ow = (k.iw + k.pl + k.pr - k.dw * (k.kw - 1) - 1) / k.sw + 1;
  REQUIRE(oh >= 1);
  REQUIRE(ow >= 1);
  const int64_t cg = k.c / k.group, mg = k.m / k.group, taps = k.kh * k.kw;
  // Exactly N*ih*iw*C bytes: the kernels must not read past them.
  std::vector<uint8_t> x(size_t(k.n * k.ih * k.iw * k.c));
  for (auto& v : x) v = uint8_t(rng());
  std::vector<uint8_t> w(size_t(k.m * cg * taps));
  for (auto& v : w) v = uint8_t(rng());
  if (k.seed % 9 == 0) {  // largest products
    std::fill(x.begin(), x.end(), uint8_t(k.xt == DType::kInt8 ? 0x80 : 0xff));
    std::fill(w.begin(), w.end(), uint8_t(k.wt == DType::kInt8 ? 0x80 : 0xff));
  }
  std::vector<int32_t> bias(size_t(k.m));
  for (auto& v : bias) v = rng() % 4 ? int32_t(rng() % 20001) - 10000 : int32_t(rng());
  const int64_t nsc = k.per_channel ? k.m : 1;
  std::vector<int32_t> w_zp(size_t(nsc), k.wt == DType::kUInt8 ? 128 : 0);
  std::vector<float> w_scale(static_cast<size_t>(nsc));
  for (auto& v : w_scale) v = std::uniform_real_distribution<float>(0.001f, 0.02f)(rng);
  if (k.wzp_nonzero)
    for (auto& v : w_zp)
      v = k.wt == DType::kUInt8 ? int32_t(rng() % 256) : int32_t(rng() % 256) - 128;
  const float x_scale = 0.02f;
  const float typical = x_scale * 0.01f * 100.f * std::sqrt(float(cg * taps)) * 0.5f;
  float y_scale = typical * std::uniform_real_distribution<float>(0.3f, 3.f)(rng);
  if (k.seed % 13 == 0) y_scale = 0.f;              // infinite multipliers
  if (k.seed % 17 == 0) y_scale = typical * 1e-4f;  // everything clamps
  const QRange yr = QuantRange(k.yt);
  int32_t lo = yr.lo, hi = yr.hi;
  if (k.seed % 5 == 0) lo = std::max(lo, k.y_zp);  // a fused Relu
  // The float epilogue: multipliers as QfConvDequant forms them (a folded
  // BatchNormalization's factor on some), a float bias, a Relu or Clip.
  const int64_t padded = (k.m + 63) / 64 * 64 + 64;
  std::vector<float> dq_mult(size_t(padded), 0.f), dq_bias(size_t(padded), 0.f);
  for (int64_t m = 0; m < k.m; ++m) {
    dq_mult[size_t(m)] = x_scale * w_scale[size_t(k.per_channel ? m : 0)];
    if (k.seed % 2) dq_mult[size_t(m)] *= std::uniform_real_distribution<float>(-2.f, 2.f)(rng);
    dq_bias[size_t(m)] = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  }
  const float dq_lo = k.seed % 5 == 0 ? 0.f : k.seed % 7 == 0 ? -0.25f : -INFINITY;
  const float dq_hi = k.seed % 7 == 0 ? 6.f : INFINITY;

  // Scalar NHWC reference (docs/NUMERICS.md).
  const int64_t ysize = k.n * oh * ow * k.m;
  std::vector<uint8_t> want(static_cast<size_t>(ysize));
  std::vector<float> want_f(static_cast<size_t>(ysize));
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        for (int64_t m = 0; m < k.m; ++m) {
          const int64_t g = m / mg;
          const int32_t wz = w_zp[size_t(k.per_channel ? m : 0)];
          int64_t acc = 0;
          for (int64_t ky = 0; ky < k.kh; ++ky)
            for (int64_t kx = 0; kx < k.kw; ++kx) {
              const int64_t iy = oy * k.sh - k.pt + ky * k.dh, ix = ox * k.sw - k.pl + kx * k.dw;
              if (iy < 0 || iy >= k.ih || ix < 0 || ix >= k.iw) continue;
              for (int64_t c = 0; c < cg; ++c) {
                const int32_t xv =
                    LoadQ(x.data(), k.xt, ((b * k.ih + iy) * k.iw + ix) * k.c + g * cg + c);
                const int32_t wv = LoadQ(w.data(), k.wt, ((m * cg + c) * k.kh + ky) * k.kw + kx);
                acc += int64_t(xv - k.x_zp) * (wv - wz);
              }
            }
          const size_t at = size_t(((b * oh + oy) * ow + ox) * k.m + m);
          const float f = std::fma(float(WrapInt32(acc)), dq_mult[size_t(m)], dq_bias[size_t(m)]);
          want_f[at] = f < dq_lo ? dq_lo : (f > dq_hi ? dq_hi : f);
          if (k.has_bias) acc += bias[size_t(m)];
          const float mult = x_scale * w_scale[size_t(k.per_channel ? m : 0)] / y_scale;
          want[at] = uint8_t(Requantize(WrapInt32(acc), mult, k.y_zp, QRange{lo, hi}));
        }

  Tensor wt;
  wt.dtype = k.wt;
  wt.shape = k.one_d ? Shape{k.m, cg, k.kw} : Shape{k.m, cg, k.kh, k.kw};
  wt.data = w.data();
  Tensor xt;
  xt.dtype = k.xt;
  xt.shape = k.one_d ? Shape{k.n, k.iw, k.c} : Shape{k.n, k.ih, k.iw, k.c};
  xt.data = x.data();
  std::vector<uint8_t> y(size_t(ysize + 64));
  std::vector<float> yf(size_t(ysize + 16));
  Tensor yt;
  yt.dtype = k.float_out ? DType::kFloat32 : k.yt;
  yt.shape = k.one_d ? Shape{k.n, ow, k.m} : Shape{k.n, oh, ow, k.m};
  yt.data = k.float_out ? static_cast<void*>(yf.data()) : static_cast<void*>(y.data());
  kernels::QConvCall call;
  call.x = &xt;
  call.y = &yt;
  call.ih = k.ih;
  call.iw = k.iw;
  call.oh = oh;
  call.ow = ow;
  call.kh = k.kh;
  call.kw = k.kw;
  call.sh = k.sh;
  call.sw = k.sw;
  call.dh = k.dh;
  call.dw = k.dw;
  call.pad_top = k.pt;
  call.pad_left = k.pl;
  call.x_zp = k.x_zp;
  call.w_zp = w_zp;
  call.x_scale = x_scale;
  call.y_scale = y_scale;
  call.w_scale = w_scale;
  call.y_zp = k.y_zp;
  call.lo = lo;
  call.hi = hi;
  call.bias = k.has_bias ? bias.data() : nullptr;
  if (k.float_out) {
    call.dq_mult = dq_mult.data();
    call.dq_bias = dq_bias.data();
    call.dq_lo = dq_lo;
    call.dq_hi = dq_hi;
  }

  int runs = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    for (int path = 0; path < 2; ++path) {
      // Path 1: a configuration without the indirect microkernels takes the
      // packed GEMM (the path of NEON) at x86 levels too.
      kernels::KernelConfig kc = IsaConfig(isa);
      if (path == 1) kc.igemm_s8.clear();
      std::shared_ptr<void> state = kernels::PrepareQConvNhwcS8(kc, wt, k.group, k.dw);
      if (isa == Isa::kReference) {
        CHECK(!bool(state));
        break;
      }
      REQUIRE(bool(state));
      const std::string variant = kernels::QConvNhwcS8Variant(state.get());
      if (k.expect_winograd && path == 0 && (variant == "avx2" || variant == "neon"))
        REQUIRE(kernels::QConvNhwcS8Winograd(state.get()));
      for (int threads = 1; threads <= 2; ++threads) {
        CAPTURE(path);
        CAPTURE(threads);
        call.pool = test::TestPool(threads);
        if (k.float_out) {
          std::fill(yf.begin(), yf.end(), -7.f);
          // The packed GEMM path (forced, or the only one: NEON) has no float
          // epilogue: the op's reference kernel runs instead.
          if (path == 1 || IsaConfig(isa).igemm_s8.empty()) {
            REQUIRE(!kernels::RunQConvNhwcS8(state.get(), call));
            continue;
          }
          REQUIRE(kernels::RunQConvNhwcS8(state.get(), call));
          REQUIRE(SameFloats(std::vector<float>(yf.begin(), yf.begin() + ysize), want_f));
          for (int64_t i = ysize; i < ysize + 16; ++i) REQUIRE(yf[size_t(i)] == -7.f);
          ++runs;
          continue;
        }
        std::fill(y.begin(), y.end(), uint8_t(0xEE));
        REQUIRE(kernels::RunQConvNhwcS8(state.get(), call));
        REQUIRE(std::vector<uint8_t>(y.begin(), y.begin() + ysize) == want);
        for (int64_t i = ysize; i < ysize + 64; ++i) REQUIRE(y[size_t(i)] == 0xEE);
        ++runs;
      }
    }
  }
  return runs;
}

int32_t ZpFor(DType t, std::mt19937& rng) {
  const bool s = t == DType::kInt8;
  switch (rng() % 4) {
    case 0:
      return s ? -128 : 0;
    case 1:
      return s ? 127 : 255;
    default:
      return s ? int32_t(int8_t(rng())) : int32_t(uint8_t(rng()));
  }
}

DType Dt(std::mt19937& rng) {
  return rng() % 2 ? DType::kInt8 : DType::kUInt8;
}

ConvCase RandomCase(std::mt19937& rng, uint32_t seed) {
  static const int64_t kC[] = {1, 3, 4, 5, 17, 64, 96};
  static const int64_t kM[] = {1, 5, 16, 17, 48, 64, 100, 256};
  static const int64_t kK[] = {1, 3, 5, 7};
  ConvCase k;
  k.seed = seed;
  k.group = rng() % 4 == 0 ? 2 + rng() % 2 : 1;
  k.c = kC[rng() % 7] * k.group;
  k.m = kM[rng() % 8];
  if (k.m * k.c > 96 * 64) k.m = 17;  // keep the scalar reference quick
  k.m *= k.group;
  if (k.c / k.group == 1 && k.m == k.group) k.m *= 2;  // not depthwise
  k.kh = kK[rng() % 4];
  k.kw = rng() % 3 ? k.kh : kK[rng() % 4];
  k.sh = 1 + rng() % 3;
  k.sw = rng() % 2 ? k.sh : 1 + rng() % 3;
  k.dh = rng() % 5 == 0 ? 2 : 1;
  k.dw = rng() % 5 == 0 ? 2 : 1;
  k.pt = rng() % k.kh;
  k.pb = rng() % k.kh;
  k.pl = rng() % k.kw;
  k.pr = rng() % k.kw;
  k.ih = 1 + rng() % 9;
  k.iw = 1 + rng() % 11;
  while ((k.ih + k.pt + k.pb - k.dh * (k.kh - 1) - 1) < 0) ++k.ih;
  while ((k.iw + k.pl + k.pr - k.dw * (k.kw - 1) - 1) < 0) ++k.iw;
  k.n = rng() % 4 == 0 ? 2 : 1;
  k.one_d = rng() % 8 == 0;
  k.has_bias = rng() % 3 != 0;
  k.xt = Dt(rng);
  k.wt = Dt(rng);
  k.yt = Dt(rng);
  k.x_zp = ZpFor(k.xt, rng);
  k.y_zp = ZpFor(k.yt, rng);
  k.per_channel = rng() % 3 != 0;
  k.wzp_nonzero = rng() % 4 == 0;
  k.float_out = seed % 3 == 2;
  return k;
}

TEST_CASE("kernels: nhwc conv random geometries match a scalar reference") {
  std::mt19937 rng(2024);
  int runs = 0;
  for (uint32_t i = 1; i <= 220; ++i) runs += RunConvCase(RandomCase(rng, i));
  MESSAGE("fast runs compared: " << runs);
}

TEST_CASE("kernels: nhwc conv fixed shapes match a scalar reference") {
  int runs = 0;
  uint32_t seed = 1000;
  auto run = [&](ConvCase k) {
    k.seed = ++seed;
    runs += RunConvCase(k);
    k.float_out = true;
    runs += RunConvCase(k);
  };
  for (DType xt : {DType::kUInt8, DType::kInt8})
    for (DType wt : {DType::kUInt8, DType::kInt8}) {
      ConvCase k;
      k.xt = xt;
      k.wt = wt;
      k.yt = xt == wt ? DType::kInt8 : DType::kUInt8;
      k.x_zp = xt == DType::kInt8 ? -128 : 255;
      k.y_zp = k.yt == DType::kInt8 ? 5 : 130;
      // 1x1, direct (unpadded stride 1) over C at the dword edges.
      for (int64_t c : {1, 3, 4, 5, 17, 64, 96}) {
        k.c = c, k.m = 100, k.kh = k.kw = 1, k.ih = 3, k.iw = 7, k.pt = k.pl = k.pb = k.pr = 0;
        run(k);
      }
      // 3x3 pad 1 and 7x7 stride 2 pad 3 (first layers), 3x3 stride 2.
      k.c = 3, k.m = 16, k.kh = k.kw = 3, k.ih = 9, k.iw = 10, k.pt = k.pl = k.pb = k.pr = 1;
      run(k);
      k.c = 3, k.m = 64, k.kh = k.kw = 7, k.sh = k.sw = 2, k.ih = 15, k.iw = 14;
      k.pt = k.pl = k.pb = k.pr = 3;
      run(k);
      k.c = 17, k.m = 48, k.kh = k.kw = 3, k.sh = k.sw = 2, k.pt = 0, k.pl = 1, k.pb = 2, k.pr = 0;
      run(k);
      k.sh = k.sw = 1;
      // Weight zero points and groups (ShuffleNet-style 1x1 with odd C/group).
      k.wzp_nonzero = true;
      k.c = 15, k.m = 6, k.group = 3, k.kh = k.kw = 1, k.pt = k.pl = k.pb = k.pr = 0;
      run(k);
      k.c = 34, k.m = 34, k.group = 2, k.kh = k.kw = 3, k.pt = k.pl = k.pb = k.pr = 1;
      k.n = 2;
      run(k);
      k.wzp_nonzero = false;
      k.group = 1;
      // 1-D.
      k.one_d = true, k.c = 5, k.m = 17, k.kw = 5, k.iw = 20, k.pl = 2, k.pr = 1;
      run(k);
      k = ConvCase();
    }
  // Large enough to split between threads.
  ConvCase big;
  big.c = 64, big.m = 100, big.kh = big.kw = 1, big.ih = 13, big.iw = 17;
  run(big);
  big.c = 32, big.m = 64, big.kh = big.kw = 3, big.pt = big.pl = big.pb = big.pr = 1;
  big.xt = DType::kInt8, big.x_zp = 3, big.wzp_nonzero = true, big.n = 2;
  run(big);
  big.c = 24, big.m = 48, big.group = 3, big.wzp_nonzero = false;
  run(big);
  // Two threads splitting a tile between them by pairs of 32-channel panels
  // (7 tiles of 32 rows x 4 panels: SplitIgemm's boundary in tile 3), and
  // weights over the input (panels split over several chunks).
  big = ConvCase();
  big.c = 64, big.m = 128, big.kh = big.kw = 1, big.ih = 13, big.iw = 15;
  run(big);
  big.c = 64, big.m = 256, big.kh = big.kw = 3, big.pt = big.pl = big.pb = big.pr = 1;
  big.ih = 14, big.iw = 16;
  run(big);
  // Weights over the input, rows that are not whole lines: panels split
  // one at a time (on AMX 11 panels, 6 and 5).
  big = ConvCase();
  big.c = 256, big.m = 352, big.kh = big.kw = 1, big.ih = big.iw = 5;
  run(big);
  // The AMX kernels' paths: K tails of the 64-byte k blocks (C = 4 ... 80),
  // A tiles loaded directly (1x1; interior rows of a stride-1 3x3) or
  // gathered (stride 2, narrow rows, int8 activations), rows past a 32-row
  // tile, channels past a 16-channel tile, weight zero points, groups.
  for (int64_t c : {4, 12, 16, 20, 48, 80}) {
    ConvCase a;
    a.c = c, a.m = 40, a.kh = a.kw = 1, a.ih = 7, a.iw = 11;
    a.x_zp = 7, a.y_zp = 120;
    run(a);
    a.kh = a.kw = 3, a.pt = a.pl = a.pb = a.pr = 1, a.ih = 6, a.iw = 40;
    run(a);
    a.xt = DType::kInt8, a.x_zp = -3, a.wzp_nonzero = true, a.m = 24;
    a.sh = a.sw = 2, a.ih = 9, a.iw = 6;
    run(a);
  }
  // Row taps copied into im2col rows (AMX: k blocks of 64 bytes): a stem
  // over several chunks of 16 tiles and both threads, int8 activations with
  // weight zero points, a kernel row wider than one 32-byte copy (7 x 7
  // channels), and 3 x 5 channels.
  {
    ConvCase stem;
    stem.c = 3, stem.m = 64, stem.kh = stem.kw = 7, stem.sh = stem.sw = 2;
    stem.pt = stem.pl = stem.pb = stem.pr = 3, stem.ih = 66, stem.iw = 62;
    stem.x_zp = 9, stem.y_zp = 100;
    run(stem);
    stem.xt = DType::kInt8, stem.x_zp = -5, stem.wzp_nonzero = true, stem.m = 40, stem.n = 2;
    run(stem);
    ConvCase wide;
    wide.c = 7, wide.m = 20, wide.kh = wide.kw = 7, wide.pt = wide.pl = 3, wide.pb = 2;
    wide.pr = 1, wide.ih = 19, wide.iw = 23, wide.x_zp = 200;
    run(wide);
    wide.c = 5, wide.kh = wide.kw = 3, wide.sh = 2, wide.pt = wide.pl = wide.pb = wide.pr = 1;
    run(wide);
  }
  // Taps of whole 64-byte blocks copied into im2col rows where the AMX
  // kernel would gather most tiles for many panels: a 3x3 over a 7x7 output
  // (u8 and int8 activations, weight zero points) and a strided 1x1.
  {
    ConvCase deep;
    deep.c = 128, deep.m = 256, deep.kh = deep.kw = 3, deep.pt = deep.pl = deep.pb = deep.pr = 1;
    deep.ih = deep.iw = 7, deep.x_zp = 3, deep.y_zp = 90;
    run(deep);
    deep.xt = DType::kInt8, deep.x_zp = -7, deep.wzp_nonzero = true, deep.n = 2;
    run(deep);
    ConvCase strided;
    strided.c = 64, strided.m = 200, strided.sh = strided.sw = 2, strided.ih = 13;
    strided.iw = 11, strided.xt = DType::kInt8, strided.x_zp = 12;
    run(strided);
  }
  // Stride-1 KxK on AMX over the padded plane (when it adds no tiles):
  // batches (positions between the images), dilation, asymmetric pads, int8
  // activations with weight zero points, the float epilogue, and K tails
  // loaded whole (2 groups of 96 channels: a 64-byte block and half of one).
  {
    ConvCase plane;
    plane.c = 128, plane.m = 96, plane.ih = plane.iw = 4, plane.dh = plane.dw = 2;
    plane.pt = plane.pl = plane.pb = plane.pr = 2, plane.x_zp = 5, plane.y_zp = 70;
    run(plane);
    plane.xt = DType::kInt8, plane.x_zp = -9, plane.wzp_nonzero = true;
    run(plane);
    plane.float_out = true;
    run(plane);
    plane = ConvCase();
    plane.c = 64, plane.m = 40, plane.n = 2, plane.ih = plane.iw = 2;
    plane.pt = plane.pl = plane.pb = plane.pr = 1, plane.x_zp = 11;
    run(plane);
    plane.n = 1, plane.c = 192, plane.group = 2, plane.m = 64, plane.ih = 3, plane.iw = 7;
    plane.pt = 2, plane.pl = 0, plane.pb = 0, plane.pr = 1;
    run(plane);
  }
  // Pixels that are not whole 64-byte lines (AMX: tiles in place on
  // misaligned rows, or over the plane, or gathered): 1x1 and 3x3, a channel
  // count that is no multiple of 4 (reads near x's end), int8 activations.
  {
    ConvCase rows;
    rows.c = 96, rows.m = 48, rows.ih = 9, rows.iw = 20, rows.pt = rows.pl = rows.pb = 1;
    rows.pr = 1, rows.x_zp = 3;
    run(rows);
    rows.c = 98, rows.kh = rows.kw = 1, rows.pt = rows.pl = rows.pb = rows.pr = 0;
    run(rows);
    rows.xt = DType::kInt8, rows.x_zp = -2, rows.kh = rows.kw = 3, rows.pt = rows.pr = 1;
    run(rows);
  }
  ConvCase grouped;
  grouped.c = 96, grouped.m = 64, grouped.group = 2, grouped.kh = grouped.kw = 1;
  grouped.ih = 6, grouped.iw = 12, grouped.wzp_nonzero = true;
  run(grouped);
  MESSAGE("fast runs compared: " << runs);
}

// The exact integer Winograd F(2x2, 3x3) of the AVX2 and Armv8.0 NEON
// kernels (conv_nhwc_s8_winograd.h) against the direct scalar sums: channels off the
// transforms' vector widths (16 in, 8 out) and the dword, outputs off the
// 2x2 tiles, asymmetric padding, two images, int8 and uint8 on every side,
// 8-bit and float (QfConvDequant) outputs,
// the largest products (seed % 9 == 0: |x - x_zp| = 255 and w = -128, the
// transforms' largest values), infinite multipliers (seed % 13), a fused
// Relu (seed % 5), weight zero points (the direct sums run instead), blocks
// of tiles split between the threads, and several blocks at 1 thread.
TEST_CASE("kernels: nhwc conv integer Winograd matches a scalar reference") {
  int runs = 0;
  const struct {
    int64_t c, m, ih, iw, pt, pl, pb, pr, n;
    uint32_t seed;
  } shapes[] = {
      {16, 16, 8, 8, 1, 1, 1, 1, 1, 3000},
      {20, 24, 9, 11, 1, 1, 1, 1, 1, 3005},
      {22, 100, 10, 9, 0, 1, 2, 0, 2, 3006},
      {64, 64, 15, 13, 1, 1, 1, 1, 1, 3007},
      {48, 40, 12, 12, 2, 0, 0, 2, 1, 3009},
      {96, 136, 14, 14, 1, 1, 1, 1, 1, 3016},
      {256, 256, 9, 9, 1, 1, 1, 1, 1, 3042},
      {32, 16, 40, 36, 1, 1, 1, 1, 1, 3055},
      {24, 200, 11, 7, 1, 1, 1, 1, 2, 3081},
      // Several blocks of tiles at 1 thread (about 42 tiles of 256 -> 256 per block).
      {256, 256, 20, 19, 1, 1, 1, 1, 1, 3090},
  };
  int i = 0;
  for (const auto& sh : shapes) {
    ConvCase k;
    k.c = sh.c, k.m = sh.m, k.ih = sh.ih, k.iw = sh.iw, k.pt = sh.pt, k.pl = sh.pl, k.pb = sh.pb;
    k.pr = sh.pr, k.n = sh.n, k.seed = sh.seed;
    k.kh = k.kw = 3;
    k.xt = i % 2 ? DType::kInt8 : DType::kUInt8;
    k.wt = i % 3 ? DType::kInt8 : DType::kUInt8;
    k.yt = i % 4 < 2 ? DType::kUInt8 : DType::kInt8;
    k.x_zp = k.xt == DType::kInt8 ? (i % 2 ? -128 : 17) : (i % 3 ? 0 : 255);
    k.y_zp = k.yt == DType::kInt8 ? -3 : 128;
    k.has_bias = i % 4 != 3;
    k.per_channel = i % 5 != 4;
    k.expect_winograd = true;
    runs += RunConvCase(k);
    k.float_out = true;  // QfConvDequant's float epilogue
    k.seed += 200;
    runs += RunConvCase(k);
    k.float_out = false;
    k.seed -= 200;
    k.wzp_nonzero = true;  // the direct sums (the transformed filters hold w, not w - wzp)
    k.expect_winograd = true;
    k.seed += 100;
    runs += RunConvCase(k);
    ++i;
  }
  MESSAGE("fast runs compared: " << runs);
}

TEST_CASE("kernels: nhwc conv splits tiles x panels between threads in equal shares") {
  for (int threads = 1; threads <= 4; ++threads)
    for (int64_t tiles = 1; tiles <= 40; ++tiles)
      for (int64_t w : {1, 2, 4, 5, 16})
        for (int64_t per_chunk : {1, 2, 3, 4, 6, 8, 11, 22})
          for (int64_t unit : {1, 2})
            for (bool heavy : {false, true}) {
              if (per_chunk % unit) continue;
              CAPTURE(threads);
              CAPTURE(tiles);
              CAPTURE(w);
              CAPTURE(per_chunk);
              CAPTURE(unit);
              CAPTURE(heavy);
              const kernels::IgemmSplit sp =
                  kernels::SplitIgemm(tiles, w, per_chunk, unit, threads, heavy);
              // Chunks: from tile 0 to the last, none empty or over w tiles.
              REQUIRE(sp.chunk_tile.size() >= 2);
              REQUIRE(sp.chunk_tile.front() == 0);
              REQUIRE(sp.chunk_tile.back() == tiles);
              const int64_t chunks = int64_t(sp.chunk_tile.size()) - 1;
              for (int64_t c = 0; c < chunks; ++c) {
                const int64_t len = sp.chunk_tile[size_t(c + 1)] - sp.chunk_tile[size_t(c)];
                REQUIRE(len >= 1);
                REQUIRE(len <= w);
              }
              REQUIRE(sp.bounds.size() == size_t(threads + 1));
              REQUIRE(sp.bounds.front() == 0);
              REQUIRE(sp.bounds.back() == chunks * per_chunk);
              // Every (chunk, panel) exactly once; each share's runs of
              // panels in whole units.
              std::vector<int> hits(size_t(chunks * per_chunk), 0);
              std::vector<int64_t> cost(size_t(threads), 0);
              for (int t = 0; t < threads; ++t) {
                const int64_t b = sp.bounds[size_t(t)], e = sp.bounds[size_t(t + 1)];
                REQUIRE(b <= e);
                for (int64_t i = b; i < e; ++i) {
                  int64_t c = -1, j = -1;
                  sp.Item(i, per_chunk, &c, &j);
                  REQUIRE(c >= 0);
                  REQUIRE(c < chunks);
                  REQUIRE(j >= 0);
                  REQUIRE(j < per_chunk);
                  ++hits[size_t(c * per_chunk + j)];
                  cost[size_t(t)] += sp.chunk_tile[size_t(c + 1)] - sp.chunk_tile[size_t(c)];
                  // A panel run starts on a unit (a new chunk, or the share's start).
                  int64_t pc = -1, pj = -1;
                  if (i > b) sp.Item(i - 1, per_chunk, &pc, &pj);
                  if (i == b || pc != c || pj + 1 != j) CHECK(j % unit == 0);
                }
                // Pixels split: a chunk two shares split is one tile, or the only chunk.
                if (sp.panels.empty() && b % per_chunk && chunks > 1) {
                  const int64_t c = b / per_chunk;
                  CHECK(sp.chunk_tile[size_t(c + 1)] - sp.chunk_tile[size_t(c)] == 1);
                }
              }
              int64_t wrong = 0;
              for (int h : hits) wrong += h != 1;
              CHECK(wrong == 0);
              // Equal work (tile x panel products) to one block of unit
              // panels (panels split: to one unit in every chunk).
              const auto mm = std::minmax_element(cost.begin(), cost.end());
              CHECK(*mm.second - *mm.first <= (sp.panels.empty() ? unit : tiles * unit));
              // Panels split where they divide evenly, or weights outweigh
              // the input and each thread gets 4 units.
              if (!sp.panels.empty()) {
                CHECK(threads > 1);
                CHECK((heavy || chunks == 1));
                if (per_chunk / unit % threads == 0)
                  CHECK(*mm.second == *mm.first);
                else
                  CHECK((heavy && per_chunk / unit >= 4 * threads));
              }
              // One thread: no chunk smaller than it must be.
              if (threads == 1) CHECK(chunks == (tiles + w - 1) / w);
            }
  // Pixels split first, the tile on the boundary by panels: 7 tiles x 3
  // panels, 10 and 11 tile-panels.
  const kernels::IgemmSplit a = kernels::SplitIgemm(7, 4, 3, 1, 2);
  CHECK(a.chunk_tile == std::vector<int64_t>{0, 3, 4, 7});
  CHECK(a.bounds == std::vector<int64_t>{0, 4, 9});
  CHECK(a.panels.empty());
  // One chunk whose panels divide evenly: panels split (7x7 outputs).
  const kernels::IgemmSplit b = kernels::SplitIgemm(2, 4, 8, 2, 2);
  CHECK(b.chunk_tile == std::vector<int64_t>{0, 2});
  CHECK(b.bounds == std::vector<int64_t>{0, 4, 8});
  // Weights over the input: panels split over both chunks of 7 tiles, each
  // thread's 4 panels chunk by chunk.
  const kernels::IgemmSplit c = kernels::SplitIgemm(7, 4, 8, 2, 2, true);
  CHECK(c.chunk_tile == std::vector<int64_t>{0, 3, 7});
  CHECK(c.panels == std::vector<int64_t>{0, 4, 8});
  CHECK(c.bounds == std::vector<int64_t>{0, 8, 16});
  int64_t chunk = -1, panel = -1;
  c.Item(9, 8, &chunk, &panel);
  CHECK(chunk == 0);
  CHECK(panel == 5);
  // At 2 threads chunks shrink to a quarter of a share (a slow thread's last
  // chunks go to the other) where pixels split, but weight-heavy panel
  // splits keep one thread's chunks (ResNet-50's 7x7 stage: 9 tiles, each
  // chunk streams the thread's panels again).
  const kernels::IgemmSplit d = kernels::SplitIgemm(40, 16, 8, 1, 2, false, 1);
  CHECK(d.panels.empty());
  CHECK(d.chunk_tile.size() == 9);  // two shares of 20 tiles, chunks of 5
  const kernels::IgemmSplit e = kernels::SplitIgemm(9, 16, 8, 1, 2, true, 1);
  CHECK(e.chunk_tile == std::vector<int64_t>{0, 9});
  CHECK(e.panels == std::vector<int64_t>{0, 4, 8});
  const kernels::IgemmSplit f = kernels::SplitIgemm(9, 16, 8, 1, 1, true, 1);
  CHECK(f.chunk_tile == std::vector<int64_t>{0, 9});
}

TEST_CASE("kernels: nhwc conv on AMX CPUs picks AMX or the zmm kernels by channels per tap") {
  const std::vector<Isa> levels = kernels::SupportedIsas();
  if (std::find(levels.begin(), levels.end(), Isa::kAmx) == levels.end()) {
    MESSAGE("skipped: this CPU has no AMX");
    return;
  }
  const kernels::KernelConfig& kc = IsaConfig(Isa::kAmx);
  REQUIRE(!kc.igemm_s8.empty());
  CHECK(std::string(kc.igemm_s8.front()->name) == "amx");
  CHECK(std::string(kc.igemm_s8.back()->name) == "avx512vnni");
  auto variant = [&](int64_t m, int64_t cg, int64_t kh, int64_t kw) {
    std::vector<uint8_t> w(size_t(m * cg * kh * kw), 1);
    Tensor wt;
    wt.dtype = DType::kInt8;
    wt.shape = {m, cg, kh, kw};
    wt.data = w.data();
    std::shared_ptr<void> s = kernels::PrepareQConvNhwcS8(kc, wt, 1);
    REQUIRE(bool(s));
    return std::string(kernels::QConvNhwcS8Variant(s.get()));
  };
  CHECK(variant(64, 16, 3, 3) == "avx512vnni");
  CHECK(variant(64, 16, 1, 1) == "avx512vnni");
  CHECK(variant(128, 48, 3, 3) == "amx");  // kernel rows of 144 of 192 bytes
  CHECK(variant(96, 32, 5, 5) == "amx");   // 160 of 192
  CHECK(variant(64, 32, 1, 1) == "avx512vnni");
  CHECK(variant(64, 64, 3, 3) == "amx");
  CHECK(variant(96, 96, 1, 1) == "amx");
  CHECK(variant(64, 3, 3, 3) == "avx512vnni");  // 27 of 64 k bytes
  CHECK(variant(64, 3, 7, 7) == "amx");         // 147 of 192
}

TEST_CASE("kernels: nhwc conv prepare declines depthwise and the reference level") {
  std::vector<uint8_t> w(8 * 9, 1);
  Tensor wt;
  wt.dtype = DType::kInt8;
  wt.shape = {8, 1, 3, 3};
  wt.data = w.data();
  CHECK(!bool(kernels::PrepareQConvNhwcS8(kernels::DefaultKernelConfig(), wt, 8)));
  wt.shape = {8, 2, 3, 3};
  CHECK(!bool(kernels::PrepareQConvNhwcS8(IsaConfig(Isa::kReference), wt, 4)));
}

}  // namespace
}  // namespace test
}  // namespace qfold

namespace qfold {
namespace test {
namespace {

// Speed of the active level on ResNet/MobileNet-like layers; GOPS counts 2
// ops per multiply-add. Run with -tc='*nhwc conv benchmark*' -ns=false.
TEST_CASE("kernels: nhwc conv benchmark" * doctest::skip()) {
  struct Shape2 {
    const char* name;
    int64_t c, m, hw, k, s;
  };
  const Shape2 shapes[] = {
      {"1x1 64->64 56x56", 64, 64, 56, 1, 1},     {"1x1 256->256 56x56", 256, 256, 56, 1, 1},
      {"1x1 64->256 56x56", 64, 256, 56, 1, 1},   {"1x1 512->2048 7x7", 512, 2048, 7, 1, 1},
      {"3x3 512->512 7x7", 512, 512, 7, 3, 1},    {"1x1 1024->1024 14x14", 1024, 1024, 14, 1, 1},
      {"3x3 64->64 56x56", 64, 64, 56, 3, 1},     {"3x3 128->128 28x28", 128, 128, 28, 3, 1},
      {"3x3 256->256 14x14", 256, 256, 14, 3, 1}, {"3x3 s2 128->128 56x56", 128, 128, 56, 3, 2},
      {"3x3 s2 3->32 224x224", 3, 32, 224, 3, 2}, {"7x7 s2 3->64 224x224", 3, 64, 224, 7, 2},
  };
  std::mt19937 rng(1);
  for (const Shape2& sh : shapes) {
    const int64_t pad = sh.k / 2, oh = (sh.hw + 2 * pad - sh.k) / sh.s + 1;
    std::vector<uint8_t> x(size_t(sh.hw * sh.hw * sh.c)), w(size_t(sh.m * sh.c * sh.k * sh.k));
    std::vector<uint8_t> y(size_t(oh * oh * sh.m));
    for (auto& v : x) v = uint8_t(rng());
    for (auto& v : w) v = uint8_t(rng());
    Tensor wt, xt, yt;
    wt.dtype = DType::kInt8;
    wt.shape = {sh.m, sh.c, sh.k, sh.k};
    wt.data = w.data();
    xt.dtype = DType::kUInt8;
    xt.shape = {1, sh.hw, sh.hw, sh.c};
    xt.data = x.data();
    yt.dtype = DType::kUInt8;
    yt.shape = {1, oh, oh, sh.m};
    yt.data = y.data();
    kernels::QConvCall c;
    c.x = &xt;
    c.y = &yt;
    c.ih = c.iw = sh.hw;
    c.oh = c.ow = oh;
    c.kh = c.kw = sh.k;
    c.sh = c.sw = sh.s;
    c.pad_top = c.pad_left = pad;
    c.x_zp = 128;
    c.w_zp = {0};
    c.w_scale = {0.01f};
    c.x_scale = 0.02f;
    c.y_scale = 0.5f;
    c.y_zp = 128;
    c.lo = 0;
    c.hi = 255;
    auto state = kernels::PrepareQConvNhwcS8(kernels::DefaultKernelConfig(), wt, 1);
    REQUIRE(bool(state));
    const double ops = 2.0 * double(oh * oh * sh.m) * double(sh.c * sh.k * sh.k);
    std::string line = sh.name;
    for (int threads = 1; threads <= 2; ++threads) {
      c.pool = test::TestPool(threads);
      double best = 1e30;
      const int reps = std::max(3, int(2e9 / ops));
      // One thread: CPU time of this thread (the machine may be shared);
      // two: wall time.
      auto now = [threads] {
        timespec ts;
        clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
        return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
      };
      for (int r = 0; r < 5; ++r) {
        const double t0 = now();
        for (int i = 0; i < reps; ++i) kernels::RunQConvNhwcS8(state.get(), c);
        best = std::min(best, (now() - t0) / reps);
      }
      line += "  " + std::to_string(threads) + "T: " + std::to_string(ops / best * 1e-9) + " GOPS";
    }
    const std::string msg = kernels::DefaultKernelConfig().Describe() + " " + line;
    MESSAGE(msg);
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
