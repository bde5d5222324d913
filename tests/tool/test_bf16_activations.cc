// bf16 mode stores activations as bfloat16 between the operators that read
// and write them so (Session::Impl::PlanBf16Storage, OpDef::bf16_io): which
// tensors it picks (never a graph input or output, never one an fp32-only
// operator reads), that the arena shrinks, that outputs stay within bf16's
// bound of fp32 mode's and identical at 1 and 2 threads, and that a re-plan
// for another input shape picks them again. Skipped where bf16 mode takes no
// bf16 kernels (no AVX-512 BF16; Intel without AMX-BF16).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/qfm_writer.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

void AddConv(OnnxBuilder& b, std::mt19937& rng, const std::string& name, const std::string& x,
             const std::string& y, int64_t c, int64_t m, int64_t k) {
  std::normal_distribution<float> n(0.f, 1.f / std::sqrt(float(c * k * k)));
  std::vector<float> w(static_cast<size_t>(m * c * k * k)), bias(static_cast<size_t>(m));
  for (float& v : w) v = n(rng);
  for (float& v : bias) v = n(rng);
  b.InitFloat(name + "_w", {m, c, k, k}, w);
  b.InitFloat(name + "_b", {m}, bias);
  auto* node = b.Node("Conv", {x, name + "_w", name + "_b"}, {y}, name);
  const int64_t p = k / 2;
  OnnxBuilder::AttrInts(node, "pads", {p, p, p, p});
}

// X [1, 40, H, W] -> conv_a 3x3 -> relu -> A; conv_b 1x1 (A) + A -> relu ->
// R (a residual block: the converter folds Add and Relu into conv_b);
// conv_c 3x3 (R) -> C, read by conv_d and by Sigmoid (fp32 only: C stays
// float32); conv_d 1x1 48 -> 32 -> D; MaxPool 3x3 (D) -> P; conv_e 3x3 (P)
// -> Y; Sigmoid(C) -> S. Stored as bf16: A (conv_b reads it twice, as X and
// as the residual), R, D, P.
// With `size` 0 the image is square of any size ("S"): the converter then
// cannot prove the Add's operands equal in shape and keeps Add and Relu, so
// only D and P are stored as bf16 (Add and Relu read and write float32).
std::string BuildModel(const TempDir& dir, int64_t size) {
  std::mt19937 rng(7);
  OnnxBuilder b(17);
  const int64_t s = size > 0 ? size : -1;
  b.Input("X", kFloat, {1, 40, s, s}, "S");
  b.Output("Y", kFloat, {1, 24, s, s}, "S");
  b.Output("S", kFloat, {1, 48, s, s}, "S");
  AddConv(b, rng, "conv_a", "X", "a0", 40, 64, 3);
  b.Node("Relu", {"a0"}, {"A"}, "relu_a");
  AddConv(b, rng, "conv_b", "A", "b0", 64, 64, 1);
  b.Node("Add", {"b0", "A"}, {"b1"}, "add_b");
  b.Node("Relu", {"b1"}, {"R"}, "relu_b");
  AddConv(b, rng, "conv_c", "R", "C", 64, 48, 3);
  AddConv(b, rng, "conv_d", "C", "D", 48, 32, 1);
  auto* pool = b.Node("MaxPool", {"D"}, {"P"}, "pool");
  OnnxBuilder::AttrInts(pool, "kernel_shape", {3, 3});
  OnnxBuilder::AttrInts(pool, "pads", {1, 1, 1, 1});
  AddConv(b, rng, "conv_e", "P", "Y", 32, 24, 3);
  b.Node("Sigmoid", {"C"}, {"S"}, "sigmoid");
  return b.Write(dir, "bf16_activations_" + std::to_string(size) + ".onnx");
}

std::vector<float> Input(int64_t n, int seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> u(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  return x;
}

struct Outputs {
  std::vector<float> y, s;
};

Outputs Run(Session* s, int64_t h, int64_t w, bool resize = false) {
  if (resize) REQUIRE(s->ResizeInput("X", {1, 40, h, w}).ok());
  SetFloatInput(s, "X", {1, 40, h, w}, Input(40 * h * w, 3));
  const Status st = s->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  return {FloatOutput(*s, "Y", {1, 24, h, w}), FloatOutput(*s, "S", {1, 48, h, w})};
}

// bf16 rounds every product's operands (2^-8 relative each) and the stored
// residual: per layer a few 2^-8 of the sums' magnitude. Five layers deep,
// against fp32 mode: within 1/16 of the output's largest magnitude, cosine
// 0.999 and above.
void CheckNear(const std::vector<float>& got, const std::vector<float>& want) {
  double dot = 0, g2 = 0, w2 = 0, max_err = 0, max_mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    dot += double(got[i]) * want[i];
    g2 += double(got[i]) * got[i];
    w2 += double(want[i]) * want[i];
    max_err = std::max(max_err, std::fabs(double(got[i]) - want[i]));
    max_mag = std::max(max_mag, std::fabs(double(want[i])));
  }
  CHECK(dot / std::sqrt(g2 * w2) > 0.999);
  CHECK(max_err <= max_mag / 16);
}

