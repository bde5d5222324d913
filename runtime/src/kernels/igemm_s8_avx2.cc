// AVX2 indirect GEMM microkernels (igemm_s8.h). vpmaddubsw would saturate
// its 16-bit pair sums, so products go through vpmaddwd, whose 32-bit pair
// sums are exact: the weights are packed as s16 at prepare ([ch][4] per k
// step), the activation dword is zero-extended to 4 u16 and repeated, and
// one vpmaddwd gives, for 4 channels, the two pair sums of each; the
// epilogue adds the pairs (vphaddd). 6x8 tiles (12 accumulators) measured
// fastest on Zen 3, ~90% of the vpmaddwd peak in L1; wider panels spill
// or stall.
#include <immintrin.h>

#include "kernels/igemm_s8_x86.h"

namespace qfold {
namespace kernels {
namespace {

struct VAvx2 : V256Base {
  static constexpr int kWBytes = 2, kChPerAcc = 4;
  using A = __m256i;
  template <bool kXor>
  static A Bcast(const uint8_t* p) {
    // vbroadcastss: one load, no shuffle.
    __m128i d = _mm_castps_si128(_mm_broadcast_ss(reinterpret_cast<const float*>(p)));
    if (kXor) d = _mm_xor_si128(d, _mm_set1_epi8(char(0x80)));
    return _mm256_cvtepu8_epi16(d);  // a0 a1 a2 a3, 4 times
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
    {Isa::kAvx2, 6, 8, 2, IgemmX86<VAvx2, 6, 1>::Run},
    {Isa::kReference, 0, 0, 0, nullptr},
};

}  // namespace kernels
}  // namespace qfold
