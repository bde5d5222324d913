// AVX2 indirect GEMM microkernels (igemm_s8.h). vpmaddubsw would saturate
// its 16-bit pair sums, so products go through vpmaddwd, whose 32-bit pair
// sums are exact: the weights are packed as s16 at prepare ([ch][4] per k
// step) and the driver widens the activations to u16 once per run
// (abytes = 2), so a k step of a row is one vbroadcastsd from memory (4 u16,
// 4 times; no shuffle-port zero-extension per row and step) and one
// vpmaddwd per 4 channels gives the two pair sums of each; the epilogue
// adds the pairs (vphaddd). 6x8 tiles: 12 accumulators, 2 weight vectors
// and the broadcast in the 16 registers; per k step 12 vpmaddwd + 12 vpaddd,
// close to the vpmaddwd peak in L1.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8_x86.h"

namespace qfold {
namespace kernels {
namespace {

struct VAvx2 : V256Base {
  static constexpr int kWBytes = 2, kChPerAcc = 4;
  using A = __m256i;
  static constexpr int kABytes = 2;
  // Already u8 values (the driver xor-ed int8 activations while widening).
  template <bool>
  static A Bcast(const uint8_t* p) {
    // memcpy: the widened rows are 2-byte aligned only (a double load there
    // is undefined behaviour); compilers still emit one vpbroadcastq from memory.
    int64_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm256_set1_epi64x(v);
  }
  // Lanes 2i and 2i + 1: a0 * w0 + a1 * w1 and a2 * w2 + a3 * w3 of channel i.
  static I Dot(I acc, A x, const uint8_t* w) {
    return _mm256_add_epi32(
        acc, _mm256_madd_epi16(x, _mm256_loadu_si256(reinterpret_cast<const I*>(w))));
  }
  // Pairs of lanes summed, channels back in order (vphaddd works per 128-bit half).
  template <int N>
  static void Finish(const I (&acc)[N], I (&out)[N / 2]) {
    for (int v = 0; v < N / 2; ++v)
      out[v] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[2 * v], acc[2 * v + 1]), 0xd8);
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8Avx2[];
const IgemmS8Kernel kIgemmS8Avx2[] = {
    {"avx2", 6, 8, 2, 2, IgemmX86<VAvx2, 6, 1>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};

}  // namespace kernels
}  // namespace qfold
