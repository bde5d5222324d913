// Fast QLinearConv / QLinearMatMul (qlinear_s8.h). Zero points are folded as
// in docs/NUMERICS.md, with the operands shifted to u8 (activations) and s8
// (weights): for xu = x ^ 0x80 (int8 x) and ws = w ^ 0x80 (uint8 w),
//   acc = sum(xu * ws) - wzp_s * sum(xu) + [B - xzp_u * sum(ws) + K * xzp_u * wzp_s]
// where the bracket is per channel; convolution padding holds xzp, so K is
// always the full window. All int32 arithmetic wraps like the reference's.
#include "kernels/qlinear_s8.h"

#include <algorithm>
#include <cstring>

#include "kernels/dwconv_s8.h"
#include "kernels/gemm_s8.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {
namespace {

int32_t Wrap(int64_t v) {
  return int32_t(uint32_t(uint64_t(v)));
}

uint8_t ShiftMask(DType t) {
  return t == DType::kInt8 ? 0x80 : 0;
}

// Zero point in the shifted domain: u8 for activations, s8 for weights.
int32_t ActivationZp(int32_t zp, DType t) {
  return t == DType::kInt8 ? zp + 128 : zp;
}
int32_t WeightZp(int32_t zp, DType t) {
  return t == DType::kUInt8 ? zp - 128 : zp;
}

int64_t RoundUp(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

template <class T>
void Resize(std::vector<T>* v, int64_t n) {
  if (int64_t(v->size()) < n) v->resize(size_t(n));
}

// Per-channel requantization inputs in the form the GEMM epilogue reads.
struct ChannelParams {
  std::vector<int32_t> bias, wzp;
  std::vector<float> mult;
  bool any_wzp = false;
};

// Fills folded bias, shifted weight zero points and multipliers for n
// channels; arrays are zero-padded to a multiple of 64 for vector loads.
void FoldChannels(int64_t n, int64_t k, const int32_t* bias, const std::vector<int32_t>& wsum,
                  int32_t xzp_u, const std::vector<int32_t>& wzp, DType w_dtype, float x_scale,
                  const std::vector<float>& w_scale, float y_scale, ChannelParams* cp) {
  const int64_t padded = RoundUp(n, 64);
  cp->bias.assign(size_t(padded), 0);
  cp->wzp.assign(size_t(padded), 0);
  cp->mult.assign(size_t(padded), 0.f);
  cp->any_wzp = false;
  for (int64_t c = 0; c < n; ++c) {
    const int32_t wz = WeightZp(wzp.size() == 1 ? wzp[0] : wzp[size_t(c)], w_dtype);
    cp->wzp[size_t(c)] = wz;
    cp->any_wzp |= wz != 0;
    cp->bias[size_t(c)] = Wrap(int64_t(bias ? bias[c] : 0) - int64_t(xzp_u) * wsum[size_t(c)] +
                               int64_t(Wrap(k * xzp_u)) * wz);
    // The multiplier in float32, in the reference's order (docs/NUMERICS.md).
    cp->mult[size_t(c)] = x_scale * w_scale[w_scale.size() == 1 ? 0 : size_t(c)] / y_scale;
  }
}

// Splits [0, panels) between threads; every panel's result is independent
// of the split, so any thread count gives identical output.
void RunGemm(const GemmS8Kernels& k, GemmS8Args args, int num_threads) {
  const int64_t panels = (args.cols + k.nr - 1) / k.nr;
  const int64_t work = args.rows * args.cols * args.k4;
  int threads = int(std::min<int64_t>(num_threads, panels));
  if (work < (int64_t(1) << 18)) threads = 1;  // not worth waking the pool
  if (threads <= 1) {
    k.gemm(args);
    return;
  }
  ParallelFor(threads, [&](int t) {
    GemmS8Args a = args;
    a.panel_begin = panels * t / threads;
    a.panel_end = panels * (t + 1) / threads;
    if (a.panel_begin < a.panel_end) k.gemm(a);
  });
}

// ---- convolution -------------------------------------------------------------

struct QConvState {
  const GemmS8Kernels* k = nullptr;
  DType w_dtype = DType::kUndefined;
  int64_t m = 0, cg = 0, group = 1, kh = 1, kw = 1, kdim = 0;
  bool depthwise = false;
  std::vector<uint8_t> packed_w;  // GEMM: per group, kernels' left layout
  std::vector<int32_t> wsum;      // GEMM: sum of the shifted weights per channel
  DwConvS8State dw;               // depthwise (dwconv_s8.h)
  // Scratch, grown to the largest shape seen.
  std::vector<uint8_t> col, packed_x;
  std::vector<int32_t> xsum;
  ChannelParams cp;
};

// Unrolls one group's windows into rows of raw x bytes, [cg * kh * kw] x [oh * ow];
// taps in padding read the zero point's byte.
void Im2Col(const uint8_t* x, const QConvCall& c, int64_t cg, uint8_t pad, uint8_t* dst) {
  const int64_t plane = c.ih * c.iw;
  for (int64_t ch = 0; ch < cg; ++ch) {
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      for (int64_t kx = 0; kx < c.kw; ++kx) {
        // Output columns whose tap lands inside the row: ix = ox * sw + t in [0, iw).
        const int64_t t = kx * c.dw - c.pad_left;
        const int64_t ox_lo = std::min(c.ow, t >= 0 ? 0 : (-t + c.sw - 1) / c.sw);
        const int64_t ox_hi =
            std::max(ox_lo, std::min(c.ow, c.iw - t <= 0 ? 0 : (c.iw - t + c.sw - 1) / c.sw));
        for (int64_t oy = 0; oy < c.oh; ++oy, dst += c.ow) {
          const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
          if (iy < 0 || iy >= c.ih) {
            std::memset(dst, pad, size_t(c.ow));
            continue;
          }
          const uint8_t* src = x + ch * plane + iy * c.iw + t;
          std::memset(dst, pad, size_t(ox_lo));
          if (c.sw == 1) {
            std::memcpy(dst + ox_lo, src + ox_lo, size_t(ox_hi - ox_lo));
          } else {
            for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox] = src[ox * c.sw];
          }
          std::memset(dst + ox_hi, pad, size_t(c.ow - ox_hi));
        }
      }
    }
  }
}

