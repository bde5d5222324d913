// Tests for `qfold check` (converter/check/): one crafted model per check, each
// asserting the node name and the numbers in the message and in the --json report.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "converter/check/check.h"
#include "core/op.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kF16 = onnx::TensorProto::FLOAT16;
constexpr int kI64 = onnx::TensorProto::INT64;
constexpr int kI32 = onnx::TensorProto::INT32;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kBool = onnx::TensorProto::BOOL;

check::Report Run(const std::string& path, const check::CheckOptions& opts = {}) {
  check::Report r;
  Status st = check::CheckModel(path, opts, &r);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return r;
}

std::vector<check::Issue> WithCode(const check::Report& r, const std::string& code) {
  std::vector<check::Issue> out;
  for (const check::Issue& i : r.issues)
    if (i.code == code) out.push_back(i);
  return out;
}

// The JSON issue with `code` and `node`; fails the test when absent.
nlohmann::json JsonIssue(const check::Report& r, const std::string& code, const std::string& node) {
  nlohmann::json j = nlohmann::json::parse(check::ReportJson(r));
  for (const auto& i : j["issues"])
    if (i["code"] == code && i["node"] == node) return i;
  FAIL("no JSON issue " << code << " at " << node);
  return {};
}

void InitBytes(OnnxBuilder* b, const std::string& name, int type, const std::vector<int64_t>& dims,
               const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) {
    if (type == kI32) {
      char c[4];
      std::memcpy(c, &x, 4);
      s.append(c, 4);
    } else {
      s.push_back(char(uint8_t(x)));
    }
  }
  b->Init(name, type, dims, s.data(), s.size());
}

TEST_CASE("check sequences: a length no option fixes is a dynamic_sequence warning; --dim lowers "
          "it") {
  TempDir dir;
  OnnxBuilder b(13);
  b.Input("X", kF32, {2, -1}, "T");
  b.Output("Y", kF32, {2, 1});
  b.InitInt64("last", {}, {-1});
  OnnxBuilder::AttrInt(b.Node("SplitToSequence", {"X"}, {"seq"}, "split_seq"), "axis", 1);
  b.Node("SequenceAt", {"seq", "last"}, {"Y"}, "pick_last");
  const std::string path = b.Write(dir);
  check::Report r = Run(path);
  std::vector<check::Issue> found = WithCode(r, "dynamic_sequence");
  REQUIRE(found.size() == 1);
  CHECK(found[0].severity == check::Severity::kWarning);
  CHECK(found[0].node == "split_seq");
  CHECK_MESSAGE(found[0].message.find("axis 1 of input 'X'") != std::string::npos,
                found[0].message);
  CHECK_MESSAGE(found[0].message.find("dynamic mode") != std::string::npos, found[0].message);
  CHECK(WithCode(r, "unsupported_op").empty());
  CHECK(WithCode(r, "shape_inference").empty());
  check::CheckOptions opts;
  opts.dims["T"] = 5;
  r = Run(path, opts);
  CHECK(WithCode(r, "dynamic_sequence").empty());
  CHECK(WithCode(r, "unsupported_op").empty());
}

