// Fast QLinearConv / QLinearMatMul (qlinear_s8.h). Zero points are folded as
// in docs/NUMERICS.md, with the operands shifted to u8 (activations) and s8
// (weights): for xu = x ^ 0x80 (int8 x) and ws = w ^ 0x80 (uint8 w),
//   acc = sum(xu * ws) - wzp_s * sum(xu) + [B - xzp_u * sum(ws) + K * xzp_u * wzp_s]
// where the bracket is per channel; convolution padding holds xzp, so K is
// always the full window. All int32 arithmetic wraps like the reference's.
#include "kernels/qlinear_s8.h"

#include <algorithm>
#include <cstring>

#include "kernels/aligned_vector.h"
#include "kernels/channel_fold.h"
#include "kernels/dwconv_s8.h"
#include "kernels/gemm_s8.h"
#include "kernels/kernel_config.h"
#include "kernels/padded_plane.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {
namespace {

bool Is8BitType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

uint8_t ShiftMask(DType t) {
  return t == DType::kInt8 ? 0x80 : 0;
}

// Zero point in the shifted domain: u8 for activations (weights: FoldChannels).
int32_t ActivationZp(int32_t zp, DType t) {
  return t == DType::kInt8 ? zp + 128 : zp;
}
template <class V>
void Resize(V* v, int64_t n) {
  if (int64_t(v->size()) < n) v->resize(size_t(n));
}

// Hands [0, panels) out to the pool's threads; every panel's result is
// independent of the thread, so any thread count gives identical output.
void RunGemm(const GemmS8Kernels& k, GemmS8Args args, ThreadPool* pool) {
  const int64_t panels = (args.cols + k.nr - 1) / k.nr;
  const int64_t work = args.rows * args.cols * args.k4;
  if (work < (int64_t(1) << 18)) pool = nullptr;  // not worth the hand-off
  ParallelFor(pool, panels, [&](int64_t b, int64_t e, int) {
    GemmS8Args a = args;
    a.panel_begin = b;
    a.panel_end = e;
    k.gemm(a);
  });
}

}  // namespace

void DequantizeColumns(float* y, int64_t rows, int64_t ld, int64_t c0, int64_t c1,
                       const float* mult, const float* bias) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    for (int64_t j = c0; j < c1; ++j) {
      int32_t acc;  // the int32 the GEMM stored in this float's place
      std::memcpy(&acc, row + j, sizeof(acc));
      // Rounded product, then the bias (compiled with -ffp-contract=off).
      const float scaled = float(acc) * mult[j];
      row[j] = bias ? scaled + bias[j] : scaled;
    }
  }
}

