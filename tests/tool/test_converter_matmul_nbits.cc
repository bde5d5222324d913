// com.microsoft MatMulNBits (ONNX Runtime's weight-only quantizer) -> QfMatMulWeightQ:
// results against a reference computed here in double from the packed bytes as the contrib
// op's spec reads them (codes low bits first along K per column, zero points packed the
// same way, 2^(bits - 1) without them), and refusals that name the node.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

struct NBitsCase {
  int64_t rows = 3, k = 40, n = 24, bits = 4, block = 16;
  std::string zp = "packed";  // "packed", "float", "" (none)
  bool bias = false, half_scales = false, batch3 = false;
};

// Packs codes [n][blocks * per_row] (per_row codes per row) low bits first.
std::vector<uint8_t> Pack(const std::vector<int32_t>& codes, int64_t rows, int64_t per_row,
                          int64_t bits) {
  const int64_t per = 8 / bits, row_bytes = (per_row * bits + 7) / 8;
  std::vector<uint8_t> out(size_t(rows * row_bytes), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < per_row; ++i)
      out[size_t(r * row_bytes + i / per)] |=
          uint8_t(codes[size_t(r * per_row + i)] << ((i % per) * bits));
  return out;
}

void RunCase(const NBitsCase& c) {
  CAPTURE(c.bits);
  CAPTURE(c.k);
  CAPTURE(c.block);
  CAPTURE(c.zp);
  std::mt19937 gen(unsigned(c.bits * 100 + c.k));
  const int64_t blocks = (c.k + c.block - 1) / c.block, qmax = (1 << c.bits) - 1;
  std::uniform_int_distribution<int32_t> code(0, int32_t(qmax));
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  // codes[n][blocks * block] (past K: padding, zero), scales and zero points [n][blocks].
  std::vector<int32_t> codes(size_t(c.n * blocks * c.block), 0), zps(size_t(c.n * blocks));
  std::vector<float> scales(size_t(c.n * blocks));
  for (int64_t j = 0; j < c.n; ++j)
    for (int64_t kk = 0; kk < c.k; ++kk) codes[size_t(j * blocks * c.block + kk)] = code(gen);
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = 0.01f + 0.05f * unit(gen);
    if (c.half_scales) scales[i] = HalfToFloat(FloatToHalf(scales[i]));
    zps[i] = c.zp.empty() ? int32_t(1 << (c.bits - 1)) : code(gen);
  }
  std::vector<float> bias(size_t(c.n));
  for (float& v : bias) v = unit(gen) - 0.5f;

  OnnxBuilder b;
  b.AddOpset("com.microsoft", 1);
  const std::vector<int64_t> a_dims =
      c.batch3 ? std::vector<int64_t>{2, c.rows, c.k} : std::vector<int64_t>{c.rows, c.k};
  const std::vector<int64_t> y_dims =
      c.batch3 ? std::vector<int64_t>{2, c.rows, c.n} : std::vector<int64_t>{c.rows, c.n};
  b.Input("a", onnx::TensorProto::FLOAT, a_dims);
  b.Output("y", onnx::TensorProto::FLOAT, y_dims);
  const std::vector<uint8_t> packed = Pack(codes, c.n, blocks * c.block, c.bits);
  b.Init("b", onnx::TensorProto::UINT8, {c.n, blocks, c.block * c.bits / 8}, packed.data(),
         packed.size());
  if (c.half_scales) {
    std::vector<uint16_t> h(scales.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = FloatToHalf(scales[i]);
    b.Init("s", onnx::TensorProto::FLOAT16, {c.n, blocks}, h.data(), h.size() * 2);
  } else {
    b.InitFloat("s", {c.n * blocks}, scales);  // flattened, as older exports write them
  }
  std::vector<std::string> ins = {"a", "b", "s"};
  if (c.zp == "packed") {
    const std::vector<uint8_t> zp = Pack(zps, c.n, blocks, c.bits);
    b.Init("zp", onnx::TensorProto::UINT8, {c.n, int64_t(zp.size()) / c.n}, zp.data(), zp.size());
    ins.push_back("zp");
  } else if (c.zp == "float") {
    std::vector<float> zf(zps.begin(), zps.end());
    b.InitFloat("zp", {c.n, blocks}, zf);
    ins.push_back("zp");
  }
  if (c.bias) {
    while (ins.size() < 5) ins.push_back("");
    b.InitFloat("bias", {c.n}, bias);
    ins.push_back("bias");
  }
  auto* node = b.Node("MatMulNBits", ins, {"y"}, "mm", "com.microsoft");
  OnnxBuilder::AttrInt(node, "K", c.k);
  OnnxBuilder::AttrInt(node, "N", c.n);
  OnnxBuilder::AttrInt(node, "bits", c.bits);
  OnnxBuilder::AttrInt(node, "block_size", c.block);
  TempDir dir;
  Converted cv;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &cv);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(CountOps(cv.graph, "QfMatMulWeightQ") == 1);
  CHECK(CountOps(cv.graph, "MatMulNBits") == 0);
  const int64_t rows = c.rows * (c.batch3 ? 2 : 1);
  std::vector<float> a(size_t(rows * c.k));
  for (float& v : a) v = 2.f * unit(gen) - 1.f;
  SetFloatInput(cv.session.get(), "a", Shape(a_dims.begin(), a_dims.end()), a);
  st = cv.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::vector<float> y = FloatOutput(*cv.session, "y", Shape(y_dims.begin(), y_dims.end()));
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c.n; ++j) {
      double want = c.bias ? bias[size_t(j)] : 0.0, mag = std::fabs(want);
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const size_t p = size_t(j * blocks + kk / c.block);
        const double w = double(codes[size_t(j * blocks * c.block + kk)] - zps[p]) * scales[p];
        want += double(a[size_t(r * c.k + kk)]) * w;
        mag += std::fabs(double(a[size_t(r * c.k + kk)]) * w);
      }
      worst = std::max(worst, std::fabs(double(y[size_t(r * c.n + j)]) - want) / (mag + 1e-30));
    }
  CHECK(worst < 1e-6);
}

}  // namespace

