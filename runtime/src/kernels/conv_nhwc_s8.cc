// Channels-last QLinearConv (conv_nhwc_s8.h). Zero points are folded as in
// qlinear_s8.cc and docs/NUMERICS.md, with activations shifted to u8 and
// weights to s8:
//   acc = sum(xu * ws) - wzp_s * sum(xu) + [B - xzp_u * sum(ws) + K * xzp_u * wzp_s]
// where padding taps read a row of x_zp bytes, so K is always the full window.
//
// x86 and Arm NEON levels run the indirect GEMM microkernels (igemm_s8.h;
// AMX: igemm_s8_amx.cc) straight on x (AVX2: on a copy widened to u16 once per run, see
// igemm_s8_avx2.cc): one pointer per output pixel and tap, built when the
// geometry or x's address changes. A configuration without them takes the
// packed GEMM of gemm_s8.h with the activations on the left: NHWC im2col
// rows, packed per block. QfConvDequant's float output (QConvCall::dq_mult)
// has an epilogue in the microkernels only; without them the op runs its
// reference kernel.
#include "kernels/conv_nhwc_s8.h"

#include <algorithm>
#include <cstring>

#include "kernels/aligned_vector.h"
#include "kernels/channel_fold.h"
#include "kernels/conv_nhwc_s8_winograd.h"
#include "kernels/gemm_s8.h"
#include "kernels/igemm_s8.h"
#include "kernels/kernel_config.h"
#include "kernels/padded_plane.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const IgemmS8Kernel kIgemmS8Avx2[];
extern const IgemmS8Kernel kIgemmS8Avx2Winograd[];
extern const IgemmS8Kernel kIgemmS8AvxVnni[];
extern const IgemmS8Kernel kIgemmS8Avx512Vnni[];
#if defined(QFOLD_HAVE_AMX)
extern const IgemmS8Kernel kIgemmS8Amx[];
#endif
// Null where the AMX kernels are not built (the emulated x86 build).
static const IgemmS8Kernel* AmxTable() {
#if defined(QFOLD_HAVE_AMX)
  return kIgemmS8Amx;
#else
  return nullptr;
#endif
}
#elif defined(__aarch64__)
extern const IgemmS8Kernel kIgemmS8Neon[];
extern const IgemmS8Kernel kIgemmS8NeonDot[];
extern const IgemmS8Kernel kIgemmS8NeonI8mm[];
#endif

std::vector<const IgemmS8Kernel*> IgemmS8Kernels(const CpuFeatures& f, const char** variant) {
  std::vector<const IgemmS8Kernel*> out;
#if defined(__x86_64__)
  const IgemmS8Kernel* t = nullptr;
  if (f.avx2 && f.fma) {
    if (f.avx512_core() && f.avx512vnni) {
      // With AMX its kernels come first, the zmm ones after them: each
      // convolution picks one family (AmxPaysOff, PrepareQConvNhwcS8).
      if (f.amx && AmxTable())
        for (const IgemmS8Kernel* a = AmxTable(); a->run; ++a) out.push_back(a);
      t = kIgemmS8Avx512Vnni;
    } else if (f.avxvnni)
      t = kIgemmS8AvxVnni;
    else
      t = kIgemmS8Avx2;
  }
  for (; t && t->run; ++t) out.push_back(t);
#elif defined(__aarch64__)
  const IgemmS8Kernel* t = nullptr;
  if (f.asimd)
    t = f.i8mm && f.dotprod ? kIgemmS8NeonI8mm : f.dotprod ? kIgemmS8NeonDot : kIgemmS8Neon;
  for (; t && t->run; ++t) out.push_back(t);
#else
  (void)f;
#endif
  if (variant) *variant = out.empty() ? nullptr : out[0]->name;
  return out;
}

