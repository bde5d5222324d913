// AVX-512F channels-last fp32 convolution microkernels (conv_f32_nhwc.h).
// Indirect GEMM: 12 pixels x 32 channels, 24 zmm accumulators (enough
// independent FMA chains for two FMA pipes of latency 4), the activations
// broadcast straight from the tap pointers. A panel of at most 16 channels
// (the last of M = 48, say) runs on one vector; partial vectors use masks,
// cheap on every AVX-512 CPU (unlike AVX2's vmaskmovps on AMD).
// Depthwise: 4 vectors of 16 channels of two pixels accumulate over the taps.
// Winograd transforms (conv_f32_nhwc_winograd.h): 16 channels per vector, the
// channel tail masked.
#include <immintrin.h>

#include <algorithm>

#include "kernels/conv_f32_nhwc.h"
#include "kernels/conv_f32_nhwc_dwrun.h"
#include "kernels/conv_f32_nhwc_stem.h"
#include "kernels/conv_f32_nhwc_winograd.h"
#include "kernels/f32_v512.h"

namespace qfold {
namespace kernels {
namespace {

constexpr int kMr = 12, kNr = 32;

// The accumulators are named variables, not an array: GCC keeps an array
// indexed across the tap loop in memory (see conv_f32_nhwc_avx2.cc).
// R rows (4, 8 or 12): the last tile of a 7x7 output (49 = 4 * 12 + 1
// pixels) does not pay for 12.
#define QFOLD_ROW(X, i)                                    \
  if (R > i) {                                             \
    l = _mm512_set1_ps(a##X[ch]);                          \
    c##X##0 = _mm512_fmadd_ps(l, b0, c##X##0);             \
    if (V == 2) c##X##1 = _mm512_fmadd_ps(l, b1, c##X##1); \
  }

constexpr int64_t kPfSteps = 32;
template <int V, int R>
void IgemmTile(const IgemmF32Args& p) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
  __m512 c90 = c00, c91 = c00, cA0 = c00, cA1 = c00, cB0 = c00, cB1 = c00;
  const float* w = p.w;
  const char* pf = static_cast<const char*>(p.prefetch);
  const char* const pf_end = pf + p.prefetch_bytes;
  for (int64_t t = 0; t < p.taps; ++t) {
    const float* const* a = p.a + t * kMr;
    // Rows past R are not read (a[] holds valid pointers there anyway).
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = R > 4 ? a[4] : a0, *a5 = R > 4 ? a[5] : a0, *a6 = R > 4 ? a[6] : a0;
    const float *a7 = R > 4 ? a[7] : a0, *a8 = R > 8 ? a[8] : a0, *a9 = R > 8 ? a[9] : a0;
    const float *aA = R > 8 ? a[10] : a0, *aB = R > 8 ? a[11] : a0;
    for (int64_t ch = 0; ch < p.c; ++ch, w += kNr) {
      _mm_prefetch(reinterpret_cast<const char*>(w + kPfSteps * kNr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(w + kPfSteps * kNr + 16), _MM_HINT_T0);
      if (pf < pf_end) {
        _mm_prefetch(pf, _MM_HINT_T1);
        pf += 64;
      }
      const __m512 b0 = _mm512_loadu_ps(w);
      const __m512 b1 = V == 2 ? _mm512_loadu_ps(w + 16) : b0;
      __m512 l;
      QFOLD_ROW(0, 0)
      QFOLD_ROW(1, 1)
      QFOLD_ROW(2, 2)
      QFOLD_ROW(3, 3)
      QFOLD_ROW(4, 4)
      QFOLD_ROW(5, 5)
      QFOLD_ROW(6, 6)
      QFOLD_ROW(7, 7)
      QFOLD_ROW(8, 8)
      QFOLD_ROW(9, 9)
      QFOLD_ROW(A, 10)
      QFOLD_ROW(B, 11)
    }
  }
  const __m512 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                              {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71},
                              {c80, c81}, {c90, c91}, {cA0, cA1}, {cB0, cB1}};
  __mmask16 m[V];
  __m512 bias[V];
  for (int v = 0; v < V; ++v) {
    m[v] = TailMask(p.cols - 16 * v);
    bias[v] = p.bias ? _mm512_maskz_loadu_ps(m[v], p.bias + 16 * v) : _mm512_setzero_ps();
  }
  // Unrolled whole, with the activation chosen once: as a loop over rows
  // the accumulators went through the stack and each row tested the
  // activation again (a third of a 16-channel 1x1's time).
  auto store = [&](F32Act act) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      if (r >= p.rows) break;
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        __m512 x = _mm512_add_ps(acc[r][v], bias[v]);
        if (p.residual)
          x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m[v], p.residual + r * p.ldy + 16 * v));
        _mm512_mask_storeu_ps(p.y + r * p.ldy + 16 * v, m[v], Activate(x, act, p.lo, p.hi));
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
#undef QFOLD_ROW

template <int R>
void IgemmRows(const IgemmF32Args& p) {
  if (p.cols <= 16)
    IgemmTile<1, R>(p);
  else
    IgemmTile<2, R>(p);
}

void IgemmAvx512(const IgemmF32Args& p) {
  if (p.rows <= 4)
    IgemmRows<4>(p);
  else if (p.rows <= 8)
    IgemmRows<8>(p);
  else
    IgemmRows<12>(p);
}

// One output pixel of a depthwise call: its tap pointers, the offset added
// to them, its output.
struct DwPixel {
  const float* const* a;
  int64_t off;
  float* y;
};

// Channels [ch, ch + 16 * U) of P pixels (1 or 2: a second pixel shares the
// weight loads and doubles the independent FMA chains, which bound a 3x3's
// 9-step sums); with Tail, the last vector masked to `last`.
template <int U, bool Tail, int P>
inline void DwBlock(const DwNhwcF32Args& p, const DwPixel* px, int64_t ch, __mmask16 last) {
  auto load = [&](const float* src, int u) {
    return Tail && u == U - 1 ? _mm512_maskz_loadu_ps(last, src) : _mm512_loadu_ps(src);
  };
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
  const float* w = p.w + ch;
  const float* const* a0 = px[0].a;
  const float* const* a1 = px[P - 1].a;
  const int64_t o0 = px[0].off + ch, o1 = px[P - 1].off + ch;
  for (int64_t t = 0; t < p.taps; ++t, w += p.c) {
    const float* x0 = a0[t] + o0;
    const float* x1 = a1[t] + o1;
    const __m512 w0 = load(w, 0);
    s0 = _mm512_fmadd_ps(load(x0, 0), w0, s0);
    if (P == 2) t0 = _mm512_fmadd_ps(load(x1, 0), w0, t0);
    if (U > 1) {
      const __m512 w1 = load(w + 16, 1);
      s1 = _mm512_fmadd_ps(load(x0 + 16, 1), w1, s1);
      if (P == 2) t1 = _mm512_fmadd_ps(load(x1 + 16, 1), w1, t1);
    }
    if (U > 2) {
      const __m512 w2 = load(w + 32, 2);
      s2 = _mm512_fmadd_ps(load(x0 + 32, 2), w2, s2);
      if (P == 2) t2 = _mm512_fmadd_ps(load(x1 + 32, 2), w2, t2);
    }
    if (U > 3) {
      const __m512 w3 = load(w + 48, 3);
      s3 = _mm512_fmadd_ps(load(x0 + 48, 3), w3, s3);
      if (P == 2) t3 = _mm512_fmadd_ps(load(x1 + 48, 3), w3, t3);
    }
  }
  const __m512 acc[2][4] = {{s0, s1, s2, s3}, {t0, t1, t2, t3}};
  for (int u = 0; u < U; ++u) {
    const __m512 b = p.bias ? load(p.bias + ch + 16 * u, u) : _mm512_setzero_ps();
    for (int q = 0; q < P; ++q) {
      const __m512 v = Activate(_mm512_add_ps(acc[q][u], b), p.act, p.lo, p.hi);
      float* y = px[q].y + ch + 16 * u;
      if (Tail && u == U - 1)
        _mm512_mask_storeu_ps(y, last, v);
      else
        _mm512_storeu_ps(y, v);
    }
  }
}

template <bool Tail, int P>
void DwRest(const DwNhwcF32Args& p, const DwPixel* px, int64_t ch, int64_t vectors,
            __mmask16 last) {
  switch (vectors) {
    case 4:  // C % 64 > 48: a partial fourth vector
      DwBlock<4, Tail, P>(p, px, ch, last);
      break;
    case 3:
      DwBlock<3, Tail, P>(p, px, ch, last);
      break;
    case 2:
      DwBlock<2, Tail, P>(p, px, ch, last);
      break;
    case 1:
      DwBlock<1, Tail, P>(p, px, ch, last);
      break;
    default:
      break;
  }
}

template <int P>
void DwPixels(const DwNhwcF32Args& p, const DwPixel* px) {
  const int64_t tail = p.c % 16;
  const __mmask16 last = TailMask(tail);
  int64_t ch = 0;
  for (; ch + 64 <= p.c; ch += 64) DwBlock<4, false, P>(p, px, ch, last);
  const int64_t vectors = (p.c - ch + 15) / 16;
  if (tail)
    DwRest<true, P>(p, px, ch, vectors, last);
  else
    DwRest<false, P>(p, px, ch, vectors, last);
}

void DwAvx512(const DwNhwcF32Args& p) {
  auto pixel = [&](int64_t i) {
    return DwPixel{p.a_step ? p.a : p.a + i * p.taps, i * p.a_step, p.y + i * p.ldy};
  };
  int64_t i = 0;
  for (; i + 2 <= p.pixels; i += 2) {
    const DwPixel px[2] = {pixel(i), pixel(i + 1)};
    DwPixels<2>(p, px);
  }
  if (i < p.pixels) {
    const DwPixel px = pixel(i);
    DwPixels<1>(p, &px);
  }
}

// Depthwise runs (conv_f32_nhwc_dwrun.h) on zmm: 8 pixels by 16 channels.
struct DwRunZmm {
  using F = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16, kPixels = 8;
  static constexpr int64_t kMaxChannelsPerPixel3x3 = 0;
  // Stem runs: 16 pixels of one vector, 8 of two (12: a 7x7 RGB stem to 64
  // channels 1.00 -> 0.87 ms, an unpadded 3x3 s2 0.196 -> 0.183).
  static constexpr int kStemPixels1 = 16, kStemPixels2 = 8, kRegisters = 32;
  static Mask Tail(int64_t n) { return TailMask(n); }
  static F Zero() { return _mm512_setzero_ps(); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static F LoadTail(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void StoreTail(float* p, Mask m, F v) { _mm512_mask_storeu_ps(p, m, v); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Act(F x, F32Act act, float lo, float hi) { return Activate(x, act, lo, hi); }
};

bool DwRunAvx512(const DwRunF32Args& g) {
  return DwRun<DwRunZmm>(g);
}

void StemRunAvx512(const StemRunF32Args& g) {
  StemRun<DwRunZmm>(g);
}

// Winograd lanes (conv_f32_nhwc_winograd.h): 16 channels, the tail masked
// (maskz loads: the lanes past c read nothing and are not stored).
struct WinogradZmm : DwRunZmm {
  static constexpr bool kMaskedTail = true;
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Set(float v) { return _mm512_set1_ps(v); }
  static bool AnyNan(F v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
};

// 16 pixels of three planes into 48 interleaved floats: each output vector
// takes the red and green of its pixels in one two-source permute, then
// the blue in a second.
void Interleave3Avx512(const float* src, int64_t plane, int64_t width, float* dst) {
  alignas(64) static const int32_t kRg[3][16] = {
      {0, 16, 0, 1, 17, 0, 2, 18, 0, 3, 19, 0, 4, 20, 0, 5},
      {21, 0, 6, 22, 0, 7, 23, 0, 8, 24, 0, 9, 25, 0, 10, 26},
      {0, 11, 27, 0, 12, 28, 0, 13, 29, 0, 14, 30, 0, 15, 31, 0}};
  alignas(64) static const int32_t kB[3][16] = {
      {0, 1, 16, 3, 4, 17, 6, 7, 18, 9, 10, 19, 12, 13, 20, 15},
      {0, 21, 2, 3, 22, 5, 6, 23, 8, 9, 24, 11, 12, 25, 14, 15},
      {26, 1, 2, 27, 4, 5, 28, 7, 8, 29, 10, 11, 30, 13, 14, 31}};
  __m512i rg[3], b[3];
  for (int v = 0; v < 3; ++v) {
    rg[v] = _mm512_load_si512(kRg[v]);
    b[v] = _mm512_load_si512(kB[v]);
  }
  const float *r = src, *g = src + plane, *bl = src + 2 * plane;
  int64_t i = 0;
  for (; i + 16 <= width; i += 16) {
    const __m512 vr = _mm512_loadu_ps(r + i), vg = _mm512_loadu_ps(g + i);
    const __m512 vb = _mm512_loadu_ps(bl + i);
    float* const d = dst + 3 * i;
    for (int v = 0; v < 3; ++v)
      _mm512_storeu_ps(d + 16 * v,
                       _mm512_permutex2var_ps(_mm512_permutex2var_ps(vr, rg[v], vg), b[v], vb));
  }
  for (; i < width; ++i) {
    dst[3 * i] = r[i];
    dst[3 * i + 1] = g[i];
    dst[3 * i + 2] = bl[i];
  }
}

}  // namespace

extern const ConvNhwcF32Kernels kConvNhwcF32Avx512F;
const ConvNhwcF32Kernels kConvNhwcF32Avx512F = {"avx512f",
                                                kMr,
                                                kNr,
                                                IgemmAvx512,
                                                DwAvx512,
                                                WinogradInput<WinogradZmm, 2>,
                                                WinogradOutput<WinogradZmm, 2>,
                                                DwRunAvx512,
                                                StemRunAvx512,
                                                WinogradInput<WinogradZmm, 4>,
                                                WinogradOutput<WinogradZmm, 4>,
                                                Interleave3Avx512};

}  // namespace kernels
}  // namespace qfold
