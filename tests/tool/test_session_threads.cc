// Sessions with their own thread pools: two 2-thread sessions of one model,
// run at the same time from two threads, give the bytes a 1-thread session
// gives for the same inputs, and sessions are destroyed cleanly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "converter/qfm_writer.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int64_t kC = 16, kM = 32, kH = 48, kW = 48;

// Conv 3x3 (large enough to split between threads) -> Relu -> Transpose to
// channels-last (also split), on a float model, converted into *c: the model
// reads the .qfm bytes c owns, so c must outlive every session.
void BuildModel(const TempDir& dir, Converted* c) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, kC, kH, kW});
  b.Output("Y", kFloat, {1, kH, kW, kM});
  std::vector<float> w(static_cast<size_t>(kM * kC * 9)), bias(static_cast<size_t>(kM));
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  b.InitFloat("W", {kM, kC, 3, 3}, w);
  b.InitFloat("B", {kM}, bias);
  auto* conv = b.Node("Conv", {"X", "W", "B"}, {"C"}, "conv");
  OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"C"}, {"R"}, "relu");
  auto* tr = b.Node("Transpose", {"R"}, {"Y"}, "to_nhwc");
  OnnxBuilder::AttrInts(tr, "perm", {0, 2, 3, 1});
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), c);
  REQUIRE_MESSAGE(st.ok(), st.message());
}

std::vector<float> Input(int seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(static_cast<size_t>(kC * kH * kW));
  for (float& v : x) v = u(rng);
  return x;
}

std::vector<float> RunOnce(Session* s, int seed) {
  SetFloatInput(s, "X", {1, kC, kH, kW}, Input(seed));
  const Status st = s->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  return FloatOutput(*s, "Y", {1, kH, kW, kM});
}

TEST_CASE("sessions: each owns its threads; two run at once and match one thread bit for bit") {
  TempDir dir;
  Converted converted;
  BuildModel(dir, &converted);
  const std::shared_ptr<Model> model = converted.model;
  SessionOptions one, two;
  two.num_threads = 2;
  std::unique_ptr<Session> s1, a, b;
  REQUIRE(Session::Create(model, one, &s1).ok());
  REQUIRE(Session::Create(model, two, &a).ok());
  REQUIRE(Session::Create(model, two, &b).ok());
  constexpr int kRuns = 12;
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kRuns; ++i) want.push_back(RunOnce(s1.get(), i));
  // doctest's checks are not thread-safe: the threads only record outputs.
  std::vector<std::vector<float>> got_a(kRuns), got_b(kRuns);
  std::vector<Status> err_a(kRuns), err_b(kRuns);
  auto drive = [&](Session* s, std::vector<std::vector<float>>* got, std::vector<Status>* err) {
    for (int i = 0; i < kRuns; ++i) {
      const std::vector<float> x = Input(i);
      Status st = s->SetInput("X", DType::kFloat32, {1, kC, kH, kW}, x.data(), x.size() * 4);
      if (st.ok()) st = s->Run();
      DType dt;
      Shape shape;
      const void* data = nullptr;
      if (st.ok()) st = s->GetOutput("Y", &dt, &shape, &data);
      (*err)[size_t(i)] = st;
      if (!st.ok()) continue;
      const float* f = static_cast<const float*>(data);
      (*got)[size_t(i)].assign(f, f + kH * kW * kM);
    }
  };
  std::thread ta(drive, a.get(), &got_a, &err_a), tb(drive, b.get(), &got_b, &err_b);
  ta.join();
  tb.join();
  for (int i = 0; i < kRuns; ++i) {
    CAPTURE(i);
    REQUIRE_MESSAGE(err_a[size_t(i)].ok(), err_a[size_t(i)].message());
    REQUIRE_MESSAGE(err_b[size_t(i)].ok(), err_b[size_t(i)].message());
    const size_t bytes = want[size_t(i)].size() * 4;
    CHECK(std::memcmp(got_a[size_t(i)].data(), want[size_t(i)].data(), bytes) == 0);
    CHECK(std::memcmp(got_b[size_t(i)].data(), want[size_t(i)].data(), bytes) == 0);
  }
  // Destroyed in turn while their workers idle; the survivor still runs.
  a.reset();
  CHECK(RunOnce(b.get(), 3) == want[3]);
  b.reset();
  s1.reset();
}

// Threads of this process, from /proc (Linux).
size_t ProcessThreads() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.exists();
  return n;
}