namespace {

bool Is8BitType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

struct NhwcState {
  const IgemmS8Kernel* ik = nullptr;  // x86 microkernel, or
  const GemmS8Kernels* gk = nullptr;  // the packed GEMM (activations left)
  DType w_dtype = DType::kUndefined;
  int64_t m = 0, cg = 0, group = 1, mg = 0, kh = 1, kw = 1, taps = 1, kdim = 0, kc4 = 0;
  // Activations one tap reads: cg, or with row taps kw * cg (a whole kernel
  // row of a few-channel input, contiguous in a padded copy; taps = kh).
  int64_t tap_c = 0, ind_taps = 1;  // ind_taps: pointers per output pixel
  bool row_taps = false;
  // Row taps for a kernel that pads each tap's k to a whole block (AMX: 64
  // bytes): each thread copies its chunk's kh row taps of a pixel into one
  // row of cols_k bytes (k = ky * tap_c + kx * cg + channel, zero weights
  // past kh * tap_c), and the microkernel runs them as a 1x1 convolution.
  // A 7x7 RGB stem then multiplies 192 bytes per pixel instead of 7 * 64.
  bool im2col = false;
  int64_t cols_k = 0;                   // bytes of k per im2col row (a multiple of 64)
  int64_t panels = 0, panel_bytes = 0;  // igemm: panels per group, bytes per panel
  int64_t group_bytes = 0;              // gemm: packed bytes per group
  AlignedVector<uint8_t> packed_w;
  std::vector<int32_t> wsum;  // sum of the shifted weights per channel
  ChannelParams cp;
  // Indirection buffer [tile][tap][mr] and what it was built for.
  std::vector<int64_t> key;
  std::vector<const uint8_t*> ind;
  std::vector<uint8_t> zero;  // x_zp bytes, for padding taps
  std::vector<uint8_t> tail;  // copy of x's last pixels (4-byte reads past x's end)
  int64_t tail_bytes = 0;
  int64_t padded_w = 0;
  // Stride-1 KxK convolutions on AMX (NhwcPlan::plane): x with its padding
  // written out, plane_h rows of plane_w pixels per image (in `padded`, as u8
  // values). The kernel runs over plane positions, whose taps are equally
  // spaced, so every A tile loads in place; out_row maps a position to its
  // output pixel (-1: a position in the padding, computed and dropped).
  int64_t plane_w = 0, plane_h = 0;
  std::vector<int64_t> out_row;
  // The call's scratch (NhwcScratch), set by every run. The indirection
  // pointers into wide or padded stay valid while their address does (the
  // session's arena keeps it from run to run; the key holds it).
  // Kernels with abytes = 2: x widened to u16 (xor-ed to u8 values), then
  // kWideSlack zeros (reads past the last pixel), then the padding row.
  uint16_t* wide = nullptr;
  // Row taps: x padded left and right with x_zp (xor-ed to u8 values; u16
  // when abytes = 2, else in `padded`), rows of padded_w pixels, then slack,
  // then a padding row for taps above and below x.
  uint8_t* padded = nullptr;
  // 1x1 direct convolutions with abytes = 2: each thread widens the chunk of
  // rows it works on into its own slice (it stays in cache, instead of a
  // widened copy of all of x going through memory), with its own pointers.
  uint16_t* chunk_wide = nullptr;
  const uint8_t** chunk_ind = nullptr;
  uint8_t* chunk_cols = nullptr;  // im2col: each thread's chunk of rows
  int32_t* xsum = nullptr;        // igemm with wzp: [group][rows]
  uint8_t* scratch = nullptr;     // gemm: per thread im2col + packed rows
  int32_t* row_sums = nullptr;    // gemm: per thread
  // Exact integer Winograd F(2x2, 3x3) (conv_nhwc_s8_winograd.h), prepared
  // for 3x3 filters where the microkernel multiplies 16-bit values: its
  // transforms, the 16 transformed filters as igemm panels ([xi][panel],
  // k = the cp channels of V), and the scratch of the call.
  const WinogradS8Transforms* wino = nullptr;
  // The microkernels whose raw mode can run the 16 GEMMs (where wino->gemm
  // is null, wino_ik[0] only there): their panels have the layout the
  // transformed filters are packed in; a call takes the one whose tiles pad
  // its blocks' rows least (NhwcPlan::wino_k).
  const IgemmS8Kernel* wino_ik[2] = {nullptr, nullptr};
  AlignedVector<uint8_t> wino_w;
  int64_t wino_cp = 0, wino_nr = 0, wino_panels = 0, wino_panel_bytes = 0;
  std::vector<int32_t> wino_bias;  // the op's bias, padded (FoldedLength)
  uint8_t* wino_scratch = nullptr;
};

constexpr int64_t kWideSlack = 32;

struct Geometry {
  int64_t n = 0, c = 0, rows = 0;
  bool direct = false;  // 1x1, stride 1, unpadded: row p of x is pixel p
};

// Pointers for every output pixel and tap, tiles of mr rows (the last tile
// padded with the last pixel). With u8 activations, pixels whose 4-byte
// reads (up to 3 bytes past the group's channels) could leave x point into
// `tail`, a copy refreshed by every run, so the microkernels never read
// outside x; the widened copy has slack after its last pixel instead.
// Row taps: the padded copy's geometry, sized for this call.
constexpr int64_t kRowSlack = 64;  // elements after the rows (reads up to 3 past a tap)

int64_t PaddedWidth(const NhwcState& s, const QConvCall& c) {
  return std::max(c.pad_left + c.iw, (c.ow - 1) * c.sw + s.kw);
}

void BuildRowTapIndirection(NhwcState& s, const QConvCall& c, const Geometry& g, int mr,
                            int abytes) {
  const int64_t pw = s.padded_w, row = pw * g.c;
  const uint8_t* base = abytes == 2 ? reinterpret_cast<const uint8_t*>(s.wide) : s.padded;
  const uint8_t* zero = base + (g.n * c.ih * row + kRowSlack) * abytes;
  const int64_t tiles = (g.rows + mr - 1) / mr, p = c.oh * c.ow;
  s.ind.assign(size_t(tiles * s.ind_taps * mr), nullptr);
  for (int64_t gp = 0; gp < tiles * mr; ++gp) {
    const int64_t q = std::min(gp, g.rows - 1);
    const int64_t b = q / p, oy = q % p / c.ow, ox = q % c.ow;
    const uint8_t** dst = s.ind.data() + gp / mr * s.ind_taps * mr + gp % mr;
    for (int64_t ky = 0; ky < s.kh; ++ky, dst += mr) {
      const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
      *dst =
          iy < 0 || iy >= c.ih ? zero : base + ((b * c.ih + iy) * row + ox * c.sw * g.c) * abytes;
    }
  }
}

// Fills the padded copy: each row of x between pad_left and the right
// padding, x_zp around it and in the padding row, xor-ed to u8 values.
template <class E>
void FillRowTapInput(const NhwcState& s, const QConvCall& c, const Geometry& g, E* dst) {
  const uint8_t xmask = c.x->dtype == DType::kInt8 ? 0x80 : 0;
  const E zp = E(uint8_t(uint8_t(c.x_zp) ^ xmask));
  const int64_t row = s.padded_w * g.c, left = c.pad_left * g.c, width = c.iw * g.c;
  const uint8_t* x = c.x->ptr<uint8_t>();
  for (int64_t r = 0; r < g.n * c.ih; ++r, dst += row, x += width) {
    std::fill(dst, dst + left, zp);
    for (int64_t i = 0; i < width; ++i) dst[left + i] = E(uint8_t(x[i] ^ xmask));
    std::fill(dst + left + width, dst + row, zp);
  }
  std::fill(dst, dst + kRowSlack, E(0));
  std::fill(dst + kRowSlack, dst + kRowSlack + row + kRowSlack, zp);
}

// The plane of a stride-1 convolution: output pixel (oy, ox) reads plane
// pixel (oy + ky * dh, ox + kx * dw) for tap (ky, kx), x's pixel (iy, ix)
// sits at (iy + pad_top, ix + pad_left), x_zp everywhere else. False when
// it would overflow or not fit (padded_plane.h).
bool PlaneExtent(const NhwcState& s, const QConvCall& c, int64_t* w, int64_t* h) {
  int64_t ew = 0, eh = 0, iw = 0, ih = 0;
  if (!CoveredExtent(c.ow, 1, s.kw, c.dw, &ew) || !CoveredExtent(c.oh, 1, s.kh, c.dh, &eh) ||
      !CheckedAdd(c.pad_left, c.iw, &iw) || !CheckedAdd(c.pad_top, c.ih, &ih))
    return false;
  *w = std::max(ew, iw);
  *h = std::max(eh, ih);
  return PaddedPlaneFits(*h, *w, c.ih * c.iw, c.oh * c.ow, s.taps);
}

// Plane positions the kernel runs: every image's, up to the last image's
// last output pixel.
int64_t PlaneRows(int64_t w, int64_t h, const QConvCall& c, int64_t n) {
  return (n - 1) * h * w + (c.oh - 1) * w + c.ow;
}

void BuildPlaneIndirection(NhwcState& s, const QConvCall& c, const Geometry& g, int mr) {
  const int64_t pw = s.plane_w, per_image = s.plane_h * pw;
  const int64_t rows = PlaneRows(pw, s.plane_h, c, g.n);
  const int64_t tiles = (rows + mr - 1) / mr;
  s.ind.assign(size_t(tiles * s.taps * mr), nullptr);
  s.out_row.assign(size_t(tiles * mr), -1);
  for (int64_t v = 0; v < tiles * mr; ++v) {
    const int64_t q = std::min(v, rows - 1);
    const int64_t b = q / per_image, oy = q % per_image / pw, ox = q % pw;
    if (v < rows && oy < c.oh && ox < c.ow) s.out_row[size_t(v)] = (b * c.oh + oy) * c.ow + ox;
    const uint8_t** dst = s.ind.data() + v / mr * s.taps * mr + v % mr;
    for (int64_t ky = 0; ky < s.kh; ++ky)
      for (int64_t kx = 0; kx < s.kw; ++kx, dst += mr)
        *dst = s.padded + ((b * s.plane_h + oy + ky * c.dh) * pw + ox + kx * c.dw) * g.c;
  }
}

// Fills the plane's rows [r0, r1) (of n * plane_h), xor-ed to u8 values.
void FillPlaneRows(const NhwcState& s, const QConvCall& c, const Geometry& g, int64_t r0,
                   int64_t r1) {
  const uint8_t xmask = c.x->dtype == DType::kInt8 ? 0x80 : 0;
  const uint8_t zp = uint8_t(uint8_t(c.x_zp) ^ xmask);
  const int64_t row = s.plane_w * g.c, left = c.pad_left * g.c, width = c.iw * g.c;
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* dst = s.padded + r * row;
    const int64_t b = r / s.plane_h, iy = r % s.plane_h - c.pad_top;
    if (iy < 0 || iy >= c.ih) {
      std::memset(dst, zp, size_t(row));
      continue;
    }
    const uint8_t* x = c.x->ptr<uint8_t>() + (b * c.ih + iy) * width;
    std::memset(dst, zp, size_t(left));
    if (xmask)
      for (int64_t i = 0; i < width; ++i) dst[left + i] = uint8_t(x[i] ^ 0x80);
    else
      std::memcpy(dst + left, x, size_t(width));
    std::memset(dst + left + width, zp, size_t(row - left - width));
  }
}

void BuildIndirection(NhwcState& s, const QConvCall& c, const Geometry& g, int mr, int abytes,
                      bool plane) {
  if (plane) return BuildPlaneIndirection(s, c, g, mr);
  if (s.row_taps) return BuildRowTapIndirection(s, c, g, mr, abytes);
  const int64_t pixels_in = g.n * c.ih * c.iw, total = pixels_in * g.c;
  const uint8_t* x = c.x->ptr<uint8_t>();
  const uint8_t* zero = nullptr;
  int64_t tail_start = total;
  if (abytes == 2) {
    x = reinterpret_cast<const uint8_t*>(s.wide);
    zero = reinterpret_cast<const uint8_t*>(s.wide + total + kWideSlack);
    s.tail_bytes = 0;
  } else {
    const int64_t tail_pixels = s.cg % 4 ? std::min<int64_t>(pixels_in, 4) : 0;
    s.tail_bytes = tail_pixels * g.c;
    s.tail.assign(size_t(s.tail_bytes + 64), 0);
    s.zero.assign(size_t(g.c + 64), 0);
    zero = s.zero.data();
    tail_start = total - s.tail_bytes;
  }
  const int64_t tiles = (g.rows + mr - 1) / mr, p = c.oh * c.ow;
  s.ind.assign(size_t(tiles * s.taps * mr), nullptr);
  for (int64_t gp = 0; gp < tiles * mr; ++gp) {
    const int64_t q = std::min(gp, g.rows - 1);
    const int64_t b = q / p, oy = q % p / c.ow, ox = q % c.ow;
    const uint8_t** dst = s.ind.data() + gp / mr * s.taps * mr + gp % mr;
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
      for (int64_t kx = 0; kx < s.kw; ++kx, dst += mr) {
        const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
        if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) {
          *dst = zero;
          continue;
        }
        const int64_t off = ((b * c.ih + iy) * c.iw + ix) * g.c;
        *dst = off >= tail_start ? s.tail.data() + (off - tail_start) : x + off * abytes;
      }
    }
  }
}

// Elements of the widened or padded copy of x (wide or padded), 0 when the
// call reads x in place.
int64_t CopyElements(const NhwcState& s, const QConvCall& c, const Geometry& g, int abytes,
                     bool plane) {
  if (plane) {  // then 64 bytes of slack: tail k blocks load whole (Args::overread)
    int64_t w = 0, h = 0;
    PlaneExtent(s, c, &w, &h);
    return g.n * h * w * g.c + 64;
  }
  if (s.row_taps) {
    const int64_t row = PaddedWidth(s, c) * g.c;
    return g.n * c.ih * row + kRowSlack + row + kRowSlack;
  }
  return abytes == 2 ? g.n * c.ih * c.iw * g.c + kWideSlack + g.c + kWideSlack : 0;
}

