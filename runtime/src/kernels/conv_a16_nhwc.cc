// a16w8 channels-last convolution driver (conv_a16_nhwc.h): weights packed
// once into 16-column panels of int16 pairs; per run, blocks of output pixels
// are unrolled (im2col, NHWC rows, x converted to int16 and padding taps
// filled with the shifted zero point) into per-thread scratch, then every
// panel is multiplied into them 4 rows at a time.
#include "kernels/conv_a16_nhwc.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const A16GemmFn kA16GemmAvx2;
extern const A16DepthwiseFn kA16DepthwiseAvx2;
extern const A16GemmFn kA16GemmAvxVnni;
extern const A16DepthwiseFn kA16DepthwiseAvxVnni;
extern const A16GemmFn kA16GemmAvx512Vnni;
extern const A16DepthwiseFn kA16DepthwiseAvx512Vnni;
const A16Kernels kA16Avx2 = {kA16GemmAvx2, kA16DepthwiseAvx2, 1};
const A16Kernels kA16AvxVnni = {kA16GemmAvxVnni, kA16DepthwiseAvxVnni, 1};
const A16Kernels kA16Avx512Vnni = {kA16GemmAvx512Vnni, kA16DepthwiseAvx512Vnni, 4};
#endif
#if defined(__aarch64__)
extern const A16GemmFn kA16GemmNeon;
extern const A16DepthwiseFn kA16DepthwiseNeon;
const A16Kernels kA16Neon = {kA16GemmNeon, kA16DepthwiseNeon, 1};
#endif

const A16Kernels* A16KernelsFor(const CpuFeatures& f, const char** variant) {
  const A16Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    if (f.avx512_core() && f.avx512vnni) {
      k = &kA16Avx512Vnni;
      name = "avx512vnni";
    } else if (f.avxvnni) {
      k = &kA16AvxVnni;
      name = "avxvnni";
    } else {
      k = &kA16Avx2;
      name = "avx2";
    }
  }
#elif defined(__aarch64__)
  if (f.asimd) {  // smlal on plain Armv8.0 NEON
    k = &kA16Neon;
    name = "neon";
  }
#else
  (void)f;
#endif
  if (variant) *variant = name;
  return k;
}

namespace {

constexpr int64_t kPanel = 16;      // output channels per packed panel
constexpr int64_t kRows = 4;        // output pixels per microkernel call
constexpr int64_t kBlockRows = 32;  // output pixels unrolled per work item

struct A16State {
  A16GemmFn gemm = nullptr;
  int gemm_panels = 1;                 // panels per gemm call
  A16DepthwiseFn depthwise = nullptr;  // set for depthwise states
  int64_t tap_pairs = 0;               // depthwise: kh * kw taps in pairs
  std::vector<int16_t> dw_packed;      // depthwise: [tap_pairs][channels to 16][2]
  // Grouped convolutions: `group` GEMMs of m / group outputs over c channels
  // each (c is the channels per group; group 1: all of them).
  int64_t group = 1, m = 0, c = 0, kh = 1, kw = 1, k = 0, kpairs = 0, panels = 0;
  int64_t chunk = 1;              // pairs reduced in int32 at a time
  AlignedVector<int16_t> packed;  // [group][panels][kpairs][16][2]
  std::vector<int64_t> colsum;    // sum of each output channel's weights
};

int64_t RoundUp(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// Rows of output pixels [pix0, pix0 + rows): for each tap, channels
// [c0, c0 + cg) of the input pixel (ch channels per pixel).
template <class T>
void Unroll(const T* x, int64_t pix0, int64_t rows, const QConvCall& c, int64_t ch, int64_t c0,
            int64_t cg, int64_t kpairs, int16_t pad, int16_t* dst) {
  const int64_t ohw = c.oh * c.ow;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = pix0 + r;
    const int64_t b = p / ohw, oy = (p % ohw) / c.ow, ox = p % c.ow;
    int16_t* row = dst + r * kpairs * 2;
    for (int64_t ky = 0; ky < c.kh; ++ky) {
      const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
      for (int64_t kx = 0; kx < c.kw; ++kx, row += cg) {
        const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
        if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) {
          std::fill(row, row + cg, pad);
          continue;
        }
        const T* src = x + ((b * c.ih + iy) * c.iw + ix) * ch + c0;
        // uint16 -> int16 by flipping the sign bit (x - 32768).
        constexpr uint16_t flip = std::is_unsigned<T>::value ? 0x8000 : 0;
        for (int64_t i = 0; i < cg; ++i) row[i] = int16_t(uint16_t(uint16_t(src[i]) ^ flip));
      }
    }
    const int64_t used = c.kh * c.kw * cg;
    std::fill(dst + r * kpairs * 2 + used, dst + (r + 1) * kpairs * 2, int16_t(0));
  }
}

}  // namespace

