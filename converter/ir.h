// The converter's graph IR: ONNX-like, names as edges, constants inline.
// Passes take a Graph and leave a valid Graph (see VerifyGraph).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/attr.h"
#include "qfold/dtype.h"
#include "qfold/runtime.h"
#include "qfold/status.h"

namespace qfold {
namespace conv {

// How an integer tensor maps to real numbers: real = (q - zero_point) * scale,
// per tensor (one scale), per axis, or per block along `axis`.
struct QuantInfo {
  std::vector<float> scales;
  std::vector<int32_t> zero_points;
  int axis = -1;
  int block_size = 0;
};

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  bool rank_known = false;
  Shape shape;                         // kUnknownDim where unknown
  std::vector<std::string> dim_names;  // ONNX dim_param, "" when none (graph inputs)
  // Constant payload, little-endian, int4 packed two per byte; null when not constant.
  std::shared_ptr<const std::vector<uint8_t>> data;
  std::shared_ptr<const QuantInfo> quant;  // set on integer tensors of folded QDQ ops
  // Graph inputs/outputs: layout implied by their consumers or producers.
  enum class Layout { kPlain, kNCHW, kNHWC } layout = Layout::kPlain;
  int batch_axis = -1, channel_axis = -1;
  // ONNX type name when a constant was widened on reading (float8 -> float32).
  std::string widened_from;
  // An ONNX sequence of tensors: dtype, rank_known and shape describe its
  // elements (what every element has; kUnknownDim where they may differ).
  bool is_sequence = false;
  // An ONNX optional of the tensor (or, with is_sequence, the sequence) the
  // fields above describe; never constant.
  bool is_optional = false;

  bool is_constant() const { return data != nullptr; }
};

struct Graph;

struct Node {
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::string name;
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  AttrMap attrs;
  // TENSOR attributes (Constant's value, ConstantOfShape's value), as constant values.
  std::map<std::string, Value> tensor_attrs;
  // Attributes the converter cannot represent (graphs, strings lists...), for messages.
  std::vector<std::string> unsupported_attrs;
  // The values of STRINGS attributes (also listed in unsupported_attrs): a
  // NormalizeOpsets rule may turn them into something the .qfm holds.
  std::map<std::string, std::vector<std::string>> string_lists;
  // GRAPH attributes (If's then_branch/else_branch, Loop's and Scan's body;
  // listed in unsupported_attrs on other ops). FoldIfs inlines an If's taken
  // branch when its condition is constant; CaptureOuterValues turns the
  // enclosing values a subgraph reads into inputs of the node and the subgraph.
  std::map<std::string, std::shared_ptr<Graph>> subgraphs;
  // Set by FoldQdq on an op that reads a DequantizeLinear or feeds a QuantizeLinear
  // but stays float: the folding rule that failed ("16-bit activations: ...").
  std::string float_reason;

  const std::string& input(size_t i) const {
    static const std::string kNone;
    return i < inputs.size() ? inputs[i] : kNone;
  }
  std::string Label() const { return op_type + " '" + name + "'"; }
};

struct Graph {
  std::string source;  // file path, for messages
  int64_t opset = 0;   // default-domain opset
  std::map<std::string, int64_t> opsets;
  std::string producer;
  std::string sha256;
  std::unordered_map<std::string, Value> values;
  std::vector<Node> nodes;  // topologically sorted after VerifyGraph
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // What the conversion did that a user should know (printed by `qfold convert`).
  std::vector<std::string> notes;
  // The ONNX model stored float16 constants (WidenHalfFloats widened them).
  bool had_float16_constants = false;

  Value* Find(const std::string& name) {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
  const Value* Find(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
  bool IsConstant(const std::string& name) const {
    const Value* v = Find(name);
    return v && v->is_constant();
  }
  bool IsGraphOutput(const std::string& name) const;
  // A value name not yet used in the graph, based on `base`.
  std::string UniqueName(const std::string& base) const;
  // Adds a constant value and returns its name.
  std::string AddConstant(const std::string& base, DType dtype, const Shape& shape,
                          std::vector<uint8_t> bytes);
  std::string AddInt64Constant(const std::string& base, const std::vector<int64_t>& v);
};

// A default-domain node with these inputs and outputs and no attributes.
Node MakeNode(const std::string& op_type, const std::string& name, std::vector<std::string> inputs,
              std::vector<std::string> outputs);

// If, Loop and Scan of the default domain: nodes that run subgraphs.
bool IsControlFlowNode(const Node& n);

// Consumers of every value: name -> list of (node index, input slot).
std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> BuildConsumers(
    const Graph& g);

// Checks names, single producers, topological order (sorting nodes if needed) and
// that every input is defined; the message names the node and the value.
Status VerifyGraph(Graph* g);

}  // namespace conv
}  // namespace qfold
