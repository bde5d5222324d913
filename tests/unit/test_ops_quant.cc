// Unit tests for the quantized ops (quant_*.cc). Expected values are
// hand-computed unless a comment says they came from a NumPy script that
// implements the formula of docs/NUMERICS.md independently of the kernels.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/op.h"
#include "doctest/doctest.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using TensorPtr = std::shared_ptr<OwnedTensor>;

// Like RunOp, but sizes output buffers with dtype_storage_bytes so packed
// 4-bit outputs get their storage (Tensor::bytes() is 0 for them). Buffers
// are filled with 0xAB so kernels that leave bytes unwritten are caught.
OpRun RunQ(const std::string& type, const std::vector<TensorPtr>& inputs,
           const AttrMap& attrs = AttrMap()) {
  OpRun r;
  const OpDef* def = FindOp(type);
  if (!def) {
    r.status = Status(StatusCode::kUnsupported, "no op " + type);
    return r;
  }
  std::string name = "test";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  r.outputs.push_back(std::make_shared<OwnedTensor>());
  ctx.outputs.push_back(&r.outputs.back()->t);
  r.status = def->infer(ctx);
  if (!r.status.ok()) return r;
  Tensor& o = r.outputs[0]->t;
  r.outputs[0]->storage.assign(dtype_storage_bytes(o.dtype, o.numel()) + 1, 0xAB);
  o.data = r.outputs[0]->storage.data();
  r.status = def->run(ctx);
  return r;
}

Status InferOnly(const std::string& type, std::vector<Tensor*> inputs, const AttrMap& attrs,
                 Tensor* out) {
  const OpDef* def = FindOp(type);
  REQUIRE(def != nullptr);
  std::string name = "t";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.inputs = std::move(inputs);
  ctx.outputs = {out};
  return def->infer(ctx);
}

Tensor Sym(DType dt, Shape s) {
  Tensor t;
  t.dtype = dt;
  t.shape = std::move(s);
  return t;
}

// Integer tensors from int values.
TensorPtr I8(Shape s, std::vector<int8_t> v) {
  return Make<int8_t>(DType::kInt8, s, v);
}
TensorPtr U8(Shape s, std::vector<uint8_t> v) {
  return Make<uint8_t>(DType::kUInt8, s, v);
}
TensorPtr I16(Shape s, std::vector<int16_t> v) {
  return Make<int16_t>(DType::kInt16, s, v);
}
TensorPtr U16(Shape s, std::vector<uint16_t> v) {
  return Make<uint16_t>(DType::kUInt16, s, v);
}
TensorPtr I32(Shape s, std::vector<int32_t> v) {
  return Make<int32_t>(DType::kInt32, s, v);
}
// A packed 4-bit tensor from its raw bytes.
TensorPtr Packed4(DType dt, Shape s, std::vector<uint8_t> bytes) {
  return Make<uint8_t>(dt, s, bytes);
}
TensorPtr F16(Shape s, const std::vector<float>& v) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(FloatToHalf(f));
  return Make<uint16_t>(DType::kFloat16, s, h);
}
TensorPtr Scalar(float v) {
  return F32({}, {v});
}

template <class T>
std::vector<int> Ints(const OpRun& r) {
  std::vector<int> out;
  for (T v : r.values<T>()) out.push_back(int(v));
  return out;
}
std::vector<uint8_t> Bytes(const OpRun& r) {
  const Tensor& t = r.outputs[0]->t;
  const uint8_t* p = t.ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + dtype_storage_bytes(t.dtype, t.numel()));
}

AttrMap Attrs(std::initializer_list<std::pair<const char*, int64_t>> ints) {
  AttrMap a;
  for (auto& kv : ints) a.SetInt(kv.first, kv.second);
  return a;
}

// ---- QuantizeLinear ---------------------------------------------------------

TEST_CASE("quant: QuantizeLinear rounds ties to even and saturates") {
  // x / 2 = 0.5, 1.5, 2.5, -0.5, -1.5, 500, -500 -> 0, 2, 2, -0, -2, sat, sat; + 128.
  auto r = RunQ("QuantizeLinear",
                {F32({7}, {1, 3, 5, -1, -3, 1000, -1000}), Scalar(2.f), U8({}, {128})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kUInt8);
  CHECK(Ints<uint8_t>(r) == std::vector<int>{128, 130, 130, 128, 126, 255, 0});
}

TEST_CASE("quant: QuantizeLinear output dtype from output_dtype, default uint8") {
  // int8 via output_dtype=3 (INT8), no zero point: -128.5 -> -128 (even), 127.5 -> 128 -> 127.
  auto r = RunQ("QuantizeLinear", {F32({4}, {-128.5f, 127.5f, -300.f, 0.49f}), F32({1}, {1.f})},
                Attrs({{"output_dtype", 3}}));
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kInt8);
  CHECK(Ints<int8_t>(r) == std::vector<int>{-128, 127, -128, 0});

  auto u = RunQ("QuantizeLinear", {F32({3}, {-1.f, 2.5f, 3.5f}), Scalar(1.f)});
  REQUIRE(u.status.ok());
  CHECK(u.outputs[0]->t.dtype == DType::kUInt8);
  CHECK(Ints<uint8_t>(u) == std::vector<int>{0, 2, 4});

  // int16 / uint16 ranges.
  auto i16 =
      RunQ("QuantizeLinear", {F32({3}, {-40000.f, 40000.f, 1.5f}), Scalar(1.f), I16({}, {0})});
  REQUIRE(i16.status.ok());
  CHECK(Ints<int16_t>(i16) == std::vector<int>{-32768, 32767, 2});
  auto u16 = RunQ("QuantizeLinear", {F32({2}, {-1.f, 70000.f}), Scalar(1.f)},
                  Attrs({{"output_dtype", 4}}));
  REQUIRE(u16.status.ok());
  CHECK(Ints<uint16_t>(u16) == std::vector<int>{0, 65535});
}

TEST_CASE("quant: QuantizeLinear rejects contradicting or unsupported output types") {
  auto r = RunQ("QuantizeLinear", {F32({1}, {1.f}), Scalar(1.f), U8({}, {0})},
                Attrs({{"output_dtype", 3}}));
  CHECK(r.status.code() == StatusCode::kInvalidModel);
  CHECK(r.status.message().find("uint8") != std::string::npos);
  CHECK(r.status.message().find("int8") != std::string::npos);
  // Matching output_dtype and zero point is fine.
  CHECK(RunQ("QuantizeLinear", {F32({1}, {1.f}), Scalar(1.f), U8({}, {0})},
             Attrs({{"output_dtype", 2}}))
            .status.ok());
  for (int64_t t : {17, 19, 23, 25, 26})
    CHECK(RunQ("QuantizeLinear", {F32({1}, {1.f}), Scalar(1.f)}, Attrs({{"output_dtype", t}}))
              .status.code() == StatusCode::kUnsupported);
  CHECK(RunQ("QuantizeLinear", {F32({1}, {1.f}), Scalar(1.f)}, Attrs({{"output_dtype", 1}}))
            .status.code() == StatusCode::kInvalidModel);
  CHECK(RunQ("QuantizeLinear", {I64({1}, {1}), Scalar(1.f)}).status.code() ==
        StatusCode::kUnsupported);
}

