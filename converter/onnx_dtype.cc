#include "converter/onnx_dtype.h"

#include <cmath>

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

bool IsFloat8(int onnx_type) { return onnx_type >= 17 && onnx_type <= 20; }

float Float8ToFloat(int onnx_type, uint8_t bits) {
  // Exponent width and bias per type; the *FNUZ types have no negative zero
  // (0x80 is their only NaN) and none of the E4M3 types has infinities.
  const bool e4m3 = onnx_type == 17 || onnx_type == 18;
  const bool fnuz = onnx_type == 18 || onnx_type == 20;
  const int mant_bits = e4m3 ? 3 : 2;
  const int bias = (e4m3 ? 7 : 15) + (fnuz ? 1 : 0);
  const int exp_max = e4m3 ? 15 : 31;
  if (fnuz && bits == 0x80) return std::nanf("");
  const bool negative = bits & 0x80;
  const int exp = (bits >> mant_bits) & exp_max;
  const int mant = bits & ((1 << mant_bits) - 1);
  float v;
  if (onnx_type == 17 && exp == exp_max && mant == 7) return std::nanf("");
  if (onnx_type == 19 && exp == exp_max)
    return mant ? std::nanf("") : (negative ? -INFINITY : INFINITY);
  if (exp == 0)
    v = std::ldexp(float(mant), 1 - bias - mant_bits);
  else
    v = std::ldexp(1.f + float(mant) / float(1 << mant_bits), exp - bias);
  return negative ? -v : v;
}

}  // namespace conv
}  // namespace qfold
