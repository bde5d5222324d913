// `qfold check`: static analysis of an ONNX model that reports every problem
// that would break (or silently degrade) it on device, by node and tensor name,
// instead of stopping at the first one. The --json form is documented in
// docs/CHECK.md and is stable.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/runtime.h"
#include "qfold/status.h"

namespace qfold {
namespace check {

enum class Severity { kError = 0, kWarning = 1, kInfo = 2 };
const char* SeverityName(Severity s);

struct Issue {
  Severity severity = Severity::kError;
  std::string code;     // stable identifier, see docs/CHECK.md
  std::string node;     // ONNX node name, "" when the issue is not about one node
  std::string op_type;  // that node's op type
  std::string tensor;   // the value (input, initializer, activation) concerned, or ""
  std::string message;  // one line, names everything involved
  std::string fix;      // a suggestion, or ""
};

// One array of sample/calibration data (only its name, dtype and shape matter).
struct DataInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::string source;  // "calib.npz: x" or "x.npy", for messages
};

struct CheckOptions {
  std::map<std::string, Shape> input_shapes;  // --input-shape NAME=1x3x224x224
  std::map<std::string, int64_t> dims;        // --dim NAME=VALUE (ONNX dim_param)
  std::map<std::string, std::string> consts;  // --const NAME=VALUE (as qfold convert)
  std::vector<DataInfo> data;                 // --data
  bool analyze_folding = true;                // run the converter to see which quantized ops fold
};

// How one Conv/ConvTranspose/MatMul/Gemm is quantized.
struct QuantOp {
  std::string node, op_type;
  std::string weight;       // the weight value (integer initializer or float weight), or ""
  std::string granularity;  // "per-channel", "per-tensor", "blocked" or "float"
  bool folded = false;      // becomes an integer kernel in the converted model
};

struct Report {
  std::string model;
  std::vector<Issue> issues;
  std::vector<QuantOp> quant_ops;
  int count(Severity s) const;
};

// Never fails for problems in the model (they become issues); a non-OK status
// only for internal errors.
Status CheckModel(const std::string& onnx_path, const CheckOptions& opts, Report* out);

// Issues sorted by severity (errors first), then in graph order.
std::string ReportText(const Report& r, bool color);
std::string ReportJson(const Report& r);
// 0 clean, 1 warnings with `strict`, 2 errors.
int ExitCode(const Report& r, bool strict);

}  // namespace check
}  // namespace qfold