TEST_CASE("MatMulNBits: 2-, 4- and 8-bit codes, packed/float/default zero points, bias") {
  NBitsCase c;
  RunCase(c);  // 4-bit, packed zero points, K = 40 in blocks of 16 (a short last block)
  c.zp = "";
  c.bias = true;
  c.batch3 = true;
  RunCase(c);
  c.bits = 2;
  c.zp = "float";
  c.half_scales = true;
  c.bias = false;
  RunCase(c);
  c.bits = 8;
  c.zp = "packed";
  c.k = 64;
  c.block = 32;
  RunCase(c);
  c.zp = "";
  RunCase(c);
}

TEST_CASE("MatMulNBits: what qfold cannot run is refused naming the node") {
  auto convert = [](int64_t bits, const std::string& extra) {
    OnnxBuilder b;
    b.AddOpset("com.microsoft", 1);
    b.Input("a", onnx::TensorProto::FLOAT, {1, 32});
    b.Output("y", onnx::TensorProto::FLOAT, {1, 8});
    const int64_t blob = 16 * bits / 8;
    std::vector<uint8_t> packed(size_t(8 * 2 * blob), 0x11);
    // short_b: one block of K's two (K and N say 32 x 8).
    b.Init("b", onnx::TensorProto::UINT8, {8, extra == "short_b" ? 1 : 2, blob}, packed.data(),
           extra == "short_b" ? packed.size() / 2 : packed.size());
    b.InitFloat("s", {8, 2}, std::vector<float>(16, 0.1f));
    std::vector<std::string> ins = {"a", "b", "s"};
    if (extra == "fractional_zp") {
      std::vector<float> z(16, 3.f);
      z[5] = 2.5f;
      b.InitFloat("zp", {8, 2}, z);
      ins.push_back("zp");
    }
    if (extra == "g_idx") {
      std::vector<int32_t> gi(32);
      for (int32_t i = 0; i < 32; ++i) gi[size_t(i)] = (i % 2);  // act-order
      b.Init("gi", onnx::TensorProto::INT32, {32}, gi.data(), gi.size() * 4);
      ins.push_back("");
      ins.push_back("gi");
    }
    auto* node = b.Node("MatMulNBits", ins, {"y"}, "proj", "com.microsoft");
    // huge_k: sizes whose products would overflow int64 unless refused first.
    OnnxBuilder::AttrInt(node, "K", extra == "huge_k" ? int64_t(1) << 62 : 32);
    OnnxBuilder::AttrInt(node, "N", 8);
    OnnxBuilder::AttrInt(node, "bits", bits);
    OnnxBuilder::AttrInt(node, "block_size", 16);
    TempDir dir;
    Graph g;
    return LoadAndOptimize(b.Write(dir), ConvertOptions(), &g);
  };
  struct Want {
    int64_t bits;
    std::string extra, says;
  };
  for (const Want& w : {Want{3, "", "bits = 3"}, Want{4, "huge_k", "K and N must be"},
                        Want{4, "fractional_zp", "not a whole number"},
                        Want{4, "g_idx", "g_idx reorders K"}, Want{4, "short_b", "B has"}}) {
    CAPTURE(w.says);
    const Status st = convert(w.bits, w.extra);
    REQUIRE_FALSE(st.ok());
    CHECK(Contains(st.message(), "MatMulNBits 'proj'"));
    CHECK(Contains(st.message(), w.says));
  }
  // A well-formed one converts (the cases above fail for their own reason).
  CHECK(convert(4, "").ok());
}

