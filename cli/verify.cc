// qfold verify: a .qfm against its ONNX model run without QDQ folding (converter/check/verify.h).
#include "converter/check/verify.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli/arg_parse.h"
#include "cli/commands.h"
#include "cli/npy.h"
#include "core/file_io.h"

namespace qfold {
namespace cli {

namespace {

const char* kVerifyUsage =
    "usage: qfold verify MODEL.onnx MODEL.qfm [--data FILE.npz|NAME=FILE.npy ...] [--per-layer]\n"
    "                    [--reference qfold|ort] [--threshold COS] [--report REPORT.html]\n"
    "                    [--seed N] [--precision fp32|bf16|fp16] [--json]\n"
    "\n"
    "Runs the .qfm and a reference on the same inputs (given, else random with a fixed\n"
    "seed) and compares every output: cosine similarity, max abs error, relative L2 and,\n"
    "for quantized tensors, the error in quantization steps. The reference is the ONNX\n"
    "model converted without QDQ folding and fusions (DequantizeLinear -> float op ->\n"
    "QuantizeLinear through the runtime's own kernels). Exit code 0 when every compared\n"
    "tensor reaches the threshold, 1 when one does not, 2 on bad input.\n"
    "  --per-layer        also compare every intermediate tensor both graphs name alike,\n"
    "                     and name the first layer under the threshold\n"
    "  --reference ort    use ONNX Runtime (graph optimizations off) on the ONNX model as\n"
    "                     the reference, through $QFOLD_PYTHON (default python3), which\n"
    "                     needs onnxruntime and numpy (and onnx for --per-layer)\n"
    "  --threshold COS    cosine similarity that counts as good (default 0.99)\n"
    "  --report FILE      write a self-contained HTML page plotting the per-layer error\n"
    "  --seed N           seed of the random inputs (default 1)\n"
    "  --precision P      the .qfm's session: fp32 (default) or bf16 (bfloat16 products in\n"
    "                     float channels-last convolutions on AMX-BF16 or AVX-512 BF16) or\n"
    "                     fp16 (NEON half arithmetic on Armv8.2), to measure its error\n"
    "  --json             machine-readable result\n";

Status WriteText(const std::string& path, const std::string& text,
                 const std::vector<std::string>& inputs) {
  return fileio::WriteFileAtomic(path, text.data(), text.size(), inputs);
}

// Runs ONNX Runtime: argv = MODEL INPUTS.npz OUTPUTS.npz [--all-intermediates]. Exit code 3
// when a module is missing. ORT_DISABLE_ALL keeps the reference literal (DQ -> op -> Q, no
// fused QLinear kernels). Entries are written with zipfile rather than np.savez, whose keyword
// arguments would clash with tensors named "file" or "allow_pickle".
const char* kOrtProgram = R"PY(
import sys
args = [a for a in sys.argv[1:] if a != "--all-intermediates"]
all_intermediates = len(args) != len(sys.argv) - 1
try:
    import numpy as np
    import onnxruntime as ort
    if all_intermediates:
        import onnx
except ImportError as e:
    sys.stderr.write("%s\n" % e)
    sys.exit(3)
import zipfile

model_path, inputs_path, outputs_path = args
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
model = model_path
if all_intermediates:
    m = onnx.load(model_path)
    try:
        typed = onnx.shape_inference.infer_shapes(m)
    except Exception:
        typed = m
    infos = {}
    for vi in list(typed.graph.value_info) + list(typed.graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type != 0:
            infos[vi.name] = vi
    have = set(o.name for o in m.graph.output)
    for node in m.graph.node:
        for name in node.output:
            if name and name not in have and name in infos:
                m.graph.output.append(infos[name])
                have.add(name)
    model = m.SerializeToString()
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
with np.load(inputs_path) as f:
    feeds = {k: f[k] for k in f.files}
names = [o.name for o in sess.get_outputs()]
values = sess.run(names, feeds)
with zipfile.ZipFile(outputs_path, "w") as z:
    for name, v in zip(names, values):
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(v))
)PY";

// A directory from mkdtemp, removed with the files put in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/qfold-verify-XXXXXX";
    if (mkdtemp(&tmpl[0])) path_ = tmpl;
  }
  ~TempDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// Runs `argv` without a shell, its stdout sent to our stderr so --json output stays clean.
// Returns the exit code, or -1 with `error` set if it could not run or was killed.
int RunProgram(const std::vector<std::string>& argv, std::string* error) {
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::fflush(stdout);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    *error = std::strerror(err);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      *error = std::strerror(errno);
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  *error = "killed by signal " + std::to_string(WTERMSIG(status));
  return -1;
}

check::NamedArray ToNamed(const std::string& name, io::NpyArray arr) {
  check::NamedArray a;
  a.name = name;
  a.dtype = arr.dtype;
  a.shape = arr.shape;
  a.data = std::move(arr.data);
  return a;
}

// The ONNX Runtime reference: inputs to an .npz, kOrtProgram, outputs back from an .npz.
Status OrtReference(const std::string& onnx, const std::vector<check::NamedArray>& inputs,
                    bool per_layer, std::vector<check::NamedArray>* out) {
  const char* env = std::getenv("QFOLD_PYTHON");
  const std::string python = env && *env ? env : "python3";
  const std::string install = "install onnxruntime and numpy" +
                              std::string(per_layer ? " (and onnx)" : "") + " for " + python +
                              ", or set QFOLD_PYTHON to a Python that has them";
  TempDir dir;
  if (!dir.ok())
    return Status(StatusCode::kIoError,
                  std::string("cannot create a temporary directory: ") + std::strerror(errno));
  std::vector<io::NpzEntry> entries;
  for (const check::NamedArray& a : inputs) {
    io::NpzEntry e;
    e.name = a.name;
    e.array.dtype = a.dtype;
    e.array.shape = a.shape;
    e.array.data = a.data;
    entries.push_back(std::move(e));
  }
  const std::string in_path = dir.File("inputs.npz"), out_path = dir.File("outputs.npz");
  QF_RETURN_IF_ERROR(io::WriteNpz(in_path, entries));
  std::vector<std::string> argv = {python, "-c", kOrtProgram, onnx, in_path, out_path};
  if (per_layer) argv.push_back("--all-intermediates");
  std::string error;
  int rc = RunProgram(argv, &error);
  if (rc < 0 && error == std::strerror(ENOENT))
    return Status(StatusCode::kUnsupported, "cannot run " + python + ": " + error + "; " + install);
  if (rc < 0) return Status(StatusCode::kIoError, "cannot run " + python + ": " + error);
  if (rc == 3)
    return Status(StatusCode::kUnsupported,
                  python + " cannot import the modules it needs; " + install);
  if (rc != 0)
    return Status(StatusCode::kIoError,
                  "onnxruntime failed on " + onnx + " (exit code " + std::to_string(rc) + ")");
  entries.clear();
  QF_RETURN_IF_ERROR(io::ReadNpz(out_path, &entries));
  for (io::NpzEntry& e : entries) out->push_back(ToNamed(e.name, std::move(e.array)));
  return Status::Ok();
}

}  // namespace

