// The parts of the 256-bit x86 GEMMs (gemm_s8_avx2.cc, gemm_s8_avxvnni.cc)
// that do not depend on how the int8 dot products are formed: the panel
// loop, the epilogue (zero-point terms, requantization, byte stores) and
// requant_row. Each file supplies its microkernel as
//   struct Micro { static constexpr int kMr, kNr;
//                  template <bool kWeightsLeft, int kRows> static void Accumulate(
//                      const uint8_t* lp, const uint8_t* rp, int64_t k4,
//                      __m256i (&acc)[kMr][2]); };
// which fills acc[0..kRows) from the first kRows rows of a left panel (the
// panel keeps its kMr-row stride). kRows < kMr is the last, partial row tile,
// and the whole product when there are few rows (one-row GEMV: the recurrent
// step of an LSTM at batch 1, a decoder's MatMul), so its empty rows cost
// nothing.
// Everything is in an anonymous namespace: each ISA file compiles its own
// copy with its own -m flags, and copies must not be merged by the linker.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

// See gemm_s8_avx512vnni.cc: float clamp to integer bounds, NaN -> zero point.
inline __m256i Requant(__m256i acc, __m256 mult, __m256 lo, __m256 hi, __m256i yzp) {
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), mult);
  f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
  f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(f), yzp);
}

// Stores n <= 8 lanes (none when n <= 0).
inline void StoreInt32(__m256i v, int64_t n, int32_t* y) {
  if (n >= 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), v);
  } else if (n > 0) {
    alignas(32) int32_t tmp[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), v);
    std::memcpy(y, tmp, size_t(n) * sizeof(int32_t));
  }
}

// Stores the low byte of n <= 8 lanes (values are within [-128, 255]).
inline void StoreBytes(__m256i v, int64_t n, uint8_t* y) {
  __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  p = _mm_packus_epi16(_mm_and_si128(p, _mm_set1_epi16(0xff)), p);
  if (n >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y), p);
  } else if (n > 0) {
    alignas(16) uint8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), p);
    std::memcpy(y, tmp, size_t(n));
  }
}

// Micro::Accumulate<kWeightsLeft, n> with n = rows (1..kMr) chosen at run time.
template <class Micro, bool kWeightsLeft, int kRows = Micro::kMr>
__attribute__((always_inline)) inline void AccumulateRows(int rows, const uint8_t* lp,
                                                          const uint8_t* rp, int64_t k4,
                                                          __m256i (&acc)[Micro::kMr][2]) {
  if constexpr (kRows > 1) {
    if (rows < kRows) return AccumulateRows<Micro, kWeightsLeft, kRows - 1>(rows, lp, rp, k4, acc);
  }
  Micro::template Accumulate<kWeightsLeft, kRows>(lp, rp, k4, acc);
}

template <class Micro, bool kWeightsLeft>
void GemmImpl256(const GemmS8Args& a) {
  constexpr int kMr = Micro::kMr, kNr = Micro::kNr;
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  const __m256 lo = _mm256_set1_ps(float(a.lo - a.yzp)), hi = _mm256_set1_ps(float(a.hi - a.yzp));
  const __m256i yzp = _mm256_set1_epi32(a.yzp);
  for (int64_t jp = a.panel_begin; jp < pe; ++jp) {
    const uint8_t* rp = a.right + jp * a.k4 * 4 * kNr;
    const int64_t c0 = jp * kNr;
    const int64_t n0 = a.cols - c0, n1 = a.cols - c0 - 8;
    __m256i xs[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i cb[2] = {xs[0], xs[0]}, cz[2] = {xs[0], xs[0]};
    __m256 cm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int v = 0; v < 2; ++v) {
      const int64_t c = c0 + 8 * v;
      if (kWeightsLeft) {
        if (a.wzp) xs[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xsum + c));
      } else {
        cb[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bias + c));
        cm[v] = _mm256_loadu_ps(a.mult + c);
        if (a.wzp) cz[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.wzp + c));
      }
    }
    for (int64_t ip = 0; ip < a.rows; ip += kMr) {
      __m256i acc[kMr][2];
      const int nrow = a.rows - ip < kMr ? int(a.rows - ip) : kMr;
      AccumulateRows<Micro, kWeightsLeft>(nrow, a.left + ip * a.k4 * 4, rp, a.k4, acc);
      for (int r = 0; r < nrow; ++r) {
        const int64_t row = ip + r;
        for (int v = 0; v < 2; ++v) {
          __m256i x = acc[r][v];
          __m256 mult = cm[v];
          if (kWeightsLeft) {
            x = _mm256_add_epi32(x, _mm256_set1_epi32(a.bias[row]));
            if (a.wzp)
              x = _mm256_sub_epi32(x, _mm256_mullo_epi32(_mm256_set1_epi32(a.wzp[row]), xs[v]));
            mult = _mm256_set1_ps(a.mult[row]);
          } else {
            x = _mm256_add_epi32(x, cb[v]);
            if (a.wzp)
              x = _mm256_sub_epi32(x, _mm256_mullo_epi32(cz[v], _mm256_set1_epi32(a.xsum[row])));
          }
          if (a.y32)
            StoreInt32(x, v ? n1 : n0, a.y32 + row * a.ldy + c0 + 8 * v);
          else
            StoreBytes(Requant(x, mult, lo, hi, yzp), v ? n1 : n0, a.y + row * a.ldy + c0 + 8 * v);
        }
      }
    }
  }
}

template <class Micro>
void Gemm256(const GemmS8Args& a) {
  if (a.weights_left)
    GemmImpl256<Micro, true>(a);
  else
    GemmImpl256<Micro, false>(a);
}

void RequantRow256(const int32_t* acc, int64_t n, int32_t bias, float mult, int32_t yzp, int32_t lo,
                   int32_t hi, uint8_t* y) {
  const __m256 vlo = _mm256_set1_ps(float(lo - yzp)), vhi = _mm256_set1_ps(float(hi - yzp));
  const __m256 vm = _mm256_set1_ps(mult);
  const __m256i vz = _mm256_set1_epi32(yzp), vb = _mm256_set1_epi32(bias);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    StoreBytes(Requant(_mm256_add_epi32(v, vb), vm, vlo, vhi, vz), 8, y + i);
  }
  if (i < n) {
    alignas(32) int32_t tmp[8] = {};
    std::memcpy(tmp, acc + i, size_t(n - i) * sizeof(int32_t));
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
    StoreBytes(Requant(_mm256_add_epi32(v, vb), vm, vlo, vhi, vz), n - i, y + i);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
