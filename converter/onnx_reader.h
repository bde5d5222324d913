// Reading .onnx files (and ONNX TensorProto files) into the IR.
#pragma once
#include <string>

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

// Decodes a TensorProto (inline or external data relative to `base_dir`).
// `where` names the tensor's origin for messages.
Status ValueFromTensorProto(const onnx::TensorProto& t, const std::string& base_dir,
                            const std::string& where, Value* out);
// Reads a serialized TensorProto file (the ONNX test data format).
Status ReadTensorProtoFile(const std::string& path, Value* out);

}  // namespace conv
}  // namespace qfold
