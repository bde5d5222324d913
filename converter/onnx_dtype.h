// ONNX TensorProto.DataType numbers, kept as ints so that types newer than
// the compiled onnx.proto (INT4, FLOAT8, ...) still parse.
#pragma once
#include <string>

#include "qfold/dtype.h"

namespace qfold {
namespace conv {

// qfold DType for an ONNX data type, kUndefined when qfold has no such type.
DType DTypeFromOnnx(int onnx_type);
int OnnxFromDType(DType t);
// "FLOAT8E4M3FN", "STRING", ... for messages; "type N" when unknown.
std::string OnnxTypeName(int onnx_type);

}  // namespace conv
}  // namespace qfold