// Builds the pointers when the geometry or an address changed and refreshes
// the copies they point into, except the plane's rows (FillPlaneRows, split
// between the threads).
void PrepareIndirection(NhwcState& s, const QConvCall& c, const Geometry& g, int mr, int abytes,
                        bool plane = false) {
  const int64_t total = g.n * c.ih * c.iw * g.c;
  if (s.row_taps) s.padded_w = PaddedWidth(s, c);
  if (plane) PlaneExtent(s, c, &s.plane_w, &s.plane_h);
  std::vector<int64_t> key = {int64_t(reinterpret_cast<uintptr_t>(c.x->data)),
                              int64_t(reinterpret_cast<uintptr_t>(s.wide)),
                              int64_t(reinterpret_cast<uintptr_t>(s.padded)),
                              abytes,
                              g.n,
                              g.c,
                              c.ih,
                              c.iw,
                              c.oh,
                              c.ow,
                              c.sh,
                              c.sw,
                              c.dh,
                              c.dw,
                              c.pad_top,
                              c.pad_left,
                              mr,
                              plane};
  if (key != s.key) {
    BuildIndirection(s, c, g, mr, abytes, plane);
    s.key = std::move(key);
  }
  const uint8_t xmask = c.x->dtype == DType::kInt8 ? 0x80 : 0;
  if (plane) {
    std::memset(s.padded + g.n * s.plane_h * s.plane_w * g.c, 0, 64);
    return;
  }
  if (s.row_taps) {
    if (abytes == 2)
      FillRowTapInput(s, c, g, s.wide);
    else
      FillRowTapInput(s, c, g, s.padded);
    return;
  }
  if (abytes == 2) {
    uint16_t* w = s.wide;
    std::fill(w + total, w + total + kWideSlack, uint16_t(0));
    std::fill(w + total + kWideSlack, w + total + kWideSlack + g.c + kWideSlack,
              uint16_t(uint8_t(c.x_zp) ^ xmask));
    return;  // x itself is widened by WidenRange
  }
  std::memset(s.zero.data(), uint8_t(c.x_zp), s.zero.size());
  if (s.tail_bytes)
    std::memcpy(s.tail.data(), c.x->ptr<uint8_t>() + total - s.tail_bytes, size_t(s.tail_bytes));
}

// dst[i] = src[i] ^ mask as u16, i in [0, n).
void WidenRange(const uint8_t* src, uint16_t* dst, int64_t n, uint8_t mask) {
  for (int64_t i = 0; i < n; ++i) dst[i] = uint16_t(uint8_t(src[i] ^ mask));
}

// The pool when the convolution is worth splitting, else null. Not more:
// on AMX, Inception-v2's 1x1 convolutions of 5-8M MACs (12-25 us) ran
// 1.2-1.7x slower alone at 2 threads than split, their input coming from
// both cores (or the caller's core being the slower one).
ThreadPool* PoolFor(const QConvCall& c, int64_t macs) {
  return PoolForWork(c.pool, macs, int64_t(1) << 19);
}

// fn(slot, i) for items [0, n), in ranges handed out to the pool's threads;
// each item's output does not depend on the thread, so any thread count gives
// the same bytes.
template <class F>
void ForItems(ThreadPool* pool, int64_t n, const F& fn) {
  ParallelFor(pool, n, [&](int64_t b, int64_t e, int slot) {
    for (int64_t i = b; i < e; ++i) fn(slot, i);
  });
}

constexpr size_t kNoPart = SIZE_MAX;

// How one call runs and where its scratch goes, computed alike for the
// session's request (QConvNhwcS8Scratch) and for the run.
struct NhwcPlan {
  bool any_wzp = false;
  ThreadPool* pool = nullptr;  // null when not worth splitting
  int threads = 1;
  // igemm
  // Stride-1 KxK on AMX over the padded plane (NhwcState::plane_w): its
  // A tiles load in place, where rows crossing an output row or the padding
  // were gathered per panel or copied into im2col rows. rows: those the
  // kernel runs (output pixels, or plane positions).
  bool plane = false;
  int64_t rows = 0;
  int64_t tiles = 0, rows_pad = 0, chunk_tiles = 0, chunk_rows = 0, chunk_elems = 0;
  bool chunk_widen = false;
  // im2col rows (NhwcState::im2col, or a kernel with whole k blocks whose
  // taps fill whole blocks: cg % 64 == 0, where the packed weights are the
  // same and A tiles that would be gathered per panel (rows crossing an
  // output row or the padding, strides) are copied once per chunk instead).
  bool cols = false;
  int64_t cols_k = 0, cols_stride = 0, cols_elems = 0;  // bytes per row; per thread
  // gemm: rows per block, im2col bytes per block, bytes per thread
  int64_t block = 0, tile_bytes = 0, slice = 0;
  ScratchLayout layout;
  size_t copy = kNoPart, chunk_wide = kNoPart, chunk_ind = kNoPart, xsum = kNoPart;
  size_t chunk_cols = kNoPart;
  size_t gemm = kNoPart, row_sums = kNoPart;
  size_t kept = 0;  // the indirection buffer and padding rows the state keeps
  // Integer Winograd: tiles of 2x2 outputs, per block (a multiple of mr),
  // each thread's slice (V, then M, then the block's row pointers).
  bool wino = false;
  int64_t wino_tiles = 0, wino_block = 0, wino_m_at = 0, wino_ind_at = 0, wino_slice = 0;
  size_t wino_part = kNoPart;
  const IgemmS8Kernel* wino_k = nullptr;
};

bool AnyWeightZeroPoint(const NhwcState& s, const QConvCall& c) {
  for (int32_t z : c.w_zp)
    if ((s.w_dtype == DType::kUInt8 ? z - 128 : z) != 0) return true;
  return false;
}

// The share of 16-row A tiles whose taps are not equally spaced pixels of x
// (rows in two output rows, taps in the padding, the last tile's repeated
// rows): the AMX kernel gathers those per panel.
double GatheredShare(const NhwcState& s, const QConvCall& c, const Geometry& g) {
  const int64_t halves = (g.rows + 15) / 16, per_image = c.oh * c.ow;
  int64_t gathered = 0;
  for (int64_t h = 0; h < halves; ++h) {
    const int64_t r0 = h * 16, r1 = r0 + 15;
    if (r1 >= g.rows || r0 / c.ow != r1 / c.ow) {
      ++gathered;
      continue;
    }
    const int64_t oy = r0 % per_image / c.ow, ox0 = r0 % c.ow, ox1 = r1 % c.ow;
    const int64_t y0 = oy * c.sh - c.pad_top, x0 = ox0 * c.sw - c.pad_left;
    const int64_t y1 = y0 + (s.kh - 1) * c.dh, x1 = ox1 * c.sw - c.pad_left + (s.kw - 1) * c.dw;
    if (y0 < 0 || x0 < 0 || y1 >= c.ih || x1 >= c.iw) ++gathered;
  }
  return halves ? double(gathered) / double(halves) : 0.0;
}

// The padded plane for a stride-1 KxK convolution on AMX when its extra
// positions (pad columns, rows between images) add next to no tiles: the
// tile unit's time follows the tiles, and the gathers or im2col copies the
// plane saves cost less than a few % more tiles. Measured per convolution
// (Xeon, 1 thread, per-node minima, old and new alternating): 256->256 3x3
// at 14x14 (7 tiles either way) 146 -> 121 us, 512->512 at 7x7 178 -> 168;
// at 28x28 (25 -> 27 tiles) 2.5% and at 56x56 (98 -> 102) 4% slower.
bool UsePlane(const NhwcState& s, const QConvCall& c, const Geometry& g) {
  if (!s.ik || s.ik->kc4_align == 1 || s.ik->abytes != 1 || s.row_taps || s.im2col || g.direct ||
      c.sh != 1 || c.sw != 1 || g.rows == 0)
    return false;
  int64_t w = 0, h = 0, elems = 0;
  if (!PlaneExtent(s, c, &w, &h) || !CheckedMul(g.n, h * w, &elems) ||
      !CheckedMul(elems, g.c, &elems))
    return false;
  const int64_t mr = s.ik->mr;
  return 32 * ((PlaneRows(w, h, c, g.n) + mr - 1) / mr) <= 33 * ((g.rows + mr - 1) / mr);
}

// Whether the call runs the integer Winograd prepared in s: stride and
// dilation 1, no weight zero point (the transformed filters are of the s8
// weights), and at least 16 tiles per image (7x7 outputs) and per thread:
// each thread's blocks stream all 16 transformed filters (s16, 3.6x the
// direct weights' bytes), so fewer outputs per thread cost more than the
// direct sums save (Zen 3, 3x3 512->512 at 7x7, 2 threads: 1.10 ms, against
// 1.40 at 1 thread; the direct convolution splits its panels between them).
bool WinogradCall(const NhwcState& s, const QConvCall& c, const Geometry& g, bool any_wzp,
                  int threads) {
  const int64_t per_image = ((c.oh + 1) / 2) * ((c.ow + 1) / 2);
  return s.wino && c.kh == 3 && c.kw == 3 && c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 &&
         !any_wzp && c.x->rank() == 4 && per_image >= 16 &&
         g.n * per_image >= 16 * int64_t(threads);
}

