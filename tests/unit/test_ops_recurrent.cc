// LSTM, GRU and RNN (ops/recurrent.cc): a hand-computed linear RNN, the
// packed-GEMM + vmath path at every ISA level this CPU supports against the
// reference level (plain loops and libm) on random shapes across the GEMM
// tile edges, 1 and 2 threads bit for bit (bidirectional layers then run
// their directions side by side), and bad attributes/shapes.
// tests/e2e/compare_recurrent.py checks every attribute against ONNX Runtime.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/cpu_features.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;
using TensorPtr = std::shared_ptr<OwnedTensor>;

TEST_CASE("ops: RNN with an identity activation matches the hand-computed recurrence") {
  // H_t = 2 x_t + 0.5 H_{t-1} + 1 (Affine alpha 1, beta 0), x = 1, 2, 3, H_0 = 0:
  // forward 3, 6.5, 10.25; reverse (t = 2, 1, 0) 7, 8.5, 7.25.
  for (Isa isa : kernels::SupportedIsas()) {
    CAPTURE(kernels::IsaName(isa));
    AttrMap a;
    a.SetInt("hidden_size", 1);
    a.SetString("direction", "bidirectional");
    a.SetString("activations", "Affine,Affine");
    a.SetFloats("activation_alpha", {1.f, 1.f});
    a.SetFloats("activation_beta", {0.f, 0.f});
    OpRun r = RunOp("RNN",
                    {F32({3, 1, 1}, {1, 2, 3}), F32({2, 1, 1}, {2, 2}),
                     F32({2, 1, 1}, {0.5f, 0.5f}), F32({2, 2}, {1, 0, 1, 0})},
                    a, 2, 1, &IsaConfig(isa));
    REQUIRE_MESSAGE(r.status.ok(), r.status.message());
    CHECK(r.shape(0) == Shape{3, 2, 1, 1});
    // Y[t][dir]: forward and reverse values side by side.
    CHECK(r.values<float>(0) == std::vector<float>{3.f, 7.25f, 6.5f, 8.5f, 10.25f, 7.f});
    CHECK(r.values<float>(1) == std::vector<float>{10.25f, 7.25f});
  }
}

