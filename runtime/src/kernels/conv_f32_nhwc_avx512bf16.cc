// AVX-512 BF16 microkernels of the channels-last float convolutions in bf16
// mode (conv_f32_nhwc.h: IgemmBf16Args, PlaneBf16Args), for CPUs with
// vdpbf16ps but no AMX (Zen 4 and 5, Cooper Lake). vdpbf16ps adds the two
// products of one broadcast channel pair of an activation row and a weight
// row's 16 output channels (the [kc / 2][32][2] packing the AMX tiles read:
// a pair row is two vectors) to 16 fp32 sums, twice the multiply-adds of an
// fp32 FMA in the same time (Zen 5: two a cycle, 6 cycles of latency).
//
// The driver's tiles of 32 positions run as groups of R rows by NB vectors of
// accumulators: 8 x 2 (16 sums, enough chains to hide the latency; 2 weight
// loads and 8 broadcasts per 16 products), or 16 x 1 for panels of at most 16
// channels. Each group takes every k pair of its rows before the next group
// starts, so the sums stay in registers and the epilogue works on them there
// (the AMX kernels store their tiles first).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/conv_bf16_x86.h"

namespace qfold {
namespace kernels {
namespace {

// One line of the next panel's weights is requested per k pair (`fetch`)
// until all are.
struct NextPanel {
  const char* at = nullptr;
  const char* end = nullptr;
  explicit NextPanel(const Bf16Output& a)
      : at(reinterpret_cast<const char*>(a.next_w)),
        end(a.next_w ? at + 2 * a.next_values : nullptr) {}
  void fetch() {
    if (at < end) {
      _mm_prefetch(at, _MM_HINT_T1);
      at += 64;
    }
  }
};

// acc[r][v] += sum over `pairs` channel pairs q of row r's pair q times the
// weights' pair row q (w: [pairs][32][2], vector v its columns 16v..16v+15);
// row r's pairs start at row(r) (bytes).
template <int R, int NB, class RowAt>
inline void DotPairs(__m512 (&acc)[R][NB], RowAt row, const uint16_t* w, int64_t pairs,
                     NextPanel* next) {
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = row(r);
  for (int64_t q = 0; q < pairs; ++q, w += 64) {
    next->fetch();
    __m512bh wv[NB];
    for (int v = 0; v < NB; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + 32 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, rows[r] + 4 * q, 4);
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < NB; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, wv[v]);
    }
  }
}

template <int R, int NB>
inline void InitSums(__m512 (&acc)[R][NB], const __m512* bias) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NB; ++v) acc[r][v] = bias[v];
}

// The k pairs a row takes: those holding a value before the padding (a
// 16-channel 1x1 convolution's rows are padded to 32 for the AMX tiles).
template <class Args>
inline int64_t Pairs(const Args& a) {
  return a.kv > 0 && a.kv < a.kc ? (a.kv + 1) / 2 : a.kc / 2;
}

// Rows per group: 8 x 2 vectors or 16 x 1 (16 accumulators either way).
template <int NB>
constexpr int kRows = NB == 2 ? 8 : 16;

// Both kernels work on a local copy of their arguments: y's stores could
// alias the caller's struct, so its fields were reloaded for every row.
template <int NB, int kEpi, bool kOut16>
void IgemmRows(const IgemmBf16Args& args) {
  const IgemmBf16Args a = args;
  constexpr int64_t kMr = 32;
  constexpr int R = kRows<NB>;
  const int64_t pairs = Pairs(a), tap_values = a.kc * 32;
  __m512 bias[NB];
  __mmask16 mask[NB];
  LoadPanelBias<NB>(a, bias, mask);
  NextPanel next(a);
  for (int64_t t = 0; t * kMr < a.rows; ++t)
    for (int64_t g = 0; g < kMr && t * kMr + g < a.rows; g += R) {
      __m512 acc[R][NB];
      InitSums(acc, bias);
      const uint16_t* const* ind = a.a + t * a.taps * kMr + g;
      for (int64_t tap = 0; tap < a.taps; ++tap, ind += kMr)
        DotPairs(
            acc, [&](int r) { return reinterpret_cast<const uint8_t*>(ind[r]); },
            a.w + tap * tap_values, pairs, &next);
      const int64_t first = t * kMr + g;
      const int64_t n = a.rows - first < R ? a.rows - first : R;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        if (r < n) StoreSums<NB, kEpi, kOut16>(a, acc[r], (first + r) * a.ldy, mask);
    }
}

