// Channels-last depthwise convolution driver (dwconv_nhwc_s8.h): weights,
// folded bias and multipliers packed per channel block (cached until the
// zero points or scales change), the per-row indirection buffers, the split
// of output rows between threads, and the portable row kernel used at the
// levels without a hand-written one (NEON: plain int32 loops across
// channels, which the compiler vectorizes).
#include "kernels/dwconv_nhwc_s8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const DwConvNhwcKernels kDwConvNhwcAvx2;
extern const DwConvNhwcKernels kDwConvNhwcAvx512Vnni;
#elif defined(__aarch64__)
extern const DwConvNhwcKernels kDwConvNhwcNeon;
#endif

namespace {

constexpr int kGenericBlock = 16;

// Same rule as RoundAddSaturate (ops/quant_util.h) on a float product.
inline uint8_t RequantScalar(int32_t acc, float mult, int32_t zp, int32_t lo, int32_t hi) {
  const float f = float(acc) * mult;
  if (std::isnan(f)) return uint8_t(std::min(std::max(zp, lo), hi));
  const float r = std::nearbyint(f);
  if (r <= float(lo - zp)) return uint8_t(lo);
  if (r >= float(hi - zp)) return uint8_t(hi);
  return uint8_t(int32_t(r) + zp);
}

// n channels (n <= kGenericBlock) of one packed block, pairs in channel order.
template <class T>
void GenericBlock(const DwNhwcRowArgs& a, const uint8_t* const* t, int64_t off, int64_t b,
                  int64_t n, uint8_t* y) {
  constexpr int kV = kGenericBlock;
  int32_t acc[kV];
  const int32_t* bias = a.bias + b * kV;
  for (int i = 0; i < kV; ++i) acc[i] = bias[i];
  const int16_t* w = a.w + b * int64_t(a.np) * 2 * kV;
  for (int p = 0; p < a.np; ++p, w += 2 * kV) {
    const T* x0 = reinterpret_cast<const T*>(t[2 * p] + off);
    const T* x1 = reinterpret_cast<const T*>(t[2 * p + 1] + off);
    if (n == kV) {
      for (int i = 0; i < kV; ++i)
        acc[i] += int32_t(x0[i]) * int32_t(w[2 * i]) + int32_t(x1[i]) * int32_t(w[2 * i + 1]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        acc[i] += int32_t(x0[i]) * int32_t(w[2 * i]) + int32_t(x1[i]) * int32_t(w[2 * i + 1]);
    }
  }
  const float* m = a.mult + b * kV;
  if (a.yf) {
    const float* fb = a.fbias + b * kV;
    float* yf = a.yf + (y - a.y);
    for (int64_t i = 0; i < n; ++i) {
      const float f = std::fma(float(acc[i]), m[i], fb[i]);
      yf[i] = f < a.flo ? a.flo : (f > a.fhi ? a.fhi : f);  // NaN passes, as in the x86 kernels
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = RequantScalar(acc[i], m[i], a.yzp, a.lo, a.hi);
}

template <class T>
void GenericRowT(const DwNhwcRowArgs& a) {
  constexpr int kV = kGenericBlock;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.c;
    for (int64_t b = 0; b * kV < a.c; ++b)
      GenericBlock<T>(a, t, px * a.pix_step + b * kV, b, std::min<int64_t>(kV, a.c - b * kV),
                      y + b * kV);
  }
}

void GenericRow(const DwNhwcRowArgs& a) {
  if (a.x_signed)
    GenericRowT<int8_t>(a);
  else
    GenericRowT<uint8_t>(a);
}

constexpr DwConvNhwcKernels kDwConvNhwcGeneric = {kGenericBlock, /*lane_pairs=*/false,
                                                  /*overlap_tail=*/false, GenericRow};

// Prepared weights, and the packing for the last call's zero points, bias
// and scales (they are constants of the model, so packed once in practice).
struct State {
  const DwConvNhwcKernels* k = nullptr;
  int64_t m = 0, kh = 1, kw = 1;
  std::vector<int16_t> w;  // raw weights [m][kh * kw]
  bool packed = false;
  int32_t key_xzp = 0;
  std::vector<int32_t> key_wzp, key_bias;
  std::vector<float> key_mult, key_fbias;
  AlignedVector<int16_t> wpack;
  std::vector<int32_t> bias;
  std::vector<float> mult, fbias;  // fbias: the float epilogue's (QfConvDequant)
};

// Channel of slot q (0 <= q < V) of a packed block.
int64_t SlotChannel(const DwConvNhwcKernels& k, int64_t q) {
  if (!k.lane_pairs) return q;
  const int64_t half = q / (k.block / 2), i = q % (k.block / 2);
  return (i / 4) * 8 + half * 4 + i % 4;
}

void Pack(State& s, const QConvCall& c, const std::vector<int32_t>& bias,
          const std::vector<float>& mult, const std::vector<float>& fbias) {
  const DwConvNhwcKernels& k = *s.k;
  const int64_t m = s.m, taps = s.kh * s.kw, np = (taps + 1) / 2, v = k.block;
  const int64_t nfull = m / v, nb = (m + v - 1) / v;
  s.wpack.assign(size_t(nb * np * 2 * v), 0);
  s.bias.assign(size_t(nb * v), 0);
  s.mult.assign(size_t(nb * v), 0.f);
  s.fbias.assign(fbias.empty() ? 0 : size_t(nb * v), 0.f);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t start = (b == nfull && k.overlap_tail && m >= v) ? m - v : b * v;
    for (int64_t q = 0; q < v; ++q) {
      const int64_t ch = start + SlotChannel(k, q);
      if (ch >= m) continue;
      const int32_t wz = c.w_zp.size() == 1 ? c.w_zp[0] : c.w_zp[size_t(ch)];
      const int16_t* wr = s.w.data() + ch * taps;
      // bias - x_zp * sum(w - w_zp), wrapping like the int32 accumulator.
      uint32_t folded = uint32_t(bias[size_t(ch)]);
      for (int64_t t = 0; t < taps; ++t) {
        const int32_t wv = int32_t(wr[t]) - wz;
        folded -= uint32_t(c.x_zp) * uint32_t(wv);
        s.wpack[size_t(((b * np + t / 2) * v + q) * 2 + t % 2)] = int16_t(wv);
      }
      s.bias[size_t(b * v + q)] = int32_t(folded);
      s.mult[size_t(b * v + q)] = mult[size_t(ch)];
      if (!fbias.empty()) s.fbias[size_t(b * v + q)] = fbias[size_t(ch)];
    }
  }
}

}  // namespace

const DwConvNhwcKernels* DwConvNhwcFor(const CpuFeatures& f, const char** variant) {
  const DwConvNhwcKernels* k = nullptr;
  const char* name = nullptr;
  if (HighestIsa(f) != Isa::kReference) {
    k = &kDwConvNhwcGeneric;  // portable loops the compiler vectorizes (NEON)
    name = "generic";
  }
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {  // int16 products: AVX-VNNI brings nothing, vpdpwssd does
    const bool vnni512 = f.avx512_core() && f.avx512vnni;
    k = vnni512 ? &kDwConvNhwcAvx512Vnni : &kDwConvNhwcAvx2;
    name = vnni512 ? "avx512vnni" : "avx2";
  }
#elif defined(__aarch64__)
  if (f.asimd) {
    k = &kDwConvNhwcNeon;
    name = "neon";
  }
#endif
  if (variant) *variant = name;
  return k;
}

std::shared_ptr<void> PrepareDwConvNhwcS8(const KernelConfig& kc, const Tensor& w, int64_t group) {
  const DwConvNhwcKernels* k = kc.dwconv_nhwc_s8;
  if (!k || (w.rank() != 3 && w.rank() != 4) || w.shape[1] != 1 || w.shape[0] != group ||
      (w.dtype != DType::kInt8 && w.dtype != DType::kUInt8) || !w.data)
    return nullptr;
  auto s = std::make_shared<State>();
  s->k = k;
  s->m = w.shape[0];
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape[size_t(w.rank() - 1)];
  const int64_t n = s->m * s->kh * s->kw;
  s->w.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    s->w[size_t(i)] = w.dtype == DType::kInt8 ? w.ptr<int8_t>()[i] : w.ptr<uint8_t>()[i];
  return s;
}

namespace {

// How one call runs and where its scratch goes, computed alike for the
// session's request (DwConvNhwcS8Scratch) and for the run.
struct DwNhwcCall {
  ThreadPool* pool = nullptr;  // null when not worth splitting
  int threads = 1;
  ScratchLayout layout;
  // This call's bias and multipliers (compared with the packed ones), the
  // row of x_zp bytes, per thread tap pointers and tap columns.
  size_t bias = 0, mult = 0, zrow = 0, ind = 0, col = 0;
  size_t ind_bytes = 0, col_bytes = 0;  // per thread, multiples of 64
};

// False when the call is not covered (the op then runs its reference
// kernel); *empty when there is nothing to compute. The output's dtype, the
// epilogue and the scales are checked only with `check_values` (the scratch
// request is made without them).
bool PlanDwNhwcCall(const State& s, const QConvCall& c, bool check_values, bool* empty,
                    DwNhwcCall* d) {
  *empty = false;
  const Tensor& x = *c.x;
  const int rank = x.rank();
  const bool float_out = c.dq_mult != nullptr;
  if ((rank != 3 && rank != 4) || x.shape[size_t(rank - 1)] != s.m || c.kh != s.kh ||
      c.kw != s.kw || (x.dtype != DType::kInt8 && x.dtype != DType::kUInt8))
    return false;
  if (check_values && !(float_out ? c.y->dtype == DType::kFloat32 && c.dq_bias
                                  : c.y->dtype == DType::kInt8 || c.y->dtype == DType::kUInt8))
    return false;
  if (c.pad_top < 0 || c.pad_left < 0 || c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1 || c.ih < 0 ||
      c.iw < 0 || c.oh < 0 || c.ow < 0)
    return false;
  if ((c.w_zp.size() != 1 && int64_t(c.w_zp.size()) != s.m) ||
      (check_values && c.w_scale.size() != 1 && int64_t(c.w_scale.size()) != s.m))
    return false;
  const int64_t n = x.shape[0], m = s.m, taps = s.kh * s.kw, np = (taps + 1) / 2;
  if (n * c.ih * c.iw * m != x.numel()) return false;
  if (n == 0 || m == 0 || c.oh == 0 || c.ow == 0) {
    *empty = true;
    return true;
  }
  d->pool = n * c.oh * c.ow * m * taps < (int64_t(1) << 16) ? nullptr : c.pool;
  d->threads = NumThreads(d->pool);
  d->bias = d->layout.Add(size_t(m) * sizeof(int32_t));
  d->mult = d->layout.Add(size_t(m) * sizeof(float));
  d->zrow = d->layout.Add(size_t(m));
  d->ind_bytes = (size_t(c.ow * 2 * np) * sizeof(const uint8_t*) + 63) / 64 * 64;
  d->col_bytes = (size_t(c.ow * s.kw) * sizeof(int64_t) + 63) / 64 * 64;
  d->ind = d->layout.Add(d->ind_bytes * size_t(d->threads));
  d->col = d->layout.Add(d->col_bytes * size_t(d->threads));
  return true;
}

// Whether n values at `a` equal the vector `b` bit for bit.
template <class T>
bool SameValues(const std::vector<T>& b, const T* a, int64_t n) {
  // memcmp must not see the null data() of empty vectors, even for 0 bytes.
  return int64_t(b.size()) == n && (n == 0 || std::memcmp(a, b.data(), size_t(n) * sizeof(T)) == 0);
}

}  // namespace

size_t DwConvNhwcS8Scratch(const void* state, const QConvCall& c) {
  if (!state || !c.x || !c.y) return 0;
  DwNhwcCall d;
  bool empty = false;
  if (!PlanDwNhwcCall(*static_cast<const State*>(state), c, /*check_values=*/false, &empty, &d) ||
      empty)
    return 0;
  return d.layout.total();
}

bool RunDwConvNhwcS8(void* state, const QConvCall& c) {
  if (!state || !c.x || !c.y) return false;
  State& s = *static_cast<State*>(state);
  DwNhwcCall d;
  bool empty = false;
  if (!PlanDwNhwcCall(s, c, /*check_values=*/true, &empty, &d)) return false;
  if (empty) return true;
  const Tensor& x = *c.x;
  const bool float_out = c.dq_mult != nullptr;
  const int64_t m = s.m, taps = s.kh * s.kw, np = (taps + 1) / 2;
  const ScratchRegion region(c.scratch, d.layout.total());

  // The multipliers in float32, in the reference's order (docs/NUMERICS.md);
  // the float epilogue's come with the call, and its int32 bias is 0.
  int32_t* bias = region.at<int32_t>(d.bias);
  float* mult = region.at<float>(d.mult);
  for (int64_t ch = 0; ch < m; ++ch) {
    bias[ch] = c.bias && !float_out ? c.bias[ch] : 0;
    mult[ch] = float_out
                   ? c.dq_mult[ch]
                   : c.x_scale * c.w_scale[c.w_scale.size() == 1 ? 0 : size_t(ch)] / c.y_scale;
  }
  const float* fbias = float_out ? c.dq_bias : nullptr;
  const int64_t nf = float_out ? m : 0;
  if (!s.packed || s.key_xzp != c.x_zp || s.key_wzp != c.w_zp || !SameValues(s.key_bias, bias, m) ||
      !SameValues(s.key_mult, mult, m) || !SameValues(s.key_fbias, fbias, nf)) {
    s.key_bias.assign(bias, bias + m);
    s.key_mult.assign(mult, mult + m);
    s.key_fbias.assign(fbias, fbias + nf);
    Pack(s, c, s.key_bias, s.key_mult, s.key_fbias);
    s.packed = true;
    s.key_xzp = c.x_zp;
    s.key_wzp = c.w_zp;
  }

  // Taps outside the input read this row of x_zp bytes (their terms vanish).
  uint8_t* zrow = region.at<uint8_t>(d.zrow);
  std::memset(zrow, uint8_t(c.x_zp), size_t(m));
  const uint8_t* xd = x.ptr<uint8_t>();
  // With float output, a.y only positions the generic kernel's blocks (never written).
  uint8_t* yd = c.y->ptr<uint8_t>();
  float* ydf = float_out ? c.y->ptr<float>() : nullptr;
  // Output columns [in0, in1) have every tap column inside the input.
  const int64_t in0 = std::min(c.ow, (c.pad_left + c.sw - 1) / c.sw);
  const int64_t last = c.iw - 1 - (s.kw - 1) * c.dw + c.pad_left;
  const int64_t in1 = std::max(in0, last < 0 ? 0 : std::min(c.ow, last / c.sw + 1));
  const int64_t rows = x.shape[0] * c.oh;

  auto work = [&](int64_t r0, int64_t r1, int t) {
    const uint8_t** ind = region.at<const uint8_t*>(d.ind + size_t(t) * d.ind_bytes);
    // Column part of each tap: input column, or -1 outside the input.
    int64_t* col = region.at<int64_t>(d.col + size_t(t) * d.col_bytes);
    for (int64_t ox = 0; ox < c.ow; ++ox)
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
        col[ox * s.kw + kx] = ix >= 0 && ix < c.iw ? ix : -1;
      }
    DwNhwcRowArgs a;
    a.c = m;
    a.np = int(np);
    a.w = s.wpack.data();
    a.bias = s.bias.data();
    a.mult = s.mult.data();
    a.yzp = c.y_zp;
    a.lo = c.lo;
    a.hi = c.hi;
    a.x_signed = x.dtype == DType::kInt8;
    if (float_out) {
      a.fbias = s.fbias.data();
      a.flo = c.dq_lo;
      a.fhi = c.dq_hi;
    }
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / c.oh, oy = r % c.oh;
      // Fills the taps of pixels [ox0, ox1) and runs them (or only fills).
      auto pixels = [&](int64_t ox0, int64_t ox1, bool run) {
        const uint8_t** p = ind;
        for (int64_t ox = ox0; ox < ox1; ++ox) {
          const uint8_t** first = p;
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
            const bool row_in = iy >= 0 && iy < c.ih;
            const uint8_t* xr = row_in ? xd + (b * c.ih + iy) * c.iw * m : nullptr;
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              const int64_t ix = col[ox * s.kw + kx];
              *p++ = row_in && ix >= 0 ? xr + ix * m : zrow;
            }
          }
          if (taps % 2) *p++ = *first;  // the lone last tap's partner, weight 0
        }
        a.taps = ind;
        a.tap_stride = 2 * np;
        a.pix_step = 0;
        a.npix = ox1 - ox0;
        a.y = yd + (r * c.ow + ox0) * m;
        if (float_out) a.yf = ydf + (r * c.ow + ox0) * m;
        if (run && ox1 > ox0) s.k->row(a);
      };
      const int64_t iy0 = oy * c.sh - c.pad_top;
      if (iy0 >= 0 && iy0 + (s.kh - 1) * c.dh < c.ih && in0 < in1) {
        // Interior pixels: the taps of the first, shifted by sw pixels per output.
        pixels(0, in0, true);
        pixels(in0, in0 + 1, false);
        a.tap_stride = 0;
        a.pix_step = c.sw * m;
        a.npix = in1 - in0;
        s.k->row(a);
        pixels(in1, c.ow, true);
      } else {
        pixels(0, c.ow, true);
      }
    }
  };
  ParallelFor(d.pool, rows, work);
  return true;
}

}  // namespace kernels
}  // namespace qfold
