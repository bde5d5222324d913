// Fast float Conv (conv_f32.h): GEMM over implicitly packed im2col panels,
// and a depthwise path. Work is split between threads on whole output
// panels (GEMM) or whole output planes (depthwise), so any thread count
// gives identical results.
#include "kernels/aligned_vector.h"
#include "kernels/conv_f32.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernel_config.h"
#include "kernels/padded_plane.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
void DwF32PlaneAvx2(const DwF32Plane& a);
void DwF32PlaneAvx512F(const DwF32Plane& a);
#endif
#if defined(__aarch64__)
void DwF32PlaneNeon(const DwF32Plane& a);
#endif

DwF32PlaneFn DwF32PlaneFor(const CpuFeatures& f, const char** variant) {
  DwF32PlaneFn fn = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    fn = f.avx512f ? DwF32PlaneAvx512F : DwF32PlaneAvx2;
    name = f.avx512f ? "avx512f" : "avx2";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    fn = DwF32PlaneNeon;  // fmla only: Armv8.0 NEON
    name = "neon";
  }
#endif
  if (variant) *variant = name;
  return fn;
}

namespace {

struct ConvF32State {
  const GemmF32Kernels* k = nullptr;
  DwF32PlaneFn dw = nullptr;
  int64_t m = 0, cg = 0, group = 1, kh = 1, kw = 1, kdim = 0;
  bool depthwise = false;
  AlignedVector<float> packed_w;  // GEMM: per group, the kernels' left layout
  int64_t group_stride = 0;     // floats per group in packed_w
  std::vector<float> w;         // depthwise: raw weights [m][kh * kw]
};

// Per-thread slices of floats (a packed panel or a padded plane) of the
// call's scratch, each a multiple of 64 bytes.
size_t SliceBytes(int64_t floats) {
  return (size_t(floats) * sizeof(float) + 63) / 64 * 64;
}

// Output columns [lo, hi) whose tap at offset t (= kx * dw - pad_left) lands
// inside a row of width iw: 0 <= ox * sw + t < iw.
void ValidRange(int64_t t, int64_t sw, int64_t iw, int64_t ow, int64_t* lo, int64_t* hi) {
  *lo = std::min(ow, t >= 0 ? 0 : (-t + sw - 1) / sw);
  *hi = std::max(*lo, std::min(ow, iw - t <= 0 ? 0 : (iw - t + sw - 1) / sw));
}

struct Segment {
  int64_t oy, ox, count, offset;  // output row, first column, length, column in the panel
};

// Packs the im2col rows of output positions [j0, j0 + ncols) of one group
// into a right panel [kdim][nr], zeros where a tap reads padding.
void PackConvPanel(const float* x, const ConvF32Call& c, int64_t cg, int64_t j0, int64_t ncols,
                   int nr, bool pointwise, float* dst) {
  const int64_t plane = c.ih * c.iw;
  if (pointwise) {
    for (int64_t ch = 0; ch < cg; ++ch, dst += nr) {
      std::memcpy(dst, x + ch * plane + j0, size_t(ncols) * sizeof(float));
      std::fill(dst + ncols, dst + nr, 0.f);
    }
    return;
  }
  Segment segs[64];
  int nseg = 0;
  for (int64_t p = j0; p < j0 + ncols;) {
    Segment s;
    s.oy = p / c.ow;
    s.ox = p % c.ow;
    s.count = std::min(c.ow - s.ox, j0 + ncols - p);
    s.offset = p - j0;
    segs[nseg++] = s;
    p += s.count;
  }
  for (int64_t ch = 0; ch < cg; ++ch) {
    const float* xp = x + ch * plane;
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      for (int64_t kx = 0; kx < c.kw; ++kx, dst += nr) {
        const int64_t t = kx * c.dw - c.pad_left;
        int64_t lo, hi;
        ValidRange(t, c.sw, c.iw, c.ow, &lo, &hi);
        for (int i = 0; i < nseg; ++i) {
          const Segment& s = segs[i];
          float* d = dst + s.offset - s.ox;  // indexed by ox
          const int64_t iy = s.oy * c.sh - c.pad_top + ky * c.dh;
          const int64_t end = s.ox + s.count;
          if (iy < 0 || iy >= c.ih) {
            std::fill(d + s.ox, d + end, 0.f);
            continue;
          }
          const int64_t a = std::min(end, std::max(s.ox, lo)), b = std::max(a, std::min(end, hi));
          std::fill(d + s.ox, d + a, 0.f);
          const float* src = xp + iy * c.iw + t;
          if (c.sw == 1) {
            std::memcpy(d + a, src + a, size_t(b - a) * sizeof(float));
          } else {
            for (int64_t ox = a; ox < b; ++ox) d[ox] = src[ox * c.sw];
          }
          std::fill(d + b, d + end, 0.f);
        }
        std::fill(dst + ncols, dst + nr, 0.f);
      }
    }
  }
}

