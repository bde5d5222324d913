// Tests for the QDQ folding pass (converter/passes/fold_qdq.cc) through LoadAndOptimize.
//
// Each model is written the way ONNX Runtime's quantize_static writes them: QuantizeLinear
// of the float input, DequantizeLinear of activations and of constant integer weights, an
// int32 bias through DequantizeLinear with scale x_scale * w_scale, a QuantizeLinear after
// each op and a final DequantizeLinear. Every test checks the structure of the optimized
// graph and the numbers: the folded model and the same model converted with
// fold_qdq = false (the literal float path through the runtime's Q/DQ ops) are both
// compared against a reference computed here in double precision from the ONNX
// definitions (dequantize, float op, quantize with round-half-to-even and saturation):
// at most one quantization step apart on every element, exact on >= 99% of them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/op.h"
#include "core/tensor.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;
constexpr int kU16 = onnx::TensorProto::UINT16;
constexpr int kI16 = onnx::TensorProto::INT16;
// INT4/UINT4 by number: the generated onnx.proto predates them.
constexpr int kI4 = 22;
constexpr int kU4 = 21;

int32_t QMinOf(int t) {
  return t == kI8 ? -128 : t == kI4 ? -8 : t == kI16 ? -32768 : 0;
}
int32_t QMaxOf(int t) {
  return t == kI8 ? 127 : t == kI4 ? 7 : t == kI16 ? 32767 : t == kU16 ? 65535 : 255;
}

// Per-tensor quantization parameters of an activation.
struct QP {
  float s;
  int32_t zp;
  int t;  // ONNX element type
};

// ONNX QuantizeLinear: saturate(round_half_even(x / s) + zp).
int32_t QuantizeRef(double x, double s, int32_t zp, int t) {
  double q = std::nearbyint(x / s) + zp;
  return int32_t(std::max<double>(QMinOf(t), std::min<double>(QMaxOf(t), q)));
}
std::vector<int32_t> QuantizeAll(const std::vector<double>& x, const QP& q) {
  std::vector<int32_t> c(x.size());
  for (size_t i = 0; i < x.size(); ++i) c[i] = QuantizeRef(x[i], q.s, q.zp, q.t);
  return c;
}
std::vector<double> DequantizeAll(const std::vector<int32_t>& c, const QP& q) {
  std::vector<double> r(c.size());
  for (size_t i = 0; i < c.size(); ++i) r[i] = double(c[i] - q.zp) * double(q.s);
  return r;
}
std::vector<double> ToDouble(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Integer tensor bytes as ONNX raw_data: 4-bit values packed low nibble first.
std::string PackInts(int elem, const std::vector<int32_t>& v) {
  std::string s;
  if (elem == kI32) {
    s.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(&s[0], v.data(), s.size());
  } else if (elem == kI4 || elem == kU4) {
    s.assign((v.size() + 1) / 2, '\0');
    for (size_t i = 0; i < v.size(); ++i)
      s[i / 2] = char(uint8_t(s[i / 2]) | ((uint8_t(v[i]) & 0xF) << (i % 2 ? 4 : 0)));
  } else if (elem == kI16 || elem == kU16) {
    for (int32_t x : v) {
      s.push_back(char(uint8_t(x)));
      s.push_back(char(uint8_t(uint32_t(x) >> 8)));
    }
  } else {
    for (int32_t x : v) s.push_back(char(uint8_t(x)));
  }
  return s;
}
void InitInts(OnnxBuilder* b, const std::string& name, int elem, const std::vector<int64_t>& dims,
              const std::vector<int32_t>& v) {
  std::string s = PackInts(elem, v);
  b->Init(name, elem, dims, s.data(), s.size());
}

// Scale and zero point initializers `base`_scale / `base`_zp: scalars for per tensor.
void AddParams(OnnxBuilder* b, const std::string& base, const std::vector<float>& s,
               const std::vector<int32_t>& zp, int t, bool per_axis) {
  std::vector<int64_t> dims;
  if (per_axis) dims = {int64_t(s.size())};
  b->InitFloat(base + "_scale", dims, s);
  InitInts(b, base + "_zp", t, dims, zp);
}

// in -> QuantizeLinear -> `base`_q; returns `base`_q.
std::string Q(OnnxBuilder* b, const std::string& in, const std::string& base, const QP& q) {
  AddParams(b, base, {q.s}, {q.zp}, q.t, false);
  b->Node("QuantizeLinear", {in, base + "_scale", base + "_zp"}, {base + "_q"}, base + "_quant");
  return base + "_q";
}
// `base`_q -> DequantizeLinear -> out (default `base`_dq).
std::string DQ(OnnxBuilder* b, const std::string& base, std::string out = "") {
  if (out.empty()) out = base + "_dq";
  b->Node("DequantizeLinear", {base + "_q", base + "_scale", base + "_zp"}, {out},
          base + "_dequant");
  return out;
}
std::string QDQ(OnnxBuilder* b, const std::string& in, const std::string& base, const QP& q) {
  Q(b, in, base, q);
  return DQ(b, base);
}

// A constant integer weight through a per-axis (or per-tensor when one scale) DQ.
std::string WeightDQ(OnnxBuilder* b, const std::string& base, const std::vector<int64_t>& dims,
                     int t, const std::vector<int32_t>& codes, const std::vector<float>& s,
                     const std::vector<int32_t>& zp, int64_t axis) {
  InitInts(b, base, t, dims, codes);
  AddParams(b, base, s, zp, t, s.size() > 1);
  auto* n = b->Node("DequantizeLinear", {base, base + "_scale", base + "_zp"}, {base + "_dq"},
                    base + "_dequant");
  if (s.size() > 1) OnnxBuilder::AttrInt(n, "axis", axis);
  return base + "_dq";
}

// An int32 bias through DQ with per-channel (or one) scale and zero points 0.
std::string BiasDQ(OnnxBuilder* b, const std::string& base, const std::vector<int32_t>& codes,
                   const std::vector<float>& s) {
  InitInts(b, base, kI32, {int64_t(codes.size())}, codes);
  AddParams(b, base, s, std::vector<int32_t>(s.size(), 0), kI32, s.size() > 1);
  auto* n = b->Node("DequantizeLinear", {base, base + "_scale", base + "_zp"}, {base + "_dq"},
                    base + "_dequant");
  if (s.size() > 1) OnnxBuilder::AttrInt(n, "axis", 0);
  return base + "_dq";
}

// Dequantized per-axis weight: channel of element i is (i / inner) % channels.
std::vector<double> DequantWeight(const std::vector<int32_t>& codes, const std::vector<float>& s,
                                  const std::vector<int32_t>& zp, size_t inner) {
  std::vector<double> r(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    size_t c = s.size() == 1 ? 0 : (i / inner) % s.size();
    r[i] = double(codes[i] - zp[c]) * double(s[c]);
  }
  return r;
}

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }
  int32_t Int(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(gen_);
  }
  std::vector<float> Floats(size_t n, double lo, double hi) {
    std::vector<float> v(n);
    for (float& x : v) x = float(Uniform(lo, hi));
    return v;
  }
  std::vector<int32_t> Ints(size_t n, int32_t lo, int32_t hi) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = Int(lo, hi);
    return v;
  }

 private:
  std::mt19937 gen_;
};

struct Feed {
  std::string name;
  Shape shape;
  std::vector<float> v;
};
struct Fetch {
  std::string name;
  Shape shape;
};
struct RunResult {
  Graph graph;
  std::vector<std::vector<float>> outs;
};

RunResult ConvertRun(const std::string& path, bool fold_qdq, const std::vector<Feed>& feeds,
                     const std::vector<Fetch>& fetches) {
  ConvertOptions opts;
  opts.fold_qdq = fold_qdq;
  Converted c;
  Status st = ConvertAndOpen(path, opts, &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  for (const Feed& f : feeds) SetFloatInput(c.session.get(), f.name, f.shape, f.v);
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  RunResult r;
  for (const Fetch& f : fetches) r.outs.push_back(FloatOutput(*c.session, f.name, f.shape));
  r.graph = std::move(c.graph);
  return r;
}

// The dequantized output `got` read back as codes against `want`: every element within
// one step and at least 99% exact.
void CheckCodes(const std::vector<float>& got, const std::vector<int32_t>& want, const QP& q,
                const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t exact = 0, first_bad = got.size();
  int32_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    int32_t c = int32_t(std::nearbyint(double(got[i]) / q.s)) + q.zp;
    int32_t d = std::abs(c - want[i]);
    if (d == 0) ++exact;
    if (d > worst) {
      worst = d;
      first_bad = i;
    }
  }
  CHECK_MESSAGE(worst <= 1, what << ": element " << first_bad << " is " << worst
                                 << " steps off (want code " << want[first_bad] << ")");
  CHECK_MESSAGE(exact * 100 >= got.size() * 99,
                what << ": only " << exact << " of " << got.size() << " exact");
}

// Checks both the folded and the literal run against the reference codes.
void CheckBoth(const RunResult& folded, const RunResult& literal, size_t out,
               const std::vector<int32_t>& want, const QP& q) {
  CheckCodes(folded.outs[out], want, q, "folded");
  CheckCodes(literal.outs[out], want, q, "literal float path");
}

const Node* FindOp(const Graph& g, const std::string& op_type) {
  for (const Node& n : g.nodes)
    if (n.op_type == op_type) return &n;
  return nullptr;
}

int64_t NumelOf(const Graph& g, const std::string& name) {
  const Value* v = g.Find(name);
  REQUIRE_MESSAGE(v != nullptr, name);
  int64_t n = 1;
  for (int64_t d : v->shape) n *= d;
  return n;
}

DType DTypeOf(const Graph& g, const std::string& name) {
  const Value* v = g.Find(name);
  REQUIRE_MESSAGE(v != nullptr, name);
  return v->dtype;
}

std::vector<int32_t> ConstInt32s(const Graph& g, const std::string& name) {
  const Value* v = g.Find(name);
  REQUIRE(v != nullptr);
  REQUIRE(v->is_constant());
  REQUIRE(v->dtype == DType::kInt32);
  std::vector<int32_t> out(v->data->size() / 4);
  std::memcpy(out.data(), v->data->data(), out.size() * 4);
  return out;
}

// ---- double-precision references ------------------------------------------------------------

struct ConvGeom {
  int64_t n, c, h, w, m, k, group, pad, stride;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};

std::vector<double> ConvRef(const std::vector<double>& x, const std::vector<double>& w,
                            const std::vector<double>& bias, const ConvGeom& g) {
  const int64_t cg = g.c / g.group, mg = g.m / g.group, oh = g.oh(), ow = g.ow();
  std::vector<double> y(size_t(g.n * g.m * oh * ow));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias.empty() ? 0.0 : bias[size_t(m)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < g.k; ++ki)
              for (int64_t kj = 0; kj < g.k; ++kj) {
                int64_t yy = i * g.stride - g.pad + ki, xx = j * g.stride - g.pad + kj;
                if (yy < 0 || yy >= g.h || xx < 0 || xx >= g.w) continue;
                int64_t c = (m / mg) * cg + ci;
                acc += x[size_t(((n * g.c + c) * g.h + yy) * g.w + xx)] *
                       w[size_t(((m * cg + ci) * g.k + ki) * g.k + kj)];
              }
          y[size_t(((n * g.m + m) * oh + i) * ow + j)] = acc;
        }
  return y;
}

// [batch, m, k] x [k, n] (b_batched: [batch, k, n]) -> [batch, m, n].
std::vector<double> MatMulRef(const std::vector<double>& a, const std::vector<double>& b,
                              int64_t batch, int64_t m, int64_t k, int64_t n, bool b_batched) {
  std::vector<double> y(size_t(batch * m * n), 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc +=
              a[size_t((t * m + i) * k + p)] * b[size_t((b_batched ? t * k * n : 0) + p * n + j)];
        y[size_t((t * m + i) * n + j)] = acc;
      }
  return y;
}

// ---- 1. Conv ------------------------------------------------------------------------------