TEST_CASE("quant: QuantizeLinear per-axis with differing zero points") {
  // x [2,3], axis 1: scales [1,2,4], zps [0,10,-5].
  auto x = F32({2, 3}, {1, 2, 4, -3, 6, -8});
  auto r = RunQ("QuantizeLinear", {x, F32({3}, {1, 2, 4}), I8({3}, {0, 10, -5})});
  REQUIRE(r.status.ok());
  CHECK(Ints<int8_t>(r) == std::vector<int>{1, 11, -4, -3, 13, -7});
  // axis -2 == 0: scales [1, 2] per row.
  auto r0 = RunQ("QuantizeLinear", {x, F32({2}, {1, 2}), I8({2}, {0, 1})}, Attrs({{"axis", -2}}));
  REQUIRE(r0.status.ok());
  CHECK(Ints<int8_t>(r0) == std::vector<int>{1, 2, 4, -1, 4, -3});  // -1.5 -> -2 + 1
  // Wrong length and out-of-range axis.
  CHECK(RunQ("QuantizeLinear", {x, F32({2}, {1, 2})}).status.code() == StatusCode::kInvalidModel);
  CHECK(RunQ("QuantizeLinear", {x, F32({3}, {1, 2, 3})}, Attrs({{"axis", 2}})).status.code() ==
        StatusCode::kInvalidModel);
  // zero point shape must equal the scale's.
  CHECK(RunQ("QuantizeLinear", {x, F32({3}, {1, 2, 4}), I8({}, {0})}).status.code() ==
        StatusCode::kInvalidModel);
}

TEST_CASE("quant: QuantizeLinear blocked with a short last block") {
  // x [2,5], axis 1, block_size 2 -> scale [2,3]; the last block holds one column.
  auto x = F32({2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50});
  auto s = F32({2, 3}, {1, 2, 4, 10, 20, 50});
  auto zp = I8({2, 3}, {0, 0, 1, 0, -1, 0});
  auto r = RunQ("QuantizeLinear", {x, s, zp}, Attrs({{"axis", 1}, {"block_size", 2}}));
  REQUIRE(r.status.ok());
  // Row 0: 1/1, 2/1, 3/2=1.5->2, 4/2=2, 5/4=1.25->1 (+1). Row 1: 1, 2, 1.5->2 (-1), 2 (-1), 1.
  CHECK(Ints<int8_t>(r) == std::vector<int>{1, 2, 2, 2, 2, 1, 2, 1, 1, 1});
  // A scale with 2 blocks along the axis does not fit block_size 2 for dim 5.
  CHECK(RunQ("QuantizeLinear", {x, F32({2, 2}, {1, 1, 1, 1})},
             Attrs({{"axis", 1}, {"block_size", 2}}))
            .status.code() == StatusCode::kInvalidModel);
  CHECK(RunQ("QuantizeLinear", {x, s}, Attrs({{"block_size", -1}})).status.code() ==
        StatusCode::kInvalidModel);
}

