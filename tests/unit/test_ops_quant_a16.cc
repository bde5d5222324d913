// a16w8: QLinearConv and QLinearMatMul with 16-bit activations and 8-bit
// weights. Hand-computed cases whose accumulator leaves int32 (so only exact
// int64 accumulation gives the right answer), and random cases against
// DequantizeLinear -> float64 convolution -> QuantizeLinear, in both layouts,
// prepared and not, at 1 and 2 threads.
#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/aligned_vector.h"
#include "kernels/kernel_config.h"
#include "op_harness.h"
#include "ops/quant_util.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;

TensorPtr Scalar(float v) {
  return F32({}, {v});
}
TensorPtr U16(Shape s, std::vector<uint16_t> v) {
  return Make<uint16_t>(DType::kUInt16, std::move(s), std::move(v));
}
TensorPtr I16(Shape s, std::vector<int16_t> v) {
  return Make<int16_t>(DType::kInt16, std::move(s), std::move(v));
}
TensorPtr I8(Shape s, std::vector<int8_t> v) {
  return Make<int8_t>(DType::kInt8, std::move(s), std::move(v));
}
TensorPtr U8(Shape s, std::vector<uint8_t> v) {
  return Make<uint8_t>(DType::kUInt8, std::move(s), std::move(v));
}
TensorPtr I32(Shape s, std::vector<int32_t> v) {
  return Make<int32_t>(DType::kInt32, std::move(s), std::move(v));
}

// Infer, prepare (when `prepare` and the op has one), run; the output as int32s.
struct Result {
  Status status;
  Shape shape;
  std::vector<int32_t> values;
  bool reference_path = false;
  bool prepared = false;  // prepare built a fast-kernel state
};

int32_t LoadInt(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kInt8:
      return t.ptr<int8_t>()[i];
    case DType::kUInt8:
      return t.ptr<uint8_t>()[i];
    case DType::kInt16:
      return t.ptr<int16_t>()[i];
    case DType::kUInt16:
      return t.ptr<uint16_t>()[i];
    default:
      return INT32_MIN;
  }
}

// The kernel configurations whose a16w8 kernels differ (the reference's
// first), one per variant this CPU can run, so every SIMD level meets the oracle.
std::vector<const kernels::KernelConfig*> A16Levels() {
  std::vector<const kernels::KernelConfig*> levels;
  for (int i = 0; i <= int(kernels::Isa::kAmx); ++i) {
    const kernels::KernelConfig& kc = IsaConfig(kernels::Isa(i));
    bool seen = false;
    for (const kernels::KernelConfig* l : levels) seen = seen || l->a16 == kc.a16;
    if (!seen) levels.push_back(&kc);
  }
  return levels;
}

Result Run(const std::string& type, const std::vector<TensorPtr>& inputs, const AttrMap& attrs,
           bool prepare, int threads, const kernels::KernelConfig* kc = nullptr) {
  Result r;
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "a16";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = TestPool(threads);
  ctx.kernels = kc;
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  OwnedTensor out;
  ctx.outputs = {&out.t};
  r.status = def->infer(ctx);
  if (!r.status.ok()) return r;
  out.storage.assign(out.t.bytes() + 64, 0xCD);
  out.t.data = out.storage.data();
  std::shared_ptr<void> state;
  if (prepare && def->prepare) {
    r.status = def->prepare(ctx, &state);
    if (!r.status.ok()) return r;
  }
  ctx.state = state.get();
  r.prepared = state != nullptr;
  r.status = def->run(ctx);
  if (!r.status.ok()) return r;
  for (size_t i = out.t.bytes(); i < out.storage.size(); ++i) REQUIRE(out.storage[i] == 0xCD);
  r.shape = out.t.shape;
  r.reference_path = ctx.reference_path;
  for (int64_t i = 0; i < out.t.numel(); ++i) r.values.push_back(LoadInt(out.t, i));
  return r;
}

// x uint16 [1, 64, 3, 3] all 65535 (zero point 0), w int8 [1, 64, 3, 3] all
// -128: one output whose sum is 65535 * -128 * 576 = -4831838208, beyond
// int32. Scales 0.5 * 0.25 / 32768 -> -4831838208 / 262144 = -18431.71875,
// which rounds to -18432 (int16 output, zero point 0).
TEST_CASE("a16w8 qlinearconv: a sum beyond int32 requantizes exactly") {
  const int64_t k = 64 * 9;
  for (bool prepare : {false, true}) {
    CAPTURE(prepare);
    Result r = Run("QLinearConv",
                   {U16({1, 64, 3, 3}, std::vector<uint16_t>(size_t(k), 65535)), Scalar(0.5f),
                    U16({}, {0}), I8({1, 64, 3, 3}, std::vector<int8_t>(size_t(k), -128)),
                    Scalar(0.25f), I8({}, {0}), Scalar(32768.f), I16({}, {0})},
                   AttrMap(), prepare, 1);
    CAPTURE(r.status.message());
    REQUIRE(r.status.ok());
    CHECK(r.shape == Shape{1, 1, 1, 1});
    CHECK(r.values == std::vector<int32_t>{-18432});
  }
}