namespace {

// RunGemm with args.y32 aliasing a float output: each column panel is
// computed, then dequantized in place while it is still in cache.
void RunGemmToFloat(const GemmS8Kernels& k, GemmS8Args args, const float* mult, const float* bias,
                    ThreadPool* pool) {
  const int64_t panels = (args.cols + k.nr - 1) / k.nr;
  const int64_t work = args.rows * args.cols * args.k4;
  if (work < (int64_t(1) << 18)) pool = nullptr;
  float* y = reinterpret_cast<float*>(args.y32);
  ParallelFor(pool, panels, [&](int64_t b, int64_t e, int) {
    GemmS8Args a = args;
    for (int64_t p = b; p < e; ++p) {
      a.panel_begin = p;
      a.panel_end = p + 1;
      k.gemm(a);
      DequantizeColumns(y, args.rows, args.ldy, p * k.nr, std::min(args.cols, (p + 1) * k.nr), mult,
                        bias);
    }
  });
}

// ---- convolution -------------------------------------------------------------

struct QConvState {
  const GemmS8Kernels* k = nullptr;
  DType w_dtype = DType::kUndefined;
  int64_t m = 0, cg = 0, group = 1, kh = 1, kw = 1, kdim = 0;
  bool depthwise = false;
  AlignedVector<uint8_t> packed_w;  // GEMM: per group, kernels' left layout
  std::vector<int32_t> wsum;        // GEMM: sum of the shifted weights per channel
  DwConvS8State dw;                 // depthwise (dwconv_s8.h)
  ChannelParams cp;
};

// One group's input with the padding materialized: every tap of every window
// lands inside, so the im2col rows are plain strided copies. Row stride iw,
// origin at (-pad_top, -pad_left); kSlack readable bytes follow the planes.
struct PaddedInput {
  int64_t ih = 0, iw = 0;
};
constexpr int64_t kSlack = 64;

PaddedInput PadInput(const uint8_t* x, const QConvCall& c, int64_t cg, uint8_t pad, uint8_t* dst) {
  PaddedInput pi;
  pi.ih = (c.oh - 1) * c.sh + (c.kh - 1) * c.dh + 1;
  pi.iw = (c.ow - 1) * c.sw + (c.kw - 1) * c.dw + 1;
  // Input columns [ix0, ix1) of each padded row come from x (pads may be
  // negative in effect when the windows do not reach the input's end).
  const int64_t ix0 = std::min(pi.iw, c.pad_left), ix1 = std::min(pi.iw, c.pad_left + c.iw);
  for (int64_t ch = 0; ch < cg; ++ch) {
    for (int64_t r = 0; r < pi.ih; ++r, dst += pi.iw) {
      const int64_t iy = r - c.pad_top;
      if (iy < 0 || iy >= c.ih || ix1 <= ix0) {
        std::memset(dst, pad, size_t(pi.iw));
        continue;
      }
      std::memset(dst, pad, size_t(ix0));
      std::memcpy(dst + ix0, x + (ch * c.ih + iy) * c.iw + (ix0 - c.pad_left), size_t(ix1 - ix0));
      std::memset(dst + ix1, pad, size_t(pi.iw - ix1));
    }
  }
  std::memset(dst, pad, size_t(kSlack));
  return pi;
}

// n bytes src[i * stride] to dst, in 16-byte steps that may write up to 15
// bytes past dst + n and read past the last element (both buffers have slack).
// Stride 2 keeps the low byte of each little-endian 16-bit word, which
// compilers turn into a vector narrowing (a byte gather would go through the
// stack and stall on store forwarding).
template <int kStride>
inline void CopyRun(const uint8_t* src, int64_t n, uint8_t* dst) {
  static_assert(kStride == 1 || kStride == 2, "stride 1 or 2");
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian words");
  for (int64_t i = 0; i < n; i += 16, src += 16 * kStride, dst += 16) {
    if (kStride == 1) {
      std::memcpy(dst, src, 16);
    } else {
      uint16_t w[16];
      uint8_t t[16];
      std::memcpy(w, src, sizeof(w));
      for (int j = 0; j < 16; ++j) t[j] = uint8_t(w[j]);
      std::memcpy(dst, t, 16);
    }
  }
}

// Unrolls columns [col0, col0 + ncols) of one group's im2col matrix
// ([cg * kh * kw] x [oh * ow]) into dst, row stride ncols, from the padded
// input: padding taps read the zero point's byte, so the K-wide zero-point
// fold stays exact. dst needs 16 bytes of slack after the last row.
template <int kStride>  // 0: any stride (c.sw)
void Im2ColBlock(const uint8_t* xp, const PaddedInput& pi, const QConvCall& c, int64_t cg,
                 int64_t col0, int64_t ncols, uint8_t* dst) {
  const int64_t oy0 = col0 / c.ow, ox0 = col0 % c.ow, col1 = col0 + ncols;
  for (int64_t ch = 0; ch < cg; ++ch) {
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      for (int64_t kx = 0; kx < c.kw; ++kx, dst += ncols) {
        const uint8_t* row = xp + (ch * pi.ih + ky * c.dh) * pi.iw + kx * c.dw;
        uint8_t* d = dst;
        // Output row oy's columns [xb, xe) read input row oy * sh from xb * sw.
        for (int64_t oy = oy0, xb = ox0; oy * c.ow < col1; ++oy, xb = 0) {
          const int64_t xe = std::min(c.ow, col1 - oy * c.ow);
          const uint8_t* src = row + oy * c.sh * pi.iw;
          if (kStride == 1) {
            CopyRun<1>(src + xb, xe - xb, d);
          } else if (kStride == 2) {
            CopyRun<2>(src + 2 * xb, xe - xb, d);
          } else {
            for (int64_t ox = xb; ox < xe; ++ox) d[ox - xb] = src[ox * c.sw];
          }
          d += xe - xb;
        }
      }
    }
  }
}

