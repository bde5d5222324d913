// AVX-512 VNNI GEMM (gemm_s8.h): vpdpbusd multiplies u8 by s8 and adds four
// products into each int32 lane without intermediate saturation, so the
// sum is exact (int32 wraparound, as in the reference). 8x32 tiles: 16 zmm
// accumulators, the narrow operand broadcast 4 bytes at a time.
#include <immintrin.h>

#include <cstring>

#include "kernels/gemm_s8.h"
#include "kernels/gemm_s8_pack_x86.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 8, kNr = 32;

// The first kRows rows of a left panel (stride kMr rows): a partial last row
// tile, or all rows when there are few (a one-row GEMV), without the empty ones.
template <bool kWeightsLeft, int kRows>
__attribute__((always_inline)) inline void Accumulate(const uint8_t* lp, const uint8_t* rp,
                                                      int64_t k4, __m512i (&acc)[kMr][2]) {
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < k4; ++q, lp += 4 * kMr, rp += 4 * kNr) {
    const __m512i r0 = _mm512_loadu_si512(rp);
    const __m512i r1 = _mm512_loadu_si512(rp + 64);
    for (int r = 0; r < kRows; ++r) {
      int32_t l;
      std::memcpy(&l, lp + 4 * r, 4);
      const __m512i lb = _mm512_set1_epi32(l);
      if (kWeightsLeft) {  // right = unsigned activations, left = signed weights
        acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], r0, lb);
        acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], r1, lb);
      } else {
        acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], lb, r0);
        acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], lb, r1);
      }
    }
  }
}

// Accumulate<kWeightsLeft, n> with n = rows (1..kMr) chosen at run time.
template <bool kWeightsLeft, int kRows = kMr>
__attribute__((always_inline)) inline void AccumulateRows(int rows, const uint8_t* lp,
                                                          const uint8_t* rp, int64_t k4,
                                                          __m512i (&acc)[kMr][2]) {
  if constexpr (kRows > 1) {
    if (rows < kRows) return AccumulateRows<kWeightsLeft, kRows - 1>(rows, lp, rp, k4, acc);
  }
  Accumulate<kWeightsLeft, kRows>(lp, rp, k4, acc);
}

// clamp(round(float(acc) * mult) + yzp): clamping in float before the
// conversion equals the reference's clamp after rounding because the bounds
// (lo - yzp, hi - yzp) are integers; NaN becomes 0, i.e. the zero point.
inline __m512i Requant(__m512i acc, __m512 mult, __m512 lo, __m512 hi, __m512i yzp) {
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mult);
  f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);
  f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
  return _mm512_add_epi32(_mm512_cvtps_epi32(f), yzp);  // MXCSR default: half to even
}