TEST_CASE("check broadcast: names both dims, their origins and a working input shape") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("timestep", kF32, {-1});
  b.Input("x", kF32, {4});
  b.InitFloat("/time_proj/exponent", {160}, std::vector<float>(160, 0.5f));
  b.Node("Mul", {"timestep", "/time_proj/exponent"}, {"emb"}, "/time_proj/Mul");
  b.Node("Sin", {"emb"}, {"s"}, "/time_proj/Sin");  // downstream of the failure: no noise
  b.Node("FancyOp", {"x"}, {"y"}, "/custom");       // another, independent problem
  b.Output("s", kF32, {-1});
  b.Output("y", kF32, {4});
  check::CheckOptions o;
  o.input_shapes["timestep"] = {2};
  check::Report r = Run(b.Write(dir), o);

  auto bc = WithCode(r, "broadcast");
  REQUIRE(bc.size() == 1);
  CHECK(bc[0].severity == check::Severity::kError);
  CHECK(bc[0].node == "/time_proj/Mul");
  CHECK(bc[0].tensor == "timestep");
  CHECK(bc[0].message ==
        "Mul '/time_proj/Mul': cannot broadcast 2 (from input 'timestep', given as [2]) with 160 "
        "(from initializer '/time_proj/exponent') at output axis 0 (shapes [2] and [160])");
  CHECK(bc[0].fix ==
        "input 'timestep' axis 0 must be 160 (or 1) for this node: e.g. --input-shape "
        "timestep=160");
  // The walk went on: the unsupported op is reported too, and nothing about Sin.
  REQUIRE(WithCode(r, "unsupported_op").size() == 1);
  CHECK(r.count(check::Severity::kError) == 2);
  CHECK(check::ExitCode(r, false) == 2);

  nlohmann::json j = JsonIssue(r, "broadcast", "/time_proj/Mul");
  CHECK(j["severity"] == "error");
  CHECK(j["op_type"] == "Mul");
  CHECK(j["tensor"] == "timestep");
  CHECK(j["message"] == bc[0].message);
  nlohmann::json all = nlohmann::json::parse(check::ReportJson(r));
  CHECK(all["summary"]["errors"] == 2);
  CHECK(all["model"] == dir.File("model.onnx"));
}

TEST_CASE("check MatMul and Gemm: inner dims name both origins") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("a", kF32, {2, 512});
  b.InitFloat("w", {256, 10}, std::vector<float>(2560, 0.f));
  b.InitFloat("g", {10, 300}, std::vector<float>(3000, 0.f));
  b.Node("MatMul", {"a", "w"}, {"m"}, "/fc/MatMul");
  auto* gm = b.Node("Gemm", {"a", "g"}, {"h"}, "/head/Gemm");
  OnnxBuilder::AttrInt(gm, "transB", 1);
  b.Output("m", kF32, {2, 10});
  b.Output("h", kF32, {2, 10});
  check::Report r = Run(b.Write(dir));
  auto bc = WithCode(r, "broadcast");
  REQUIRE(bc.size() == 2);
  CHECK(bc[0].message ==
        "MatMul '/fc/MatMul': inner dims differ: 512 (from input 'a' axis 1, declared as [2,512]) "
        "with 256 (from initializer 'w' axis 0 of [256,10]) (A axis 1 against B axis 0) (shapes "
        "[2,512] and [256,10])");
  CHECK(bc[0].fix ==
        "input 'a' axis 1 must be 256 (or 1) for this node: e.g. --input-shape a=2x256");
  CHECK(bc[1].node == "/head/Gemm");
  CHECK(Contains(bc[1].message,
                 "inner dims differ: 512 (from input 'a' axis 1, declared as "
                 "[2,512]) with 300 (from initializer 'g' axis 1 of [10,300])"));
}

TEST_CASE("check dtypes: an Add of int32 and float16 names both producers and the Cast to fix") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("ids", kI64, {4});
  b.Input("h", kF16, {4});
  auto* c = b.Node("Cast", {"ids"}, {"ids32"}, "/cast");
  OnnxBuilder::AttrInt(c, "to", kI32);
  b.Node("Add", {"ids32", "h"}, {"sum"}, "/add");
  b.Node("Relu", {"h"}, {"r"}, "/relu");
  b.Output("sum", kF16, {4});
  b.Output("r", kF16, {4});
  check::Report r = Run(b.Write(dir));
  auto dt = WithCode(r, "dtype_mismatch");
  REQUIRE(dt.size() == 1);
  CHECK(dt[0].node == "/add");
  CHECK(dt[0].message ==
        "Add '/add' needs inputs of one type, but input 0 'ids32' is int32 (output of Cast "
        "'/cast'), input 1 'h' is float16 (graph input 'h')");
  CHECK(dt[0].fix == "change Cast '/cast' to=float16 (ONNX 10)");
  CHECK(JsonIssue(r, "dtype_mismatch", "/add")["fix"] == dt[0].fix);
  // The fp16 compute is noted as an island of 2 nodes (the Add and the Relu).
  auto half = WithCode(r, "half_float");
  REQUIRE(half.size() == 1);
  CHECK(half[0].severity == check::Severity::kInfo);
  CHECK(Contains(half[0].message, "2 node(s) compute in float16 in 1 island(s)"));
}