// Sums of the shifted activations per column of a kdim x ncols byte matrix
// (row stride lds), into sum[0, ncols) and zeros up to a multiple of 64.
void ColumnSums(const uint8_t* rows, int64_t lds, int64_t kdim, int64_t ncols, uint8_t xmask,
                int32_t* sum) {
  std::fill(sum, sum + RoundUpTo(ncols, 64), 0);
  for (int64_t r = 0; r < kdim; ++r)
    for (int64_t j = 0; j < ncols; ++j) sum[j] += rows[r * lds + j] ^ xmask;
}

// Columns per packed block: a multiple of nr whose packed bytes (and im2col
// tile) stay in L2 next to the weights, so the GEMM reads the block hot.
int64_t BlockCols(int64_t kdim, int nr) {
  constexpr int64_t kBlockBytes = 128 * 1024;
  const int64_t per_panel = RoundUpTo(kdim, 4) * nr;
  return std::max<int64_t>(1, kBlockBytes / per_panel) * nr;
}

// How one GEMM convolution runs and where its scratch goes, computed alike
// for the session's request (QConvS8Scratch) and for the run.
struct GemmConvCall {
  bool direct = false;  // 1x1 unpadded stride 1: x is the im2col matrix
  int64_t padded_rows = 0, padded_cols = 0;
  int64_t panels = 0, block = 0, k4 = 0, tile_bytes = 0, slice = 0, sum_slice = 0, grain = 1;
  ThreadPool* pool = nullptr;  // null when not worth splitting
  int threads = 1;
  ScratchLayout layout;
  // Per thread: im2col tile and packed block; one group's padded input
  // (PadInput); per thread column sums (weight zero points only).
  size_t slices = 0, padded = 0, xsum = 0;
};

// False when the call is not covered (the op then runs its reference kernel).
bool PlanGemmConv(const QConvState& s, const QConvCall& c, bool any_wzp, GemmConvCall* g) {
  const GemmS8Kernels& k = *s.k;
  const int64_t mg = s.m / s.group, p = c.oh * c.ow, kdim = s.kdim;
  g->direct = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.pad_top == 0 &&
              c.pad_left == 0 && c.oh == c.ih && c.ow == c.iw;
  if (!CoveredExtent(c.oh, c.sh, c.kh, c.dh, &g->padded_rows) ||
      !CoveredExtent(c.ow, c.sw, c.kw, c.dw, &g->padded_cols) ||
      !PaddedPlaneFits(g->padded_rows, g->padded_cols, c.ih * c.iw, p, c.kh * c.kw))
    return false;  // huge pads: the reference kernel (padded_plane.h)
  g->panels = (p + k.nr - 1) / k.nr;
  g->block = std::min(BlockCols(kdim, k.nr), g->panels * k.nr);
  g->k4 = (kdim + 3) / 4;
  // Per-thread slice: im2col tile, packed block (64-byte aligned offsets).
  g->tile_bytes = g->direct ? 0 : RoundUpTo(kdim * g->block + 16, 64);
  g->slice = g->tile_bytes + RoundUpTo(PackedBytes(g->block, kdim, k.nr), 64) + 64;
  g->sum_slice = RoundUpTo(g->block, 64);
  // Not worth the hand-off below this size.
  g->pool = mg * p * g->k4 < (int64_t(1) << 18) ? nullptr : c.pool;
  g->threads = NumThreads(g->pool);
  // Ranges of whole blocks when there are enough for every thread, so the
  // weights are not streamed once more per smaller range.
  const int64_t block_panels = g->block / k.nr;
  g->grain = std::max<int64_t>(1, std::min(block_panels, g->panels / (4 * int64_t(g->threads))));
  g->slices = g->layout.Add(size_t(g->slice * g->threads));
  if (!g->direct)
    g->padded = g->layout.Add(size_t(s.cg * g->padded_rows * g->padded_cols + kSlack));
  if (any_wzp) g->xsum = g->layout.Add(size_t(g->sum_slice * g->threads) * sizeof(int32_t));
  return true;
}

// Whether a weight zero point is nonzero once shifted to s8 (FoldChannels).
bool AnyWeightZp(const QConvState& s, const QConvCall& c) {
  for (int32_t z : c.w_zp)
    if ((s.w_dtype == DType::kUInt8 ? z - 128 : z) != 0) return true;
  return false;
}