void PlanCall(const NhwcState& s, const QConvCall& c, const Geometry& g, NhwcPlan* p) {
  p->any_wzp = AnyWeightZeroPoint(s, c);
  p->pool = PoolFor(c, g.rows * s.m * s.kdim);
  p->threads = NumThreads(p->pool);
  const size_t ptr = sizeof(const uint8_t*);
  if (WinogradCall(s, c, g, p->any_wzp, p->threads)) {
    const int64_t mp = s.wino_panels * s.wino_nr, cp = s.wino_cp;
    p->wino_k = s.wino_ik[0];
    const int64_t mr = p->wino_k->mr;
    p->wino = true;
    p->wino_tiles = g.n * ((c.oh + 1) / 2) * ((c.ow + 1) / 2);
    // Blocks of up to about 1 MB of V and M: each reads the 16 transformed
    // filters once, so wide layers need many tiles per block (512->512 at
    // 28x28 on Zen 3: 25 ms with blocks of 256 KB, 6 tiles, 13 ms with 1 MB,
    // 18 tiles; direct 24.6), while V of one position stays in L2. Equal
    // blocks, as many per thread (a block is one item).
    const int64_t per_tile = 16 * (cp * 2 + mp * 4);
    const int64_t budget = std::max<int64_t>(mr, 1024 * 1024 / per_tile);
    const int64_t blocks =
        std::min(p->wino_tiles, RoundUpTo((p->wino_tiles + budget - 1) / budget, p->threads));
    p->wino_block = (p->wino_tiles + blocks - 1) / blocks;
    // ResNet-50's 7x7 layers: one block of 16 tiles, 20 rows in 5-row tiles.
    if (s.wino_ik[1] &&
        RoundUpTo(p->wino_block, s.wino_ik[1]->mr) < RoundUpTo(p->wino_block, int64_t(mr)))
      p->wino_k = s.wino_ik[1];
    p->wino_m_at = RoundUpTo(16 * p->wino_block * cp * 2, 64);
    p->wino_ind_at = p->wino_m_at + RoundUpTo(16 * p->wino_block * mp * 4, 64);
    // Row pointers for whole microkernel tiles (the last one's extra rows
    // repeat the block's last row).
    p->wino_slice =
        p->wino_ind_at + RoundUpTo(RoundUpTo(p->wino_block, p->wino_k->mr) * int64_t(ptr), 64);
    p->wino_part = p->layout.Add(size_t(p->wino_slice * p->threads));
    return;
  }
  if (s.ik) {
    const int mr = s.ik->mr, ab = s.ik->abytes;
    p->plane = UsePlane(s, c, g);
    p->rows = g.rows;
    if (p->plane) {
      int64_t w = 0, h = 0;
      PlaneExtent(s, c, &w, &h);
      p->rows = PlaneRows(w, h, c, g.n);
    }
    p->tiles = (p->rows + mr - 1) / mr;
    p->rows_pad = p->tiles * mr;
    p->chunk_widen = ab == 2 && g.direct && !s.row_taps && !p->any_wzp;
    const int64_t block = 4 * s.ik->kc4_align;
    // Copying every row once beats gathering where the gathered tiles times
    // the panels that gather them again clearly exceed the rows (measured on
    // ResNet-50: 3x3 at 28x28 with 4 panels, share 0.6, is faster gathered;
    // 7x7 and 14x14 outputs and strided 1x1 with 8-64 panels copied).
    p->cols = s.im2col ||
              (block == 64 && ab == 1 && s.group == 1 && !g.direct && !s.row_taps && !p->plane &&
               s.cg % block == 0 && GatheredShare(s, c, g) * double(s.panels) >= 3.0);
    p->cols_k = s.im2col ? s.cols_k : s.taps * s.cg;
    // Chunks of pixel tiles whose activations stay in cache while every
    // panel of every group passes over them (at least the kernel's minimum;
    // im2col rows: at most about 256 KB of them, at least 2 tiles).
    const int64_t row_bytes =
        p->cols ? p->cols_k : std::max<int64_t>(1, s.ind_taps * s.kc4 * 4 * ab);
    int64_t want = std::max<int64_t>({1, s.ik->min_chunk_tiles, 32 * 1024 / (mr * row_bytes)});
    if (p->cols) want = std::min(want, std::max<int64_t>(2, 256 * 1024 / (mr * row_bytes)));
    // Every chunk streams all panels' weights again: where they outgrow the
    // L2 cache (the 7x7 layers of ResNet-50: 1-2.4 MB for 49 rows) they came
    // from L3 once per chunk of a few rows. Chunks of up to about 256 KB of
    // activations then read each weight from memory once and the activations
    // from L2 (with the next panel prefetched, 3x3 512->512 at 7x7 on Zen 5:
    // 740 -> 890 GOPS).
    if (s.group * s.panels * s.panel_bytes > 512 * 1024)
      want = std::max(want, 256 * 1024 / (mr * row_bytes));
    p->chunk_tiles = std::min<int64_t>(p->tiles, want);
    p->chunk_rows = p->chunk_tiles * mr;
    p->chunk_elems = p->chunk_rows * g.c + kWideSlack;
    if (p->chunk_widen) {
      p->chunk_wide = p->layout.Add(size_t(p->chunk_elems * p->threads) * sizeof(uint16_t));
      p->chunk_ind = p->layout.Add(size_t(p->chunk_rows * p->threads) * ptr);
    } else {
      if (p->cols) {
        // The copies move whole 32-byte pieces: a row's last one may spill
        // up to 31 bytes into the next row (written after it) or the slack.
        p->cols_stride = p->cols_k;
        p->cols_elems = p->chunk_rows * p->cols_stride + 64;
        p->chunk_cols = p->layout.Add(size_t(p->cols_elems * p->threads));
        p->chunk_ind = p->layout.Add(size_t(p->chunk_rows * p->threads) * ptr);
      }
      const int64_t copy = CopyElements(s, c, g, ab, p->plane);
      if (copy) p->copy = p->layout.Add(size_t(copy * ab));
      p->kept = size_t(p->tiles * s.ind_taps * mr) * ptr;
      if (!copy) p->kept += size_t(5 * g.c + 128);                     // zero and tail
      if (p->plane) p->kept += size_t(p->rows_pad) * sizeof(int64_t);  // out_row
    }
    if (p->any_wzp) p->xsum = p->layout.Add(size_t(s.group * p->rows_pad) * sizeof(int32_t));
    return;
  }
  const GemmS8Kernels& k = *s.gk;
  // Row blocks of about 64 KB of im2col bytes, a multiple of the tile height.
  p->block =
      std::min(RoundUpTo(g.rows, k.mr), std::max<int64_t>(1, 64 * 1024 / (s.kdim * k.mr)) * k.mr);
  p->tile_bytes = g.direct ? 0 : RoundUpTo(p->block * s.kdim, 64);
  p->slice = p->tile_bytes + RoundUpTo(PackedBytes(p->block, s.kdim, k.mr), 64);
  p->gemm = p->layout.Add(size_t(p->slice * p->threads));
  if (p->any_wzp) p->row_sums = p->layout.Add(size_t(p->block * p->threads) * sizeof(int32_t));
  if (!g.direct) p->kept = size_t(g.rows * s.taps) * ptr + size_t(5 * g.c + 128);
}

