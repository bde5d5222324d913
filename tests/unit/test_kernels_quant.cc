// The element-wise 8-bit kernels (kernels/quant_s8.h) against the reference
// loops of QuantizeLinear, DequantizeLinear, QLinearAdd and QLinearMul: for
// every ISA level this CPU supports and 1 or 2 threads, outputs must be
// bit-identical (exact ties, saturation, NaN/Inf, tiny/huge/zero scales,
// extreme zero points, per-axis blocks of 1..70 elements, every broadcast).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "kernels/quant_s8.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;
using kernels::Isa;

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ShapeStr(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

// Runs `type` once with the kernels of `isa`; returns the output bytes
// followed by a 64-byte guard zone (which must stay untouched).
std::vector<uint8_t> RunRaw(const std::string& type, const std::vector<TensorPtr>& inputs,
                            const AttrMap& attrs, int threads, Isa isa) {
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = test::TestPool(threads);
  ctx.kernels = &IsaConfig(isa);
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  OwnedTensor out;
  ctx.outputs = {&out.t};
  const Status st = def->infer(ctx);
  CAPTURE(st.message());
  REQUIRE(st.ok());
  out.storage.assign(out.t.bytes() + 64, 0xAB);
  out.t.data = out.storage.data();
  const Status rs = def->run(ctx);
  CAPTURE(rs.message());
  REQUIRE(rs.ok());
  return out.storage;
}

// Reference output vs every supported level x {1, 2} threads. Returns the
// number of runs that used a SIMD kernel.
int CompareWithReference(const std::string& type, const std::vector<TensorPtr>& inputs,
                         const AttrMap& attrs, const std::string& what) {
  INFO(type << " " << what);
  const std::vector<uint8_t> want = RunRaw(type, inputs, attrs, 1, Isa::kReference);
  int fast = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      const std::vector<uint8_t> got = RunRaw(type, inputs, attrs, threads, isa);
      REQUIRE(got.size() == want.size());
      size_t bad = 0;
      while (bad < want.size() && want[bad] == got[bad]) ++bad;
      CAPTURE(bad);
      REQUIRE(bad == want.size());
      if (IsaConfig(isa).quant_s8) ++fast;
    }
  }
  return fast;
}

float Uniform(std::mt19937& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// A zero point of an 8-bit dtype: an extreme, the middle or random.
int32_t RandomZp(bool is_signed, std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return is_signed ? -128 : 0;
    case 1:
      return is_signed ? 127 : 255;
    case 2:
      return is_signed ? 0 : 128;
    default:
      return is_signed ? int32_t(int8_t(rng())) : int32_t(uint8_t(rng()));
  }
}

// Mostly ordinary scales; sometimes tiny, denormal, huge, zero or negative.
float RandomScale(std::mt19937& rng, bool allow_odd) {
  if (allow_odd) switch (rng() % 16) {
      case 0:
        return 1e-30f;
      case 1:
        return 1e-40f;  // denormal
      case 2:
        return 3e30f;
      case 3:
        return 0.f;
      case 4:
        return -Uniform(rng, 0.01f, 1.f);
      case 5:
        return std::ldexp(1.f, int(rng() % 20) - 10);  // exact power of two
      default:
        break;
    }
  return Uniform(rng, 0.001f, 2.f);
}

// An x value for scale s: exact ties k + 0.5 (in float), values near and far
// outside the range, NaN, infinities, signed zeros and random values.
float RandomX(std::mt19937& rng, float s) {
  const float k = float(int(rng() % 600) - 300);
  switch (rng() % 12) {
    case 0:
    case 1:
    case 2:
      return (k + 0.5f) * s;  // a tie whenever the product is exact
    case 3:
      return k * s;
    case 4:
      return std::numeric_limits<float>::quiet_NaN();
    case 5:
      return rng() % 2 ? std::numeric_limits<float>::infinity()
                       : -std::numeric_limits<float>::infinity();
    case 6:
      return Uniform(rng, -1e30f, 1e30f);
    case 7:
      return rng() % 2 ? 0.f : -0.f;
    case 8:
      return Uniform(rng, -1e-38f, 1e-38f);
    default:
      return Uniform(rng, -300.f, 300.f) * s;
  }
}

TensorPtr Bytes(DType dt, Shape s, std::mt19937& rng) {
  std::vector<uint8_t> v(static_cast<size_t>(Numel(s)));
  for (auto& b : v) b = uint8_t(rng());
  return Make<uint8_t>(dt, std::move(s), v);
}

TensorPtr Zps(DType dt, Shape s, const std::vector<int32_t>& v) {
  std::vector<uint8_t> b;
  for (int32_t x : v) b.push_back(uint8_t(x));
  return Make<uint8_t>(dt, std::move(s), b);
}

