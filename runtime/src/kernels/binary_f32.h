// Float32 element-wise binary kernels: Add, Sub, Mul, Div, Max, Min over one
// contiguous run of a broadcast (ops/binary.cc splits a broadcast into runs
// whose operands are each contiguous or one repeated value). One algorithm
// (binary_f32_impl.h) over a vector trait, instantiated by binary_f32_avx2.cc
// (8 lanes), binary_f32_avx512f.cc (16) and binary_f32_neon.cc (4); without
// SIMD the op runs its reference loops, which are the oracle.
//
// Each result is one IEEE operation on the same two floats as the reference,
// so the results are bit-identical to it by construction. Max/Min follow
// binary.cc: a NaN operand gives the default quiet NaN, otherwise
// max(a, b) = a < b ? b : a and min(a, b) = b < a ? b : a (which operand wins
// between -0 and +0 included).
#pragma once
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

enum BinaryF32Op { kBinAdd, kBinSub, kBinMul, kBinDiv, kBinMax, kBinMin, kBinaryF32Ops };
// Which operands step through the run.
enum BinaryF32Form {
  kBinVecVec,     // y[i] = a[i] op b[i]
  kBinVecScalar,  // y[i] = a[i] op b[0]
  kBinScalarVec,  // y[i] = a[0] op b[i]
  kBinaryF32Forms
};

// y may alias a or b (the same elements: in-place).
using BinaryF32Fn = void (*)(const float* a, const float* b, float* y, int64_t n);

struct BinaryF32Kernels {
  const char* name;
  BinaryF32Fn fn[kBinaryF32Ops][kBinaryF32Forms];
};

// The variant `f` allows, or null without SIMD (the op's reference loops).
const BinaryF32Kernels* BinaryF32For(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