bool RunIgemm(NhwcState& s, const QConvCall& c, const Geometry& g, const NhwcPlan& p) {
  const IgemmS8Kernel& k = *s.ik;
  const int mr = k.mr, ab = k.abytes;
  const bool x_signed = c.x->dtype == DType::kInt8;
  const uint8_t xmask = x_signed ? 0x80 : 0;
  const int64_t tiles = p.tiles, rows_pad = p.rows_pad;
  const int64_t taps = s.ind_taps;
  const bool chunk_widen = p.chunk_widen;
  if (!chunk_widen) PrepareIndirection(s, c, g, mr, ab, p.plane);
  if (p.plane) {
    const int64_t plane_rows = g.n * s.plane_h,
                  block = std::max<int64_t>(1, 16384 / (s.plane_w * g.c));
    ForItems(p.pool, (plane_rows + block - 1) / block, [&](int, int64_t i) {
      FillPlaneRows(s, c, g, i * block, std::min(plane_rows, (i + 1) * block));
    });
  }
  if (ab == 2 && !s.row_taps && !chunk_widen) {
    // Widened once per run (a few % of the MACs' time), split like the items.
    const int64_t total = g.n * c.ih * c.iw * g.c, block = 16 * 1024;
    const int64_t blocks = (total + block - 1) / block;
    const uint8_t* x = c.x->ptr<uint8_t>();
    ForItems(p.pool, blocks, [&](int, int64_t i) {
      const int64_t b = i * block;
      WidenRange(x + b, s.wide + b, std::min(block, total - b), xmask);
    });
  }
  if (s.cp.any_wzp) {
    for (int64_t gr = 0; gr < s.group; ++gr) {
      for (int64_t r = 0; r < rows_pad; ++r) {
        const uint8_t* const* ptr = s.ind.data() + r / mr * taps * mr + r % mr;
        int32_t sum = 0;
        for (int64_t t = 0; t < taps; ++t, ptr += mr) {
          if (ab == 2) {
            const uint16_t* px = reinterpret_cast<const uint16_t*>(*ptr) + gr * s.cg;
            for (int64_t ch = 0; ch < s.tap_c; ++ch) sum += px[ch];
          } else if (s.row_taps) {  // the padded copy holds u8 values
            for (int64_t ch = 0; ch < s.tap_c; ++ch) sum += (*ptr)[ch];
          } else if (p.plane) {  // so does the plane
            const uint8_t* px = *ptr + gr * s.cg;
            for (int64_t ch = 0; ch < s.cg; ++ch) sum += px[ch];
          } else {
            const uint8_t* px = *ptr + gr * s.cg;
            for (int64_t ch = 0; ch < s.cg; ++ch) sum += px[ch] ^ xmask;
          }
        }
        s.xsum[size_t(gr * rows_pad + r)] = sum;
      }
    }
  }
  const int64_t per_chunk = s.group * s.panels;
  // Threads take runs of panels that cover whole 64-byte lines of each
  // output row, or whole tiles where the panels' channels do not start
  // lines (groups, rows of other widths): a line written by both threads
  // bounced between their caches. (ShuffleNet's 4-group 1x1 convolutions,
  // 136 channels, had their groups split between the threads: 0.9x at 2
  // threads against 1.)
  // Weights over the input: ResNet-50's 14x14 stage (256-590 KB of weights,
  // 50-200 KB of activations) streamed them again for the tile two threads
  // split.
  const int64_t weight_bytes = s.group * s.panels * s.panel_bytes;
  const bool weight_heavy = weight_bytes >= g.n * c.ih * c.iw * g.c * int64_t(ab);
  const int64_t line_ch = c.dq_mult ? 16 : 64;
  int64_t line_panels = per_chunk;
  if (s.group == 1 && s.m % line_ch == 0) {
    if (k.nr % line_ch == 0) line_panels = 1;
    if (line_ch % k.nr == 0) line_panels = line_ch / k.nr;
  } else if (weight_bytes >= 256 * g.rows) {
    // Unless streaming all the weights to both threads costs more than one
    // line per output row bouncing (Inception-v2's 1x1 1024->352 at 7x7:
    // 360 KB of weights, 49 rows; 32 -> 39 us split by pixels).
    line_panels = 1;
  }
  const IgemmSplit split = SplitIgemm(tiles, p.chunk_tiles, per_chunk, line_panels, p.threads,
                                      weight_heavy, k.min_chunk_tiles);
  const int64_t* const chunk_tile = split.chunk_tile.data();
  const int64_t chunks = int64_t(split.chunk_tile.size()) - 1;
  uint8_t* y = c.dq_mult ? nullptr : c.y->ptr<uint8_t>();
  float* yf = c.dq_mult ? c.y->ptr<float>() : nullptr;
  ThreadPool* const pool = p.pool;
  const int64_t chunk_rows = p.chunk_rows, chunk_elems = p.chunk_elems;
  std::vector<int64_t> widened;  // per slot: the chunk its slice holds, -1 none
  if (chunk_widen || p.cols) widened.assign(size_t(p.threads), -1);
  // Widens chunk `chunk` into slot `slot`'s slice; its pointers, the last
  // tile's padding rows repeating the chunk's last row.
  auto widen_chunk = [&](int slot, int64_t chunk) {
    uint16_t* dst = s.chunk_wide + slot * chunk_elems;
    const int64_t row0 = chunk_tile[chunk] * mr,
                  rows = std::min((chunk_tile[chunk + 1] - chunk_tile[chunk]) * mr, g.rows - row0);
    WidenRange(c.x->ptr<uint8_t>() + row0 * g.c, dst, rows * g.c, xmask);
    std::fill(dst + rows * g.c, dst + rows * g.c + kWideSlack, uint16_t(0));
    const uint8_t** ind = s.chunk_ind + slot * chunk_rows;
    for (int64_t r = 0; r < chunk_rows; ++r)
      ind[r] = reinterpret_cast<const uint8_t*>(dst + std::min(r, rows - 1) * g.c);
    widened[size_t(slot)] = chunk;
  };
  // Copies chunk `chunk`'s taps into slot `slot`'s im2col rows (from the
  // pointers: padding already x_zp), 32 bytes at a time, as u8 values; the
  // pointers, the last tile's padding rows repeating the last row. Row taps
  // read a padded copy with slack (a last piece may read past a tap); other
  // taps read x, whose taps are whole 64-byte blocks.
  const bool cols_xor = x_signed && !s.row_taps;
  auto im2col_chunk = [&](int slot, int64_t chunk) {
    uint8_t* dst = s.chunk_cols + slot * p.cols_elems;
    const int64_t row0 = chunk_tile[chunk] * mr,
                  rows = std::min((chunk_tile[chunk + 1] - chunk_tile[chunk]) * mr, g.rows - row0);
    // Locals, not the captured ones: the byte stores below could alias
    // those, which made the compiler reload every one per piece (an RGB
    // stem's copy was 40% of its time on AMX).
    const int64_t tap_c = s.tap_c, n_taps = taps, tile = mr, stride = p.cols_stride;
    const uint8_t* const* taps_of = s.ind.data();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t q = row0 + r;
      const uint8_t* const* src = taps_of + q / tile * n_taps * tile + q % tile;
      uint8_t* d = dst + r * stride;
      if (cols_xor) {
        for (int64_t t = 0; t < n_taps; ++t, src += tile, d += tap_c)
          for (int64_t o = 0; o < tap_c; ++o) d[o] = uint8_t((*src)[o] ^ 0x80);
      } else if (tap_c <= 32) {  // row taps of an RGB stem: one piece each
        for (int64_t t = 0; t < n_taps; ++t, src += tile, d += tap_c) std::memcpy(d, *src, 32);
      } else {
        for (int64_t t = 0; t < n_taps; ++t, src += tile, d += tap_c)
          for (int64_t o = 0; o < tap_c; o += 32) std::memcpy(d + o, *src + o, 32);
      }
    }
    const uint8_t** ind = s.chunk_ind + slot * chunk_rows;
    for (int64_t r = 0; r < chunk_rows; ++r) ind[r] = dst + std::min(r, rows - 1) * p.cols_stride;
    widened[size_t(slot)] = chunk;
  };
  IgemmS8Args base;
  base.taps = p.cols ? 1 : taps;
  base.kc4 = p.cols ? p.cols_k / 4 : s.kc4;
  base.x_signed = x_signed && !s.row_taps && !p.cols && !p.plane;
  base.overread = p.plane;
  base.yzp = c.y_zp;
  base.lo = c.lo;
  base.hi = c.hi;
  base.ldy = s.m;
  if (yf) {
    base.flo = c.dq_lo;
    base.fhi = c.dq_hi;
  }
  auto run_item = [&](int slot, int64_t i) {
    int64_t chunk = 0, j = 0;
    split.Item(i, per_chunk, &chunk, &j);
    const int64_t gr = j / s.panels, pn = j % s.panels;
    const int64_t tile0 = chunk_tile[chunk], chunk_tiles = chunk_tile[chunk + 1] - tile0;
    const int64_t row0 = tile0 * mr, ch0 = gr * s.mg + pn * k.nr;
    IgemmS8Args a = base;
    if (chunk_widen) {
      if (widened[size_t(slot)] != chunk) widen_chunk(slot, chunk);
      a.ind = s.chunk_ind + slot * chunk_rows;
    } else if (p.cols) {
      if (widened[size_t(slot)] != chunk) im2col_chunk(slot, chunk);
      a.ind = s.chunk_ind + slot * chunk_rows;
    } else {
      a.ind = s.ind.data() + tile0 * taps * mr;
    }
    a.a_offset = gr * s.cg * ab;
    a.rows = std::min(chunk_tiles * mr, p.rows - row0);
    a.w = s.packed_w.data() + (gr * s.panels + pn) * s.panel_bytes;
    // The thread's next item reads the next panel, or after the last one
    // (another chunk) the first.
    a.prefetch = gr * s.panels + pn + 1 < s.group * s.panels ? a.w + s.panel_bytes
                 : chunks > 1                                ? s.packed_w.data()
                                                             : nullptr;
    a.prefetch_bytes = s.panel_bytes;
    a.cols = std::min<int64_t>(k.nr, s.mg - pn * k.nr);
    a.bias = s.cp.bias.data() + ch0;
    a.mult = (yf ? c.dq_mult : s.cp.mult.data()) + ch0;
    if (s.cp.any_wzp) {
      a.wzp = s.cp.wzp.data() + ch0;
      a.xsum = s.xsum + gr * rows_pad + row0;
    }
    // Plane positions store through out_row (from the first row).
    const int64_t y_row0 = p.plane ? 0 : row0;
    if (p.plane) a.out_row = s.out_row.data() + row0;
    if (yf) {
      a.yf = yf + y_row0 * s.m + ch0;
      a.fbias = c.dq_bias + ch0;
    } else {
      a.y = y + y_row0 * s.m + ch0;
    }
    k.run(a);
  };
  // Each thread runs its own share of the (chunk-major) items first, so it
  // writes the same output rows every run: with ranges handed out as the
  // threads came, a 1x1 64->256 convolution at 56x56 ran 1.3x slower at 2
  // threads (its output lines moved between the cores' caches every run).
  // The shares hold equal work (SplitIgemm), and threads take items one
  // (line) at a time, so the other thread's last range is short: with equal
  // item counts (chunks of 4 and 3 tiles) and ranges of 1/16 of the items,
  // the caller waited 4-7 us for the worker's last range after half of
  // Inception-v2's parallel ops at 2 threads, and where one core ran the
  // model 2x slower than the other (a busy host), 2 threads were slower
  // than 1 on the fast core.
  ParallelForBounds(pool, split.bounds.data(), line_panels,
                    [&](int64_t begin, int64_t end, int slot) {
                      if (k.begin) k.begin();
                      for (int64_t i = begin; i < end; ++i) run_item(slot, i);
                      if (k.end) k.end();
                    });
  return true;
}