// One QuantizeLinear or DequantizeLinear case: x of `shape`, per tensor
// (axis < 0) or per axis; the zero point may be omitted.
int QdqCase(bool quantize, bool is_signed, const Shape& shape, int axis, std::mt19937& rng,
            bool odd_scales, bool f16_scale = false, bool wide = false) {
  const DType qt = wide ? (is_signed ? DType::kInt16 : DType::kUInt16)
                        : (is_signed ? DType::kInt8 : DType::kUInt8);
  const int64_t np = axis < 0 ? 1 : shape[size_t(axis)];
  std::vector<float> sc(static_cast<size_t>(np));
  std::vector<int32_t> zp(static_cast<size_t>(np));
  for (auto& s : sc) s = RandomScale(rng, odd_scales);
  for (auto& z : zp) {
    z = RandomZp(is_signed, rng);
    // 16-bit: the 8-bit pick scaled up (extremes stay extremes), plus noise.
    if (wide)
      z = std::min(is_signed ? 32767 : 65535,
                   std::max(is_signed ? -32768 : 0, z * 256 + int32_t(rng() % 256) - 128));
  }
  const Shape pshape = axis < 0 ? Shape{} : Shape{np};
  TensorPtr scale;
  if (f16_scale) {
    std::vector<uint16_t> h;
    for (float s : sc) h.push_back(FloatToHalf(s));
    scale = Make<uint16_t>(DType::kFloat16, pshape, h);
  } else {
    scale = F32(pshape, sc);
  }
  // uint8 without a zero point exercises the absent input (zp 0).
  const bool omit_zp = !is_signed && rng() % 4 == 0;
  TensorPtr z = omit_zp ? nullptr
                : wide  ? Make<int16_t>(qt, pshape, std::vector<int16_t>(zp.begin(), zp.end()))
                        : Zps(qt, pshape, zp);
  AttrMap attrs;
  if (axis >= 0) attrs.SetInt("axis", rng() % 2 ? axis : axis - int64_t(shape.size()));
  TensorPtr x;
  if (quantize) {
    const int64_t n = Numel(shape);
    std::vector<float> xv(static_cast<size_t>(n));
    // Ties relative to the scale of each element's block.
    int64_t inner = 1;
    if (axis >= 0)
      for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
    // 16-bit: quotients spread over the wider range too.
    for (int64_t i = 0; i < n; ++i)
      xv[size_t(i)] = RandomX(rng, sc[size_t((i / inner) % np)]) * (wide && i % 2 ? 200.f : 1.f);
    x = F32(shape, xv);
  } else if (wide) {
    std::vector<uint16_t> v(static_cast<size_t>(Numel(shape)));
    for (auto& e : v) e = uint16_t(rng());
    x = Make<uint16_t>(qt, shape, v);
  } else {
    x = Bytes(qt, shape, rng);
  }
  std::ostringstream what;
  what << (is_signed ? "int" : "uint") << (wide ? "16 " : "8 ") << ShapeStr(shape) << " axis "
       << axis << (f16_scale ? " f16 scale" : "") << (omit_zp ? " no zp" : "");
  return CompareWithReference(quantize ? "QuantizeLinear" : "DequantizeLinear",
                              {x, scale, omit_zp ? nullptr : z}, attrs, what.str());
}