std::vector<float> Random(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST_CASE("ops: LSTM/GRU/RNN at every ISA level agree with the reference level") {
  std::mt19937 rng(14);
  const char* ops[] = {"LSTM", "GRU", "RNN"};
  for (int c = 0; c < 42; ++c) {
    const std::string op = ops[c % 3];
    const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    // From c = 36: bidirectional layers large enough that two threads run
    // their directions side by side (ParallelDirections).
    const bool big = c >= 36;
    const int64_t T = big ? 12 + c % 4 * 5 : 1 + c % 5, B = big ? 1 + c % 3 : 1 + c % 7;
    const int64_t I = big ? 40 : c % 2 ? 17 : 6, H = big ? 33 : c % 4 < 2 ? 17 : 8;
    const int64_t D = big || c % 6 >= 3 ? 2 : 1;
    const bool layout1 = c % 5 == 2;
    AttrMap a;
    a.SetInt("hidden_size", H);
    a.SetString("direction", D == 2 ? "bidirectional" : c % 2 ? "reverse" : "forward");
    a.SetInt("layout", layout1 ? 1 : 0);
    if (c % 4 == 3) a.SetFloat("clip", 1.5f);
    if (op == "GRU") a.SetInt("linear_before_reset", c % 2);
    if (op == "LSTM") a.SetInt("input_forget", c % 8 == 4 ? 1 : 0);
    const Shape xs = layout1 ? Shape{B, T, I} : Shape{T, B, I};
    const Shape ss = layout1 ? Shape{B, D, H} : Shape{D, B, H};
    std::vector<TensorPtr> in = {
        F32(xs, Random(rng, T * B * I, -2, 2)),
        F32({D, gates * H, I}, Random(rng, D * gates * H * I, -0.4f, 0.4f)),
        F32({D, gates * H, H}, Random(rng, D * gates * H * H, -0.4f, 0.4f)),
        F32({D, 2 * gates * H}, Random(rng, D * 2 * gates * H, -0.5f, 0.5f))};
    std::vector<int32_t> lens;
    for (int64_t b = 0; b < B; ++b) lens.push_back(int32_t(b == 0 ? T : (b * 7 + c) % (T + 1)));
    in.push_back(c % 3 == 1 ? Make<int32_t>(DType::kInt32, {B}, lens) : nullptr);
    in.push_back(F32(ss, Random(rng, D * B * H, -1, 1)));
    int outs = 2;
    if (op == "LSTM") {
      in.push_back(F32(ss, Random(rng, D * B * H, -1, 1)));
      in.push_back(F32({D, 3 * H}, Random(rng, D * 3 * H, -0.5f, 0.5f)));
      outs = 3;
    }
    CAPTURE(op);
    CAPTURE(c);
    OpRun ref = RunOp(op, in, a, outs, 1, &IsaConfig(Isa::kReference));
    REQUIRE_MESSAGE(ref.status.ok(), ref.status.message());
    OpRun ref2 = RunOp(op, in, a, outs, 2, &IsaConfig(Isa::kReference));
    REQUIRE_MESSAGE(ref2.status.ok(), ref2.status.message());
    for (int o = 0; o < outs; ++o) CHECK(ref.values<float>(o) == ref2.values<float>(o));
    for (Isa isa : kernels::SupportedIsas()) {
      if (isa == Isa::kReference) continue;
      CAPTURE(kernels::IsaName(isa));
      OpRun one = RunOp(op, in, a, outs, 1, &IsaConfig(isa));
      OpRun two = RunOp(op, in, a, outs, 2, &IsaConfig(isa));
      REQUIRE(one.status.ok());
      REQUIRE(two.status.ok());
      for (int o = 0; o < outs; ++o) {
        const std::vector<float> r = ref.values<float>(o), x = one.values<float>(o);
        CHECK(one.values<float>(o) == two.values<float>(o));
        float worst = 0.f;
        for (size_t i = 0; i < r.size(); ++i) worst = std::max(worst, std::fabs(r[i] - x[i]));
        // Values are O(1): GEMM summation order and the documented vmath error only.
        CHECK(worst <= 2e-6f);
      }
    }
  }
}

TEST_CASE("ops: recurrent bad attributes and shapes name the node and the problem") {
  AttrMap a;
  a.SetInt("hidden_size", 2);
  auto x = F32({1, 1, 3}, {1, 2, 3});
  auto w = F32({1, 8, 3}, std::vector<float>(24, 0.1f));
  auto r = F32({1, 8, 2}, std::vector<float>(16, 0.1f));
  OpRun ok = RunOp("LSTM", {x, w, r}, a, 3);
  REQUIRE_MESSAGE(ok.status.ok(), ok.status.message());

  AttrMap bad_act = a;
  bad_act.SetString("activations", "Sigmoid,Tanh,Swish");
  OpRun e1 = RunOp("LSTM", {x, w, r}, bad_act, 3);
  CHECK(e1.status.code() == StatusCode::kUnsupported);
  CHECK(e1.status.message().find("LSTM 'test'") != std::string::npos);
  CHECK(e1.status.message().find("Swish") != std::string::npos);

  AttrMap two_acts = a;
  two_acts.SetString("activations", "Sigmoid,Tanh");
  CHECK(RunOp("LSTM", {x, w, r}, two_acts, 3).status.code() == StatusCode::kInvalidModel);

  // R for hidden size 3 while hidden_size says 2.
  OpRun e2 = RunOp("LSTM", {x, w, F32({1, 8, 3}, std::vector<float>(24, 0.f))}, a, 3);
  CHECK(e2.status.code() == StatusCode::kInvalidModel);
  CHECK(e2.status.message().find("R has shape") != std::string::npos);

  AttrMap dir = a;
  dir.SetString("direction", "sideways");
  CHECK(RunOp("GRU",
              {x, F32({1, 6, 3}, std::vector<float>(18, 0.f)),
               F32({1, 6, 2}, std::vector<float>(12, 0.f))},
              dir, 2)
            .status.code() == StatusCode::kInvalidModel);

  // sequence_lens beyond the sequence.
  OpRun e3 = RunOp(
      "RNN",
      {x, F32({1, 2, 3}, std::vector<float>(6, 0.f)), F32({1, 2, 2}, std::vector<float>(4, 0.f)),
       nullptr, Make<int32_t>(DType::kInt32, {1}, {5})},
      a, 2);
  CHECK(e3.status.code() == StatusCode::kInvalidModel);
  CHECK(e3.status.message().find("sequence_lens[0] = 5") != std::string::npos);
}

}  // namespace
}  // namespace test
}  // namespace qfold