// Blocks of tiles split between the threads (each block's bytes do not
// depend on which thread runs it): per block, the input transform of each
// tile, the 16 GEMMs (position-major, so each transformed filter is read
// once per block), the output transform with the bias and requantization.
bool RunWinograd(NhwcState& s, const QConvCall& c, const Geometry& g, const NhwcPlan& p) {
  const IgemmS8Kernel& k = *p.wino_k;
  const int64_t mr = k.mr, nr = s.wino_nr, panels = s.wino_panels, mp = panels * nr;
  const int64_t cp = s.wino_cp;
  const int64_t tw = (c.ow + 1) / 2, per_image = ((c.oh + 1) / 2) * tw;
  const int64_t tiles = p.wino_tiles, bt = p.wino_block, ch = g.c, m = s.m;
  const bool x_signed = c.x->dtype == DType::kInt8;
  const uint8_t xmask = x_signed ? 0x80 : 0;
  const int32_t xzp_u = x_signed ? c.x_zp + 128 : c.x_zp;
  s.wino_bias.assign(FoldedLength(m), 0);
  if (c.bias) std::copy(c.bias, c.bias + m, s.wino_bias.begin());
  const int32_t* bias = s.wino_bias.data();
  const float* mult = s.cp.mult.data();
  const uint8_t* x = c.x->ptr<uint8_t>();
  const bool float_out = c.dq_mult != nullptr;
  uint8_t* y = float_out ? nullptr : c.y->ptr<uint8_t>();
  float* yf = float_out ? c.y->ptr<float>() : nullptr;
  const WinogradS8Transforms& tr = *s.wino;
  ForItems(p.pool, (tiles + bt - 1) / bt, [&](int slot, int64_t b) {
    uint8_t* slice = s.wino_scratch + slot * p.wino_slice;
    int16_t* v = reinterpret_cast<int16_t*>(slice);
    int32_t* msum = reinterpret_cast<int32_t*>(slice + p.wino_m_at);
    const uint8_t** ind = reinterpret_cast<const uint8_t**>(slice + p.wino_ind_at);
    const int64_t t0 = b * bt, nt = std::min(bt, tiles - t0);
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t q = t0 + t, img = q / per_image, ty = q % per_image / tw, tx = q % tw;
      const uint8_t* d[16];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t iy = 2 * ty + i - c.pad_top, ix = 2 * tx + j - c.pad_left;
          d[i * 4 + j] = iy >= 0 && iy < c.ih && ix >= 0 && ix < c.iw
                             ? x + ((img * c.ih + iy) * c.iw + ix) * ch
                             : nullptr;
        }
      tr.input(d, ch, cp, xmask, xzp_u, v + t * cp, bt * cp);
    }
    for (int64_t r = 0; r < RoundUpTo(nt, mr); ++r)
      ind[r] = reinterpret_cast<const uint8_t*>(v + std::min(r, nt - 1) * cp);
    IgemmS8Args a;
    a.ind = ind;
    a.taps = 1;
    a.kc4 = cp / 4;
    a.rows = nt;
    a.ldy = mp;
    for (int64_t xi = 0; xi < 16; ++xi) {
      a.a_offset = xi * bt * cp * 2;
      for (int64_t pn = 0; pn < panels; ++pn) {
        const uint8_t* w = s.wino_w.data() + (xi * panels + pn) * s.wino_panel_bytes;
        const int64_t cols = std::min(nr, m - pn * nr);
        int32_t* out = msum + xi * bt * mp + pn * nr;
        if (tr.gemm) {
          tr.gemm(v + xi * bt * cp, nt, cp, w, cols, out, mp);
          continue;
        }
        a.w = w;
        a.cols = cols;
        a.yi = out;
        k.run(a);
      }
    }
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t q = t0 + t, img = q / per_image, ty = q % per_image / tw, tx = q % tw;
      uint8_t* out[4];
      float* outf[4];
      for (int a2 = 0; a2 < 2; ++a2)
        for (int e = 0; e < 2; ++e) {
          const int64_t oy = 2 * ty + a2, ox = 2 * tx + e;
          const bool inside = oy < c.oh && ox < c.ow;
          const int64_t at = ((img * c.oh + oy) * c.ow + ox) * m;
          out[a2 * 2 + e] = inside && y ? y + at : nullptr;
          outf[a2 * 2 + e] = inside && yf ? yf + at : nullptr;
        }
      if (float_out)
        tr.output_float(msum + t * mp, bt * mp, m, c.dq_mult, c.dq_bias, c.dq_lo, c.dq_hi, outf);
      else
        tr.output(msum + t * mp, bt * mp, m, bias, mult, c.y_zp, c.lo, c.hi, out);
    }
  });
  return true;
}

bool RunGemm(NhwcState& s, const QConvCall& c, const Geometry& g, const NhwcPlan& p) {
  const GemmS8Kernels& k = *s.gk;
  if (!g.direct) PrepareIndirection(s, c, g, 1, 1);
  const uint8_t xmask = c.x->dtype == DType::kInt8 ? 0x80 : 0;
  const int64_t kdim = s.kdim;
  const int64_t block = p.block, tile_bytes = p.tile_bytes, slice = p.slice;
  const int64_t blocks = (g.rows + block - 1) / block, items = blocks * s.group;
  ThreadPool* pool = p.pool;
  const uint8_t* x = c.x->ptr<uint8_t>();
  uint8_t* y = c.y->ptr<uint8_t>();
  ForItems(pool, items, [&](int t, int64_t i) {
    const int64_t gr = i % s.group, row0 = i / s.group * block;
    const int64_t nrows = std::min(block, g.rows - row0);
    uint8_t* base = s.scratch + t * slice;  // 64-byte aligned: slice is a multiple of 64
    const uint8_t* src = x + row0 * g.c + gr * s.cg;
    int64_t lds = g.c;
    if (!g.direct) {
      for (int64_t r = 0; r < nrows; ++r) {
        const uint8_t* const* ptr = s.ind.data() + (row0 + r) * s.taps;
        uint8_t* dst = base + r * kdim;
        for (int64_t tp = 0; tp < s.taps; ++tp, dst += s.cg)
          std::memcpy(dst, ptr[tp] + gr * s.cg, size_t(s.cg));
      }
      src = base;
      lds = kdim;
    }
    uint8_t* packed = base + tile_bytes;
    k.pack_left(src, lds, nrows, kdim, xmask, packed);
    int32_t* sums = nullptr;
    if (s.cp.any_wzp) {
      sums = s.row_sums + t * block;
      for (int64_t r = 0; r < nrows; ++r) {
        int32_t sum = 0;
        for (int64_t j = 0; j < kdim; ++j) sum += src[r * lds + j] ^ xmask;
        sums[r] = sum;
      }
    }
    GemmS8Args a;
    a.left = packed;
    a.right = s.packed_w.data() + gr * s.group_bytes;
    a.rows = nrows;
    a.cols = s.mg;
    a.k4 = (kdim + 3) / 4;
    a.weights_left = false;
    a.bias = s.cp.bias.data() + gr * s.mg;
    a.mult = s.cp.mult.data() + gr * s.mg;
    a.wzp = s.cp.any_wzp ? s.cp.wzp.data() + gr * s.mg : nullptr;
    a.xsum = sums;
    a.yzp = c.y_zp;
    a.lo = c.lo;
    a.hi = c.hi;
    a.y = y + row0 * s.m + gr * s.mg;
    a.ldy = s.m;
    k.gemm(a);
  });
  return true;
}

// Few input channels per tap on AMX: its tiles multiply 64 bytes of k per
// tap (kc4_align 16), so a tap of fewer channels pads its block with zeros
// and has its 16-row A tiles gathered with masked loads, where the zmm
// kernels broadcast 4 bytes at a time. Measured per convolution on a Xeon
// with AMX (SqueezeNet, Inception-v2, `qfold bench --profile`, AMX vs
// QFOLD_ISA=avx512vnni): 16 channels 3x3 0.32-0.37x, 1x1 0.43x; 32: 0.6-0.7x;
// 48: 0.64-0.96x; 64 and up 0.97-2.4x; a 3x3 RGB stem (27 of 64 k bytes
// copied into im2col rows) 0.47x, a 7x7 one (147 of 192) 1.02x.
bool AmxPaysOff(const NhwcState& s, bool row_taps) {
  if (row_taps) {  // kh rows of kw * cg channels in k blocks of 64 bytes
    const int64_t k = s.kh * s.kw * s.cg;
    return 4 * k >= 3 * RoundUpTo(k, 64);
  }
  return s.cg >= 64;
}

// The kernels of one family: AMX (kc4_align > 1) or the rest.
std::vector<const IgemmS8Kernel*> Family(const std::vector<const IgemmS8Kernel*>& ks, bool amx) {
  std::vector<const IgemmS8Kernel*> out;
  for (const IgemmS8Kernel* k : ks)
    if ((k->kc4_align > 1) == amx) out.push_back(k);
  return out;
}