TEST_CASE("quant: QuantizeLinear int4/uint4 pack two per byte, odd count") {
  // -9 -> -8 (sat), -1, 0, 7.5 -> 8 -> 7 (sat), 3. Nibbles low first; the
  // last byte's high nibble is 0.
  auto x = F32({5}, {-9.f, -1.f, 0.f, 7.5f, 3.f});
  auto r = RunQ("QuantizeLinear", {x, Scalar(1.f), Packed4(DType::kInt4, {}, {0})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kInt4);
  CHECK(Bytes(r) == std::vector<uint8_t>{0xF8, 0x70, 0x03});
  // uint4 via output_dtype 21 with zero point 8 from the packed zp tensor.
  auto u = RunQ("QuantizeLinear", {x, Scalar(1.f), Packed4(DType::kUInt4, {1}, {0x08})});
  REQUIRE(u.status.ok());
  // -9+8 -> -1 -> 0, 7, 8, 15.5->16 -> 15, 11.
  CHECK(Bytes(u) == std::vector<uint8_t>{0x70, 0xF8, 0x0B});
}

TEST_CASE("quant: QuantizeLinear float16 scale and x, precision attribute") {
  auto r = RunQ("QuantizeLinear", {F16({3}, {1.f, 3.f, -5.f}), F16({}, {2.f}), I8({}, {0})});
  REQUIRE(r.status.ok());
  CHECK(Ints<int8_t>(r) == std::vector<int>{0, 2, -2});
  // precision=FLOAT16 (10) converts x to float16 first: 3.4998 becomes 3.5,
  // which rounds to 4; in float32 it rounds to 3.
  auto p = RunQ("QuantizeLinear", {F32({1}, {3.4998f}), Scalar(1.f), I16({}, {0})},
                Attrs({{"precision", 10}}));
  REQUIRE(p.status.ok());
  CHECK(Ints<int16_t>(p) == std::vector<int>{4});
  auto p32 = RunQ("QuantizeLinear", {F32({1}, {3.4998f}), Scalar(1.f), I16({}, {0})});
  REQUIRE(p32.status.ok());
  CHECK(Ints<int16_t>(p32) == std::vector<int>{3});
}

TEST_CASE("quant: QuantizeLinear infer with unknown dims") {
  Tensor x = Sym(DType::kFloat32, {kUnknownDim, 3});
  Tensor s = Sym(DType::kFloat32, {3});
  Tensor zp = Sym(DType::kInt8, {3});
  Tensor y;
  REQUIRE(InferOnly("QuantizeLinear", {&x, &s, &zp}, AttrMap(), &y).ok());
  CHECK(y.dtype == DType::kInt8);
  CHECK(y.shape == Shape{kUnknownDim, 3});
  Tensor xr = Sym(DType::kFloat32, {});
  xr.rank_known = false;
  REQUIRE(InferOnly("QuantizeLinear", {&xr, &s, &zp}, AttrMap(), &y).ok());
  CHECK_FALSE(y.rank_known);
}

// ---- DequantizeLinear -------------------------------------------------------

TEST_CASE("quant: DequantizeLinear per-tensor, per-axis and int32") {
  auto r = RunQ("DequantizeLinear", {U8({4}, {0, 128, 255, 130}), Scalar(0.5f), U8({}, {128})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kFloat32);
  CHECK(r.values<float>() == std::vector<float>{-64.f, 0.f, 63.5f, 1.f});

  auto a = RunQ("DequantizeLinear",
                {I8({2, 2}, {-128, 127, 10, -10}), F32({2}, {1.f, 0.25f}), I8({2}, {1, -2})});
  REQUIRE(a.status.ok());
  CHECK(a.values<float>() == std::vector<float>{-129.f, 32.25f, 9.f, -2.f});

  auto b = RunQ("DequantizeLinear", {I32({3}, {-1000000, 0, 7}), Scalar(0.5f)});
  REQUIRE(b.status.ok());
  CHECK(b.values<float>() == std::vector<float>{-500000.f, 0.f, 3.5f});
  CHECK(RunQ("DequantizeLinear", {I32({1}, {1}), Scalar(1.f), I32({}, {3})}).status.code() ==
        StatusCode::kInvalidModel);
  CHECK(RunQ("DequantizeLinear", {U8({1}, {1}), Scalar(1.f), I8({}, {3})}).status.code() ==
        StatusCode::kInvalidModel);
  auto u16 = RunQ("DequantizeLinear", {U16({2}, {65535, 0}), Scalar(1.f), U16({}, {32768})});
  REQUIRE(u16.status.ok());
  CHECK(u16.values<float>() == std::vector<float>{32767.f, -32768.f});
}

TEST_CASE("quant: DequantizeLinear int4/uint4 with odd count and blocked scales") {
  // int4 bytes 0xF8 0x70 0x03 -> -8, -1, 0, 7, 3.
  auto r = RunQ("DequantizeLinear", {Packed4(DType::kInt4, {5}, {0xF8, 0x70, 0x03}), Scalar(2.f),
                                     Packed4(DType::kInt4, {}, {0x0F})});  // zp -1
  REQUIRE(r.status.ok());
  CHECK(r.values<float>() == std::vector<float>{-14.f, 0.f, 2.f, 16.f, 8.f});
  // uint4 [1,3] blocked along axis 1 with block 2: scales [1, 10].
  auto u = RunQ("DequantizeLinear",
                {Packed4(DType::kUInt4, {1, 3}, {0x21, 0x03}), F32({1, 2}, {1.f, 10.f})},
                Attrs({{"axis", 1}, {"block_size", 2}}));
  REQUIRE(u.status.ok());
  CHECK(u.values<float>() == std::vector<float>{1.f, 2.f, 30.f});
}

TEST_CASE("quant: DequantizeLinear output dtype follows the scale or output_dtype") {
  auto h = RunQ("DequantizeLinear", {I8({2}, {3, -4}), F16({}, {0.5f})});
  REQUIRE(h.status.ok());
  CHECK(h.outputs[0]->t.dtype == DType::kFloat16);
  const std::vector<uint16_t> hv = h.values<uint16_t>();
  CHECK(HalfToFloat(hv[0]) == 1.5f);
  CHECK(HalfToFloat(hv[1]) == -2.f);
  auto f = RunQ("DequantizeLinear", {I8({1}, {3}), F16({}, {0.5f})}, Attrs({{"output_dtype", 1}}));
  REQUIRE(f.status.ok());
  CHECK(f.outputs[0]->t.dtype == DType::kFloat32);
  CHECK(f.values<float>() == std::vector<float>{1.5f});
  CHECK(RunQ("DequantizeLinear", {I8({1}, {3}), Scalar(1.f)}, Attrs({{"output_dtype", 3}}))
            .status.code() == StatusCode::kInvalidModel);
}

// ---- QLinearConv ------------------------------------------------------------

TEST_CASE("quant: QLinearConv uint8 x, int8 w, per-channel zero points, bias, pads") {
  // Values from /tmp/quant_expect.py (NumPy, independent of the kernel):
  // x uint8 [1,2,3,3], w int8 [2,2,2,2], pads 1, strides 2.
  auto x = U8({1, 2, 3, 3},
              {11, 48, 85, 122, 159, 196, 233, 14, 51, 88, 125, 162, 199, 236, 17, 54, 91, 128});
  auto w =
      I8({2, 2, 2, 2}, {-123, -94, -65, -36, -7, 22, 51, 80, 109, -118, -89, -60, -31, -2, 27, 56});
  AttrMap at;
  at.SetInts("pads", {1, 1, 1, 1});
  at.SetInts("strides", {2, 2});
  auto r = RunQ("QLinearConv",
                {x, Scalar(0.02f), U8({}, {131}), w, F32({2}, {0.005f, 0.011f}), I8({2}, {3, -7}),
                 Scalar(0.15f), I8({}, {-3}), I32({2}, {1000, -2000})},
                at);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 2, 2});
  CHECK(r.outputs[0]->t.dtype == DType::kInt8);
  CHECK(Ints<int8_t>(r) == std::vector<int>{-1, 4, -7, -5, -1, 10, -19, 2});
  // The same accumulators via ConvInteger (no bias): acc - B.
  auto ci = RunQ("ConvInteger", {x, w, U8({}, {131}), I8({2}, {3, -7})}, at);
  REQUIRE(ci.status.ok());
  CHECK(ci.values<int32_t>() ==
        std::vector<int32_t>{1369, 9537, -7742, -4124, 3651, 10993, -8918, 5228});
}

