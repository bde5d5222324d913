// Tests for converter/passes/fold_qdq_float_output.cc through LoadAndOptimize:
// DequantizeLinear -> Conv whose output stays float (an AIMET graph output,
// NNCF's Conv -> BatchNormalization -> Relu) becomes QfConvDequant. Numbers
// are checked against a double-precision reference of the literal graph
// (dequantize, Conv, BatchNormalization, activation) within float rounding.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;

struct Geo {
  int64_t c = 5, h = 7, w = 6, m = 12, k = 3, pad = 1, group = 1;
  int64_t oh() const { return h + 2 * pad - k + 1; }
  int64_t ow() const { return w + 2 * pad - k + 1; }
};

void InitBytes(OnnxBuilder* b, const std::string& name, int elem, const std::vector<int64_t>& dims,
               const std::vector<int32_t>& v) {
  std::string s;
  if (elem == kI32) {
    s.resize(v.size() * 4);
    std::memcpy(&s[0], v.data(), s.size());
  } else {
    for (int32_t x : v) s.push_back(char(uint8_t(x)));
  }
  b->Init(name, elem, dims, s.data(), s.size());
}

// One case: x -> Q/DQ (uint8 or int8) -> Conv (per-channel int8 weights, int32
// bias through DQ) [-> BatchNormalization] [-> act] -> graph output "y"; with
// `also_q` the Conv's result also feeds a Q -> DQ -> graph output "yq".
struct Case {
  int xt = kU8;
  bool batchnorm = false;
  std::string act;  // "", "Relu", "Clip"
  bool also_q = false;
  bool depthwise = false;
  uint32_t seed = 1;
};

struct Result {
  Graph graph;
  std::vector<float> y;
  std::vector<double> want;
};