bool RunConvGemm(QConvState& s, const QConvCall& c) {
  const GemmS8Kernels& k = *s.k;
  const Tensor& x = *c.x;
  const int64_t n = x.shape[0], ch_in = x.shape[1], mg = s.m / s.group;
  const int64_t p = c.oh * c.ow, kdim = s.kdim, plane = c.ih * c.iw;
  const uint8_t xmask = ShiftMask(x.dtype);
  const int32_t xzp_u = ActivationZp(c.x_zp, x.dtype);
  GemmConvCall gc;
  if (!PlanGemmConv(s, c, AnyWeightZp(s, c), &gc)) return false;
  FoldChannels(s.m, kdim, c.bias, s.wsum.data(), xzp_u, c.w_zp, s.w_dtype, c.x_scale, c.w_scale,
               c.y_scale, &s.cp);
  const bool direct = gc.direct;
  const int64_t block = gc.block, k4 = gc.k4, tile_bytes = gc.tile_bytes, slice = gc.slice;
  const int64_t sum_slice = gc.sum_slice, panels = gc.panels, grain = gc.grain;
  ThreadPool* pool = gc.pool;
  const ScratchRegion region(c.scratch, gc.layout.total());
  uint8_t* padded = direct ? nullptr : region.at<uint8_t>(gc.padded);
  int32_t* xsum = s.cp.any_wzp ? region.at<int32_t>(gc.xsum) : nullptr;
  const int64_t w_panel = PackedBytes(mg, kdim, k.mr);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const uint8_t* xg = x.ptr<uint8_t>() + (b * ch_in + g * s.cg) * plane;
      GemmS8Args a;
      a.left = s.packed_w.data() + g * w_panel;
      a.rows = mg;
      a.k4 = k4;
      a.weights_left = true;
      a.bias = s.cp.bias.data() + g * mg;
      a.mult = s.cp.mult.data() + g * mg;
      a.wzp = s.cp.any_wzp ? s.cp.wzp.data() + g * mg : nullptr;
      a.yzp = c.y_zp;
      a.lo = c.lo;
      a.hi = c.hi;
      a.ldy = p;
      const int64_t y_offset = (b * s.m + g * mg) * p;
      PaddedInput pi;
      if (!direct) pi = PadInput(xg, c, s.cg, uint8_t(c.x_zp), padded);
      // Each thread packs and multiplies its own panels, one block at a
      // time; every column's result is independent of the split.
      auto work = [&](int64_t p_begin, int64_t p_end, int t) {
        // 64-byte aligned: the region and slice are.
        uint8_t* tile = region.at<uint8_t>(gc.slices + size_t(t * slice));
        uint8_t* packed = tile + tile_bytes;
        int32_t* sum = xsum ? xsum + t * sum_slice : nullptr;
        const int64_t c_begin = p_begin * k.nr;
        const int64_t c_end = std::min(p, p_end * k.nr);
        for (int64_t c0 = c_begin; c0 < c_end; c0 += block) {
          const int64_t w = std::min(block, c_end - c0);
          const uint8_t* rows = xg + c0;
          int64_t lds = p;
          if (!direct) {
            if (c.sw == 1)
              Im2ColBlock<1>(padded, pi, c, s.cg, c0, w, tile);
            else if (c.sw == 2)
              Im2ColBlock<2>(padded, pi, c, s.cg, c0, w, tile);
            else
              Im2ColBlock<0>(padded, pi, c, s.cg, c0, w, tile);
            rows = tile;
            lds = w;
          }
          k.pack_right(rows, lds, kdim, w, xmask, packed);
          if (sum) ColumnSums(rows, lds, kdim, w, xmask, sum);
          GemmS8Args ab = a;
          ab.right = packed;
          ab.cols = w;
          ab.xsum = sum;
          if (c.int32_out)
            ab.y32 = c.y->ptr<int32_t>() + y_offset + c0;
          else
            ab.y = c.y->ptr<uint8_t>() + y_offset + c0;
          k.gemm(ab);
        }
      };
      ParallelFor(pool, panels, grain, work);
    }
  }
  return true;
}

// ---- matrix multiplication ------------------------------------------------------

