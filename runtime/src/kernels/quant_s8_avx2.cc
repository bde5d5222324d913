// AVX2 kernels of quant_s8.h: 8 floats per vector. The quotient is rounded
// with vroundps (half to even), offset by the zero point and clamped in float
// before the conversion, so out-of-range values and infinities saturate; NaN
// lanes are zeroed first and so become the zero point, like the reference.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/quant_16_x86.h"
#include "kernels/quant_s8.h"
#include "kernels/quant_s8_ref.h"

namespace qfold {
namespace kernels {
namespace {

// The 8 values of q rounded half to even (NaN -> 0), + zp, as int32 within
// [lo, hi].
inline __m256i Round8(__m256 q, __m256 zpf, __m256 lof, __m256 hif) {
  q = _mm256_and_ps(q, _mm256_cmp_ps(q, q, _CMP_ORD_Q));
  __m256 t = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r + zp is exact in range and monotone outside it, so clamping after the
  // add equals the reference's comparisons against lo - zp and hi - zp.
  t = _mm256_add_ps(t, zpf);
  t = _mm256_min_ps(_mm256_max_ps(t, lof), hif);
  return _mm256_cvttps_epi32(t);
}

// The 8 quantized values of x / s.
inline __m256i Quantize8(__m256 x, __m256 s, __m256 zpf, __m256 lof, __m256 hif) {
  return Round8(_mm256_div_ps(x, s), zpf, lof, hif);
}

// 32 in-range int32 values (a, b, c, d in order) to 32 bytes.
template <bool kSigned>
inline __m256i Pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i r = kSigned ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
  // The in-lane packs leave dwords as a0 b0 c0 d0 a1 b1 c1 d1.
  return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <bool kSigned>
inline void Store8(void* y, int64_t i, __m256i v) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i b = kSigned ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + i), b);
}

template <bool kSigned>
inline __m256 Load8(const void* x, int64_t i) {
  const __m128i b =
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(x) + i));
  return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
}

template <bool kSigned, bool kPerElem>
void QuantizeT(const float* x, void* y, int64_t n, const float* scale, const float* zpf, int32_t lo,
               int32_t hi) {
  const __m256 lof = _mm256_set1_ps(float(lo)), hif = _mm256_set1_ps(float(hi));
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(zpf[0]);
  int64_t i = 0;
  auto q8 = [&](int64_t j) {
    if (kPerElem) {
      s = _mm256_loadu_ps(scale + j);
      z = _mm256_loadu_ps(zpf + j);
    }
    return Quantize8(_mm256_loadu_ps(x + j), s, z, lof, hif);
  };
  for (; i + 32 <= n; i += 32) {
    const __m256i a = q8(i), b = q8(i + 8), c = q8(i + 16), d = q8(i + 24);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint8_t*>(y) + i),
                        Pack32<kSigned>(a, b, c, d));
  }
  for (; i + 8 <= n; i += 8) Store8<kSigned>(y, i, q8(i));
  QS8QuantizeScalar(x, y, i, n, scale, zpf, kPerElem, lo, hi);
}

void Quantize(const float* x, void* y, int64_t n, const float* scale, const float* zpf,
              bool per_elem, int32_t lo, int32_t hi, bool is_signed) {
  if (is_signed)
    per_elem ? QuantizeT<true, true>(x, y, n, scale, zpf, lo, hi)
             : QuantizeT<true, false>(x, y, n, scale, zpf, lo, hi);
  else
    per_elem ? QuantizeT<false, true>(x, y, n, scale, zpf, lo, hi)
             : QuantizeT<false, false>(x, y, n, scale, zpf, lo, hi);
}

template <bool kSigned, bool kPerElem>
void DequantizeT(const void* x, float* y, int64_t n, const float* scale, const float* zpf) {
  __m256 s = _mm256_set1_ps(scale[0]), z = _mm256_set1_ps(zpf[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (kPerElem) {
      s = _mm256_loadu_ps(scale + i);
      z = _mm256_loadu_ps(zpf + i);
    }
    // x - zp is exact in float, so this is float(x - zp) * scale.
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(Load8<kSigned>(x, i), z), s));
  }
  QS8DequantizeScalar(x, y, i, n, scale, zpf, kPerElem, kSigned);
}