TEST_CASE("bf16 mode: activations between bf16 convolutions are stored as bfloat16") {
  TempDir dir;
  SessionOptions fp32, bf16, bf16_2t;
  bf16.precision = bf16_2t.precision = SessionOptions::Precision::kBfloat16;
  bf16_2t.num_threads = 2;
  Converted c;
  Status st = ConvertAndOpen(BuildModel(dir, 20), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::unique_ptr<Session> s32, s16, s16_2t;
  REQUIRE(Session::Create(c.model, fp32, &s32).ok());
  REQUIRE(Session::Create(c.model, bf16, &s16).ok());
  REQUIRE(Session::Create(c.model, bf16_2t, &s16_2t).ok());
  if (s16->kernels().find("conv_nhwc_bf16") == std::string::npos) {
    MESSAGE(
        "no bf16 kernels chosen here (no AVX-512 BF16, or Intel without AMX-BF16): "
        "bf16 mode changes nothing, not tested");
    return;
  }
  const Outputs want = Run(s32.get(), 20, 20);
  const Outputs got = Run(s16.get(), 20, 20);
  const Outputs got_2t = Run(s16_2t.get(), 20, 20);
  CHECK(s32->bf16_activations() == 0);
  CHECK(s16->bf16_activations() == 4);
  CHECK(s16_2t->bf16_activations() == 4);
  CHECK(s16->arena_bytes() < s32->arena_bytes());
  CheckNear(got.y, want.y);
  CheckNear(got.s, want.s);
  CHECK(got.y == got_2t.y);
  CHECK(got.s == got_2t.s);

  // Each input size re-plans and picks again.
  Converted d;
  st = ConvertAndOpen(BuildModel(dir, 0), ConvertOptions(), &d);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(Session::Create(d.model, fp32, &s32).ok());
  REQUIRE(Session::Create(d.model, bf16, &s16).ok());
  for (int64_t size : {20, 11, 33}) {
    CAPTURE(size);
    const Outputs want2 = Run(s32.get(), size, size, true);
    const Outputs got2 = Run(s16.get(), size, size, true);
    CHECK(s16->bf16_activations() == 2);
    CheckNear(got2.y, want2.y);
    CheckNear(got2.s, want2.s);
  }
}

// X [1, 16, 12, 12] -> conv_a -> A, conv_b -> B; Concat(A, B or Abs(B))
// on channels -> C -> conv_c -> Y. A Concat stores its inputs and output as
// bf16 together or not at all: with Abs (fp32 only) feeding it, none of
// A, C is stored so although each alone could be. (A Sigmoid would be fused
// into conv_b, whose bf16 output it then precedes.)
std::string BuildConcatModel(const TempDir& dir, bool float_only) {
  std::mt19937 rng(11);
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 16, 12, 12});
  b.Output("Y", kFloat, {1, 8, 12, 12});
  AddConv(b, rng, "conv_a", "X", "A", 16, 32, 3);
  AddConv(b, rng, "conv_b", "X", "B", 16, 24, 1);
  // Abs: an elementwise op that stays float32 (and is not fused into conv_b).
  if (float_only) b.Node("Abs", {"B"}, {"BS"}, "abs");
  auto* cat = b.Node("Concat", {"A", float_only ? "BS" : "B"}, {"C"}, "concat");
  OnnxBuilder::AttrInt(cat, "axis", 1);
  AddConv(b, rng, "conv_c", "C", "Y", 56, 8, 3);
  return b.Write(dir, std::string("bf16_concat_") + (float_only ? "s" : "p") + ".onnx");
}

