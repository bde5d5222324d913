// AVX2+FMA channels-last fp32 convolution microkernels (conv_f32_nhwc.h).
// Indirect GEMM: 6 pixels x 16 channels, 12 ymm accumulators, the
// activations broadcast straight from the tap pointers (no packing). A
// panel of at most 8 channels (the last of M = 24, say) runs on one vector.
// Depthwise: 4 vectors of 8 channels per pixel accumulate over the taps.
#include <immintrin.h>

#include <algorithm>

#include "kernels/conv_f32_nhwc.h"
#include "kernels/conv_f32_nhwc_dwrun.h"
#include "kernels/conv_f32_nhwc_stem.h"
#include "kernels/conv_f32_nhwc_winograd.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 6, kNr = 16;
// Weight rows prefetched this many steps ahead (see conv_f32_nhwc_avx512f.cc).
constexpr int64_t kPfSteps = 32;

// Lane i enabled when i < n.
inline __m256i TailMask(int64_t n) {
  const int32_t k = int32_t(std::max<int64_t>(0, std::min<int64_t>(8, n)));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Masked moves only for a partial vector: on AMD Zen a vmaskmovps store costs
// about ten times a plain one (see gemm_f32_avx2.cc).
inline __m256 LoadPart(const float* p, __m256i mask, bool full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}
inline void StorePart(float* p, __m256i mask, bool full, __m256 x) {
  if (full)
    _mm256_storeu_ps(p, x);
  else
    _mm256_maskstore_ps(p, mask, x);
}

inline __m256 Activate(__m256 x, F32Act act, float lo_v, float hi_v) {
  // Operand order matters for NaN (see gemm_f32_avx2.cc).
  if (act == F32Act::kRelu) return _mm256_max_ps(x, _mm256_setzero_ps());
  if (act == F32Act::kClamp) {
    const __m256 lo = _mm256_set1_ps(lo_v);
    const __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_min_ps(_mm256_set1_ps(hi_v), x), lo, below);
  }
  return x;
}

// The accumulators are named variables, not an array: GCC keeps an array
// indexed across the tap loop in memory too, storing it every step.
template <int V>
void IgemmTile(const IgemmF32Args& p) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float* w = p.w;
  const char* pf = static_cast<const char*>(p.prefetch);
  const char* const pf_end = pf + p.prefetch_bytes;
  for (int64_t t = 0; t < p.taps; ++t) {
    const float* const* a = p.a + t * kMr;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t ch = 0; ch < p.c; ++ch, w += kNr) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kPfSteps * kNr), _MM_HINT_T0);
      if (pf < pf_end) {
        _mm_prefetch(pf, _MM_HINT_T1);
        pf += 64;
      }
      const __m256 b0 = _mm256_loadu_ps(w);
      const __m256 b1 = V == 2 ? _mm256_loadu_ps(w + 8) : b0;
      __m256 l = _mm256_broadcast_ss(a0 + ch);
      c00 = _mm256_fmadd_ps(l, b0, c00);
      if (V == 2) c01 = _mm256_fmadd_ps(l, b1, c01);
      l = _mm256_broadcast_ss(a1 + ch);
      c10 = _mm256_fmadd_ps(l, b0, c10);
      if (V == 2) c11 = _mm256_fmadd_ps(l, b1, c11);
      l = _mm256_broadcast_ss(a2 + ch);
      c20 = _mm256_fmadd_ps(l, b0, c20);
      if (V == 2) c21 = _mm256_fmadd_ps(l, b1, c21);
      l = _mm256_broadcast_ss(a3 + ch);
      c30 = _mm256_fmadd_ps(l, b0, c30);
      if (V == 2) c31 = _mm256_fmadd_ps(l, b1, c31);
      l = _mm256_broadcast_ss(a4 + ch);
      c40 = _mm256_fmadd_ps(l, b0, c40);
      if (V == 2) c41 = _mm256_fmadd_ps(l, b1, c41);
      l = _mm256_broadcast_ss(a5 + ch);
      c50 = _mm256_fmadd_ps(l, b0, c50);
      if (V == 2) c51 = _mm256_fmadd_ps(l, b1, c51);
    }
  }
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  __m256i m[V];
  bool full[V];
  __m256 bias[V];
  for (int v = 0; v < V; ++v) {
    m[v] = TailMask(p.cols - 8 * v);
    full[v] = p.cols - 8 * v >= 8;
    bias[v] = p.bias ? LoadPart(p.bias + 8 * v, m[v], full[v]) : _mm256_setzero_ps();
  }
  // Unrolled whole, with the activation chosen once (conv_f32_nhwc_avx512f.cc).
  auto store = [&](F32Act act) {
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      if (r >= p.rows) break;
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        __m256 x = _mm256_add_ps(acc[r][v], bias[v]);
        if (p.residual)
          x = _mm256_add_ps(x, LoadPart(p.residual + r * p.ldy + 8 * v, m[v], full[v]));
        StorePart(p.y + r * p.ldy + 8 * v, m[v], full[v], Activate(x, act, p.lo, p.hi));
      }
    }
  };
  if (p.act == F32Act::kRelu)
    store(F32Act::kRelu);
  else if (p.act == F32Act::kClamp)
    store(F32Act::kClamp);
  else
    store(F32Act::kNone);
}