void Dequantize(const void* x, float* y, int64_t n, const float* scale, const float* zpf,
                bool per_elem, bool is_signed) {
  if (is_signed)
    per_elem ? DequantizeT<true, true>(x, y, n, scale, zpf)
             : DequantizeT<true, false>(x, y, n, scale, zpf);
  else
    per_elem ? DequantizeT<false, true>(x, y, n, scale, zpf)
             : DequantizeT<false, false>(x, y, n, scale, zpf);
}

// kA / kB: whether the operand advances (else one broadcast value).
template <bool kSigned, bool kMul, bool kA, bool kB>
void BinaryT(const QBinaryS8Params& p, const void* a, const void* b, void* y, int64_t n) {
  if (n <= 0) return;
  const __m256 sa = _mm256_set1_ps(p.a_factor()), za = _mm256_set1_ps(float(p.a_zp));
  const __m256 sb = _mm256_set1_ps(p.b_factor()), zb = _mm256_set1_ps(float(p.b_zp));
  const __m256 sm = _mm256_set1_ps(p.mul_factor()), zc = _mm256_set1_ps(float(p.c_zp));
  const __m256 lof = _mm256_set1_ps(float(p.lo)), hif = _mm256_set1_ps(float(p.hi));
  // A broadcast operand's value, computed once as the scalar code does.
  const __m256 va0 = _mm256_set1_ps(float(QS8Load(a, 0, kSigned) - p.a_zp) * p.a_factor());
  const __m256 vb0 = _mm256_set1_ps(float(QS8Load(b, 0, kSigned) - p.b_zp) * p.b_factor());
  auto q8 = [&](int64_t j) {
    const __m256 va = kA ? _mm256_mul_ps(_mm256_sub_ps(Load8<kSigned>(a, j), za), sa) : va0;
    const __m256 vb = kB ? _mm256_mul_ps(_mm256_sub_ps(Load8<kSigned>(b, j), zb), sb) : vb0;
    const __m256 v = kMul ? _mm256_mul_ps(_mm256_mul_ps(va, vb), sm) : _mm256_add_ps(va, vb);
    return Round8(v, zc, lof, hif);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i r0 = q8(i), r1 = q8(i + 8), r2 = q8(i + 16), r3 = q8(i + 24);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint8_t*>(y) + i),
                        Pack32<kSigned>(r0, r1, r2, r3));
  }
  for (; i + 8 <= n; i += 8) Store8<kSigned>(y, i, q8(i));
  QS8BinaryScalar(p, a, kA ? 1 : 0, b, kB ? 1 : 0, y, i, n);
}

template <bool kSigned, bool kMul>
void BinaryS(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step,
             void* y, int64_t n) {
  if (a_step && b_step)
    BinaryT<kSigned, kMul, true, true>(p, a, b, y, n);
  else if (a_step)
    BinaryT<kSigned, kMul, true, false>(p, a, b, y, n);
  else if (b_step)
    BinaryT<kSigned, kMul, false, true>(p, a, b, y, n);
  else
    QS8BinaryScalar(p, a, 0, b, 0, y, 0, n);
}

void Binary(const QBinaryS8Params& p, const void* a, int a_step, const void* b, int b_step, void* y,
            int64_t n) {
  if (p.is_signed)
    p.mul ? BinaryS<true, true>(p, a, a_step, b, b_step, y, n)
          : BinaryS<true, false>(p, a, a_step, b, b_step, y, n);
  else
    p.mul ? BinaryS<false, true>(p, a, a_step, b, b_step, y, n)
          : BinaryS<false, false>(p, a, a_step, b, b_step, y, n);
}

// 256-entry lookup as 16 pshufb lookups of 16 entries, each kept where the
// index's high nibble selects its sub-table.
void Lookup(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n) {
  __m256i t[16];
  for (int k = 0; k < 16; ++k)
    t[k] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * k)));
  const __m256i nib = _mm256_set1_epi8(0x0f);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i lo = _mm256_and_si256(v, nib);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
    __m256i r = _mm256_setzero_si256();
    for (int k = 0; k < 16; ++k) {
      const __m256i sel = _mm256_cmpeq_epi8(hi, _mm256_set1_epi8(char(k)));
      r = _mm256_or_si256(r, _mm256_and_si256(sel, _mm256_shuffle_epi8(t[k], lo)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), r);
  }
  QS8LookupScalar(x, table, y, i, n);
}