// B packed for the GEMM with its column sums (wrapped to int32 like the
// reference's accumulators): a prepared constant's, or one batch of an
// activation packed into the call's scratch.
struct PackedB {
  const GemmS8Kernels* k = nullptr;
  DType b_dtype = DType::kUndefined;
  int64_t kdim = 0, n = 0;
  const uint8_t* packed = nullptr;
  const int32_t* sum = nullptr;
};

struct QMatMulState {
  PackedB b;  // points into packed_b and bsum
  AlignedVector<uint8_t> packed_b;
  std::vector<int32_t> bsum;
  ChannelParams cp;  // sized at prepare: a run's view allocates nothing
};

// Packs b [kdim, n] (bytes at `b`) into `packed` (PackedBytes(n, kdim, nr))
// and its column sums into `sum` (n values).
void PackMatMulB(const GemmS8Kernels& k, DType b_dtype, const uint8_t* b, int64_t kdim, int64_t n,
                 uint8_t* packed, int32_t* sum) {
  const uint8_t mask = b_dtype == DType::kUInt8 ? 0x80 : 0;
  k.pack_right(b, n, kdim, n, mask, packed);
  std::fill(sum, sum + n, 0);
  for (int64_t r = 0; r < kdim; ++r)
    for (int64_t j = 0; j < n; ++j)
      sum[j] = WrapInt32(int64_t(sum[j]) + int8_t(b[r * n + j] ^ mask));
}

// Where a product's scratch goes, laid out alike for the request and the run:
// A's packed rows and row sums; with `pack_b`, one batch of B and its sums
// and the n channels' folded values (refolded for each batch's sums).
struct QMatMulParts {
  ScratchLayout layout;
  size_t packed_a = 0, asum = 0, packed_b = 0, bsum = 0, fold_bias = 0, fold_wzp = 0, fold_mult = 0;
};

// Folded per-channel values where MultiplyPacked writes and the epilogue
// reads them (FoldedLength(n) entries each).
struct FoldedChannels {
  int32_t* bias = nullptr;
  int32_t* wzp = nullptr;
  float* mult = nullptr;
};

void PlanQMatMul(const GemmS8Kernels& k, int64_t rows, int64_t kdim, int64_t n, bool pack_b,
                 QMatMulParts* p) {
  p->packed_a = p->layout.Add(size_t(PackedBytes(rows, kdim, k.mr)));
  p->asum = p->layout.Add(size_t(rows) * sizeof(int32_t));  // read with B zero points only
  if (!pack_b) return;
  p->packed_b = p->layout.Add(size_t(PackedBytes(n, kdim, k.nr)));
  p->bsum = p->layout.Add(size_t(n) * sizeof(int32_t));
  p->fold_bias = p->layout.Add(FoldedLength(n) * sizeof(int32_t));
  p->fold_wzp = p->layout.Add(FoldedLength(n) * sizeof(int32_t));
  p->fold_mult = p->layout.Add(FoldedLength(n) * sizeof(float));
}

// c.a [..., kdim] times b into c.y per c's epilogue; A's rows are packed into
// packed_a, their sums into asum.
bool MultiplyPacked(const PackedB& b, const QMatMulCall& c, const FoldedChannels& cp,
                    uint8_t* packed_a, int32_t* asum) {
  const GemmS8Kernels& k = *b.k;
  const Tensor& a = *c.a;
  const int64_t rows = a.numel() / b.kdim;
  if (rows == 0) return true;
  const uint8_t amask = ShiftMask(a.dtype);
  const bool any_wzp = FoldChannelsInto(b.n, b.kdim, c.bias, b.sum, ActivationZp(c.a_zp, a.dtype),
                                        c.b_zp, b.b_dtype, c.a_scale, c.b_scale, c.y_scale, cp.bias,
                                        cp.wzp, cp.mult, /*with_mult=*/!c.dq_mult);
  k.pack_left(a.ptr<uint8_t>(), b.kdim, rows, b.kdim, amask, packed_a);
  if (any_wzp) {
    for (int64_t i = 0; i < rows; ++i) {
      int32_t sum = 0;
      const uint8_t* row = a.ptr<uint8_t>() + i * b.kdim;
      for (int64_t j = 0; j < b.kdim; ++j) sum += row[j] ^ amask;
      asum[i] = sum;
    }
  }
  GemmS8Args g;
  g.left = packed_a;
  g.right = b.packed;
  g.rows = rows;
  g.cols = b.n;
  g.k4 = (b.kdim + 3) / 4;
  g.weights_left = false;
  g.bias = cp.bias;
  g.mult = cp.mult;
  g.wzp = any_wzp ? cp.wzp : nullptr;
  g.xsum = asum;
  g.yzp = c.y_zp;
  g.lo = c.lo;
  g.hi = c.hi;
  if (c.int32_out || c.dq_mult)
    g.y32 = c.y->ptr<int32_t>();
  else
    g.y = c.y->ptr<uint8_t>();
  g.ldy = b.n;
  if (c.dq_mult) {
    RunGemmToFloat(k, g, c.dq_mult, c.dq_bias, c.pool);
    return true;
  }
  RunGemm(k, g, c.pool);
  return true;
}

