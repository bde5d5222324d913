// AVX2 indirect GEMM microkernels (igemm_s8.h). vpmaddubsw would saturate
// its 16-bit pair sums, so products go through vpmaddwd, whose 32-bit pair
// sums are exact: the weights are packed as s16 at prepare and the driver
// widens the activations to u16 once per run (abytes = 2).
//
// 6x16 (kgroup 2): per k pair of a row one vpbroadcastd from memory, and per
// 8 channels one vpmaddwd of it with their 8 pairs: each lane sums one
// channel, so the accumulators start from the bias and need no reduction;
// 12 accumulators, 2 weight vectors and the broadcast in the 16 registers.
// Against 6x8 it reads each activation once per 16 channels instead of 8 (the
// stream from L2 of layers whose rows outgrow L1) and stores 96 outputs per
// tile with no vphaddd: small-K layers are mostly epilogue.
//
// 6x8 (kgroup 4): per 4 k of a row one vpbroadcastq (4 u16) and per 4
// channels one vpmaddwd, the two pair sums of each channel added by vphaddd
// in the epilogue. Picked for narrow layers (8 or fewer channels per group,
// PickKernel).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8_x86.h"

namespace qfold {
namespace kernels {
namespace {

// What both AVX2 layouts share: activations widened to u16 by the driver
// (already u8 values: it xor-ed int8 activations while widening), a
// broadcast in one register, the packed requantization.
struct VAvx2Widened : V256Base {
  static constexpr int kABytes = 2;
  static constexpr bool kPackedRequant = true;
  using A = __m256i;
};

// 4 k of a row (4 u16) broadcast, 4 channels per accumulator.
struct VAvx2Quads : VAvx2Widened {
  static constexpr int kWBytes = 2, kChPerAcc = 4;
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

// A k pair of a row (2 u16) broadcast, 8 channels per accumulator. The
// convolutions' weights (WBytes 1) stay s8 in memory and are sign-extended
// per use (vpmovsxbw); the integer Winograd's transformed filters (up to
// 9 * 128) are s16 (WBytes 2).
template <int WBytes>
struct VAvx2Pairs : VAvx2Widened {
  static constexpr int kWBytes = WBytes, kChPerAcc = 8, kSub = 2;
  template <bool>
  static A Bcast(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm256_set1_epi32(v);
  }
  // Lane i: a0 * w0 + a1 * w1 of channel i.
  static I Dot(I acc, A x, const uint8_t* w) {
    const I w16 = WBytes == 1
                      ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)))
                      : _mm256_loadu_si256(reinterpret_cast<const I*>(w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w16));
  }
  template <int N>
  static void Finish(const I (&acc)[N], I (&out)[N]) {
    for (int v = 0; v < N; ++v) out[v] = acc[v];
  }
};

}  // namespace

extern const IgemmS8Kernel kIgemmS8Avx2[];
const IgemmS8Kernel kIgemmS8Avx2[] = {
    {"avx2", 5, 16, 1, 2, IgemmX86<VAvx2Pairs<1>, 5, 2>::Run, 2},
    {"avx2", 6, 8, 2, 2, IgemmX86<VAvx2Quads, 6, 1>::Run, 4},
    {"", 0, 0, 0, 0, nullptr, 0},
};
// The integer Winograd's GEMMs (raw mode), over its transformed filters packed
// in their layout (16-bit); 4 rows where that pads a block's rows less
// (ResNet-50's 7x7 layers: one block of 16 tiles, 20 rows in 5-row tiles).
extern const IgemmS8Kernel kIgemmS8Avx2Winograd[];
const IgemmS8Kernel kIgemmS8Avx2Winograd[] = {
    {"avx2", 5, 16, 2, 2, IgemmX86<VAvx2Pairs<2>, 5, 2>::Run, 2},
    {"avx2", 4, 16, 2, 2, IgemmX86<VAvx2Pairs<2>, 4, 2>::Run, 2},
};

}  // namespace kernels
}  // namespace qfold