namespace {

// Packs m output channels of k = c * kh * kw weights, weight(m, k) in NHWC
// unroll order; null when no SIMD level has the kernel.
template <class WeightAt>
std::shared_ptr<void> Pack(const KernelConfig& kc, int64_t group, int64_t m_count, int64_t c,
                           int64_t kh, int64_t kw, WeightAt weight) {
  const A16GemmFn gemm = kc.a16 ? kc.a16->gemm : nullptr;
  if (!gemm || group < 1 || m_count % group != 0) return nullptr;
  auto s = std::make_shared<A16State>();
  s->gemm = gemm;
  s->gemm_panels = kc.a16->gemm_panels;
  s->group = group;
  s->m = m_count;
  s->c = c;
  s->kh = kh;
  s->kw = kw;
  s->k = c * kh * kw;
  s->kpairs = (s->k + 1) / 2;
  const int64_t mg = m_count / group;
  s->panels = RoundUp(mg, kPanel) / kPanel;
  s->packed.assign(size_t(group * s->panels * s->kpairs * kPanel * 2), 0);
  s->colsum.assign(size_t(s->m), 0);
  int64_t max_abs_sum = 0, max_abs = 0;
  for (int64_t m = 0; m < s->m; ++m) {
    int64_t abs_sum = 0;
    const int64_t panel = (m / mg) * s->panels + (m % mg) / kPanel, col = (m % mg) % kPanel;
    for (int64_t k = 0; k < s->k; ++k) {
      const int32_t v = weight(m, k);
      s->packed[size_t(((panel * s->kpairs + k / 2) * kPanel + col) * 2 + k % 2)] = int16_t(v);
      s->colsum[size_t(m)] += v;
      abs_sum += std::abs(v);
      max_abs = std::max<int64_t>(max_abs, std::abs(v));
    }
    max_abs_sum = std::max(max_abs_sum, abs_sum);
  }
  // A pair adds at most 2 * 32768 * max|w|, and a partial sum is at most
  // 32768 * sum|w|: one int32 reduction over K when that fits.
  const int64_t limit = (int64_t(1) << 31) - 1;
  s->chunk = max_abs == 0 ? s->kpairs : limit / (2 * 32768 * max_abs);
  if (32768 * max_abs_sum <= limit) s->chunk = s->kpairs;
  s->chunk = std::max<int64_t>(1, s->chunk);
  return s;
}

bool AllZero(const std::vector<int32_t>& v) {
  for (int32_t z : v)
    if (z != 0) return false;
  return true;
}

}  // namespace

// Depthwise weights W [C, 1, kh, kw], taps in pairs, each block of 16
// channels in the order the microkernel's unpacklo/unpackhi produce.
std::shared_ptr<void> PackDepthwise(const KernelConfig& kc, const Tensor& w) {
  const A16DepthwiseFn fn = kc.a16 ? kc.a16->depthwise : nullptr;
  if (!fn) return nullptr;
  auto s = std::make_shared<A16State>();
  s->depthwise = fn;
  s->m = s->c = w.shape[0];
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape[w.rank() - 1];
  const int64_t taps = s->kh * s->kw;
  // 9 taps of int8 weights cannot leave int32; refuse absurd windows.
  if (taps * 2 * 32768 * 128 >= (int64_t(1) << 31)) return nullptr;
  s->tap_pairs = (taps + 1) / 2;
  s->panels = RoundUp(s->c, 16) / 16;  // corr and mult are padded to whole blocks
  const int64_t padded = RoundUp(s->c, 16);
  s->dw_packed.assign(size_t(s->tap_pairs * padded * 2), 0);
  s->colsum.assign(size_t(s->c), 0);
  const bool u8 = w.dtype == DType::kUInt8;
  for (int64_t ch = 0; ch < s->c; ++ch)
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t v = u8 ? w.ptr<uint8_t>()[ch * taps + t] : w.ptr<int8_t>()[ch * taps + t];
      const int64_t j = ch % 16, base = (t / 2 * padded + ch / 16 * 16) * 2;
      const int64_t idx = ((j >> 2) & 1) * 16 + (j >> 3) * 8 + (j & 3) * 2 + t % 2;
      s->dw_packed[size_t(base + idx)] = int16_t(v);
      s->colsum[size_t(ch)] += v;
    }
  return s;
}