// A batched product of two activations RunQMatMulS8Unprepared covers: b's
// [kdim, n] matrices, one per batch (a 2-D b: one for all of a's rows).
struct UnpreparedShape {
  int64_t kdim = 0, n = 0, batches = 0, rows = 0;
};

bool CoverUnprepared(const KernelConfig& kc, const Tensor& b, const QMatMulCall& c,
                     UnpreparedShape* u) {
  const Tensor& a = *c.a;
  if (!kc.gemm_s8 || a.rank() < 2 || b.rank() < 2 || !Is8BitType(a.dtype) || !Is8BitType(b.dtype))
    return false;
  u->kdim = b.shape[size_t(b.rank() - 2)];
  u->n = b.shape.back();
  if (a.shape.back() != u->kdim || u->kdim <= 0 || u->n <= 0) return false;
  if (b.rank() > 2) {  // batched: a's batch dims must equal b's (no broadcasting)
    if (a.rank() != b.rank()) return false;
    for (int d = 0; d + 2 < a.rank(); ++d)
      if (a.shape[size_t(d)] != b.shape[size_t(d)]) return false;
  }
  u->batches = b.rank() > 2 ? b.numel() / (u->kdim * u->n) : 1;
  u->rows = u->batches ? a.numel() / u->kdim / u->batches : 0;
  return true;
}

}  // namespace

std::shared_ptr<void> PrepareQConvS8(const KernelConfig& kc, const Tensor& w, int64_t group) {
  const GemmS8Kernels* k = kc.gemm_s8;
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
  if (s->depthwise) return PrepareDwConvS8(kc, w, &s->dw) ? s : nullptr;
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
    s->wsum[size_t(oc)] = WrapInt32(sum);
  }
  return s;
}

bool RunQConvS8(void* state, const QConvCall& c) {
  QConvState& s = *static_cast<QConvState*>(state);
  const Tensor& x = *c.x;
  if (x.rank() != 3 && x.rank() != 4) return false;
  if (c.dq_mult) return false;  // float output: channels-last microkernels only
  if (c.kh != s.kh || c.kw != s.kw || x.shape[1] != s.cg * s.group) return false;
  if (x.shape[0] == 0 || c.oh * c.ow == 0) return true;  // empty output
  return s.depthwise ? RunDwConvS8(s.dw, c) : RunConvGemm(s, c);
}

ScratchNeeds QConvS8Scratch(const void* state, const QConvCall& c) {
  const QConvState& s = *static_cast<const QConvState*>(state);
  const Tensor& x = *c.x;
  ScratchNeeds needs;
  // The cases RunQConvS8 returns early from, or sends elsewhere, need none.
  if ((x.rank() != 3 && x.rank() != 4) || c.dq_mult || c.kh != s.kh || c.kw != s.kw ||
      x.shape[1] != s.cg * s.group || x.shape[0] == 0 || c.oh * c.ow == 0)
    return needs;
  if (s.depthwise) {
    needs.run = DwConvS8Scratch(s.dw, c);
  } else if (s.k) {
    GemmConvCall g;
    if (PlanGemmConv(s, c, AnyWeightZp(s, c), &g)) needs.run = g.layout.total();
  }
  return needs;
}

