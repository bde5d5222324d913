// The x86 indirect GEMM microkernels (igemm_s8.h), one template for every
// level. A level supplies a vector trait V:
//   kLanes (int32 lanes), kWBytes (bytes per packed weight), kABytes (bytes
//   per activation: 1, or 2 where the driver widens them to u16), kChPerAcc
//   (channels per accumulator vector), kSub (broadcasts per 4-k step: 1, or
//   2 where each covers a pair of k and the weights are packed in pairs,
//   kgroup 2), I (int32 vector), F (float vector),
//   A (one activation dword, broadcast and prepared), Zero, Bcast<kXor>(p),
//   Dot(acc, A, w) (w: kChPerAcc channels x 4 packed weights),
//   Finish(acc row, out) (accumulators to kLanes channels per vector, in
//   order), and the epilogue helpers LoadI, LoadF, Set1I, Set1F, Add, Sub,
//   Mullo, Requant, Store(v, n, y), and for the float epilogue Dequant(acc,
//   mult, bias, lo, hi) and StoreF(v, n, yf); kPackedRequant, and where it
//   is true SmallMults(mult, n) and StorePacked(out, mult, q, n, y) (below).
// Everything is in an anonymous namespace: each ISA file compiles its own
// copy with its own -m flags, and copies must not be merged by the linker.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/igemm_s8.h"

namespace qfold {
namespace kernels {
namespace {

inline int32_t LoadDword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <class V, int MR, int NV>
struct IgemmX86 {
  static constexpr int kNr = NV * V::kLanes;
  static constexpr int kNacc = kNr / V::kChPerAcc;  // accumulators per row

