// The runtime's view of a tensor: dtype, shape and (when known) its data.
// The same struct serves shape inference in the converter, where dims may be
// unknown (-1) and the rank itself may be unknown (rank_known == false).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/runtime.h"

namespace qfold {

constexpr int64_t kUnknownDim = -1;
constexpr int kMaxRank = 8;

struct SequenceValue;  // core/sequence.h

struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  bool rank_known = true;
  // Non-null when the value is known: constants, plan-time folded values,
  // and every activation once the session has planned its arena.
  void* data = nullptr;
  // An ONNX sequence of tensors: dtype is its elements' type, shape (and
  // rank_known) what every element is known to have, -1 where they may
  // differ; `data` stays null. `sequence` points at the value once it is
  // known (the runtime, after the producer ran; never in the converter).
  bool is_sequence = false;
  // An ONNX optional of what the fields above describe. Its value is boxed in
  // `sequence` like a sequence's (SequenceValue::none; an optional tensor is
  // its single element), so `data` stays null for it too.
  bool is_optional = false;
  SequenceValue* sequence = nullptr;

  // Held in a SequenceValue (sequences and optionals), not in `data`.
  bool boxed() const { return is_sequence || is_optional; }

  bool shape_known() const {
    if (!rank_known) return false;
    for (int64_t d : shape)
      if (d < 0) return false;
    return true;
  }
  int rank() const { return int(shape.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Packed sub-byte types (int4) take half a byte per element, rounded up.
  size_t bytes() const { return dtype_storage_bytes(dtype, numel()); }
  template <class T>
  T* ptr() {
    return static_cast<T*>(data);
  }
  template <class T>
  const T* ptr() const {
    return static_cast<const T*>(data);
  }
};

// Strides in elements for a row-major shape.
std::vector<int64_t> ContiguousStrides(const Shape& shape);
std::string ShapeToString(const Shape& shape);
// Overflow-checked element count; false when the product overflows or a dim is negative.
bool CheckedNumel(const Shape& shape, int64_t* out);

}  // namespace qfold
