// Helpers shared by the shape and data-movement ops (Reshape, Slice, Pad...):
// dtype checks, output setters and one generic element-gathering copy that
// Transpose, Slice, Expand, Tile and Pad all reduce to.
#pragma once
#include <climits>
#include <cstdint>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"

namespace qfold {

// Unsupported for dtypes without a whole-byte element size (int4, uint4).
Status CheckByteDType(const KernelContext& ctx, const Tensor* t, const char* what);
// Invalid unless t holds int32 or int64 (shape/axes/indices style inputs).
Status CheckIntDType(const KernelContext& ctx, const Tensor* t, const char* what);

// ONNX TensorProto.DataType number (Cast's `to`, SequenceEmpty's `dtype`) ->
// DType: kUndefined for ONNX types qfold has no kernels for, with `known`
// false for numbers ONNX does not define (ops/cast.cc).
DType DTypeFromOnnxNumber(int64_t onnx, bool* known);

// Split sizes along an axis of `dim` (kUnknownDim: not checked against it):
// non-negative, summing to dim without overflow (ops/split.cc).
Status CheckSplitSizes(const KernelContext& ctx, const std::vector<int64_t>& sizes, int64_t dim);

// Sets a known-rank output.
void SetOutput(Tensor* out, DType dtype, Shape shape);
// Sets an output of unknown rank (converter only).
void SetOutputUnknownRank(Tensor* out, DType dtype);

// Product of dims, or kUnknownDim when one is unknown (0 wins over unknown).
int64_t DimProduct(const Shape& shape, int begin, int end);

// Marks offsets that stand for "write the fill element" in GatherCopy.
constexpr int64_t kFillOffset = INT64_MIN;

// For every output index (i_0, ..., i_{r-1}) over the shape given by the sizes
// of `offsets`, copies the input element at sum_a offsets[a][i_a] (in elements)
// to the next output element, or `fill` when any offset is kFillOffset.
// Rank 0 copies the single element at offset 0.
void GatherCopy(const std::vector<std::vector<int64_t>>& offsets, size_t elem_size, const void* in,
                void* out, const void* fill);

}  // namespace qfold