struct ConvCase {
  int xt = kU8;                 // activation type (input and output)
  int wt = kI8;                 // weight type
  bool bias = true;             // int32 bias through DQ
  bool float_bias = false;      // a float constant bias instead
  bool bias_scale_off = false;  // bias DQ scale != x_scale * w_scale
  std::string act;              // "", "Relu" or "Clip" (0, 6)
  bool depthwise = false;
  uint32_t seed = 1;
};

void RunConvCase(const ConvCase& cc) {
  CAPTURE(cc.xt);
  CAPTURE(cc.wt);
  CAPTURE(cc.bias);
  CAPTURE(cc.act);
  CAPTURE(cc.depthwise);
  Rng rng(cc.seed);
  ConvGeom geo{1, 4, 6, 6, 8, 3, 1, 1, 1};
  if (cc.depthwise) geo = {1, 8, 6, 6, 8, 3, 8, 1, 1};
  const int64_t m = geo.m, cg = geo.c / geo.group;
  const QP xq = cc.xt == kU8 ? QP{2.f / 255.f, 128, kU8} : QP{2.f / 255.f, -3, kI8};
  const QP yq = cc.xt == kU8 ? QP{0.05f, 100, kU8} : QP{0.05f, -10, kI8};

  // Asymmetric per-channel weights: every channel has its own zero point.
  const size_t wn = size_t(m * cg * 9);
  std::vector<int32_t> wc, wzp;
  if (cc.wt == kI8) {
    wc = rng.Ints(wn, -127, 127);
    wzp = rng.Ints(size_t(m), -6, 6);
  } else {
    wc = rng.Ints(wn, 0, 255);
    wzp = rng.Ints(size_t(m), 118, 138);
  }
  wzp[0] = cc.wt == kI8 ? 5 : 120;  // at least two channels differ
  wzp[1] = cc.wt == kI8 ? -4 : 133;
  std::vector<float> ws =
      rng.Floats(size_t(m), cc.depthwise ? 0.03 : 0.01, cc.depthwise ? 0.05 : 0.02);
  std::vector<double> bias_real = ToDouble(rng.Floats(size_t(m), -1.0, 1.0));

  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {geo.n, geo.c, geo.h, geo.w});
  b.Output("y", kF32, {geo.n, m, geo.oh(), geo.ow()});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  std::string w_dq = WeightDQ(&b, "w", {m, cg, 3, 3}, cc.wt, wc, ws, wzp, 0);
  std::vector<std::string> conv_in = {x_dq, w_dq};
  std::vector<double> bias_ref;
  if (cc.float_bias) {
    std::vector<float> bf(bias_real.begin(), bias_real.end());
    b.InitFloat("bias_f", {m}, bf);
    conv_in.push_back("bias_f");
    bias_ref = ToDouble(bf);
  } else if (cc.bias) {
    std::vector<float> bs(static_cast<size_t>(m));
    std::vector<int32_t> bc(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      // quantize_static's bias scale (a float32 product), or a deliberately different one.
      bs[size_t(i)] = cc.bias_scale_off ? 3e-4f + 1e-5f * float(i) : xq.s * ws[size_t(i)];
      bc[size_t(i)] = int32_t(std::nearbyint(bias_real[size_t(i)] / bs[size_t(i)]));
    }
    conv_in.push_back(BiasDQ(&b, "bias", bc, bs));
    bias_ref.resize(size_t(m));
    for (int64_t i = 0; i < m; ++i) bias_ref[size_t(i)] = double(bc[size_t(i)]) * bs[size_t(i)];
  }
  auto* conv = b.Node("Conv", conv_in, {"conv_out"}, "conv0");
  OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::AttrInts(conv, "kernel_shape", {3, 3});
  if (cc.depthwise) OnnxBuilder::AttrInt(conv, "group", geo.group);
  std::string pre_q = "conv_out";
  if (cc.act == "Relu") {
    b.Node("Relu", {"conv_out"}, {"act_out"}, "relu0");
    pre_q = "act_out";
  } else if (cc.act == "Clip") {
    b.InitFloat("clip_lo", {}, {0.f});
    b.InitFloat("clip_hi", {}, {6.f});
    b.Node("Clip", {"conv_out", "clip_lo", "clip_hi"}, {"act_out"}, "clip0");
    pre_q = "act_out";
  }
  Q(&b, pre_q, "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(size_t(geo.n * geo.c * geo.h * geo.w), -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<double> wr = DequantWeight(wc, ws, wzp, size_t(cg * 9));
  std::vector<double> yr = ConvRef(xr, wr, bias_ref, geo);
  for (double& v : yr) {
    if (cc.act == "Relu") v = std::max(v, 0.0);
    if (cc.act == "Clip") v = std::min(std::max(v, 0.0), 6.0);
  }
  std::vector<int32_t> want = QuantizeAll(yr, yq);

  const Shape yshape = {geo.n, m, geo.oh(), geo.ow()};
  RunResult f = ConvertRun(path, true, {{"x", {geo.n, geo.c, geo.h, geo.w}, x}}, {{"y", yshape}});
  RunResult l = ConvertRun(path, false, {{"x", {geo.n, geo.c, geo.h, geo.w}, x}}, {{"y", yshape}});
  CheckBoth(f, l, 0, want, yq);

  // The output must actually exercise the clamp (both ends) for the test to mean something.
  const int32_t lo_code = *std::min_element(want.begin(), want.end());
  const int32_t hi_code = *std::max_element(want.begin(), want.end());
  CHECK(lo_code < yq.zp + (cc.act.empty() ? 0 : 1));
  CHECK(hi_code > yq.zp + 50);

  const Graph& g = f.graph;
  CHECK(CountOps(g, "QLinearConv") == 1);
  CHECK(CountOps(g, "Conv") == 0);
  CHECK(CountOps(g, "Relu") == 0);
  CHECK(CountOps(g, "Clip") == 0);
  CHECK(CountOps(g, "QuantizeLinear") == 1);
  CHECK(CountOps(g, "DequantizeLinear") == 1);
  CHECK(CountOps(l.graph, "QLinearConv") == 0);
  const Node* qc = FindOp(g, "QLinearConv");
  REQUIRE(qc != nullptr);
  REQUIRE(qc->inputs.size() == (cc.bias || cc.float_bias ? 9u : 8u));
  CHECK(DTypeOf(g, qc->inputs[0]) == (cc.xt == kU8 ? DType::kUInt8 : DType::kInt8));
  CHECK(DTypeOf(g, qc->inputs[3]) == (cc.wt == kU8 ? DType::kUInt8 : DType::kInt8));
  CHECK(NumelOf(g, qc->inputs[4]) == m);  // per-channel weight scale
  CHECK(NumelOf(g, qc->inputs[5]) == m);  // per-channel weight zero point
  CHECK(qc->attrs.GetInt("group", 1) == geo.group);
  if (qc->inputs.size() == 9) {
    // The int32 bias is in units of x_scale * w_scale[m] whatever the DQ said.
    std::vector<int32_t> bias = ConstInt32s(g, qc->inputs[8]);
    REQUIRE(bias.size() == size_t(m));
    for (int64_t i = 0; i < m; ++i) {
      double acc_scale = double(xq.s) * double(ws[size_t(i)]);
      CHECK(std::abs(bias[size_t(i)] * acc_scale - bias_ref[size_t(i)]) <= 0.5 * acc_scale + 1e-9);
    }
  }
  if (cc.act.empty()) {
    CHECK_FALSE(qc->attrs.Has("_qmin"));
    CHECK_FALSE(qc->attrs.Has("_qmax"));
  } else {
    CHECK(qc->attrs.GetInt("_qmin", -999) == yq.zp);  // real 0
    if (cc.act == "Clip") {
      CHECK(qc->attrs.GetInt("_qmax", -999) == QuantizeRef(6.0, yq.s, yq.zp, yq.t));
    } else {
      CHECK_FALSE(qc->attrs.Has("_qmax"));
    }
  }
}

TEST_CASE("qdq: Conv per-channel asymmetric int8 weights, uint8 activations, bias") {
  RunConvCase({});
}

TEST_CASE("qdq: Conv per-channel weights, every activation/weight type, with and without bias") {
  uint32_t seed = 10;
  for (int xt : {kU8, kI8})
    for (int wt : {kI8, kU8})
      for (bool bias : {true, false}) {
        ConvCase cc;
        cc.xt = xt;
        cc.wt = wt;
        cc.bias = bias;
        cc.seed = seed++;
        RunConvCase(cc);
      }
}

TEST_CASE("qdq: Conv+Relu and Conv+Clip(0,6) become _qmin/_qmax") {
  uint32_t seed = 30;
  for (int xt : {kU8, kI8})
    for (const char* act : {"Relu", "Clip"}) {
      ConvCase cc;
      cc.xt = xt;
      cc.act = act;
      cc.seed = seed++;
      RunConvCase(cc);
    }
}

TEST_CASE("qdq: depthwise Conv (group = C)") {
  uint32_t seed = 40;
  for (int xt : {kU8, kI8})
    for (int wt : {kI8, kU8}) {
      ConvCase cc;
      cc.xt = xt;
      cc.wt = wt;
      cc.depthwise = true;
      cc.act = xt == kU8 ? "Relu" : "";
      cc.seed = seed++;
      RunConvCase(cc);
    }
}

// ---- 2. bias variants ---------------------------------------------------------------------

TEST_CASE("qdq: Conv bias whose DQ scale is not x_scale * w_scale is rescaled") {
  ConvCase cc;
  cc.bias_scale_off = true;
  cc.seed = 50;
  RunConvCase(cc);
  cc.xt = kI8;
  cc.act = "Clip";
  cc.seed = 51;
  RunConvCase(cc);
}

TEST_CASE("qdq: Conv with a float constant bias") {
  ConvCase cc;
  cc.float_bias = true;
  cc.seed = 60;
  RunConvCase(cc);
  cc.xt = kI8;
  cc.depthwise = true;
  cc.seed = 61;
  RunConvCase(cc);
}

// ---- 3. Gemm and MatMul ---------------------------------------------------------------------

struct GemmCase {
  bool trans_b = true;
  bool per_channel = true;
  float alpha = 1.f, beta = 1.f;
  bool bias = true;
  uint32_t seed = 1;
};

