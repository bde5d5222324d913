#include "converter/onnx_dtype.h"

namespace qfold {
namespace conv {

namespace {
struct Entry {
  int onnx;
  const char* name;
  DType dtype;
};
constexpr Entry kTable[] = {
    {1, "FLOAT", DType::kFloat32},       {2, "UINT8", DType::kUInt8},
    {3, "INT8", DType::kInt8},           {4, "UINT16", DType::kUInt16},
    {5, "INT16", DType::kInt16},         {6, "INT32", DType::kInt32},
    {7, "INT64", DType::kInt64},         {8, "STRING", DType::kUndefined},
    {9, "BOOL", DType::kBool},           {10, "FLOAT16", DType::kFloat16},
    {11, "DOUBLE", DType::kFloat64},     {12, "UINT32", DType::kUInt32},
    {13, "UINT64", DType::kUInt64},      {14, "COMPLEX64", DType::kUndefined},
    {15, "COMPLEX128", DType::kUndefined}, {16, "BFLOAT16", DType::kBFloat16},
    {17, "FLOAT8E4M3FN", DType::kUndefined}, {18, "FLOAT8E4M3FNUZ", DType::kUndefined},
    {19, "FLOAT8E5M2", DType::kUndefined}, {20, "FLOAT8E5M2FNUZ", DType::kUndefined},
    {21, "UINT4", DType::kUInt4},        {22, "INT4", DType::kInt4},
    {23, "FLOAT4E2M1", DType::kUndefined}, {24, "FLOAT8E8M0", DType::kUndefined},
    {25, "UINT2", DType::kUndefined},    {26, "INT2", DType::kUndefined},
};
}  // namespace

DType DTypeFromOnnx(int onnx_type) {
  for (const Entry& e : kTable)
    if (e.onnx == onnx_type) return e.dtype;
  return DType::kUndefined;
}

int OnnxFromDType(DType t) {
  for (const Entry& e : kTable)
    if (e.dtype == t && t != DType::kUndefined) return e.onnx;
  return 0;
}

std::string OnnxTypeName(int onnx_type) {
  for (const Entry& e : kTable)
    if (e.onnx == onnx_type) return e.name;
  return "type " + std::to_string(onnx_type);
}

}  // namespace conv
}  // namespace qfold