TEST_CASE("OpDef input slots: weights, scales, biases and same-dtype inputs") {
  const OpDef* conv = FindOp("Conv");
  REQUIRE(conv);
  CHECK(conv->weight_input == 1);
  CHECK(conv->weight_scale_input == -1);
  CHECK(conv->bias_input == 2);
  const OpDef* qconv = FindOp("QLinearConv");
  REQUIRE(qconv);
  CHECK(qconv->weight_input == 3);
  CHECK(qconv->weight_scale_input == 4);
  CHECK(qconv->bias_input == 8);
  const OpDef* qmm = FindOp("QLinearMatMul");
  REQUIRE(qmm);
  CHECK(qmm->weight_input == 3);
  CHECK(qmm->weight_scale_input == 4);
  const OpDef* gemm = FindOp("Gemm");
  REQUIRE(gemm);
  CHECK(gemm->weight_input == 1);
  CHECK(gemm->bias_input == 2);
  CHECK(FindOp("Relu")->weight_input == -1);

  // What `qfold check` kept as a list of names before the OpDefs said it
  // (BitwiseAnd/Or/Xor were listed too, but qfold has no such ops).
  const std::vector<std::string> all = {
      "Add",   "Sub",  "Mul",      "Div",         "Mod",
      "Equal", "Less", "Greater",  "LessOrEqual", "GreaterOrEqual",
      "Max",   "Min",  "Sum",      "Mean",        "And",
      "Or",    "Xor",  "BitShift", "Concat",      "MatMul",
      "PRelu"};
  for (const std::string& type : SupportedOps()) {
    INFO(type);
    const OpDef& d = *FindOp(type);
    // Weight slots exactly on the matrix products; scales only on integer ones.
    CHECK((d.weight_input >= 0) == ((d.traits & kTraitMatrixProduct) != 0));
    CHECK(d.weight_input < d.max_inputs);
    CHECK(d.bias_input < d.max_inputs);
    CHECK(d.weight_scale_input < d.max_inputs);
    if (d.weight_scale_input >= 0) CHECK((d.traits & kTraitIntegerKernel) != 0);
    if (d.bias_input >= 0) CHECK(d.weight_input >= 0);
    // Input 40: past the mask's bits, which kAllInputs still covers.
    const std::vector<size_t> probe = {0, 1, 2, 3, 40};
    std::vector<size_t> want;
    if (std::find(all.begin(), all.end(), type) != all.end())
      want = probe;
    else if (type == "Where")
      want = {1, 2};
    else if (type == "Gemm" || type == "Conv" || type == "ConvTranspose")
      want = {0, 1, 2};
    for (size_t i : probe)
      CHECK(SameDtypeInput(d, i) == (std::find(want.begin(), want.end(), i) != want.end()));
  }
  for (const char* gone : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) CHECK(FindOp(gone) == nullptr);
}

TEST_CASE("check dtypes: Where's X and Y, every Concat input; unsupported ops are not typed") {
  TempDir dir;
  OnnxBuilder b(18);
  b.Input("c", kBool, {4});
  b.Input("x", kF32, {4});
  b.Input("i", kI32, {4});
  b.Input("l", kI64, {4});
  b.Node("Where", {"c", "x", "i"}, {"w"}, "/where");
  b.Node("Where", {"c", "x", "x"}, {"ok"}, "/where_ok");  // the bool condition is not compared
  b.Node("Concat", {"x", "x", "i"}, {"cat"}, "/concat");
  b.Node("BitwiseAnd", {"i", "l"}, {"band"}, "/band");
  for (const char* o : {"w", "ok", "cat"}) b.Output(o, kF32, {-1});
  b.Output("band", kI32, {4});
  check::Report r = Run(b.Write(dir));
  auto dt = WithCode(r, "dtype_mismatch");
  REQUIRE(dt.size() == 2);
  CHECK(dt[0].node == "/where");
  CHECK(dt[0].message ==
        "Where '/where' needs inputs of one type, but input 1 'x' is float32 (graph input 'x'), "
        "input 2 'i' is int32 (graph input 'i')");
  CHECK(dt[1].node == "/concat");
  CHECK(Contains(dt[1].message, "input 2 'i' is int32"));
  auto un = WithCode(r, "unsupported_op");
  REQUIRE(un.size() == 1);
  CHECK(un[0].node == "/band");
}