void RunGemmCase(const GemmCase& gc) {
  CAPTURE(gc.trans_b);
  CAPTURE(gc.per_channel);
  CAPTURE(gc.alpha);
  CAPTURE(gc.beta);
  Rng rng(gc.seed);
  const int64_t m = 16, k = 20, n = 12;
  const QP xq{2.f / 255.f, 128, kU8}, yq{0.025f, 5, kI8};
  std::vector<int32_t> wc = rng.Ints(size_t(k * n), -127, 127);
  std::vector<float> ws = rng.Floats(gc.per_channel ? size_t(n) : 1, 0.005, 0.01);
  std::vector<int32_t> wzp = rng.Ints(ws.size(), -4, 4);
  if (gc.per_channel) wzp[0] = 3, wzp[1] = -2;

  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {m, k});
  b.Output("y", kF32, {m, n});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  std::string w_dq =
      WeightDQ(&b, "w", gc.trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, kI8,
               wc, ws, wzp, gc.trans_b ? 0 : 1);
  std::vector<std::string> in = {x_dq, w_dq};
  std::vector<double> bias_ref(size_t(n), 0.0);
  if (gc.bias) {
    std::vector<double> real = ToDouble(rng.Floats(size_t(n), -1.0, 1.0));
    std::vector<float> bs(ws.size());
    std::vector<int32_t> bc(static_cast<size_t>(n));
    for (size_t c = 0; c < bs.size(); ++c) bs[c] = xq.s * ws[c];
    for (int64_t c = 0; c < n; ++c) {
      float s = bs[bs.size() == 1 ? 0 : size_t(c)];
      bc[size_t(c)] = int32_t(std::nearbyint(real[size_t(c)] / s));
      bias_ref[size_t(c)] = double(bc[size_t(c)]) * s;
    }
    in.push_back(BiasDQ(&b, "bias", bc, bs));
  }
  auto* gemm = b.Node("Gemm", in, {"gemm_out"}, "gemm0");
  OnnxBuilder::AttrInt(gemm, "transB", gc.trans_b ? 1 : 0);
  if (gc.alpha != 1.f) OnnxBuilder::AttrFloat(gemm, "alpha", gc.alpha);
  if (gc.beta != 1.f) OnnxBuilder::AttrFloat(gemm, "beta", gc.beta);
  Q(&b, "gemm_out", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(size_t(m * k), -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  // The weight as a logical [K, N] matrix, channel = column.
  std::vector<double> wr(size_t(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t c = 0; c < n; ++c) {
      size_t ch = ws.size() == 1 ? 0 : size_t(c);
      int32_t code = wc[size_t(gc.trans_b ? c * k + p : p * n + c)];
      wr[size_t(p * n + c)] = double(code - wzp[ch]) * double(ws[ch]);
    }
  std::vector<double> yr = MatMulRef(xr, wr, 1, m, k, n, false);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < n; ++c)
      yr[size_t(i * n + c)] = gc.alpha * yr[size_t(i * n + c)] + gc.beta * bias_ref[size_t(c)];
  std::vector<int32_t> want = QuantizeAll(yr, yq);

  RunResult f = ConvertRun(path, true, {{"x", {m, k}, x}}, {{"y", {m, n}}});
  RunResult l = ConvertRun(path, false, {{"x", {m, k}, x}}, {{"y", {m, n}}});
  CheckBoth(f, l, 0, want, yq);

  const Graph& g = f.graph;
  CHECK(CountOps(g, "QLinearMatMul") == 1);
  CHECK(CountOps(g, "Gemm") == 0);
  CHECK(CountOps(g, "MatMul") == 0);
  const Node* qm = FindOp(g, "QLinearMatMul");
  REQUIRE(qm != nullptr);
  CHECK(qm->inputs.size() == (gc.bias ? 9u : 8u));
  const Value* w = g.Find(qm->inputs[3]);
  REQUIRE(w != nullptr);
  CHECK(w->shape == Shape{k, n});  // transB applied to the constant
  CHECK(NumelOf(g, qm->inputs[4]) == int64_t(ws.size()));
  CHECK(NumelOf(g, qm->inputs[5]) == int64_t(ws.size()));
}

TEST_CASE("qdq: Gemm transB=1/0, per-channel/per-tensor, alpha and beta -> QLinearMatMul") {
  uint32_t seed = 100;
  for (bool trans_b : {true, false})
    for (bool per_channel : {true, false}) {
      GemmCase gc;
      gc.trans_b = trans_b;
      gc.per_channel = per_channel;
      gc.seed = seed++;
      RunGemmCase(gc);
      gc.alpha = 0.75f;
      gc.beta = 1.5f;
      gc.seed = seed++;
      RunGemmCase(gc);
    }
  GemmCase gc;
  gc.bias = false;
  gc.alpha = 1.25f;
  gc.seed = seed++;
  RunGemmCase(gc);
}

// MatMul of a [2, rows, 16] activation by a constant per-column [16, 12] weight, then an
// Add of a bias: "float" [12], "int32" (DQ'd), or "float_col" [12, 1] (broadcast along
// rows, so it is NOT a per-column bias).
void RunMatMulAddCase(const std::string& bias_kind, bool bias_first, int64_t rows, uint32_t seed) {
  CAPTURE(bias_kind);
  CAPTURE(bias_first);
  Rng rng(seed);
  const int64_t batch = 2, k = 16, n = 12;
  const QP xq{2.f / 255.f, 128, kU8}, yq{0.02f, 128, kU8};
  std::vector<int32_t> wc = rng.Ints(size_t(k * n), -127, 127);
  std::vector<float> ws = rng.Floats(size_t(n), 0.005, 0.01);
  std::vector<int32_t> wzp = rng.Ints(size_t(n), -4, 4);
  wzp[0] = 2;
  std::vector<float> bf = rng.Floats(size_t(n), -1.0, 1.0);

  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {batch, rows, k});
  b.Output("y", kF32, {batch, rows, n});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  std::string w_dq = WeightDQ(&b, "w", {k, n}, kI8, wc, ws, wzp, 1);
  b.Node("MatMul", {x_dq, w_dq}, {"mm_out"}, "matmul0");
  std::string bias_name;
  std::vector<double> bias_ref;  // per column, or per row for float_col
  if (bias_kind == "int32") {
    std::vector<float> bs(ws.size());
    std::vector<int32_t> bc(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) {
      bs[size_t(c)] = xq.s * ws[size_t(c)];
      bc[size_t(c)] = int32_t(std::nearbyint(double(bf[size_t(c)]) / bs[size_t(c)]));
      bias_ref.push_back(double(bc[size_t(c)]) * bs[size_t(c)]);
    }
    bias_name = BiasDQ(&b, "bias", bc, bs);
  } else {
    b.InitFloat("bias_f",
                bias_kind == "float_col" ? std::vector<int64_t>{n, 1} : std::vector<int64_t>{n},
                bf);
    bias_name = "bias_f";
    bias_ref = ToDouble(bf);
  }
  if (bias_first) {
    b.Node("Add", {bias_name, "mm_out"}, {"add_out"}, "add0");
  } else {
    b.Node("Add", {"mm_out", bias_name}, {"add_out"}, "add0");
  }
  Q(&b, "add_out", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(size_t(batch * rows * k), -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<double> wr = DequantWeight(wc, ws, wzp, 1);
  std::vector<double> yr = MatMulRef(xr, wr, batch, rows, k, n, false);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < n; ++c)
        yr[size_t((t * rows + i) * n + c)] += bias_ref[size_t(bias_kind == "float_col" ? i : c)];
  std::vector<int32_t> want = QuantizeAll(yr, yq);

  const Shape xs = {batch, rows, k}, ys = {batch, rows, n};
  RunResult f = ConvertRun(path, true, {{"x", xs, x}}, {{"y", ys}});
  RunResult l = ConvertRun(path, false, {{"x", xs, x}}, {{"y", ys}});
  CheckBoth(f, l, 0, want, yq);

  const Graph& g = f.graph;
  if (bias_kind == "float_col") {
    // A per-row bias cannot become the per-column int32 bias: the Add stays (the MatMul,
    // not followed by a Q, then stays float).
    CHECK(CountOps(g, "Add") == 1);
    const Node* qm = FindOp(g, "QLinearMatMul");
    if (qm) CHECK(qm->inputs.size() == 8u);
    return;
  }
  CHECK(CountOps(g, "QLinearMatMul") == 1);
  CHECK(CountOps(g, "MatMul") == 0);
  CHECK(CountOps(g, "Add") == 0);
  const Node* qm = FindOp(g, "QLinearMatMul");
  REQUIRE(qm != nullptr);
  CHECK(NumelOf(g, qm->inputs[4]) == n);
  CHECK(qm->inputs.size() == 9u);
}

TEST_CASE("qdq: MatMul with a constant per-column weight plus Add(bias) -> one QLinearMatMul") {
  RunMatMulAddCase("float", false, 5, 200);
  RunMatMulAddCase("float", true, 5, 201);
  RunMatMulAddCase("int32", false, 5, 202);
  RunMatMulAddCase("int32", true, 7, 203);
}

TEST_CASE("qdq: MatMul + Add of a [N, 1] bias is not taken for a per-column bias") {
  RunMatMulAddCase("float_col", false, 12, 210);
}

TEST_CASE("qdq: MatMul of two activations (attention-like) -> QLinearMatMul") {
  Rng rng(220);
  const int64_t b0 = 2, h = 3, m = 6, k = 8, n = 6;
  const QP aq{0.02f, -5, kI8}, bq{0.03f, 7, kI8}, yq{0.04f, 2, kI8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("q", kF32, {b0, h, m, k});
  b.Input("kt", kF32, {b0, h, k, n});
  b.Output("scores", kF32, {b0, h, m, n});
  std::string a_dq = QDQ(&b, "q", "qin", aq);
  std::string k_dq = QDQ(&b, "kt", "kin", bq);
  b.Node("MatMul", {a_dq, k_dq}, {"mm_out"}, "attn_matmul");
  Q(&b, "mm_out", "yout", yq);
  DQ(&b, "yout", "scores");
  const std::string path = b.Write(dir);

  std::vector<float> qv = rng.Floats(size_t(b0 * h * m * k), -2.0, 2.0);
  std::vector<float> kv = rng.Floats(size_t(b0 * h * k * n), -3.0, 3.0);
  std::vector<double> ar = DequantizeAll(QuantizeAll(ToDouble(qv), aq), aq);
  std::vector<double> br = DequantizeAll(QuantizeAll(ToDouble(kv), bq), bq);
  std::vector<int32_t> want = QuantizeAll(MatMulRef(ar, br, b0 * h, m, k, n, true), yq);
  std::vector<Feed> feeds = {{"q", {b0, h, m, k}, qv}, {"kt", {b0, h, k, n}, kv}};
  RunResult f = ConvertRun(path, true, feeds, {{"scores", {b0, h, m, n}}});
  RunResult l = ConvertRun(path, false, feeds, {{"scores", {b0, h, m, n}}});
  CheckBoth(f, l, 0, want, yq);
  CHECK(CountOps(f.graph, "QLinearMatMul") == 1);
  CHECK(CountOps(f.graph, "MatMul") == 0);
  CHECK(CountOps(f.graph, "QuantizeLinear") == 2);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 1);
}

// ---- 4. shared weights and graph outputs --------------------------------------------------

struct ConvWeights {
  std::vector<int32_t> codes, zp;
  std::vector<float> scales;
};
ConvWeights RandomWeights(Rng* rng, int64_t m, int64_t per_channel) {
  ConvWeights w;
  w.codes = rng->Ints(size_t(m * per_channel), -127, 127);
  w.zp = rng->Ints(size_t(m), -5, 5);
  w.scales = rng->Floats(size_t(m), 0.01, 0.02);
  return w;
}

TEST_CASE("qdq: one per-channel weight DQ shared by two Convs folds into both") {
  Rng rng(300);
  const ConvGeom ga{1, 4, 6, 6, 8, 3, 1, 1, 1}, gb{1, 4, 6, 6, 8, 3, 1, 0, 1};
  const QP xq{2.f / 255.f, 128, kU8}, y1q{0.05f, 100, kU8}, y2q{0.04f, 90, kU8};
  ConvWeights w = RandomWeights(&rng, 8, 4 * 9);
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 6, 6});
  b.Output("y1", kF32, {1, 8, 6, 6});
  b.Output("y2", kF32, {1, 8, 4, 4});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  std::string w_dq = WeightDQ(&b, "w", {8, 4, 3, 3}, kI8, w.codes, w.scales, w.zp, 0);
  OnnxBuilder::AttrInts(b.Node("Conv", {x_dq, w_dq}, {"c1"}, "conv_a"), "pads", {1, 1, 1, 1});
  b.Node("Conv", {x_dq, w_dq}, {"c2"}, "conv_b");
  Q(&b, "c1", "y1out", y1q);
  DQ(&b, "y1out", "y1");
  Q(&b, "c2", "y2out", y2q);
  DQ(&b, "y2out", "y2");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(144, -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<double> wr = DequantWeight(w.codes, w.scales, w.zp, 36);
  std::vector<Fetch> fetches = {{"y1", {1, 8, 6, 6}}, {"y2", {1, 8, 4, 4}}};
  RunResult f = ConvertRun(path, true, {{"x", {1, 4, 6, 6}, x}}, fetches);
  RunResult l = ConvertRun(path, false, {{"x", {1, 4, 6, 6}, x}}, fetches);
  CheckBoth(f, l, 0, QuantizeAll(ConvRef(xr, wr, {}, ga), y1q), y1q);
  CheckBoth(f, l, 1, QuantizeAll(ConvRef(xr, wr, {}, gb), y2q), y2q);
  CHECK(CountOps(f.graph, "QLinearConv") == 2);
  CHECK(CountOps(f.graph, "Conv") == 0);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 2);  // the two outputs only
  for (const Node& n : f.graph.nodes)
    if (n.op_type == "QLinearConv") {
      CHECK(n.inputs[3] == "w");
      CHECK(NumelOf(f.graph, n.inputs[4]) == 8);
    }
}

