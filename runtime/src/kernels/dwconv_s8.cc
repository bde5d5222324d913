// Depthwise convolution driver (dwconv_s8.h): tap-pair plan, per-channel
// weights and multipliers, the padded phase-split plane of each channel, and
// the split of the planes between threads. The ISA files supply the row
// kernels; every plane is computed the same way whatever the thread count.
#include "kernels/dwconv_s8.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernel_config.h"
#include "kernels/padded_plane.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const DwConvS8Kernels kDwConvS8Avx2;
extern const DwConvS8Kernels kDwConvS8Avx512Vnni;
#endif
#if defined(__aarch64__)
extern const DwConvS8Kernels kDwConvS8Neon;
#endif

const DwConvS8Kernels* DwConvS8For(const CpuFeatures& f, const char** variant) {
  const DwConvS8Kernels* k = nullptr;
#if defined(__x86_64__)
  // int16 products: AVX-VNNI's vpdpbusd brings nothing, vpdpwssd (AVX-512 VNNI) does.
  if (f.avx2 && f.fma) k = f.avx512_core() && f.avx512vnni ? &kDwConvS8Avx512Vnni : &kDwConvS8Avx2;
#endif
#if defined(__aarch64__)            // runtime/CMakeLists.txt always compiles *_neon*.cc there
  if (f.asimd) k = &kDwConvS8Neon;  // int16 products (smlal): nothing to gain from dotprod or i8mm
#endif
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

namespace {

int64_t RoundUp(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

enum class Kind { kGeneral, kStride1, kStride2 };

// Geometry of one call's planes.
struct Plan {
  Kind kind = Kind::kGeneral;
  int64_t ph = 0;   // padded rows the windows cover
  int64_t sw = 1;   // phases per row (general kind), else 1
  int64_t len = 0;  // columns per phase row
  int64_t taps = 0;
  int64_t nw = 0;           // packed weights per channel
  int64_t plane_elems = 0;  // the phase rows plus one unsplit row of scratch
};

Plan MakePlan(const DwConvS8Kernels& k, const QConvCall& c) {
  Plan p;
  p.ph = (c.oh - 1) * c.sh + (c.kh - 1) * c.dh + 1;
  p.taps = c.kh * c.kw;
  const bool small_kw = c.kw == 3 || c.kw == 5 || c.kw == 7;
  if (k.stride1 && c.sw == 1 && c.dw == 1 && small_kw) {
    p.kind = Kind::kStride1;
    p.len = RoundUp(RoundUp(c.ow, kDwRowAlign) + c.kw + 2, 16);
    p.nw = c.kh * 2 * (c.kw / 2 + 1);
  } else if (k.stride2 && c.sw == 2 && c.dw == 1 && small_kw) {
    p.kind = Kind::kStride2;
    p.len = RoundUp(2 * RoundUp(c.ow, kDwRowAlign) + c.kw + 2, 16);
    p.nw = c.kh * ((c.kw + 1) / 2);
  } else {
    p.sw = c.sw;
    const int64_t max_col = (c.kw - 1) * c.dw / c.sw;
    // Whole vectors of outputs may be computed past ow; their taps stay in the row.
    p.len = RoundUp(RoundUp(c.ow, kDwRowAlign) + max_col + 1, 16);
    p.nw = (p.taps + 1) / 2;
  }
  p.plane_elems = (p.ph + 1) * p.sw * p.len + kDwRowAlign;
  return p;
}

// Packs channel weights (w - wz) for the plan's kernel kind.
void PackWeights(const Plan& p, const QConvCall& c, const int16_t* w, int32_t wz, int32_t* dst) {
  auto tap = [&](int64_t ky, int64_t kx) {
    return kx >= 0 && kx < c.kw ? int32_t(w[ky * c.kw + kx]) - wz : 0;
  };
  if (p.kind == Kind::kStride1) {
    const int64_t nl = c.kw / 2 + 1;
    for (int64_t ky = 0; ky < c.kh; ++ky, dst += 2 * nl) {
      for (int64_t q = 0; q < nl; ++q) {
        dst[q] = DwPair(tap(ky, 2 * q), tap(ky, 2 * q + 1));
        dst[nl + q] = DwPair(tap(ky, 2 * q - 1), tap(ky, 2 * q));
      }
    }
  } else if (p.kind == Kind::kStride2) {
    const int64_t nl = (c.kw + 1) / 2;
    for (int64_t ky = 0; ky < c.kh; ++ky)
      for (int64_t q = 0; q < nl; ++q) *dst++ = DwPair(tap(ky, 2 * q), tap(ky, 2 * q + 1));
  } else {
    for (int64_t q = 0; q < p.nw; ++q) {
      const int64_t t0 = 2 * q, t1 = 2 * q + 1;
      dst[q] = DwPair(tap(t0 / c.kw, t0 % c.kw), t1 < p.taps ? tap(t1 / c.kw, t1 % c.kw) : 0);
    }
  }
}

// Writes the int16 plane of x - xzp: padded row py, phase r at
// (py * sw + r) * len, column j = padded column j * sw + r. Padding is
// zeroed by the caller once per call: the same cells are padding in every
// plane, so only the input's own cells are written here.
void BuildPlane(const DwConvS8Kernels& k, const QConvCall& c, const Plan& p, const uint8_t* x,
                bool x_signed, int16_t* plane) {
  const int64_t sw = p.sw, len = p.len, wide = sw * len;
  int16_t* tmp = plane + p.ph * wide;  // an unsplit padded row, zero outside the input
  const int64_t left = std::min(c.pad_left, wide);
  const int64_t n = std::max<int64_t>(0, std::min(c.iw, wide - left));
  const int64_t py_end = std::min(p.ph, c.ih + c.pad_top);
  for (int64_t py = c.pad_top; py < py_end; ++py) {
    int16_t* rows = plane + py * wide;
    const uint8_t* src = x + (py - c.pad_top) * c.iw;
    if (sw == 1) {
      k.widen_row(src, n, x_signed, c.x_zp, rows + left);
      continue;
    }
    k.widen_row(src, n, x_signed, c.x_zp, tmp + left);
    if (sw == 2) {
      k.split2(tmp, len, rows, rows + len);
    } else {
      for (int64_t r = 0; r < sw; ++r)
        for (int64_t j = 0; j < len; ++j) rows[r * len + j] = tmp[j * sw + r];
    }
  }
}

}  // namespace

bool PrepareDwConvS8(const KernelConfig& kc, const Tensor& w, DwConvS8State* s) {
  s->k = kc.dwconv_s8;
  if (!s->k || (w.rank() != 3 && w.rank() != 4) || w.shape[1] != 1) return false;
  s->w_dtype = w.dtype;
  s->m = w.shape[0];
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape[w.rank() - 1];
  const int64_t n = s->m * s->kh * s->kw;
  s->w.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    s->w[size_t(i)] = w.dtype == DType::kInt8 ? w.ptr<int8_t>()[i] : w.ptr<uint8_t>()[i];
  return true;
}

namespace {

// How one call runs and where its scratch goes, computed alike for the
// session's request (DwConvS8Scratch) and for the run.
struct DwCall {
  Plan p;
  ThreadPool* pool = nullptr;  // null when not worth splitting
  int threads = 1;
  ScratchLayout layout;
  size_t off = 0, wpack = 0, bias = 0, mult = 0, planes = 0;
  size_t plane_bytes = 0;  // per thread, a multiple of 64
};

// False when the call is not covered (the op then runs its reference kernel).
bool PlanDwCall(const DwConvS8State& s, const QConvCall& c, DwCall* d) {
  const Tensor& x = *c.x;
  if (!s.k || x.shape[1] != s.m || c.kh != s.kh || c.kw != s.kw || c.pad_top < 0 ||
      c.pad_left < 0 || c.sh < 1 || c.sw < 1 || c.dh < 1 || c.dw < 1)
    return false;
  int64_t rows = 0, cols = 0;
  if (!CoveredExtent(c.oh, c.sh, c.kh, c.dh, &rows) ||
      !CoveredExtent(c.ow, c.sw, c.kw, c.dw, &cols) ||
      !PaddedPlaneFits(rows, cols, c.ih * c.iw, c.oh * c.ow, c.kh * c.kw))
    return false;  // huge pads: the reference kernel (padded_plane.h)
  d->p = MakePlan(*s.k, c);
  const int64_t planes = x.shape[0] * s.m;
  d->pool = planes * c.oh * c.ow * d->p.taps < (int64_t(1) << 16) ? nullptr : c.pool;
  d->threads = NumThreads(d->pool);
  if (d->p.kind == Kind::kGeneral) d->off = d->layout.Add(size_t(2 * d->p.nw) * sizeof(int64_t));
  d->wpack = d->layout.Add(size_t(s.m * d->p.nw) * sizeof(int32_t));
  d->bias = d->layout.Add(size_t(s.m) * sizeof(int32_t));
  d->mult = d->layout.Add(size_t(s.m) * sizeof(float));
  d->plane_bytes = size_t(RoundUp(d->p.plane_elems * int64_t(sizeof(int16_t)), 64));
  d->planes = d->layout.Add(d->plane_bytes * size_t(d->threads));
  return true;
}

}  // namespace

size_t DwConvS8Scratch(const DwConvS8State& s, const QConvCall& c) {
  DwCall d;
  return PlanDwCall(s, c, &d) ? d.layout.total() : 0;
}

bool RunDwConvS8(const DwConvS8State& s, const QConvCall& c) {
  DwCall d;
  if (!PlanDwCall(s, c, &d)) return false;
  const Tensor& x = *c.x;
  const DwConvS8Kernels& k = *s.k;
  const Plan& p = d.p;
  const int64_t m = s.m;
  const ScratchRegion region(c.scratch, d.layout.total());
  int64_t* off = p.kind == Kind::kGeneral ? region.at<int64_t>(d.off) : nullptr;
  int32_t* wpack = region.at<int32_t>(d.wpack);
  int32_t* bias = region.at<int32_t>(d.bias);
  float* mult = region.at<float>(d.mult);
  if (off) {
    // Tap pairs in row-major tap order; an odd count ends with a lone tap.
    for (int64_t t = 0; t < 2 * p.nw; ++t) {
      const int64_t tap = std::min(t, p.taps - 1), ky = tap / c.kw, kx = tap % c.kw;
      off[t] = (ky * c.dh * p.sw + kx * c.dw % p.sw) * p.len + kx * c.dw / p.sw;
    }
  }
  for (int64_t ch = 0; ch < m; ++ch) {
    const int32_t wz = c.w_zp.size() == 1 ? c.w_zp[0] : c.w_zp[size_t(ch)];
    PackWeights(p, c, s.w.data() + ch * p.taps, wz, wpack + ch * p.nw);
    bias[ch] = c.bias ? c.bias[ch] : 0;
    // The multiplier in float32, in the reference's order (docs/NUMERICS.md).
    mult[ch] = c.x_scale * c.w_scale[c.w_scale.size() == 1 ? 0 : size_t(ch)] / c.y_scale;
  }
  void (*kernel)(const DwPlaneArgs&) = p.kind == Kind::kStride1   ? k.stride1
                                       : p.kind == Kind::kStride2 ? k.stride2
                                                                  : k.general;

  const int64_t planes = x.shape[0] * m, out_plane = c.oh * c.ow, in_plane = c.ih * c.iw;
  const bool x_signed = x.dtype == DType::kInt8;
  auto work = [&](int64_t begin, int64_t end, int t) {
    int16_t* buf = region.at<int16_t>(d.planes + size_t(t) * d.plane_bytes);
    std::fill(buf, buf + p.plane_elems, int16_t(0));
    DwPlaneArgs a;
    a.src = buf;
    a.out_row_step = c.sh * p.sw * p.len;
    a.tap_row_step = c.dh * p.sw * p.len;
    a.oh = c.oh;
    a.ow = c.ow;
    a.kh = int(c.kh);
    a.kw = int(c.kw);
    a.off = off;
    a.np = int(p.nw);
    a.yzp = c.y_zp;
    a.lo = c.lo;
    a.hi = c.hi;
    for (int64_t pl = begin; pl < end; ++pl) {
      const int64_t ch = pl % m;
      BuildPlane(k, c, p, x.ptr<uint8_t>() + pl * in_plane, x_signed, buf);
      a.w = wpack + ch * p.nw;
      a.bias = bias[ch];
      a.mult = mult[ch];
      if (c.int32_out)
        a.y32 = c.y->ptr<int32_t>() + pl * out_plane;
      else
        a.y = c.y->ptr<uint8_t>() + pl * out_plane;
      kernel(a);
    }
  };
  ParallelFor(d.pool, planes, work);
  return true;
}

}  // namespace kernels
}  // namespace qfold
