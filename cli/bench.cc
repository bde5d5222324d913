// qfold bench: latency, throughput and memory of one model on this machine.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <type_traits>

#include "cli/arg_parse.h"
#include "cli/commands.h"
#include "cli/npy.h"
#include "core/half.h"
#include "qfold/runtime.h"

namespace qfold {
namespace cli {

namespace {

const char* kBenchUsage =
    "usage: qfold bench MODEL.qfm [--threads N] [--precision fp32|bf16|fp16] [--warmup W]\n"
    "                   [--iterations I] [--input NAME=FILE.npy ...]\n"
    "                   [--input-shape NAME=1x3x224x224 ...] [--bind-state OUT=IN ...]\n"
    "                   [--seed S] [--profile] [--json]\n"
    "\n"
    "Times Session::Run: W warm-up runs, then I timed runs on the same inputs.\n"
    "Inputs without --input get fixed-seed random data of the model's dtype\n"
    "(float: standard normal; int8/uint8: uniform over the whole range; other\n"
    "integers: 0..9; bool: 0/1). Symbolic dims need --input-shape (or --input).\n"
    "Reports median, p90, min and mean latency, throughput, the kernel variant\n"
    "of each kernel family (chosen from the CPU's features, lowered by QFOLD_ISA),\n"
    "the activation arena, peak RSS (getrusage and /proc/self/status VmHWM) and\n"
    "the model file size.\n"
    "(Linux keeps ru_maxrss across exec, so when started by a large process it\n"
    "reports at least that process's peak; VmHWM is this process's own.)\n"
    "  --threads N          session threads, 1..1024 (default 1; clamped to the hardware threads)\n"
    "  --precision P        fp32 (default) or bf16: float channels-last convolutions multiply\n"
    "                       bfloat16-rounded values on AMX-BF16 or AVX-512 BF16 (vdpbf16ps),\n"
    "                       summing in fp32; no effect where not faster (no AVX-512 BF16;\n"
    "                       Intel without AMX-BF16, vdpbf16ps at half the FMA rate) (the\n"
    "                       kernels line shows conv_nhwc_bf16; the arena line counts the\n"
    "                       activations stored as bf16);\n"
    "                       fp16: those and Gemm/MatMul with a constant B in NEON half\n"
    "                       arithmetic on Armv8.2 FEAT_FP16 (conv_nhwc_fp16, gemm_fp16)\n"
    "  --warmup W           untimed runs first (default 5)\n"
    "  --iterations I       timed runs (default 50)\n"
    "  --input NAME=FILE    an input from a .npy file (shape taken from the file)\n"
    "  --input-shape NAME=DxDx..  resize an input (ResizeInput) before filling it\n"
    "  --bind-state OUT=IN  streaming state: each run reads the state the previous run\n"
    "                       returned in OUT (zeros at first), so one run is one step\n"
    "  --seed S             seed of the random inputs (default 0)\n"
    "  --profile            time every operator during the timed runs and list the time\n"
    "                       per operator type and the slowest nodes (adds two clock\n"
    "                       reads per operator to the latency)\n"
    "  --json               print one JSON line instead of the text report\n";

bool ParseCount(const std::string& s, int min_value, int* out) {
  return ParseBoundedInt(s, min_value, 999999999, out);
}

// "1x3x224x224" -> {1, 3, 224, 224}; a scalar is "" (rank 0).
bool ParseShape(const std::string& s, Shape* out) {
  out->clear();
  if (s.empty()) return true;
  size_t pos = 0;
  while (true) {
    size_t x = s.find('x', pos);
    std::string d = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    int64_t dim = 0;
    if (!ParseBoundedInt(d, 0, kMaxCliDim, &dim)) return false;
    out->push_back(dim);
    if (x == std::string::npos) return true;
    pos = x + 1;
  }
}

// Splits "NAME=VALUE" at the first '=', like `qfold run --input`.
bool SplitAssign(const std::string& s, std::string* name, std::string* value) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  *name = s.substr(0, eq);
  *value = s.substr(eq + 1);
  return true;
}

// Fixed-seed data of `dtype` for `numel` elements, as the runtime stores it.
Status RandomData(DType dtype, int64_t numel, std::mt19937_64* rng, std::vector<uint8_t>* out) {
  out->assign(dtype_storage_bytes(dtype, numel), 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto ints = [&](auto* p, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    for (int64_t i = 0; i < numel; ++i)
      p[i] = static_cast<std::remove_pointer_t<decltype(p)>>(dist(*rng));
  };
  void* d = out->data();
  switch (dtype) {
    case DType::kFloat32:
      for (int64_t i = 0; i < numel; ++i) static_cast<float*>(d)[i] = normal(*rng);
      return Status::Ok();
    case DType::kFloat64:
      for (int64_t i = 0; i < numel; ++i) static_cast<double*>(d)[i] = normal(*rng);
      return Status::Ok();
    case DType::kFloat16:
      for (int64_t i = 0; i < numel; ++i) static_cast<uint16_t*>(d)[i] = FloatToHalf(normal(*rng));
      return Status::Ok();
    case DType::kBFloat16:
      for (int64_t i = 0; i < numel; ++i)
        static_cast<uint16_t*>(d)[i] = FloatToBFloat16(normal(*rng));
      return Status::Ok();
    case DType::kInt8:
      return ints(static_cast<int8_t*>(d), -128, 127), Status::Ok();
    case DType::kUInt8:
      return ints(static_cast<uint8_t*>(d), 0, 255), Status::Ok();
    case DType::kBool:
      return ints(static_cast<uint8_t*>(d), 0, 1), Status::Ok();
    // Other integer inputs are usually indices or token ids: keep them small and valid.
    case DType::kInt16:
      return ints(static_cast<int16_t*>(d), 0, 9), Status::Ok();
    case DType::kUInt16:
      return ints(static_cast<uint16_t*>(d), 0, 9), Status::Ok();
    case DType::kInt32:
      return ints(static_cast<int32_t*>(d), 0, 9), Status::Ok();
    case DType::kUInt32:
      return ints(static_cast<uint32_t*>(d), 0, 9), Status::Ok();
    case DType::kInt64:
      return ints(static_cast<int64_t*>(d), 0, 9), Status::Ok();
    case DType::kUInt64:
      return ints(static_cast<uint64_t*>(d), 0, 9), Status::Ok();
    default:
      return Status(StatusCode::kUnsupported,
                    std::string("no random data for dtype ") + dtype_name(dtype));
  }
}

// VmHWM (peak resident set) from /proc/self/status, in bytes; 0 where unavailable.
int64_t ProcVmHwmBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, 6, "VmHWM:") != 0) continue;
    return std::atoll(line.c_str() + 6) * 1024;  // the kernel reports kB
  }
  return 0;
}

