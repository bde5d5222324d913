// AVX-VNNI indirect GEMM microkernels (igemm_s8.h): VEX vpdpbusd on ymm,
// exact u8 x s8 dot products of 4 bytes into int32 lanes. 6x16 and 3x32
// tiles keep 12 accumulators in the 16 registers.
#include <immintrin.h>

#include "kernels/igemm_s8_x86.h"

namespace qfold {
namespace kernels {
namespace {

struct VAvxVnni : V256Base {
  static constexpr int kWBytes = 1, kChPerAcc = 8;
  using A = __m256i;
  template <bool kXor>
  static A Bcast(const uint8_t* p) {
    const A x = _mm256_set1_epi32(LoadDword(p));
    return kXor ? _mm256_xor_si256(x, _mm256_set1_epi32(int32_t(0x80808080u))) : x;
  }
  static I Dot(I acc, A x, const uint8_t* w) {
    return _mm256_dpbusd_avx_epi32(acc, x, _mm256_loadu_si256(reinterpret_cast<const I*>(w)));
  }
  template <int N>
  static void Finish(const I (&acc)[N], I (&out)[N]) {
    for (int v = 0; v < N; ++v) out[v] = acc[v];
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8AvxVnni[];
const IgemmS8Kernel kIgemmS8AvxVnni[] = {
    {"avxvnni", 3, 32, 1, 1, IgemmX86<VAvxVnni, 3, 4>::Run, 4},
    {"avxvnni", 6, 16, 1, 1, IgemmX86<VAvxVnni, 6, 2>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