TEST_CASE("kernels: QuantizeLinear per tensor, sizes 1..70 and large, matches the reference") {
  std::mt19937 rng(11);
  int fast = 0;
  for (int64_t n = 1; n <= 70; ++n)
    for (bool s : {true, false}) fast += QdqCase(true, s, {n}, -1, rng, true);
  for (int64_t n : {255, 1000, 4099, 140001})
    for (bool s : {true, false}) fast += QdqCase(true, s, {1, n}, -1, rng, n < 5000);
  fast += QdqCase(true, true, {2, 3, 40, 41}, -1, rng, false, /*f16_scale=*/true);
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: QuantizeLinear per axis (first, middle, last), blocks 1..70") {
  std::mt19937 rng(12);
  int fast = 0;
  for (int64_t blk = 1; blk <= 70; ++blk)
    for (bool s : {true, false}) {
      const int64_t c = 1 + int64_t(rng() % 7), o = 1 + int64_t(rng() % 3);
      fast += QdqCase(true, s, {o, c, blk}, 1, rng, true);          // inner blocks of blk
      fast += QdqCase(true, s, {c, blk}, 0, rng, true);             // axis 0
      fast += QdqCase(true, s, {o, blk}, 1, rng, true);             // axis last
      fast += QdqCase(true, s, {2, blk, 3}, 1, rng, blk % 2 == 0);  // short inner (3)
    }
  // Large enough for two threads, blocks long and short.
  fast += QdqCase(true, true, {1, 3, 256, 256}, 1, rng, false);
  fast += QdqCase(true, false, {600, 257}, 1, rng, false);
  fast += QdqCase(true, true, {70001, 2}, 0, rng, false);
  fast += QdqCase(true, false, {2, 5, 15, 1000}, 2, rng, false, /*f16_scale=*/true);
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: DequantizeLinear per tensor and per axis matches the reference") {
  std::mt19937 rng(13);
  int fast = 0;
  for (int64_t n = 1; n <= 70; ++n)
    for (bool s : {true, false}) {
      fast += QdqCase(false, s, {n}, -1, rng, true);
      const int64_t c = 1 + int64_t(rng() % 7);
      fast += QdqCase(false, s, {2, c, n}, 1, rng, true);
      fast += QdqCase(false, s, {c, n}, 1, rng, true);
      fast += QdqCase(false, s, {c, n}, 0, rng, false);
    }
  fast += QdqCase(false, true, {1, 64, 56, 56}, -1, rng, false);
  fast += QdqCase(false, false, {1, 64, 56, 56}, 1, rng, false);
  fast += QdqCase(false, true, {600, 257}, 1, rng, false);
  fast += QdqCase(false, false, {4, 9, 1000}, 1, rng, false, /*f16_scale=*/true);
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: 16-bit QuantizeLinear and DequantizeLinear match the reference") {
  std::mt19937 rng(14);
  int fast = 0;
  for (bool q : {true, false})
    for (bool s : {true, false}) {
      for (int64_t n = 1; n <= 40; ++n) {
        fast += QdqCase(q, s, {n}, -1, rng, true, false, /*wide=*/true);
        fast += QdqCase(q, s, {2, 1 + n % 5, n}, 1, rng, true, false, true);
      }
      fast += QdqCase(q, s, {1, 64, 56, 56}, -1, rng, false, false, true);
      fast += QdqCase(q, s, {600, 257}, 1, rng, false, false, true);
    }
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: DynamicQuantizeLinear matches the reference") {
  std::mt19937 rng(17);
  int fast = 0;
  for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 31, 33, 63, 65, 70, 1001, 140001}) {
    std::vector<float> x(static_cast<size_t>(n));
    const float s = Uniform(rng, 0.001f, 0.1f);
    for (auto& v : x) v = rng() % 8 ? RandomX(rng, s) : Uniform(rng, -3.f, 3.f);
    // Infinite or NaN extremes give an infinite/NaN scale: also compared.
    if (rng() % 2)
      for (auto& v : x)
        if (!std::isfinite(v)) v = 1.f;
    fast +=
        CompareWithReference("DynamicQuantizeLinear", {F32({n}, x)}, AttrMap(), std::to_string(n));
  }
  CHECK(fast > 0);
}

// One QLinearAdd/QLinearMul case with A of a_shape and B of b_shape.
// 16-bit values: random over the whole range (wide) or bytes.
TensorPtr Words(DType dt, const Shape& s, std::mt19937& rng) {
  std::vector<uint16_t> v(static_cast<size_t>(Numel(s)));
  for (auto& e : v) e = uint16_t(rng());
  return Make<uint16_t>(dt, s, v);
}

int BinaryCase(bool mul, bool is_signed, const Shape& a_shape, const Shape& b_shape,
               std::mt19937& rng, bool odd_scales, bool wide = false) {
  const DType qt = wide ? (is_signed ? DType::kInt16 : DType::kUInt16)
                        : (is_signed ? DType::kInt8 : DType::kUInt8);
  auto scale = [&]() {
    return F32({}, {RandomScale(rng, odd_scales) * (wide ? 1.f / 256.f : 1.f)});
  };
  auto zp = [&]() {
    const int32_t z = RandomZp(is_signed, rng);
    return wide ? Make<int16_t>(qt, {}, std::vector<int16_t>{int16_t(z * 256)}) : Zps(qt, {}, {z});
  };
  TensorPtr a = wide ? Words(qt, a_shape, rng) : Bytes(qt, a_shape, rng);
  TensorPtr b = wide ? Words(qt, b_shape, rng) : Bytes(qt, b_shape, rng);
  TensorPtr as = scale(), az = zp(), bs = scale(), bz = zp();
  // An output scale near the typical result range, sometimes odd.
  const float sa = as->t.ptr<float>()[0], sb = bs->t.ptr<float>()[0];
  const float typical = mul ? std::fabs(sa * sb) * 64.f : (std::fabs(sa) + std::fabs(sb)) * 1.5f;
  TensorPtr cs =
      odd_scales && rng() % 3 == 0 ? scale() : F32({}, {typical * Uniform(rng, 0.3f, 3.f)});
  TensorPtr cz = zp();
  // Dyadic scales make many exact ties: a * 2^-k.
  if (rng() % 4 == 0) {
    as = F32({}, {0.5f});
    bs = F32({}, {0.25f});
    cs = F32({}, {mul ? 0.25f : 0.5f});
  }
  std::vector<TensorPtr> in = {a, as, az, b, bs, bz, cs, cz};
  if (!is_signed && rng() % 4 == 0) in[7] = nullptr;  // C_zero_point omitted
  // A fused Relu or Clip: the clamp of the kernels' packed path (bytes).
  AttrMap attrs;
  if (!wide && rng() % 3 == 0) {
    const int32_t lo = is_signed ? -128 : 0;
    attrs.SetInt("_qmin", lo + int32_t(rng() % 100));
    attrs.SetInt("_qmax", lo + 155 + int32_t(rng() % 101));
  }
  std::ostringstream what;
  what << (is_signed ? "int" : "uint") << (wide ? "16 " : "8 ") << ShapeStr(a_shape) << " x "
       << ShapeStr(b_shape) << (attrs.Has("_qmin") ? " clamped" : "");
  return CompareWithReference(mul ? "QLinearMul" : "QLinearAdd", in, attrs, what.str());
}