TEST_CASE("quant: QfConvDequant dequantizes the QLinearConv accumulators to float") {
  // The case above: ConvInteger gave acc = {1369, 9537, -7742, -4124} (channel 0)
  // and {3651, 10993, -8918, 5228} (channel 1). y = acc * x_scale * w_scale[m] *
  // out_scale[m] + B[m], then the activation.
  auto x = U8({1, 2, 3, 3},
              {11, 48, 85, 122, 159, 196, 233, 14, 51, 88, 125, 162, 199, 236, 17, 54, 91, 128});
  auto w =
      I8({2, 2, 2, 2}, {-123, -94, -65, -36, -7, 22, 51, 80, 109, -118, -89, -60, -31, -2, 27, 56});
  const double acc[8] = {1369, 9537, -7742, -4124, 3651, 10993, -8918, 5228};
  const double mult[2] = {0.02 * 0.005 * 2.0, 0.02 * 0.011 * -0.5}, bias[2] = {0.25, -1.0};
  AttrMap at;
  at.SetInts("pads", {1, 1, 1, 1});
  at.SetInts("strides", {2, 2});
  std::vector<TensorPtr> in = {x,
                               Scalar(0.02f),
                               U8({}, {131}),
                               w,
                               F32({2}, {0.005f, 0.011f}),
                               I8({2}, {3, -7}),
                               F32({2}, {0.25f, -1.f}),
                               F32({2}, {2.f, -0.5f})};
  for (const char* act : {"", "Relu", "Clip", "Sigmoid", "Swish"}) {
    CAPTURE(act);
    AttrMap a = at;
    if (*act) a.SetString("_activation", act);
    if (std::string(act) == "Clip") a.SetFloat("_act_min", -0.5f), a.SetFloat("_act_max", 1.f);
    auto r = RunQ("QfConvDequant", in, a);
    REQUIRE(r.status.ok());
    CHECK(r.shape() == Shape{1, 2, 2, 2});
    CHECK(r.outputs[0]->t.dtype == DType::kFloat32);
    const std::vector<float> got = r.values<float>();
    for (int i = 0; i < 8; ++i) {
      double want = acc[i] * mult[i / 4] + bias[i / 4];
      if (std::string(act) == "Relu") want = std::max(want, 0.0);
      if (std::string(act) == "Clip") want = std::min(std::max(want, -0.5), 1.0);
      if (std::string(act) == "Sigmoid") want = 1.0 / (1.0 + std::exp(-want));
      if (std::string(act) == "Swish") want = want / (1.0 + std::exp(-want));
      CHECK(got[size_t(i)] == doctest::Approx(want).epsilon(1e-6));
    }
  }
  // Channels-last without prepared kernels: the reference through an NCHW view.
  auto x_nhwc = U8({1, 3, 3, 2}, std::vector<uint8_t>(18));
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < 9; ++p) x_nhwc->storage[size_t(p * 2 + c)] = x->storage[size_t(c * 9 + p)];
  std::vector<TensorPtr> in_cl = in;
  in_cl[0] = x_nhwc;
  AttrMap cl = at;
  cl.SetInt("channels_last", 1);
  auto r_cf = RunQ("QfConvDequant", in, at), r_cl = RunQ("QfConvDequant", in_cl, cl);
  REQUIRE(r_cl.status.ok());
  CHECK(r_cl.shape() == Shape{1, 2, 2, 2});
  const std::vector<float> f_cf = r_cf.values<float>(), f_cl = r_cl.values<float>();
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < 4; ++p) CHECK(f_cl[size_t(p * 2 + c)] == f_cf[size_t(c * 4 + p)]);
  // B must have one float per output channel.
  in[6] = F32({3}, {0.f, 0.f, 0.f});
  CHECK(RunQ("QfConvDequant", in, at).status.code() == StatusCode::kInvalidModel);
  in[6] = I32({2}, {0, 0});
  CHECK(RunQ("QfConvDequant", in, at).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("quant: QLinearConv requantization ties, saturation and _qmin/_qmax") {
  // 1x1 conv, x uint8 [1,1,1,4] (zp 0), w = 1, scales 1 * 1 / 2: acc/2.
  auto x = U8({1, 1, 1, 4}, {1, 3, 5, 255});
  auto w = U8({1, 1, 1, 1}, {1});
  auto run = [&](const AttrMap& a) {
    return RunQ(
        "QLinearConv",
        {x, Scalar(1.f), U8({}, {0}), w, Scalar(1.f), U8({}, {0}), Scalar(2.f), U8({}, {100})}, a);
  };
  auto r = run(AttrMap());
  REQUIRE(r.status.ok());
  // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 127.5 -> 128; + 100 -> 228 (255 clamps above).
  CHECK(Ints<uint8_t>(r) == std::vector<int>{100, 102, 102, 228});
  auto c = run(Attrs({{"_qmin", 101}, {"_qmax", 200}}));
  REQUIRE(c.status.ok());
  CHECK(Ints<uint8_t>(c) == std::vector<int>{101, 102, 102, 200});
  CHECK(run(Attrs({{"_qmin", -1}})).status.code() == StatusCode::kInvalidModel);
  CHECK(run(Attrs({{"_qmin", 10}, {"_qmax", 5}})).status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("quant: QLinearConv groups, dilations, auto_pad, validation") {
  // Depthwise 1-D-like conv: x int8 [1,2,1,3], w int8 [2,1,1,2], group 2, dilation 2.
  auto x = I8({1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  auto w = I8({2, 1, 1, 2}, {1, 1, 2, -1});
  AttrMap a;
  a.SetInt("group", 2);
  a.SetInts("dilations", {1, 2});
  auto r =
      RunQ("QLinearConv",
           {x, Scalar(1.f), I8({}, {0}), w, Scalar(1.f), I8({}, {0}), Scalar(1.f), I8({}, {0})}, a);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 2, 1, 1});
  CHECK(Ints<int8_t>(r) == std::vector<int>{4, 2});  // 1+3, 2*4-6
  // SAME_UPPER keeps the size (3 -> 3 with a 1x2 kernel: pad end 1).
  AttrMap s;
  s.SetString("auto_pad", "SAME_UPPER");
  auto w1 = I8({1, 2, 1, 2}, {1, 1, 1, 1});
  auto rs = RunQ(
      "QLinearConv",
      {x, Scalar(1.f), I8({}, {0}), w1, Scalar(1.f), I8({}, {0}), Scalar(1.f), I8({}, {0})}, s);
  REQUIRE(rs.status.ok());
  CHECK(Ints<int8_t>(rs) == std::vector<int>{1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 3 + 6});
  // Errors: w_scale length, zero point dtype, bias dtype.
  auto bad = [&](TensorPtr ws, TensorPtr wzp, TensorPtr b) {
    return RunQ("QLinearConv",
                {x, Scalar(1.f), I8({}, {0}), w, ws, wzp, Scalar(1.f), I8({}, {0}), b}, a)
        .status.code();
  };
  CHECK(bad(F32({3}, {1, 1, 1}), I8({}, {0}), nullptr) == StatusCode::kInvalidModel);
  CHECK(bad(Scalar(1.f), U8({}, {0}), nullptr) == StatusCode::kInvalidModel);
  CHECK(bad(Scalar(1.f), I8({}, {0}), F32({2}, {0, 0})) == StatusCode::kInvalidModel);
  CHECK(bad(Scalar(1.f), I8({}, {0}), I32({3}, {0, 0, 0})) == StatusCode::kInvalidModel);
  // 8- and 16-bit activations only (a16w8: test_ops_quant_a16.cc).
  CHECK(RunQ("QLinearConv", {I32({1, 1, 1, 1}, {0}), Scalar(1.f), I32({}, {0}), w, Scalar(1.f),
                             I8({}, {0}), Scalar(1.f), I8({}, {0})})
            .status.code() == StatusCode::kUnsupported);
}

TEST_CASE("quant: QLinearConv infer with unknown dims") {
  Tensor x = Sym(DType::kUInt8, {kUnknownDim, 3, kUnknownDim, 8});
  Tensor w = Sym(DType::kInt8, {4, 3, 3, 3});
  Tensor s = Sym(DType::kFloat32, {});
  Tensor ws = Sym(DType::kFloat32, {4});
  Tensor xz = Sym(DType::kUInt8, {}), wz = Sym(DType::kInt8, {4}), yz = Sym(DType::kUInt8, {});
  Tensor y;
  REQUIRE(InferOnly("QLinearConv", {&x, &s, &xz, &w, &ws, &wz, &s, &yz}, AttrMap(), &y).ok());
  CHECK(y.dtype == DType::kUInt8);
  CHECK(y.shape == Shape{kUnknownDim, 4, kUnknownDim, 6});
}

// DequantizeLinear -> float Conv -> QuantizeLinear must agree with QLinearConv
// within one quantization step (the float path rounds differently).
TEST_CASE("quant: QLinearConv matches DQ -> Conv -> Q on random data") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> u8(0, 255), i8(-128, 127);
  for (int trial = 0; trial < 4; ++trial) {
    const int64_t c = 4, m = 6, h = 7, wd = 6, group = trial % 2 ? 2 : 1;
    std::vector<uint8_t> xv(size_t(2 * c * h * wd));
    for (auto& v : xv) v = uint8_t(u8(rng));
    std::vector<int8_t> wv(size_t(m * (c / group) * 9));
    for (auto& v : wv) v = int8_t(i8(rng));
    std::vector<int32_t> bv(static_cast<size_t>(m));
    for (auto& v : bv) v = i8(rng) * 40;
    const std::vector<float> ws = {0.004f, 0.006f, 0.003f, 0.0055f, 0.007f, 0.002f};
    std::vector<int8_t> wzp = {0, 3, -2, 0, 1, -4};
    const float xs = 0.021f, ys = 0.35f;
    AttrMap a;
    a.SetInts("pads", {1, 0, 1, 2});
    a.SetInts("strides", {trial % 3 ? 1 : 2, 1});
    a.SetInt("group", group);
    auto x = U8({2, c, h, wd}, xv);
    auto w = I8({m, c / group, 3, 3}, wv);
    auto q = RunQ("QLinearConv",
                  {x, Scalar(xs), U8({}, {120}), w, F32({m}, ws), I8({m}, wzp), Scalar(ys),
                   U8({}, {128}), I32({m}, bv)},
                  a);
    REQUIRE(q.status.ok());

    auto xf = RunQ("DequantizeLinear", {x, Scalar(xs), U8({}, {120})});
    auto wf = RunQ("DequantizeLinear", {w, F32({m}, ws), I8({m}, wzp)}, Attrs({{"axis", 0}}));
    std::vector<float> bf;
    for (int64_t i = 0; i < m; ++i) bf.push_back(float(bv[size_t(i)]) * xs * ws[size_t(i)]);
    REQUIRE(xf.status.ok());
    REQUIRE(wf.status.ok());
    auto conv = RunOp("Conv", {xf.outputs[0], wf.outputs[0], F32({m}, bf)}, a);
    REQUIRE(conv.status.ok());
    auto ref = RunQ("QuantizeLinear", {conv.outputs[0], Scalar(ys), U8({}, {128})});
    REQUIRE(ref.status.ok());
    const auto got = Ints<uint8_t>(q), want = Ints<uint8_t>(ref);
    REQUIRE(got.size() == want.size());
    int max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i)
      max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    CHECK(max_diff <= 1);
  }
}

// ---- QLinearMatMul / MatMulInteger ------------------------------------------

TEST_CASE("quant: QLinearMatMul int8 a, uint8 b per-column, bias and clamp") {
  // Values from /tmp/quant_expect.py: acc [-5479, 11199, -16466, 13407].
  auto a = I8({2, 3}, {-5, 100, -128, 127, 0, 33});
  auto b = U8({3, 2}, {10, 200, 0, 255, 77, 128});
  auto run = [&](const AttrMap& at) {
    return RunQ("QLinearMatMul",
                {a, Scalar(0.1f), I8({}, {-1}), b, F32({2}, {0.002f, 0.003f}), U8({2}, {128, 100}),
                 Scalar(0.5f), U8({}, {10}), I32({2}, {500, -500})},
                at);
  };
  auto r = run(AttrMap());
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(Ints<uint8_t>(r) == std::vector<int>{8, 17, 3, 18});
  auto c = run(Attrs({{"_qmin", 10}, {"_qmax", 17}}));
  REQUIRE(c.status.ok());
  CHECK(Ints<uint8_t>(c) == std::vector<int>{10, 17, 10, 17});
  // b_scale of the wrong length.
  CHECK(RunQ("QLinearMatMul", {a, Scalar(0.1f), I8({}, {-1}), b, F32({3}, {1, 1, 1}), U8({}, {128}),
                               Scalar(0.5f), U8({}, {10})})
            .status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("quant: QLinearMatMul broadcasts batches and 1-D operands") {
  // a [2,1,2] (batch 2), b [2,1] -> y [2,1,1]; unit scales, zp 0.
  auto a = I8({2, 1, 2}, {1, 2, 3, 4});
  auto b = I8({2, 1}, {5, -1});
  auto r = RunQ("QLinearMatMul", {a, Scalar(1.f), I8({}, {0}), b, Scalar(1.f), I8({}, {0}),
                                  Scalar(1.f), I8({}, {0})});
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 1, 1});
  CHECK(Ints<int8_t>(r) == std::vector<int>{3, 11});
  auto v = RunQ("QLinearMatMul", {I8({2}, {1, 2}), Scalar(1.f), I8({}, {0}), b, Scalar(1.f),
                                  I8({}, {0}), Scalar(1.f), I8({}, {0})});
  REQUIRE(v.status.ok());
  CHECK(v.shape() == Shape{1});
  CHECK(Ints<int8_t>(v) == std::vector<int>{3});
}

TEST_CASE("quant: MatMulInteger with per-row and per-column zero points") {
  // A uint8 [2,2], per-row zp [1,2]; B int8 [2,2], per-column zp [0,-1].
  auto a = U8({2, 2}, {3, 5, 2, 4});
  auto b = I8({2, 2}, {1, 0, 2, -1});
  auto r = RunQ("MatMulInteger", {a, b, U8({2}, {1, 2}), I8({2}, {0, -1})});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kInt32);
  // A - zp = [[2,4],[0,2]]; B - zp = [[1,1],[2,0]].
  CHECK(r.values<int32_t>() == std::vector<int32_t>{10, 2, 4, 0});
  // N-D per-row zero point [2,1] equals the 1-D form.
  auto r2 = RunQ("MatMulInteger", {a, b, U8({2, 1}, {1, 2}), I8({1, 2}, {0, -1})});
  REQUIRE(r2.status.ok());
  CHECK(r2.values<int32_t>() == r.values<int32_t>());
  auto nozp = RunQ("MatMulInteger", {a, b});
  REQUIRE(nozp.status.ok());
  CHECK(nozp.values<int32_t>() == std::vector<int32_t>{13, -5, 10, -4});
  CHECK(RunQ("MatMulInteger", {a, b, U8({3}, {1, 2, 3})}).status.code() ==
        StatusCode::kInvalidModel);
}

