// Which taps of one pooling window fall inside the input, and inside input
// plus end padding (AveragePool's count_include_pad divisor), in O(1):
// kernel_shape is an attribute, and with pads as large (auto_pad SAME can ask
// for them) a window may have up to INT64_MAX taps, so a loop over them would
// never end. Included by the per-ISA pooling files: internal linkage and no
// standard-library templates, so no ISA's copy is shared between files.
#pragma once
#include <cstdint>

namespace qfold {
namespace kernels {
namespace {

struct WindowTaps {
  int64_t lo = 0, hi = 0;  // taps [lo, hi) read the input (lo == hi: none)
  int64_t padded = 0;      // taps before in + pad_end
};

// a >= 0, d > 0.
inline int64_t CeilDivNonNegative(int64_t a, int64_t d) {
  return a / d + (a % d != 0 ? 1 : 0);
}

// Taps t in [0, k) at start + t * d. The geometry was validated in checked
// math (window_util.cc): start >= -pad_begin and in + pad_begin, in + pad_end
// and their sum fit int64, so nothing here overflows.
inline WindowTaps TapsOfWindow(int64_t start, int64_t k, int64_t d, int64_t in, int64_t pad_end) {
  WindowTaps w;
  const int64_t lo = start >= 0 ? 0 : CeilDivNonNegative(-start, d);
  int64_t hi = start >= in ? 0 : CeilDivNonNegative(in - start, d);
  if (hi > k) hi = k;
  if (lo < hi) {
    w.lo = lo;
    w.hi = hi;
  }
  const int64_t limit = in + pad_end;
  w.padded = start >= limit ? 0 : CeilDivNonNegative(limit - start, d);
  if (w.padded > k) w.padded = k;
  return w;
}

// a * b for counts >= 0, INT64_MAX when it overflows (a divisor that large
// gives the same averages as the exact one would in float or double).
inline int64_t SaturatingCount(int64_t a, int64_t b) {
  int64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
