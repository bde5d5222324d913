// Conversions and sessions at the same time: the converter folds constants
// with the reference kernel configuration it asks for, sessions keep the
// configuration they chose at creation, and nothing process-wide connects the
// two. Two threads run sessions while two threads convert models (their
// conversions overlap); every session run must report its kernels unchanged
// and give the bytes it gave before any conversion started, and every
// conversion must give the same .qfm bytes as one made alone.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "converter/qfm_writer.h"
#include "kernels/kernel_config.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int64_t kC = 16, kM = 32, kH = 40, kW = 40, kInner = 64;

// Constant folding with float kernels (MatMul of two initializers, which the
// fast GEMM would sum in another order, then Reshape into the Conv weight),
// then Conv 3x3 -> Relu -> Transpose to channels-last at run time, and a
// MatMul of two activations (X as [C, H*W] times its transpose), which has no
// prepared weights and picks its GEMM at every run: float results differ in
// their last bits between kernel variants, so a session that lost its kernels
// for a while would give other bytes.
std::string WriteModel(const TempDir& dir) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  OnnxBuilder b(17);
  b.Input("X", kFloat, {1, kC, kH, kW});
  b.Output("Y", kFloat, {1, kH, kW, kM});
  b.Output("Z", kFloat, {kC, kC});
  std::vector<float> left(static_cast<size_t>(kM * kInner));
  std::vector<float> right(static_cast<size_t>(kInner * kC * 9)), bias(static_cast<size_t>(kM));
  for (float& v : left) v = u(rng);
  for (float& v : right) v = u(rng) * 0.2f;
  for (float& v : bias) v = u(rng);
  b.InitFloat("L", {kM, kInner}, left);
  b.InitFloat("R", {kInner, kC * 9}, right);
  b.InitInt64("WShape", {4}, {kM, kC, 3, 3});
  b.InitFloat("B", {kM}, bias);
  b.InitInt64("XShape", {2}, {kC, kH * kW});
  b.Node("MatMul", {"L", "R"}, {"W2"}, "fold_matmul");
  b.Node("Reshape", {"W2", "WShape"}, {"W"}, "fold_reshape");
  auto* conv = b.Node("Conv", {"X", "W", "B"}, {"C"}, "conv");
  OnnxBuilder::AttrInts(conv, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"C"}, {"R2"}, "relu");
  auto* tr = b.Node("Transpose", {"R2"}, {"Y"}, "to_nhwc");
  OnnxBuilder::AttrInts(tr, "perm", {0, 2, 3, 1});
  b.Node("Reshape", {"X", "XShape"}, {"X2"}, "flatten");
  auto* xt = b.Node("Transpose", {"X2"}, {"X2T"}, "transpose");
  OnnxBuilder::AttrInts(xt, "perm", {1, 0});
  b.Node("MatMul", {"X2", "X2T"}, {"Z"}, "gram");
  return b.Write(dir);
}

std::vector<float> Input(int seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(static_cast<size_t>(kC * kH * kW));
  for (float& v : x) v = u(rng);
  return x;
}

// One run; the outputs Y and Z one after the other, or empty with *err set
// (no doctest checks: this runs on worker threads).
std::vector<float> RunQuietly(Session* s, int seed, Status* err) {
  const std::vector<float> x = Input(seed);
  Status st = s->SetInput("X", DType::kFloat32, {1, kC, kH, kW}, x.data(), x.size() * 4);
  if (st.ok()) st = s->Run();
  DType dt;
  Shape shape;
  const void* data = nullptr;
  std::vector<float> out;
  if (st.ok()) st = s->GetOutput("Y", &dt, &shape, &data);
  if (st.ok()) {
    const float* f = static_cast<const float*>(data);
    out.assign(f, f + kH * kW * kM);
    st = s->GetOutput("Z", &dt, &shape, &data);
  }
  *err = st;
  if (!st.ok()) return {};
  const float* z = static_cast<const float*>(data);
  out.insert(out.end(), z, z + kC * kC);
  return out;
}

