// Drivers of the fp16 precision (igemm_fp16.h): weight packing, the
// channels-last convolution and the Gemm with a constant B on the fp16
// microkernel (igemm_fp16_neonfp16.cc). Built on every architecture; only
// aarch64 with FEAT_FP16 has a kernel table, so elsewhere nothing reaches it.
#include "kernels/igemm_fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__aarch64__)
extern const Fp16Kernels kFp16NeonFp16;
#endif

const Fp16Kernels* Fp16KernelsFor(const CpuFeatures& f, const char** variant) {
  const Fp16Kernels* k = nullptr;
#if defined(__aarch64__)
  if (f.asimd && f.fp16) k = &kFp16NeonFp16;
#endif
  (void)f;
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

uint16_t HalfFromFloat(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  // A NaN keeps its top payload bits, quieted, as fcvt does; the rest rounds
  // like Cast's FloatToHalf (to nearest even, subnormals kept).
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16 & 0x8000u) | 0x7e00u | (x >> 13 & 0x3ffu));
  return FloatToHalf(v);
}

namespace {

constexpr int64_t RoundUp8(int64_t v) {
  return (v + 7) / 8 * 8;
}

struct ConvFp16State {
  const Fp16Kernels* k = nullptr;
  int64_t m = 0, cg = 0, group = 1, kh = 1, kw = 1, kc = 0;
  int64_t panels = 0;      // per group
  int64_t panel_size = 0;  // halves: taps * kc * 16
  AlignedVector<uint16_t> w;
};

// The tiles' pointers: blocks of up to 4 tiles of 8 pixels per work unit, as
// the bf16 driver's, so a block's weights are read once per 32 pixels.
constexpr int64_t kTilesPerBlock = 4;

struct Fp16Scratch {
  int64_t copy = 0, zeros = 0, ptrs = 0;  // halves, halves, pointers per thread
  size_t Bytes(int threads) const {
    ScratchLayout l;
    l.Add(size_t(copy) * 2);
    l.Add(size_t(zeros) * 2);
    for (int t = 0; t < threads; ++t) l.Add(size_t(ptrs) * sizeof(void*));
    return l.total();
  }
};

ThreadPool* ConvPool(const ConvFp16State& s, const ConvNhwcF32Call& c) {
  // MACs; a thread needs enough of them to pay for the hand-off.
  return PoolForWork(c.pool, c.n * c.oh * c.ow * s.m * s.kh * s.kw * s.cg, int64_t(1) << 16);
}

Fp16Scratch ScratchFor(const ConvFp16State& s, const ConvNhwcF32Call& c) {
  return {c.n * c.ih * c.iw * s.group * s.kc, s.kc, kTilesPerBlock * s.kh * s.kw * kFp16Mr};
}

}  // namespace

std::shared_ptr<void> PrepareConvNhwcFp16(const Fp16Kernels& k, const Tensor& w, int64_t group) {
  if (w.dtype != DType::kFloat32 || w.rank() != 4 || group <= 0) return nullptr;
  auto s = std::make_shared<ConvFp16State>();
  s->k = &k;
  s->m = w.shape[0];
  s->cg = w.shape[1];
  s->group = group;
  s->kh = w.shape[2];
  s->kw = w.shape[3];
  const int64_t taps = s->kh * s->kw;
  if (s->m <= 0 || s->m % group != 0 || s->cg <= 0 || taps <= 0) return nullptr;
  const int64_t mg = s->m / group;
  if (s->cg == 1 && mg == 1) return nullptr;  // depthwise: fp32
  s->kc = RoundUp8(s->cg);
  s->panels = (mg + kFp16Nr - 1) / kFp16Nr;
  s->panel_size = taps * s->kc * kFp16Nr;
  s->w.assign(size_t(group * s->panels * s->panel_size), uint16_t(0));
  const float* wd = w.ptr<float>();  // [m][cg][kh][kw]
  for (int64_t oc = 0; oc < s->m; ++oc) {
    const int64_t g = oc / mg, j = oc % mg;
    uint16_t* panel = s->w.data() + (g * s->panels + j / kFp16Nr) * s->panel_size + j % kFp16Nr;
    for (int64_t ch = 0; ch < s->cg; ++ch)
      for (int64_t t = 0; t < taps; ++t)
        panel[(t * s->kc + ch) * kFp16Nr] = HalfFromFloat(wd[(oc * s->cg + ch) * taps + t]);
  }
  return s;
}