// A int16 [1, 600] all -32768 (zero point 0) times B int8 [600, 2] columns
// {-128, 127}: sums 2516582400 and -2496921600 (both beyond int32); with
// scales 1 * 1 / 2^17 and the bias {0, 131072} (1 at the output scale):
// 19200 and -19050 + 1 = -19049.
TEST_CASE("a16w8 qlinearmatmul: sums beyond int32 and the bias") {
  std::vector<int8_t> b;
  for (int i = 0; i < 600; ++i) {
    b.push_back(-128);
    b.push_back(127);
  }
  for (bool prepare : {false, true}) {
    CAPTURE(prepare);
    Result r = Run("QLinearMatMul",
                   {I16({1, 600}, std::vector<int16_t>(600, -32768)), Scalar(1.f), I16({}, {0}),
                    I8({600, 2}, b), Scalar(1.f), I8({}, {0}), Scalar(131072.f), I16({}, {0}),
                    I32({2}, {0, 131072})},
                   AttrMap(), prepare, 1);
    CAPTURE(r.status.message());
    REQUIRE(r.status.ok());
    CHECK(r.values == std::vector<int32_t>{19200, -19049});
  }
}

// Both operands 16-bit (attention's activation x activation products).
TEST_CASE("a16 qlinearmatmul: two 16-bit activations") {
  // a uint16 [2, 2] zp 100, b int16 [2, 2] zp -3; y uint16 zp 7, scales 1.
  // a - zp = {{900, -100}, {0, 65435}}, b - zp = {{3, 5}, {-1000, 2}}:
  //   row 0: {2700 + 100000, 4500 - 200} = {102700, 4300} -> clamped 65535, 4307
  //   row 1: {-65435000, 130870} -> 0 (clamp), 65535 (clamp)
  Result r =
      Run("QLinearMatMul",
          {U16({2, 2}, {1000, 0, 100, 65535}), Scalar(1.f), U16({}, {100}),
           I16({2, 2}, {0, 2, -1003, -1}), Scalar(1.f), I16({}, {-3}), Scalar(1.f), U16({}, {7})},
          AttrMap(), true, 1);
  CAPTURE(r.status.message());
  REQUIRE(r.status.ok());
  CHECK(r.values == std::vector<int32_t>{65535, 4307, 0, 65535});
}

// The prepared kernel (rows of A as a 1x1 convolution) against the reference
// kernel, with batch dims, a long reduction and per-column scales.
TEST_CASE("a16w8 qlinearmatmul: prepared kernel matches the reference") {
  std::mt19937 rng(3);
  for (int64_t k : {7, 64, 700}) {
    for (DType at : {DType::kUInt16, DType::kInt16}) {
      CAPTURE(k);
      const int64_t n = 19, rows = 6;
      const bool au = at == DType::kUInt16;
      std::uniform_int_distribution<int32_t> ad(au ? 0 : -32768, au ? 65535 : 32767), bd(-128, 127);
      std::vector<int32_t> av(size_t(rows * k)), bv(size_t(k * n));
      for (auto& v : av) v = ad(rng);
      for (auto& v : bv) v = bd(rng);
      TensorPtr a = au ? U16({2, 3, k}, std::vector<uint16_t>(av.begin(), av.end()))
                       : I16({2, 3, k}, std::vector<int16_t>(av.begin(), av.end()));
      TensorPtr azp = au ? U16({}, {40000}) : I16({}, {-77});
      std::vector<float> bs(static_cast<size_t>(n));
      std::vector<int32_t> bias(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        bs[size_t(j)] = 0.004f + 0.001f * float(j);
        bias[size_t(j)] = int32_t(j * 12345) - 100000;
      }
      std::vector<TensorPtr> in = {a,
                                   Scalar(0.0005f),
                                   azp,
                                   I8({k, n}, std::vector<int8_t>(bv.begin(), bv.end())),
                                   F32({n}, bs),
                                   I8({}, {0}),
                                   Scalar(0.7f),
                                   U16({}, {32768}),
                                   I32({n}, bias)};
      Result ref = Run("QLinearMatMul", in, AttrMap(), false, 1);
      REQUIRE(ref.status.ok());
      CHECK(ref.shape == Shape{2, 3, n});
      for (const kernels::KernelConfig* kc : A16Levels())
        for (int threads : {1, 2}) {
          CAPTURE(kc->Describe());
          Result fast = Run("QLinearMatMul", in, AttrMap(), true, threads, kc);
          REQUIRE(fast.status.ok());
          CHECK(fast.prepared == (kc->a16 != nullptr));
          CHECK(fast.reference_path == !fast.prepared);
          CHECK(fast.values == ref.values);
        }
    }
  }
}