TEST_CASE("kernels: QLinearAdd/QLinearMul every broadcast pattern matches the reference") {
  std::mt19937 rng(14);
  int fast = 0;
  for (bool mul : {false, true})
    for (bool s : {true, false}) {
      for (int64_t n = 1; n <= 70; ++n) {
        fast += BinaryCase(mul, s, {n}, {n}, rng, true);      // same shape
        fast += BinaryCase(mul, s, {n}, {}, rng, true);       // B scalar
        fast += BinaryCase(mul, s, {1}, {2, n}, rng, false);  // A one element
        const int64_t c = 1 + int64_t(rng() % 5);
        fast += BinaryCase(mul, s, {2, c, n}, {1, c, 1}, rng, false);  // per channel
        fast += BinaryCase(mul, s, {c, 1}, {c, n}, rng, false);        // per row, A broadcast
        fast += BinaryCase(mul, s, {2, c, n}, {n}, rng, false);        // lower rank B
        fast += BinaryCase(mul, s, {c, 1}, {1, n}, rng, false);        // outer product
      }
      fast += BinaryCase(mul, s, {2, 1, 3, 5}, {1, 4, 1, 5}, rng, true);
      fast += BinaryCase(mul, s, {2, 3, 1, 5}, {2, 1, 4, 1}, rng, true);
      fast += BinaryCase(mul, s, {1, 1, 1}, {1, 1, 1}, rng, true);
      fast += BinaryCase(mul, s, {}, {}, rng, true);
      fast += BinaryCase(mul, s, {3, 0, 4}, {4}, rng, false);  // empty
      // Large enough to split between threads.
      fast += BinaryCase(mul, s, {1, 64, 56, 56}, {1, 64, 56, 56}, rng, false);
      fast += BinaryCase(mul, s, {1, 64, 56, 56}, {1, 64, 1, 1}, rng, false);
      fast += BinaryCase(mul, s, {1, 1, 1, 1}, {1, 32, 67, 73}, rng, false);
    }
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

// NNCF mixes int8 and uint8 activations: A, B and C of different signedness.
TEST_CASE("kernels: QLinearAdd/QLinearMul with mixed int8/uint8 operands match the reference") {
  std::mt19937 rng(17);
  int fast = 0;
  for (bool mul : {false, true})
    for (int combo = 1; combo < 7; ++combo) {
      const DType at = combo & 1 ? DType::kInt8 : DType::kUInt8;
      const DType bt = combo & 2 ? DType::kInt8 : DType::kUInt8;
      const DType ct = combo & 4 ? DType::kInt8 : DType::kUInt8;
      for (const auto& shapes :
           {std::pair<Shape, Shape>{{1, 8, 9, 10}, {1, 8, 9, 10}},
            std::pair<Shape, Shape>{{2, 3, 70}, {1, 3, 1}}, std::pair<Shape, Shape>{{33}, {}}}) {
        auto zp = [&](DType t) { return Zps(t, {}, {RandomZp(t == DType::kInt8, rng)}); };
        std::vector<TensorPtr> in = {Bytes(at, shapes.first, rng),
                                     F32({}, {0.05f}),
                                     zp(at),
                                     Bytes(bt, shapes.second, rng),
                                     F32({}, {0.03f}),
                                     zp(bt),
                                     F32({}, {mul ? 0.2f : 0.07f}),
                                     zp(ct)};
        fast += CompareWithReference(mul ? "QLinearMul" : "QLinearAdd", in, AttrMap(),
                                     "mixed signedness " + std::to_string(combo));
      }
    }
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: 16-bit QLinearAdd/QLinearMul match the reference") {
  std::mt19937 rng(15);
  int fast = 0;
  for (bool mul : {false, true})
    for (bool s : {true, false}) {
      for (int64_t n = 1; n <= 40; ++n) {
        fast += BinaryCase(mul, s, {n}, {n}, rng, true, true);
        fast += BinaryCase(mul, s, {n}, {}, rng, true, true);
        const int64_t c = 1 + int64_t(rng() % 5);
        fast += BinaryCase(mul, s, {2, c, n}, {1, c, 1}, rng, false, true);
        fast += BinaryCase(mul, s, {c, 1}, {1, n}, rng, false, true);
      }
      fast += BinaryCase(mul, s, {1, 64, 56, 56}, {1, 64, 56, 56}, rng, false, true);
    }
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: QfLookupTable, QfRequantize, QLinearLeakyRelu/Sigmoid match the reference") {
  std::mt19937 rng(16);
  int fast = 0;
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= 70; ++n) sizes.push_back(n);
  for (int64_t n : {127, 128, 129, 1000, 140001}) sizes.push_back(n);
  for (int64_t n : sizes)
    for (bool s : {true, false}) {
      const DType qt = s ? DType::kInt8 : DType::kUInt8;
      const DType ot = rng() % 2 ? DType::kInt8 : DType::kUInt8;
      const std::string what = std::to_string(n) + (s ? " int8" : " uint8");
      fast += CompareWithReference("QfLookupTable", {Bytes(qt, {n}, rng), Bytes(ot, {256}, rng)},
                                   AttrMap(), what);
      auto scale = [&]() { return F32({}, {RandomScale(rng, true)}); };
      fast += CompareWithReference("QfRequantize",
                                   {Bytes(qt, {n}, rng), scale(), Zps(qt, {}, {RandomZp(s, rng)}),
                                    scale(), Zps(ot, {}, {RandomZp(ot == DType::kInt8, rng)})},
                                   AttrMap(), what);
      AttrMap alpha;
      alpha.SetFloat("alpha", Uniform(rng, -2.f, 2.f));
      const std::vector<TensorPtr> un = {Bytes(qt, {n}, rng), scale(),
                                         Zps(qt, {}, {RandomZp(s, rng)}), scale(),
                                         Zps(qt, {}, {RandomZp(s, rng)})};
      fast += CompareWithReference("QLinearLeakyRelu", un, alpha, what);
      fast += CompareWithReference("QLinearSigmoid", un, AttrMap(), what);
    }
  // Per-channel tables over channels-last data: channel counts around the
  // 8-lane vectors and the 64-channel blocks; the last channel's top entries
  // (the end of the table) are read on purpose.
  for (int64_t c : {1, 3, 8, 9, 16, 31, 64, 65, 70, 200})
    for (int64_t pixels : {1, 5, 33}) {
      const TensorPtr x = Bytes(DType::kUInt8, {1, pixels, c}, rng);
      uint8_t* xd = x->t.ptr<uint8_t>();
      for (int64_t p = 0; p < pixels; ++p) xd[p * c + c - 1] = uint8_t(253 + p % 3);
      AttrMap axis;
      axis.SetInt("axis", 2);
      fast += CompareWithReference("QfLookupTable", {x, Bytes(DType::kInt8, {c, 256}, rng)}, axis,
                                   std::to_string(pixels) + " pixels x " + std::to_string(c) +
                                       " channels, per-channel tables");
    }
  // 16-bit QfRequantize keeps the reference loop; still compared.
  const std::vector<uint16_t> x16 = {0, 1, 65535, 32768, 1234};
  CompareWithReference("QfRequantize",
                       {Make<uint16_t>(DType::kInt16, {5}, x16), F32({}, {0.5f}), nullptr,
                        F32({}, {0.25f}), Zps(DType::kInt8, {}, {3})},
                       AttrMap(), "int16 -> int8");
  MESSAGE("fast-path runs: " << fast);
  CHECK(fast > 0);
}