std::shared_ptr<void> PrepareQConvA16Nhwc(const KernelConfig& kc, const Tensor& w, int64_t group,
                                          const std::vector<int32_t>& w_zp) {
  if (w.rank() < 3 || w.rank() > 4 || !AllZero(w_zp)) return nullptr;
  if (w.dtype != DType::kInt8 && w.dtype != DType::kUInt8) return nullptr;
  if (group > 1 && w.shape[1] == 1 && w.shape[0] == group) return PackDepthwise(kc, w);
  const int64_t c = w.shape[1], kh = w.rank() == 4 ? w.shape[2] : 1, kw = w.shape[w.rank() - 1];
  const bool u8 = w.dtype == DType::kUInt8;
  return Pack(kc, group, w.shape[0], c, kh, kw, [&](int64_t m, int64_t k) -> int32_t {
    // k = (ky * kw + kx) * c + ci; W is [M, C, kh, kw].
    const int64_t ci = k % c, tap = k / c;
    const int64_t src = (m * c + ci) * kh * kw + tap;
    return u8 ? w.ptr<uint8_t>()[src] : w.ptr<int8_t>()[src];
  });
}

std::shared_ptr<void> PrepareQMatMulA16(const KernelConfig& kc, const Tensor& b,
                                        const std::vector<int32_t>& b_zp) {
  if (b.rank() != 2 || !AllZero(b_zp)) return nullptr;
  if (b.dtype != DType::kInt8 && b.dtype != DType::kUInt8) return nullptr;
  const int64_t k_count = b.shape[0], n = b.shape[1];
  const bool u8 = b.dtype == DType::kUInt8;
  return Pack(kc, 1, n, k_count, 1, 1, [&](int64_t m, int64_t k) -> int32_t {
    return u8 ? b.ptr<uint8_t>()[k * n + m] : b.ptr<int8_t>()[k * n + m];
  });
}

namespace {

// How one call runs and where its scratch goes, computed alike for the
// session's request (QConvA16NhwcScratch) and for the run.
struct A16Call {
  int64_t ch = 0, pixels = 0, mp = 0;
  int threads = 1;
  ScratchLayout layout;
  // Per channel corrections and multipliers; depthwise: the x_zp row and
  // per thread tap pointers; GEMM: per thread unrolled rows.
  size_t corr = 0, mult = 0, pad_row = 0, taps = 0, rows = 0;
  size_t taps_bytes = 0, rows_bytes = 0;  // per thread, multiples of 64
};

// False when the call is not covered; *empty when there is nothing to compute.
bool PlanA16Call(const A16State& s, const QConvCall& c, bool* empty, A16Call* a) {
  *empty = false;
  if (c.dq_mult) return false;
  const DType xt = c.x->dtype;
  if (xt != DType::kInt16 && xt != DType::kUInt16) return false;
  if (c.kh != s.kh || c.kw != s.kw) return false;
  a->ch = c.x->shape.back();
  if (a->ch != s.c * s.group || c.y->shape.back() != s.m) return false;
  a->pixels = c.y->numel() / s.m;
  if (a->pixels == 0) {
    *empty = true;
    return true;
  }
  a->threads = NumThreads(c.pool);
  // Padded so a group's last panel may read 16 entries.
  a->mp = std::max(s.panels * kPanel, s.m + kPanel);
  a->corr = a->layout.Add(size_t(a->mp) * sizeof(double));
  a->mult = a->layout.Add(size_t(a->mp) * sizeof(double));
  if (s.depthwise) {
    a->pad_row = a->layout.Add(size_t(RoundUp(a->ch, 16)) * sizeof(uint16_t));
    a->taps_bytes = size_t(RoundUp(s.tap_pairs * 2 * int64_t(sizeof(const void*)), 64));
    a->taps = a->layout.Add(a->taps_bytes * size_t(a->threads));
  } else {
    a->rows_bytes = size_t(RoundUp(kBlockRows * s.kpairs * 2 * int64_t(sizeof(int16_t)), 64));
    a->rows = a->layout.Add(a->rows_bytes * size_t(a->threads));
  }
  return true;
}

}  // namespace

size_t QConvA16NhwcScratch(const void* state, const QConvCall& c) {
  if (!state || !c.x || !c.y) return 0;
  A16Call a;
  bool empty = false;
  if (!PlanA16Call(*static_cast<const A16State*>(state), c, &empty, &a) || empty) return 0;
  return a.layout.total();
}