// a16 x a16 on the int16-pair kernel (kernels/qmatmul_a16a16.h) against the
// reference kernel, bit for bit: every mix of int16/uint16 operands (and an
// 8-bit B), reductions across the kernel's 128-pair chunks and odd, extreme
// values (all -32768 or 65535 rows) where a pair product leaves int32, batch
// dims, per-column b zero points, 8- and 16-bit outputs, 1 and 2 threads.
TEST_CASE("a16 qlinearmatmul: the a16 x a16 kernel matches the reference") {
  const kernels::KernelConfig& fast_kc = kernels::DefaultKernelConfig();
  if (!fast_kc.a16a16) {
    MESSAGE("no a16 x a16 kernel at this ISA level");
    return;
  }
  std::mt19937 rng(11);
  int cases = 0;
  for (int i = 0; i < 36; ++i) {
    const DType at = i % 2 ? DType::kUInt16 : DType::kInt16;
    const DType bt = i % 9 == 4 ? DType::kUInt8 : (i / 2) % 2 ? DType::kUInt16 : DType::kInt16;
    const DType yt = i % 3 == 0 ? DType::kUInt8 : i % 3 == 1 ? DType::kInt16 : DType::kUInt16;
    const int64_t ks[] = {1, 2, 7, 255, 256, 257, 700};
    const int64_t k = ks[i % 7], m = 1 + rng() % 9, n = 1 + rng() % 21;
    const bool batched = i % 4 == 3, per_column = i % 5 == 2, extreme = i % 6 == 5;
    auto values = [&](DType t, int64_t count) {
      std::vector<int32_t> v(static_cast<size_t>(count));
      const QRange r = QuantRange(t);
      for (auto& x : v)
        x = extreme ? (t == DType::kUInt16 || t == DType::kUInt8 ? r.hi : r.lo)
                    : r.lo + int32_t(rng() % uint32_t(int64_t(r.hi) - r.lo + 1));
      return v;
    };
    auto tensor = [&](DType t, Shape s, const std::vector<int32_t>& v) -> TensorPtr {
      switch (t) {
        case DType::kUInt16:
          return U16(std::move(s), std::vector<uint16_t>(v.begin(), v.end()));
        case DType::kInt16:
          return I16(std::move(s), std::vector<int16_t>(v.begin(), v.end()));
        default:
          return U8(std::move(s), std::vector<uint8_t>(v.begin(), v.end()));
      }
    };
    const int64_t batch = batched ? 2 : 1;
    const Shape as = batched ? Shape{batch, m, k} : Shape{m, k};
    const Shape bs = batched ? Shape{batch, k, n} : Shape{k, n};
    std::vector<int32_t> bzp = values(bt, per_column ? n : 1);
    std::vector<float> b_scale(static_cast<size_t>(per_column ? n : 1));
    for (float& v : b_scale) v = 1e-4f * float(1 + rng() % 50);
    std::vector<TensorPtr> in = {tensor(at, as, values(at, batch * m * k)),
                                 Scalar(0.002f),
                                 tensor(at, {}, values(at, 1)),
                                 tensor(bt, bs, values(bt, batch * k * n)),
                                 F32(per_column ? Shape{n} : Shape{}, b_scale),
                                 tensor(bt, per_column ? Shape{n} : Shape{}, bzp),
                                 Scalar(i % 3 == 0 ? 50.f : 0.9f),
                                 tensor(yt, {}, values(yt, 1))};
    CAPTURE(i);
    CAPTURE(k);
    const OpRun ref =
        RunOp("QLinearMatMul", in, AttrMap(), 1, 1, &kernels::ReferenceKernelConfig());
    REQUIRE(ref.status.ok());
    std::vector<int32_t> want;
    for (int64_t e = 0; e < ref.outputs[0]->t.numel(); ++e)
      want.push_back(LoadInt(ref.outputs[0]->t, e));
    for (int threads : {1, 2}) {
      const Result fast = Run("QLinearMatMul", in, AttrMap(), true, threads);
      REQUIRE(fast.status.ok());
      CHECK(!fast.reference_path);  // the kernel ran, not a silent fallback
      CHECK(fast.values == want);
    }
    ++cases;
  }
  MESSAGE(cases << " a16 x a16 cases compared");
}