TEST_CASE("kernels: QLinearConcat copies and requantizes like the reference") {
  std::mt19937 rng(18);
  int fast = 0;
  for (int iter = 0; iter < 60; ++iter) {
    const bool s = iter % 2;
    const DType qt = s ? DType::kInt8 : DType::kUInt8;
    const int rank = 1 + int(rng() % 4);
    Shape base(static_cast<size_t>(rank));
    for (auto& d : base) d = 1 + int64_t(rng() % 9);
    const int axis = int(rng() % unsigned(rank));
    const float ys = Uniform(rng, 0.01f, 1.f);
    const int32_t yz = RandomZp(s, rng);
    std::vector<TensorPtr> in = {F32({}, {ys}), Zps(qt, {}, {yz})};
    const int inputs = 1 + int(rng() % 4);
    for (int i = 0; i < inputs; ++i) {
      Shape sh = base;
      sh[size_t(axis)] = 1 + int64_t(rng() % 70);
      in.push_back(Bytes(qt, sh, rng));
      const bool same = rng() % 3 == 0;
      in.push_back(F32({}, {same ? ys : RandomScale(rng, true)}));
      in.push_back(Zps(qt, {}, {same ? yz : RandomZp(s, rng)}));
    }
    AttrMap attrs;
    attrs.SetInt("axis", axis);
    fast += CompareWithReference("QLinearConcat", in, attrs,
                                 ShapeStr(base) + " axis " + std::to_string(axis));
  }
  CHECK(fast > 0);
}