  template <bool kXor, bool kFloatOut, bool kRaw = false>
  static void Tiles(const IgemmS8Args& a) {
    using I = typename V::I;
    using F = typename V::F;
    // Locals, so the loops below do not reload them through `a` after the
    // stores of the epilogue.
    const int64_t rows = a.rows, taps = a.taps, kc4 = a.kc4, a_offset = a.a_offset;
    const int64_t tiles = (rows + MR - 1) / MR;
    const F lo = V::Set1F(float(a.lo - a.yzp)), hi = V::Set1F(float(a.hi - a.yzp));
    const I yzp = V::Set1I(a.yzp);
    const F flo = V::Set1F(a.flo), fhi = V::Set1F(a.fhi);
    // Where each accumulator holds kLanes channels in order, it starts from
    // their bias (int32 sums wrap, so the order of the adds does not matter):
    // one add fewer per output vector.
    constexpr bool kBiasInAcc = V::kChPerAcc == V::kLanes && !kRaw;
    I acc0[kNacc];
#pragma GCC unroll 16
    for (int v = 0; v < kNacc; ++v)
      acc0[v] = kBiasInAcc ? V::LoadI(a.bias + v * V::kLanes) : V::Zero();
    // Multipliers that keep float(acc) * mult within int32 let the epilogue
    // convert first and clamp with saturating packs (see the trait).
    const bool packed = !kFloatOut && !kRaw && PackedOk(a);
    const PackedParams q = MakePackedParams(a);
    F mults[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) mults[v] = kRaw ? V::Set1F(0.f) : V::LoadF(a.mult + v * V::kLanes);
    // The next panel, a cache line per k step from the second tile on (its
    // first tile would otherwise wait on L3 or memory: deep layers of few
    // rows read each panel only a few times).
    const uint8_t* pf = a.prefetch;
    const uint8_t* const pf_end = pf ? pf + a.prefetch_bytes : nullptr;
    for (int64_t t = 0; t < tiles; ++t) {
      const uint8_t* const pf_stop = t ? pf_end : pf;
      I acc[MR][kNacc];
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
        for (int v = 0; v < kNacc; ++v) acc[r][v] = acc0[v];
      const uint8_t* const* ind = a.ind + t * taps * MR;
      const uint8_t* w = a.w;
      for (int64_t tap = 0; tap < taps; ++tap, ind += MR) {
        const uint8_t* p[MR];
#pragma GCC unroll 32
        for (int r = 0; r < MR; ++r) p[r] = ind[r] + a_offset;
        for (int64_t q = 0; q < kc4; ++q, w += 4 * kNr * V::kWBytes) {
          if (pf < pf_stop) {
            _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
            pf += 64;
          }
          // Sub-step h covers k [4 / kSub * h, 4 / kSub * (h + 1)) of the step:
          // its weights follow the previous sub-step's for all kNr channels.
          constexpr int kKs = 4 / V::kSub;
#pragma GCC unroll 2
          for (int h = 0; h < V::kSub; ++h) {
#pragma GCC unroll 32
            for (int r = 0; r < MR; ++r) {
              const typename V::A x =
                  V::template Bcast<kXor>(p[r] + V::kABytes * (4 * q + kKs * h));
#pragma GCC unroll 16
              for (int v = 0; v < kNacc; ++v)
                acc[r][v] =
                    V::Dot(acc[r][v], x, w + kKs * V::kWBytes * (kNr * h + V::kChPerAcc * v));
            }
            // Each sub-step's products go straight into the accumulators: GCC
            // otherwise reassociates the int32 adds, sums both sub-steps'
            // products first and spills half of the accumulators every step.
            if constexpr (V::kSub > 1)
#pragma GCC unroll 32
              for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
                for (int v = 0; v < kNacc; ++v) asm("" : "+x"(acc[r][v]));
          }
        }
      }
      // Fully unrolled (constant row indices): with a loop to the tile's
      // valid rows, acc would live in memory and the k loop above would
      // store every accumulator on each step.
      const int64_t nrow = rows - t * MR;
#pragma GCC unroll 32
      for (int r = 0; r < MR; ++r) {
        if (r >= nrow) continue;
        const int64_t row = t * MR + r;
        I out[NV];
        V::Finish(acc[r], out);
        if constexpr (kRaw) {
#pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) {
            const int64_t n = a.cols - v * V::kLanes;
            // A whole vector as one store (a variable length would call memcpy).
            if (n >= V::kLanes)
              std::memcpy(a.yi + row * a.ldy + v * V::kLanes, &out[v], sizeof(I));
            else if (n > 0)
              std::memcpy(a.yi + row * a.ldy + v * V::kLanes, &out[v], size_t(n) * sizeof(int32_t));
          }
          continue;
        }
        if constexpr (kPacked) {
          if (packed) {
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) {
              if (!kBiasInAcc) out[v] = V::Add(out[v], V::LoadI(a.bias + v * V::kLanes));
              if (a.wzp)
                out[v] = V::Sub(out[v],
                                V::Mullo(V::LoadI(a.wzp + v * V::kLanes), V::Set1I(a.xsum[row])));
            }
            V::StorePacked(out, mults, q, a.cols, a.y + row * a.ldy);
            continue;
          }
        }
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          const int64_t n = a.cols - v * V::kLanes;
          if (n <= 0) continue;
          I x = kBiasInAcc ? out[v] : V::Add(out[v], V::LoadI(a.bias + v * V::kLanes));
          if (a.wzp)
            x = V::Sub(x, V::Mullo(V::LoadI(a.wzp + v * V::kLanes), V::Set1I(a.xsum[row])));
          const F mult = mults[v];
          if (kFloatOut)
            V::StoreF(V::Dequant(x, mult, V::LoadF(a.fbias + v * V::kLanes), flo, fhi), n,
                      a.yf + row * a.ldy + v * V::kLanes);
          else
            V::Store(V::Requant(x, mult, lo, hi, yzp), n, a.y + row * a.ldy + v * V::kLanes);
        }
      }
    }
  }

  static constexpr bool kPacked = V::kPackedRequant;
  using PackedParams = typename V::PackedParams;
  static bool PackedOk(const IgemmS8Args& a) {
    if constexpr (kPacked)
      return V::SmallMults(a.mult, a.cols);
    else
      return false;
  }
  static PackedParams MakePackedParams(const IgemmS8Args& a) {
    if constexpr (kPacked)
      return V::MakePackedParams(a.yzp, a.lo, a.hi);
    else
      return PackedParams{};
  }

  static void Run(const IgemmS8Args& a) {
    // Widened activations are u8 values already.
    const bool xor_x = a.x_signed && V::kABytes == 1;
    if (a.yi)
      xor_x ? Tiles<true, false, true>(a) : Tiles<false, false, true>(a);
    else if (a.yf)
      xor_x ? Tiles<true, true>(a) : Tiles<false, true>(a);
    else
      xor_x ? Tiles<true, false>(a) : Tiles<false, false>(a);
  }
};