int Verify(const Args& args) {
  check::VerifyOptions opts;
  std::string onnx, qfm, report;
  bool json = false, use_ort = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return std::fputs(kVerifyUsage, stdout), 0;
    std::string v;
    auto next = [&]() {
      if (i + 1 >= args.size()) return false;
      v = args[++i];
      return true;
    };
    if (a == "--json") {
      json = true;
    } else if (a == "--per-layer") {
      opts.per_layer = true;
    } else if (a == "--reference") {
      if (!next() || (v != "ort" && v != "qfold"))
        return UsageError("verify", "--reference needs 'qfold' or 'ort'", kVerifyUsage);
      use_ort = v == "ort";
    } else if (a == "--threshold") {
      char* end = nullptr;
      if (!next() || (opts.threshold = std::strtod(v.c_str(), &end), *end != '\0') || v.empty() ||
          !(opts.threshold >= -1 && opts.threshold <= 1))
        return UsageError("verify", "--threshold needs a cosine in [-1, 1]", kVerifyUsage);
    } else if (a == "--seed") {
      if (!next() || !ParseBoundedInt(v, 0, 0xffffffff, &opts.seed))
        return UsageError("verify", "--seed needs a number from 0 to 4294967295", kVerifyUsage);
    } else if (a == "--precision") {
      if (!next() || !ParsePrecision(v, &opts.precision))
        return UsageError("verify", BadPrecisionMessage(v), kVerifyUsage);
    } else if (a == "--report") {
      if (!next()) return UsageError("verify", "--report needs a file", kVerifyUsage);
      report = v;
    } else if (a == "--data") {
      if (!next())
        return UsageError("verify", "--data needs FILE.npz or NAME=FILE.npy", kVerifyUsage);
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::vector<io::NpzEntry> entries;
        Status st = io::ReadNpz(v, &entries);
        if (!st.ok()) return Fail("verify", st);
        for (io::NpzEntry& e : entries) opts.inputs.push_back(ToNamed(e.name, std::move(e.array)));
      } else {
        io::NpyArray arr;
        Status st = io::ReadNpy(v.substr(eq + 1), &arr);
        if (!st.ok()) return Fail("verify", st);
        opts.inputs.push_back(ToNamed(v.substr(0, eq), std::move(arr)));
      }
    } else if (!a.empty() && a[0] == '-') {
      return UsageError("verify", "unknown option '" + a + "'", kVerifyUsage);
    } else if (onnx.empty()) {
      onnx = a;
    } else if (qfm.empty()) {
      qfm = a;
    } else {
      return UsageError("verify", "takes one .onnx and one .qfm", kVerifyUsage);
    }
  }
  if (onnx.empty() || qfm.empty())
    return UsageError("verify", "needs MODEL.onnx and MODEL.qfm", kVerifyUsage);
  if (use_ort) {
    opts.reference_name = "onnxruntime (graph optimizations disabled)";
    opts.external_reference = [&onnx](const std::vector<check::NamedArray>& inputs, bool per_layer,
                                      std::vector<check::NamedArray>* out) {
      return OrtReference(onnx, inputs, per_layer, out);
    };
  }
  if (!report.empty()) {  // a bad target is refused before the comparison runs
    Status st = fileio::CheckOutputPath(report, {onnx, qfm});
    if (!st.ok()) return Fail("verify", st);
  }
  check::VerifyResult r;
  Status st = check::VerifyModel(onnx, qfm, opts, &r);
  if (!st.ok()) return Fail("verify", st);
  if (!report.empty()) {
    st = WriteText(report, check::VerifyHtml(r, opts, "qfold verify: " + qfm), {onnx, qfm});
    if (!st.ok()) return Fail("verify", st);
  }
  std::fputs((json ? check::VerifyJson(r, opts) : check::VerifyText(r, opts)).c_str(), stdout);
  if (!report.empty() && !json) std::printf("report: %s\n", report.c_str());
  return r.first_bad.empty() ? 0 : 1;
}

}  // namespace cli
}  // namespace qfold