// kernels::MatMulA16A16 itself against int64 sums, so no requantization or
// clamp hides a wrong accumulator: all 16 8/16-bit mixes of A and B, rows not a
// multiple of the 4-row tile, n not a multiple of the 8-column panel, odd k,
// k across the 128-pair int32 chunks (up to 550 pairs, so the int64 widening
// runs several times), and values at the corners of each type: random, drawn
// from {lo, lo + 1, hi - 1, hi, 0}, and uniform worst cases (A' = -32768
// against B' = 32767 fills the low byte plane's chunk to -32768 * 255 * 256;
// both -32768 fill the high plane's to 2^30). 1 and 2 threads.
TEST_CASE("a16 qlinearmatmul: the a16 x a16 microkernel's int64 sums") {
  const kernels::KernelConfig& kc = kernels::DefaultKernelConfig();
  if (!kc.a16a16) {
    MESSAGE("no a16 x a16 kernel at this ISA level");
    return;
  }
  std::mt19937 rng(29);
  const DType types[] = {DType::kInt16, DType::kUInt16, DType::kInt8, DType::kUInt8};
  // Each mix and mode once with a short k and once with a long one.
  int cases = 0;
  for (int i = 0; i < 128; ++i) {
    const DType at = types[i % 4], bt = types[(i / 4) % 4];
    const int mode = (i / 16) % 4;  // 0 random, 1 corners, 2 A' lo / B' hi, 3 both lo
    const int64_t short_ks[] = {1, 2, 3, 255, 256, 257};
    const int64_t rows_of[] = {1, 3, 4, 5, 9}, ns[] = {1, 7, 8, 9, 17};
    const int64_t k = i < 64 ? short_ks[i % 6] : i % 2 ? 513 : 1100;
    const int64_t rows = rows_of[i % 5], n = ns[(i / 5) % 5];
    // Elements by `mode`; zero points (`m` 0) always random.
    auto values = [&](DType t, int64_t count, bool is_a, int m) {
      const QRange r = QuantRange(t);
      const int32_t corners[] = {r.lo, r.lo + 1, r.hi - 1, r.hi, 0};
      std::vector<int32_t> v(static_cast<size_t>(count));
      for (auto& x : v) {
        switch (m) {
          case 0:
            x = r.lo + int32_t(rng() % uint32_t(int64_t(r.hi) - r.lo + 1));
            break;
          case 1:
            x = corners[rng() % 5];
            break;
          case 2:
            x = is_a ? r.lo : r.hi;
            break;
          default:
            x = r.lo;
        }
      }
      return v;
    };
    auto store = [](DType t, const std::vector<int32_t>& v) {
      std::vector<uint8_t> bytes(v.size() * 2);
      for (size_t e = 0; e < v.size(); ++e) {
        if (t == DType::kInt16 || t == DType::kUInt16) {
          const uint16_t h = uint16_t(v[e]);
          std::memcpy(bytes.data() + 2 * e, &h, 2);
        } else {
          bytes[e] = uint8_t(v[e]);
        }
      }
      return bytes;
    };
    const std::vector<int32_t> av = values(at, rows * k, true, mode);
    const std::vector<int32_t> bv = values(bt, k * n, false, mode);
    const int32_t azp = values(at, 1, true, 0)[0];
    const std::vector<int32_t> bzp = values(bt, i % 3 == 1 ? n : 1, false, 0);
    const std::vector<uint8_t> a_raw = store(at, av), b_raw = store(bt, bv);
    std::vector<int64_t> want(static_cast<size_t>(rows * n), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t zb = bzp[bzp.size() == 1 ? 0 : size_t(j)];
        int64_t sum = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          sum += (int64_t(av[size_t(r * k + kk)]) - azp) * (bv[size_t(kk * n + j)] - zb);
        want[size_t(r * n + j)] = sum;
      }
    CAPTURE(i);
    CAPTURE(k);
    CAPTURE(rows);
    CAPTURE(n);
    CAPTURE(mode);
    for (int threads : {1, 2}) {
      std::vector<int64_t> got(want.size(), -1);
      // Garbage in the scratch: the kernel must clear the pads and sums it reads.
      kernels::AlignedVector<uint8_t> scratch(kernels::MatMulA16A16Scratch(rows, k, n) + 64, 0xa5);
      REQUIRE(kernels::MatMulA16A16(kc, a_raw.data(), at, azp, rows, k, b_raw.data(), bt, bzp, n,
                                    got.data(), scratch.data(), TestPool(threads)));
      CHECK(got == want);
    }
    ++cases;
  }
  MESSAGE(cases << " a16 x a16 microkernel cases compared");
}

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, stride, pad, group;
  DType xt, yt;
};

// NCHW -> NHWC copy of a quantized tensor's raw elements.
template <class T>
std::vector<T> ToNhwc(const std::vector<T>& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<T> out(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < h * w; ++i)
        out[size_t((b * h * w + i) * c + ch)] = v[size_t((b * c + ch) * h * w + i)];
  return out;
}