bool RunConvGemm(QConvState& s, const QConvCall& c) {
  const GemmS8Kernels& k = *s.k;
  const Tensor& x = *c.x;
  const int64_t n = x.shape[0], ch_in = x.shape[1], mg = s.m / s.group;
  const int64_t p = c.oh * c.ow, kdim = s.kdim, plane = c.ih * c.iw;
  const uint8_t xmask = ShiftMask(x.dtype);
  const int32_t xzp_u = ActivationZp(c.x_zp, x.dtype);
  FoldChannels(s.m, kdim, c.bias, s.wsum, xzp_u, c.w_zp, s.w_dtype, c.x_scale, c.w_scale, c.y_scale,
               &s.cp);
  const bool direct = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.pad_top == 0 &&
                      c.pad_left == 0 && c.oh == c.ih && c.ow == c.iw;
  if (!direct) Resize(&s.col, kdim * p);
  Resize(&s.packed_x, PackedBytes(p, kdim, k.nr));
  if (s.cp.any_wzp) Resize(&s.xsum, RoundUp(p, 64));
  const int64_t w_panel = PackedBytes(mg, kdim, k.mr);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const uint8_t* xg = x.ptr<uint8_t>() + (b * ch_in + g * s.cg) * plane;
      const uint8_t* rows = xg;
      if (!direct) {
        Im2Col(xg, c, s.cg, uint8_t(c.x_zp), s.col.data());
        rows = s.col.data();
      }
      k.pack_right(rows, p, kdim, p, xmask, s.packed_x.data());
      if (s.cp.any_wzp) {
        int32_t* sum = s.xsum.data();
        std::fill(sum, sum + RoundUp(p, 64), 0);
        for (int64_t r = 0; r < kdim; ++r)
          for (int64_t j = 0; j < p; ++j) sum[j] += rows[r * p + j] ^ xmask;
      }
      GemmS8Args a;
      a.left = s.packed_w.data() + g * w_panel;
      a.right = s.packed_x.data();
      a.rows = mg;
      a.cols = p;
      a.k4 = (kdim + 3) / 4;
      a.weights_left = true;
      a.bias = s.cp.bias.data() + g * mg;
      a.mult = s.cp.mult.data() + g * mg;
      a.wzp = s.cp.any_wzp ? s.cp.wzp.data() + g * mg : nullptr;
      a.xsum = s.xsum.data();
      a.yzp = c.y_zp;
      a.lo = c.lo;
      a.hi = c.hi;
      a.y = c.y->ptr<uint8_t>() + (b * s.m + g * mg) * p;
      a.ldy = p;
      RunGemm(k, a, c.num_threads);
    }
  }
  return true;
}