// Large enough for the thread split (kMinParallelBytes in quant_elementwise.cc).
TEST_CASE("kernels: per-channel tables and concatenation split between threads") {
  std::mt19937 rng(21);
  for (int64_t c : {96, 131}) {
    CAPTURE(c);
    const int64_t pixels = 28 * 28;
    const TensorPtr x = Bytes(DType::kUInt8, {1, 28, 28, c}, rng);
    const TensorPtr t = Bytes(DType::kInt8, {c, 256}, rng);
    AttrMap a;
    a.SetInt("axis", 3);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      const std::vector<uint8_t> y =
          RunRaw("QfLookupTable", {x, t}, a, threads, kernels::DetectedIsa());
      const uint8_t* xd = x->t.ptr<uint8_t>();
      const uint8_t* td = t->t.ptr<uint8_t>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < pixels * c; ++i) wrong += y[size_t(i)] != td[i % c * 256 + xd[i]];
      for (int64_t i = pixels * c; i < int64_t(y.size()); ++i) wrong += y[size_t(i)] != 0xAB;
      CHECK(wrong == 0);
    }
  }
  // Channels-last (many short rows) and channels-first (one long row per
  // input), with inputs copied and requantized.
  for (int axis : {1, 3}) {
    CAPTURE(axis);
    std::vector<TensorPtr> in = {F32({}, {0.05f}), Zps(DType::kUInt8, {}, {128})};
    for (int64_t ch : {64, 48, 40}) {
      const Shape sh = axis == 3 ? Shape{1, 28, 28, ch} : Shape{1, ch, 28, 28};
      in.push_back(Bytes(DType::kUInt8, sh, rng));
      const bool same = ch == 48;
      in.push_back(F32({}, {same ? 0.05f : 0.03f + 0.001f * float(ch)}));
      in.push_back(Zps(DType::kUInt8, {}, {same ? 128 : int32_t(ch)}));
    }
    AttrMap attrs;
    attrs.SetInt("axis", axis);
    CHECK(CompareWithReference("QLinearConcat", in, attrs, "large") > 0);
  }
}

