// Element types. Values match schema/qfold.fbs DType.
#pragma once
#include <cstddef>
#include <cstdint>

namespace qfold {

enum class DType : int8_t {
  kUndefined = 0, kFloat32, kFloat16, kBFloat16, kFloat64,
  kInt8, kUInt8, kInt16, kUInt16, kInt32, kUInt32, kInt64, kUInt64, kBool, kInt4, kUInt4
};

// Bytes per element; 0 for sub-byte types (int4) and undefined.
size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool dtype_is_float(DType t);
// Bytes that `count` elements occupy; sub-byte types pack two per byte.
size_t dtype_storage_bytes(DType t, int64_t count);
// True for the values a DType enum may hold.
bool dtype_is_valid(int value);

}  // namespace qfold
