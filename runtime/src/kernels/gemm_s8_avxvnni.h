// The AVX-VNNI int8 GEMM (gemm_s8_avxvnni.cc): VEX-encoded vpdpbusd on 256-bit
// registers, for CPUs with AVX-VNNI but without AVX-512 (or where 512-bit
// code is not wanted). Same packed layouts and epilogue as gemm_s8.h.
#pragma once
#include "kernels/gemm_s8.h"

namespace qfold {
namespace kernels {

// Compiled only for x86-64 (runtime/CMakeLists.txt); needs AVX2, FMA and AVX-VNNI
// (cpuid leaf 7, subleaf 1, EAX bit 4).
const GemmS8Kernels* GemmS8AvxVnni();

}  // namespace kernels
}  // namespace qfold