TEST_CASE("qdq: a Conv whose float output is also a graph output becomes QfConvDequant") {
  // x -> QDQ -> conv_a -> hidden_output (graph output, float)
  //                    -> Q -> DQ -> conv_b -> Q -> DQ -> hidden_output_1 (graph output)
  Rng rng(310);
  const ConvGeom ga{1, 4, 5, 5, 6, 3, 1, 1, 1}, gb{1, 6, 5, 5, 8, 3, 1, 1, 1};
  const QP xq{2.f / 255.f, 128, kU8}, hq{0.06f, 128, kU8}, yq{0.05f, 120, kU8};
  ConvWeights wa = RandomWeights(&rng, 6, 4 * 9), wb = RandomWeights(&rng, 8, 6 * 9);
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 5, 5});
  b.Output("hidden_output", kF32, {1, 6, 5, 5});
  b.Output("hidden_output_1", kF32, {1, 8, 5, 5});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  std::string wa_dq = WeightDQ(&b, "wa", {6, 4, 3, 3}, kI8, wa.codes, wa.scales, wa.zp, 0);
  std::string wb_dq = WeightDQ(&b, "wb", {8, 6, 3, 3}, kI8, wb.codes, wb.scales, wb.zp, 0);
  OnnxBuilder::AttrInts(b.Node("Conv", {x_dq, wa_dq}, {"hidden_output"}, "conv_a"), "pads",
                        {1, 1, 1, 1});
  std::string h_dq = QDQ(&b, "hidden_output", "hidden", hq);
  OnnxBuilder::AttrInts(b.Node("Conv", {h_dq, wb_dq}, {"conv_b_out"}, "conv_b"), "pads",
                        {1, 1, 1, 1});
  Q(&b, "conv_b_out", "yout", yq);
  DQ(&b, "yout", "hidden_output_1");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(100, -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<double> hr = ConvRef(xr, DequantWeight(wa.codes, wa.scales, wa.zp, 36), {}, ga);
  std::vector<double> h2 = DequantizeAll(QuantizeAll(hr, hq), hq);
  std::vector<int32_t> want =
      QuantizeAll(ConvRef(h2, DequantWeight(wb.codes, wb.scales, wb.zp, 54), {}, gb), yq);
  std::vector<Fetch> fetches = {{"hidden_output", {1, 6, 5, 5}}, {"hidden_output_1", {1, 8, 5, 5}}};
  RunResult f = ConvertRun(path, true, {{"x", {1, 4, 5, 5}, x}}, fetches);
  RunResult l = ConvertRun(path, false, {{"x", {1, 4, 5, 5}, x}}, fetches);
  // The float graph output keeps its float value.
  for (size_t i = 0; i < hr.size(); ++i) {
    CHECK(std::abs(f.outs[0][i] - hr[i]) <= 1e-4 * (1 + std::abs(hr[i])));
    CHECK(std::abs(l.outs[0][i] - hr[i]) <= 1e-4 * (1 + std::abs(hr[i])));
  }
  CheckBoth(f, l, 1, want, yq);
  const Graph& g = f.graph;
  CHECK(CountOps(g, "Conv") == 0);
  CHECK(CountOps(g, "QfConvDequant") == 1);  // integer, float epilogue (fold_qdq_float_output.cc)
  CHECK(CountOps(g, "QLinearConv") == 1);
  REQUIRE(g.outputs.size() == 2);
  CHECK(g.outputs[0] == "hidden_output");
  CHECK(g.outputs[1] == "hidden_output_1");
  CHECK(DTypeOf(g, "hidden_output") == DType::kFloat32);
  CHECK(DTypeOf(g, "hidden_output_1") == DType::kFloat32);
  const Node* conv = FindOp(g, "QfConvDequant");
  REQUIRE(conv != nullptr);
  CHECK(conv->name == "conv_a");
}

// ---- 5. requantization --------------------------------------------------------------------

// x -> Q(xq) -> DQ -> Q(yq) -> DQ -> y over 256 values spanning [-3, 3].
RunResult RunRequantize(const QP& xq, const QP& yq, RunResult* literal) {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {256});
  b.Output("y", kF32, {256});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  Q(&b, x_dq, "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -3.f + 6.f * float(i) / 255.f + 0.0013f;
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<int32_t> want = QuantizeAll(xr, yq);
  RunResult f = ConvertRun(path, true, {{"x", {256}, x}}, {{"y", {256}}});
  *literal = ConvertRun(path, false, {{"x", {256}, x}}, {{"y", {256}}});
  CheckBoth(f, *literal, 0, want, yq);
  return f;
}

TEST_CASE("qdq: DQ(uint8) -> Q(int8) with other parameters becomes QfRequantize") {
  RunResult l;
  RunResult f = RunRequantize({0.02f, 128, kU8}, {0.03f, -5, kI8}, &l);
  CHECK(CountOps(f.graph, "QfRequantize") == 1);
  CHECK(CountOps(f.graph, "QuantizeLinear") == 1);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 1);
  const Node* r = FindOp(f.graph, "QfRequantize");
  REQUIRE(r != nullptr);
  CHECK(DTypeOf(f.graph, r->inputs[0]) == DType::kUInt8);
  CHECK(DTypeOf(f.graph, r->outputs[0]) == DType::kInt8);
  // And int8 -> uint8 (a scale ratio without exact .5 ties: 1.25 would make the double
  // reference and the float32 multiplier round ties differently).
  f = RunRequantize({0.025f, 3, kI8}, {0.021f, 140, kU8}, &l);
  CHECK(CountOps(f.graph, "QfRequantize") == 1);
}

TEST_CASE("qdq: an identical DQ -> Q pair disappears") {
  RunResult l;
  RunResult f = RunRequantize({0.02f, 128, kU8}, {0.02f, 128, kU8}, &l);
  CHECK(CountOps(f.graph, "QfRequantize") == 0);
  CHECK(CountOps(f.graph, "QuantizeLinear") == 1);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 1);
  CHECK(f.graph.nodes.size() == 2);
}

// ---- 6. layout ops on integers ------------------------------------------------------------

void CheckExact(const std::vector<float>& got, const std::vector<int32_t>& want, const QP& q) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (int32_t(std::nearbyint(double(got[i]) / q.s)) + q.zp != want[i]) ++bad;
  CHECK_MESSAGE(bad == 0, bad << " of " << got.size() << " differ");
}

TEST_CASE("qdq: Reshape, Transpose, MaxPool and Split run on int8") {
  Rng rng(400);
  const QP xq{0.03f, -7, kI8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 6, 6});
  b.Output("y_reshape", kF32, {1, 4, 36});
  b.Output("y_transpose", kF32, {1, 6, 6, 4});
  b.Output("y_maxpool", kF32, {1, 4, 3, 3});
  b.Output("y_split0", kF32, {1, 1, 6, 6});
  b.Output("y_split1", kF32, {1, 3, 6, 6});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  b.InitInt64("shape", {3}, {1, 4, 36});
  b.Node("Reshape", {x_dq, "shape"}, {"r"}, "reshape0");
  OnnxBuilder::AttrInts(b.Node("Transpose", {x_dq}, {"t"}, "transpose0"), "perm", {0, 2, 3, 1});
  auto* mp = b.Node("MaxPool", {x_dq}, {"p"}, "maxpool0");
  OnnxBuilder::AttrInts(mp, "kernel_shape", {2, 2});
  OnnxBuilder::AttrInts(mp, "strides", {2, 2});
  b.InitInt64("split", {2}, {1, 3});
  OnnxBuilder::AttrInt(b.Node("Split", {x_dq, "split"}, {"s0", "s1"}, "split0"), "axis", 1);
  for (const char* v : {"r", "t", "p", "s0", "s1"}) {
    Q(&b, v, std::string(v) + "out", xq);
  }
  DQ(&b, "rout", "y_reshape");
  DQ(&b, "tout", "y_transpose");
  DQ(&b, "pout", "y_maxpool");
  DQ(&b, "s0out", "y_split0");
  DQ(&b, "s1out", "y_split1");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(144, -4.5, 4.5);  // some codes saturate
  std::vector<int32_t> c = QuantizeAll(ToDouble(x), xq);
  std::vector<int32_t> tr(144), mpool(36), s0(c.begin(), c.begin() + 36),
      s1(c.begin() + 36, c.end());
  for (int64_t ch = 0; ch < 4; ++ch)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j)
        tr[size_t((i * 6 + j) * 4 + ch)] = c[size_t((ch * 6 + i) * 6 + j)];
  for (int64_t ch = 0; ch < 4; ++ch)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        int32_t m = -1000;
        for (int64_t di = 0; di < 2; ++di)
          for (int64_t dj = 0; dj < 2; ++dj)
            m = std::max(m, c[size_t((ch * 6 + 2 * i + di) * 6 + 2 * j + dj)]);
        mpool[size_t((ch * 3 + i) * 3 + j)] = m;
      }
  std::vector<Fetch> fetches = {{"y_reshape", {1, 4, 36}},
                                {"y_transpose", {1, 6, 6, 4}},
                                {"y_maxpool", {1, 4, 3, 3}},
                                {"y_split0", {1, 1, 6, 6}},
                                {"y_split1", {1, 3, 6, 6}}};
  RunResult f = ConvertRun(path, true, {{"x", {1, 4, 6, 6}, x}}, fetches);
  RunResult l = ConvertRun(path, false, {{"x", {1, 4, 6, 6}, x}}, fetches);
  for (const RunResult* r : {&f, &l}) {
    CheckExact(r->outs[0], c, xq);
    CheckExact(r->outs[1], tr, xq);
    CheckExact(r->outs[2], mpool, xq);
    CheckExact(r->outs[3], s0, xq);
    CheckExact(r->outs[4], s1, xq);
  }
  const Graph& g = f.graph;
  for (const char* op : {"Reshape", "Transpose", "MaxPool", "Split"}) {
    CAPTURE(op);
    CHECK(CountOps(g, op) == 1);
    const Node* n = FindOp(g, op);
    REQUIRE(n != nullptr);
    CHECK(DTypeOf(g, n->inputs[0]) == DType::kInt8);
    for (const std::string& o : n->outputs) CHECK(DTypeOf(g, o) == DType::kInt8);
  }
  CHECK(CountOps(g, "QuantizeLinear") == 1);
  CHECK(CountOps(g, "DequantizeLinear") == 5);
  CHECK(CountOps(g, "QfRequantize") == 0);
}

