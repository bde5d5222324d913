// ONNX TensorProto.DataType numbers, kept as ints so that types newer than
// the compiled onnx.proto (INT4, FLOAT8, ...) still parse.
#pragma once
#include <cstdint>
#include <string>

#include "qfold/dtype.h"

namespace qfold {
namespace conv {

// qfold DType for an ONNX data type, kUndefined when qfold has no such type.
DType DTypeFromOnnx(int onnx_type);
int OnnxFromDType(DType t);
// "FLOAT8E4M3FN", "STRING", ... for messages; "type N" when unknown.
std::string OnnxTypeName(int onnx_type);
// FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ: no kernel computes in
// them, so constants of these types are widened to float32 when read.
bool IsFloat8(int onnx_type);
float Float8ToFloat(int onnx_type, uint8_t bits);

}  // namespace conv
}  // namespace qfold
