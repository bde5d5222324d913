#include "qfold/dtype.h"

namespace qfold {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kUInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kUInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt64: return 8;
    case DType::kBool: return 1;
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kUndefined: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    case DType::kInt4: return "int4";
    case DType::kUInt4: return "uint4";
    case DType::kUndefined: return "undefined";
  }
  return "invalid";
}

bool dtype_is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

size_t dtype_storage_bytes(DType t, int64_t count) {
  if (t == DType::kInt4 || t == DType::kUInt4) return size_t((count + 1) / 2);
  return size_t(count) * dtype_size(t);
}

bool dtype_is_valid(int value) {
  return value > int(DType::kUndefined) && value <= int(DType::kUInt4);
}

}  // namespace qfold