// NNCF's detection neck: Concat of DequantizeLinears that share one scale and
// zero point, no QuantizeLinear after it, read by a quantized Conv. The Concat
// joins the codes and the Conv folds (exact: the concatenated codes are the
// same). With another scale on one input the Concat stays float, and so does
// the Conv.
TEST_CASE("qdq: a Concat of DequantizeLinears with one scale joins the codes") {
  for (bool other_scale : {false, true}) {
    CAPTURE(other_scale);
    Rng rng(410);
    const QP xq{0.05f, 3, kU8}, x2q{other_scale ? 0.04f : 0.05f, 3, kU8}, yq{0.1f, 0, kU8};
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("a", kF32, {1, 2, 4, 4});
    b.Input("c", kF32, {1, 3, 4, 4});
    b.Output("y", kF32, {1, 4, 4, 4});
    const std::string a_dq = QDQ(&b, "a", "aq", xq), c_dq = QDQ(&b, "c", "cq", x2q);
    OnnxBuilder::AttrInt(b.Node("Concat", {a_dq, c_dq}, {"cat"}, "concat0"), "axis", 1);
    const std::vector<int32_t> w = rng.Ints(4 * 5 * 9, -60, 60);
    const std::vector<float> ws = {0.01f, 0.02f, 0.015f, 0.03f};
    const std::string w_dq = WeightDQ(&b, "w", {4, 5, 3, 3}, kI8, w, ws, {0, 0, 0, 0}, 0);
    auto* cv = b.Node("Conv", {"cat", w_dq}, {"conv"}, "conv0");
    OnnxBuilder::AttrInts(cv, "pads", {1, 1, 1, 1});
    b.Node("Relu", {"conv"}, {"relu"}, "relu0");
    Q(&b, "relu", "yq", yq);
    DQ(&b, "yq", "y");
    const std::string path = b.Write(dir);

    const std::vector<float> a = rng.Floats(32, -1, 1), c = rng.Floats(48, -1, 1);
    // Reference in double: the dequantized codes, the 3x3 convolution, Relu, Q.
    std::vector<double> cat;
    for (int32_t q : QuantizeAll(ToDouble(a), xq)) cat.push_back(double(q - xq.zp) * xq.s);
    for (int32_t q : QuantizeAll(ToDouble(c), x2q)) cat.push_back(double(q - x2q.zp) * x2q.s);
    const std::vector<double> wd = DequantWeight(w, ws, {0, 0, 0, 0}, 45);
    std::vector<double> y(64);
    for (int m = 0; m < 4; ++m)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          double acc = 0;
          for (int ch = 0; ch < 5; ++ch)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj) {
                const int ii = i + ki - 1, jj = j + kj - 1;
                if (ii < 0 || ii > 3 || jj < 0 || jj > 3) continue;
                acc += cat[size_t((ch * 4 + ii) * 4 + jj)] *
                       wd[size_t(((m * 5 + ch) * 3 + ki) * 3 + kj)];
              }
          y[size_t((m * 4 + i) * 4 + j)] = std::max(0.0, acc);
        }
    RunResult f = ConvertRun(path, true, {{"a", {1, 2, 4, 4}, a}, {"c", {1, 3, 4, 4}, c}},
                             {{"y", {1, 4, 4, 4}}});
    CheckCodes(f.outs[0], QuantizeAll(y, yq), yq, "folded");
    CHECK(CountOps(f.graph, "Conv") == (other_scale ? 1 : 0));
    const Node* cat_node = FindOp(f.graph, "Concat");
    REQUIRE(cat_node != nullptr);
    CHECK(DTypeOf(f.graph, cat_node->outputs[0]) ==
          (other_scale ? DType::kFloat32 : DType::kUInt8));
  }
}

// 16-bit codes (a16 models) move like 8-bit ones: MaxPool, Transpose and a
// nearest Resize run on uint16, and a MaxPool whose Q has another scale gets a
// 16-bit QfRequantize; exact against the literal graph computed here.
// An a16 classifier head: GlobalAveragePool between 16-bit Q/DQ pairs becomes
// QLinearGlobalAveragePool on the codes (it was the a16 models' last float op).
TEST_CASE("qdq: GlobalAveragePool on 16-bit codes folds") {
  for (int t : {kU16, kI16}) {
    CAPTURE(t);
    Rng rng(420);
    const QP xq{0.0004f, t == kU16 ? 30000 : -20, t}, yq{0.0003f, t == kU16 ? 32768 : 0, t};
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("x", kF32, {1, 4, 5, 5});
    b.Output("y", kF32, {1, 4, 1, 1});
    b.Node("GlobalAveragePool", {QDQ(&b, "x", "xq", xq)}, {"gap"}, "gap0");
    Q(&b, "gap", "yq", yq);
    DQ(&b, "yq", "y");
    const std::string path = b.Write(dir);
    const std::vector<float> x = rng.Floats(100, -5, 5);
    const std::vector<int32_t> c = QuantizeAll(ToDouble(x), xq);
    std::vector<double> avg(4, 0.0);
    for (size_t i = 0; i < c.size(); ++i) avg[i / 25] += double(c[i] - xq.zp) * xq.s / 25;
    RunResult f = ConvertRun(path, true, {{"x", {1, 4, 5, 5}, x}}, {{"y", {1, 4, 1, 1}}});
    CheckCodes(f.outs[0], QuantizeAll(avg, yq), yq, "folded");
    const Node* n = FindOp(f.graph, "QLinearGlobalAveragePool");
    REQUIRE(n != nullptr);
    CHECK(DTypeOf(f.graph, n->inputs[0]) == (t == kU16 ? DType::kUInt16 : DType::kInt16));
    CHECK(CountOps(f.graph, "GlobalAveragePool") == 0);
  }
}

TEST_CASE("qdq: MaxPool, Transpose and nearest Resize run on 16-bit codes") {
  Rng rng(420);
  const QP xq{0.0004f, 31000, kU16}, pq{0.0005f, 30000, kU16};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 3, 4, 4});
  b.Output("y_maxpool", kF32, {1, 3, 2, 2});
  b.Output("y_transpose", kF32, {1, 4, 4, 3});
  b.Output("y_resize", kF32, {1, 3, 8, 8});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  auto* mp = b.Node("MaxPool", {x_dq}, {"p"}, "maxpool0");
  OnnxBuilder::AttrInts(mp, "kernel_shape", {2, 2});
  OnnxBuilder::AttrInts(mp, "strides", {2, 2});
  OnnxBuilder::AttrInts(b.Node("Transpose", {x_dq}, {"t"}, "transpose0"), "perm", {0, 2, 3, 1});
  b.InitFloat("scales", {4}, {1.f, 1.f, 2.f, 2.f});
  OnnxBuilder::AttrString(b.Node("Resize", {x_dq, "", "scales"}, {"r"}, "resize0"), "mode",
                          "nearest");
  Q(&b, "p", "pout", pq);
  Q(&b, "t", "tout", xq);
  Q(&b, "r", "rout", xq);
  DQ(&b, "pout", "y_maxpool");
  DQ(&b, "tout", "y_transpose");
  DQ(&b, "rout", "y_resize");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(48, -14.0, 14.0);  // some codes saturate
  std::vector<int32_t> c = QuantizeAll(ToDouble(x), xq);
  std::vector<double> mpool(12);
  std::vector<int32_t> tr(48), rs(192);
  for (int64_t ch = 0; ch < 3; ++ch) {
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int32_t m = -1;
        for (int64_t di = 0; di < 2; ++di)
          for (int64_t dj = 0; dj < 2; ++dj)
            m = std::max(m, c[size_t((ch * 4 + 2 * i + di) * 4 + 2 * j + dj)]);
        mpool[size_t((ch * 2 + i) * 2 + j)] = double(m - xq.zp) * double(xq.s);
      }
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j)
        tr[size_t((i * 4 + j) * 3 + ch)] = c[size_t((ch * 4 + i) * 4 + j)];
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 8; ++j)
        rs[size_t((ch * 8 + i) * 8 + j)] = c[size_t((ch * 4 + i / 2) * 4 + j / 2)];
  }
  std::vector<Fetch> fetches = {
      {"y_maxpool", {1, 3, 2, 2}}, {"y_transpose", {1, 4, 4, 3}}, {"y_resize", {1, 3, 8, 8}}};
  RunResult f = ConvertRun(path, true, {{"x", {1, 3, 4, 4}, x}}, fetches);
  RunResult l = ConvertRun(path, false, {{"x", {1, 3, 4, 4}, x}}, fetches);
  for (const RunResult* r : {&f, &l}) {
    CheckExact(r->outs[0], QuantizeAll(mpool, pq), pq);
    CheckExact(r->outs[1], tr, xq);
    CheckExact(r->outs[2], rs, xq);
  }
  const Graph& g = f.graph;
  for (const char* op : {"MaxPool", "Transpose", "Resize"}) {
    CAPTURE(op);
    const Node* n = FindOp(g, op);
    REQUIRE(n != nullptr);
    CHECK(DTypeOf(g, n->inputs[0]) == DType::kUInt16);
    CHECK(DTypeOf(g, n->outputs[0]) == DType::kUInt16);
    CHECK(n->float_reason.empty());
  }
  CHECK(CountOps(g, "QfRequantize") == 1);
  CHECK(CountOps(g, "QuantizeLinear") == 1);
}

// 16-bit Concat: QLinearConcat's tables are 8-bit, so inputs quantized unlike
// the output are requantized (QfRequantize) and a plain Concat joins the codes.
TEST_CASE("qdq: Concat of 16-bit DQ'd activations -> QfRequantize + Concat") {
  Rng rng(515);
  const QP q0{0.0002f, 32768, kU16}, q1{0.00035f, 30000, kU16}, yq{0.00025f, 31000, kU16};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x0", kF32, {1, 2, 4, 4});
  b.Input("x1", kF32, {1, 3, 4, 4});
  b.Input("x2", kF32, {1, 1, 4, 4});
  b.Output("y", kF32, {1, 6, 4, 4});
  std::string d0 = QDQ(&b, "x0", "in0", q0), d1 = QDQ(&b, "x1", "in1", q1),
              d2 = QDQ(&b, "x2", "in2", yq);  // same parameters as the output
  OnnxBuilder::AttrInt(b.Node("Concat", {d0, d1, d2}, {"cat"}, "concat0"), "axis", 1);
  Q(&b, "cat", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x0 = rng.Floats(32, -7.0, 7.0), x1 = rng.Floats(48, -9.0, 9.0),
                     x2 = rng.Floats(16, -8.0, 8.0);
  std::vector<double> ref = DequantizeAll(QuantizeAll(ToDouble(x0), q0), q0);
  for (double v : DequantizeAll(QuantizeAll(ToDouble(x1), q1), q1)) ref.push_back(v);
  for (double v : DequantizeAll(QuantizeAll(ToDouble(x2), yq), yq)) ref.push_back(v);
  std::vector<Feed> feeds = {
      {"x0", {1, 2, 4, 4}, x0}, {"x1", {1, 3, 4, 4}, x1}, {"x2", {1, 1, 4, 4}, x2}};
  RunResult f = ConvertRun(path, true, feeds, {{"y", {1, 6, 4, 4}}});
  RunResult l = ConvertRun(path, false, feeds, {{"y", {1, 6, 4, 4}}});
  CheckBoth(f, l, 0, QuantizeAll(ref, yq), yq);
  CHECK(CountOps(f.graph, "Concat") == 1);
  CHECK(CountOps(f.graph, "QfRequantize") == 2);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 1);
  const Node* cat = FindOp(f.graph, "Concat");
  REQUIRE(cat != nullptr);
  CHECK(DTypeOf(f.graph, cat->outputs[0]) == DType::kUInt16);
}