bool RunQConvA16Nhwc(void* state, const QConvCall& c) {
  if (!state) return false;
  const auto& s = *static_cast<const A16State*>(state);
  A16Call plan;
  bool empty = false;
  if (!PlanA16Call(s, c, &empty, &plan)) return false;
  if (empty) return true;
  const DType xt = c.x->dtype, yt = c.y->dtype;
  const int64_t ch = plan.ch, pixels = plan.pixels;
  const ScratchRegion region(c.scratch, plan.layout.total());
  // The shifted zero point and, per channel, the exact correction and multiplier.
  const int32_t xzp = xt == DType::kUInt16 ? c.x_zp - 32768 : c.x_zp;
  double* corr = region.at<double>(plan.corr);
  double* mult = region.at<double>(plan.mult);
  std::fill(corr, corr + plan.mp, 0.0);
  std::fill(mult, mult + plan.mp, 0.0);
  for (int64_t m = 0; m < s.m; ++m) {
    const int64_t b = c.bias ? c.bias[m] : 0;
    corr[m] = double(b - int64_t(xzp) * s.colsum[size_t(m)]);
    const float ws = c.w_scale.size() == 1 ? c.w_scale[0] : c.w_scale[size_t(m)];
    mult[m] = double(c.x_scale) * double(ws) / double(c.y_scale);
  }
  const int16_t pad = int16_t(xzp);
  A16Output out;
  out.type = yt == DType::kInt8    ? A16Output::kS8
             : yt == DType::kUInt8 ? A16Output::kU8
             : yt == DType::kInt16 ? A16Output::kS16
                                   : A16Output::kU16;
  out.zp = c.y_zp;
  out.lo = c.lo;
  out.hi = c.hi;
  const size_t elem = yt == DType::kInt8 || yt == DType::kUInt8 ? 1 : 2;
  if (s.depthwise) {
    // One output pixel at a time; padding taps read a row of x_zp.
    uint16_t* pad_row = region.at<uint16_t>(plan.pad_row);
    std::fill(pad_row, pad_row + RoundUp(ch, 16), uint16_t(c.x_zp));
    out.corr = corr;
    out.mult = mult;
    const int64_t taps = s.kh * s.kw, rows_n = pixels / c.ow;
    const bool flip = xt == DType::kUInt16;
    ParallelFor(c.pool, rows_n, [&](int64_t r0, int64_t r1, int slot) {
      const void** tp = region.at<const void*>(plan.taps + size_t(slot) * plan.taps_bytes);
      // A lone last tap's partner (weight 0) keeps reading the x_zp row.
      std::fill(tp, tp + s.tap_pairs * 2, static_cast<const void*>(pad_row));
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t b = row / c.oh, oy = row % c.oh;
        for (int64_t ox = 0; ox < c.ow; ++ox) {
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t iy = oy * c.sh - c.pad_top + (t / s.kw) * c.dh;
            const int64_t ix = ox * c.sw - c.pad_left + (t % s.kw) * c.dw;
            tp[t] =
                iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw
                    ? static_cast<const void*>(pad_row)
                    : static_cast<const uint16_t*>(c.x->data) + ((b * c.ih + iy) * c.iw + ix) * ch;
          }
          s.depthwise(tp, s.tap_pairs, s.dw_packed.data(), ch, flip, out,
                      static_cast<uint8_t*>(c.y->data) + size_t((row * c.ow + ox) * s.m) * elem);
        }
      }
    });
    return true;
  }
  const int64_t blocks = (pixels + kBlockRows - 1) / kBlockRows;
  ParallelFor(c.pool, blocks, [&](int64_t b0, int64_t b1, int slot) {
    int16_t* rows = region.at<int16_t>(plan.rows + size_t(slot) * plan.rows_bytes);
    A16Output o = out;
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t pix0 = blk * kBlockRows;
      const int64_t n = std::min(kBlockRows, pixels - pix0);
      const int64_t mg = s.m / s.group;
      for (int64_t g = 0; g < s.group; ++g) {
        if (xt == DType::kUInt16)
          Unroll(c.x->ptr<uint16_t>(), pix0, n, c, ch, g * s.c, s.c, s.kpairs, pad, rows);
        else
          Unroll(c.x->ptr<int16_t>(), pix0, n, c, ch, g * s.c, s.c, s.kpairs, pad, rows);
        for (int64_t p = 0; p < s.panels; p += s.gemm_panels) {
          const int16_t* panel = s.packed.data() + (g * s.panels + p) * s.kpairs * kPanel * 2;
          const int64_t m0 = g * mg + p * kPanel;  // the panel's first output channel
          const int cols = int(std::min(kPanel * s.gemm_panels, mg - p * kPanel));
          o.corr = corr + m0;
          o.mult = mult + m0;
          for (int64_t r0 = 0; r0 < n; r0 += kRows) {
            const int rcount = int(std::min(kRows, n - r0));
            const int16_t* a[kRows];
            void* y[kRows];
            for (int r = 0; r < rcount; ++r) {
              a[r] = rows + (r0 + r) * s.kpairs * 2;
              y[r] = static_cast<uint8_t*>(c.y->data) + size_t((pix0 + r0 + r) * s.m + m0) * elem;
            }
            s.gemm(a, rcount, panel, s.kpairs, s.chunk, o, y, cols);
          }
        }
      }
    }
  });
  return true;
}

}  // namespace kernels
}  // namespace qfold