struct InputReport {
  std::string name;
  DType dtype;
  Shape shape;
  std::string source;  // "random" or the .npy path
};

double Percentile(const std::vector<double>& sorted, double p) {
  // Nearest rank: the smallest sample with at least p of the samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Median(const std::vector<double>& sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

int Bench(const Args& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return std::fputs(kBenchUsage, stdout), 0;
  std::string model_path;
  SessionOptions opts;
  int warmup = 5, iterations = 50, seed = 0;
  bool as_json = false;
  std::vector<std::pair<std::string, std::string>> input_files;  // name, path
  std::vector<std::pair<std::string, Shape>> input_shapes;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= args.size()) return false;
      *v = args[++i];
      return true;
    };
    std::string v, name, value;
    if (a == "--threads") {
      if (!next(&v) || !ParseBoundedInt(v, 1, kMaxCliThreads, &opts.num_threads))
        return UsageError("bench",
                          "--threads needs a number from 1 to " + std::to_string(kMaxCliThreads),
                          kBenchUsage);
    } else if (a == "--precision") {
      if (!next(&v) || !ParsePrecision(v, &opts.precision))
        return UsageError("bench", BadPrecisionMessage(v), kBenchUsage);
    } else if (a == "--warmup") {
      if (!next(&v) || !ParseCount(v, 0, &warmup))
        return UsageError("bench", "--warmup needs a number >= 0", kBenchUsage);
    } else if (a == "--iterations") {
      if (!next(&v) || !ParseCount(v, 1, &iterations))
        return UsageError("bench", "--iterations needs a positive number", kBenchUsage);
    } else if (a == "--seed") {
      if (!next(&v) || !ParseCount(v, 0, &seed))
        return UsageError("bench", "--seed needs a number >= 0", kBenchUsage);
    } else if (a == "--input" || a == "-i") {
      if (!next(&v) || !SplitAssign(v, &name, &value))
        return UsageError("bench", a + " needs NAME=FILE.npy", kBenchUsage);
      input_files.emplace_back(name, value);
    } else if (a == "--input-shape") {
      Shape shape;
      if (!next(&v) || !SplitAssign(v, &name, &value) || !ParseShape(value, &shape))
        return UsageError("bench", "--input-shape needs NAME=DIMS like input=1x3x224x224",
                          kBenchUsage);
      input_shapes.emplace_back(name, shape);
    } else if (a == "--bind-state") {
      if (!next(&v) || !SplitAssign(v, &name, &value))
        return UsageError("bench", "--bind-state needs OUTPUT=INPUT", kBenchUsage);
      opts.state_bindings.emplace_back(name, value);
    } else if (a == "--json") {
      as_json = true;
    } else if (a == "--profile") {
      opts.profile = true;
    } else if (!a.empty() && a[0] == '-') {
      return UsageError("bench", "unknown option '" + a + "'", kBenchUsage);
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      return UsageError("bench", "more than one model given", kBenchUsage);
    }
  }
  if (model_path.empty()) return UsageError("bench", "needs a model", kBenchUsage);

  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  Clock::time_point t0 = Clock::now();
  std::shared_ptr<Model> model;
  Status st = Model::LoadFile(model_path, &model);
  if (!st.ok()) return Fail("bench", st);
  std::unique_ptr<Session> session;
  st = Session::Create(model, opts, &session);
  if (!st.ok()) return Fail("bench", st);
  const double load_ms = ms_since(t0);

  auto find_input = [&](const std::string& name) -> const TensorInfo* {
    for (const TensorInfo& in : model->inputs())
      if (in.name == name) return &in;
    return nullptr;
  };
  auto no_such_input = [&](const std::string& name) {
    return Fail("bench", Status(StatusCode::kInvalidArgument,
                                model_path + ": the model has no input named '" + name + "'"));
  };
  std::map<std::string, Shape> shapes;
  for (const auto& kv : input_shapes) {
    if (!find_input(kv.first)) return no_such_input(kv.first);
    st = session->ResizeInput(kv.first, kv.second);
    if (!st.ok()) return Fail("bench", Status(st.code(), model_path + ": " + st.message()));
    shapes[kv.first] = kv.second;
  }
  std::map<std::string, io::NpyArray> files;
  for (const auto& kv : input_files) {
    if (!find_input(kv.first)) return no_such_input(kv.first);
    st = io::ReadNpy(kv.second, &files[kv.first]);
    if (!st.ok()) return Fail("bench", st);
  }

  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<InputReport> reports;
  for (const TensorInfo& in : model->inputs()) {
    InputReport r{in.name, in.dtype, in.shape, "random"};
    auto file = files.find(in.name);
    const std::pair<std::string, std::string>* binding = nullptr;
    for (const auto& b : opts.state_bindings)
      if (b.second == in.name) binding = &b;
    if (binding && file == files.end()) {
      // Each timed run reads the state the previous one returned.
      r.source = "state from '" + binding->first + "'";
    } else if (file != files.end()) {
      const io::NpyArray& arr = file->second;
      r.source = "";
      for (const auto& kv : input_files)
        if (kv.first == in.name) r.source = kv.second;
      r.dtype = arr.dtype;
      r.shape = arr.shape;
      st = session->SetInput(in.name, arr.dtype, arr.shape, arr.data.data(), arr.data.size());
      if (!st.ok()) return Fail("bench", Status(st.code(), r.source + ": " + st.message()));
    } else {
      if (shapes.count(in.name)) r.shape = shapes[in.name];
      int64_t numel = 1;
      for (size_t d = 0; d < r.shape.size(); ++d) {
        if (r.shape[d] < 0)
          return Fail("bench",
                      Status(StatusCode::kInvalidArgument,
                             model_path + ": input '" + in.name + "' has the symbolic dim '" +
                                 in.dim_names[d] + "' at axis " + std::to_string(d) +
                                 ": pass --input-shape " + in.name + "=DIMS or --input"));
        numel *= r.shape[d];
      }
      std::vector<uint8_t> data;
      st = RandomData(in.dtype, numel, &rng, &data);
      if (!st.ok())
        return Fail("bench", Status(st.code(), model_path + ": input '" + in.name +
                                                   "': " + st.message() + ": pass --input"));
      st = session->SetInput(in.name, in.dtype, r.shape, data.data(), data.size());
      if (!st.ok()) return Fail("bench", st);
    }
    reports.push_back(r);
  }

  // The first run may plan (dynamic shapes) and touches every page: it is a warm-up run.
  t0 = Clock::now();
  for (int i = 0; i < warmup; ++i) {
    st = session->Run();
    if (!st.ok()) return Fail("bench", st);
  }
  const double warmup_ms = ms_since(t0);
  session->ResetProfile();
  std::vector<double> times;
  times.reserve(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    t0 = Clock::now();
    st = session->Run();
    times.push_back(ms_since(t0));
    if (!st.ok()) return Fail("bench", st);
  }
  double total_ms = 0;
  for (double t : times) total_ms += t;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = Median(sorted), p90 = Percentile(sorted, 0.9), min = sorted.front();
  const double mean = total_ms / static_cast<double>(iterations);
  const double throughput = total_ms > 0 ? 1000.0 * iterations / total_ms : 0.0;

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const int64_t ru_maxrss = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
  const int64_t vm_hwm = ProcVmHwmBytes();
  struct stat sb;
  const int64_t model_bytes = stat(model_path.c_str(), &sb) == 0 ? sb.st_size : -1;
  const size_t arena = session->arena_bytes();
  const std::string& kernels = session->kernels();

  // Per-type totals, largest first, and the nodes that took longest.
  struct TypeTime {
    std::string type;
    int64_t nodes = 0;
    double us = 0;
    double min_us = 0;            // sum of the nodes' fastest runs
    int64_t reference_nodes = 0;  // nodes that fell back to the reference kernel
  };
  std::vector<OpProfile> nodes = session->profile();
  std::vector<TypeTime> by_type;
  double profiled_us = 0, profiled_min_us = 0;
  for (const OpProfile& p : nodes) {
    auto it = std::find_if(by_type.begin(), by_type.end(),
                           [&](const TypeTime& t) { return t.type == p.type; });
    if (it == by_type.end()) it = by_type.insert(by_type.end(), TypeTime{p.type, 0, 0, 0, 0});
    it->nodes += 1;
    it->reference_nodes += p.reference_runs > 0 ? 1 : 0;
    it->us += p.total_us / double(p.runs);
    it->min_us += p.min_us;
    profiled_us += p.total_us / double(p.runs);
    profiled_min_us += p.min_us;
  }
  std::sort(by_type.begin(), by_type.end(),
            [](const TypeTime& a, const TypeTime& b) { return a.us > b.us; });
  std::sort(nodes.begin(), nodes.end(), [](const OpProfile& a, const OpProfile& b) {
    return a.total_us / double(a.runs) > b.total_us / double(b.runs);
  });
  const size_t top_nodes = std::min<size_t>(nodes.size(), 15);

  if (as_json) {
    nlohmann::json j;
    if (opts.profile) {
      j["profile_by_type"] = nlohmann::json::array();
      for (const TypeTime& t : by_type)
        j["profile_by_type"].push_back({{"type", t.type},
                                        {"nodes", t.nodes},
                                        {"reference_nodes", t.reference_nodes},
                                        {"mean_us", t.us},
                                        {"min_us", t.min_us}});
      j["profile_nodes"] = nlohmann::json::array();
      for (const OpProfile& p : nodes)
        j["profile_nodes"].push_back({{"name", p.name},
                                      {"type", p.type},
                                      {"mean_us", p.total_us / double(p.runs)},
                                      {"min_us", p.min_us},
                                      {"reference_path", p.reference_runs > 0}});
    }
    j["model"] = model_path;
    j["threads"] = opts.num_threads;
    j["precision"] = PrecisionName(opts.precision);
    j["warmup"] = warmup;
    j["iterations"] = iterations;
    j["median_ms"] = median;
    j["p90_ms"] = p90;
    j["min_ms"] = min;
    j["mean_ms"] = mean;
    j["max_ms"] = sorted.back();
    j["throughput_per_s"] = throughput;
    j["load_ms"] = load_ms;
    j["warmup_ms"] = warmup_ms;
    j["arena_bytes"] = arena;
    j["bf16_activations"] = session->bf16_activations();
    j["kernels"] = kernels;
    j["peak_rss_bytes"] = ru_maxrss;
    j["vmhwm_bytes"] = vm_hwm;
    j["model_bytes"] = model_bytes;
    j["inputs"] = nlohmann::json::array();
    for (const InputReport& r : reports)
      j["inputs"].push_back({{"name", r.name},
                             {"dtype", dtype_name(r.dtype)},
                             {"shape", r.shape},
                             {"source", r.source}});
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s: %d thread%s, precision %s, %d warm-up + %d timed runs\n", model_path.c_str(),
              opts.num_threads, opts.num_threads == 1 ? "" : "s", PrecisionName(opts.precision),
              warmup, iterations);
  for (const InputReport& r : reports) {
    std::string dims;
    for (size_t d = 0; d < r.shape.size(); ++d) dims += (d ? "x" : "") + std::to_string(r.shape[d]);
    std::printf("  input %-20s %-8s %-16s %s\n", r.name.c_str(), dtype_name(r.dtype),
                dims.empty() ? "scalar" : dims.c_str(), r.source.c_str());
  }
  std::printf("latency: median %.3f ms, p90 %.3f ms, min %.3f ms, mean %.3f ms\n", median, p90, min,
              mean);
  std::printf("throughput: %.2f inferences/s\n", throughput);
  std::printf("load + session: %.3f ms, warm-up total: %.3f ms\n", load_ms, warmup_ms);
  std::printf("kernels: %s\n", kernels.c_str());
  if (session->bf16_activations() > 0)
    std::printf("arena: %zu bytes (%zu activations stored as bf16)\n", arena,
                session->bf16_activations());
  else
    std::printf("arena: %zu bytes\n", arena);
  std::printf("peak RSS: %lld bytes (getrusage), %lld bytes (VmHWM)\n",
              static_cast<long long>(ru_maxrss), static_cast<long long>(vm_hwm));
  std::printf("model file: %lld bytes\n", static_cast<long long>(model_bytes));
  if (opts.profile) {
    std::printf(
        "\nprofile (mean per run, %.3f ms in operators; min: each node's fastest run, %.3f ms):\n",
        profiled_us / 1000, profiled_min_us / 1000);
    std::printf("  %-28s %6s %12s %7s %10s\n", "operator type", "nodes", "ms", "share", "min ms");
    for (const TypeTime& t : by_type) {
      std::printf("  %-28s %6lld %12.3f %6.1f%% %10.3f", t.type.c_str(),
                  static_cast<long long>(t.nodes), t.us / 1000,
                  profiled_us > 0 ? 100 * t.us / profiled_us : 0.0, t.min_us / 1000);
      if (t.reference_nodes)
        std::printf("  REFERENCE KERNEL in %lld node%s", static_cast<long long>(t.reference_nodes),
                    t.reference_nodes == 1 ? "" : "s");
      std::printf("\n");
    }
    std::printf("slowest nodes (mean, min):\n");
    for (size_t i = 0; i < top_nodes; ++i)
      std::printf("  %-44s %-22s %10.3f ms %10.3f ms%s\n", nodes[i].name.c_str(),
                  nodes[i].type.c_str(), nodes[i].total_us / double(nodes[i].runs) / 1000,
                  nodes[i].min_us / 1000, nodes[i].reference_runs ? "  (reference kernel)" : "");
  }
  return 0;
}

}  // namespace cli
}  // namespace qfold