// ---- contrib ops --------------------------------------------------------------

TEST_CASE("quant: QLinearAdd and QLinearMul broadcast through float") {
  auto a = U8({2, 2}, {10, 20, 30, 40});
  auto b = U8({2}, {5, 6});
  // A real = (a - 10) * 0.5 = [0, 5, 10, 15]; B real = (b - 5) * 1 = [0, 1].
  auto add = RunQ("QLinearAdd", {a, Scalar(0.5f), U8({}, {10}), b, Scalar(1.f), U8({}, {5}),
                                 Scalar(2.f), U8({}, {100})});
  REQUIRE(add.status.ok());
  // sums [0, 6, 10, 16] / 2 = [0, 3, 5, 8] + 100.
  CHECK(Ints<uint8_t>(add) == std::vector<int>{100, 103, 105, 108});
  auto mul = RunQ("QLinearMul", {a, Scalar(0.5f), U8({}, {10}), b, Scalar(1.f), U8({}, {5}),
                                 Scalar(2.f), nullptr});
  REQUIRE(mul.status.ok());
  // products [0, 5, 0, 15] / 2 = [0, 2.5 -> 2, 0, 7.5 -> 8].
  CHECK(Ints<uint8_t>(mul) == std::vector<int>{0, 2, 0, 8});
  // int8 and uint8 mix (NNCF graphs): A (zero point 0) real a * 0.5 =
  // [5, 10, 15, 20] plus B int8 {-2} at scale 1, in uint8 at scale 1 (C's dtype
  // is A's without C_zero_point): [3, 8, 13, 18].
  auto mixed = RunQ("QLinearAdd", {a, Scalar(0.5f), nullptr, I8({1}, {-2}), Scalar(1.f), nullptr,
                                   Scalar(1.f), nullptr});
  REQUIRE(mixed.status.ok());
  CHECK(Ints<uint8_t>(mixed) == std::vector<int>{3, 8, 13, 18});
  // 8- and 16-bit operands do not mix.
  CHECK(RunQ("QLinearAdd",
             {a, Scalar(0.5f), nullptr, I16({1}, {0}), Scalar(1.f), nullptr, Scalar(1.f), nullptr})
            .status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("quant: QLinearLeakyRelu, QLinearSigmoid") {
  auto x = I8({4}, {-100, -1, 0, 50});
  auto lr = RunQ("QLinearLeakyRelu", {x, Scalar(0.1f), I8({}, {0}), Scalar(0.1f), I8({}, {0})}, [] {
    AttrMap a;
    a.SetFloat("alpha", 0.25f);
    return a;
  }());
  REQUIRE(lr.status.ok());
  // -100 * 0.25 = -25; -0.25 -> -0 ; 0; 50.
  CHECK(Ints<int8_t>(lr) == std::vector<int>{-25, 0, 0, 50});
  auto sg = RunQ("QLinearSigmoid", {U8({3}, {0, 128, 255}), Scalar(0.1f), U8({}, {128}),
                                    Scalar(1.f / 256.f), U8({}, {0})});
  REQUIRE(sg.status.ok());
  // sigmoid(-12.8) ~ 2.8e-6 -> 0; sigmoid(0) * 256 = 128; sigmoid(12.7) * 256 ~ 256 -> 255.
  CHECK(Ints<uint8_t>(sg) == std::vector<int>{0, 128, 255});
}

TEST_CASE("quant: QLinearConcat requantizes inputs with other parameters") {
  auto x0 = U8({1, 2}, {10, 20});
  auto x1 = U8({1, 1}, {7});
  AttrMap a;
  a.SetInt("axis", -1);
  // x0 has Y's parameters (copied); x1: (7 - 3) * 0.75 = 3 / 0.5 = 6 + 2 = 8.
  auto r = RunQ(
      "QLinearConcat",
      {Scalar(0.5f), U8({}, {2}), x0, Scalar(0.5f), U8({}, {2}), x1, Scalar(0.75f), U8({}, {3})},
      a);
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{1, 3});
  CHECK(Ints<uint8_t>(r) == std::vector<int>{10, 20, 8});
  CHECK(RunQ("QLinearConcat",
             {Scalar(0.5f), U8({}, {2}), x0, Scalar(0.5f), U8({}, {2}), U8({2, 1}, {1, 2}),
              Scalar(1.f), U8({}, {0})},
             a)
            .status.code() == StatusCode::kInvalidModel);
}

TEST_CASE("quant: QLinearGlobalAveragePool and QLinearAveragePool, both layouts") {
  // NCHW [1,2,2,2]: channel sums (minus zp 1) 6 and 22 over 4 -> 1.5, 5.5 real
  // (scale 1) / y_scale 1 -> 2, 6 (ties to even) + 0.
  auto x = U8({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto g =
      RunQ("QLinearGlobalAveragePool", {x, Scalar(1.f), U8({}, {1}), Scalar(1.f), U8({}, {0})});
  REQUIRE(g.status.ok());
  CHECK(g.shape() == Shape{1, 2, 1, 1});
  CHECK(Ints<uint8_t>(g) == std::vector<int>{2, 6});
  // The same data as NHWC [1,2,2,2]: channels interleave.
  auto gl =
      RunQ("QLinearGlobalAveragePool", {x, Scalar(1.f), U8({}, {1}), Scalar(1.f), U8({}, {0})},
           Attrs({{"channels_last", 1}}));
  REQUIRE(gl.status.ok());
  CHECK(gl.shape() == Shape{1, 1, 1, 2});
  CHECK(Ints<uint8_t>(gl) == std::vector<int>{3, 4});  // (0+2+4+6)/4=3, (1+3+5+7)/4=4

  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  a.SetInts("pads", {1, 1, 0, 0});
  auto p = RunQ("QLinearAveragePool",
                {U8({1, 1, 2, 2}, {1, 2, 3, 4}), Scalar(1.f), nullptr, Scalar(1.f), nullptr}, a);
  REQUIRE(p.status.ok());
  CHECK(p.shape() == Shape{1, 1, 2, 2});
  // Windows: {1}, {1,2} -> 1.5 -> 2, {1,3} -> 2, {1,2,3,4} -> 2.5 -> 2.
  CHECK(Ints<uint8_t>(p) == std::vector<int>{1, 2, 2, 2});
  a.SetInt("count_include_pad", 1);
  auto pi = RunQ("QLinearAveragePool",
                 {U8({1, 1, 2, 2}, {1, 2, 3, 4}), Scalar(1.f), nullptr, Scalar(1.f), nullptr}, a);
  REQUIRE(pi.status.ok());
  // Divisor 4 everywhere: 0.25 -> 0, 0.75 -> 1, 1, 2.5 -> 2.
  CHECK(Ints<uint8_t>(pi) == std::vector<int>{0, 1, 1, 2});
}

TEST_CASE("quant: QLinearAveragePool rounds the exact average but at near-ties") {
  // y = round(sum * x_scale / (count * y_scale)) + zp with one float
  // multiplier per count (docs/NUMERICS.md): against the exact value in
  // long double, equal except where that value lies within 1e-5 of a
  // half-integer (the multiplier's own rounding may fall either side).
  std::mt19937 rng(5);
  int checked = 0, near_ties = 0;
  for (int it = 0; it < 300; ++it) {
    const float xs = std::uniform_real_distribution<float>(0.001f, 0.2f)(rng);
    const float ys = it % 3 ? xs * std::uniform_real_distribution<float>(0.2f, 2.f)(rng) : xs;
    std::vector<uint8_t> v(9 * 4);
    for (auto& b : v) b = uint8_t(rng());
    AttrMap a;
    a.SetInts("kernel_shape", {3, 3});
    a.SetInts("pads", {1, 1, 1, 1});
    a.SetInt("count_include_pad", it % 2);
    auto r = RunQ("QLinearAveragePool",
                  {U8({1, 4, 3, 3}, v), Scalar(xs), U8({}, {17}), Scalar(ys), U8({}, {128})}, a);
    REQUIRE(r.status.ok());
    const std::vector<int> got = Ints<uint8_t>(r);
    for (int c = 0; c < 4; ++c)
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 3; ++ox) {
          long sum = 0, count = 0;
          for (int ky = -1; ky <= 1; ++ky)
            for (int kx = -1; kx <= 1; ++kx) {
              const int iy = oy + ky, ix = ox + kx;
              if (iy < 0 || iy > 2 || ix < 0 || ix > 2) continue;
              sum += long(v[size_t(c * 9 + iy * 3 + ix)]) - 17;
              ++count;
            }
          if (it % 2) count = 9;
          const long double exact = (long double)sum * xs / ((long double)count * ys);
          const long double frac = exact - std::floor(exact);
          if (std::fabs(frac - 0.5L) < 1e-5L) {
            ++near_ties;
            continue;
          }
          const long q = std::lround(exact) + 128;
          CHECK(got[size_t((c * 3 + oy) * 3 + ox)] == std::min(255L, std::max(0L, q)));
          ++checked;
        }
  }
  MESSAGE("checked " << checked << ", near ties skipped " << near_ties);
  CHECK(checked > 9000);
}

TEST_CASE("quant: symmetric scales make exact ties, rounded half to even") {
  // PP-OCRv4 quantized with symmetric int8 activations (docs/NUMERICS.md): a
  // residual Add whose output scale is twice its inputs', and a 3x2 average
  // pool with one scale throughout. The exact results are often k + 0.5; the
  // fp32 literal graph rounds some of them the wrong way, qfold must not.
  const float s = 0.1775217205286026f;
  std::vector<int8_t> a, b;
  for (int i = -128; i < 128; ++i)
    for (int j = -128; j < 128; ++j) a.push_back(int8_t(i)), b.push_back(int8_t(j));
  const int64_t n = int64_t(a.size());
  auto add = RunQ("QLinearAdd", {I8({n}, a), Scalar(s), I8({}, {0}), I8({n}, b), Scalar(s),
                                 I8({}, {0}), Scalar(2 * s), I8({}, {0})});
  REQUIRE(add.status.ok());
  const std::vector<int> sum = Ints<int8_t>(add);
  int ties = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const int twice = a[k] + b[k];  // the exact result is twice / 2
    ties += twice % 2 != 0;
    CHECK(sum[k] == int(std::nearbyint(twice / 2.0)));
  }
  CHECK(ties == 32768);
  // Average of 3x2 windows (count 6), x and y scales equal: sum / 6, a tie
  // whenever sum = 6k + 3. Window values sweep every sum in range.
  const float xs = 0.6913778781890869f;
  std::vector<int8_t> v;
  for (int total = -6 * 128; total <= 6 * 127; ++total) {
    int rest = total;
    for (int e = 0; e < 6; ++e) {
      const int x = rest / (6 - e);  // in [-128, 127] while rest is in [-128m, 127m], m = 6 - e
      v.push_back(int8_t(x));
      rest -= x;
    }
    REQUIRE(rest == 0);
  }
  const int64_t windows = int64_t(v.size() / 6);
  // [1, windows, 3, 2]: each channel is one 3x2 window.
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 2});
  attrs.SetInts("strides", {3, 2});
  auto pool =
      RunQ("QLinearAveragePool",
           {I8({1, windows, 3, 2}, v), Scalar(xs), I8({}, {0}), Scalar(xs), I8({}, {0})}, attrs);
  REQUIRE(pool.status.ok());
  const std::vector<int> avg = Ints<int8_t>(pool);
  for (int64_t w = 0; w < windows; ++w) {
    int total = 0;
    for (int e = 0; e < 6; ++e) total += v[size_t(w * 6 + e)];
    CHECK_MESSAGE(avg[size_t(w)] == int(std::nearbyint(total / 6.0)), "sum " << total);
  }
}