TEST_CASE("concurrency: conversions overlap running sessions; sessions keep kernels and bytes") {
  TempDir dir;
  const std::string onnx_path = WriteModel(dir);
  Converted alone;
  Status st = ConvertAndOpen(onnx_path, ConvertOptions(), &alone);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const std::string kernels = alone.session->kernels();
  CHECK(kernels == kernels::DefaultKernelConfig().Describe());
  // Sessions of the configured (default) kernels and of the reference ones.
  SessionOptions fast_opts, ref_opts;
  ref_opts.kernel_isa = "reference";
  std::unique_ptr<Session> fast, ref;
  REQUIRE(Session::Create(alone.model, fast_opts, &fast).ok());
  REQUIRE(Session::Create(alone.model, ref_opts, &ref).ok());
  CHECK(fast->kernels() == kernels);
  CHECK(ref->kernels() == kernels::ReferenceKernelConfig().Describe());
  const bool simd = kernels != ref->kernels();
  constexpr int kInputs = 4;
  std::vector<std::vector<float>> want_fast, want_ref;
  for (int i = 0; i < kInputs; ++i) {
    want_fast.push_back(RunQuietly(fast.get(), i, &st));
    REQUIRE_MESSAGE(st.ok(), st.message());
    want_ref.push_back(RunQuietly(ref.get(), i, &st));
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  // The float kernels sum in another order than the reference ones, so the
  // comparisons below would see a session falling back to the reference, even
  // in the MatMul of activations alone (Z, after Y).
  if (simd) {
    for (int i = 0; i < kInputs; ++i) {
      const size_t z = size_t(kH * kW * kM);
      CHECK(std::memcmp(want_fast[size_t(i)].data() + z, want_ref[size_t(i)].data() + z,
                        size_t(kC * kC) * sizeof(float)) != 0);
    }
  }

  // Each worker records; the checks run after the joins.
  struct Record {
    int seed = 0;
    std::string kernels;
    std::vector<float> out;
    Status status;
  };
  // Each side keeps going until the other has made progress, so they overlap:
  // sessions run until both converters are done, converters convert at least
  // kConversions times and until the sessions have run a few times, one run
  // has fallen inside a conversion and two conversions have been in flight
  // at once (bounded, in case the threads never meet; on a fast machine the
  // first conversions could end before any run did).
  constexpr int kConversions = 4, kMaxConversions = 200;
  std::atomic<int> converters_running{2}, in_flight{0}, max_in_flight{0};
  std::atomic<int> session_runs{0}, runs_during_conversion{0};
  auto run_session = [&](Session* s, std::vector<Record>* log) {
    for (int i = 0; converters_running.load() > 0 || i < 2 * kInputs; ++i) {
      Record r;
      r.seed = i % kInputs;
      const bool during = in_flight.load() > 0;
      r.kernels = s->kernels();
      r.out = RunQuietly(s, r.seed, &r.status);
      if (during && in_flight.load() > 0) runs_during_conversion.fetch_add(1);
      session_runs.fetch_add(1);
      log->push_back(std::move(r));
    }
  };
  std::vector<std::vector<uint8_t>> qfm_a, qfm_b;
  std::vector<std::string> kernels_a, kernels_b;
  std::vector<Status> err_a, err_b;
  auto convert = [&](std::vector<std::vector<uint8_t>>* qfm, std::vector<std::string>* ks,
                     std::vector<Status>* err) {
    for (int i = 0; i < kMaxConversions; ++i) {
      if (i >= kConversions && session_runs.load() >= 4 * kInputs && max_in_flight.load() >= 2 &&
          runs_during_conversion.load() > 0)
        break;
      Converted c;
      const int now = in_flight.fetch_add(1) + 1;
      for (int m = max_in_flight.load(); now > m && !max_in_flight.compare_exchange_weak(m, now);) {
      }
      err->push_back(ConvertAndOpen(onnx_path, ConvertOptions(), &c));
      in_flight.fetch_sub(1);
      qfm->push_back(c.bytes);
      ks->push_back(c.session ? c.session->kernels() : "");
    }
    converters_running.fetch_sub(1);
  };
  std::vector<Record> log_fast, log_ref;
  std::thread t_fast(run_session, fast.get(), &log_fast);
  std::thread t_ref(run_session, ref.get(), &log_ref);
  std::thread c_a(convert, &qfm_a, &kernels_a, &err_a);
  std::thread c_b(convert, &qfm_b, &kernels_b, &err_b);
  c_a.join();
  c_b.join();
  t_fast.join();
  t_ref.join();

  // The two conversions overlapped, and sessions ran during conversions.
  CHECK(max_in_flight.load() == 2);
  CHECK(runs_during_conversion.load() > 0);
  for (auto* side : {&err_a, &err_b})
    for (const Status& e : *side) REQUIRE_MESSAGE(e.ok(), e.message());
  int wrong_qfm = 0, wrong_kernels = 0;
  for (size_t i = 0; i < qfm_a.size(); ++i) {
    // Folding used the reference kernels whatever ran meanwhile.
    wrong_qfm += qfm_a[i] != alone.bytes;
    // Sessions made while conversions ran chose the default kernels.
    wrong_kernels += kernels_a[i] != kernels;
  }
  for (size_t i = 0; i < qfm_b.size(); ++i) {
    wrong_qfm += qfm_b[i] != alone.bytes;
    wrong_kernels += kernels_b[i] != kernels;
  }
  CHECK(wrong_qfm == 0);
  CHECK(wrong_kernels == 0);
  auto check_log = [](const std::vector<Record>& log, const std::string& want_kernels,
                      const std::vector<std::vector<float>>& want) {
    REQUIRE(log.size() >= size_t(2 * kInputs));
    int wrong_kernels = 0, wrong_bytes = 0;
    for (const Record& r : log) {
      REQUIRE_MESSAGE(r.status.ok(), r.status.message());
      wrong_kernels += r.kernels != want_kernels;
      const std::vector<float>& w = want[size_t(r.seed)];
      wrong_bytes += r.out.size() != w.size() ||
                     std::memcmp(r.out.data(), w.data(), w.size() * sizeof(float)) != 0;
    }
    CHECK(wrong_kernels == 0);
    CHECK(wrong_bytes == 0);
    return log.size();
  };
  const size_t runs_fast = check_log(log_fast, kernels, want_fast);
  const size_t runs_ref = check_log(log_ref, ref->kernels(), want_ref);
  // After the conversions, a new session still gets the default kernels.
  std::unique_ptr<Session> later;
  REQUIRE(Session::Create(alone.model, fast_opts, &later).ok());
  CHECK(later->kernels() == kernels);
  CHECK(RunQuietly(later.get(), 1, &st) == want_fast[1]);
  MESSAGE(runs_fast << " + " << runs_ref << " session runs (" << runs_during_conversion.load()
                    << " while a conversion ran) during " << qfm_a.size() + qfm_b.size()
                    << " conversions; kernels: " << kernels);
}

TEST_CASE("concurrency: a session's kernel_isa names a feature set; unknown names fail") {
  TempDir dir;
  Converted c;
  Status st = ConvertAndOpen(WriteModel(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SessionOptions opts;
  opts.kernel_isa = "avx9000";
  std::unique_ptr<Session> s;
  st = Session::Create(c.model, opts, &s);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "unknown kernel_isa 'avx9000'"));
  for (int i = 0; i <= int(kernels::Isa::kAmx); ++i) {  // every level (kAmx is the last)
    const kernels::Isa isa = kernels::Isa(i);
    opts.kernel_isa = kernels::IsaName(isa);
    CAPTURE(opts.kernel_isa);
    REQUIRE(Session::Create(c.model, opts, &s).ok());
    CHECK(s->kernels() == kernels::KernelConfigForIsa(isa).Describe());
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