size_t ConvNhwcFp16Scratch(const void* state, const ConvNhwcF32Call& c) {
  const ConvFp16State& s = *static_cast<const ConvFp16State*>(state);
  return ScratchFor(s, c).Bytes(NumThreads(ConvPool(s, c)));
}

// x is copied once into half rows of kc channels per (pixel, group), then
// each work unit (a block of up to 4 tiles of 8 pixels of one image) builds
// its tiles' tap pointers once and runs every group and panel over them.
void RunConvNhwcFp16(const void* state, const ConvNhwcF32Call& c) {
  const ConvFp16State& s = *static_cast<const ConvFp16State*>(state);
  const Fp16Kernels& k = *s.k;
  const int64_t pixels = c.oh * c.ow, taps = s.kh * s.kw, kc = s.kc, gkc = s.group * kc;
  const int64_t mg = s.m / s.group;
  const int64_t tiles = (pixels + kFp16Mr - 1) / kFp16Mr;
  const int64_t blocks = (tiles + kTilesPerBlock - 1) / kTilesPerBlock;
  ThreadPool* const pool = ConvPool(s, c);
  const Fp16Scratch fs = ScratchFor(s, c);
  const ScratchRegion region(c.scratch, fs.Bytes(NumThreads(pool)));
  ScratchLayout l;
  uint16_t* const copy = region.at<uint16_t>(l.Add(size_t(fs.copy) * 2));
  uint16_t* const zeros = region.at<uint16_t>(l.Add(size_t(fs.zeros) * 2));
  const size_t ptrs0 = l.Add(0), ptrs_bytes = (size_t(fs.ptrs) * sizeof(void*) + 63) / 64 * 64;
  std::fill(zeros, zeros + kc, uint16_t(0));
  // A (pixel, group) pair is cg channels of x, kc of the copy.
  ParallelFor(pool, c.n * c.ih * c.iw * s.group, [&](int64_t p0, int64_t p1, int) {
    k.convert(c.x + p0 * s.cg, p1 - p0, s.cg, copy + p0 * kc, kc);
  });
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const uint16_t** ptrs = region.at<const uint16_t*>(ptrs0 + size_t(slot) * ptrs_bytes);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / blocks, t0 = u % blocks * kTilesPerBlock;
      const int64_t t1 = std::min(tiles, t0 + kTilesPerBlock);
      const uint16_t* xb = copy + b * c.ih * c.iw * gkc;
      float* yb = c.y + b * pixels * s.m;
      const float* rb = c.residual ? c.residual + b * pixels * s.m : nullptr;
      for (int64_t g = 0; g < s.group; ++g) {
        const uint16_t* xg = xb + g * kc;
        // [tile][tap][8]; rows past the last pixel repeat it (never stored).
        for (int64_t t = t0; t < t1; ++t) {
          const uint16_t** tp = ptrs + (t - t0) * taps * kFp16Mr;
          for (int64_t r = 0; r < kFp16Mr; ++r) {
            const int64_t p = std::min(t * kFp16Mr + r, pixels - 1), oy = p / c.ow, ox = p % c.ow;
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
                const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
                tp[(ky * s.kw + kx) * kFp16Mr + r] = iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw
                                                         ? zeros
                                                         : xg + (iy * c.iw + ix) * gkc;
              }
          }
        }
        for (int64_t pn = 0; pn < s.panels; ++pn) {
          const int64_t col0 = g * mg + pn * kFp16Nr;
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t q0 = t * kFp16Mr;
            IgemmFp16Args a;
            a.a = ptrs + (t - t0) * taps * kFp16Mr;
            a.rows = std::min(kFp16Mr, pixels - q0);
            a.taps = taps;
            a.kc = kc;
            a.w = s.w.data() + (g * s.panels + pn) * s.panel_size;
            a.cols = std::min<int64_t>(kFp16Nr, mg - pn * kFp16Nr);
            a.bias = c.bias ? c.bias + col0 : nullptr;
            a.residual = rb ? rb + q0 * s.m + col0 : nullptr;
            a.act = c.act;
            a.lo = c.lo;
            a.hi = c.hi;
            a.y = yb + q0 * s.m + col0;
            a.ldy = s.m;
            k.igemm(a);
          }
        }
      }
      if (c.post) {
        const int64_t q0 = t0 * kFp16Mr, q1 = std::min(pixels, t1 * kFp16Mr);
        c.post->Apply(yb + q0 * s.m, (q1 - q0) * s.m);
      }
    }
  };
  ParallelFor(pool, c.n * blocks, work);
}