// ---- qfold-internal ops -------------------------------------------------------

TEST_CASE("quant: QfLookupTable indexes by the raw byte") {
  std::vector<uint8_t> table(256);
  for (int i = 0; i < 256; ++i) table[size_t(i)] = uint8_t(255 - i);
  auto r = RunQ("QfLookupTable", {I8({3}, {-1, 0, -128}), U8({256}, table)});
  REQUIRE(r.status.ok());
  CHECK(r.outputs[0]->t.dtype == DType::kUInt8);
  CHECK(Ints<uint8_t>(r) == std::vector<int>{0, 255, 127});  // bytes 255, 0, 128
  CHECK(RunQ("QfLookupTable", {I8({1}, {0}), U8({255}, std::vector<uint8_t>(255))}).status.code() ==
        StatusCode::kInvalidModel);
}

TEST_CASE("quant: QfLookupTable with one table per channel, channels-first and channels-last") {
  // Table c maps byte b to (b + 10 * c) % 256: three channels.
  std::vector<uint8_t> tables(3 * 256);
  for (int c = 0; c < 3; ++c)
    for (int b = 0; b < 256; ++b) tables[size_t(c * 256 + b)] = uint8_t((b + 10 * c) % 256);
  const std::vector<uint8_t> x = {1, 2, 3, 4, 250, 251, 252, 253, 7, 8, 9, 255};
  // [1, 3, 4] with axis 1: element (c, i) gets table c (runs of 4, the vector path
  // needs 64, so this is the scalar run loop); [1, 4, 3] with axis 2: element (i, c).
  AttrMap a1;
  a1.SetInt("axis", 1);
  auto cf = RunOp("QfLookupTable", {U8({1, 3, 4}, x), U8({3, 256}, tables)}, a1);
  REQUIRE(cf.status.ok());
  CHECK(Ints<uint8_t>(cf) == std::vector<int>{1, 2, 3, 4, 4, 5, 6, 7, 27, 28, 29, 19});
  AttrMap a2;
  a2.SetInt("axis", 2);
  auto cl = RunOp("QfLookupTable", {U8({1, 4, 3}, x), U8({3, 256}, tables)}, a2);
  REQUIRE(cl.status.ok());
  CHECK(Ints<uint8_t>(cl) == std::vector<int>{1, 12, 23, 4, 4, 15, 252, 7, 27, 8, 19, 19});
  // Long runs take the vector lookup: [1, 2, 100], axis 1.
  std::vector<uint8_t> big(200);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 37);
  auto v = RunOp("QfLookupTable",
                 {U8({1, 2, 100}, big), U8({2, 256}, {tables.begin(), tables.begin() + 512})}, a1);
  REQUIRE(v.status.ok());
  std::vector<int> want(200);
  for (size_t i = 0; i < big.size(); ++i) want[i] = (big[i] + (i >= 100 ? 10 : 0)) % 256;
  CHECK(Ints<uint8_t>(v) == want);
  // A [C, 256] table needs an axis whose size is C.
  CHECK(RunOp("QfLookupTable", {U8({1, 3, 4}, x), U8({3, 256}, tables)}, AttrMap()).status.code() ==
        StatusCode::kInvalidModel);
  CHECK(RunOp("QfLookupTable", {U8({1, 4, 3}, x), U8({3, 256}, tables)}, a1).status.code() ==
        StatusCode::kInvalidModel);
}

