// Budget for the drivers that copy the padded input plane their windows cover
// ((oh - 1) * sh + (kh - 1) * dh + 1 rows, likewise columns) into scratch:
// NCHW depthwise (float and int8) and the int8 im2col convolution.
#pragma once
#include <cstdint>

#include "core/checked_math.h"

namespace qfold {
namespace kernels {

// The covered extent of one axis; false when it overflows.
inline bool CoveredExtent(int64_t out, int64_t stride, int64_t kernel, int64_t dilation,
                          int64_t* extent) {
  int64_t reach = 0;
  return CheckedMul(out > 0 ? out - 1 : 0, stride, extent) &&
         CheckedMulAdd(kernel - 1, dilation, 1, &reach) && CheckedAdd(*extent, reach, extent);
}

// True when a padded plane of `rows` x `cols` elements is worth copying.
// Pads are not limited by the kernel, so a few windows spread by a huge stride
// over huge pads would make it any size (a 3x3 output over 10^5 pads asks
// 4 * 10^10 elements) while the input and output stay tiny. Such planes are
// refused; the caller then runs the reference kernel, whose time and memory
// follow the output and the taps. Real models pad by less than a kernel, so
// their planes stay well within input + output * taps.
inline bool PaddedPlaneFits(int64_t rows, int64_t cols, int64_t in_plane, int64_t out_plane,
                            int64_t taps) {
  int64_t plane = 0, work = 0;
  if (!CheckedMul(rows, cols, &plane) || !CheckedMulAdd(out_plane, taps, in_plane, &work))
    return false;
  constexpr int64_t kAlwaysFine = int64_t(1) << 16;  // small planes: never worth a fallback
  return plane <= kAlwaysFine || plane / 4 <= work;
}

}  // namespace kernels
}  // namespace qfold