TEST_CASE("sessions: a second Run without SetInput reads the same inputs") {
  // X -> Neg -> Relu -> Neg -> Y, all one size: the planner may place the
  // Relu's output where X was, which a second Run would then read as X.
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, 4096});
  b.Output("Y", kFloat, {1, 4096});
  b.Node("Neg", {"X"}, {"A"}, "neg0");
  b.Node("Relu", {"A"}, {"B"}, "relu");
  b.Node("Neg", {"B"}, {"Y"}, "neg1");
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::unique_ptr<Session> s;
  REQUIRE(Session::Create(c.model, SessionOptions(), &s).ok());
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3);
  SetFloatInput(s.get(), "X", {1, 4096}, x);
  REQUIRE(s->Run().ok());
  const std::vector<float> first = FloatOutput(*s, "Y", {1, 4096});
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(first[i] == std::min(x[i], 0.f));
  REQUIRE(s->Run().ok());
  CHECK(FloatOutput(*s, "Y", {1, 4096}) == first);
}

TEST_CASE("sessions: num_threads is clamped to the hardware threads") {
  // Red-team reproducer (issue 18): --threads 100000 started 32k threads.
  TempDir dir;
  Converted converted;
  BuildModel(dir, &converted);
  std::unique_ptr<Session> s1, huge;
  REQUIRE(Session::Create(converted.model, SessionOptions(), &s1).ok());
  const std::vector<float> want = RunOnce(s1.get(), 1);
  const size_t before = ProcessThreads();
  SessionOptions opts;
  opts.num_threads = 100000;
  REQUIRE(Session::Create(converted.model, opts, &huge).ok());
  const unsigned hw = std::thread::hardware_concurrency();
  const size_t cap = hw == 0 ? 64 : hw;
  // The pool starts num_threads - 1 workers; the caller is the last thread.
  CHECK(ProcessThreads() - before <= cap - 1);
  CHECK(RunOnce(huge.get(), 1) == want);
}

// BindInput reads the caller's buffer in place: the outputs SetInput gives,
// the buffer untouched, at 1 and 2 threads; released inputs refuse to run
// until set again; unaligned data is copied instead.
TEST_CASE("sessions: BindInput runs on the caller's buffer and must be renewed after release") {
  TempDir dir;
  Converted converted;
  BuildModel(dir, &converted);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    SessionOptions opts;
    opts.num_threads = threads;
    std::unique_ptr<Session> s;
    REQUIRE(Session::Create(converted.model, opts, &s).ok());
    const std::vector<float> want = RunOnce(s.get(), 3);
    const std::vector<float> x = Input(3);
    std::vector<float> bound = x;
    const Shape shape{1, kC, kH, kW};
    const size_t bytes = bound.size() * sizeof(float);
    REQUIRE(s->BindInput("X", DType::kFloat32, shape, bound.data(), bytes).ok());
    REQUIRE(s->Run().ok());
    CHECK(FloatOutput(*s, "Y", {1, kH, kW, kM}) == want);
    CHECK(bound == x);  // read, never written
    // Still bound: a change to the buffer shows in the next Run.
    const std::vector<float> x4 = Input(4);
    std::copy(x4.begin(), x4.end(), bound.begin());
    REQUIRE(s->Run().ok());
    const std::vector<float> want4 = FloatOutput(*s, "Y", {1, kH, kW, kM});
    s->ReleaseInputs();
    Status st = s->Run();
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find("'X'") != std::string::npos);
    CHECK(RunOnce(s.get(), 4) == want4);  // SetInput renews it
    // Data not aligned to its floats is copied: the same outputs.
    std::vector<unsigned char> raw(bytes + 1);
    std::memcpy(raw.data() + 1, x.data(), bytes);
    REQUIRE(s->BindInput("X", DType::kFloat32, shape, raw.data() + 1, bytes).ok());
    std::memset(raw.data(), 0, raw.size());  // a copy does not see this
    REQUIRE(s->Run().ok());
    CHECK(FloatOutput(*s, "Y", {1, kH, kW, kM}) == want);
    // Wrong sizes and names are refused as by SetInput.
    CHECK(s->BindInput("X", DType::kFloat32, shape, bound.data(), bytes - 4).code() ==
          StatusCode::kInvalidArgument);
    CHECK(s->BindInput("nope", DType::kFloat32, shape, bound.data(), bytes).code() ==
          StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