void IgemmAvx2(const IgemmF32Args& p) {
  if (p.cols <= 8)
    IgemmTile<1>(p);
  else
    IgemmTile<2>(p);
}

// Channels [ch, ch + 8 * U) of one pixel; with Tail, the last vector masked
// to `tail` lanes.
template <int U, bool Tail>
inline void DwBlock(const DwNhwcF32Args& p, const float* const* a, int64_t off, int64_t ch,
                    int64_t tail, float* y) {
  const __m256i last = TailMask(Tail ? tail : 8);
  auto load = [&](const float* src, int u) {
    return Tail && u == U - 1 ? _mm256_maskload_ps(src, last) : _mm256_loadu_ps(src);
  };
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  const float* w = p.w + ch;
  for (int64_t t = 0; t < p.taps; ++t, w += p.c) {
    const float* x = a[t] + off + ch;
    acc0 = _mm256_fmadd_ps(load(x, 0), load(w, 0), acc0);
    if (U > 1) acc1 = _mm256_fmadd_ps(load(x + 8, 1), load(w + 8, 1), acc1);
    if (U > 2) acc2 = _mm256_fmadd_ps(load(x + 16, 2), load(w + 16, 2), acc2);
    if (U > 3) acc3 = _mm256_fmadd_ps(load(x + 24, 3), load(w + 24, 3), acc3);
  }
  const __m256 acc[4] = {acc0, acc1, acc2, acc3};
  for (int u = 0; u < U; ++u) {
    const __m256 b = p.bias ? load(p.bias + ch + 8 * u, u) : _mm256_setzero_ps();
    const __m256 v = Activate(_mm256_add_ps(acc[u], b), p.act, p.lo, p.hi);
    if (Tail && u == U - 1)
      _mm256_maskstore_ps(y + ch + 8 * u, last, v);
    else
      _mm256_storeu_ps(y + ch + 8 * u, v);
  }
}

template <bool Tail>
void DwRest(const DwNhwcF32Args& p, const float* const* a, int64_t off, int64_t ch, int64_t vectors,
            int64_t tail, float* y) {
  switch (vectors) {
    case 4:  // C % 32 > 24: a partial fourth vector
      DwBlock<4, Tail>(p, a, off, ch, tail, y);
      break;
    case 3:
      DwBlock<3, Tail>(p, a, off, ch, tail, y);
      break;
    case 2:
      DwBlock<2, Tail>(p, a, off, ch, tail, y);
      break;
    case 1:
      DwBlock<1, Tail>(p, a, off, ch, tail, y);
      break;
    default:
      break;
  }
}