#if defined(__AVX2__)
// The 256-bit epilogue shared by AVX2 and AVX-VNNI.
struct V256Base {
  static constexpr int kLanes = 8, kSub = 1;
  static constexpr int kABytes = 1;
  using I = __m256i;
  using F = __m256;
  // The packed epilogue below, for traits that set it (AVX2; N = 1 or 2).
  static constexpr bool kPackedRequant = false;
  struct PackedParams {
    __m256i zp16, lo8, hi8;
    bool y_signed;
  };
  static PackedParams MakePackedParams(int32_t yzp, int32_t lo, int32_t hi) {
    return {_mm256_set1_epi16(int16_t(yzp)), _mm256_set1_epi8(char(lo)), _mm256_set1_epi8(char(hi)),
            lo < 0};
  }
  // |mult| <= 0.5 (NaN fails): float(acc) * mult then rounds within int32.
  static bool SmallMults(const float* mult, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      if (!(std::fabs(mult[i]) <= 0.5f)) return false;
    return true;
  }
  // Requantizes N (1 or 2) vectors of a row and stores their first n channels:
  // round(float(acc) * mult) saturated to int16, plus the zero point with
  // 16-bit saturation, saturated to 8 bits, clamped to [lo, hi] as bytes.
  // Each step is monotone and exact inside the output range, so this equals
  // Requant's clamp of the int32 sum (|zp| < 2^15 - 2^8), in 13 instructions
  // for 16 channels instead of 24 (small-K layers are mostly epilogue).
  template <int N>
  static void StorePacked(const I (&acc)[N], const F (&mult)[N], const PackedParams& q, int64_t n,
                          uint8_t* y) {
    static_assert(N == 1 || N == 2, "1 or 2 vectors a row");
    const I r0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[0]), mult[0]));
    const I r1 =
        N == 2 ? _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[N - 1]), mult[N - 1]))
               : r0;
    const I w = _mm256_adds_epi16(_mm256_packs_epi32(r0, r1), q.zp16);
    I b = q.y_signed ? _mm256_min_epi8(_mm256_max_epi8(_mm256_packs_epi16(w, w), q.lo8), q.hi8)
                     : _mm256_min_epu8(_mm256_max_epu8(_mm256_packus_epi16(w, w), q.lo8), q.hi8);
    // Per 128-bit lane L, dword 0 holds r0's values 4L..4L+3 and dword 1 r1's.
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    const __m128i o = _mm256_castsi256_si128(b);
    if (n >= 8 * N) {
      if (N == 2)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y), o);
      else
        _mm_storel_epi64(reinterpret_cast<__m128i*>(y), o);
    } else {
      alignas(16) uint8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), o);
      std::memcpy(y, tmp, size_t(n));
    }
  }
  static I Zero() { return _mm256_setzero_si256(); }
  static I LoadI(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const I*>(p)); }
  static F LoadF(const float* p) { return _mm256_loadu_ps(p); }
  static I Set1I(int32_t v) { return _mm256_set1_epi32(v); }
  static F Set1F(float v) { return _mm256_set1_ps(v); }
  static I Add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I Sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I Mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  // clamp(round(float(acc) * mult) + yzp): the float clamp to the integer
  // bounds (lo - yzp, hi - yzp) equals the reference's clamp after rounding
  // and keeps cvtps2dq in range; NaN becomes 0, i.e. the zero point.
  static I Requant(I acc, F mult, F lo, F hi, I yzp) {
    F f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), mult);
    f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
    f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
    return _mm256_add_epi32(_mm256_cvtps_epi32(f), yzp);
  }
  // clamp(fma(float(acc), mult, bias), lo, hi); the operand order of max/min
  // lets NaN through like the reference's comparisons. One fused rounding,
  // as std::fma in the reference, whatever the compiler's contraction flags.
  static F Dequant(I acc, F mult, F bias, F lo, F hi) {
    const F f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), mult, bias);
    return _mm256_min_ps(hi, _mm256_max_ps(lo, f));
  }
  static void StoreF(F v, int64_t n, float* y) {
    if (n >= 8) {
      _mm256_storeu_ps(y, v);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, v);
      std::memcpy(y, tmp, size_t(n) * sizeof(float));
    }
  }
  // Low bytes of the first n lanes (values are within [-128, 255]).
  static void Store(I v, int64_t n, uint8_t* y) {
    __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    p = _mm_packus_epi16(_mm_and_si128(p, _mm_set1_epi16(0xff)), p);
    if (n >= 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y), p);
    } else {
      alignas(16) uint8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), p);
      std::memcpy(y, tmp, size_t(n));
    }
  }
};
#endif

}  // namespace
}  // namespace kernels
}  // namespace qfold
