// AVX2 depthwise kernels (dwconv_s8.h): vpmaddwd multiplies pairs of int16
// inputs by pairs of int16 weights and adds each pair's products into an
// int32 lane exactly (|sum| <= 2 * 255 * 255); the int32 adds wrap like the
// reference's. 16 outputs per step, requantized in registers.
#include <immintrin.h>

#include <cstring>

#include "kernels/dwconv_s8.h"

namespace qfold {
namespace kernels {
namespace {

// As in gemm_s8_avx2.cc: float clamp to integer bounds, NaN -> zero point.
inline __m256i Requant(__m256i acc, __m256 mult, __m256 lo, __m256 hi, __m256i yzp) {
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), mult);
  f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
  f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(f), yzp);
}

// Stores the low bytes of 16 int16 lanes (values in [-128, 255]), n <= 16 of them.
inline void StoreBytes16(__m256i v, int64_t n, uint8_t* y) {
  const __m128i mask = _mm_set1_epi16(0xff);
  const __m128i b = _mm_packus_epi16(_mm_and_si128(_mm256_castsi256_si128(v), mask),
                                     _mm_and_si128(_mm256_extracti128_si256(v, 1), mask));
  if (n >= 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y), b);
  } else {
    alignas(16) uint8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b);
    std::memcpy(y, tmp, size_t(n));
  }
}

// Int32 sums of 16 outputs, in order in lo (0..7) and hi (8..15); n <= 16 stored.
inline void StoreInt32x16(__m256i lo, __m256i hi, int64_t n, int32_t* y) {
  if (n >= 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + 8), hi);
  } else {
    alignas(32) int32_t tmp[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), hi);
    std::memcpy(y, tmp, size_t(n) * sizeof(int32_t));
  }
}

// a holds outputs 0-3 | 8-11, b 4-7 | 12-15 (per 128-bit half): in order.
inline void StoreInt32Halves(__m256i a, __m256i b, int64_t n, int32_t* y) {
  StoreInt32x16(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31), n, y);
}

struct Epilogue {
  __m256 mult, lo, hi;
  __m256i yzp;
  explicit Epilogue(const DwPlaneArgs& a)
      : mult(_mm256_set1_ps(a.mult)),
        lo(_mm256_set1_ps(float(a.lo - a.yzp))),
        hi(_mm256_set1_ps(float(a.hi - a.yzp))),
        yzp(_mm256_set1_epi32(a.yzp)) {}
  __m256i operator()(__m256i acc) const { return Requant(acc, mult, lo, hi, yzp); }
};