// Kernel rows of a padded plane (PlaneBf16Args). Vectors need no equally
// spaced rows, so a group takes the next R positions that are output pixels
// and skips the rest (the tiles compute a stride-1 plane's 2 * pad columns a
// row, and a strided output's rows rounded up to 16: a 7x7 output at stride 2
// filled 7 of 16 positions a row).
template <int NB, int kEpi, bool kOut16>
void PlaneRows(const PlaneBf16Args& args) {
  const PlaneBf16Args a = args;
  constexpr int R = kRows<NB>;
  const int64_t pairs = Pairs(a), row_values = a.kc * 32, row_bytes = 2 * a.kernel_row;
  __m512 bias[NB];
  __mmask16 mask[NB];
  LoadPanelBias<NB>(a, bias, mask);
  NextPanel next(a);
  const uint8_t* rows[R];
  int64_t at[R];
  int n = 0;
  // The epilogue loops run over all R rows with constant indices (a loop to
  // n indexed the sums at run time, so they went through the stack).
  auto run = [&] {
    for (int r = n; r < R; ++r) rows[r] = rows[0];  // computed, not stored
    __m512 acc[R][NB];
    InitSums(acc, bias);
    for (int64_t ky = 0; ky < a.kh; ++ky)
      DotPairs(
          acc, [&](int r) { return rows[r] + ky * row_bytes; }, a.w + ky * row_values, pairs,
          &next);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      if (r < n) StoreSums<NB, kEpi, kOut16>(a, acc[r], at[r], mask);
    n = 0;
  };
  // Runs of output pixels along a plane row, each pixel's row and output
  // offset by additions (with a multiplication per position, as much work as
  // the products of a 16-channel 1x1 convolution's group).
  const int64_t pixel_bytes = 2 * a.pixel_step;
  int64_t oy = a.v0 / a.vw, ox = a.v0 % a.vw;
  for (int64_t v = a.v0; v < a.v1 && oy < a.oh;) {
    const int64_t run_end = std::min(a.ow, ox + (a.v1 - v));  // ox past ow: an empty run
    const uint8_t* p = reinterpret_cast<const uint8_t*>(a.x + oy * a.row_step + ox * a.pixel_step);
    int64_t o = (oy * a.ow + ox - a.p0) * a.ldy;
    for (int64_t x = ox; x < run_end; ++x, p += pixel_bytes, o += a.ldy) {
      rows[n] = p;
      at[n] = o;
      if (++n == R) run();
    }
    const int64_t step = std::min(a.vw - ox, a.v1 - v);  // to the next plane row
    v += step;
    ox += step;
    if (ox == a.vw) ox = 0, ++oy;
  }
  if (n > 0) run();
}

void IgemmBf16Avx512(const IgemmBf16Args& a) {
  Dispatch(a, [&](auto nb, auto epi, auto out16) {
    IgemmRows<decltype(nb)::value, decltype(epi)::value, decltype(out16)::value>(a);
  });
}

void PlaneBf16Avx512(const PlaneBf16Args& a) {
  Dispatch(a, [&](auto nb, auto epi, auto out16) {
    PlaneRows<decltype(nb)::value, decltype(epi)::value, decltype(out16)::value>(a);
  });
}

}  // namespace

extern const ConvNhwcBf16Kernels kConvNhwcBf16Avx512;
// No tile state (begin/end); about twice fp32's multiply-adds a cycle; im2col
// rows from 33 output channels on (Zen 5, 3x3 RGB stems, fp32 -> bf16 ms:
// 16 outputs at 160x160 0.13 -> 0.23, 32 at 112x112 0.11 -> 0.14, 64 at
// 111x111 0.27 -> 0.20).
const ConvNhwcBf16Kernels kConvNhwcBf16Avx512 = {"avx512bf16",
                                                 ConvertBf16,
                                                 ConvertBf16Flat,
                                                 WidenBf16,
                                                 IgemmBf16Avx512,
                                                 PlaneBf16Avx512,
                                                 Im2colBf16,
                                                 GatherRowsBf16,
                                                 nullptr,
                                                 nullptr,
                                                 2,
                                                 33};

}  // namespace kernels
}  // namespace qfold