Result RunCase(const Case& cc) {
  std::mt19937 rng(cc.seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  Geo g;
  if (cc.depthwise) g.c = g.m = g.group = 6;
  const int64_t cg = g.c / g.group, taps = g.k * g.k;
  const float xs = 2.f / 255.f;
  const int32_t xzp = cc.xt == kU8 ? 128 : -3;
  std::vector<int32_t> wc(size_t(g.m * cg * taps)), bc(size_t(g.m));
  std::vector<float> ws(size_t(g.m)), bs(size_t(g.m));
  std::vector<float> gamma(size_t(g.m)), beta(size_t(g.m)), mean(size_t(g.m)), var(size_t(g.m));
  for (auto& v : wc) v = int32_t(rng() % 255) - 127;
  for (int64_t i = 0; i < g.m; ++i) {
    ws[size_t(i)] = float(uni(0.005, 0.02));
    bs[size_t(i)] = xs * ws[size_t(i)];
    bc[size_t(i)] = int32_t(rng() % 2001) - 1000;
    gamma[size_t(i)] = float(uni(-1.5, 1.5));
    beta[size_t(i)] = float(uni(-0.5, 0.5));
    mean[size_t(i)] = float(uni(-0.3, 0.3));
    var[size_t(i)] = float(uni(0.1, 2.0));
  }

  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, g.c, g.h, g.w});
  b.Output("y", kF32, {1, g.m, g.oh(), g.ow()});
  b.InitFloat("x_scale", {}, {xs});
  InitBytes(&b, "x_zp", cc.xt, {}, {xzp});
  b.Node("QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"}, "x_quant");
  b.Node("DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_dq"}, "x_dequant");
  InitBytes(&b, "w", kI8, {g.m, cg, g.k, g.k}, wc);
  b.InitFloat("w_scale", {g.m}, ws);
  InitBytes(&b, "w_zp", kI8, {g.m}, std::vector<int32_t>(size_t(g.m), 0));
  auto* dqw = b.Node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}, "w_dequant");
  OnnxBuilder::AttrInt(dqw, "axis", 0);
  InitBytes(&b, "bias", kI32, {g.m}, bc);
  b.InitFloat("bias_scale", {g.m}, bs);
  InitBytes(&b, "bias_zp", kI32, {g.m}, std::vector<int32_t>(size_t(g.m), 0));
  auto* dqb = b.Node("DequantizeLinear", {"bias", "bias_scale", "bias_zp"}, {"bias_dq"}, "b_deq");
  OnnxBuilder::AttrInt(dqb, "axis", 0);
  auto* conv = b.Node("Conv", {"x_dq", "w_dq", "bias_dq"}, {"conv_out"}, "conv0");
  OnnxBuilder::AttrInts(conv, "pads", {g.pad, g.pad, g.pad, g.pad});
  if (g.group > 1) OnnxBuilder::AttrInt(conv, "group", g.group);
  std::string last = "conv_out";
  auto rename_last = [&](const std::string& next) { last = next; };
  if (cc.batchnorm) {
    b.InitFloat("bn_gamma", {g.m}, gamma);
    b.InitFloat("bn_beta", {g.m}, beta);
    b.InitFloat("bn_mean", {g.m}, mean);
    b.InitFloat("bn_var", {g.m}, var);
    b.Node("BatchNormalization", {last, "bn_gamma", "bn_beta", "bn_mean", "bn_var"}, {"bn_out"},
           "bn0");
    rename_last("bn_out");
  }
  if (cc.act == "Relu") {
    b.Node("Relu", {last}, {"act_out"}, "relu0");
    rename_last("act_out");
  } else if (cc.act == "SiLU" || cc.act == "HardSwish") {
    auto* gate = b.Node(cc.act == "SiLU" ? "Sigmoid" : "HardSigmoid", {last}, {"gate_out"}, "gate");
    if (cc.act == "HardSwish") OnnxBuilder::AttrFloat(gate, "alpha", 1.f / 6.f);
    b.Node("Mul", {"gate_out", last}, {"act_out"}, "gate_mul");
    rename_last("act_out");
  } else if (cc.act == "Clip") {
    b.InitFloat("clip_lo", {}, {-0.2f});
    b.InitFloat("clip_hi", {}, {0.6f});
    b.Node("Clip", {last, "clip_lo", "clip_hi"}, {"act_out"}, "clip0");
    rename_last("act_out");
  }
  b.Node("Identity", {last}, {"y"}, "out");
  if (cc.also_q) {
    b.Output("yq", kF32, {1, g.m, g.oh(), g.ow()});
    b.InitFloat("y_scale", {}, {0.05f});
    InitBytes(&b, "y_zp", kU8, {}, {128});
    b.Node("QuantizeLinear", {last, "y_scale", "y_zp"}, {"y_q"}, "y_quant");
    b.Node("DequantizeLinear", {"y_q", "y_scale", "y_zp"}, {"yq"}, "y_dequant");
  }
  const std::string path = b.Write(dir);

  std::vector<float> x(size_t(g.c * g.h * g.w));
  for (auto& v : x) v = float(uni(-1.0, 1.0));

  // The literal graph in double: quantize x, dequantize everything, convolve.
  Result r;
  r.want.assign(size_t(g.m * g.oh() * g.ow()), 0.0);
  const int32_t qlo = cc.xt == kU8 ? 0 : -128, qhi = qlo + 255;
  std::vector<double> xr(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double q = std::nearbyint(double(x[i] / xs)) + xzp;
    xr[i] = (std::min<double>(qhi, std::max<double>(qlo, q)) - xzp) * double(xs);
  }
  for (int64_t m = 0; m < g.m; ++m)
    for (int64_t oy = 0; oy < g.oh(); ++oy)
      for (int64_t ox = 0; ox < g.ow(); ++ox) {
        double acc = double(bc[size_t(m)]) * double(bs[size_t(m)]);
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t ky = 0; ky < g.k; ++ky)
            for (int64_t kx = 0; kx < g.k; ++kx) {
              const int64_t iy = oy - g.pad + ky, ix = ox - g.pad + kx;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              const int64_t c = m / (g.m / g.group) * cg + ci;
              acc += xr[size_t((c * g.h + iy) * g.w + ix)] *
                     double(wc[size_t(((m * cg + ci) * g.k + ky) * g.k + kx)]) * ws[size_t(m)];
            }
        if (cc.batchnorm)
          acc = (acc - mean[size_t(m)]) / std::sqrt(double(var[size_t(m)]) + 1e-5) *
                    gamma[size_t(m)] +
                beta[size_t(m)];
        if (cc.act == "Relu") acc = std::max(acc, 0.0);
        if (cc.act == "Clip") acc = std::min(std::max(acc, -0.2), 0.6);
        if (cc.act == "SiLU") acc = acc / (1.0 + std::exp(-acc));
        if (cc.act == "HardSwish") acc = acc * std::min(1.0, std::max(0.0, acc / 6.0 + 0.5));
        r.want[size_t((m * g.oh() + oy) * g.ow() + ox)] = acc;
      }

  Converted c;
  Status st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "x", {1, g.c, g.h, g.w}, x);
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  r.y = FloatOutput(*c.session, "y", {1, g.m, g.oh(), g.ow()});
  r.graph = std::move(c.graph);
  return r;
}