TEST_CASE("quant: QfRequantize between 8- and 16-bit types") {
  // (x - 2) * (0.5 / 0.25) + (-1): x = [3, 4, 200] -> 2 - 1, 4 - 1, 396 - 1 -> int8 sat 127.
  auto r = RunQ("QfRequantize",
                {U8({3}, {3, 4, 200}), Scalar(0.5f), U8({}, {2}), Scalar(0.25f), I8({}, {-1})});
  REQUIRE(r.status.ok());
  CHECK(Ints<int8_t>(r) == std::vector<int>{1, 3, 127});
  // Ties: x int16 [1, 3] scale 1 -> 2: 0.5 -> 0, 1.5 -> 2; into uint16 with zp 10.
  auto t =
      RunQ("QfRequantize", {I16({2}, {1, 3}), Scalar(1.f), nullptr, Scalar(2.f), U16({}, {10})});
  REQUIRE(t.status.ok());
  CHECK(Ints<uint16_t>(t) == std::vector<int>{10, 12});
}

TEST_CASE("quant: DynamicQuantizeLinear computes uint8 parameters from the range") {
  // min -1, max 2.5: scale 3.5 / 255, zp round(1 / scale) = round(72.86) = 73.
  auto r = RunOp("DynamicQuantizeLinear", {F32({4}, {-1.f, 0.f, 1.f, 2.5f})}, AttrMap(), 3);
  REQUIRE(r.status.ok());
  CHECK(Ints<uint8_t>(r) == std::vector<int>{0, 73, 146, 255});
  CHECK(r.values<float>(1)[0] == 3.5f / 255.f);
  CHECK(r.values<uint8_t>(2)[0] == 73);
  // All zeros: scale 1/255, zp 0.
  auto z = RunOp("DynamicQuantizeLinear", {F32({2}, {0.f, 0.f})}, AttrMap(), 3);
  REQUIRE(z.status.ok());
  CHECK(z.values<uint8_t>(0) == std::vector<uint8_t>{0, 0});
  CHECK(z.values<uint8_t>(2)[0] == 0);
}

