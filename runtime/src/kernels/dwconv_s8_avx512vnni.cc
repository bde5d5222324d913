// AVX-512 depthwise kernels (dwconv_s8.h): vpdpwssd multiplies pairs of
// int16 inputs by pairs of int16 weights and adds both products into an
// int32 lane exactly (|sum| <= 2 * 255 * 255), wrapping like the reference.
// 32 outputs per step, requantized in registers, stored with vpmovwb.
#include <immintrin.h>

#include "kernels/dwconv_s8.h"

// GCC 12 flags the _mm512_undefined_* operands inside its own conversion
// intrinsics as maybe-uninitialized (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qfold {
namespace kernels {
namespace {

// As in gemm_s8_avx512vnni.cc: float clamp to integer bounds, NaN -> zero point.
inline __m512i Requant(__m512i acc, __m512 mult, __m512 lo, __m512 hi, __m512i yzp) {
  __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mult);
  f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);
  f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
  return _mm512_add_epi32(_mm512_cvtps_epi32(f), yzp);  // MXCSR default: half to even
}

inline __mmask32 TailMask32(int64_t n) {
  return n >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << n) - 1);
}

// Int32 sums of 32 outputs, in order in lo (0..15) and hi (16..31); n <= 32 stored.
inline void StoreInt32x32(__m512i lo, __m512i hi, int64_t n, int32_t* y) {
  const __mmask32 m = TailMask32(n);
  _mm512_mask_storeu_epi32(y, __mmask16(m), lo);
  _mm512_mask_storeu_epi32(y + 16, __mmask16(m >> 16), hi);
}

// a holds outputs 8L + 0..3 in its 128-bit lane L, b 8L + 4..7: in order.
inline void StoreInt32Lanes(__m512i a, __m512i b, int64_t n, int32_t* y) {
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  StoreInt32x32(_mm512_permutex2var_epi64(a, first, b), _mm512_permutex2var_epi64(a, second, b), n,
                y);
}

struct Epilogue {
  __m512 mult, lo, hi;
  __m512i yzp;
  explicit Epilogue(const DwPlaneArgs& a)
      : mult(_mm512_set1_ps(a.mult)),
        lo(_mm512_set1_ps(float(a.lo - a.yzp))),
        hi(_mm512_set1_ps(float(a.hi - a.yzp))),
        yzp(_mm512_set1_epi32(a.yzp)) {}
  __m512i operator()(__m512i acc) const { return Requant(acc, mult, lo, hi, yzp); }
};

// Any stride and dilation; kNp > 0: that many tap pairs, unrolled with the
// weights in registers; 0: a.np. 32 outputs per step.
template <int kNp>
void GeneralImpl(const DwPlaneArgs& a) {
  constexpr int kMax = kNp > 0 ? kNp : 1;
  const int np = kNp > 0 ? kNp : a.np;
  int64_t off[2 * kMax];
  __m512i w[kMax];
  if (kNp > 0) {
    for (int p = 0; p < kNp; ++p) {
      off[2 * p] = a.off[2 * p];
      off[2 * p + 1] = a.off[2 * p + 1];
      w[p] = _mm512_set1_epi32(a.w[p]);
    }
  }
  const Epilogue requant(a);
  const __m512i vb = _mm512_set1_epi32(a.bias);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 32) {
      const int16_t* s = row + i;
      __m512i acc0 = vb, acc1 = vb;
      for (int p = 0; p < np; ++p) {
        const int64_t oa = kNp > 0 ? off[2 * p] : a.off[2 * p];
        const int64_t ob = kNp > 0 ? off[2 * p + 1] : a.off[2 * p + 1];
        const __m512i wp = kNp > 0 ? w[p] : _mm512_set1_epi32(a.w[p]);
        const __m512i x0 = _mm512_loadu_si512(s + oa), x1 = _mm512_loadu_si512(s + ob);
        acc0 = _mm512_dpwssd_epi32(acc0, _mm512_unpacklo_epi16(x0, x1), wp);
        acc1 = _mm512_dpwssd_epi32(acc1, _mm512_unpackhi_epi16(x0, x1), wp);
      }
      if (a.y32) {
        StoreInt32Lanes(acc0, acc1, a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      // The unpacks' lane permutation is undone by packing the two halves;
      // results lie in [-128, 255], so vpmovwb's truncation keeps the byte.
      const __m512i v = _mm512_packs_epi32(requant(acc0), requant(acc1));
      _mm512_mask_cvtepi16_storeu_epi8(y + i, TailMask32(a.ow - i), v);
    }
  }
}

void General(const DwPlaneArgs& a) {
  switch (a.np) {
    case 2:  // 1x3, 3x1, 2x2
      return GeneralImpl<2>(a);
    case 3:  // 1x5, 5x1
      return GeneralImpl<3>(a);
    case 5:  // 3x3
      return GeneralImpl<5>(a);
    case 13:  // 5x5
      return GeneralImpl<13>(a);
    default:
      return GeneralImpl<0>(a);
  }
}