std::shared_ptr<void> PrepareQMatMulS8(const KernelConfig& kc, const Tensor& b) {
  const GemmS8Kernels* k = kc.gemm_s8;
  if (!k || (b.rank() != 1 && b.rank() != 2) || !b.shape_known() || !b.data ||
      (b.dtype != DType::kInt8 && b.dtype != DType::kUInt8))
    return nullptr;
  const int64_t kdim = b.shape[0], n = b.rank() == 2 ? b.shape[1] : 1;
  if (kdim <= 0 || n <= 0) return nullptr;
  auto s = std::make_shared<QMatMulState>();
  s->packed_b.resize(size_t(PackedBytes(n, kdim, k->nr)));
  s->bsum.resize(size_t(n));
  PackMatMulB(*k, b.dtype, b.ptr<uint8_t>(), kdim, n, s->packed_b.data(), s->bsum.data());
  s->b = {k, b.dtype, kdim, n, s->packed_b.data(), s->bsum.data()};
  // A constant B's folded values stay in its state (sized once).
  const size_t folded = FoldedLength(n);
  s->cp.bias.resize(folded);
  s->cp.wzp.resize(folded);
  s->cp.mult.resize(folded);
  return s;
}

QMatMulPackedB QMatMulS8View(void* state) {
  QMatMulState& s = *static_cast<QMatMulState*>(state);
  QMatMulPackedB v;
  v.k = s.b.k;
  v.b_dtype = s.b.b_dtype;
  v.kdim = s.b.kdim;
  v.n = s.b.n;
  v.packed = s.b.packed;
  v.sum = s.b.sum;
  v.fold_bias = s.cp.bias.data();
  v.fold_wzp = s.cp.wzp.data();
  v.fold_mult = s.cp.mult.data();
  return v;
}

namespace {

// Where PackQMatMulS8Into puts B's parts: the packed matrix, its column sums
// and the three folded arrays.
struct PackedBParts {
  ScratchLayout layout;
  size_t packed = 0, sum = 0, bias = 0, wzp = 0, mult = 0;
};

PackedBParts LayoutPackedB(const GemmS8Kernels& k, int64_t kdim, int64_t n) {
  PackedBParts p;
  p.packed = p.layout.Add(size_t(PackedBytes(n, kdim, k.nr)));
  p.sum = p.layout.Add(size_t(n) * sizeof(int32_t));
  p.bias = p.layout.Add(FoldedLength(n) * sizeof(int32_t));
  p.wzp = p.layout.Add(FoldedLength(n) * sizeof(int32_t));
  p.mult = p.layout.Add(FoldedLength(n) * sizeof(float));
  return p;
}

}  // namespace

QMatMulPackedB QMatMulS8Shape(const KernelConfig& kc, DType b_dtype, int64_t kdim, int64_t n) {
  QMatMulPackedB v;
  if (!kc.gemm_s8 || kdim <= 0 || n <= 0 || (b_dtype != DType::kInt8 && b_dtype != DType::kUInt8))
    return v;
  v.k = kc.gemm_s8;
  v.b_dtype = b_dtype;
  v.kdim = kdim;
  v.n = n;
  return v;
}

size_t QMatMulS8PackedBytes(const KernelConfig& kc, DType b_dtype, int64_t kdim, int64_t n) {
  const QMatMulPackedB v = QMatMulS8Shape(kc, b_dtype, kdim, n);
  return v.k ? LayoutPackedB(*v.k, kdim, n).layout.total() : 0;
}

bool PackQMatMulS8Into(const KernelConfig& kc, const Tensor& b, void* dst, QMatMulPackedB* out) {
  *out = QMatMulPackedB();
  if (b.rank() != 2 || !b.data || !dst) return false;
  QMatMulPackedB v = QMatMulS8Shape(kc, b.dtype, b.shape[0], b.shape[1]);
  if (!v.k) return false;
  const PackedBParts p = LayoutPackedB(*v.k, v.kdim, v.n);
  uint8_t* base = static_cast<uint8_t*>(dst);
  auto* packed = base + p.packed;
  auto* sum = reinterpret_cast<int32_t*>(base + p.sum);
  PackMatMulB(*v.k, b.dtype, b.ptr<uint8_t>(), v.kdim, v.n, packed, sum);
  v.packed = packed;
  v.sum = sum;
  v.fold_bias = reinterpret_cast<int32_t*>(base + p.bias);
  v.fold_wzp = reinterpret_cast<int32_t*>(base + p.wzp);
  v.fold_mult = reinterpret_cast<float*>(base + p.mult);
  *out = v;
  return true;
}