inline __m256i Load(const int16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i Dot(__m256i acc, __m256i x, __m256i w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
}

// Any stride and dilation; kNp > 0: that many tap pairs, unrolled with the
// weights in registers; 0: a.np. 16 outputs per step.
template <int kNp>
void GeneralImpl(const DwPlaneArgs& a) {
  constexpr int kMax = kNp > 0 ? kNp : 1;
  const int np = kNp > 0 ? kNp : a.np;
  int64_t off[2 * kMax];
  __m256i w[kMax];
  if (kNp > 0) {
    for (int p = 0; p < kNp; ++p) {
      off[2 * p] = a.off[2 * p];
      off[2 * p + 1] = a.off[2 * p + 1];
      w[p] = _mm256_set1_epi32(a.w[p]);
    }
  }
  const Epilogue requant(a);
  const __m256i vb = _mm256_set1_epi32(a.bias);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 16) {
      const int16_t* s = row + i;
      __m256i acc0 = vb, acc1 = vb;
      for (int p = 0; p < np; ++p) {
        const int64_t oa = kNp > 0 ? off[2 * p] : a.off[2 * p];
        const int64_t ob = kNp > 0 ? off[2 * p + 1] : a.off[2 * p + 1];
        const __m256i wp = kNp > 0 ? w[p] : _mm256_set1_epi32(a.w[p]);
        const __m256i x0 = Load(s + oa), x1 = Load(s + ob);
        acc0 = Dot(acc0, _mm256_unpacklo_epi16(x0, x1), wp);
        acc1 = Dot(acc1, _mm256_unpackhi_epi16(x0, x1), wp);
      }
      if (a.y32) {
        StoreInt32Halves(acc0, acc1, a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      // The unpacks' lane permutation is undone by packing the two halves.
      StoreBytes16(_mm256_packs_epi32(requant(acc0), requant(acc1)), a.ow - i, y + i);
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
// no shuffles. 16 outputs per step; one byte shuffle interleaves them.
template <int kKw>
void Stride1Impl(const DwPlaneArgs& a) {
  constexpr int kNl = kKw / 2 + 1;
  const Epilogue requant(a);
  const __m256i vb = _mm256_set1_epi32(a.bias);
  // packs(even, odd) gives outputs 0 2 4 6 1 3 5 7 per 128-bit lane.
  const __m256i interleave = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                                              0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 16) {
      __m256i even = vb, odd = vb;
      const int32_t* w = a.w;
      for (int ky = 0; ky < a.kh; ++ky, w += 2 * kNl) {
        const int16_t* s = row + ky * a.tap_row_step + i;
        for (int q = 0; q < kNl; ++q) {
          const __m256i x = Load(s + 2 * q);
          even = Dot(even, x, _mm256_set1_epi32(w[q]));
          odd = Dot(odd, x, _mm256_set1_epi32(w[kNl + q]));
        }
      }
      if (a.y32) {
        StoreInt32Halves(_mm256_unpacklo_epi32(even, odd), _mm256_unpackhi_epi32(even, odd),
                         a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      const __m256i v = _mm256_packs_epi32(requant(even), requant(odd));
      StoreBytes16(_mm256_shuffle_epi8(v, interleave), a.ow - i, y + i);
    }
  }
}

// Stride 2: a load at column 2i + 2q holds the pairs (2(i + m) + 2q,
// 2(i + m) + 2q + 1), taps (2q, 2q + 1) of output i + m, in order.
// 16 outputs per step in two accumulators.
template <int kKw>
void Stride2Impl(const DwPlaneArgs& a) {
  constexpr int kNl = (kKw + 1) / 2;
  const Epilogue requant(a);
  const __m256i vb = _mm256_set1_epi32(a.bias);
  for (int64_t oy = 0; oy < a.oh; ++oy) {
    const int16_t* row = a.src + oy * a.out_row_step;
    uint8_t* y = a.y32 ? nullptr : a.y + oy * a.ow;
    for (int64_t i = 0; i < a.ow; i += 16) {
      __m256i acc0 = vb, acc1 = vb;
      const int32_t* w = a.w;
      for (int ky = 0; ky < a.kh; ++ky, w += kNl) {
        const int16_t* s = row + ky * a.tap_row_step + 2 * i;
        for (int q = 0; q < kNl; ++q) {
          const __m256i wq = _mm256_set1_epi32(w[q]);
          acc0 = Dot(acc0, Load(s + 2 * q), wq);
          acc1 = Dot(acc1, Load(s + 16 + 2 * q), wq);
        }
      }
      if (a.y32) {
        StoreInt32x16(acc0, acc1, a.ow - i, a.y32 + oy * a.ow + i);
        continue;
      }
      // packs works per 128-bit lane: order the 64-bit quarters 0, 2, 1, 3.
      const __m256i v = _mm256_packs_epi32(requant(acc0), requant(acc1));
      StoreBytes16(_mm256_permute4x64_epi64(v, 0xd8), a.ow - i, y + i);
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
  const __m256i z = _mm256_set1_epi16(int16_t(xzp));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i v = is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_sub_epi16(v, z));
  }
  for (; i < n; ++i)
    dst[i] = int16_t((is_signed ? int32_t(int8_t(src[i])) : int32_t(src[i])) - xzp);
}

void Split2(const int16_t* src, int64_t n, int16_t* even, int16_t* odd) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * j));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * j + 16));
    const __m256i e = _mm256_packs_epi32(_mm256_srai_epi32(_mm256_slli_epi32(v0, 16), 16),
                                         _mm256_srai_epi32(_mm256_slli_epi32(v1, 16), 16));
    const __m256i o = _mm256_packs_epi32(_mm256_srai_epi32(v0, 16), _mm256_srai_epi32(v1, 16));
    // packs works per 128-bit lane: order the 64-bit quarters 0, 2, 1, 3.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(even + j), _mm256_permute4x64_epi64(e, 0xd8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd + j), _mm256_permute4x64_epi64(o, 0xd8));
  }
  for (; j < n; ++j) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

}  // namespace

extern const DwConvS8Kernels kDwConvS8Avx2;
const DwConvS8Kernels kDwConvS8Avx2 = {"avx2", WidenRow, Split2, General, Stride1, Stride2};

}  // namespace kernels
}  // namespace qfold