// Stride 1: a load at column i + 2q holds the input pairs (i + 2m + 2q,
// i + 2m + 2q + 1), taps (2q, 2q + 1) of even output i + 2m and (2q - 1, 2q)
// of odd output i + 2m + 1, so both parities come from the same loads with
// no shuffles. 32 outputs per step; one byte shuffle interleaves them.
template <int kKw>
void Stride1Impl(const DwPlaneArgs& a) {
  constexpr int kNl = kKw / 2 + 1;
  const Epilogue requant(a);
  const __m512i vb = _mm512_set1_epi32(a.bias);
  // packs(even, odd) gives outputs 0 2 4 6 1 3 5 7 per 128-bit lane.
  const __m512i interleave =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 32) {
      __m512i even = vb, odd = vb;
      const int32_t* w = a.w;
      for (int ky = 0; ky < a.kh; ++ky, w += 2 * kNl) {
        const int16_t* s = row + ky * a.tap_row_step + i;
        for (int q = 0; q < kNl; ++q) {
          const __m512i x = _mm512_loadu_si512(s + 2 * q);
          even = _mm512_dpwssd_epi32(even, x, _mm512_set1_epi32(w[q]));
          odd = _mm512_dpwssd_epi32(odd, x, _mm512_set1_epi32(w[kNl + q]));
        }
      }
      if (a.y32) {
        StoreInt32Lanes(_mm512_unpacklo_epi32(even, odd), _mm512_unpackhi_epi32(even, odd),
                        a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      const __m512i v = _mm512_packs_epi32(requant(even), requant(odd));
      _mm512_mask_cvtepi16_storeu_epi8(y + i, TailMask32(a.ow - i),
                                       _mm512_shuffle_epi8(v, interleave));
    }
  }
}

// Stride 2: a load at column 2i + 2q holds the pairs (2(i + m) + 2q,
// 2(i + m) + 2q + 1), taps (2q, 2q + 1) of output i + m, in order.
// 32 outputs per step in two accumulators.
template <int kKw>
void Stride2Impl(const DwPlaneArgs& a) {
  constexpr int kNl = (kKw + 1) / 2;
  const Epilogue requant(a);
  const __m512i vb = _mm512_set1_epi32(a.bias);
  // packs interleaves the halves per 128-bit lane; gather the 64-bit quarters in output order.
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 32) {
      __m512i acc0 = vb, acc1 = vb;
      const int32_t* w = a.w;
      for (int ky = 0; ky < a.kh; ++ky, w += kNl) {
        const int16_t* s = row + ky * a.tap_row_step + 2 * i;
        for (int q = 0; q < kNl; ++q) {
          const __m512i wq = _mm512_set1_epi32(w[q]);
          acc0 = _mm512_dpwssd_epi32(acc0, _mm512_loadu_si512(s + 2 * q), wq);
          acc1 = _mm512_dpwssd_epi32(acc1, _mm512_loadu_si512(s + 32 + 2 * q), wq);
        }
      }
      if (a.y32) {
        StoreInt32x32(acc0, acc1, a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      const __m512i v = _mm512_packs_epi32(requant(acc0), requant(acc1));
      _mm512_mask_cvtepi16_storeu_epi8(y + i, TailMask32(a.ow - i),
                                       _mm512_permutexvar_epi64(order, v));
    }
  }
}

void Stride1(const DwPlaneArgs& a) {
  if (a.kw == 3) return Stride1Impl<3>(a);
  if (a.kw == 5) return Stride1Impl<5>(a);
  return Stride1Impl<7>(a);
}

void Stride2(const DwPlaneArgs& a) {
  if (a.kw == 3) return Stride2Impl<3>(a);
  if (a.kw == 5) return Stride2Impl<5>(a);
  return Stride2Impl<7>(a);
}

void WidenRow(const uint8_t* src, int64_t n, bool is_signed, int32_t xzp, int16_t* dst) {
  const __m512i z = _mm512_set1_epi16(int16_t(xzp));
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m = TailMask32(n - i);
    const __m256i b = _mm256_maskz_loadu_epi8(m, src + i);
    const __m512i v = is_signed ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
    _mm512_mask_storeu_epi16(dst + i, m, _mm512_sub_epi16(v, z));
  }
}

void Split2(const int16_t* src, int64_t n, int16_t* even, int16_t* odd) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi32(m, src + 2 * j);
    _mm512_mask_cvtepi32_storeu_epi16(even + j, m, _mm512_srai_epi32(_mm512_slli_epi32(v, 16), 16));
    _mm512_mask_cvtepi32_storeu_epi16(odd + j, m, _mm512_srai_epi32(v, 16));
  }
}

}  // namespace

extern const DwConvS8Kernels kDwConvS8Avx512Vnni;
const DwConvS8Kernels kDwConvS8Avx512Vnni = {"avx512vnni", WidenRow, Split2,
                                             General,      Stride1,  Stride2};

}  // namespace kernels
}  // namespace qfold
