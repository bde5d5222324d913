// qfold check: static analysis of an ONNX model (converter/check/).
#include "converter/check/check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/arg_parse.h"
#include "cli/commands.h"
#include "cli/npy.h"

namespace qfold {
namespace cli {

namespace {

const char* kCheckUsage =
    "usage: qfold check MODEL.onnx [--input-shape NAME=1x3x224x224 ...] [--dim NAME=VALUE ...]\n"
    "                   [--const NAME=VALUE ...]\n"
    "                   [--data FILE.npz|NAME=FILE.npy ...] [--json] [--strict]\n"
    "\n"
    "Finds what would break on device and reports every problem at once, by node\n"
    "and tensor name: broadcasting, dtypes, QDQ parameters, quantization coverage,\n"
    "input layout, unsupported operators, sample data against the inputs, external\n"
    "data. Exit code: 0 clean, 1 warnings with --strict, 2 errors.\n"
    "  --input-shape NAME=DIMS  set a graph input's shape (dims separated by 'x')\n"
    "  --dim NAME=VALUE         set a symbolic dim (ONNX dim_param) everywhere\n"
    "  --const NAME=VALUE       bind an input to a constant, as qfold convert --const\n"
    "  --data FILE.npz          sample/calibration data; arrays named like the inputs\n"
    "  --data NAME=FILE.npy     one input's data\n"
    "  --json                   machine-readable report (schema: docs/CHECK.md)\n"
    "  --strict                 exit 1 when there are warnings\n";

bool ParseDims(const std::string& s, Shape* out) {
  out->clear();
  if (s.empty()) return true;  // a scalar
  size_t p = 0;
  while (p <= s.size()) {
    size_t x = s.find_first_of("x,", p);
    std::string d = s.substr(p, x == std::string::npos ? std::string::npos : x - p);
    int64_t dim = 0;
    if (!ParseBoundedInt(d, 0, kMaxCliDim, &dim)) return false;
    out->push_back(dim);
    if (x == std::string::npos) break;
    p = x + 1;
  }
  return true;
}

void AddData(const std::string& name, const io::NpyArray& arr, const std::string& source,
             check::CheckOptions* o) {
  check::DataInfo d;
  d.name = name;
  d.dtype = arr.dtype;
  d.shape = arr.shape;
  d.source = source;
  o->data.push_back(d);
}

}  // namespace

int Check(const Args& args) {
  check::CheckOptions opts;
  std::string path;
  bool json = false, strict = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return std::fputs(kCheckUsage, stdout), 0;
    std::string v;
    auto next = [&]() {
      if (i + 1 >= args.size()) return false;
      v = args[++i];
      return true;
    };
    if (a == "--json") {
      json = true;
    } else if (a == "--strict") {
      strict = true;
    } else if (a == "--const") {
      size_t eq;
      if (!next() || (eq = v.find('=')) == std::string::npos || eq == 0)
        return UsageError("check", a + " needs NAME=VALUE", kCheckUsage);
      opts.consts[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--input-shape" || a == "--dim") {
      size_t eq;
      if (!next() || (eq = v.find('=')) == std::string::npos || eq == 0)
        return UsageError("check", a + " needs NAME=VALUE", kCheckUsage);
      const std::string name = v.substr(0, eq), val = v.substr(eq + 1);
      if (a == "--dim") {
        Shape s;
        if (!ParseDims(val, &s) || s.size() != 1)
          return UsageError("check", "--dim " + v + ": VALUE must be a number", kCheckUsage);
        opts.dims[name] = s[0];
      } else {
        Shape s;
        if (!ParseDims(val, &s))
          return UsageError("check",
                            "--input-shape " + v + ": dims must be numbers like 1x3x224x224",
                            kCheckUsage);
        opts.input_shapes[name] = s;
      }
    } else if (a == "--data") {
      if (!next())
        return UsageError("check", "--data needs FILE.npz or NAME=FILE.npy", kCheckUsage);
      size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::vector<io::NpzEntry> entries;
        Status st = io::ReadNpz(v, &entries);
        if (!st.ok()) return Fail("check", st);
        for (const io::NpzEntry& e : entries) AddData(e.name, e.array, v + ": " + e.name, &opts);
      } else {
        io::NpyArray arr;
        Status st = io::ReadNpy(v.substr(eq + 1), &arr);
        if (!st.ok()) return Fail("check", st);
        AddData(v.substr(0, eq), arr, v.substr(eq + 1), &opts);
      }
    } else if (!a.empty() && a[0] == '-') {
      return UsageError("check", "unknown option '" + a + "'", kCheckUsage);
    } else if (path.empty()) {
      path = a;
    } else {
      return UsageError("check", "more than one model given", kCheckUsage);
    }
  }
  if (path.empty()) return UsageError("check", "needs a model", kCheckUsage);
  check::Report report;
  Status st = check::CheckModel(path, opts, &report);
  if (!st.ok()) return Fail("check", st);
  if (json) {
    std::fputs(check::ReportJson(report).c_str(), stdout);
  } else {
    const bool color = isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
    std::fputs(check::ReportText(report, color).c_str(), stdout);
  }
  return check::ExitCode(report, strict);
}

}  // namespace cli
}  // namespace qfold