TEST_CASE("a16w8 qlinearconv: random against DQ -> float64 conv -> Q, both layouts") {
  const ConvCase cases[] = {
      {1, 16, 9, 11, 24, 3, 3, 1, 1, 1, DType::kUInt16, DType::kUInt16},
      {2, 8, 7, 7, 12, 1, 1, 1, 0, 1, DType::kInt16, DType::kInt16},
      {1, 64, 6, 6, 8, 3, 3, 2, 1, 1, DType::kUInt16, DType::kUInt8},
      {1, 3, 10, 10, 16, 5, 5, 2, 2, 1, DType::kInt16, DType::kUInt16},
      {1, 12, 5, 6, 12, 3, 3, 1, 1, 12, DType::kUInt16, DType::kUInt16},  // depthwise
      {2, 40, 9, 8, 40, 5, 5, 2, 2, 40, DType::kInt16, DType::kUInt8},    // depthwise, tail
      {1, 32, 6, 6, 32, 3, 3, 1, 1, 32, DType::kUInt16, DType::kInt16},   // depthwise
      {1, 8, 6, 6, 16, 3, 3, 1, 1, 4, DType::kUInt16, DType::kUInt16},    // grouped
      {2, 24, 5, 7, 60, 1, 1, 1, 0, 3, DType::kInt16, DType::kUInt8},     // grouped 1x1, tails
      {1, 160, 4, 4, 10, 3, 3, 1, 1, 1, DType::kUInt16, DType::kInt16},   // K 1440
      {1, 16, 5, 5, 72, 3, 3, 1, 1, 1, DType::kUInt16, DType::kUInt8},    // 4 + 1 panels
      {1, 160, 3, 3, 50, 3, 3, 1, 1, 1, DType::kInt16, DType::kUInt16},   // K 1440, 4 panels
  };
  std::mt19937 rng(7);
  for (const ConvCase& cc : cases) {
    CAPTURE(cc.c);
    CAPTURE(cc.m);
    CAPTURE(cc.kh);
    const bool xu = cc.xt == DType::kUInt16;
    const int32_t xlo = xu ? 0 : -32768, xhi = xu ? 65535 : 32767;
    std::uniform_int_distribution<int32_t> xd(xlo, xhi), wd(-128, 127);
    const int64_t cg = cc.c / cc.group;
    std::vector<int32_t> x(size_t(cc.n * cc.c * cc.h * cc.w)), w(size_t(cc.m * cg * cc.kh * cc.kw));
    for (auto& v : x) v = xd(rng);
    for (auto& v : w) v = wd(rng);
    const int32_t xzp = xu ? 31000 : -1200;
    const float xs = 0.002f, ys = 0.9f;
    std::vector<float> wsv(size_t(cc.m));
    std::vector<int32_t> bias(size_t(cc.m));
    for (int64_t i = 0; i < cc.m; ++i) {
      wsv[size_t(i)] = 0.01f + 0.003f * float(i % 7);
      bias[size_t(i)] = int32_t(i * 997) - 5000;
    }
    const int32_t yzp = cc.yt == DType::kUInt16 ? 30000 : cc.yt == DType::kUInt8 ? 128 : 11;
    const int32_t ylo = cc.yt == DType::kUInt16 || cc.yt == DType::kUInt8 ? 0 : -32768;
    const int32_t yhi = cc.yt == DType::kUInt16 ? 65535 : cc.yt == DType::kUInt8 ? 255 : 32767;

    // The literal graph in float64: DQ(x) * DQ(w) summed, + DQ(bias), then Q.
    const int64_t oh = (cc.h + 2 * cc.pad - cc.kh) / cc.stride + 1;
    const int64_t ow = (cc.w + 2 * cc.pad - cc.kw) / cc.stride + 1;
    std::vector<int32_t> expect;
    for (int64_t b = 0; b < cc.n; ++b)
      for (int64_t oc = 0; oc < cc.m; ++oc)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t g = oc / (cc.m / cc.group);
            double acc = double(bias[size_t(oc)]) * double(xs) * double(wsv[size_t(oc)]);
            for (int64_t ic = 0; ic < cg; ++ic)
              for (int64_t ky = 0; ky < cc.kh; ++ky)
                for (int64_t kx = 0; kx < cc.kw; ++kx) {
                  const int64_t iy = oy * cc.stride - cc.pad + ky,
                                ix = ox * cc.stride - cc.pad + kx;
                  if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                  const int32_t xv = x[size_t(((b * cc.c + g * cg + ic) * cc.h + iy) * cc.w + ix)];
                  const int32_t wv = w[size_t(((oc * cg + ic) * cc.kh + ky) * cc.kw + kx)];
                  acc += double(xv - xzp) * double(xs) * double(wv) * double(wsv[size_t(oc)]);
                }
            double q = std::nearbyint(acc / double(ys)) + yzp;
            expect.push_back(int32_t(std::min<double>(yhi, std::max<double>(ylo, q))));
          }

    auto make_x = [&](bool nhwc) {
      std::vector<int32_t> v = nhwc ? ToNhwc(x, cc.n, cc.c, cc.h, cc.w) : x;
      Shape s = nhwc ? Shape{cc.n, cc.h, cc.w, cc.c} : Shape{cc.n, cc.c, cc.h, cc.w};
      if (xu) return U16(s, std::vector<uint16_t>(v.begin(), v.end()));
      return I16(s, std::vector<int16_t>(v.begin(), v.end()));
    };
    TensorPtr xzp_t = xu ? U16({}, {uint16_t(xzp)}) : I16({}, {int16_t(xzp)});
    TensorPtr yzp_t = cc.yt == DType::kUInt16  ? U16({}, {uint16_t(yzp)})
                      : cc.yt == DType::kUInt8 ? U8({}, {uint8_t(yzp)})
                                               : I16({}, {int16_t(yzp)});
    TensorPtr w_t = I8({cc.m, cg, cc.kh, cc.kw}, std::vector<int8_t>(w.begin(), w.end()));
    AttrMap attrs;
    attrs.SetInts("pads", {cc.pad, cc.pad, cc.pad, cc.pad});
    attrs.SetInts("strides", {cc.stride, cc.stride});
    attrs.SetInt("group", cc.group);
    std::vector<int32_t> oracle;  // the first run: channels-first, reference kernel
    for (const kernels::KernelConfig* kc : A16Levels())
      for (bool nhwc : {false, true}) {
        AttrMap a = attrs;
        if (nhwc) a.SetInt("channels_last", 1);
        for (bool prepare : {false, true})
          for (int threads : {1, 2}) {
            CAPTURE(nhwc);
            CAPTURE(prepare);
            CAPTURE(threads);
            Result r = Run("QLinearConv",
                           {make_x(nhwc), Scalar(xs), xzp_t, w_t, F32({cc.m}, wsv), I8({}, {0}),
                            Scalar(ys), yzp_t, I32({cc.m}, bias)},
                           a, prepare, threads, kc);
            CAPTURE(kc->Describe());
            CAPTURE(r.status.message());
            REQUIRE(r.status.ok());
            const bool simd = kc->a16 != nullptr;
            // Group 1, depthwise and grouped convolutions all have the kernel.
            CHECK(r.prepared == (prepare && nhwc && simd));
            // A channels-last run without the kernel transposes to the reference and says so.
            CHECK(r.reference_path == (nhwc && !r.prepared));
            std::vector<int32_t> got = r.values;
            if (nhwc) {
              // Back to NCHW order for the comparison.
              std::vector<int32_t> cf(got.size());
              for (int64_t b = 0; b < cc.n; ++b)
                for (int64_t oc = 0; oc < cc.m; ++oc)
                  for (int64_t i = 0; i < oh * ow; ++i)
                    cf[size_t((b * cc.m + oc) * oh * ow + i)] =
                        got[size_t((b * oh * ow + i) * cc.m + oc)];
              got = cf;
            }
            REQUIRE(got.size() == expect.size());
            // Every path is bit-identical to the reference kernel.
            if (oracle.empty()) oracle = got;
            CHECK(got == oracle);
            int64_t off_by_one = 0;
            for (size_t i = 0; i < got.size(); ++i) {
              const int32_t d = std::abs(got[i] - expect[i]);
              REQUIRE(d <= 1);
              off_by_one += d;
            }
            // The integer path is exact; only float64 rounding of the literal
            // graph's sum can differ, at ties.
            CHECK(off_by_one * 100 <= int64_t(got.size()));
          }
      }
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold

namespace qfold {
namespace test {
namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Thread CPU time of the prepared a16w8 channels-last convolution on ResNet-50
// shapes (run with --no-skip; the machine's load does not enter CPU time).
TEST_CASE("a16w8 conv benchmark" * doctest::skip()) {
  struct Shape2 {
    int64_t c, h, m, k, stride;
  };
  for (const Shape2& sh :
       {Shape2{64, 56, 64, 3, 1}, Shape2{256, 56, 64, 1, 1}, Shape2{64, 56, 256, 1, 1},
        Shape2{512, 7, 512, 3, 1}, Shape2{3, 224, 64, 7, 2}}) {
    std::mt19937 rng(1);
    std::vector<uint16_t> x(size_t(sh.c * sh.h * sh.h));
    for (auto& v : x) v = uint16_t(rng());
    std::vector<int8_t> w(size_t(sh.m * sh.c * sh.k * sh.k));
    for (auto& v : w) v = int8_t(rng());
    AttrMap a;
    const int64_t pad = sh.k / 2;
    a.SetInts("pads", {pad, pad, pad, pad});
    a.SetInts("strides", {sh.stride, sh.stride});
    a.SetInt("channels_last", 1);
    std::vector<TensorPtr> in = {U16({1, sh.h, sh.h, sh.c}, x),
                                 Scalar(0.01f),
                                 U16({}, {1000}),
                                 I8({sh.m, sh.c, sh.k, sh.k}, w),
                                 Scalar(0.01f),
                                 I8({}, {0}),
                                 Scalar(1.f),
                                 U16({}, {0})};
    // Infer and prepare once, then time the runs alone.
    const std::string type = "QLinearConv", name = "bench";
    const OpDef* def = FindOp(type);
    KernelContext ctx;
    ctx.op_type = &type;
    ctx.op_name = &name;
    ctx.attrs = &a;
    for (auto& t : in) ctx.inputs.push_back(&t->t);
    OwnedTensor out;
    ctx.outputs = {&out.t};
    REQUIRE(def->infer(ctx).ok());
    out.storage.assign(out.t.bytes(), 0);
    out.t.data = out.storage.data();
    std::shared_ptr<void> state;
    REQUIRE(def->prepare(ctx, &state).ok());
    ctx.state = state.get();
    REQUIRE(def->run(ctx).ok());  // warm-up
    const int reps = 10;
    const double t0 = CpuSeconds();
    for (int i = 0; i < reps; ++i) def->run(ctx);
    const double t = (CpuSeconds() - t0) / reps;
    CHECK(!ctx.reference_path);
    const int64_t oh = (sh.h + 2 * pad - sh.k) / sh.stride + 1;
    const double macs = double(oh * oh) * double(sh.m * sh.c * sh.k * sh.k);
    MESSAGE(sh.c << "->" << sh.m << " k" << sh.k << " @" << sh.h << ": " << t * 1e3 << " ms, "
                 << 2 * macs / t * 1e-9 << " GOPS");
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold

namespace qfold {
namespace test {
namespace {

// Wide tables (16-bit chains collapsed by the converter): indexed by the raw
// 16-bit value (int16 -1 reads entry 65535); 8- and 16-bit results.
// MaxPool on 16-bit codes (a16 models keep them through pools): both layouts,
// the reference and the detected kernels, 1 and 2 threads, against a direct
// max over the taps inside the input.
TEST_CASE("a16 maxpool: 16-bit codes in both layouts against a direct max") {
  std::mt19937 rng(91);
  struct Geom {
    int64_t n, c, h, w, k, stride, pad, dil;
  };
  for (const Geom& gm : {Geom{2, 19, 9, 8, 3, 2, 1, 1}, Geom{1, 40, 7, 11, 2, 1, 0, 2},
                         Geom{1, 3, 5, 5, 3, 3, 2, 1}}) {
    for (DType t : {DType::kUInt16, DType::kInt16}) {
      CAPTURE(gm.c);
      const bool u = t == DType::kUInt16;
      std::uniform_int_distribution<int32_t> d(u ? 0 : -32768, u ? 65535 : 32767);
      std::vector<int32_t> x(size_t(gm.n * gm.c * gm.h * gm.w));
      for (auto& v : x) v = d(rng);
      const int64_t oh = (gm.h + 2 * gm.pad - gm.dil * (gm.k - 1) - 1) / gm.stride + 1;
      const int64_t ow = (gm.w + 2 * gm.pad - gm.dil * (gm.k - 1) - 1) / gm.stride + 1;
      std::vector<int32_t> want;  // NCHW
      for (int64_t b = 0; b < gm.n; ++b)
        for (int64_t ch = 0; ch < gm.c; ++ch)
          for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
              int32_t m = u ? 0 : -32768;
              for (int64_t ky = 0; ky < gm.k; ++ky)
                for (int64_t kx = 0; kx < gm.k; ++kx) {
                  const int64_t iy = oy * gm.stride - gm.pad + ky * gm.dil;
                  const int64_t ix = ox * gm.stride - gm.pad + kx * gm.dil;
                  if (iy >= 0 && iy < gm.h && ix >= 0 && ix < gm.w)
                    m = std::max(m, x[size_t(((b * gm.c + ch) * gm.h + iy) * gm.w + ix)]);
                }
              want.push_back(m);
            }
      const std::vector<int32_t> want_nhwc = ToNhwc(want, gm.n, gm.c, oh, ow);
      for (bool nhwc : {false, true}) {
        const std::vector<int32_t> xv = nhwc ? ToNhwc(x, gm.n, gm.c, gm.h, gm.w) : x;
        const Shape s = nhwc ? Shape{gm.n, gm.h, gm.w, gm.c} : Shape{gm.n, gm.c, gm.h, gm.w};
        TensorPtr xt = u ? U16(s, std::vector<uint16_t>(xv.begin(), xv.end()))
                         : I16(s, std::vector<int16_t>(xv.begin(), xv.end()));
        AttrMap a;
        a.SetInts("kernel_shape", {gm.k, gm.k});
        a.SetInts("strides", {gm.stride, gm.stride});
        a.SetInts("pads", {gm.pad, gm.pad, gm.pad, gm.pad});
        a.SetInts("dilations", {gm.dil, gm.dil});
        if (nhwc) a.SetInt("channels_last", 1);
        for (const kernels::KernelConfig* kc :
             {&IsaConfig(kernels::Isa::kReference), &kernels::DefaultKernelConfig()})
          for (int threads : {1, 2}) {
            CAPTURE(nhwc);
            CAPTURE(kc->Describe());
            CAPTURE(threads);
            Result r = Run("MaxPool", {xt}, a, false, threads, kc);
            REQUIRE(r.status.ok());
            CHECK(r.values == (nhwc ? want_nhwc : want));
          }
      }
    }
  }
}

TEST_CASE("a16 qlinearglobalaveragepool: 16-bit codes in both layouts, exact sums") {
  // 300 x 300 pixels of codes near the top of the range: sums reach 1.9e10,
  // beyond int32 and float's 24-bit mantissa. Expected: the exact average in
  // long double, rounded half to even (a near-tie within 1e-9 is skipped).
  std::mt19937 rng(93);
  const int64_t n = 2, c = 3, h = 300, w = 300;
  for (DType t : {DType::kUInt16, DType::kInt16}) {
    const bool u = t == DType::kUInt16;
    std::uniform_int_distribution<int32_t> d(u ? 60000 : 30000, u ? 65535 : 32767);
    std::vector<int32_t> x(size_t(n * c * h * w));
    for (auto& v : x) v = d(rng);
    const float xs = 0.0007f, ys = 0.00091f;
    const int32_t xz = u ? 1234 : -17, yz = u ? 40000 : 100;
    std::vector<int32_t> want;  // [n, c]
    int checked = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        long double sum = 0;
        for (int64_t i = 0; i < h * w; ++i) sum += x[size_t((b * c + ch) * h * w + i)] - xz;
        const long double avg = sum * xs / ((long double)(h * w) * ys);
        const long double frac = avg - std::floor(avg);
        REQUIRE(std::fabs(frac - 0.5L) > 1e-9L);
        const long q = std::lround(avg) + yz;
        want.push_back(
            int32_t(std::min<long>(u ? 65535 : 32767, std::max<long>(u ? 0 : -32768, q))));
        ++checked;
      }
    CHECK(checked == n * c);
    for (bool nhwc : {false, true}) {
      CAPTURE(nhwc);
      const std::vector<int32_t> xv = nhwc ? ToNhwc(x, n, c, h, w) : x;
      const Shape s = nhwc ? Shape{n, h, w, c} : Shape{n, c, h, w};
      TensorPtr xt = u ? U16(s, std::vector<uint16_t>(xv.begin(), xv.end()))
                       : I16(s, std::vector<int16_t>(xv.begin(), xv.end()));
      TensorPtr xzt = u ? U16({}, {uint16_t(xz)}) : I16({}, {int16_t(xz)});
      TensorPtr yzt = u ? U16({}, {uint16_t(yz)}) : I16({}, {int16_t(yz)});
      AttrMap a;
      if (nhwc) a.SetInt("channels_last", 1);
      for (int threads : {1, 2}) {
        Result r = Run("QLinearGlobalAveragePool", {xt, Scalar(xs), xzt, Scalar(ys), yzt}, a, false,
                       threads);
        REQUIRE(r.status.ok());
        CHECK(r.values == want);  // [n, 1, 1, c] and [n, c, 1, 1] hold the same order
      }
    }
  }
}

TEST_CASE("a16 qflookuptable: 16-bit indices and results") {
  std::vector<uint16_t> t16(65536);
  std::vector<uint8_t> t8(65536);
  for (size_t i = 0; i < t16.size(); ++i) {
    t16[i] = uint16_t(65535 - i);
    t8[i] = uint8_t(i * 7);
  }
  Result a = Run("QfLookupTable",
                 {I16({4}, {0, 1, -1, -32768}), Make<uint16_t>(DType::kUInt16, {65536}, t16)},
                 AttrMap(), false, 1);
  REQUIRE(a.status.ok());
  CHECK(a.values == std::vector<int32_t>{65535, 65534, 0, 32767});
  Result b =
      Run("QfLookupTable", {U16({3}, {2, 300, 65535}), Make<uint8_t>(DType::kUInt8, {65536}, t8)},
          AttrMap(), false, 2);
  REQUIRE(b.status.ok());
  CHECK(b.values == std::vector<int32_t>{14, uint8_t(300 * 7), uint8_t(65535 * 7)});
  // An 8-bit x with a [256] table of 16-bit results.
  Result c =
      Run("QfLookupTable",
          {U8({2}, {0, 255}), Make<int16_t>(DType::kInt16, {256}, std::vector<int16_t>(256, -5))},
          AttrMap(), false, 1);
  REQUIRE(c.status.ok());
  CHECK(c.values == std::vector<int32_t>{-5, -5});
  // The table must match x's width.
  CHECK(Run("QfLookupTable", {U16({1}, {0}), Make<uint8_t>(DType::kUInt8, {256}, t8)}, AttrMap(),
            false, 1)
            .status.code() == StatusCode::kInvalidModel);
}

}  // namespace
}  // namespace test
}  // namespace qfold