TEST_CASE("check QDQ: output_dtype, scale shape and values, zero points, Q->DQ pairs") {
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("x", kF32, {1, 4, 2, 2});
  // Q with output_dtype int8 but a uint8 zero point.
  b.InitFloat("xs", {}, {0.02f});
  InitBytes(&b, "xz", kU8, {}, {128});
  auto* q = b.Node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "/q_in");
  OnnxBuilder::AttrInt(q, "output_dtype", kI8);
  // DQ reading it back with a different scale.
  b.InitFloat("xs2", {}, {0.04f});
  b.Node("DequantizeLinear", {"xq", "xs2", "xz"}, {"xd"}, "/dq_in");
  // Per-axis weight: 3 scales for 4 channels, and a zero and a negative scale.
  InitBytes(&b, "w", kI8, {4, 4, 1, 1}, std::vector<int32_t>(16, 1));
  b.InitFloat("ws", {3}, {0.1f, 0.f, -1.f});
  InitBytes(&b, "wz", kI8, {3}, {0, 0, 0});
  auto* dw = b.Node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "/dq_w");
  OnnxBuilder::AttrInt(dw, "axis", 0);
  // int32 bias with a nonzero zero point.
  InitBytes(&b, "bias", kI32, {4}, {1, 2, 3, 4});
  b.InitFloat("bs", {}, {0.002f});
  InitBytes(&b, "bz", kI32, {}, {5});
  b.Node("DequantizeLinear", {"bias", "bs", "bz"}, {"bd"}, "/dq_b");
  b.Node("Conv", {"xd", "wd", "bd"}, {"y"}, "/conv");
  b.Output("y", kF32, {1, 4, 2, 2});
  check::Report r = Run(b.Write(dir));

  auto od = WithCode(r, "qdq_output_dtype");
  REQUIRE(od.size() == 1);
  CHECK(od[0].node == "/q_in");
  CHECK(od[0].message ==
        "QuantizeLinear '/q_in': output_dtype is int8 (3) but zero point 'xz' is uint8; ONNX "
        "requires them to agree");
  auto sc = WithCode(r, "qdq_scale");
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].node == "/dq_w");
  CHECK(sc[0].message ==
        "DequantizeLinear '/dq_w': scale 'ws' has shape [3] but axis 0 of 'w' [4,4,1,1] has 4");
  CHECK(sc[1].message ==
        "DequantizeLinear '/dq_w': scale 'ws' has 2 non-positive or non-finite value(s): [1] = 0, "
        "[2] = -1");
  auto zp = WithCode(r, "qdq_zero_point");
  REQUIRE(zp.size() == 1);
  CHECK(zp[0].node == "/dq_b");
  CHECK(zp[0].message ==
        "DequantizeLinear '/dq_b': int32 zero point 'bz' is 5; int32 (bias) quantization has "
        "zero point 0");
  auto pair = WithCode(r, "qdq_pair_mismatch");
  REQUIRE(pair.size() == 1);
  CHECK(pair[0].severity == check::Severity::kWarning);
  CHECK(pair[0].node == "/dq_in");
  CHECK(pair[0].message ==
        "QuantizeLinear '/q_in' writes 'xq' with scale 0.02 and zero point 128, but "
        "DequantizeLinear '/dq_in' reads it with scale 0.04 and zero point 128");
  // bias scale 0.002 against 0.04 (the DQ's input scale) x 0.1 = 0.004 on channel 0.
  auto bias = WithCode(r, "bias_scale");
  REQUIRE(bias.size() == 1);
  CHECK(bias[0].node == "/conv");
  CHECK(Contains(bias[0].message,
                 "Conv '/conv': bias 'bias' is dequantized with scale 0.002 (channel 0), but input "
                 "scale 0.04 x weight scale 0.1 = 0.004 (3 of 3 channel(s) differ)"));
  CHECK(JsonIssue(r, "qdq_scale", "/dq_w")["tensor"] == "ws");
}