// Depthwise runs (conv_f32_nhwc_dwrun.h) on ymm: 6 pixels by 8 channels
// (16 registers: 6 sums, up to 7 weights of a kernel row, the column); 3x3
// kernels over 32 channels or fewer were slower than per pixel.
struct DwRunYmm {
  using F = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8, kPixels = 6;
  static constexpr int64_t kMaxChannelsPerPixel3x3 = 32;
  // Stem runs: 8 pixels of one vector, 6 of two.
  static constexpr int kStemPixels1 = 8, kStemPixels2 = 6, kRegisters = 16;
  static Mask Tail(int64_t n) { return TailMask(n); }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F LoadTail(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void StoreTail(float* p, Mask m, F v) { _mm256_maskstore_ps(p, m, v); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Act(F x, F32Act act, float lo, float hi) { return Activate(x, act, lo, hi); }
};

bool DwRunAvx2(const DwRunF32Args& g) {
  return DwRun<DwRunYmm>(g);
}

void StemRunAvx2(const StemRunF32Args& g) {
  StemRun<DwRunYmm>(g);
}

void DwAvx2(const DwNhwcF32Args& p) {
  const int64_t tail = p.c % 8;
  for (int64_t px = 0; px < p.pixels; ++px) {
    const float* const* a = p.a_step ? p.a : p.a + px * p.taps;
    const int64_t off = px * p.a_step;
    float* y = p.y + px * p.ldy;
    int64_t ch = 0;
    for (; ch + 32 <= p.c; ch += 32) DwBlock<4, false>(p, a, off, ch, 8, y);
    const int64_t vectors = (p.c - ch + 7) / 8;
    if (tail)
      DwRest<true>(p, a, off, ch, vectors, tail, y);
    else
      DwRest<false>(p, a, off, ch, vectors, 8, y);
  }
}

// Winograd lanes (conv_f32_nhwc_winograd.h): 8 channels, the rest by the
// scalar lanes (vmaskmovps stores are slow on AMD).
struct WinogradYmm {
  using F = __m256;
  using Mask = int;
  static constexpr int kLanes = 8;
  static constexpr bool kMaskedTail = false;
  static Mask Tail(int64_t) { return 0; }
  static F LoadTail(const float* p, Mask) { return _mm256_loadu_ps(p); }
  static void StoreTail(float* p, Mask, F v) { _mm256_storeu_ps(p, v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Set(float v) { return _mm256_set1_ps(v); }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Act(F x, F32Act act, float lo, float hi) { return Activate(x, act, lo, hi); }
  static bool AnyNan(F v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0; }
};

// 4 pixels of three planes into 12 interleaved floats by 128-bit shuffles
// (r0 g0 b0 r1 | g1 b1 r2 g2 | b2 r3 g3 b3).
void Interleave3Avx2(const float* src, int64_t plane, int64_t width, float* dst) {
  const float *r = src, *g = src + plane, *bl = src + 2 * plane;
  int64_t i = 0;
  for (; i + 4 <= width; i += 4) {
    const __m128 vr = _mm_loadu_ps(r + i), vg = _mm_loadu_ps(g + i), vb = _mm_loadu_ps(bl + i);
    const __m128 lo = _mm_unpacklo_ps(vr, vg);                          // r0 g0 r1 g1
    const __m128 hi = _mm_unpackhi_ps(vr, vg);                          // r2 g2 r3 g3
    const __m128 t0 = _mm_shuffle_ps(vb, lo, _MM_SHUFFLE(3, 2, 0, 0));  // b0 b0 r1 g1
    const __m128 t1 = _mm_shuffle_ps(lo, vb, _MM_SHUFFLE(1, 1, 3, 3));  // g1 g1 b1 b1
    const __m128 t2 = _mm_shuffle_ps(vb, hi, _MM_SHUFFLE(2, 2, 2, 2));  // b2 b2 r3 r3
    const __m128 t3 = _mm_shuffle_ps(hi, vb, _MM_SHUFFLE(3, 3, 3, 3));  // g3 g3 b3 b3
    float* const d = dst + 3 * i;
    _mm_storeu_ps(d, _mm_shuffle_ps(lo, t0, _MM_SHUFFLE(2, 0, 1, 0)));
    _mm_storeu_ps(d + 4, _mm_shuffle_ps(t1, hi, _MM_SHUFFLE(1, 0, 2, 0)));
    _mm_storeu_ps(d + 8, _mm_shuffle_ps(t2, t3, _MM_SHUFFLE(2, 0, 2, 0)));
  }
  for (; i < width; ++i) {
    dst[3 * i] = r[i];
    dst[3 * i + 1] = g[i];
    dst[3 * i + 2] = bl[i];
  }
}

}  // namespace

extern const ConvNhwcF32Kernels kConvNhwcF32Avx2 = {"avx2",
                                                    kMr,
                                                    kNr,
                                                    IgemmAvx2,
                                                    DwAvx2,
                                                    WinogradInput<WinogradYmm, 2>,
                                                    WinogradOutput<WinogradYmm, 2>,
                                                    DwRunAvx2,
                                                    StemRunAvx2,
                                                    WinogradInput<WinogradYmm, 4>,
                                                    WinogradOutput<WinogradYmm, 4>,
                                                    Interleave3Avx2};

}  // namespace kernels
}  // namespace qfold
