// QfQLinearLRN (the converter's fold of DequantizeLinear -> LRN ->
// QuantizeLinear): bit for bit the three ops apart, with the same kernels,
// at every ISA level, 1 and 2 threads, both layouts; and a hand-computed case.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/op.h"
#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;

TensorPtr Code(DType t, int32_t v) {
  return Make<uint8_t>(t, {}, {uint8_t(v)});
}

TensorPtr Scale(float s) {
  return F32({}, {s});
}

// The output bytes of `type`, the run required to succeed.
std::vector<uint8_t> Bytes(const OpRun& r) {
  REQUIRE(r.status.ok());
  const Tensor& t = r.outputs[0]->t;
  return std::vector<uint8_t>(t.ptr<uint8_t>(), t.ptr<uint8_t>() + t.bytes());
}

TEST_CASE("quant: QfQLinearLRN equals DequantizeLinear -> LRN -> QuantizeLinear bit for bit") {
  std::mt19937 rng(17);
  std::vector<kernels::Isa> isas = kernels::SupportedIsas();
  isas.push_back(kernels::Isa::kReference);
  struct Case {
    int64_t c, h, w, size;
    float beta;
    DType xt, yt;
  };
  // Channel counts around the vector widths and a block's 4096 floats (97:
  // blocks of 42 rows, a thread's range ending inside one); enough rows to
  // be split between threads; beta 3/4 (square roots) and another (log, exp).
  const Case cases[] = {
      {24, 12, 12, 5, 0.75f, DType::kUInt8, DType::kUInt8},
      {97, 30, 30, 5, 0.75f, DType::kInt8, DType::kUInt8},
      {16, 40, 41, 3, 0.6f, DType::kUInt8, DType::kInt8},
      {3, 9, 7, 1, 0.75f, DType::kInt8, DType::kInt8},
      {5000, 2, 2, 9, 0.75f, DType::kUInt8, DType::kUInt8},
  };
  for (const Case& cs : cases) {
    for (int channels_last = 0; channels_last < 2; ++channels_last) {
      const Shape shape = channels_last ? Shape{1, cs.h, cs.w, cs.c} : Shape{1, cs.c, cs.h, cs.w};
      std::vector<uint8_t> codes(size_t(cs.c * cs.h * cs.w));
      for (auto& b : codes) b = uint8_t(rng());
      const TensorPtr x = Make<uint8_t>(cs.xt, shape, codes);
      const int32_t x_zp = cs.xt == DType::kUInt8 ? 131 : -5;
      const int32_t y_zp = cs.yt == DType::kUInt8 ? 120 : 3;
      const TensorPtr xs = Scale(0.07f), xz = Code(cs.xt, x_zp);
      const TensorPtr ys = Scale(0.011f), yz = Code(cs.yt, y_zp);
      AttrMap attrs;
      attrs.SetInt("size", cs.size);
      attrs.SetFloat("alpha", 0.02f);
      attrs.SetFloat("beta", cs.beta);
      attrs.SetFloat("bias", 1.5f);
      attrs.SetInt("channels_last", channels_last);
      AttrMap q_attrs;
      for (kernels::Isa isa : isas) {
        const kernels::KernelConfig* kc = &IsaConfig(isa);
        for (int threads : {1, 2}) {
          INFO("isa " << kernels::IsaName(isa) << ", " << threads << " threads, c " << cs.c
                      << ", channels_last " << channels_last);
          const OpRun dq = RunOp("DequantizeLinear", {x, xs, xz}, AttrMap(), 1, threads, kc);
          REQUIRE(dq.status.ok());
          const OpRun lrn = RunOp("LRN", {dq.outputs[0]}, attrs, 1, threads, kc);
          REQUIRE(lrn.status.ok());
          const OpRun q =
              RunOp("QuantizeLinear", {lrn.outputs[0], ys, yz}, q_attrs, 1, threads, kc);
          const OpRun fused = RunOp("QfQLinearLRN", {x, xs, xz, ys, yz}, attrs, 1, threads, kc);
          CHECK(fused.outputs[0]->t.dtype == cs.yt);
          CHECK(fused.shape() == shape);
          CHECK(Bytes(fused) == Bytes(q));
        }
      }
    }
  }
}

TEST_CASE("quant: QfQLinearLRN against a hand-computed case") {
  // Two channels, one pixel, size 3 (each window both channels): codes 14
  // and 6 at scale 0.5, zero point 10 are 2 and -2; d = 1 + 3 / 3 * 8 = 9,
  // 9^0.75 = 5.19615, so y = +-0.384900, at scale 0.01 and zero point 128:
  // 128 +- 38 (38.49 rounds down).
  for (int channels_last = 0; channels_last < 2; ++channels_last) {
    AttrMap attrs;
    attrs.SetInt("size", 3);
    attrs.SetFloat("alpha", 3.f);
    attrs.SetFloat("beta", 0.75f);
    attrs.SetFloat("bias", 1.f);
    attrs.SetInt("channels_last", channels_last);
    const Shape shape = channels_last ? Shape{1, 1, 1, 2} : Shape{1, 2, 1, 1};
    const OpRun r = RunOp("QfQLinearLRN",
                          {Make<uint8_t>(DType::kUInt8, shape, {14, 6}), Scale(0.5f),
                           Code(DType::kUInt8, 10), Scale(0.01f), Code(DType::kUInt8, 128)},
                          attrs);
    REQUIRE(r.status.ok());
    CHECK(r.values<uint8_t>() == std::vector<uint8_t>{166, 90});
  }
}

TEST_CASE("quant: QfQLinearLRN refuses what it cannot run, naming it") {
  AttrMap attrs;
  attrs.SetInt("size", 3);
  const TensorPtr x = Make<uint8_t>(DType::kUInt8, {1, 2, 2, 2}, std::vector<uint8_t>(8, 1));
  const OpRun f32 = RunOp("QfQLinearLRN",
                          {F32({1, 2, 1, 1}, {1.f, 2.f}), Scale(1.f), nullptr, Scale(1.f)}, attrs);
  CHECK(f32.status.code() == StatusCode::kUnsupported);
  CHECK(f32.status.message().find("X dtype float32") != std::string::npos);
  const OpRun no_size = RunOp("QfQLinearLRN", {x, Scale(1.f), nullptr, Scale(1.f)});
  CHECK(no_size.status.code() == StatusCode::kInvalidModel);
  CHECK(no_size.status.message().find("size") != std::string::npos);
  const OpRun rank2 = RunOp("QfQLinearLRN",
                            {Make<uint8_t>(DType::kUInt8, {2, 2}, std::vector<uint8_t>(4, 1)),
                             Scale(1.f), nullptr, Scale(1.f)},
                            attrs);
  CHECK(rank2.status.code() == StatusCode::kInvalidModel);
  const OpRun per_axis =
      RunOp("QfQLinearLRN", {x, F32({2}, {1.f, 2.f}), nullptr, Scale(1.f)}, attrs);
  CHECK_FALSE(per_axis.status.ok());
}

}  // namespace
}  // namespace test
}  // namespace qfold