// Within float rounding of the literal graph: relative to the output's range.
void CheckClose(const Result& r) {
  REQUIRE(r.y.size() == r.want.size());
  double range = 0, worst = 0;
  for (double v : r.want) range = std::max(range, std::abs(v));
  for (size_t i = 0; i < r.y.size(); ++i) worst = std::max(worst, std::abs(r.y[i] - r.want[i]));
  CAPTURE(range);
  CHECK(range > 0.1);
  CHECK(worst <= 2e-6 * range);
}

const Node* Find(const Graph& g, const std::string& op_type) {
  for (const Node& n : g.nodes)
    if (n.op_type == op_type) return &n;
  return nullptr;
}

TEST_CASE("qdq float output: a Conv whose float output is a graph output runs integer") {
  for (int xt : {kU8, kI8}) {
    Case cc;
    cc.xt = xt;
    cc.also_q = true;  // AIMET: the float output is also re-quantized for the next layer
    cc.seed = 3 + uint32_t(xt);
    Result r = RunCase(cc);
    CheckClose(r);
    CHECK(CountOps(r.graph, "Conv") == 0);
    REQUIRE(CountOps(r.graph, "QfConvDequant") == 1);
    const Node* q = Find(r.graph, "QfConvDequant");
    CHECK(q->attrs.GetInt("channels_last", 0) == 1);  // planned NHWC like QLinearConv
    CHECK(q->inputs.size() == 7u);                    // float bias, no out_scale
    CHECK(r.graph.Find(q->inputs[0])->dtype == (xt == kU8 ? DType::kUInt8 : DType::kInt8));
    CHECK(r.graph.Find(q->inputs[6])->dtype == DType::kFloat32);
  }
}

TEST_CASE("qdq float output: BatchNormalization and Relu/Clip fold into QfConvDequant") {
  uint32_t seed = 20;
  for (const char* act : {"", "Relu", "Clip"}) {
    CAPTURE(act);
    Case cc;
    cc.batchnorm = true;
    cc.act = act;
    cc.seed = seed++;
    Result r = RunCase(cc);
    CheckClose(r);
    CHECK(CountOps(r.graph, "Conv") == 0);
    CHECK(CountOps(r.graph, "BatchNormalization") == 0);
    CHECK(CountOps(r.graph, "Relu") == 0);
    CHECK(CountOps(r.graph, "Clip") == 0);
    REQUIRE(CountOps(r.graph, "QfConvDequant") == 1);
    const Node* q = Find(r.graph, "QfConvDequant");
    CHECK(q->inputs.size() == 8u);  // B and out_scale
    CHECK(q->attrs.GetString("_activation", "") == std::string(act));
  }
}

TEST_CASE("qdq float output: x * Sigmoid(x) and x * HardSigmoid(x) fold as Swish/HardSwish") {
  uint32_t seed = 60;
  for (const char* act : {"SiLU", "HardSwish"})
    for (bool bn : {false, true}) {
      CAPTURE(act);
      CAPTURE(bn);
      Case cc;
      cc.act = act;
      cc.batchnorm = bn;
      cc.seed = seed++;
      Result r = RunCase(cc);
      CheckClose(r);
      REQUIRE(CountOps(r.graph, "QfConvDequant") == 1);
      CHECK(CountOps(r.graph, "Mul") == 0);
      CHECK(CountOps(r.graph, "Sigmoid") + CountOps(r.graph, "HardSigmoid") == 0);
      const Node* q = Find(r.graph, "QfConvDequant");
      CHECK(q->attrs.GetString("_activation", "") ==
            std::string(cc.act == "SiLU" ? "Swish" : "HardSwish"));
    }
}

TEST_CASE("qdq float output: a Conv and activation without BatchNormalization") {
  Case cc;
  cc.act = "Relu";
  cc.xt = kI8;
  cc.seed = 40;
  Result r = RunCase(cc);
  CheckClose(r);
  REQUIRE(CountOps(r.graph, "QfConvDequant") == 1);
  CHECK(CountOps(r.graph, "Relu") == 0);
}