// Converts `onnx_path` into *c and opens an fp32-mode and a bf16-mode session
// on it; false (with a message) where bf16 mode takes no bf16 kernels, so it
// changes nothing.
bool OpenBothModes(const std::string& onnx_path, Converted* c, std::unique_ptr<Session>* s32,
                   std::unique_ptr<Session>* s16) {
  const Status st = ConvertAndOpen(onnx_path, ConvertOptions(), c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SessionOptions bf16;
  bf16.precision = SessionOptions::Precision::kBfloat16;
  REQUIRE(Session::Create(c->model, SessionOptions(), s32).ok());
  REQUIRE(Session::Create(c->model, bf16, s16).ok());
  if ((*s16)->kernels().find("conv_nhwc_bf16") != std::string::npos) return true;
  MESSAGE(
      "no bf16 kernels chosen here (no AVX-512 BF16, or Intel without AMX-BF16): "
      "bf16 mode changes nothing, not tested");
  return false;
}

TEST_CASE("bf16 mode: a Concat's inputs and output are stored as bfloat16 together or not at all") {
  TempDir dir;
  for (bool float_only : {false, true}) {
    CAPTURE(float_only);
    Converted c;
    std::unique_ptr<Session> s32, s16;
    if (!OpenBothModes(BuildConcatModel(dir, float_only), &c, &s32, &s16)) return;
    std::vector<std::vector<float>> outs;
    for (Session* s : {s32.get(), s16.get()}) {
      SetFloatInput(s, "X", {1, 16, 12, 12}, Input(16 * 12 * 12, 5));
      const Status st = s->Run();
      REQUIRE_MESSAGE(st.ok(), st.message());
      outs.push_back(FloatOutput(*s, "Y", {1, 8, 12, 12}));
    }
    CHECK(s16->bf16_activations() == (float_only ? 0u : 3u));  // A, B, C
    CheckNear(outs[1], outs[0]);
  }
}

// X [1, 16, 12, 12] -> conv_a -> A, read by Sigmoid (fp32 only: A stays
// float32), by BatchNormalization + Relu -> B -> conv_b -> Y1 and by MaxPool
// -> P -> conv_c -> Y2. BatchNormalization reads float32 and writes bf16 (B
// is stored so); MaxPool moves one dtype, so P stays float32 with A.
std::string BuildMixedModel(const TempDir& dir) {
  std::mt19937 rng(13);
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 16, 12, 12});
  b.Output("S", kFloat, {1, 32, 12, 12});
  b.Output("Y1", kFloat, {1, 8, 12, 12});
  b.Output("Y2", kFloat, {1, 8, 6, 6});
  AddConv(b, rng, "conv_a", "X", "A", 16, 32, 3);
  b.Node("Sigmoid", {"A"}, {"S"}, "sigmoid");
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> scale(32), bias(32), mean(32), var(32);
  for (size_t i = 0; i < 32; ++i) {
    scale[i] = u(rng), bias[i] = u(rng) - 1.f, mean[i] = u(rng) - 1.f, var[i] = u(rng);
  }
  b.InitFloat("bn_s", {32}, scale);
  b.InitFloat("bn_b", {32}, bias);
  b.InitFloat("bn_m", {32}, mean);
  b.InitFloat("bn_v", {32}, var);
  b.Node("BatchNormalization", {"A", "bn_s", "bn_b", "bn_m", "bn_v"}, {"B0"}, "bn");
  b.Node("Relu", {"B0"}, {"B"}, "relu");
  AddConv(b, rng, "conv_b", "B", "Y1", 32, 8, 3);
  auto* pool = b.Node("MaxPool", {"A"}, {"P"}, "pool");
  OnnxBuilder::AttrInts(pool, "kernel_shape", {2, 2});
  OnnxBuilder::AttrInts(pool, "strides", {2, 2});
  AddConv(b, rng, "conv_c", "P", "Y2", 32, 8, 3);
  return b.Write(dir, "bf16_mixed.onnx");
}

TEST_CASE("bf16 mode: an op may read float32 and write bfloat16 unless its slots are tied") {
  TempDir dir;
  Converted c;
  std::unique_ptr<Session> s32, s16;
  if (!OpenBothModes(BuildMixedModel(dir), &c, &s32, &s16)) return;
  std::vector<std::vector<float>> y1, y2;
  for (Session* s : {s32.get(), s16.get()}) {
    SetFloatInput(s, "X", {1, 16, 12, 12}, Input(16 * 12 * 12, 9));
    const Status st = s->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    y1.push_back(FloatOutput(*s, "Y1", {1, 8, 12, 12}));
    y2.push_back(FloatOutput(*s, "Y2", {1, 8, 6, 6}));
  }
  CHECK(s16->bf16_activations() == 1);  // B
  CheckNear(y1[1], y1[0]);
  CheckNear(y2[1], y2[0]);
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