size_t QMatMulS8PackedScratch(const QMatMulPackedB& b, const QMatMulCall& c) {
  const Tensor& a = *c.a;
  if (!b.k || a.rank() < 1 || a.shape.back() != b.kdim) return 0;
  QMatMulParts p;
  PlanQMatMul(*b.k, a.numel() / b.kdim, b.kdim, b.n, /*pack_b=*/false, &p);
  return p.layout.total();
}

bool RunQMatMulS8Packed(const QMatMulPackedB& b, const QMatMulCall& c) {
  const Tensor& a = *c.a;
  if (!b.k || !b.packed || a.rank() < 1 || a.shape.back() != b.kdim) return false;
  const int64_t rows = a.numel() / b.kdim;
  if (rows == 0) return true;
  QMatMulParts p;
  PlanQMatMul(*b.k, rows, b.kdim, b.n, /*pack_b=*/false, &p);
  const ScratchRegion region(c.scratch, p.layout.total());
  const PackedB pb{b.k, b.b_dtype, b.kdim, b.n, b.packed, b.sum};
  return MultiplyPacked(pb, c, {b.fold_bias, b.fold_wzp, b.fold_mult},
                        region.at<uint8_t>(p.packed_a), region.at<int32_t>(p.asum));
}

size_t QMatMulS8Scratch(const void* state, const QMatMulCall& c) {
  return QMatMulS8PackedScratch(QMatMulS8View(const_cast<void*>(state)), c);
}

bool RunQMatMulS8(void* state, const QMatMulCall& c) {
  return RunQMatMulS8Packed(QMatMulS8View(state), c);
}

size_t QMatMulS8UnpreparedScratch(const KernelConfig& kc, const Tensor& b, const QMatMulCall& c) {
  UnpreparedShape u;
  if (!CoverUnprepared(kc, b, c, &u) || u.batches == 0) return 0;
  QMatMulParts p;
  PlanQMatMul(*kc.gemm_s8, u.rows, u.kdim, u.n, /*pack_b=*/true, &p);
  return p.layout.total();
}

bool RunQMatMulS8Unprepared(const KernelConfig& kc, const Tensor& b, const QMatMulCall& c) {
  UnpreparedShape u;
  if (!CoverUnprepared(kc, b, c, &u)) return false;
  if (u.batches == 0) return true;  // an empty batch dim: nothing to compute
  const GemmS8Kernels& k = *kc.gemm_s8;
  const Tensor& a = *c.a;
  QMatMulParts p;
  PlanQMatMul(k, u.rows, u.kdim, u.n, /*pack_b=*/true, &p);
  const ScratchRegion region(c.scratch, p.layout.total());
  PackedB pb{&k, b.dtype, u.kdim, u.n, region.at<uint8_t>(p.packed_b), region.at<int32_t>(p.bsum)};
  const FoldedChannels cp{region.at<int32_t>(p.fold_bias), region.at<int32_t>(p.fold_wzp),
                          region.at<float>(p.fold_mult)};
  Tensor a_view = a, y_view = *c.y;
  a_view.shape = {u.rows, u.kdim};
  y_view.shape = {u.rows, u.n};
  QMatMulCall batch = c;
  batch.a = &a_view;
  batch.y = &y_view;
  for (int64_t i = 0; i < u.batches; ++i) {
    PackMatMulB(k, b.dtype, b.ptr<uint8_t>() + i * u.kdim * u.n, u.kdim, u.n,
                region.at<uint8_t>(p.packed_b), region.at<int32_t>(p.bsum));
    a_view.data = const_cast<uint8_t*>(a.ptr<uint8_t>()) + i * u.rows * u.kdim;
    y_view.data = c.y->ptr<uint8_t>() + i * u.rows * u.n * (c.int32_out ? 4 : 1);
    if (!MultiplyPacked(pb, batch, cp, region.at<uint8_t>(p.packed_a), region.at<int32_t>(p.asum)))
      return false;
  }
  return true;
}

}  // namespace kernels
}  // namespace qfold