TEST_CASE("check QDQ: a ConvTranspose bias is checked against its slots like a Conv's") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 2, 3, 3});
  b.InitFloat("xs", {}, {0.02f});
  InitBytes(&b, "xz", kI8, {}, {0});
  b.Node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "/q_x");
  b.Node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "/dq_x");
  InitBytes(&b, "w", kI8, {2, 2, 1, 1}, {1, 2, 3, 4});
  b.InitFloat("ws", {}, {0.1f});
  InitBytes(&b, "wz", kI8, {}, {0});
  b.Node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}, "/dq_w");
  // Scale 0.004 where the accumulator's is 0.02 x 0.1 = 0.002.
  InitBytes(&b, "bias", kI32, {2}, {1, 2});
  b.InitFloat("bs", {}, {0.004f});
  InitBytes(&b, "bz", kI32, {}, {0});
  b.Node("DequantizeLinear", {"bias", "bs", "bz"}, {"bd"}, "/dq_b");
  b.Node("ConvTranspose", {"xd", "wd", "bd"}, {"y"}, "/deconv");
  b.Output("y", kF32, {1, 2, 3, 3});
  check::Report r = Run(b.Write(dir));
  auto bias = WithCode(r, "bias_scale");
  REQUIRE(bias.size() == 1);
  CHECK(bias[0].node == "/deconv");
  CHECK(Contains(bias[0].message,
                 "ConvTranspose '/deconv': bias 'bias' is dequantized with scale 0.004, but input "
                 "scale 0.02 x weight scale 0.1 = 0.002 (1 of 1 channel(s) differ)"));
}

// x -> Q -> DQ -> Conv(DQ(w), DQ(bias)) -> Q -> DQ, per-channel weights.
void QdqConv(OnnxBuilder* b, const std::string& in, const std::string& p,
             bool out_is_graph_output) {
  b->InitFloat(p + "xs", {}, {0.02f});
  InitBytes(b, p + "xz", kI8, {}, {0});
  b->Node("QuantizeLinear", {in, p + "xs", p + "xz"}, {p + "xq"}, p + "q_x");
  b->Node("DequantizeLinear", {p + "xq", p + "xs", p + "xz"}, {p + "xd"}, p + "dq_x");
  InitBytes(b, p + "w", kI8, {2, 2, 1, 1}, {1, 2, 3, 4});
  b->InitFloat(p + "ws", {2}, {0.1f, 0.2f});
  InitBytes(b, p + "wz", kI8, {2}, {0, 0});
  auto* dw = b->Node("DequantizeLinear", {p + "w", p + "ws", p + "wz"}, {p + "wd"}, p + "dq_w");
  OnnxBuilder::AttrInt(dw, "axis", 0);
  b->Node("Conv", {p + "xd", p + "wd"}, {p + "y"}, p + "conv");
  b->InitFloat(p + "ys", {}, {0.05f});
  InitBytes(b, p + "yz", kI8, {}, {0});
  b->Node("QuantizeLinear", {p + "y", p + "ys", p + "yz"}, {p + "yq"}, p + "q_y");
  b->Node("DequantizeLinear", {p + "yq", p + "ys", p + "yz"}, {p + "out"}, p + "dq_y");
  if (out_is_graph_output) b->Output(p + "y", kF32, {1, 2, 3, 3});
}

TEST_CASE("check quantization coverage: a Conv output that is also a graph output") {
  // The Conv whose float output is a graph output runs integer too, with a float
  // epilogue (QfConvDequant), so nothing stays float.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 2, 3, 3});
  QdqConv(&b, "x", "a_", false);
  QdqConv(&b, "a_out", "b_", true);
  b.Output("b_out", kF32, {1, 2, 3, 3});
  check::Report r = Run(b.Write(dir));
  auto cov = WithCode(r, "quant_coverage");
  REQUIRE(cov.size() == 1);
  CHECK(cov[0].severity == check::Severity::kInfo);
  CHECK(cov[0].message ==
        "2 Conv/MatMul/Gemm: 2 per-channel, 0 per-tensor, 0 blocked, 0 float, 2 fold into "
        "integer kernels");
  nlohmann::json j = nlohmann::json::parse(check::ReportJson(r));
  CHECK(j["quantization"]["per_channel"] == 2);
  CHECK(j["quantization"]["folded"] == 2);
  CHECK(j["quantization"]["ops"][0]["node"] == "a_conv");
  CHECK(j["quantization"]["ops"][0]["folded"] == true);
  CHECK(j["quantization"]["ops"][1]["folded"] == true);
  CHECK(check::ExitCode(r, true) == 0);
}