void PackFp16(const float* src, int64_t rs, int64_t cs, int64_t k, int64_t n, PackedFp16* out) {
  out->k = k;
  out->kc = RoundUp8(k);
  out->n = n;
  const int64_t panels = (n + kFp16Nr - 1) / kFp16Nr;
  out->data.assign(size_t(panels * out->kc * kFp16Nr), uint16_t(0));
  for (int64_t q = 0; q < k; ++q)
    for (int64_t col = 0; col < n; ++col)
      out->data[size_t((col / kFp16Nr * out->kc + q) * kFp16Nr + col % kFp16Nr)] =
          HalfFromFloat(src[q * rs + col * cs]);
}

namespace {

// The half rows of A, then (a transposed A) the gathered float row.
struct GemmFp16Layout {
  size_t a_at = 0, row_at = 0, bytes = 0;
};

GemmFp16Layout LayoutGemmFp16(int64_t m, int64_t cs, const PackedFp16& b) {
  GemmFp16Layout p;
  if (m <= 0 || b.n <= 0 || b.k == 0) return p;
  ScratchLayout l;
  p.a_at = l.Add(size_t(m * b.kc) * sizeof(uint16_t));
  if (cs != 1) p.row_at = l.Add(size_t(b.k) * sizeof(float));
  p.bytes = l.total();
  return p;
}

}  // namespace

size_t GemmFp16Scratch(int64_t m, int64_t cs, const PackedFp16& b) {
  return LayoutGemmFp16(m, cs, b).bytes;
}

void GemmFp16(const Fp16Kernels& kern, const float* a, int64_t rs, int64_t cs, int64_t m,
              const PackedFp16& b, float* y, ThreadPool* pool, const ScratchSpan& scratch) {
  const int64_t k = b.k, kc = b.kc, n = b.n;
  if (m <= 0 || n <= 0) return;
  if (k == 0) {
    std::fill(y, y + m * n, 0.f);
    return;
  }
  const GemmFp16Layout lay = LayoutGemmFp16(m, cs, b);
  const ScratchRegion region(scratch, lay.bytes);
  // A as half rows of kc values (a transposed A is gathered first).
  uint16_t* const ab = region.at<uint16_t>(lay.a_at);
  if (cs == 1 && rs == k) {
    kern.convert(a, m, k, ab, kc);
  } else if (cs == 1) {
    for (int64_t i = 0; i < m; ++i) kern.convert(a + i * rs, 1, k, ab + i * kc, kc);
  } else {
    float* const row = region.at<float>(lay.row_at);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < k; ++q) row[q] = a[i * rs + q * cs];
      kern.convert(row, 1, k, ab + i * kc, kc);
    }
  }
  const int64_t row_tiles = (m + kFp16Mr - 1) / kFp16Mr, panels = (n + kFp16Nr - 1) / kFp16Nr;
  ThreadPool* const run_pool = PoolForWork(pool, m * n * k, int64_t(1) << 16);
  // Panel-major units: a thread's panels stay in its cache while its row tiles pass.
  ParallelFor(run_pool, panels * row_tiles, [&](int64_t u0, int64_t u1, int) {
    const uint16_t* rows[kFp16Mr];
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t p = u / row_tiles, i0 = u % row_tiles * kFp16Mr;
      IgemmFp16Args g;
      g.rows = std::min(kFp16Mr, m - i0);
      for (int64_t r = 0; r < kFp16Mr; ++r) rows[r] = ab + std::min(i0 + r, m - 1) * kc;
      g.a = rows;
      g.taps = 1;
      g.kc = kc;
      g.w = b.data.data() + p * kc * kFp16Nr;
      g.cols = std::min<int64_t>(kFp16Nr, n - p * kFp16Nr);
      g.y = y + i0 * n + p * kFp16Nr;
      g.ldy = n;
      kern.igemm(g);
    }
  });
}

}  // namespace kernels
}  // namespace qfold
