// AVX-512 VNNI indirect GEMM microkernels (igemm_s8.h): vpdpbusd on zmm,
// exact u8 x s8 dot products of 4 bytes into int32 lanes. 6x64 tiles keep
// 24 accumulators, 4 weight vectors and a broadcast in the 32 registers;
// 8x32 and 8x16 serve layers with fewer output channels.
#include <immintrin.h>

#include "kernels/igemm_s8_v512.h"

namespace qfold {
namespace kernels {

extern const IgemmS8Kernel kIgemmS8Avx512Vnni[];
const IgemmS8Kernel kIgemmS8Avx512Vnni[] = {
    {"avx512vnni", 6, 64, 1, 1, IgemmX86<V512, 6, 4>::Run, 4},
    {"avx512vnni", 8, 32, 1, 1, IgemmX86<V512, 8, 2>::Run, 4},
    {"avx512vnni", 8, 16, 1, 1, IgemmX86<V512, 8, 1>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