// Random valid QfChannelLines params [stages, 5, c]: every product and sum
// inside int32, each stage's range inside a byte range (the last in y's).
TensorPtr LineParams(int64_t stages, int64_t c, bool y_signed, std::mt19937& rng) {
  std::vector<int32_t> p(size_t(stages * 5 * c));
  auto rnd = [&](int64_t lo, int64_t hi) {
    return int32_t(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
  };
  for (int64_t st = 0; st < stages; ++st)
    for (int64_t ch = 0; ch < c; ++ch) {
      const bool last = st == stages - 1;
      const bool s8 = last ? y_signed : rng() % 2 == 0;
      int32_t lo = rnd(s8 ? -128 : 0, s8 ? 127 : 255), hi = rnd(s8 ? -128 : 0, s8 ? 127 : 255);
      if (lo > hi) std::swap(lo, hi);
      const int32_t shift = rnd(0, 24);
      // |mult| * 255 + |add| < 2^31; outputs spread over the range.
      const int32_t mult = rnd(-(int64_t(1) << 22), int64_t(1) << 22) >> (24 - shift);
      const int32_t add = rnd(-(int64_t(1) << 29), int64_t(1) << 29) >> (24 - shift);
      const int32_t row[5] = {mult, add, shift, lo, hi};
      for (int r = 0; r < 5; ++r) p[size_t((st * 5 + r) * c + ch)] = row[r];
    }
  auto t = std::make_shared<OwnedTensor>();
  t->t.dtype = DType::kInt32;
  t->t.shape = {stages, 5, c};
  t->storage.resize(p.size() * 4);
  std::memcpy(t->storage.data(), p.data(), t->storage.size());
  t->t.data = t->storage.data();
  return t;
}

TEST_CASE("kernels: QfChannelLines matches the reference at every level, both layouts") {
  // Channels-last rows take the vector kernels (AVX2: 8 channels, AVX-512: 16,
  // parameters in registers up to 4 stages, from memory beyond); channels
  // first the scalar loop. Channel counts with tails, 1-5 stages, every
  // signedness of x and y.
  std::mt19937 rng(31);
  int fast = 0;
  for (int64_t c : {1, 7, 16, 40, 131})
    for (int64_t stages : {1, 2, 3, 4, 5})
      for (int signs = 0; signs < 4; ++signs) {
        const bool x_signed = signs & 1, y_signed = signs & 2;
        const DType xt = x_signed ? DType::kInt8 : DType::kUInt8;
        const TensorPtr params = LineParams(stages, c, y_signed, rng);
        AttrMap a;
        a.SetInt("y_signed", y_signed);
        for (int axis : {3, 1}) {
          const Shape sh = axis == 3 ? Shape{2, 5, 37, c} : Shape{2, c, 5, 37};
          a.SetInt("axis", axis);
          const std::string what = "c " + std::to_string(c) + " stages " + std::to_string(stages) +
                                   " signs " + std::to_string(signs) + " axis " +
                                   std::to_string(axis);
          fast += CompareWithReference("QfChannelLines", {Bytes(xt, sh, rng), params}, a, what);
        }
      }
  CHECK(fast > 0);
}

TEST_CASE("kernels: QfChannelLines refuses parameters that leave int32 or the byte range") {
  std::mt19937 rng(32);
  const TensorPtr x = Bytes(DType::kUInt8, {1, 4, 2, 2}, rng);
  AttrMap a;
  a.SetInt("axis", 1);
  // One stage for 4 channels; channel 2 broken in each way.
  auto with = [&](int row, int32_t v, bool y_signed) {
    TensorPtr p = LineParams(1, 4, y_signed, rng);
    int32_t* d = reinterpret_cast<int32_t*>(p->storage.data());
    for (int ch = 0; ch < 4; ++ch) d[0 * 4 + ch] = 1, d[1 * 4 + ch] = 0, d[2 * 4 + ch] = 0;
    d[row * 4 + 2] = v;
    return p;
  };
  struct Bad {
    int row;
    int32_t v;
    const char* says;
  };
  for (const Bad& b : {Bad{2, 31, "shift 31"}, Bad{2, -1, "shift -1"},
                       Bad{0, 1 << 24, "products leave int32"}, Bad{3, 127, "lo > hi"}}) {
    const std::string says = b.says;
    CAPTURE(says);
    AttrMap at = a;
    TensorPtr p = with(b.row, b.v, false);
    int32_t* d = reinterpret_cast<int32_t*>(p->storage.data());
    if (std::string(b.says) == "lo > hi") d[4 * 4 + 2] = 100;  // hi below lo = 127
    const OpRun r = RunOp("QfChannelLines", {x, p}, at);
    CHECK_FALSE(r.status.ok());
    CHECK(r.status.message().find(b.says) != std::string::npos);
    CHECK(r.status.message().find("channel 2") != std::string::npos);
  }
  // A last range beyond int8 when y is int8.
  TensorPtr p = with(4, 200, true);
  int32_t* d = reinterpret_cast<int32_t*>(p->storage.data());
  d[3 * 4 + 2] = 0;
  a.SetInt("y_signed", 1);
  const OpRun r = RunOp("QfChannelLines", {x, p}, a);
  CHECK_FALSE(r.status.ok());
  CHECK(r.status.message().find("int8") != std::string::npos);
}

TEST_CASE("kernels: FitClampedLine reproduces rounded lines and refuses curves") {
  // Tables as a quantizer makes them: clamp(round_half_even(a x + b), lo, hi),
  // steep and shallow, rising and falling, with Relu-like floors; the fit
  // must reproduce every point in int32. Curves and zigzags have no line.
  std::mt19937 rng(33);
  int fitted = 0;
  for (int it = 0; it < 400; ++it) {
    const bool s8 = it % 2;
    const double a = std::pow(10.0, Uniform(rng, -2.5f, 1.2f)) * (it % 3 == 0 ? -1 : 1);
    const double b = Uniform(rng, -200.f, 300.f);
    const int32_t lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    const int32_t floor_at = it % 5 == 0 ? (s8 ? -10 : 20) : lo;
    int32_t xs[256], ys[256];
    for (int i = 0; i < 256; ++i) {
      xs[i] = s8 ? i - 128 : i;
      const double v = std::nearbyint(a * xs[i] + b);
      ys[i] = int32_t(std::min<double>(std::max<double>(v, floor_at), hi));
    }
    int32_t m = 0, ad = 0, sh = 0, l = 0, h = 0;
    CAPTURE(a);
    CAPTURE(b);
    REQUIRE(kernels::FitClampedLine(xs, ys, 256, &m, &ad, &sh, &l, &h));
    for (int i = 0; i < 256; ++i)
      REQUIRE(std::min(std::max((xs[i] * m + ad) >> sh, l), h) == ys[i]);
    ++fitted;
  }
  CHECK(fitted == 400);
  int32_t xs[256], curve[256], zigzag[256];
  for (int i = 0; i < 256; ++i) {
    xs[i] = i;
    curve[i] = int32_t(std::nearbyint(255.0 / (1.0 + std::exp(-(i - 128) / 16.0))));
    zigzag[i] = i % 2 ? 10 : 20;
  }
  int32_t m, ad, sh, l, h;
  CHECK_FALSE(kernels::FitClampedLine(xs, curve, 256, &m, &ad, &sh, &l, &h));
  CHECK_FALSE(kernels::FitClampedLine(xs, zigzag, 256, &m, &ad, &sh, &l, &h));
}

// ns per element of one op with the kernels of `isa`.
double TimeOp(const std::string& type, const std::vector<TensorPtr>& inputs, const AttrMap& attrs,
              int threads, int64_t n, Isa isa) {
  const OpDef* def = FindOp(type);
  std::string name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = test::TestPool(threads);
  ctx.kernels = &IsaConfig(isa);
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  OwnedTensor out;
  ctx.outputs = {&out.t};
  REQUIRE(def->infer(ctx).ok());
  out.storage.assign(out.t.bytes() + 64, 0);
  out.t.data = out.storage.data();
  REQUIRE(def->run(ctx).ok());
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const int iters = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) (void)def->run(ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s / iters);
  }
  return best * 1e9 / double(n);
}