// ---- QfMatMulWeightQ ----------------------------------------------------------

TEST_CASE("quant: QfMatMulWeightQ with blocked int4 and per-column uint8 weights") {
  // B int4 [3,2] = [[1,-2],[3,4],[-8,7]], block_size 2 along K: scales
  // [[0.5,1],[2,0.25]], zero points [[1,0],[-1,2]] -> dequantized
  // [[0,-2],[1,4],[-14,1.25]].
  auto a = F32({2, 3}, {1, 2, 3, -1, 0, 0.5f});
  auto b = Packed4(DType::kInt4, {3, 2}, {0xE1, 0x43, 0x78});
  auto s = F32({2, 2}, {0.5f, 1.f, 2.f, 0.25f});
  auto zp = Packed4(DType::kInt4, {2, 2}, {0x01, 0x2F});
  auto r = RunQ("QfMatMulWeightQ", {a, b, s, zp}, Attrs({{"block_size", 2}}));
  REQUIRE(r.status.ok());
  CHECK(r.shape() == Shape{2, 2});
  CHECK(r.values<float>() == std::vector<float>{-40.f, 9.75f, -7.f, 2.625f});
  // Per column: B uint8 [2,2], scales [0.1, 1], zero points [10, 0].
  auto c = RunQ("QfMatMulWeightQ", {F32({1, 1, 2}, {1.f, 1.f}), U8({2, 2}, {10, 20, 30, 40}),
                                    F32({2}, {0.1f, 1.f}), U8({2}, {10, 0})});
  REQUIRE(c.status.ok());
  CHECK(c.shape() == Shape{1, 1, 2});
  CHECK(c.values<float>() == std::vector<float>{2.f, 60.f});
  // Scales that do not match the blocks; axis 1 is unsupported.
  CHECK(RunQ("QfMatMulWeightQ", {a, b, F32({3, 2}, {1, 1, 1, 1, 1, 1})}, Attrs({{"block_size", 2}}))
            .status.code() == StatusCode::kInvalidModel);
  CHECK(RunQ("QfMatMulWeightQ", {a, b, s}, Attrs({{"block_size", 2}, {"axis", 1}})).status.code() ==
        StatusCode::kUnsupported);
}

}  // namespace
}  // namespace test
}  // namespace qfold