TEST_CASE("qdq: a Reshape whose Q has another scale becomes Reshape + QfRequantize") {
  Rng rng(410);
  const QP xq{0.03f, -7, kI8}, yq{0.05f, 3, kI8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {2, 3, 4});
  b.Output("y", kF32, {6, 4});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  b.InitInt64("shape", {2}, {6, 4});
  b.Node("Reshape", {x_dq, "shape"}, {"r"}, "reshape0");
  Q(&b, "r", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x = rng.Floats(24, -4.5, 4.5);
  std::vector<int32_t> want = QuantizeAll(DequantizeAll(QuantizeAll(ToDouble(x), xq), xq), yq);
  RunResult f = ConvertRun(path, true, {{"x", {2, 3, 4}, x}}, {{"y", {6, 4}}});
  RunResult l = ConvertRun(path, false, {{"x", {2, 3, 4}, x}}, {{"y", {6, 4}}});
  CheckBoth(f, l, 0, want, yq);
  const Graph& g = f.graph;
  CHECK(CountOps(g, "Reshape") == 1);
  CHECK(CountOps(g, "QfRequantize") == 1);
  const Node* r = FindOp(g, "Reshape");
  REQUIRE(r != nullptr);
  CHECK(DTypeOf(g, r->inputs[0]) == DType::kInt8);
  CHECK(DTypeOf(g, r->outputs[0]) == DType::kInt8);
}

// ---- 7. elementwise, concat, pooling, lookup tables ---------------------------------------

TEST_CASE("qdq: Add/Mul of two DQ'd activations -> QLinearAdd/QLinearMul") {
  for (int t : {kU8, kI8}) {
    CAPTURE(t);
    Rng rng(500 + uint32_t(t));
    const int32_t o = t == kU8 ? 0 : -128;  // zero points shifted into the type's range
    // Scales with no simple ratios: ratios like 0.02/0.03 put real values exactly on .5 ties,
    // where a double reference and float32 kernels legitimately round apart.
    const QP aq{0.0213f, 120 + o, t}, bq{0.0157f, 100 + o, t}, addq{0.0311f, 110 + o, t},
        mulq{0.0103f, 128 + o, t};
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("a", kF32, {1, 4, 8, 8});
    b.Input("b", kF32, {1, 4, 1, 8});
    b.Output("sum", kF32, {1, 4, 8, 8});
    b.Output("prod", kF32, {1, 4, 8, 8});
    std::string a_dq = QDQ(&b, "a", "ain", aq), b_dq = QDQ(&b, "b", "bin", bq);
    b.Node("Add", {a_dq, b_dq}, {"add_out"}, "add0");
    b.Node("Mul", {a_dq, b_dq}, {"mul_out"}, "mul0");
    Q(&b, "add_out", "sumq", addq);
    DQ(&b, "sumq", "sum");
    Q(&b, "mul_out", "prodq", mulq);
    DQ(&b, "prodq", "prod");
    const std::string path = b.Write(dir);
    std::vector<float> av = rng.Floats(256, -2.0, 2.0), bv = rng.Floats(32, -1.5, 1.5);
    std::vector<double> ar = DequantizeAll(QuantizeAll(ToDouble(av), aq), aq);
    std::vector<double> br = DequantizeAll(QuantizeAll(ToDouble(bv), bq), bq);
    std::vector<double> sum(256), prod(256);
    for (size_t i = 0; i < 256; ++i) {
      double bb = br[(i / 64) * 8 + i % 8];  // b broadcast along H
      sum[i] = ar[i] + bb;
      prod[i] = ar[i] * bb;
    }
    std::vector<Feed> feeds = {{"a", {1, 4, 8, 8}, av}, {"b", {1, 4, 1, 8}, bv}};
    std::vector<Fetch> fetches = {{"sum", {1, 4, 8, 8}}, {"prod", {1, 4, 8, 8}}};
    RunResult f = ConvertRun(path, true, feeds, fetches);
    RunResult l = ConvertRun(path, false, feeds, fetches);
    CheckBoth(f, l, 0, QuantizeAll(sum, addq), addq);
    CheckBoth(f, l, 1, QuantizeAll(prod, mulq), mulq);
    CHECK(CountOps(f.graph, "QLinearAdd") == 1);
    CHECK(CountOps(f.graph, "QLinearMul") == 1);
    CHECK(CountOps(f.graph, "Add") == 0);
    CHECK(CountOps(f.graph, "Mul") == 0);
    CHECK(CountOps(f.graph, "QuantizeLinear") == 2);
    CHECK(CountOps(f.graph, "DequantizeLinear") == 2);
  }
}

TEST_CASE("qdq: Concat of DQ'd activations -> QLinearConcat") {
  Rng rng(510);
  const QP q0{0.02f, 128, kU8}, q1{0.035f, 100, kU8}, yq{0.025f, 120, kU8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x0", kF32, {1, 2, 4, 4});
  b.Input("x1", kF32, {1, 3, 4, 4});
  b.Input("x2", kF32, {1, 1, 4, 4});
  b.Output("y", kF32, {1, 6, 4, 4});
  std::string d0 = QDQ(&b, "x0", "in0", q0), d1 = QDQ(&b, "x1", "in1", q1),
              d2 = QDQ(&b, "x2", "in2", yq);  // same parameters as the output
  OnnxBuilder::AttrInt(b.Node("Concat", {d0, d1, d2}, {"cat"}, "concat0"), "axis", 1);
  Q(&b, "cat", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x0 = rng.Floats(32, -3.0, 3.0), x1 = rng.Floats(48, -4.0, 4.0),
                     x2 = rng.Floats(16, -3.0, 3.0);
  std::vector<double> ref = DequantizeAll(QuantizeAll(ToDouble(x0), q0), q0);
  for (double v : DequantizeAll(QuantizeAll(ToDouble(x1), q1), q1)) ref.push_back(v);
  for (double v : DequantizeAll(QuantizeAll(ToDouble(x2), yq), yq)) ref.push_back(v);
  std::vector<Feed> feeds = {
      {"x0", {1, 2, 4, 4}, x0}, {"x1", {1, 3, 4, 4}, x1}, {"x2", {1, 1, 4, 4}, x2}};
  RunResult f = ConvertRun(path, true, feeds, {{"y", {1, 6, 4, 4}}});
  RunResult l = ConvertRun(path, false, feeds, {{"y", {1, 6, 4, 4}}});
  CheckBoth(f, l, 0, QuantizeAll(ref, yq), yq);
  CHECK(CountOps(f.graph, "QLinearConcat") == 1);
  CHECK(CountOps(f.graph, "Concat") == 0);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 1);
}

TEST_CASE("qdq: GlobalAveragePool -> QLinearGlobalAveragePool") {
  Rng rng(520);
  const QP xq{0.02f, 128, kU8}, yq{0.0083f, 125, kU8};  // 0.008 would tie (sum * 0.1)
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {2, 16, 5, 5});
  b.Output("y", kF32, {2, 16, 1, 1});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  b.Node("GlobalAveragePool", {x_dq}, {"gap"}, "gap0");
  Q(&b, "gap", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x = rng.Floats(800, -2.5, 2.5);
  for (size_t i = 0; i < 100; ++i) x[i] += 1.5f;  // a couple of channels far from 0
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<double> mean(32, 0.0);
  for (size_t i = 0; i < 800; ++i) mean[i / 25] += xr[i] / 25.0;
  RunResult f = ConvertRun(path, true, {{"x", {2, 16, 5, 5}, x}}, {{"y", {2, 16, 1, 1}}});
  RunResult l = ConvertRun(path, false, {{"x", {2, 16, 5, 5}, x}}, {{"y", {2, 16, 1, 1}}});
  CheckBoth(f, l, 0, QuantizeAll(mean, yq), yq);
  CHECK(CountOps(f.graph, "QLinearGlobalAveragePool") == 1);
  CHECK(CountOps(f.graph, "GlobalAveragePool") == 0);
}

// Unary op between per-tensor DQ and Q, fed every one of the 256 input codes.
void RunLutCase(const std::string& op, const QP& xq, const QP& yq, double (*fn)(double)) {
  CAPTURE(op);
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {256});
  b.Output("y", kF32, {256});
  std::string x_dq = QDQ(&b, "x", "xin", xq);
  b.Node(op, {x_dq}, {"act"}, "act0");
  Q(&b, "act", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);
  // Codes in a scrambled order so that the table index is not the position.
  std::vector<int32_t> codes(256);
  for (int32_t i = 0; i < 256; ++i) codes[size_t(i)] = QMinOf(xq.t) + (i * 37 + 11) % 256;
  std::vector<float> x(256);
  for (size_t i = 0; i < 256; ++i) x[i] = float(codes[i] - xq.zp) * xq.s;
  REQUIRE(QuantizeAll(ToDouble(x), xq) == codes);
  std::vector<double> yr = DequantizeAll(codes, xq);
  for (double& v : yr) v = fn(v);
  std::vector<int32_t> want = QuantizeAll(yr, yq);
  RunResult f = ConvertRun(path, true, {{"x", {256}, x}}, {{"y", {256}}});
  RunResult l = ConvertRun(path, false, {{"x", {256}, x}}, {{"y", {256}}});
  CheckExact(f.outs[0], want, yq);  // the table equals the literal reference on every code
  CheckCodes(l.outs[0], want, yq, "literal float path");
  CHECK(CountOps(f.graph, "QfLookupTable") == 1);
  CHECK(CountOps(f.graph, op) == 0);
  const Node* lut = FindOp(f.graph, "QfLookupTable");
  REQUIRE(lut != nullptr);
  CHECK(NumelOf(f.graph, lut->inputs[1]) == 256);
}

double SigmoidRef(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double HardSwishRef(double x) {
  return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
}

TEST_CASE("qdq: Sigmoid and HardSwish -> QfLookupTable, exact on all 256 codes") {
  RunLutCase("Sigmoid", {0.06f, 128, kU8}, {1.f / 256.f, 0, kU8}, SigmoidRef);
  RunLutCase("Sigmoid", {0.05f, -3, kI8}, {1.f / 256.f, -128, kI8}, SigmoidRef);
  RunLutCase("HardSwish", {0.05f, 0, kI8}, {0.0271f, -100, kI8}, HardSwishRef);
  RunLutCase("HardSwish", {0.047f, 140, kU8}, {0.0271f, 20, kU8}, HardSwishRef);
}

// The ops whose OpDef has kTraitUnaryLut, each with its ONNX definition at
// default attributes written out here in double precision (Clip with constant
// bounds), the output scale fitted to the function's range over the input codes.
struct LutReference {
  const char* op;
  double (*fn)(double);
};
double SoftplusRef(double x) {
  return std::log1p(std::exp(x));
}
const LutReference kLutReferences[] = {
    {"Relu", [](double x) { return std::max(0.0, x); }},
    {"LeakyRelu", [](double x) { return x < 0 ? 0.01 * x : x; }},
    {"Sigmoid", SigmoidRef},
    {"Tanh", [](double x) { return std::tanh(x); }},
    {"HardSigmoid", [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); }},
    {"HardSwish", HardSwishRef},
    {"Gelu", [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
    {"Erf", [](double x) { return std::erf(x); }},
    {"Exp", [](double x) { return std::exp(x); }},
    {"Elu", [](double x) { return x < 0 ? std::expm1(x) : x; }},
    {"Selu",
     [](double x) {
       return 1.05070102214813232421875 * (x > 0 ? x : 1.67326319217681884765625 * std::expm1(x));
     }},
    {"Softplus", SoftplusRef},
    {"Softsign", [](double x) { return x / (1.0 + std::abs(x)); }},
    {"Mish", [](double x) { return x * std::tanh(SoftplusRef(x)); }},
    {"Swish", [](double x) { return x * SigmoidRef(x); }},
    {"Clip", [](double x) { return std::max(-0.75, std::min(1.5, x)); }},
    {"Neg", [](double x) { return -x; }},
    {"Abs", [](double x) { return std::abs(x); }},
};

// A wrong kTraitUnaryLut shows as a wrong table (or none): DQ -> op -> Q must
// become one QfLookupTable that matches the reference on every input code.
TEST_CASE("qdq: every op with the unary lookup-table trait becomes a table matching ONNX") {
  std::vector<std::string> traited, referenced;
  for (const std::string& t : SupportedOps())
    if (HasTraits(t, kTraitUnaryLut)) traited.push_back(t);
  for (const LutReference& r : kLutReferences) referenced.push_back(r.op);
  std::sort(referenced.begin(), referenced.end());
  REQUIRE(traited == referenced);  // a new trait needs its reference here

  for (const LutReference& r : kLutReferences) {
    for (int t : {kU8, kI8}) {
      CAPTURE(r.op);
      CAPTURE(t);
      const QP xq{0.03f, t == kU8 ? 131 : -3, t};
      std::vector<int32_t> codes(256);
      for (int32_t i = 0; i < 256; ++i) codes[size_t(i)] = QMinOf(t) + (i * 37 + 11) % 256;
      std::vector<double> yr = DequantizeAll(codes, xq);
      for (double& v : yr) v = r.fn(v);
      const double lo = std::min(0.0, *std::min_element(yr.begin(), yr.end()));
      const double hi = std::max(0.0, *std::max_element(yr.begin(), yr.end()));
      const float ys = float((hi - lo) / 255.0);
      const QP yq{ys, QMinOf(t) + int32_t(std::nearbyint(-lo / ys)), t};
      TempDir dir;
      OnnxBuilder b(17);
      b.Input("x", kF32, {256});
      b.Output("y", kF32, {256});
      std::vector<std::string> ins = {QDQ(&b, "x", "xin", xq)};
      if (std::string(r.op) == "Clip") {
        b.InitFloat("clip_min", {}, {-0.75f});
        b.InitFloat("clip_max", {}, {1.5f});
        ins.insert(ins.end(), {"clip_min", "clip_max"});
      }
      b.Node(r.op, ins, {"act"}, "act0");
      Q(&b, "act", "yout", yq);
      DQ(&b, "yout", "y");
      const std::string path = b.Write(dir);
      std::vector<float> x(256);
      for (size_t i = 0; i < 256; ++i) x[i] = float(codes[i] - xq.zp) * xq.s;
      RunResult f = ConvertRun(path, true, {{"x", {256}, x}}, {{"y", {256}}});
      CHECK(CountOps(f.graph, "QfLookupTable") == 1);
      CHECK(CountOps(f.graph, r.op) == 0);
      CheckCodes(f.outs[0], QuantizeAll(yr, yq), yq, "table");
    }
  }
}

// A PP-LCNet-style chain on one activation: a learnable scale and shift
// (Mul, Add by quantized scalar constants), then hardswish spelled out as
// x * HardSigmoid(x) and a float Div by 6 between DQ and Q, a second result
// read by another branch. Each result depends on one byte of x, so the
// converter evaluates the chain on all 256 codes and leaves lookup tables.
TEST_CASE("qdq: element-wise chains on one activation collapse into lookup tables") {
  const QP xq{0.031f, 121, kU8}, aq{0.027f, 118, kU8}, bq{0.033f, 96, kU8};
  const QP hq{1.f / 255.f, 0, kU8}, mq{0.029f, 40, kU8}, yq{0.0061f, 20, kU8};
  const QP cq{0.0125f, 0, kI8}, rq{0.02f, 0, kI8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 8, 8});
  b.Output("y", kF32, {1, 4, 8, 8});
  b.Output("r", kF32, {1, 4, 8, 8});
  const std::string x_dq = QDQ(&b, "x", "xin", xq);
  const std::string k_mul = WeightDQ(&b, "kmul", {1}, kI8, {93}, {cq.s}, {0}, 0);  // 1.1625
  const std::string k_add = WeightDQ(&b, "kadd", {}, kI8, {-37}, {cq.s}, {0}, 0);  // -0.4625
  b.Node("Mul", {x_dq, k_mul}, {"a"}, "affine_mul");
  const std::string a_dq = QDQ(&b, "a", "aq", aq);
  b.Node("Add", {a_dq, k_add}, {"bsum"}, "affine_add");
  const std::string b_dq = QDQ(&b, "bsum", "bq", bq);
  b.Node("HardSigmoid", {b_dq}, {"h"}, "hsig");
  const std::string h_dq = QDQ(&b, "h", "hq", hq);
  b.Node("Mul", {b_dq, h_dq}, {"m"}, "hswish_mul");
  const std::string m_dq = QDQ(&b, "m", "mq", mq);
  b.InitFloat("six", {}, {6.f});
  b.Node("Div", {m_dq, "six"}, {"d"}, "div6");
  Q(&b, "d", "yout", yq);
  DQ(&b, "yout", "y");
  // A second reader of the scaled activation: another table of the same x.
  b.Node("Relu", {a_dq}, {"ra"}, "relu0");
  Q(&b, "ra", "rout", rq);
  DQ(&b, "rout", "r");
  const std::string path = b.Write(dir);

  // Every code of x, scrambled so that the table index is not the position.
  std::vector<int32_t> codes(256);
  for (int32_t i = 0; i < 256; ++i) codes[size_t(i)] = (i * 101 + 7) % 256;
  std::vector<float> x(256);
  for (size_t i = 0; i < 256; ++i) x[i] = float(codes[i] - xq.zp) * xq.s;
  REQUIRE(QuantizeAll(ToDouble(x), xq) == codes);
  // The reference, step by step in double.
  auto step = [](const std::vector<double>& v, const QP& q) {
    return DequantizeAll(QuantizeAll(v, q), q);
  };
  std::vector<double> xr = DequantizeAll(codes, xq), a(256), bb(256), h(256), m(256), d(256),
                      r(256);
  for (size_t i = 0; i < 256; ++i) a[i] = xr[i] * 93 * double(cq.s);
  a = step(a, aq);
  for (size_t i = 0; i < 256; ++i) bb[i] = a[i] - 37 * double(cq.s);
  bb = step(bb, bq);
  for (size_t i = 0; i < 256; ++i) h[i] = std::max(0.0, std::min(1.0, 0.2 * bb[i] + 0.5));
  h = step(h, hq);
  for (size_t i = 0; i < 256; ++i) m[i] = bb[i] * h[i];
  m = step(m, mq);
  for (size_t i = 0; i < 256; ++i) d[i] = m[i] / 6;
  for (size_t i = 0; i < 256; ++i) r[i] = std::max(0.0, a[i]);

  const std::vector<Feed> feeds = {{"x", {1, 4, 8, 8}, x}};
  const std::vector<Fetch> fetches = {{"y", {1, 4, 8, 8}}, {"r", {1, 4, 8, 8}}};
  RunResult f = ConvertRun(path, true, feeds, fetches);
  RunResult l = ConvertRun(path, false, feeds, fetches);
  CheckBoth(f, l, 0, QuantizeAll(d, yq), yq);
  CheckBoth(f, l, 1, QuantizeAll(r, rq), rq);
  // The tables reproduce the integer chain exactly, so the folded model and the
  // literal float graph agree on every element.
  CHECK(f.outs[0] == l.outs[0]);
  CHECK(f.outs[1] == l.outs[1]);
  CHECK(CountOps(f.graph, "QfLookupTable") == 2);
  for (const char* gone : {"QLinearMul", "QLinearAdd", "Div", "Mul", "Add", "HardSigmoid"})
    CHECK_MESSAGE(CountOps(f.graph, gone) == 0, gone);
  for (const Node& n : f.graph.nodes)
    if (n.op_type == "QfLookupTable") CHECK(n.inputs[0] == "xin_q");
}

// A constant that varies along the channels (axis 1) makes the result a
// function of (channel, byte): a per-channel op, here QfChannelLines (the
// requantized product is a clamped line of x in every channel). Along any
// other axis the result depends on the position: nothing collapses.
TEST_CASE("qdq: an element-wise op with a per-channel constant becomes a per-channel table") {
  const QP xq{0.031f, 121, kU8}, aq{0.027f, 118, kU8};
  for (bool along_channels : {true, false}) {
    CAPTURE(along_channels);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("x", kF32, {1, 3, 3, 2});
    b.Output("y", kF32, {1, 3, 3, 2});
    const std::string x_dq = QDQ(&b, "x", "xin", xq);
    const std::vector<int64_t> kdims =
        along_channels ? std::vector<int64_t>{3, 1, 1} : std::vector<int64_t>{1, 1, 3, 1};
    const std::string k = WeightDQ(&b, "k", kdims, kI8, {93, -20, 57}, {0.0125f}, {0}, 0);
    b.Node("Mul", {x_dq, k}, {"a"}, "scale_mul");
    Q(&b, "a", "aq", aq);
    DQ(&b, "aq", "y");
    const std::string path = b.Write(dir);
    std::vector<float> x(18);
    for (size_t i = 0; i < 18; ++i) x[i] = float(int(i) * 7 % 40 - 20) * 0.05f;
    RunResult f = ConvertRun(path, true, {{"x", {1, 3, 3, 2}, x}}, {{"y", {1, 3, 3, 2}}});
    RunResult l = ConvertRun(path, false, {{"x", {1, 3, 3, 2}, x}}, {{"y", {1, 3, 3, 2}}});
    CHECK(f.outs[0] == l.outs[0]);
    // Hand-computed: y = Q(DQ(x) * k[c]) for channel c = (i / 6) of the NCHW layout.
    for (size_t i = 0; i < 18; ++i) {
      const int32_t xc = QuantizeAll({double(x[i])}, xq)[0];
      const int64_t pos = along_channels ? int64_t(i / 6) : int64_t(i / 2 % 3);
      const double kv = double((std::vector<int32_t>{93, -20, 57})[size_t(pos)]) * 0.0125f;
      const double real = double(xc - xq.zp) * double(xq.s) * kv;
      const int32_t want = QuantizeAll({real}, aq)[0];
      // Within one step: the graph rounds in float32, this in double.
      CHECK(std::abs(QuantizeAll({double(f.outs[0][i])}, aq)[0] - want) <= 1);
    }
    CHECK(CountOps(f.graph, "QfChannelLines") == (along_channels ? 1 : 0));
    CHECK(CountOps(f.graph, "QLinearMul") + CountOps(f.graph, "Mul") == (along_channels ? 0 : 1));
    if (along_channels) {
      const Node* lines = FindOp(f.graph, "QfChannelLines");
      REQUIRE(lines != nullptr);
      CHECK(lines->attrs.GetInt("axis", -1) == 1);
      CHECK(f.graph.Find(lines->inputs[1])->shape == Shape{1, 5, 3});
    }
  }
}

// DequantizeLinear -> BatchNormalization -> QuantizeLinear (a BN that could
// not be folded into a convolution, as after DenseNet's concatenations) is
// one clamped line per channel, bit-identical to the unfolded graph; with
// more per-channel steps each requantized (DenseNet's light model: BN, Mul,
// Add, Relu), one stage per 8-bit result in one QfChannelLines. A curve
// (Sigmoid) in the chain keeps a [C, 256] table.
TEST_CASE("qdq: DQ -> BatchNormalization -> Q becomes a per-channel table") {
  const QP xq{0.04f, 100, kU8}, yq{0.05f, 90, kU8};
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {2, 3, 2, 2});
  b.Output("y", kF32, {2, 3, 2, 2});
  const std::string x_dq = QDQ(&b, "x", "xin", xq);
  b.InitFloat("bn_scale", {3}, {1.5f, -0.75f, 0.9f});
  b.InitFloat("bn_bias", {3}, {0.2f, 0.1f, -0.3f});
  b.InitFloat("bn_mean", {3}, {0.5f, -0.25f, 0.0f});
  b.InitFloat("bn_var", {3}, {1.2f, 0.8f, 2.0f});
  b.Node("BatchNormalization", {x_dq, "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"}, "bn0");
  Q(&b, "bn", "yq", yq);
  DQ(&b, "yq", "y");
  const std::string path = b.Write(dir);
  std::vector<float> x(24);
  for (size_t i = 0; i < 24; ++i) x[i] = float(int(i) * 11 % 50 - 25) * 0.1f;
  RunResult f = ConvertRun(path, true, {{"x", {2, 3, 2, 2}, x}}, {{"y", {2, 3, 2, 2}}});
  RunResult l = ConvertRun(path, false, {{"x", {2, 3, 2, 2}, x}}, {{"y", {2, 3, 2, 2}}});
  CHECK(f.outs[0] == l.outs[0]);
  CHECK(CountOps(f.graph, "QfChannelLines") == 1);
  CHECK(CountOps(f.graph, "BatchNormalization") == 0);
}

TEST_CASE("qdq: a requantized per-channel chain becomes one QfChannelLines of a stage per step") {
  // BN -> Q -> DQ -> BN -> Q -> DQ -> Relu (or Sigmoid) -> Q: a stage per 8-bit
  // result when each is a clamped line of the one before (these constants:
  // every step fits; one whose float rounding lands a near-tie on the other
  // side of every line, or a round-half-even tie, keeps a table). A curve
  // keeps the [C, 256] table.
  const QP xq{0.04f, 100, kU8}, bq{0.03f, 120, kU8}, mq{0.05f, 7, kI8}, yq{0.0213f, 0, kU8};
  for (bool curve : {false, true}) {
    CAPTURE(curve);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("x", kF32, {2, 4, 3, 5});
    b.Output("y", kF32, {2, 4, 3, 5});
    const std::string x_dq = QDQ(&b, "x", "xin", xq);
    b.InitFloat("bn_scale", {4}, {1.5f, -0.75f, 0.9f, 2.5f});
    b.InitFloat("bn_bias", {4}, {0.2f, 0.1f, -0.3f, 0.0f});
    b.InitFloat("bn_mean", {4}, {0.5f, -0.25f, 0.0f, 1.0f});
    b.InitFloat("bn_var", {4}, {1.2f, 0.8f, 2.0f, 0.5f});
    b.InitFloat("bn2_scale", {4}, {0.7f, 1.1f, -0.4f, 0.95f});
    b.InitFloat("bn2_bias", {4}, {-0.1f, 0.3f, 0.05f, 0.2f});
    b.InitFloat("bn2_mean", {4}, {0.1f, 0.0f, -0.2f, 0.3f});
    b.InitFloat("bn2_var", {4}, {0.9f, 1.5f, 1.1f, 0.7f});
    b.Node("BatchNormalization", {x_dq, "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"}, "bn0");
    const std::string bn_dq = QDQ(&b, "bn", "bnq", bq);
    b.Node("BatchNormalization", {bn_dq, "bn2_scale", "bn2_bias", "bn2_mean", "bn2_var"}, {"m"},
           "bn1");
    const std::string m_dq = QDQ(&b, "m", "mq", mq);
    b.Node(curve ? "Sigmoid" : "Relu", {m_dq}, {"r"}, "act");
    Q(&b, "r", "yq", yq);
    DQ(&b, "yq", "y");
    const std::string path = b.Write(dir);
    std::vector<float> x(120);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i) * 37 % 101 - 50) * 0.09f;
    RunResult f = ConvertRun(path, true, {{"x", {2, 4, 3, 5}, x}}, {{"y", {2, 4, 3, 5}}});
    RunResult l = ConvertRun(path, false, {{"x", {2, 4, 3, 5}, x}}, {{"y", {2, 4, 3, 5}}});
    CHECK(f.outs[0] == l.outs[0]);
    CHECK(CountOps(f.graph, "QfChannelLines") == (curve ? 0 : 1));
    CHECK(CountOps(f.graph, "QfLookupTable") == (curve ? 1 : 0));
    if (!curve) {
      const Node* lines = FindOp(f.graph, "QfChannelLines");
      REQUIRE(lines != nullptr);
      // Stages: the two BNs' and the Relu's 8-bit results.
      CHECK(f.graph.Find(lines->inputs[1])->shape == Shape{3, 5, 4});
    }
  }
}