// Run with --no-skip: ns/element before (reference) and after (each level).
TEST_CASE("kernels: element-wise int8 quantization benchmark" * doctest::skip()) {
  std::mt19937 rng(15);
  struct Case {
    std::string label, type;
    std::vector<TensorPtr> in;
    AttrMap attrs;
    int64_t n;
  };
  std::vector<Case> cases;
  {
    std::vector<float> x(3 * 416 * 416);
    for (auto& v : x) v = Uniform(rng, -3.f, 3.f);
    cases.push_back({"QuantizeLinear f32->u8 1x3x416x416 per tensor",
                     "QuantizeLinear",
                     {F32({1, 3, 416, 416}, x), F32({}, {0.02f}), Zps(DType::kUInt8, {}, {128})},
                     AttrMap(),
                     int64_t(x.size())});
    AttrMap ax;
    ax.SetInt("axis", 1);
    cases.push_back({"QuantizeLinear f32->s8 1x3x416x416 per axis 1",
                     "QuantizeLinear",
                     {F32({1, 3, 416, 416}, x), F32({3}, {0.02f, 0.03f, 0.025f}),
                      Zps(DType::kInt8, {3}, {0, -3, 5})},
                     ax,
                     int64_t(x.size())});
  }
  const Shape t = {1, 64, 56, 56};
  const int64_t n = Numel(t);
  cases.push_back({"DequantizeLinear s8->f32 1x64x56x56",
                   "DequantizeLinear",
                   {Bytes(DType::kInt8, t, rng), F32({}, {0.05f}), Zps(DType::kInt8, {}, {-3})},
                   AttrMap(),
                   n});
  auto qbin = [&](const Shape& bs) {
    return std::vector<TensorPtr>{Bytes(DType::kInt8, t, rng),
                                  F32({}, {0.05f}),
                                  Zps(DType::kInt8, {}, {-3}),
                                  Bytes(DType::kInt8, bs, rng),
                                  F32({}, {0.04f}),
                                  Zps(DType::kInt8, {}, {7}),
                                  F32({}, {0.07f}),
                                  Zps(DType::kInt8, {}, {1})};
  };
  cases.push_back({"QLinearAdd s8 1x64x56x56 same shape", "QLinearAdd", qbin(t), AttrMap(), n});
  cases.push_back(
      {"QLinearAdd s8 1x64x56x56 + 1x64x1x1", "QLinearAdd", qbin({1, 64, 1, 1}), AttrMap(), n});
  cases.push_back({"QLinearMul s8 1x64x56x56 same shape", "QLinearMul", qbin(t), AttrMap(), n});
  {
    std::vector<TensorPtr> in = {Bytes(DType::kUInt8, t, rng), Bytes(DType::kUInt8, {256}, rng)};
    cases.push_back({"QfLookupTable u8 1x64x56x56", "QfLookupTable", in, AttrMap(), n});
    cases.push_back({"QfRequantize s8->u8 1x64x56x56",
                     "QfRequantize",
                     {Bytes(DType::kInt8, t, rng), F32({}, {0.05f}), Zps(DType::kInt8, {}, {-3}),
                      F32({}, {0.07f}), Zps(DType::kUInt8, {}, {128})},
                     AttrMap(),
                     n});
  }
  for (const Case& c : cases) {
    std::ostringstream line;
    line << c.label << ":";
    for (Isa isa : kernels::SupportedIsas()) {
      for (int threads : {1, 2}) {
        if (isa == Isa::kReference && threads == 2) continue;
        line << "  " << kernels::IsaName(isa) << "/" << threads << "t "
             << TimeOp(c.type, c.in, c.attrs, threads, c.n, isa) << " ns/el";
      }
    }
    MESSAGE(line.str());
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