TEST_CASE(
    "check per_channel_lost: one integer weight, per-channel in one DQ, per-tensor in another") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 2, 3, 3});
  InitBytes(&b, "w", kI8, {2, 2, 1, 1}, {1, 2, 3, 4});
  b.InitFloat("ws", {2}, {0.1f, 0.2f});
  b.InitFloat("ws1", {}, {0.2f});
  auto* d1 = b.Node("DequantizeLinear", {"w", "ws"}, {"w1"}, "/dq_pc");
  OnnxBuilder::AttrInt(d1, "axis", 0);
  b.Node("DequantizeLinear", {"w", "ws1"}, {"w2"}, "/dq_pt");
  b.Node("Conv", {"x", "w1"}, {"y1"}, "/c1");
  b.Node("Conv", {"x", "w2"}, {"y2"}, "/c2");
  b.Output("y1", kF32, {1, 2, 3, 3});
  b.Output("y2", kF32, {1, 2, 3, 3});
  check::Report r = Run(b.Write(dir));
  auto lost = WithCode(r, "per_channel_lost");
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].node == "/dq_pt");
  CHECK(lost[0].tensor == "w");
  CHECK(lost[0].message ==
        "weight 'w' is quantized per-channel by DequantizeLinear '/dq_pc' but per-tensor by "
        "DequantizeLinear '/dq_pt': the consumers of the latter lose per-channel precision");
}

TEST_CASE("check layout: a batch/channel swap and a channels-last input, from --input-shape") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("images", kF32, {-1, 3, 8, 8});
  b.InitFloat("w", {4, 3, 3, 3}, std::vector<float>(108, 0.1f));
  b.Node("Conv", {"images", "w"}, {"y"}, "/conv1");
  b.Output("y", kF32, {-1, 4, 6, 6});
  const std::string path = b.Write(dir);
  check::CheckOptions o;
  o.input_shapes["images"] = {3, 1, 416, 416};
  check::Report r = Run(path, o);
  auto lay = WithCode(r, "layout_permuted");
  REQUIRE(lay.size() == 1);
  CHECK(lay[0].node == "/conv1");
  CHECK(lay[0].tensor == "images");
  CHECK(lay[0].message ==
        "Conv '/conv1' needs 3 input channels at axis 1 (weight 'w' [4,3,3,3]), but input "
        "'images' given as [3,1,416,416] has 1 there and 3 at axis 0: axes 0 and 1 look swapped");
  CHECK(lay[0].fix == "feed 'images' as [1,3,416,416] (--input-shape images=1x3x416x416)");

  o.input_shapes["images"] = {1, 416, 416, 3};
  r = Run(path, o);
  lay = WithCode(r, "layout_permuted");
  REQUIRE(lay.size() == 1);
  CHECK(Contains(lay[0].message,
                 "has 416 there and 3 at axis 3: it looks channels-last (NHWC) "
                 "while the model wants channels-first (NCHW)"));
  CHECK(lay[0].fix == "feed 'images' as [1,3,416,416] (--input-shape images=1x3x416x416)");
  CHECK(JsonIssue(r, "layout_permuted", "/conv1")["op_type"] == "Conv");
}