// Per-channel tables (channels-last): 8 channels of a pixel per vpgatherdd,
// each lane reading the dword at its entry ch * 256 + x. The dword of the
// table's last 3 entries would reach past its end, so such lanes read the
// last in-bounds dword and shift their byte down instead.
void LookupChannels(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t pixels,
                    int64_t channels, int64_t c0, int64_t c1) {
  const int* base = reinterpret_cast<const int*>(table);
  const __m256i last = _mm256_set1_epi32(int32_t(channels * 256 - 4));
  const __m256i lane_rows = _mm256_setr_epi32(0, 256, 512, 768, 1024, 1280, 1536, 1792);
  const __m256i byte = _mm256_set1_epi32(0xff);
  const int64_t cv = c0 + (c1 - c0) / 8 * 8;
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t* xr = x + p * channels;
    uint8_t* yr = y + p * channels;
    int64_t ch = c0;
    for (; ch < cv; ch += 8) {
      int64_t xv;
      std::memcpy(&xv, xr + ch, 8);
      const __m256i idx =
          _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(xv)),
                           _mm256_add_epi32(lane_rows, _mm256_set1_epi32(int32_t(ch * 256))));
      const __m256i safe = _mm256_min_epi32(idx, last);
      const __m256i shift = _mm256_slli_epi32(_mm256_sub_epi32(idx, safe), 3);
      const __m256i v =
          _mm256_and_si256(_mm256_srlv_epi32(_mm256_i32gather_epi32(base, safe, 1), shift), byte);
      const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(yr + ch), _mm_packus_epi16(w, w));
    }
    for (; ch < c1; ++ch) yr[ch] = table[ch << 8 | xr[ch]];
  }
}

}  // namespace

// Used by the AVX-512 levels (every AVX-512 CPU has AVX2's gathers).
namespace {

// ChannelLines: 8 channels of a pixel at a time through every stage in
// int32 lanes; the low byte of each lane (in byte range after the last
// clamp) packed by a byte shuffle per 128-bit half.
template <bool kXSigned>
void LineChannelsT(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l) {
  const int64_t c = l.channels, stride = l.stride;
  const __m256i low_bytes =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  auto load = [](const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  for (int64_t p = 0; p < pixels; ++p, x += c, y += c)
    for (int64_t ch = 0; ch < c; ch += 8) {
      const int64_t n = std::min<int64_t>(8, c - ch);
      uint8_t buf[8] = {};
      std::memcpy(buf, x + ch, size_t(n));
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(buf));
      __m256i v = kXSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
      for (int st = 0; st < l.stages; ++st) {
        const int64_t o = st * stride + ch;
        v = _mm256_add_epi32(_mm256_mullo_epi32(v, load(l.mult.data() + o)),
                             load(l.add.data() + o));
        v = _mm256_srav_epi32(v, load(l.shift.data() + o));
        v = _mm256_min_epi32(_mm256_max_epi32(v, load(l.lo.data() + o)), load(l.hi.data() + o));
      }
      const __m256i sh = _mm256_shuffle_epi8(v, low_bytes);
      const __m128i r =
          _mm_unpacklo_epi32(_mm256_castsi256_si128(sh), _mm256_extracti128_si256(sh, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(buf), r);
      std::memcpy(y + ch, buf, size_t(n));
    }
}

void LineChannels(const uint8_t* x, uint8_t* y, int64_t pixels, const ChannelLines& l) {
  l.x_signed ? LineChannelsT<true>(x, y, pixels, l) : LineChannelsT<false>(x, y, pixels, l);
}

}  // namespace

void QuantS8LookupChannelsAvx2(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t pixels,
                               int64_t channels, int64_t c0, int64_t c1) {
  LookupChannels(x, table, y, pixels, channels, c0, c1);
}

// Used by the AVX-512 level on CPUs without VBMI.
void QuantS8LookupAvx2(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n) {
  Lookup(x, table, y, n);
}

extern const QuantS8Kernels kQuantS8Avx2;
const QuantS8Kernels kQuantS8Avx2 = {Quantize, Dequantize,     Binary,
                                     Lookup,   Quantize16,     Dequantize16,
                                     Binary16, LookupChannels, LineChannels};

}  // namespace kernels
}  // namespace qfold