// --int8-activations (ConvertOptions::weight_only_int8_activations): the
// DequantizeLinear -> MatMul form gets accuracy_level 4; MatMulNBits nodes
// keep theirs (absent: 0).
TEST_CASE("MatMulNBits: --int8-activations sets accuracy_level 4 on the DequantizeLinear form") {
  OnnxBuilder b(21);
  b.AddOpset("com.microsoft", 1);
  b.Input("a", onnx::TensorProto::FLOAT, {1, 32});
  b.Output("y", onnx::TensorProto::FLOAT, {1, 8});
  b.Output("z", onnx::TensorProto::FLOAT, {1, 8});
  std::vector<uint8_t> w(32 * 8 / 2, 0x35);
  b.Init("w", /*INT4 (newer than the proto here)=*/22, {32, 8}, w.data(), w.size());
  b.InitFloat("ws", {2, 8}, std::vector<float>(16, 0.05f));
  auto* dq = b.Node("DequantizeLinear", {"w", "ws"}, {"wf"}, "dq");
  OnnxBuilder::AttrInt(dq, "axis", 0);
  OnnxBuilder::AttrInt(dq, "block_size", 16);
  b.Node("MatMul", {"a", "wf"}, {"y"}, "mm");
  std::vector<uint8_t> packed(8 * 2 * 8, 0x11);
  b.Init("b", onnx::TensorProto::UINT8, {8, 2, 8}, packed.data(), packed.size());
  b.InitFloat("s", {8, 2}, std::vector<float>(16, 0.1f));
  auto* nb = b.Node("MatMulNBits", {"a", "b", "s"}, {"z"}, "nbits", "com.microsoft");
  OnnxBuilder::AttrInt(nb, "K", 32);
  OnnxBuilder::AttrInt(nb, "N", 8);
  OnnxBuilder::AttrInt(nb, "bits", 4);
  OnnxBuilder::AttrInt(nb, "block_size", 16);
  TempDir dir;
  const std::string path = b.Write(dir);
  for (bool int8_a : {false, true}) {
    CAPTURE(int8_a);
    ConvertOptions opts;
    opts.weight_only_int8_activations = int8_a;
    Graph g;
    const Status st = LoadAndOptimize(path, opts, &g);
    REQUIRE_MESSAGE(st.ok(), st.message());
    int seen = 0;
    for (const Node& n : g.nodes) {
      if (n.op_type != "QfMatMulWeightQ") continue;
      ++seen;
      const int64_t level = n.attrs.GetInt("accuracy_level", -1);
      if (n.name == "nbits")
        CHECK(level == 0);
      else
        CHECK(level == (int8_a ? 4 : -1));
    }
    CHECK(seen == 2);
  }
}

}  // namespace test
}  // namespace conv
}  // namespace qfold
