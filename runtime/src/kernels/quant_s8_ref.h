// Scalar pieces shared by the quant_s8 ISA files (vector tails). Internal
// linkage on purpose: each ISA file compiles them with its own flags, and a
// shared inline definition could otherwise be taken from an AVX-512 object.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/quant_s8.h"

namespace qfold {
namespace kernels {
namespace {

// RoundAddSaturate of ops/quant_util.h for a float quotient.
inline int32_t QS8RoundAddSaturate(float q, int32_t zp, int32_t lo, int32_t hi) {
  if (q != q) return zp < lo ? lo : (zp > hi ? hi : zp);
  const double r = std::nearbyint(double(q));
  if (r <= double(lo) - double(zp)) return lo;
  if (r >= double(hi) - double(zp)) return hi;
  return int32_t(int64_t(r) + zp);
}

inline int32_t QS8Load(const void* p, int64_t i, bool is_signed) {
  return is_signed ? int32_t(static_cast<const int8_t*>(p)[i])
                   : int32_t(static_cast<const uint8_t*>(p)[i]);
}

inline void QS8Store(void* p, int64_t i, int32_t v) {
  static_cast<uint8_t*>(p)[i] = uint8_t(v);  // two's complement: int8 too
}

inline void QS8QuantizeScalar(const float* x, void* y, int64_t begin, int64_t end,
                              const float* scale, const float* zpf, bool per_elem, int32_t lo,
                              int32_t hi) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t p = per_elem ? i : 0;
    QS8Store(y, i, QS8RoundAddSaturate(x[i] / scale[p], int32_t(zpf[p]), lo, hi));
  }
}

inline void QS8DequantizeScalar(const void* x, float* y, int64_t begin, int64_t end,
                                const float* scale, const float* zpf, bool per_elem,
                                bool is_signed) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t p = per_elem ? i : 0;
    y[i] = float(QS8Load(x, i, is_signed) - int32_t(zpf[p])) * scale[p];
  }
}

inline void QS8BinaryScalar(const QBinaryS8Params& p, const void* a, int a_step, const void* b,
                            int b_step, void* y, int64_t begin, int64_t end) {
  const float fa = p.a_factor(), fb = p.b_factor();
  for (int64_t i = begin; i < end; ++i) {
    const float va = float(QS8Load(a, i * a_step, p.is_signed) - p.a_zp) * fa;
    const float vb = float(QS8Load(b, i * b_step, p.is_signed) - p.b_zp) * fb;
    QS8Store(y, i, QS8RoundAddSaturate(p.Combine(va, vb), p.c_zp, p.lo, p.hi));
  }
}

inline void QS8LookupScalar(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t begin,
                            int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = table[x[i]];
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