// ---- 8. int4 weight-only MatMul -----------------------------------------------------------

TEST_CASE("qdq: int4 blocked weight-only MatMul -> QfMatMulWeightQ") {
  Rng rng(600);
  const int64_t m = 3, k = 40, n = 6, block = 16, nb = (k + block - 1) / block;  // 16+16+8
  std::vector<int32_t> wc = rng.Ints(size_t(k * n), -8, 7);
  std::vector<float> ws = rng.Floats(size_t(nb * n), 0.01, 0.05);
  std::vector<int32_t> wzp = rng.Ints(size_t(nb * n), -2, 2);
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("a", kF32, {m, k});
  b.Output("y", kF32, {m, n});
  InitInts(&b, "w", kI4, {k, n}, wc);
  b.InitFloat("w_scale", {nb, n}, ws);
  InitInts(&b, "w_zp", kI4, {nb, n}, wzp);
  auto* dq = b.Node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}, "w_dequant");
  OnnxBuilder::AttrInt(dq, "axis", 0);
  OnnxBuilder::AttrInt(dq, "block_size", block);
  b.Node("MatMul", {"a", "w_dq"}, {"y"}, "matmul0");
  const std::string path = b.Write(dir);

  std::vector<float> a = rng.Floats(size_t(m * k), -1.0, 1.0);
  std::vector<double> wr(size_t(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t c = 0; c < n; ++c) {
      size_t s = size_t((p / block) * n + c);
      wr[size_t(p * n + c)] = double(wc[size_t(p * n + c)] - wzp[s]) * double(ws[s]);
    }
  std::vector<double> yr = MatMulRef(ToDouble(a), wr, 1, m, k, n, false);
  RunResult f = ConvertRun(path, true, {{"a", {m, k}, a}}, {{"y", {m, n}}});
  RunResult l = ConvertRun(path, false, {{"a", {m, k}, a}}, {{"y", {m, n}}});
  double scale = 0;
  for (double v : yr) scale = std::max(scale, std::abs(v));
  // Relative to the output's magnitude: a near-zero element is a cancellation.
  for (size_t i = 0; i < yr.size(); ++i) {
    CHECK(std::abs(f.outs[0][i] - l.outs[0][i]) <= 1e-5 * scale);
    CHECK(std::abs(f.outs[0][i] - yr[i]) <= 1e-5 * scale);
  }
  CHECK(CountOps(f.graph, "QfMatMulWeightQ") == 1);
  CHECK(CountOps(f.graph, "MatMul") == 0);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 0);
  const Node* wq = FindOp(f.graph, "QfMatMulWeightQ");
  REQUIRE(wq != nullptr);
  CHECK(DTypeOf(f.graph, wq->inputs[1]) == DType::kInt4);
  CHECK(wq->attrs.GetInt("block_size", 0) == block);
}