TEST_CASE("qdq float output: depthwise convolutions too") {
  for (bool bn : {false, true}) {
    Case cc;
    cc.depthwise = true;
    cc.batchnorm = bn;
    cc.act = bn ? "Clip" : "";
    cc.seed = 50 + bn;
    Result r = RunCase(cc);
    CheckClose(r);
    CHECK(CountOps(r.graph, "QfConvDequant") == 1);
    CHECK(CountOps(r.graph, "Conv") == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold

namespace qfold {
namespace conv {
namespace test {
namespace {

// A ConvTranspose whose kernel equals its stride (a detection head's learned
// upsampling), 8-bit input and per-channel (axis 1) or per-tensor int8 weights
// through DequantizeLinear, float output (NNCF leaves it before an Add): the
// int8 kernels as a 1x1 QfConvDequant to k*k*M channels and DepthToSpace,
// within float rounding of the literal graph computed in double.
TEST_CASE("qdq float output: a ConvTranspose with kernel == stride runs integer") {
  uint32_t seed = 80;
  for (int xt : {kU8, kI8})
    for (int64_t k : {2, 3})
      for (bool per_channel : {true, false}) {
        CAPTURE(xt);
        CAPTURE(k);
        CAPTURE(per_channel);
        std::mt19937 rng(seed++);
        auto uni = [&](double lo, double hi) {
          return std::uniform_real_distribution<double>(lo, hi)(rng);
        };
        const int64_t c = 5, m = 6, h = 4, w = 3, oh = h * k, ow = w * k;
        const float xs = 2.f / 255.f;
        const int32_t xzp = xt == kU8 ? 128 : -3;
        std::vector<int32_t> wc(size_t(c * m * k * k));
        for (auto& v : wc) v = int32_t(rng() % 255) - 127;
        std::vector<float> ws(static_cast<size_t>(per_channel ? m : 1));
        std::vector<float> bias(static_cast<size_t>(m));
        for (auto& v : ws) v = float(uni(0.005, 0.02));
        for (auto& v : bias) v = float(uni(-0.5, 0.5));
        TempDir dir;
        OnnxBuilder b(17);
        b.Input("x", kF32, {1, c, h, w});
        b.Output("y", kF32, {1, m, oh, ow});
        b.InitFloat("x_scale", {}, {xs});
        InitBytes(&b, "x_zp", xt, {}, {xzp});
        b.Node("QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"}, "x_quant");
        b.Node("DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_dq"}, "x_dequant");
        InitBytes(&b, "w", kI8, {c, m, k, k}, wc);
        const std::vector<int64_t> sdims =
            per_channel ? std::vector<int64_t>{m} : std::vector<int64_t>{};
        b.InitFloat("w_scale", sdims, ws);
        InitBytes(&b, "w_zp", kI8, sdims, std::vector<int32_t>(ws.size(), 0));
        auto* dqw = b.Node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}, "w_dequant");
        if (per_channel) OnnxBuilder::AttrInt(dqw, "axis", 1);
        b.InitFloat("bias", {m}, bias);
        auto* ct = b.Node("ConvTranspose", {"x_dq", "w_dq", "bias"}, {"y"}, "up0");
        OnnxBuilder::AttrInts(ct, "kernel_shape", {k, k});
        OnnxBuilder::AttrInts(ct, "strides", {k, k});
        const std::string path = b.Write(dir);

        std::vector<float> x(size_t(c * h * w));
        for (auto& v : x) v = float(uni(-1.0, 1.0));
        const int32_t qlo = xt == kU8 ? 0 : -128, qhi = qlo + 255;
        std::vector<double> xr(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          const double q = std::nearbyint(double(x[i] / xs)) + xzp;
          xr[i] = (std::min<double>(qhi, std::max<double>(qlo, q)) - xzp) * double(xs);
        }
        Result r;
        r.want.assign(size_t(m * oh * ow), 0.0);
        for (int64_t mi = 0; mi < m; ++mi)
          for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
              double acc = bias[size_t(mi)];
              for (int64_t ci = 0; ci < c; ++ci)
                acc += xr[size_t((ci * h + oy / k) * w + ox / k)] *
                       double(wc[size_t(((ci * m + mi) * k + oy % k) * k + ox % k)]) *
                       double(ws[per_channel ? size_t(mi) : 0]);
              r.want[size_t((mi * oh + oy) * ow + ox)] = acc;
            }
        Converted cv;
        Status st = ConvertAndOpen(path, ConvertOptions(), &cv);
        REQUIRE_MESSAGE(st.ok(), st.message());
        SetFloatInput(cv.session.get(), "x", {1, c, h, w}, x);
        st = cv.session->Run();
        REQUIRE_MESSAGE(st.ok(), st.message());
        r.y = FloatOutput(*cv.session, "y", {1, m, oh, ow});
        CheckClose(r);
        CHECK(CountOps(cv.graph, "ConvTranspose") == 0);
        CHECK(CountOps(cv.graph, "QfConvDequant") == 1);
        CHECK(CountOps(cv.graph, "DepthToSpace") == 1);
      }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