// The microkernel for mg channels per group: the widest panel unless
// narrower ones waste clearly fewer padded channels.
const IgemmS8Kernel* PickKernel(const std::vector<const IgemmS8Kernel*>& ks, int64_t mg) {
  const IgemmS8Kernel* best = nullptr;
  double best_cost = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    const double cost = double(RoundUpTo(mg, ks[i]->nr)) * (1.0 + 0.15 * double(i));
    if (!best || cost < best_cost) {
      best = ks[i];
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

IgemmSplit SplitIgemm(int64_t tiles, int64_t max_chunk_tiles, int64_t per_chunk, int64_t unit,
                      int threads, bool weight_heavy, int64_t min_chunk_tiles) {
  IgemmSplit sp;
  int64_t w = std::max<int64_t>(1, max_chunk_tiles);
  const int64_t per_tile = per_chunk / unit, blocks = tiles * per_tile;
  // At 2 or more threads, chunks of at most 1/4 of a share (at least the
  // kernel's minimum): a thread that runs slower (a busy core) leaves its
  // share's last chunks to the other.
  const int64_t share_w =
      min_chunk_tiles > 0 && threads > 1
          ? std::min(w, std::max(min_chunk_tiles, tiles / (4 * int64_t(threads))))
          : w;
  // Weights over the input split by panels even where the panels do not
  // divide evenly, if each thread gets at least 4 units (5 of 11 panels
  // against 6 beat streaming all the weights to both threads).
  const bool by_panels =
      threads > 1 && (tiles <= share_w || weight_heavy) &&
      (per_tile % threads == 0 || (weight_heavy && per_tile >= 4 * int64_t(threads)));
  // Each thread streams its panels' weights once per chunk: weights split by
  // panels keep the chunks one thread would use (ResNet-50's 7x7 stage,
  // 1-2.4 MB of weights for 9 tiles, had chunks of one tile at 2 threads:
  // each thread read its half of the weights from L3 9 times, 1.2-1.4x over
  // 1 thread). The other thread still takes over whole (chunk, panel) items.
  if (!(by_panels && weight_heavy)) w = share_w;
  // Tiles where a chunk must start: the shares' first tiles, and after a
  // tile that two shares split.
  std::vector<int64_t> cuts = {0, tiles};
  if (!by_panels)
    for (int s = 1; s < threads; ++s) {
      const int64_t b = blocks * s / threads, t = b / per_tile;
      cuts.push_back(t);
      if (b % per_tile) cuts.push_back(t + 1);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // Each run between cuts in chunks of at most w tiles, of equal sizes.
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t a = cuts[i], len = cuts[i + 1] - a, n = (len + w - 1) / w;
    for (int64_t j = 0; j < n; ++j) sp.chunk_tile.push_back(a + len * j / n);
  }
  sp.chunk_tile.push_back(tiles);
  const int64_t chunks = int64_t(sp.chunk_tile.size()) - 1;
  for (int s = 0; s <= threads; ++s) {
    const int64_t b = blocks * s / threads;
    if (by_panels) {
      sp.panels.push_back(per_tile * s / threads * unit);
      sp.bounds.push_back(chunks * sp.panels.back());
      continue;
    }
    const int64_t t = b / per_tile;
    const int64_t chunk =
        std::lower_bound(sp.chunk_tile.begin(), sp.chunk_tile.end(), t) - sp.chunk_tile.begin();
    sp.bounds.push_back(chunk * per_chunk + b % per_tile * unit);
  }
  return sp;
}

namespace {

#if defined(__x86_64__) || defined(__aarch64__)
// U = G' g G'^T of every (output, input) channel pair's 3x3 filter of s8
// weights, packed as igemm panels per position; nothing when a channel's
// sum could reach 2^29 (conv_nhwc_s8_winograd.h: the bound that keeps the
// division by 4 exact), where the direct sums run.
void PrepareWinogradS8(NhwcState& s, const uint8_t* src, uint8_t mask,
                       const WinogradS8Transforms* transforms, const IgemmS8Kernel* gemm,
                       const IgemmS8Kernel* gemm_alt) {
  for (int64_t oc = 0; oc < s.m; ++oc) {
    int64_t abs_sum = 0;
    for (int64_t i = 0; i < s.kdim; ++i) {
      const int32_t w = int8_t(src[oc * s.kdim + i] ^ mask);
      abs_sum += w < 0 ? -w : w;
    }
    if (255 * abs_sum >= (int64_t(1) << 29)) return;
  }
  // The panels' layout: the kernel's that runs the GEMMs (AVX2: 16 channels
  // of 16-bit weights by k pairs), or the one transforms->gemm reads (NEON:
  // [k/4][kWinogradNr][4] int16).
  const IgemmS8Kernel k =
      transforms->gemm ? IgemmS8Kernel{"winograd", 1, kWinogradNr, 2, 2, nullptr, 4} : *gemm;
  if (k.wbytes != 2) return;
  s.wino_nr = k.nr;
  s.wino_panels = (s.m + k.nr - 1) / k.nr;
  s.wino_cp = RoundUpTo(s.cg, 4);
  const int64_t kc4 = s.wino_cp / 4;
  s.wino_panel_bytes = IgemmPanelElems(k, 1, kc4) * k.wbytes;
  s.wino_w.assign(size_t(16 * s.wino_panels * s.wino_panel_bytes), 0);
  for (int64_t oc = 0; oc < s.m; ++oc)
    for (int64_t ci = 0; ci < s.cg; ++ci) {
      int32_t g[3][3];
      for (int i = 0; i < 9; ++i) g[i / 3][i % 3] = int8_t(src[(oc * s.cg + ci) * 9 + i] ^ mask);
      int32_t t[4][3];  // G' g
      for (int j = 0; j < 3; ++j) {
        t[0][j] = 2 * g[0][j];
        t[1][j] = g[0][j] + g[1][j] + g[2][j];
        t[2][j] = g[0][j] - g[1][j] + g[2][j];
        t[3][j] = 2 * g[2][j];
      }
      for (int i = 0; i < 4; ++i) {
        const int32_t u[4] = {2 * t[i][0], t[i][0] + t[i][1] + t[i][2], t[i][0] - t[i][1] + t[i][2],
                              2 * t[i][2]};
        for (int j = 0; j < 4; ++j) {
          uint8_t* dst = s.wino_w.data() +
                         (int64_t(i * 4 + j) * s.wino_panels + oc / k.nr) * s.wino_panel_bytes +
                         IgemmPackedIndex(k, kc4, 0, ci, oc % k.nr) * k.wbytes;
          const uint16_t bits = uint16_t(int16_t(u[j]));  // |u| <= 9 * 128
          dst[0] = uint8_t(bits);
          dst[1] = uint8_t(bits >> 8);
        }
      }
    }
  s.wino = transforms;
  s.wino_ik[0] = gemm;
  if (!transforms->gemm && gemm_alt && gemm_alt->nr == k.nr && gemm_alt->kgroup == k.kgroup &&
      gemm_alt->wbytes == k.wbytes)
    s.wino_ik[1] = gemm_alt;
}
#endif

}  // namespace

std::shared_ptr<void> PrepareQConvNhwcS8(const KernelConfig& kc, const Tensor& w, int64_t group,
                                         int64_t dilation_w, bool winograd) {
  if ((w.rank() != 3 && w.rank() != 4) || !w.shape_known() || !w.data || group <= 0 ||
      !Is8BitType(w.dtype))
    return nullptr;
  auto s = std::make_shared<NhwcState>();
  s->w_dtype = w.dtype;
  s->m = w.shape[0];
  s->cg = w.shape[1];
  s->group = group;
  s->kh = w.rank() == 4 ? w.shape[2] : 1;
  s->kw = w.shape.back();
  s->taps = s->kh * s->kw;
  s->kdim = s->cg * s->taps;
  s->kc4 = (s->cg + 3) / 4;
  if (s->m <= 0 || s->kdim <= 0 || s->m % group) return nullptr;
  if (s->cg == 1 && group == s->m) return nullptr;  // depthwise: dwconv_nhwc_s8.h
  s->mg = s->m / group;
  std::vector<const IgemmS8Kernel*> amx = Family(kc.igemm_s8, true);
  std::vector<const IgemmS8Kernel*> rest = Family(kc.igemm_s8, false);
  // AMX: taps of 32-63 channels read whole kernel rows instead (kw * cg
  // contiguous bytes in the padded copy) where those fill their 64-byte
  // blocks well. Measured per convolution against the zmm kernels (Xeon,
  // consecutive pairs): 3x3 32->128 at 28x28 1.37x, 48->192 1.53x, 5x5
  // 32->96 at 27x27 2.08x; 16 channels 0.94-0.98x (the copies dominate).
  const bool amx_rows = !amx.empty() && group == 1 && s->kw > 1 && dilation_w == 1 && s->cg >= 32 &&
                        s->cg < 64 && 4 * s->kw * s->cg >= 3 * RoundUpTo(s->kw * s->cg, 64);
  const bool row_taps_shape = group == 1 && s->kw > 1 && dilation_w == 1 &&
                              ((s->cg % 4 != 0 && s->kw * s->cg <= 64) || amx_rows);
  s->ik = PickKernel(!amx.empty() && (rest.empty() || AmxPaysOff(*s, row_taps_shape)) ? amx : rest,
                     s->mg);
  if (!s->ik) s->gk = kc.gemm_s8;
  if (!s->ik && !s->gk) return nullptr;
  // A few input channels (first layers: RGB) would fill a dword per tap with
  // padding and spend a pointer per tap; a kernel row of them is contiguous
  // in a padded copy of x, so one tap reads kw * cg channels instead.
  s->tap_c = s->cg;
  s->ind_taps = s->taps;
  if (s->ik && row_taps_shape) {
    s->row_taps = true;
    s->tap_c = s->kw * s->cg;
    s->kc4 = (s->tap_c + 3) / 4;
    s->ind_taps = s->kh;
    const int64_t block = 4 * s->ik->kc4_align;
    s->cols_k = RoundUpTo(s->kh * s->tap_c, block);
    s->im2col = s->ik->kc4_align > 1 && s->ik->abytes == 1 && s->kh > 1 &&
                s->cols_k < s->kh * RoundUpTo(s->tap_c, block);
  }
  // im2col: one tap of cols_k / 4 k-groups.
  const int64_t taps_packed = s->im2col ? 1 : s->ind_taps;
  const int64_t kc4_packed = s->im2col ? s->cols_k / 4 : s->kc4;
  const uint8_t mask = w.dtype == DType::kUInt8 ? 0x80 : 0;  // to s8
  const uint8_t* src = w.ptr<uint8_t>();                     // [m][cg][taps]
  if (s->ik) {
    const IgemmS8Kernel& k = *s->ik;
    const int wb = k.wbytes;
    s->panels = (s->mg + k.nr - 1) / k.nr;
    s->panel_bytes = IgemmPanelElems(k, taps_packed, kc4_packed) * wb;
    s->packed_w.assign(size_t(s->group * s->panels * s->panel_bytes), 0);
    for (int64_t gr = 0; gr < group; ++gr)
      for (int64_t pn = 0; pn < s->panels; ++pn) {
        uint8_t* panel = s->packed_w.data() + (gr * s->panels + pn) * s->panel_bytes;
        for (int64_t t = 0; t < s->ind_taps; ++t)
          for (int j = 0; j < k.nr; ++j)
            for (int64_t kk = 0; kk < s->tap_c; ++kk) {
              const int64_t ch = pn * k.nr + j;
              if (ch >= s->mg) continue;
              // Row taps: kk runs over (kx, channel) of kernel row t.
              const int64_t ci = kk % s->cg, tap = s->row_taps ? t * s->kw + kk / s->cg : t;
              const int16_t v =
                  int8_t(src[((gr * s->mg + ch) * s->cg + ci) * s->taps + tap] ^ mask);
              uint8_t* dst =
                  panel + (s->im2col ? IgemmPackedIndex(k, kc4_packed, 0, t * s->tap_c + kk, j)
                                     : IgemmPackedIndex(k, s->kc4, t, kk, j)) *
                              wb;
              dst[0] = uint8_t(v);
              if (wb == 2) dst[1] = uint8_t(uint16_t(v) >> 8);
            }
      }
  } else {
    // [kdim][mg] per group, k = tap * cg + channel: the order of NHWC im2col rows.
    s->group_bytes = RoundUpTo(PackedBytes(s->mg, s->kdim, s->gk->nr), 64);
    s->packed_w.assign(size_t(s->group * s->group_bytes), 0);
    std::vector<uint8_t> tmp(size_t(s->kdim * s->mg));
    for (int64_t gr = 0; gr < group; ++gr) {
      for (int64_t j = 0; j < s->mg; ++j)
        for (int64_t ci = 0; ci < s->cg; ++ci)
          for (int64_t t = 0; t < s->taps; ++t)
            tmp[size_t((t * s->cg + ci) * s->mg + j)] =
                src[((gr * s->mg + j) * s->cg + ci) * s->taps + t];
      s->gk->pack_right(tmp.data(), s->mg, s->kdim, s->mg, mask,
                        s->packed_w.data() + gr * s->group_bytes);
    }
  }
  s->wsum.assign(size_t(s->m), 0);
  for (int64_t oc = 0; oc < s->m; ++oc) {
    int64_t sum = 0;
    for (int64_t i = 0; i < s->kdim; ++i) sum += int8_t(src[oc * s->kdim + i] ^ mask);
    s->wsum[size_t(oc)] = WrapInt32(sum);
  }
  // Winograd where the microkernel multiplies 16-bit values (AVX2's
  // vpmaddwd: 2 k per lane, Armv8.0's smull; VNNI's and sdot's 4 make the
  // direct sums cheaper than the transforms), for layers up to 512 -> 512
  // (C + M <= 1024: on Zen 3 512->512 at 28x28 24.6 -> 13 ms and at 14x14
  // 6.1 -> 4.0 ms, at 7x7 1.70 -> 1.24 ms; wider layers were not measured).
  const WinogradS8Transforms* transforms = nullptr;
  [[maybe_unused]] const IgemmS8Kernel *wino_gemm = s->ik, *wino_alt = nullptr;
#if defined(__x86_64__)
  if (s->ik && s->ik->run && std::strcmp(s->ik->name, "avx2") == 0) {
    transforms = &kWinogradS8Avx2;
    wino_gemm = &kIgemmS8Avx2Winograd[0];
    wino_alt = &kIgemmS8Avx2Winograd[1];
  }
#elif defined(__aarch64__)
  if (s->ik == kIgemmS8Neon) transforms = &kWinogradS8Neon;
#endif
  if (winograd && transforms && group == 1 && s->kh == 3 && s->kw == 3 && !s->row_taps &&
      dilation_w == 1 && s->cg >= 16 && s->m >= 16 && s->cg + s->m <= 1024) {
#if defined(__x86_64__) || defined(__aarch64__)
    PrepareWinogradS8(*s, src, mask, transforms, wino_gemm, wino_alt);
#endif
  }
  return s;
}

namespace {

// Checks that the prepared kernels cover the call and sets its geometry;
// false sends the op to its reference kernel. The output's dtype and
// epilogue are checked only with `check_output` (the scratch request is made
// without the epilogue's arrays).
bool CallGeometry(const NhwcState& s, const QConvCall& c, bool check_output, Geometry* g) {
  const Tensor& x = *c.x;
  const Tensor& y = *c.y;
  const bool float_out = c.dq_mult != nullptr;
  if ((x.rank() != 3 && x.rank() != 4) || !Is8BitType(x.dtype)) return false;
  if (check_output && !(float_out ? y.dtype == DType::kFloat32 && c.dq_bias : Is8BitType(y.dtype)))
    return false;
  if (float_out && !s.ik) return false;  // the packed GEMM has no float epilogue
  if (c.kh != s.kh || c.kw != s.kw || (x.rank() == 3 && c.ih != 1)) return false;
  if (s.row_taps && c.dw != 1) return false;  // prepared for another dilation
  // The row-tap copy is as wide as the padded row: huge pads take the
  // reference kernel instead (padded_plane.h).
  if (s.row_taps && !PaddedPlaneFits(c.ih, PaddedWidth(s, c), c.ih * c.iw, c.oh * c.ow, s.taps))
    return false;
  g->n = x.shape[0];
  g->c = x.shape.back();
  if (g->c != s.cg * s.group || x.numel() != g->n * c.ih * c.iw * g->c ||
      y.numel() != g->n * c.oh * c.ow * s.m)
    return false;
  g->rows = g->n * c.oh * c.ow;
  g->direct = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.pad_top == 0 &&
              c.pad_left == 0 && c.oh == c.ih && c.ow == c.iw;
  return true;
}

}  // namespace

const char* QConvNhwcS8Variant(const void* state) {
  const NhwcState& s = *static_cast<const NhwcState*>(state);
  return s.ik ? s.ik->name : "gemm";
}

bool QConvNhwcS8Winograd(const void* state) {
  return static_cast<const NhwcState*>(state)->wino != nullptr;
}

ScratchNeeds QConvNhwcS8Scratch(const void* state, const QConvCall& c) {
  const NhwcState& s = *static_cast<const NhwcState*>(state);
  Geometry g;
  ScratchNeeds needs;
  if (!CallGeometry(s, c, /*check_output=*/false, &g) || g.rows == 0) return needs;
  NhwcPlan p;
  PlanCall(s, c, g, &p);
  needs.run = p.layout.total();
  needs.kept = p.kept;
  return needs;
}

bool RunQConvNhwcS8(void* state, const QConvCall& c) {
  NhwcState& s = *static_cast<NhwcState*>(state);
  Geometry g;
  if (!CallGeometry(s, c, /*check_output=*/true, &g)) return false;
  if (g.rows == 0) return true;  // empty output
  const Tensor& x = *c.x;
  const bool float_out = c.dq_mult != nullptr;
  const int32_t xzp_u = x.dtype == DType::kInt8 ? c.x_zp + 128 : c.x_zp;
  // Float output: only the zero-point terms are folded (no int32 bias).
  FoldChannels(s.m, s.kdim, float_out ? nullptr : c.bias, s.wsum.data(), xzp_u, c.w_zp, s.w_dtype,
               c.x_scale, c.w_scale, float_out ? 1.f : c.y_scale, &s.cp);
  NhwcPlan p;
  PlanCall(s, c, g, &p);
  const ScratchRegion region(c.scratch, p.layout.total());
  auto part = [&](size_t offset) { return offset == kNoPart ? nullptr : region.data() + offset; };
  const bool wide_copy = s.ik && s.ik->abytes == 2;
  s.wide = wide_copy ? reinterpret_cast<uint16_t*>(part(p.copy)) : nullptr;
  s.padded = wide_copy ? nullptr : part(p.copy);
  s.chunk_wide = reinterpret_cast<uint16_t*>(part(p.chunk_wide));
  s.chunk_ind = reinterpret_cast<const uint8_t**>(part(p.chunk_ind));
  s.chunk_cols = part(p.chunk_cols);
  s.xsum = reinterpret_cast<int32_t*>(part(p.xsum));
  s.scratch = part(p.gemm);
  s.row_sums = reinterpret_cast<int32_t*>(part(p.row_sums));
  s.wino_scratch = part(p.wino_part);
  if (p.wino) return RunWinograd(s, c, g, p);
  return s.ik ? RunIgemm(s, c, g, p) : RunGemm(s, c, g, p);
}

}  // namespace kernels
}  // namespace qfold
