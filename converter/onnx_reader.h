// Reading .onnx files (and ONNX TensorProto files) into the IR.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "converter/ir.h"

namespace onnx {
class TensorProto;
}

namespace qfold {
namespace conv {

// Refuse protobufs larger than this (ONNX files over 2 GiB must use external data).
constexpr size_t kMaxProtoBytes = size_t(2047) << 20;

// The newest ai.onnx opset qfold accepts: that of the onnx package pinned in
// scripts/requirements.txt, whose backend node tests (up to this opset) CI runs.
// Raise it with the pin, after checking normalize_opsets for ops that changed.
constexpr int64_t kNewestOnnxOpset = 27;

Status ReadOnnxModel(const std::string& path, Graph* g);

// A graph input or output as the .onnx file declares it (what ONNX Runtime's
// NodeArg reports): element type in ONNX's lower-case spelling ("float",
// "uint8"), each dim a value, a dim_param name, or neither (value -1, no name).
struct OnnxDim {
  int64_t value = -1;
  std::string param;
};
struct OnnxArg {
  std::string name;
  std::string elem_type;     // "" for types other than tensors and sequences of tensors
  bool is_sequence = false;  // a sequence of tensors: elem_type, dims describe its elements
  bool is_optional = false;  // an optional of the tensor or sequence the other fields describe
  bool has_shape = false;
  std::vector<OnnxDim> dims;
};
// The model's declared interface and metadata, without reading it into the IR.
struct OnnxSignature {
  std::vector<OnnxArg> inputs;  // initializers listed as inputs are left out
  std::vector<OnnxArg> outputs;
  std::string producer_name, domain, description, graph_name, graph_description;
  int64_t model_version = 0;  // INT64_MAX when the file sets none, as ONNX Runtime reports it
  std::vector<std::pair<std::string, std::string>> metadata_props;
};
Status ReadOnnxSignature(const std::string& path, OnnxSignature* out);

// Decodes a TensorProto (inline or external data relative to `base_dir`).
// `where` names the tensor's origin for messages.
Status ValueFromTensorProto(const onnx::TensorProto& t, const std::string& base_dir,
                            const std::string& where, Value* out);
// Reads a serialized TensorProto file (the ONNX test data format).
Status ReadTensorProtoFile(const std::string& path, Value* out);
// Reads a serialized SequenceProto of tensors (the test data of a sequence).
Status ReadSequenceProtoFile(const std::string& path, std::vector<Value>* out);
// The value of a serialized OptionalProto (the test data of an optional):
// none, a tensor, or a sequence of tensors.
struct OptionalValue {
  bool none = true;
  bool is_sequence = false;
  Value tensor;
  std::vector<Value> sequence;
};
Status ReadOptionalProtoFile(const std::string& path, OptionalValue* out);

}  // namespace conv
}  // namespace qfold