// ---- matrix multiplication ------------------------------------------------------

struct QMatMulState {
  const GemmS8Kernels* k = nullptr;
  DType b_dtype = DType::kUndefined;
  int64_t kdim = 0, n = 0;
  std::vector<uint8_t> packed_b;
  std::vector<int32_t> bsum;
  std::vector<uint8_t> packed_a;
  std::vector<int32_t> asum;
  ChannelParams cp;
};

}  // namespace

std::shared_ptr<void> PrepareQConvS8(const Tensor& w, int64_t group) {
  const GemmS8Kernels* k = GemmS8For(ActiveIsa());
  if ((w.rank() != 3 && w.rank() != 4) || !w.shape_known() || !w.data || group <= 0 ||
      (w.dtype != DType::kInt8 && w.dtype != DType::kUInt8))
    return nullptr;
  auto s = std::make_shared<QConvState>();
  s->k = k;
  s->w_dtype = w.dtype;
  s->m = w.shape[0];
  s->cg = w.shape[1];
  s->group = group;
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape[w.rank() - 1];
  s->kdim = s->cg * s->kh * s->kw;
  if (s->m <= 0 || s->kdim <= 0 || s->m % group) return nullptr;
  // Depthwise has its own kernels (dwconv_s8.h), available without a GEMM.
  s->depthwise = s->cg == 1 && group == s->m;
  if (s->depthwise) return PrepareDwConvS8(w, &s->dw) ? s : nullptr;
  if (!k) return nullptr;
  const int64_t mg = s->m / group;
  const int64_t w_panel = PackedBytes(mg, s->kdim, k->mr);
  const uint8_t mask = w.dtype == DType::kUInt8 ? 0x80 : 0;  // to s8
  s->packed_w.resize(size_t(w_panel * group));
  for (int64_t g = 0; g < group; ++g)
    k->pack_left(w.ptr<uint8_t>() + g * mg * s->kdim, s->kdim, mg, s->kdim, mask,
                 s->packed_w.data() + g * w_panel);
  s->wsum.assign(size_t(s->m), 0);
  for (int64_t oc = 0; oc < s->m; ++oc) {
    int64_t sum = 0;
    for (int64_t i = 0; i < s->kdim; ++i) sum += int8_t(w.ptr<uint8_t>()[oc * s->kdim + i] ^ mask);
    s->wsum[size_t(oc)] = Wrap(sum);
  }
  return s;
}

