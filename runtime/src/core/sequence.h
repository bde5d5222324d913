// The value of an ONNX sequence at run time: an ordered list of tensors that
// may differ in shape. Elements are immutable once made, so sequences share
// them: SequenceInsert or Identity copy pointers, not data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace qfold {

struct SequenceElement {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::shared_ptr<const uint8_t> data;  // 64-byte aligned, 64 bytes of tail padding
  size_t bytes = 0;

  // A tensor view of the element (read only: kernels take `void*`).
  Tensor AsTensor() const {
    Tensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.data = const_cast<uint8_t*>(data.get());
    return t;
  }
};

// Memory one element of `bytes` bytes holds: its block (64-byte aligned, 64
// bytes of tail padding) and the bookkeeping beside it (shared_ptr control
// block, the element itself). A sequence of many tiny elements costs this,
// not the sum of their bytes.
inline size_t SequenceElementFootprint(size_t bytes) {
  return (bytes + 64 + 63) / 64 * 64 + 128;
}

struct SequenceValue {
  std::vector<SequenceElement> elements;
  // Optionals only: no value (elements then empty). A present optional tensor
  // is its one element; a present optional sequence, its elements.
  bool none = false;

  // The memory the elements hold (SequenceElementFootprint each).
  size_t bytes() const {
    size_t n = 0;
    for (const SequenceElement& e : elements) n += SequenceElementFootprint(e.bytes);
    return n;
  }
};

// A new element holding a copy of `bytes` bytes at `data` (null data: zeros);
// false when the allocation fails.
bool MakeSequenceElement(DType dtype, const Shape& shape, const void* data, size_t bytes,
                         SequenceElement* out);

}  // namespace qfold
