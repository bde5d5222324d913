// float16 -> float32 widening of weights the converter stored as float16
// (OpTrait kTraitHalfWeights). Every float16 number is exactly a float32, so
// the variants give the same bits (the reference is core/half.h's scalar
// conversion, x86 uses F16C's vcvtph2ps, Arm NEON fcvtl); only signaling NaNs
// may differ (the SIMD ones quiet them), and the converter never stores one.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace qfold {
namespace kernels {

// dst[i] = float(src[i]) for i < n.
using HalfToF32Fn = void (*)(const uint16_t* src, float* dst, size_t n);

void HalfToF32Reference(const uint16_t* src, float* dst, size_t n);

// The variant `f` allows (never null: the reference without SIMD).
// *variant (if given): its name, or nullptr for the reference.
HalfToF32Fn HalfToF32For(const CpuFeatures& f, const char** variant = nullptr);

}  // namespace kernels
}  // namespace qfold