ThreadPool* GemmPool(const ConvF32State& s, const ConvF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * s.m * c.oh * c.ow * s.kdim);
}

bool RunConvGemm(const ConvF32State& s, const ConvF32Call& c) {
  const GemmF32Kernels& k = *s.k;
  const int64_t p = c.oh * c.ow, mg = s.m / s.group, plane = c.ih * c.iw;
  // Segments of a panel: at most one per output row it touches.
  if (k.nr / c.ow + 2 > 64) return false;
  ThreadPool* const pool = GemmPool(s, c);
  const size_t slice = SliceBytes(s.kdim * k.nr);
  const ScratchRegion region(c.scratch, slice * size_t(NumThreads(pool)));
  const bool pointwise = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.pad_top == 0 &&
                         c.pad_left == 0 && c.oh == c.ih && c.ow == c.iw;
  const int64_t panels = (p + k.nr - 1) / k.nr;
  const int64_t units = c.n * s.group * panels;
  auto work = [&](int64_t begin, int64_t end, int slot) {
    float* panel = region.at<float>(size_t(slot) * slice);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t jp = u % panels, g = u / panels % s.group, b = u / panels / s.group;
      const int64_t j0 = jp * k.nr, ncols = std::min<int64_t>(k.nr, p - j0);
      const float* xg = c.x + (b * c.c + g * s.cg) * plane;
      PackConvPanel(xg, c, s.cg, j0, ncols, k.nr, pointwise, panel);
      GemmF32Args a;
      a.left = s.packed_w.data() + g * s.group_stride;
      a.right = panel;
      a.rows = mg;
      a.cols = ncols;
      a.k = s.kdim;
      a.bias = c.bias ? c.bias + g * mg : nullptr;
      a.bias_per_row = true;
      a.act = c.act;
      a.lo = c.lo;
      a.hi = c.hi;
      a.c = c.y + (b * s.m + g * mg) * p + j0;
      a.ldc = p;
      k.gemm(a);
      if (c.post)
        for (int64_t r = 0; r < mg; ++r) c.post->Apply(a.c + r * p, ncols);
    }
  };
  ParallelFor(pool, units, work);
  return true;
}

// The padded plane's rows and columns; false for huge pads (the reference
// kernel then runs, padded_plane.h).
bool DepthwisePlane(const ConvF32State& s, const ConvF32Call& c, int64_t* ph, int64_t* pw) {
  return CoveredExtent(c.oh, c.sh, c.kh, c.dh, ph) && CoveredExtent(c.ow, c.sw, c.kw, c.dw, pw) &&
         PaddedPlaneFits(*ph, *pw + kDwRowSlack, c.ih * c.iw, c.oh * c.ow, s.kh * s.kw);
}

ThreadPool* DepthwisePool(const ConvF32State& s, const ConvF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * s.m * c.oh * c.ow * s.kh * s.kw);
}