bool RunQConvS8(void* state, const QConvCall& c) {
  QConvState& s = *static_cast<QConvState*>(state);
  const Tensor& x = *c.x;
  if (x.rank() != 3 && x.rank() != 4) return false;
  if (c.kh != s.kh || c.kw != s.kw || x.shape[1] != s.cg * s.group) return false;
  if (x.shape[0] == 0 || c.oh * c.ow == 0) return true;  // empty output
  return s.depthwise ? RunDwConvS8(s.dw, c) : RunConvGemm(s, c);
}

std::shared_ptr<void> PrepareQMatMulS8(const Tensor& b) {
  const GemmS8Kernels* k = GemmS8For(ActiveIsa());
  if (!k || (b.rank() != 1 && b.rank() != 2) || !b.shape_known() || !b.data ||
      (b.dtype != DType::kInt8 && b.dtype != DType::kUInt8))
    return nullptr;
  auto s = std::make_shared<QMatMulState>();
  s->k = k;
  s->b_dtype = b.dtype;
  s->kdim = b.shape[0];
  s->n = b.rank() == 2 ? b.shape[1] : 1;
  if (s->kdim <= 0 || s->n <= 0) return nullptr;
  const uint8_t mask = b.dtype == DType::kUInt8 ? 0x80 : 0;
  s->packed_b.resize(size_t(PackedBytes(s->n, s->kdim, k->nr)));
  k->pack_right(b.ptr<uint8_t>(), s->n, s->kdim, s->n, mask, s->packed_b.data());
  s->bsum.assign(size_t(s->n), 0);
  std::vector<int64_t> sum(size_t(s->n), 0);
  for (int64_t r = 0; r < s->kdim; ++r)
    for (int64_t j = 0; j < s->n; ++j)
      sum[size_t(j)] += int8_t(b.ptr<uint8_t>()[r * s->n + j] ^ mask);
  for (int64_t j = 0; j < s->n; ++j) s->bsum[size_t(j)] = Wrap(sum[size_t(j)]);
  return s;
}

bool RunQMatMulS8(void* state, const QMatMulCall& c) {
  QMatMulState& s = *static_cast<QMatMulState*>(state);
  const GemmS8Kernels& k = *s.k;
  const Tensor& a = *c.a;
  if (a.rank() < 1 || a.shape.back() != s.kdim) return false;
  const int64_t rows = a.numel() / s.kdim;
  if (rows == 0) return true;
  const uint8_t amask = ShiftMask(a.dtype);
  FoldChannels(s.n, s.kdim, c.bias, s.bsum, ActivationZp(c.a_zp, a.dtype), c.b_zp, s.b_dtype,
               c.a_scale, c.b_scale, c.y_scale, &s.cp);
  Resize(&s.packed_a, PackedBytes(rows, s.kdim, k.mr));
  k.pack_left(a.ptr<uint8_t>(), s.kdim, rows, s.kdim, amask, s.packed_a.data());
  if (s.cp.any_wzp) {
    Resize(&s.asum, rows);
    for (int64_t i = 0; i < rows; ++i) {
      int32_t sum = 0;
      const uint8_t* row = a.ptr<uint8_t>() + i * s.kdim;
      for (int64_t j = 0; j < s.kdim; ++j) sum += row[j] ^ amask;
      s.asum[size_t(i)] = sum;
    }
  }
  GemmS8Args g;
  g.left = s.packed_a.data();
  g.right = s.packed_b.data();
  g.rows = rows;
  g.cols = s.n;
  g.k4 = (s.kdim + 3) / 4;
  g.weights_left = false;
  g.bias = s.cp.bias.data();
  g.mult = s.cp.mult.data();
  g.wzp = s.cp.any_wzp ? s.cp.wzp.data() : nullptr;
  g.xsum = s.asum.data();
  g.yzp = c.y_zp;
  g.lo = c.lo;
  g.hi = c.hi;
  g.y = c.y->ptr<uint8_t>();
  g.ldy = s.n;
  RunGemm(k, g, c.num_threads);
  return true;
}

}  // namespace kernels
}  // namespace qfold