TEST_CASE("check unsupported operators: every node at once, by name and op type") {
  TempDir dir;
  OnnxBuilder b(17);
  b.AddOpset("com.example", 1);
  b.Input("x", kF32, {4});
  b.Node("FancyOp", {"x"}, {"a"}, "/fancy");
  b.Node("MyOp", {"x"}, {"c"}, "/mine", "com.example");
  b.Node("Relu", {"x"}, {"d"}, "/relu");
  b.Output("a", kF32, {4});
  b.Output("c", kF32, {4});
  b.Output("d", kF32, {4});
  check::Report r = Run(b.Write(dir));
  auto un = WithCode(r, "unsupported_op");
  REQUIRE(un.size() == 2);
  CHECK(un[0].node == "/fancy");
  CHECK(un[0].op_type == "FancyOp");
  CHECK(un[0].message == "FancyOp '/fancy': operator FancyOp is not supported by qfold");
  CHECK(un[1].node == "/mine");
  CHECK(un[1].message == "MyOp '/mine': operator com.example.MyOp is not supported by qfold");
}

TEST_CASE("check data: names, shapes and dtypes against the model's inputs") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {1, 3, 4, 4});
  b.Input("mask", kI64, {-1, 4}, "B");
  b.Node("Relu", {"x"}, {"y"}, "/relu");
  b.Node("Neg", {"mask"}, {"m"}, "/neg");
  b.Output("y", kF32, {1, 3, 4, 4});
  b.Output("m", kI64, {-1, 4}, "B");
  check::CheckOptions o;
  o.data.push_back({"x", DType::kFloat32, {2, 3, 4, 4}, "calib.npz: x"});
  o.data.push_back({"mask", DType::kInt32, {5, 4}, "calib.npz: mask"});
  o.data.push_back({"tokens", DType::kInt64, {5}, "calib.npz: tokens"});
  check::Report r = Run(b.Write(dir), o);
  auto dm = WithCode(r, "data_mismatch");
  REQUIRE(dm.size() == 3);
  CHECK(dm[0].tensor == "x");
  CHECK(dm[0].message ==
        "data 'calib.npz: x' has shape [2,3,4,4] but input 'x' is fixed at [1,3,4,4]: dim 0 is 2, "
        "the model fixes it at 1");
  CHECK(dm[0].fix ==
        "feed batches of 1 (split the data), or export the model with a dynamic "
        "batch dim");
  CHECK(dm[1].message == "data 'calib.npz: mask' is int32 but input 'mask' is int64");
  CHECK(dm[2].message ==
        "data 'calib.npz: tokens' is named 'tokens', which is not an input of the model (inputs: "
        "'x', 'mask')");
  nlohmann::json j = nlohmann::json::parse(check::ReportJson(r));
  CHECK(j["summary"]["errors"] == 3);
}

TEST_CASE("check external data: a missing file is an error naming the tensor") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {4});
  onnx::TensorProto* t = b.graph()->add_initializer();
  t->set_name("big_weight");
  t->set_data_type(kF32);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  b.Node("Add", {"x", "big_weight"}, {"y"}, "/add");
  b.Output("y", kF32, {4});
  check::Report r = Run(b.Write(dir));
  auto ex = WithCode(r, "external_data");
  REQUIRE(ex.size() == 1);
  CHECK(ex[0].tensor == "big_weight");
  CHECK(Contains(ex[0].message,
                 "external data file '" + dir.path() + "/weights.bin' does not exist"));

  // Present but too short: the range is reported.
  WriteBytes(dir.File("weights.bin"), std::string(8, '\0'));
  r = Run(b.Write(dir));
  ex = WithCode(r, "external_data");
  REQUIRE(ex.size() == 1);
  CHECK(ex[0].tensor == "big_weight");
  CHECK(Contains(ex[0].message, "external data range [0, +16) is outside 'weights.bin' (8 bytes)"));
}

TEST_CASE("check report text: grouped by severity, colour only when asked") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("x", kF32, {2});
  b.InitFloat("c", {3}, {1, 2, 3});
  b.Node("Add", {"x", "c"}, {"y"}, "/add");
  b.Output("y", kF32, {2});
  check::Report r = Run(b.Write(dir));
  std::string plain = check::ReportText(r, false);
  CHECK(Contains(plain, ": 1 error, 0 warnings, 0 infos\n"));
  CHECK(Contains(plain, "errors:\n  error [broadcast] Add '/add': cannot broadcast 2"));
  CHECK(!Contains(plain, "\033["));
  CHECK(Contains(check::ReportText(r, true), "\033[1;31merror"));
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