inline __mmask16 TailMask(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// A panel's epilogue operands: bias, multipliers and zero-point terms of its
// 32 columns (weights right), or the column sums (weights left).
struct PanelTerms {
  int64_t c0 = 0;
  __mmask16 m0 = 0, m1 = 0;
  __m512i xs0, xs1, cb0, cb1, cz0, cz1;
  __m512 cm0, cm1;
};

template <bool kWeightsLeft>
inline PanelTerms LoadPanel(const GemmS8Args& a, int64_t jp) {
  PanelTerms t;
  t.c0 = jp * kNr;
  t.m0 = TailMask(a.cols - t.c0);
  t.m1 = TailMask(a.cols - t.c0 - 16);
  t.xs0 = t.xs1 = t.cb0 = t.cb1 = t.cz0 = t.cz1 = _mm512_setzero_si512();
  t.cm0 = t.cm1 = _mm512_setzero_ps();
  if (kWeightsLeft) {
    if (a.wzp) {
      t.xs0 = _mm512_loadu_si512(a.xsum + t.c0);
      t.xs1 = _mm512_loadu_si512(a.xsum + t.c0 + 16);
    }
  } else {
    t.cb0 = _mm512_loadu_si512(a.bias + t.c0);
    t.cb1 = _mm512_loadu_si512(a.bias + t.c0 + 16);
    t.cm0 = _mm512_loadu_ps(a.mult + t.c0);
    t.cm1 = _mm512_loadu_ps(a.mult + t.c0 + 16);
    if (a.wzp) {
      t.cz0 = _mm512_loadu_si512(a.wzp + t.c0);
      t.cz1 = _mm512_loadu_si512(a.wzp + t.c0 + 16);
    }
  }
  return t;
}

// Row `row` of a panel's 32 columns: bias, zero-point terms, then int32 out
// or requantized bytes.
template <bool kWeightsLeft>
inline void StoreRow(const GemmS8Args& a, const PanelTerms& t, int64_t row, __m512i v0,
                     __m512i v1) {
  __m512 mult0 = t.cm0, mult1 = t.cm1;
  if (kWeightsLeft) {
    const __m512i b = _mm512_set1_epi32(a.bias[row]);
    v0 = _mm512_add_epi32(v0, b);
    v1 = _mm512_add_epi32(v1, b);
    if (a.wzp) {
      const __m512i z = _mm512_set1_epi32(a.wzp[row]);
      v0 = _mm512_sub_epi32(v0, _mm512_mullo_epi32(z, t.xs0));
      v1 = _mm512_sub_epi32(v1, _mm512_mullo_epi32(z, t.xs1));
    }
    mult0 = mult1 = _mm512_set1_ps(a.mult[row]);
  } else {
    v0 = _mm512_add_epi32(v0, t.cb0);
    v1 = _mm512_add_epi32(v1, t.cb1);
    if (a.wzp) {
      const __m512i s = _mm512_set1_epi32(a.xsum[row]);
      v0 = _mm512_sub_epi32(v0, _mm512_mullo_epi32(t.cz0, s));
      v1 = _mm512_sub_epi32(v1, _mm512_mullo_epi32(t.cz1, s));
    }
  }
  if (a.y32) {
    int32_t* y32 = a.y32 + row * a.ldy + t.c0;
    _mm512_mask_storeu_epi32(y32, t.m0, v0);
    if (t.m1) _mm512_mask_storeu_epi32(y32 + 16, t.m1, v1);
    return;
  }
  const __m512 lo = _mm512_set1_ps(float(a.lo - a.yzp)), hi = _mm512_set1_ps(float(a.hi - a.yzp));
  const __m512i yzp = _mm512_set1_epi32(a.yzp);
  uint8_t* y = a.y + row * a.ldy + t.c0;
  _mm512_mask_cvtepi32_storeu_epi8(y, t.m0, Requant(v0, mult0, lo, hi, yzp));
  if (t.m1) _mm512_mask_cvtepi32_storeu_epi8(y + 16, t.m1, Requant(v1, mult1, lo, hi, yzp));
}

// One activation row against kPanels weight panels at once (a batch-1
// fully connected layer): the weights are read once and nothing else, so
// the product is bound by memory; kPanels streams keep more of them in
// flight than one panel's loop, which also had only two accumulator chains
// (VGG-19's 103M-weight layer ran at 6 GB/s). Four panels: the hardware
// prefetchers keep up with 4 streams better than with 8 (Zen 5, 1 thread,
// VGG-19's fc6 2.83 -> 2.5 ms, 36 -> 41 GB/s; ZFNet's 1.90 -> 1.71 ms; 2, 3,
// 6 and 12 panels, or two k steps an iteration, were slower or no faster);
// software prefetches 1 KiB or 4 KiB ahead made the layers slower (AlexNet's
// three 1.31 -> 1.54 ms, ZFNet's fc6 2.08 -> 2.29 / 2.45 ms).

template <int kRowPanels>
void OneRowPanels(const GemmS8Args& a, int64_t jp) {
  __m512i acc[kRowPanels][2];
  const uint8_t* rp[kRowPanels];
  const int64_t panel_bytes = a.k4 * 4 * kNr;
  for (int p = 0; p < kRowPanels; ++p) {
    acc[p][0] = acc[p][1] = _mm512_setzero_si512();
    rp[p] = a.right + (jp + p) * panel_bytes;
  }
  const uint8_t* lp = a.left;
  for (int64_t q = 0; q < a.k4; ++q, lp += 4 * kMr) {
    int32_t l;
    std::memcpy(&l, lp, 4);
    const __m512i lb = _mm512_set1_epi32(l);
    const int64_t at = q * 4 * kNr;
    for (int p = 0; p < kRowPanels; ++p) {
      acc[p][0] = _mm512_dpbusd_epi32(acc[p][0], lb, _mm512_loadu_si512(rp[p] + at));
      acc[p][1] = _mm512_dpbusd_epi32(acc[p][1], lb, _mm512_loadu_si512(rp[p] + at + 64));
    }
  }
  for (int p = 0; p < kRowPanels; ++p)
    StoreRow<false>(a, LoadPanel<false>(a, jp + p), 0, acc[p][0], acc[p][1]);
}

template <bool kWeightsLeft>
void GemmImpl(const GemmS8Args& a) {
  const int64_t panels = (a.cols + kNr - 1) / kNr;
  const int64_t pe = a.panel_end < 0 ? panels : a.panel_end;
  int64_t jp = a.panel_begin;
  if (!kWeightsLeft && a.rows == 1) {
    for (; jp + 4 <= pe; jp += 4) OneRowPanels<4>(a, jp);
    for (; jp + 2 <= pe; jp += 2) OneRowPanels<2>(a, jp);
  }
  for (; jp < pe; ++jp) {
    const uint8_t* rp = a.right + jp * a.k4 * 4 * kNr;
    const PanelTerms t = LoadPanel<kWeightsLeft>(a, jp);
    for (int64_t ip = 0; ip < a.rows; ip += kMr) {
      __m512i acc[kMr][2];
      const int nrow = a.rows - ip < kMr ? int(a.rows - ip) : kMr;
      AccumulateRows<kWeightsLeft>(nrow, a.left + ip * a.k4 * 4, rp, a.k4, acc);
      for (int r = 0; r < nrow; ++r) StoreRow<kWeightsLeft>(a, t, ip + r, acc[r][0], acc[r][1]);
    }
  }
}

void Gemm(const GemmS8Args& a) {
  if (a.weights_left)
    GemmImpl<true>(a);
  else
    GemmImpl<false>(a);
}

void RequantRow(const int32_t* acc, int64_t n, int32_t bias, float mult, int32_t yzp, int32_t lo,
                int32_t hi, uint8_t* y) {
  const __m512 vlo = _mm512_set1_ps(float(lo - yzp)), vhi = _mm512_set1_ps(float(hi - yzp));
  const __m512 vm = _mm512_set1_ps(mult);
  const __m512i vz = _mm512_set1_epi32(yzp), vb = _mm512_set1_epi32(bias);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512i v = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, acc + i), vb);
    _mm512_mask_cvtepi32_storeu_epi8(y + i, m, Requant(v, vm, vlo, vhi, vz));
  }
}

}  // namespace

extern const GemmS8Kernels kGemmS8Avx512Vnni;
const GemmS8Kernels kGemmS8Avx512Vnni = {"avx512vnni",      kMr,  kNr,       PackLeftX86<kMr>,
                                         PackRightX86<kNr>, Gemm, RequantRow};

}  // namespace kernels
}  // namespace qfold
