// qfold verify: a .qfm against its ONNX model run without QDQ folding (converter/check/verify.h).
#include "converter/check/verify.h"

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/npy.h"

namespace qfold {
namespace cli {

namespace {

const char* kVerifyUsage =
    "usage: qfold verify MODEL.onnx MODEL.qfm [--data FILE.npz|NAME=FILE.npy ...] [--per-layer]\n"
    "                    [--threshold COS] [--report REPORT.html] [--seed N] [--json]\n"
    "\n"
    "Runs the .qfm and a reference on the same inputs (given, else random with a fixed\n"
    "seed) and compares every output: cosine similarity, max abs error, relative L2 and,\n"
    "for quantized tensors, the error in quantization steps. The reference is the ONNX\n"
    "model converted without QDQ folding and fusions (DequantizeLinear -> float op ->\n"
    "QuantizeLinear through the runtime's own kernels). ONNX Runtime as a reference is\n"
    "not available. Exit code 0 when every compared tensor reaches the threshold, 1 when\n"
    "one does not, 2 on bad input.\n"
    "  --per-layer        also compare every intermediate tensor both graphs name alike,\n"
    "                     and name the first layer under the threshold\n"
    "  --threshold COS    cosine similarity that counts as good (default 0.99)\n"
    "  --report FILE      write a self-contained HTML page plotting the per-layer error\n"
    "  --seed N           seed of the random inputs (default 1)\n"
    "  --json             machine-readable result\n";

bool WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

check::NamedArray ToNamed(const std::string& name, io::NpyArray arr) {
  check::NamedArray a;
  a.name = name;
  a.dtype = arr.dtype;
  a.shape = arr.shape;
  a.data = std::move(arr.data);
  return a;
}

}  // namespace

int Verify(const Args& args) {
  check::VerifyOptions opts;
  std::string onnx, qfm, report;
  bool json = false;
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
    } else if (a == "--threshold") {
      char* end = nullptr;
      if (!next() || (opts.threshold = std::strtod(v.c_str(), &end), *end != '\0') || v.empty() ||
          !(opts.threshold >= -1 && opts.threshold <= 1))
        return UsageError("verify", "--threshold needs a cosine in [-1, 1]", kVerifyUsage);
    } else if (a == "--seed") {
      if (!next() || v.empty() || v.size() > 9 ||
          v.find_first_not_of("0123456789") != std::string::npos)
        return UsageError("verify", "--seed needs a number", kVerifyUsage);
      opts.seed = uint32_t(std::stoul(v));
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
  check::VerifyResult r;
  Status st = check::VerifyModel(onnx, qfm, opts, &r);
  if (!st.ok()) return Fail("verify", st);
  if (!report.empty() && !WriteText(report, check::VerifyHtml(r, opts, "qfold verify: " + qfm)))
    return Fail("verify", Status(StatusCode::kIoError, report + ": cannot write the report"));
  std::fputs((json ? check::VerifyJson(r, opts) : check::VerifyText(r, opts)).c_str(), stdout);
  if (!report.empty() && !json) std::printf("report: %s\n", report.c_str());
  return r.first_bad.empty() ? 0 : 1;
}

}  // namespace cli
}  // namespace qfold