// ---- 9. where the parameters come from ----------------------------------------------------

onnx::NodeProto* ConstantNode(OnnxBuilder* b, const std::string& out, int elem,
                              const std::string& raw) {
  auto* n = b->Node("Constant", {}, {out}, out + "_const");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(elem);
  a->mutable_t()->set_raw_data(raw);
  return n;
}

TEST_CASE("qdq: scales and zero points from Constant nodes and Identity chains still fold") {
  Rng rng(700);
  const ConvGeom geo{1, 4, 5, 5, 6, 3, 1, 1, 1};
  const QP xq{2.f / 255.f, 128, kU8}, yq{0.05f, 100, kU8};
  ConvWeights w = RandomWeights(&rng, 6, 36);
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 5, 5});
  b.Output("y", kF32, {1, 6, 5, 5});
  // x's scale and zero point: Constant nodes; the output's: initializers behind Identities.
  ConstantNode(&b, "xs", kF32, std::string(reinterpret_cast<const char*>(&xq.s), 4));
  ConstantNode(&b, "xz", kU8, PackInts(kU8, {xq.zp}));
  b.Node("QuantizeLinear", {"x", "xs", "xz"}, {"x_q"}, "xin_quant");
  b.Node("Identity", {"xs"}, {"xs_id"}, "id0");
  b.Node("DequantizeLinear", {"x_q", "xs_id", "xz"}, {"x_dq"}, "xin_dequant");
  InitInts(&b, "w", kI8, {6, 4, 3, 3}, w.codes);
  b.InitFloat("w_scale_init", {6}, w.scales);
  b.Node("Identity", {"w_scale_init"}, {"w_scale_a"}, "id1");
  b.Node("Identity", {"w_scale_a"}, {"w_scale"}, "id2");
  ConstantNode(&b, "w_zp", kI8, PackInts(kI8, w.zp))
      ->mutable_attribute(0)
      ->mutable_t()
      ->add_dims(6);
  OnnxBuilder::AttrInt(b.Node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}, "w_dequant"),
                       "axis", 0);
  OnnxBuilder::AttrInts(b.Node("Conv", {"x_dq", "w_dq"}, {"c"}, "conv0"), "pads", {1, 1, 1, 1});
  AddParams(&b, "yinit", {yq.s}, {yq.zp}, kU8, false);
  b.Node("Identity", {"yinit_scale"}, {"ys"}, "id3");
  b.Node("Identity", {"yinit_zp"}, {"yz0"}, "id4");
  b.Node("Identity", {"yz0"}, {"yz"}, "id5");
  b.Node("QuantizeLinear", {"c", "ys", "yz"}, {"y_q"}, "y_quant");
  b.Node("DequantizeLinear", {"y_q", "ys", "yz"}, {"y"}, "y_dequant");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(100, -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<int32_t> want =
      QuantizeAll(ConvRef(xr, DequantWeight(w.codes, w.scales, w.zp, 36), {}, geo), yq);
  RunResult f = ConvertRun(path, true, {{"x", {1, 4, 5, 5}, x}}, {{"y", {1, 6, 5, 5}}});
  RunResult l = ConvertRun(path, false, {{"x", {1, 4, 5, 5}, x}}, {{"y", {1, 6, 5, 5}}});
  CheckBoth(f, l, 0, want, yq);
  CHECK(CountOps(f.graph, "QLinearConv") == 1);
  CHECK(CountOps(f.graph, "Conv") == 0);
  CHECK(CountOps(f.graph, "Identity") == 0);
  CHECK(CountOps(f.graph, "Constant") == 0);
  const Node* qc = FindOp(f.graph, "QLinearConv");
  REQUIRE(qc != nullptr);
  CHECK(NumelOf(f.graph, qc->inputs[4]) == 6);
}

TEST_CASE("qdq: a scale that is a graph input does not fold, and the model runs in float") {
  Rng rng(710);
  const ConvGeom geo{1, 4, 5, 5, 6, 3, 1, 1, 1};
  const QP xq{2.f / 255.f, 128, kU8}, yq{0.05f, 100, kU8};
  ConvWeights w = RandomWeights(&rng, 6, 36);
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 4, 5, 5});
  b.Input("x_scale", kF32, {});
  b.Output("y", kF32, {1, 6, 5, 5});
  InitInts(&b, "xz", kU8, {}, {xq.zp});
  b.Node("QuantizeLinear", {"x", "x_scale", "xz"}, {"x_q"}, "xin_quant");
  b.Node("DequantizeLinear", {"x_q", "x_scale", "xz"}, {"x_dq"}, "xin_dequant");
  std::string w_dq = WeightDQ(&b, "w", {6, 4, 3, 3}, kI8, w.codes, w.scales, w.zp, 0);
  OnnxBuilder::AttrInts(b.Node("Conv", {"x_dq", w_dq}, {"c"}, "conv0"), "pads", {1, 1, 1, 1});
  Q(&b, "c", "yout", yq);
  DQ(&b, "yout", "y");
  const std::string path = b.Write(dir);

  std::vector<float> x = rng.Floats(100, -1.0, 1.0);
  std::vector<double> xr = DequantizeAll(QuantizeAll(ToDouble(x), xq), xq);
  std::vector<int32_t> want =
      QuantizeAll(ConvRef(xr, DequantWeight(w.codes, w.scales, w.zp, 36), {}, geo), yq);
  std::vector<Feed> feeds = {{"x", {1, 4, 5, 5}, x}, {"x_scale", {}, {xq.s}}};
  RunResult f = ConvertRun(path, true, feeds, {{"y", {1, 6, 5, 5}}});
  RunResult l = ConvertRun(path, false, feeds, {{"y", {1, 6, 5, 5}}});
  CheckBoth(f, l, 0, want, yq);
  CHECK(CountOps(f.graph, "QLinearConv") == 0);
  CHECK(CountOps(f.graph, "Conv") == 1);
  CHECK(CountOps(f.graph, "QuantizeLinear") == 2);
  CHECK(CountOps(f.graph, "DequantizeLinear") == 2);
}

// ---- 10. invalid models -------------------------------------------------------------------

TEST_CASE("qdq: QuantizeLinear output_dtype contradicting its zero point is an invalid model") {
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("x", kF32, {4});
  b.Output("y", kF32, {4});
  AddParams(&b, "xin", {0.1f}, {128}, kU8, false);  // uint8 zero point ...
  auto* q = b.Node("QuantizeLinear", {"x", "xin_scale", "xin_zp"}, {"xin_q"}, "bad_quant");
  OnnxBuilder::AttrInt(q, "output_dtype", kI8);  // ... but int8 output
  DQ(&b, "xin", "y");
  const std::string path = b.Write(dir);
  for (bool fold : {true, false}) {
    CAPTURE(fold);
    ConvertOptions opts;
    opts.fold_qdq = fold;
    Graph g;
    Status st = LoadAndOptimize(path, opts, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "bad_quant"), st.message());
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
