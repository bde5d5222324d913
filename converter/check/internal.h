// Shared state of one `qfold check` run: the graph, where every dim came
// from, and the issue list. One file per check family fills it.
#pragma once
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "converter/check/check.h"
#include "converter/ir.h"

namespace qfold {
namespace check {

// Where one dim of a value came from, for messages ("input 'x' axis 1, given
// as [3,1,416,416]", "initializer 'w'", "computed by Reshape '/r'").
struct DimOrigin {
  std::string text;
  std::string input;  // the graph input it traces to, or ""
  int axis = -1;      // that input's axis
};

struct Analysis {
  conv::Graph g;  // after ReadOnnxModel + NormalizeOpsets + VerifyGraph
  const CheckOptions* opts = nullptr;
  Report* report = nullptr;
  // Per value: one origin per dim (values of unknown rank have none).
  std::unordered_map<std::string, std::vector<DimOrigin>> origins;
  // Graph inputs whose shape came from the command line or the data, and how.
  std::unordered_map<std::string, std::string> input_shape_source;
  // Producer node index of every node output.
  std::unordered_map<std::string, size_t> producer;
  // Nodes the walk could not infer (their outputs are unknown).
  std::set<size_t> failed;
  // Values whose dtype is a guess (outputs of failed nodes): dtype checks skip them.
  std::set<std::string> guessed;

  void Add(Severity s, const std::string& code, const conv::Node* n, const std::string& tensor,
           const std::string& message, const std::string& fix = "");
  // "graph input 'x'", "initializer 'w'", "Cast '/c'" (the producer), for messages.
  std::string Describe(const std::string& value) const;
  DimOrigin Origin(const std::string& value, int axis) const;
  std::string ShapeText(const std::string& value) const;
};

// Checks, in the order CheckModel runs them.
void ApplyInputShapes(Analysis* a);  // --input-shape, --dim, data shapes; data_mismatch
void WalkGraph(Analysis* a);         // shapes, broadcast, dtypes, layout, unsupported ops
void CheckQdq(Analysis* a);          // QDQ parameters, pairs, bias scales
void CheckCoverage(Analysis* a, const std::string& onnx_path);  // quantization coverage

// Small helpers shared by the check files.
std::string Quote(const std::string& s);  // 'name'
std::string DimsText(const Shape& s, const std::vector<std::string>& names = {});
std::string FloatText(double v);
// Reads a constant float (f32/f16/bf16/f64) or integer value; false when not constant.
bool ConstFloats(const conv::Value* v, std::vector<double>* out);
bool ConstInts(const conv::Value* v, std::vector<int64_t>* out);

}  // namespace check
}  // namespace qfold
