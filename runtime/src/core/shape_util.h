// Shape helpers shared by the op files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/tensor.h"

namespace qfold {

// NumPy-style multidirectional broadcast. Unknown dims (-1) broadcast against
// 1 to unknown and against a known d>1 to d. On failure returns false and
// writes a message naming the axis and both dims to *err.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out, std::string* err);

// Normalizes a possibly negative axis into [0, rank); false when out of range.
bool NormalizeAxis(int64_t axis, int rank, int* out);

// Reads an integer tensor (int32 or int64) whose data is known into a vector.
bool ReadInts(const Tensor* t, std::vector<int64_t>* out);
// Reads a float tensor (float32/float16/float64) whose data is known.
bool ReadFloats(const Tensor* t, std::vector<float>* out);
// The same into `out` (its first `count` values, -1: all numel), allocating nothing.
bool ReadFloatsInto(const Tensor* t, float* out, int64_t count = -1);

// Marks every present output as having unknown rank (converter only).
void SetOutputsUnknown(KernelContext& ctx);

// Iterates a broadcast binary/ternary op: for each output element, the
// flat index of the element in every input. `in_shapes` are the inputs'
// shapes, right-aligned against `out`.
class BroadcastIndexer {
 public:
  BroadcastIndexer(const std::vector<Shape>& in_shapes, const Shape& out);
  // Input strides (in elements, 0 on broadcast axes), aligned to out's rank.
  const std::vector<int64_t>& strides(int input) const { return strides_[input]; }
  const Shape& out_shape() const { return out_; }

 private:
  std::vector<std::vector<int64_t>> strides_;
  Shape out_;
};

}  // namespace qfold

// Runs `body` with `T` bound to the C++ type of `dtype`; `on_error` otherwise.
#define QF_CASE_TYPE(DT, CT, ...) \
  case ::qfold::DType::DT: {      \
    using T = CT;                 \
    __VA_ARGS__;                  \
    break;                        \
  }
#define QF_DISPATCH_NUMERIC(dtype, on_error, ...)                   \
  switch (dtype) {                                                   \
    QF_CASE_TYPE(kFloat32, float, __VA_ARGS__)                       \
    QF_CASE_TYPE(kFloat64, double, __VA_ARGS__)                      \
    QF_CASE_TYPE(kInt8, int8_t, __VA_ARGS__)                         \
    QF_CASE_TYPE(kUInt8, uint8_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kInt16, int16_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt16, uint16_t, __VA_ARGS__)                     \
    QF_CASE_TYPE(kInt32, int32_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt32, uint32_t, __VA_ARGS__)                     \
    QF_CASE_TYPE(kInt64, int64_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt64, uint64_t, __VA_ARGS__)                     \
    default: on_error;                                               \
  }
// Numeric types plus bool (as uint8-sized bool).
#define QF_DISPATCH_ALL(dtype, on_error, ...)                        \
  switch (dtype) {                                                   \
    QF_CASE_TYPE(kFloat32, float, __VA_ARGS__)                       \
    QF_CASE_TYPE(kFloat64, double, __VA_ARGS__)                      \
    QF_CASE_TYPE(kInt8, int8_t, __VA_ARGS__)                         \
    QF_CASE_TYPE(kUInt8, uint8_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kInt16, int16_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt16, uint16_t, __VA_ARGS__)                     \
    QF_CASE_TYPE(kInt32, int32_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt32, uint32_t, __VA_ARGS__)                     \
    QF_CASE_TYPE(kInt64, int64_t, __VA_ARGS__)                       \
    QF_CASE_TYPE(kUInt64, uint64_t, __VA_ARGS__)                     \
    QF_CASE_TYPE(kBool, bool, __VA_ARGS__)                           \
    default: on_error;                                               \
  }
