// Geometry shared by the sliding-window ops (Conv, ConvTranspose, pooling):
// parsing kernel_shape/strides/dilations/pads/auto_pad and computing the
// output spatial size, plus an odometer for iterating N-d index spaces.
#pragma once
#include <cstdint>
#include <vector>

#include "core/op.h"

namespace qfold {

struct WindowGeometry {
  // One entry per spatial axis.
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, out;
};

// Fills g for an op whose input has the given spatial dims (kUnknownDim
// allowed: that axis's output is then unknown too) and kernel dims (already
// read from kernel_shape or W; all known). Reads "strides", "dilations",
// "pads" and "auto_pad". ceil_mode selects pooling's ceil output size, where
// the last window must start inside the input or its begin padding.
Status ComputeWindowGeometry(const KernelContext& ctx, const Shape& in_spatial,
                             const std::vector<int64_t>& kernel, bool ceil_mode, WindowGeometry* g);

// Reads an ints attribute that must hold `n` positive values (or be absent:
// then all `dflt`). Used for strides, dilations and kernel_shape.
Status ReadPositiveInts(const KernelContext& ctx, const char* name, size_t n, int64_t dflt,
                        std::vector<int64_t>* out);

// Floor division for possibly negative numerators (positive divisor).
inline int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Advances a row-major multi-index over `dims`; false after the last one.
inline bool NextIndex(const std::vector<int64_t>& dims, std::vector<int64_t>* idx) {
  for (int i = int(dims.size()) - 1; i >= 0; --i) {
    if (++(*idx)[i] < dims[i]) return true;
    (*idx)[i] = 0;
  }
  return false;
}

inline int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

}  // namespace qfold