bool RunDepthwise(const ConvF32State& s, const ConvF32Call& c) {
  const int64_t mg = s.m / s.group, taps = s.kh * s.kw;
  int64_t ph = 0, pw = 0;
  if (!DepthwisePlane(s, c, &ph, &pw)) return false;
  const int64_t stride = pw + kDwRowSlack;
  ThreadPool* const pool = DepthwisePool(s, c);
  const size_t slice = SliceBytes(ph * stride);
  const ScratchRegion region(c.scratch, slice * size_t(NumThreads(pool)));
  const int64_t units = c.n * s.m;
  auto work = [&](int64_t begin, int64_t end, int slot) {
    float* pl = region.at<float>(size_t(slot) * slice);
    int64_t loaded = -1;  // input plane currently in pl
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / s.m, oc = u % s.m;
      const int64_t in_plane = b * c.c + oc / mg;
      if (in_plane != loaded) {
        // Zero-padded copy of the rows and columns the windows read.
        const float* src = c.x + in_plane * c.ih * c.iw;
        for (int64_t py = 0; py < ph; ++py) {
          float* row = pl + py * stride;
          const int64_t iy = py - c.pad_top;
          if (iy < 0 || iy >= c.ih) {
            std::fill(row, row + stride, 0.f);
            continue;
          }
          const int64_t lo = std::min(pw, std::max<int64_t>(0, c.pad_left));
          const int64_t hi = std::max(lo, std::min(pw, c.iw + c.pad_left));
          std::fill(row, row + lo, 0.f);
          std::memcpy(row + lo, src + iy * c.iw + lo - c.pad_left, size_t(hi - lo) * sizeof(float));
          std::fill(row + hi, row + stride, 0.f);
        }
        loaded = in_plane;
      }
      DwF32Plane a;
      a.src = pl;
      a.stride = stride;
      a.w = s.w.data() + oc * taps;
      a.kh = c.kh;
      a.kw = c.kw;
      a.sh = c.sh;
      a.sw = c.sw;
      a.dh = c.dh;
      a.dw = c.dw;
      a.oh = c.oh;
      a.ow = c.ow;
      a.bias = c.bias ? c.bias[oc] : 0.f;
      a.act = c.act;
      a.lo = c.lo;
      a.hi = c.hi;
      a.y = c.y + u * c.oh * c.ow;
      s.dw(a);
      if (c.post) c.post->Apply(c.y + u * c.oh * c.ow, c.oh * c.ow);
    }
  };
  ParallelFor(pool, units, work);
  return true;
}

}  // namespace

std::shared_ptr<void> PrepareConvF32(const KernelConfig& kc, const Tensor& w, int64_t group) {
  const GemmF32Kernels* k = kc.gemm_f32;
  if (!k || w.dtype != DType::kFloat32 || (w.rank() != 3 && w.rank() != 4) || group <= 0)
    return nullptr;
  auto s = std::make_shared<ConvF32State>();
  s->k = k;
  s->dw = kc.dw_f32;
  s->m = w.shape[0];
  s->cg = w.shape[1];
  s->group = group;
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape[w.rank() - 1];
  s->kdim = s->cg * s->kh * s->kw;
  if (s->m <= 0 || s->m % group != 0 || s->kdim <= 0) return nullptr;
  const int64_t mg = s->m / group;
  const float* wd = w.ptr<float>();
  // One input channel per group, but only with several groups: a single group
  // (one input channel, M filters: an audio front end) shares each im2col
  // panel among all M filters in the GEMM, where the plane kernel would re-read
  // the input per filter (10x slower for a 32-tap stride-8 1-D filter bank).
  s->depthwise = s->cg == 1 && group > 1 && s->dw != nullptr;
  if (s->depthwise) {
    s->w.assign(wd, wd + s->m * s->kdim);
  } else {
    s->group_stride = PackedF32Size(mg, s->kdim, k->mr);
    s->packed_w.resize(size_t(s->group_stride * group));
    for (int64_t g = 0; g < group; ++g)
      k->pack_left(wd + g * mg * s->kdim, s->kdim, 1, mg, s->kdim,
                   s->packed_w.data() + g * s->group_stride);
  }
  return s;
}

size_t ConvF32Scratch(const void* state, const ConvF32Call& c) {
  if (!state) return 0;
  const ConvF32State& s = *static_cast<const ConvF32State*>(state);
  if (c.c != s.cg * s.group || c.kh != s.kh || c.kw != s.kw) return 0;
  if (c.n == 0 || c.oh * c.ow == 0) return 0;
  if (!s.depthwise) return SliceBytes(s.kdim * s.k->nr) * size_t(NumThreads(GemmPool(s, c)));
  int64_t ph = 0, pw = 0;
  if (!DepthwisePlane(s, c, &ph, &pw)) return 0;
  return SliceBytes(ph * (pw + kDwRowSlack)) * size_t(NumThreads(DepthwisePool(s, c)));
}

bool RunConvF32(void* state, const ConvF32Call& c) {
  if (!state) return false;
  const ConvF32State& s = *static_cast<const ConvF32State*>(state);
  if (c.c != s.cg * s.group || c.kh != s.kh || c.kw != s.kw) return false;
  if (c.n == 0 || c.oh * c.ow == 0) return true;  // empty output
  return s.depthwise ? RunDepthwise(s, c) : RunConvGemm(s, c);
}

}  // namespace kernels
}  // namespace qfold
