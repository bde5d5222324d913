// Overflow-checked int64 arithmetic for geometry computed from attributes
// (strides, pads, dilations, kernel sizes): used where sizes and offsets are
// validated in infer/prepare, so the kernels' index products cannot wrap.
// Each returns false on overflow and leaves *out unspecified.
#pragma once

#include <cstdint>

namespace qfold {

inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool CheckedSub(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_sub_overflow(a, b, out);
}
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
// a * b + c
inline bool CheckedMulAdd(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t p = 0;
  return CheckedMul(a, b, &p) && CheckedAdd(p, c, out);
}

}  // namespace qfold
