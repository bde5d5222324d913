// Channels-last fp32 convolution driver (conv_f32_nhwc.h) and the portable
// microkernels, used where no ISA-specific variant exists (x86 without
// AVX2). Threads split the output into tiles of whole output rows
// (depthwise) or mr pixels (GEMM), each tile computed by the same kernel
// calls whatever the thread count.
#include "kernels/conv_f32_nhwc.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/conv_f32_nhwc_winograd.h"
#include "kernels/igemm_fp16.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const ConvNhwcF32Kernels kConvNhwcF32Avx2;
extern const ConvNhwcF32Kernels kConvNhwcF32Avx512F;
#endif
#if defined(__aarch64__)
extern const ConvNhwcF32Kernels kConvNhwcF32Neon;
#endif
// QFOLD_HAVE_AMX: a real (not emulated) x86 build, which compiles both the
// AMX and the AVX-512 BF16 files.
#if defined(QFOLD_HAVE_AMX)
extern const ConvNhwcBf16Kernels kConvNhwcBf16Amx;
extern const ConvNhwcBf16Kernels kConvNhwcBf16Avx512;
#endif

namespace {

inline float Activate(float v, F32Act act, float lo, float hi) {
  if (act == F32Act::kRelu) return v > 0.f ? v : 0.f;
  if (act == F32Act::kClamp) return v < lo ? lo : (v > hi ? hi : v);
  return v;
}

constexpr int kPortableMr = 4, kPortableNr = 8;

void IgemmPortable(const IgemmF32Args& p) {
  float acc[kPortableMr][kPortableNr] = {};
  for (int64_t t = 0; t < p.taps; ++t) {
    const float* w = p.w + t * p.c * kPortableNr;
    for (int r = 0; r < kPortableMr; ++r) {
      const float* a = p.a[t * kPortableMr + r];
      for (int64_t ch = 0; ch < p.c; ++ch)
        for (int j = 0; j < kPortableNr; ++j) acc[r][j] += a[ch] * w[ch * kPortableNr + j];
    }
  }
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t j = 0; j < p.cols; ++j) {
      float v = acc[r][j] + (p.bias ? p.bias[j] : 0.f);
      if (p.residual) v += p.residual[r * p.ldy + j];
      p.y[r * p.ldy + j] = Activate(v, p.act, p.lo, p.hi);
    }
}

void DwPortable(const DwNhwcF32Args& p) {
  std::vector<float> acc(size_t(p.c));
  for (int64_t px = 0; px < p.pixels; ++px) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t t = 0; t < p.taps; ++t) {
      const float* a = p.a_step ? p.a[t] + px * p.a_step : p.a[px * p.taps + t];
      const float* w = p.w + t * p.c;
      for (int64_t ch = 0; ch < p.c; ++ch) acc[size_t(ch)] += a[ch] * w[ch];
    }
    float* y = p.y + px * p.ldy;
    for (int64_t ch = 0; ch < p.c; ++ch)
      y[ch] = Activate(acc[size_t(ch)] + (p.bias ? p.bias[ch] : 0.f), p.act, p.lo, p.hi);
  }
}

const ConvNhwcF32Kernels kConvNhwcF32Portable = {"portable",
                                                 kPortableMr,
                                                 kPortableNr,
                                                 IgemmPortable,
                                                 DwPortable,
                                                 WinogradInput<WinogradLane, 2>,
                                                 WinogradOutput<WinogradLane, 2>,
                                                 nullptr,
                                                 nullptr,
                                                 WinogradInput<WinogradLane, 4>,
                                                 WinogradOutput<WinogradLane, 4>};

struct ConvNhwcF32State {
  const ConvNhwcF32Kernels* k = nullptr;
  int64_t m = 0, cg = 0, group = 1, kh = 1, kw = 1;
  bool depthwise = false;  // one input and one output channel per group
  // GEMM: per group, ceil(m / group / nr) panels of [kh * kw * cg][nr];
  // depthwise: [kh * kw][m].
  AlignedVector<float> w;
  int64_t group_stride = 0;  // floats per group in w
  // Winograd F(t x t, 3x3) filters, t = winograd_tile (WinogradTile; 0:
  // none): per transform position xi of the (t + 2)^2, panels of [cg][nr]
  // as w's.
  AlignedVector<float> winograd_u;
  int winograd_tile = 0;
  // bf16 mode (set instead of w): ceil(m / 32) panels of [taps][kc / 2][32][2],
  // kc = cg rounded up to 32.
  // Kernel rows (PlaneBf16Args): [panel][ky][kc / 2][32][2], kc = kw * cg
  // rounded up to 32.
  const ConvNhwcBf16Kernels* bf16 = nullptr;
  bool bf16_rows = false;
  // Kernel rows of fewer than 16 values (an RGB stem's 3x3: 9): whole
  // windows copied into im2col rows of kc = kh * kw * cg rounded up to 32
  // per block of pixels (27 of 32 values used, against 9 of 32 per row),
  // packed [panel][1][kc / 2][32][2].
  bool bf16_im2col = false;
  // bf16 mode, depthwise: the fp32 kernels, y rounded to bf16 per output row
  // when the session stores it so (ConvNhwcF32Call::y_bf16).
  const ConvNhwcBf16Kernels* dw_bf16 = nullptr;
  int64_t kc = 0;
  AlignedVector<uint16_t> wb;
  // fp16 mode (igemm_fp16.h): its own packed weights, set instead of w.
  std::shared_ptr<void> fp16;
};

// The cost model, at prepare: the Winograd tile for this layer, 0 for the
// direct sums. `pixels` is oh * ow of the shapes then (0: unknown).
// F(2x2, 3x3) does 16 / 36 of the direct multiplications, but its transforms
// read and write every input and output value about four times and its 16
// GEMMs stream 16 / 9 as many filter values: it pays once the GEMMs are long
// enough in both channel counts (C >= 32, M >= 16). Beyond C + M = 768 each
// block of tiles streams many MiB of transformed filters, which lost on Zen
// 3's smaller L2 at 7x7 (3.1 -> 3.8 ms for 512 -> 512); on Zen 5, inside
// the models, it is still even at 7x7 (ResNet-50's last stage) but gains
// from 14x14 on (VGG-19's 512 -> 512 at 14x14 3.7 -> 2.3 ms with F(2x2), at
// 28x28 14.6 -> 6.2 ms with F(4x4)), so such layers take it from 14x14.
// F(4x4, 3x3) does 36 / 64 of F(2x2)'s multiplications for about as many
// transform operations per output, but its filters are 36 / 16 as large and
// a model's run reads each layer's from memory once at least: it pays with
// enough 4x4 tiles per image to use them on, or while they stay small (at
// most 1 MiB). Measured on Zen 5, 1 thread, inside the models: ResNet-50's
// 64 -> 64 at 56x56 and 128 -> 128 at 28x28 0.52 -> 0.36 and 0.46 -> 0.32 ms,
// but 256 -> 256 at 14x14 (16 tiles, 9.4 MiB of filters) 0.50 -> 0.54.
int WinogradTile(const ConvNhwcF32Kernels& k, int64_t c, int64_t m, int64_t pixels) {
  if (pixels < 0 || c < 32 || m < 16 || (c + m > 768 && pixels < 14 * 14)) return 0;
  const bool f4 = pixels / 16 >= 32 || 36 * c * m * int64_t(sizeof(float)) <= (int64_t(1) << 20);
  return k.winograd4_in && k.winograd4_out && pixels > 0 && f4 ? 4 : 2;
}

// A call's scratch: a row of zeros for taps in the padding (read by every
// thread), then per thread the tap pointers of its tiles and Winograd's
// transformed blocks.
struct CallScratch {
  int64_t zeros = 0, ptrs = 0, floats = 0;  // counts; ptrs and floats per thread
  int64_t plane = 0;                        // floats of a padded copy of x (shared)
  size_t Slice() const {
    ScratchLayout l;
    l.Add(size_t(ptrs) * sizeof(const float*));
    l.Add(size_t(floats) * sizeof(float));
    return l.total();
  }
  size_t Shared() const {
    ScratchLayout l;
    l.Add(size_t(zeros) * sizeof(float));
    l.Add(size_t(plane) * sizeof(float));
    return l.total();
  }
  size_t Bytes(int threads) const {
    ScratchLayout l;
    l.Add(Shared());
    l.Add(Slice() * size_t(threads));
    return l.total();
  }
};

// The call's parts in `region`; the zeros are written here, every run (other
// ops use the same memory in between).
class CallParts {
 public:
  CallParts(const ScratchSpan& span, const CallScratch& cs, int threads)
      : cs_(cs), region_(span, cs.Bytes(threads)) {
    ScratchLayout l;
    l.Add(size_t(cs.zeros) * sizeof(float));
    plane_at_ = l.Add(size_t(cs.plane) * sizeof(float));
    slices_ = region_.data() + cs.Shared();
    float* z = region_.at<float>(0);
    std::fill(z, z + cs.zeros, 0.f);
  }
  const float* zeros() const { return region_.at<float>(0); }
  float* plane() const { return region_.at<float>(plane_at_); }
  const float** ptrs(int slot) const {
    return reinterpret_cast<const float**>(slices_ + size_t(slot) * cs_.Slice());
  }
  float* floats(int slot) const {
    const size_t at = (size_t(cs_.ptrs) * sizeof(const float*) + 63) / 64 * 64;
    return reinterpret_cast<float*>(slices_ + size_t(slot) * cs_.Slice() + at);
  }

 private:
  CallScratch cs_;
  ScratchRegion region_;
  size_t plane_at_ = 0;
  uint8_t* slices_ = nullptr;
};

// Pointer to the input values tap (ky, kx) of output pixel (oy, ox) reads,
// or `zeros` in the padding.
inline const float* TapPointer(const ConvNhwcF32Call& c, const float* xb, int64_t oy, int64_t ox,
                               int64_t ky, int64_t kx, const float* zeros) {
  const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
  const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
  if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) return zeros;
  return xb + (iy * c.iw + ix) * c.c;
}

// Output columns [*lo, *hi) whose windows lie inside the input's width.
void InteriorColumns(const ConvNhwcF32Call& c, int64_t kw, int64_t* lo, int64_t* hi) {
  *lo = std::min(c.ow, (c.pad_left + c.sw - 1) / c.sw);
  const int64_t last_ix = c.iw - 1 + c.pad_left - (kw - 1) * c.dw;
  *hi = std::max(*lo, std::min(c.ow, last_ix < 0 ? 0 : last_ix / c.sw + 1));
}

// The padded plane of the row-tap form: every kernel row's kw * c values
// side by side, the padding written as zeros.
void PlaneSize(const ConvNhwcF32State& s, const ConvNhwcF32Call& c, int64_t* ph, int64_t* pw) {
  *ph = std::max(c.ih + c.pad_top, (c.oh - 1) * c.sh + (s.kh - 1) * c.dh + 1);
  *pw = std::max(c.iw + c.pad_left, (c.ow - 1) * c.sw + s.kw);
}

// Convolutions of few input channels with padding (stems, a 1-channel
// spectrogram or text-line image) read a zero-padded copy of x, so every
// window row is kw * c consecutive floats and every tile runs kh row taps
// whose pointers cost an add per (pixel, row). Reading x in place, tiles
// that touch the padding or wrap an output row take a checked pointer per
// (pixel, tap): a 1 -> 16 channel 3x3 conv on 32x100 spent 1.7x its kernel
// time building them (38 -> 24 us with the plane; 16 -> 32 channels on 16x50,
// 52 -> 49 us). From 16 channels per tap the copy pays only while it stays
// in L2 (wide images have few edge tiles); from 32 the FMAs dominate.
bool UsePlane(const ConvNhwcF32State& s, const ConvNhwcF32Call& c, int64_t* ph, int64_t* pw) {
  if (s.group != 1 || s.kw == 1 || c.dw != 1 || s.cg >= 32) return false;
  PlaneSize(s, c, ph, pw);
  const bool padded = c.pad_top > 0 || c.pad_left > 0 || *ph > c.ih || *pw > c.iw;
  const int64_t floats = c.n * *ph * *pw * s.cg;
  return padded && floats <= (s.cg < 16 ? int64_t(1) << 22 : int64_t(1) << 17);
}

// `width` pixels of C planes (`plane` floats apart) interleaved into dst
// [width][C]; C a constant, so the compiler interleaves vectors.
template <int C>
void InterleavePlanes(const float* src, int64_t plane, int64_t width, float* dst) {
  for (int64_t i = 0; i < width; ++i)
    for (int ch = 0; ch < C; ++ch) dst[i * C + ch] = src[ch * plane + i];
}

void InterleaveRow(const ConvNhwcF32Kernels& k, const float* src, int64_t plane, int64_t c,
                   int64_t width, float* dst) {
  if (c == 3 && k.interleave3) return k.interleave3(src, plane, width, dst);
  switch (c) {
    case 1:
      return InterleavePlanes<1>(src, plane, width, dst);
    case 2:
      return InterleavePlanes<2>(src, plane, width, dst);
    case 3:
      return InterleavePlanes<3>(src, plane, width, dst);
    case 4:
      return InterleavePlanes<4>(src, plane, width, dst);
    default:
      for (int64_t i = 0; i < width; ++i)
        for (int64_t ch = 0; ch < c; ++ch) dst[i * c + ch] = src[ch * plane + i];
  }
}

// x into the plane (`ph` x `pw` pixels per image, x at (pad_top, pad_left)),
// zeros around it; from channels-first x (x_planar) the rows are interleaved
// on the way, which saves the separate transpose of an RGB input.
void FillPlane(const ConvNhwcF32Kernels& k, const ConvNhwcF32Call& c, int64_t ph, int64_t pw,
               float* plane, ThreadPool* pool) {
  const int64_t row = pw * c.c, left = c.pad_left * c.c;
  const int64_t width = std::min(c.iw, pw - c.pad_left), copy = width * c.c;
  ParallelFor(pool, c.n * ph, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / ph, py = r % ph;
      float* dst = plane + r * row;
      const int64_t iy = py - c.pad_top;
      if (iy < 0 || iy >= c.ih) {
        std::fill(dst, dst + row, 0.f);
        continue;
      }
      std::fill(dst, dst + left, 0.f);
      if (c.x_planar)
        InterleaveRow(k, c.x + (b * c.c * c.ih + iy) * c.iw, c.ih * c.iw, c.c, width, dst + left);
      else
        std::memcpy(dst + left, c.x + (b * c.ih + iy) * c.iw * c.c, size_t(copy) * sizeof(float));
      std::fill(dst + left + copy, dst + row, 0.f);
    }
  });
}

// Stem runs (StemRunF32Args) on the plane: kernel rows of 1 or 3 channels
// (a text line's 3x3 from one channel: 27 -> 12 us; see conv_f32_nhwc_stem.h).
// Without a residual: a run's last block recomputes pixels already stored.
bool UseStemRuns(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return s.k->stem_run && !c.residual && StemRunSupports(s.kw, c.sw, s.cg);
}

// Without padding x is its own plane, so such stems take the stem runs too
// (SqueezeNet 1.1's unpadded 3x3 s2 RGB stem to 64 channels at 111x111 took
// the indirect GEMM: 260 -> 205 us).
bool XIsPlane(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  if (s.group != 1 || s.kw == 1 || c.dw != 1 || c.pad_top > 0 || c.pad_left > 0) return false;
  int64_t ph = 0, pw = 0;
  PlaneSize(s, c, &ph, &pw);
  return ph == c.ih && pw == c.iw;
}

// Work unit: one output row, every panel.
void RunStem(const ConvNhwcF32State& s, const ConvNhwcF32Call& c, int64_t ph, int64_t pw,
             const float* plane, ThreadPool* pool) {
  const ConvNhwcF32Kernels& k = *s.k;
  const int64_t panels = (s.m + k.nr - 1) / k.nr, panel_size = s.kh * s.kw * s.cg * k.nr;
  auto work = [&](int64_t begin, int64_t end, int) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / c.oh, oy = u % c.oh;
      float* const y = c.y + (b * c.oh + oy) * c.ow * s.m;
      StemRunF32Args a;
      a.x = plane + (b * ph + oy * c.sh) * pw * s.cg;
      a.x_row = c.dh * pw * s.cg;
      a.kh = s.kh;
      a.kw = s.kw;
      a.sw = c.sw;
      a.c = s.cg;
      a.pixels = c.ow;
      a.nr = k.nr;
      a.act = c.act;
      a.lo = c.lo;
      a.hi = c.hi;
      a.ldy = s.m;
      for (int64_t pn = 0; pn < panels; ++pn) {
        a.w = s.w.data() + pn * panel_size;
        a.cols = std::min<int64_t>(k.nr, s.m - pn * k.nr);
        a.bias = c.bias ? c.bias + pn * k.nr : nullptr;
        a.y = y + pn * k.nr;
        k.stem_run(a);
      }
      if (c.post) c.post->Apply(y, c.ow * s.m);
    }
  };
  ParallelFor(pool, c.n * c.oh, work);
}

// Work unit: a block of tiles of mr pixels. Within it the loop runs over
// weight panels outside and tiles inside, so one panel ([K][nr], 30 KiB for
// K = 480) stays in L1 while the block's pixels pass over it, instead of
// every tile streaming all M x K weights from L2 or beyond.
// Row taps: without groups or dilation, the kw taps of a window row are kw * c
// consecutive floats when the row lies inside the width, so a tile whose
// pixels all have such windows runs kh taps of kw * c channels: the same sums
// in the same order (tap-major, then channel), with the kernel's inner loop
// kw times longer (an RGB stem's 3 channels per tap left it mostly overhead).
// Tiles per work unit of RunIgemm (and RunBf16, whose tiles are 32 pixels:
// `most` 4): up to `most`, fewer when that leaves threads without work (the
// sums do not depend on the blocking). One thread takes up to 2 * most tiles
// in one block: a 7x7 output (9 tiles) then reads its weights once, not once
// per block (4 MiB for a 1x1 512 -> 2048, beyond L2).
// RunIgemm's blocks hold at most this many tiles (2 * most).
constexpr int64_t kMaxBlockTiles = 16;
int64_t IgemmBlock(const ConvNhwcF32Call& c, int64_t tiles, int64_t most = 8) {
  const int64_t threads = NumThreads(c.pool);
  return threads == 1 && tiles * c.n <= 2 * most
             ? tiles
             : std::max<int64_t>(1, std::min<int64_t>(most, tiles * c.n / (4 * threads)));
}

ThreadPool* IgemmPool(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * c.oh * c.ow * s.m * s.kh * s.kw * s.cg);
}

// Panel chunks of RunIgemm's blocks where the weights far outweigh x at 2+
// threads: one block of all of an image's tiles, the threads splitting its
// panels, so each weight is read once, as at 1 thread (ResNet-50's 7x7
// stage, 9 tiles and 4-9 MB of weights: blocks of one tile each streamed
// all of them, 2 threads ran those layers 1.3-1.45x faster than 1). Not with
// an activation after the epilogue (c.post runs on a block's outputs once
// all its panels are done) nor with groups, nor for more tiles than a
// block holds.
int64_t IgemmPanelChunks(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const int64_t threads = NumThreads(IgemmPool(s, c));
  const int64_t tiles = (c.oh * c.ow + s.k->mr - 1) / s.k->mr;
  if (threads == 1 || s.group != 1 || c.post || tiles > kMaxBlockTiles) return 1;
  const int64_t weights = s.m * s.kh * s.kw * s.cg, x = c.n * c.ih * c.iw * c.c;
  if (weights < 4 * x) return 1;
  return std::min<int64_t>((s.m + s.k->nr - 1) / s.k->nr, 2 * threads);
}

int64_t IgemmF32Block(const ConvNhwcF32State& s, const ConvNhwcF32Call& c, int64_t tiles) {
  return IgemmPanelChunks(s, c) > 1 ? tiles : IgemmBlock(c, tiles);
}

CallScratch IgemmScratch(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const int64_t tiles = (c.oh * c.ow + s.k->mr - 1) / s.k->mr;
  int64_t ph = 0, pw = 0;
  const int64_t plane = UsePlane(s, c, &ph, &pw) ? c.n * ph * pw * s.cg : 0;
  return {s.kw * s.cg, IgemmF32Block(s, c, tiles) * s.kh * s.kw * s.k->mr, 0, plane};
}

void RunIgemm(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcF32Kernels& k = *s.k;
  const int64_t pixels = c.oh * c.ow, taps = s.kh * s.kw, mg = s.m / s.group;
  const int64_t panels = (mg + k.nr - 1) / k.nr, panel_size = taps * s.cg * k.nr;
  const int64_t tiles = (pixels + k.mr - 1) / k.mr;
  const bool row_taps = s.group == 1 && s.kw > 1 && c.dw == 1;
  int64_t in_lo = 0, in_hi = 0;
  if (row_taps) InteriorColumns(c, s.kw, &in_lo, &in_hi);
  int64_t ph = 0, pw = 0;
  const bool use_plane = UsePlane(s, c, &ph, &pw);
  const int64_t chunks = IgemmPanelChunks(s, c), block = IgemmF32Block(s, c, tiles);
  const int64_t blocks = (tiles + block - 1) / block, units = c.n * blocks;
  ThreadPool* const pool = IgemmPool(s, c);
  const CallParts parts(c.scratch, IgemmScratch(s, c), NumThreads(pool));
  if (use_plane) FillPlane(k, c, ph, pw, parts.plane(), pool);
  if (use_plane && UseStemRuns(s, c)) return RunStem(s, c, ph, pw, parts.plane(), pool);
  if (!use_plane && UseStemRuns(s, c) && XIsPlane(s, c))
    return RunStem(s, c, c.ih, c.iw, c.x, pool);
  const int64_t tile_ptrs = taps * k.mr;
  // A 1x1 whose every output pixel reads inside x (no pads, none past its
  // end) steps one pointer per pixel: at 16 channels, checking and placing
  // each tap took as long as the tile's FMAs.
  const bool inside_1x1 = taps == 1 && c.pad_top == 0 && c.pad_left == 0 &&
                          (c.oh - 1) * c.sh < c.ih && (c.ow - 1) * c.sw < c.iw;
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const float** ptrs = parts.ptrs(slot);
    const float* zeros = parts.zeros();
    bool merged[kMaxBlockTiles];
    // Work unit w: panel chunk w / units of block w % units (each thread's
    // range covers few chunks).
    for (int64_t w = begin; w < end; ++w) {
      const int64_t u = w % units, chunk = w / units;
      const int64_t pn0 = panels * chunk / chunks, pn1 = panels * (chunk + 1) / chunks;
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(tiles, t0 + block);
      const float* xb = c.x + b * c.ih * c.iw * c.c;
      float* yb = c.y + b * pixels * s.m;
      const float* rb = c.residual ? c.residual + b * pixels * s.m : nullptr;
      for (int64_t g = 0; g < s.group; ++g) {
        const float* xg = xb + g * s.cg;
        for (int64_t t = t0; g == 0 && t < t1; ++t) {
          const int64_t p0 = t * k.mr, rows = std::min<int64_t>(k.mr, pixels - p0);
          const float** tp = ptrs + (t - t0) * tile_ptrs;
          merged[t - t0] = false;
          if (inside_1x1) {
            // Rows past the end repeat the last pixel; the kernel does not store them.
            int64_t oy = p0 / c.ow, ox = p0 % c.ow;
            const float* p = xg + (oy * c.sh * c.iw + ox * c.sw) * c.c;
            for (int64_t r = 0; r < k.mr; ++r) {
              tp[r] = p;
              if (r + 1 >= rows) continue;
              if (++ox < c.ow) {
                p += c.sw * c.c;
              } else {
                ox = 0;
                p = xg + ++oy * c.sh * c.iw * c.c;
              }
            }
            continue;
          }
          if (use_plane) {
            // Row 0's pointers stepped pixel by pixel, the other kernel rows
            // a fixed distance below them.
            const float* const pb = parts.plane() + b * ph * pw * c.c;
            const int64_t step = c.sw * c.c, row_step = c.dh * pw * c.c;
            int64_t oy = p0 / c.ow, ox = p0 % c.ow;
            const float* p = pb + (oy * c.sh * pw + ox * c.sw) * c.c;
            for (int64_t r = 0; r < k.mr; ++r) {
              tp[r] = p;
              if (r + 1 < rows) {
                p += step;
                if (++ox == c.ow) {
                  ox = 0;
                  p = pb + ++oy * c.sh * pw * c.c;
                }
              }
            }
            for (int64_t ky = 1; ky < s.kh; ++ky)
              for (int64_t r = 0; r < k.mr; ++r) tp[ky * k.mr + r] = tp[r] + ky * row_step;
            merged[t - t0] = true;
            continue;
          }
          // The tile's pixels (oy, ox), stepped without a division per pixel
          // (64-bit divisions cost more than a small channel count's FMAs).
          // Rows past the end repeat the last pixel; the kernel does not store them.
          int64_t pix_y[16], pix_x[16];
          for (int64_t r = 0, oy = p0 / c.ow, ox = p0 % c.ow; r < k.mr; ++r) {
            pix_y[r] = oy;
            pix_x[r] = ox;
            if (r + 1 < rows && ++ox == c.ow) {
              ox = 0;
              ++oy;
            }
          }
          bool& row = merged[t - t0];
          row = row_taps;
          for (int64_t r = 0; r < rows && row; ++r) row = pix_x[r] >= in_lo && pix_x[r] < in_hi;
          for (int64_t r = 0; r < k.mr; ++r) {
            const int64_t oy = pix_y[r], ox = pix_x[r];
            if (row) {
              // Rows inside the height: one pointer stepped by an input row
              // (a 1-channel stem spends more on pointers than on its FMAs).
              const int64_t iy0 = oy * c.sh - c.pad_top;
              if (iy0 >= 0 && iy0 + (s.kh - 1) * c.dh < c.ih) {
                const float* p0 = xg + (iy0 * c.iw + ox * c.sw - c.pad_left) * c.c;
                for (int64_t ky = 0; ky < s.kh; ++ky)
                  tp[ky * k.mr + r] = p0 + ky * c.dh * c.iw * c.c;
                continue;
              }
              for (int64_t ky = 0; ky < s.kh; ++ky)
                tp[ky * k.mr + r] = TapPointer(c, xg, oy, ox, ky, 0, zeros);
              continue;
            }
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx)
                tp[(ky * s.kw + kx) * k.mr + r] = TapPointer(c, xg, oy, ox, ky, kx, zeros);
          }
        }
        // The next group's windows are the same pixels cg channels on (the
        // zero row of the padding stays): its pointers in one add each
        // (ShuffleNet's 1x1 convolutions of 4 groups of 34 channels spent as
        // long building pointers as multiplying).
        if (g > 0)
          for (int64_t i = 0; i < (t1 - t0) * tile_ptrs; ++i)
            if (ptrs[i] != zeros) ptrs[i] += s.cg;
        for (int64_t pn = pn0; pn < pn1; ++pn) {
          IgemmF32Args a;
          a.w = s.w.data() + g * s.group_stride + pn * panel_size;
          a.cols = std::min<int64_t>(k.nr, mg - pn * k.nr);
          a.bias = c.bias ? c.bias + g * mg + pn * k.nr : nullptr;
          a.act = c.act;
          a.lo = c.lo;
          a.hi = c.hi;
          a.ldy = s.m;
          // The next panel's weights, a share per tile, reach L2 while
          // this panel's tiles run.
          const char* next =
              pn + 1 < pn1 ? reinterpret_cast<const char*>(a.w + panel_size) : nullptr;
          const int64_t next_bytes = next ? panel_size * int64_t(sizeof(float)) : 0;
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t p0 = t * k.mr;
            const bool row = merged[t - t0];
            if (next) {
              const int64_t share0 = next_bytes * (t - t0) / (t1 - t0) / 64 * 64;
              const int64_t share1 = next_bytes * (t + 1 - t0) / (t1 - t0) / 64 * 64;
              a.prefetch = next + share0;
              a.prefetch_bytes = share1 - share0;
            }
            a.taps = row ? s.kh : taps;
            a.c = row ? s.kw * s.cg : s.cg;
            a.a = ptrs + (t - t0) * tile_ptrs;
            a.rows = std::min<int64_t>(k.mr, pixels - p0);
            a.y = yb + p0 * s.m + g * mg + pn * k.nr;
            a.residual = rb ? rb + p0 * s.m + g * mg + pn * k.nr : nullptr;
            k.igemm(a);
          }
        }
      }
      if (c.post) {
        const int64_t p0 = t0 * k.mr, p1 = std::min(pixels, t1 * k.mr);
        c.post->Apply(yb + p0 * s.m, (p1 - p0) * s.m);
      }
    }
  };
  ParallelFor(pool, units * chunks, work);
}

// Winograd F(2x2, 3x3) or F(4x4, 3x3), stride 1, no dilation, no groups.
// Work unit: a block of tiles; per block the P = 16 or 36 transformed
// patches [P][tiles][c] and GEMM outputs [P][tiles][m] stay in this thread's
// scratch (sized to fit L2), then the output transform writes the block's
// pixels. Tiles per block: a multiple of mr, the block's scratch near 256 KiB.
int64_t WinogradPositions(const ConvNhwcF32State& s) {
  return (s.winograd_tile + 2) * (s.winograd_tile + 2);
}

int64_t WinogradBlock(const ConvNhwcF32State& s) {
  const int64_t mr = s.k->mr;
  const int64_t fit = (64 * 1024) / (WinogradPositions(s) * (s.cg + s.m)) / mr * mr;
  return std::max<int64_t>(mr, std::min<int64_t>(8 * mr, fit));
}

ThreadPool* WinogradPool(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * c.oh * c.ow * s.m * 9 * s.cg);
}

CallScratch WinogradScratch(const ConvNhwcF32State& s) {
  const int64_t block = WinogradBlock(s), mr = s.k->mr;
  return {s.cg, (block + mr - 1) / mr * mr, WinogradPositions(s) * block * (s.cg + s.m)};
}

// False when a value it stored is not finite (winograd_out, winograd4_out).
bool RunWinograd(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcF32Kernels& k = *s.k;
  const int tile = s.winograd_tile, side = tile + 2, positions = side * side;
  const auto transform_in = tile == 4 ? k.winograd4_in : k.winograd_in;
  const auto transform_out = tile == 4 ? k.winograd4_out : k.winograd_out;
  std::atomic<bool> finite{true};
  const int64_t th = (c.oh + tile - 1) / tile, tw = (c.ow + tile - 1) / tile, tiles = th * tw;
  const int64_t ch = s.cg, m = s.m, panels = (m + k.nr - 1) / k.nr;
  const int64_t block = WinogradBlock(s);
  const int64_t blocks = (tiles + block - 1) / block;
  ThreadPool* const pool = WinogradPool(s, c);
  const CallParts parts(c.scratch, WinogradScratch(s), NumThreads(pool));
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const size_t v_size = size_t(positions * block * ch);
    float* v = parts.floats(slot);
    float* mb = v + v_size;
    const int64_t groups = (block + k.mr - 1) / k.mr;
    const float** gp = parts.ptrs(slot);
    const float* zeros = parts.zeros();
    const float* d[36];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(tiles, t0 + block);
      const int64_t nt = t1 - t0;
      const float* xb = c.x + b * c.ih * c.iw * c.c;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t iy0 = t / tw * tile - c.pad_top, ix0 = t % tw * tile - c.pad_left;
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < side; ++j) {
            const int64_t iy = iy0 + i, ix = ix0 + j;
            d[i * side + j] =
                iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw ? zeros : xb + (iy * c.iw + ix) * c.c;
          }
        transform_in(d, ch, v + (t - t0) * ch, block * ch);
      }
      for (int xi = 0; xi < positions; ++xi) {
        const float* vx = v + xi * block * ch;
        // Rows past the block's end repeat its last tile; the kernel does not store them.
        for (int64_t r = 0; r < groups * k.mr; ++r) gp[r] = vx + std::min(r, nt - 1) * ch;
        for (int64_t pn = 0; pn < panels; ++pn) {
          IgemmF32Args a;
          a.taps = 1;
          a.c = ch;
          a.w = s.winograd_u.data() + (xi * panels + pn) * ch * k.nr;
          a.cols = std::min<int64_t>(k.nr, m - pn * k.nr);
          a.ldy = m;
          for (int64_t g0 = 0; g0 < nt; g0 += k.mr) {
            a.a = gp + g0;
            a.rows = std::min<int64_t>(k.mr, nt - g0);
            a.y = mb + (xi * block + g0) * m + pn * k.nr;
            k.igemm(a);
          }
        }
      }
      float* yb = c.y + b * c.oh * c.ow * m;
      const float* rb = c.residual ? c.residual + b * c.oh * c.ow * m : nullptr;
      float* y[16];
      const float* res[16] = {};
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t oy0 = t / tw * tile, ox0 = t % tw * tile;
        for (int a = 0; a < tile; ++a)
          for (int e = 0; e < tile; ++e) {
            const int64_t oy = oy0 + a, ox = ox0 + e;
            const bool inside = oy < c.oh && ox < c.ow;
            y[a * tile + e] = inside ? yb + (oy * c.ow + ox) * m : nullptr;
            if (rb) res[a * tile + e] = inside ? rb + (oy * c.ow + ox) * m : nullptr;
          }
        if (!transform_out(mb + (t - t0) * m, block * m, m, c.bias, c.act, c.lo, c.hi,
                           rb ? res : nullptr, y))
          finite.store(false, std::memory_order_relaxed);
        if (c.post)
          for (int q = 0; q < tile * tile; ++q)
            if (y[q]) c.post->Apply(y[q], m);
      }
    }
  };
  ParallelFor(pool, c.n * blocks, work);
  return finite.load();
}

// One output row at a time. Inside the row, where every tap of a window is
// within the row's width, consecutive windows are sw * c floats apart: those
// pixels go to the kernel as one run of fixed-step pointers, so a pointer
// per (pixel, tap) is built only for the few pixels at the left and right
// edges (building them for every pixel cost more than the 3x3 sums over 16
// channels).
ThreadPool* DepthwisePool(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * c.oh * c.ow * s.m * s.kh * s.kw);
}

CallScratch DepthwiseScratch(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  int64_t in_lo, in_hi;
  InteriorColumns(c, s.kw, &in_lo, &in_hi);
  // Rows in the padding read zeros at every step of the run.
  const int64_t run = in_hi - in_lo;
  // A bf16 y: each output row computed in fp32 first.
  const int64_t row = c.y_bf16 ? c.ow * s.m : 0;
  return {c.c + std::max<int64_t>(0, run - 1) * c.sw * c.c, s.kh * s.kw * c.ow, row};
}

void RunDepthwise(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcF32Kernels& k = *s.k;
  const int64_t taps = s.kh * s.kw;
  int64_t in_lo, in_hi;
  InteriorColumns(c, s.kw, &in_lo, &in_hi);
  const int64_t run = in_hi - in_lo;
  ThreadPool* const pool = DepthwisePool(s, c);
  const CallParts parts(c.scratch, DepthwiseScratch(s, c), NumThreads(pool));
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const float** ptrs = parts.ptrs(slot);
    const float* zeros = parts.zeros();
    DwNhwcF32Args a;
    a.taps = taps;
    a.c = c.c;
    a.w = s.w.data();
    a.bias = c.bias;
    a.act = c.act;
    a.lo = c.lo;
    a.hi = c.hi;
    a.ldy = s.m;
    DwRunF32Args r;  // a row's interior as one column run, where the kernel has them
    r.rows = ptrs;
    r.kh = s.kh;
    r.kw = s.kw;
    r.sw = c.sw;
    r.dw = c.dw;
    r.pixels = run;
    r.c = c.c;
    r.w = a.w;
    r.bias = a.bias;
    r.act = a.act;
    r.lo = a.lo;
    r.hi = a.hi;
    r.ldy = a.ldy;
    for (int64_t u = begin; u < end; ++u) {  // one output row
      const int64_t b = u / c.oh, oy = u % c.oh;
      const float* xb = c.x + b * c.ih * c.iw * c.c;
      float* y = c.y_bf16 ? parts.floats(slot) : c.y + u * c.ow * s.m;
      auto edge = [&](int64_t ox0, int64_t ox1) {
        if (ox0 >= ox1) return;
        for (int64_t ox = ox0; ox < ox1; ++ox)
          for (int64_t ky = 0; ky < s.kh; ++ky)
            for (int64_t kx = 0; kx < s.kw; ++kx)
              ptrs[(ox - ox0) * taps + ky * s.kw + kx] = TapPointer(c, xb, oy, ox, ky, kx, zeros);
        a.a = ptrs;
        a.a_step = 0;
        a.pixels = ox1 - ox0;
        a.y = y + ox0 * s.m;
        k.dw(a);
      };
      edge(0, in_lo);
      bool ran_run = false;
      if (run > 0 && k.dw_run) {
        // Kernel rows in the padding are left out (null).
        for (int64_t ky = 0; ky < s.kh; ++ky) {
          const float* p = TapPointer(c, xb, oy, in_lo, ky, 0, zeros);
          ptrs[ky] = p == zeros ? nullptr : p;
        }
        r.y = y + in_lo * s.m;
        ran_run = k.dw_run(r);
      }
      if (run > 0 && !ran_run) {
        for (int64_t ky = 0; ky < s.kh; ++ky)
          for (int64_t kx = 0; kx < s.kw; ++kx)
            ptrs[ky * s.kw + kx] = TapPointer(c, xb, oy, in_lo, ky, kx, zeros);
        a.a = ptrs;
        a.a_step = c.sw * c.c;
        a.pixels = run;
        a.y = y + in_lo * s.m;
        k.dw(a);
      }
      edge(in_hi, c.ow);
      if (c.post) c.post->Apply(y, c.ow * s.m);
      if (c.y_bf16) s.dw_bf16->convert_flat(y, c.ow * s.m, c.y_bf16 + u * c.ow * s.m);
    }
  };
  ParallelFor(pool, c.n * c.oh, work);
}

// bf16 mode: x is copied once into bf16 rows of kc channels (the kernel's
// A tiles load them in place), then the work runs as RunIgemm's: blocks of
// tiles of 32 pixels, each block's tap pointers built once, panels outside
// and tiles inside. Scratch: the copy, a zero row for taps in the padding,
// and per thread the tap pointers of a block.
constexpr int64_t kBf16Mr = 32, kBf16Nr = 32;

ThreadPool* Bf16Pool(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return PoolForWork(c.pool, 2 * c.n * c.oh * c.ow * s.m * s.kh * s.kw * s.cg / s.bf16->speedup);
}

// The activation that runs after the bf16 kernels' epilogue, or null: a
// HardSwish (with its affine) without an activation before it runs inside
// the epilogue instead (no fp32 block, no second pass over the outputs).
const FusedActivation* Bf16Post(const ConvNhwcF32Call& c) {
  const bool fused =
      c.post && c.post->kind == FusedActivation::kHardSwish && c.act == F32Act::kNone;
  return fused ? nullptr : c.post;
}

void SetBf16HardSwish(const ConvNhwcF32Call& c, Bf16Output* a) {
  if (!c.post || Bf16Post(c)) return;
  a->hswish = true;
  a->hswish_affine = c.post->affine;
  a->hswish_scale = c.post->scale;
  a->hswish_shift = c.post->shift;
}

struct Bf16Scratch {
  int64_t copy = 0, zeros = 0, ptrs = 0;  // bf16 values, bf16 values, pointers per thread
  // A bf16 y with an activation after the epilogue: a block's fp32 outputs
  // per thread, activated, then rounded into y.
  int64_t block_floats = 0;
  int64_t cols = 0;  // a block's im2col rows per thread, bf16 values
  size_t Slice() const {
    ScratchLayout l;
    l.Add(size_t(ptrs) * sizeof(void*));
    l.Add(size_t(block_floats) * sizeof(float));
    l.Add(size_t(cols) * 2);
    return l.total();
  }
  size_t Bytes(int threads) const {
    ScratchLayout l;
    l.Add(size_t(copy) * 2);
    l.Add(size_t(zeros) * 2);
    for (int t = 0; t < threads; ++t) l.Add(Slice());
    return l.total();
  }
  // Thread `slot`'s parts of its slice, slices starting at `base` (null
  // where the part is empty).
  struct Parts {
    const uint16_t** ptrs;
    float* block;
    uint16_t* rows;
  };
  Parts At(uint8_t* base, int slot) const {
    uint8_t* const slice = base + size_t(slot) * Slice();
    ScratchLayout l;
    const size_t p = l.Add(size_t(ptrs) * sizeof(void*)), f = l.Add(size_t(block_floats) * 4),
                 r = l.Add(size_t(cols) * 2);
    return {ptrs ? reinterpret_cast<const uint16_t**>(slice + p) : nullptr,
            block_floats ? reinterpret_cast<float*>(slice + f) : nullptr,
            cols ? reinterpret_cast<uint16_t*>(slice + r) : nullptr};
  }
};

// What every kernel call of a block shares (no groups): panel pn's weights,
// bias and activation, and where its outputs go: y at element `at` (image
// and first pixel; the panel's column added here), or the block's fp32
// buffer at `block_at` when the activation after the epilogue needs one.
void SetBf16Panel(const ConvNhwcF32State& s, const ConvNhwcF32Call& c, int64_t pn,
                  int64_t panel_values, int64_t at, float* block, int64_t block_at, Bf16Output* a) {
  const int64_t col0 = pn * kBf16Nr;
  a->w = s.wb.data() + pn * panel_values;
  a->cols = std::min<int64_t>(kBf16Nr, s.m - col0);
  a->next_w = col0 + kBf16Nr < s.m ? a->w + panel_values : nullptr;
  a->next_values = panel_values;
  a->bias = c.bias ? c.bias + col0 : nullptr;
  a->residual = c.residual ? c.residual + at + col0 : nullptr;
  a->residual_bf16 = c.residual_bf16 ? c.residual_bf16 + at + col0 : nullptr;
  a->act = c.act;
  a->lo = c.lo;
  a->hi = c.hi;
  a->y = block ? block + block_at + col0 : c.y ? c.y + at + col0 : nullptr;
  a->y_bf16 = !block && c.y_bf16 ? c.y_bf16 + at + col0 : nullptr;
  a->ldy = s.m;
  SetBf16HardSwish(c, a);
}

// After a block's kernel calls: the activation that runs after the
// epilogue on its `n` outputs from element `at` of y, through the block's
// fp32 buffer (then rounded into y) when y is bf16.
void FinishBf16Block(const ConvNhwcBf16Kernels& k, const ConvNhwcF32Call& c, float* block,
                     int64_t at, int64_t n) {
  if (block) {
    Bf16Post(c)->Apply(block, n);
    k.convert_flat(block, n, c.y_bf16 + at);
  } else if (Bf16Post(c)) {
    Bf16Post(c)->Apply(c.y + at, n);
  }
}

// A bf16 x whose pixels already are the kernel's rows (every group's
// channels a multiple of 32) is read in place: no copy.
bool Bf16InPlace(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return c.x_bf16 && !s.bf16_rows && s.kc == s.cg;
}

// The kernel-row form's plane and the positions its kernel walks
// (PlaneBf16Args): vw positions per output row, either the output row
// rounded up to 16 or, where the plane's rows continue each other at the
// pixel step (stride 1: vw = pw), the plane's row; whichever has fewer tiles
// (a 55-wide output: 57 positions a row, not 64).
struct Bf16Plane {
  int64_t ph = 0, pw = 0, vw = 0, tiles = 0;
  int64_t image = 0;   // values per image
  int64_t values = 0;  // the copy: every image, then zeros as far as the last tile reads
};

Bf16Plane Bf16PlaneFor(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  Bf16Plane p;
  PlaneSize(s, c, &p.ph, &p.pw);
  p.vw = (c.ow + 15) / 16 * 16;
  if (c.sh * p.pw % c.sw == 0 && c.sh * p.pw / c.sw >= c.ow &&
      c.oh * (c.sh * p.pw / c.sw) < c.oh * p.vw)
    p.vw = c.sh * p.pw / c.sw;
  p.tiles = (c.oh * p.vw + kBf16Mr - 1) / kBf16Mr;
  p.image = p.ph * p.pw * s.cg;
  const int64_t last = p.tiles * kBf16Mr - 1;
  const int64_t reach = (last / p.vw * c.sh * p.pw + last % p.vw * c.sw) * s.cg +
                        (s.kh - 1) * c.dh * p.pw * s.cg + s.kc;
  p.values = (c.n - 1) * p.image + std::max(p.image, reach);
  return p;
}

// 1x1 convolutions without groups or pads (every output pixel reads inside x)
// run on the kernel-row kernel with one k-long row per pixel: x in place
// when it is bf16 with whole k blocks at stride 1 (the last partial tile's
// rows copied, so no tile reads past x), else gathered once per run into
// rows of kc values, 32-row padded per image. No tap pointers: ResNet-50's
// 1x1 layers had spent more time checking and gathering them than in the
// tile unit.
bool Bf16Pointwise(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return s.kh == 1 && s.kw == 1 && s.group == 1 && c.pad_top == 0 && c.pad_left == 0 &&
         (c.oh - 1) * c.sh < c.ih && (c.ow - 1) * c.sw < c.iw;
}

bool Bf16PointwiseInPlace(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  return c.x_bf16 && s.kc == s.cg && c.sh == 1 && c.sw == 1 && c.oh == c.ih && c.ow == c.iw;
}

Bf16Scratch Bf16ScratchFor(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  if (Bf16Pointwise(s, c)) {
    const int64_t pixels = c.oh * c.ow, padded = (pixels + kBf16Mr - 1) / kBf16Mr * kBf16Mr;
    const int64_t block = IgemmBlock(c, padded / kBf16Mr, 4);
    const bool in_place = Bf16PointwiseInPlace(s, c);
    return {in_place ? 0 : c.n * padded * s.kc, 0, 0,
            c.y_bf16 && Bf16Post(c) ? block * kBf16Mr * s.m : 0, in_place ? kBf16Mr * s.kc : 0};
  }
  if (s.bf16_im2col) {
    const Bf16Plane p = Bf16PlaneFor(s, c);
    const int64_t block = IgemmBlock(c, (c.oh * c.ow + kBf16Mr - 1) / kBf16Mr, 4);
    return {c.n * p.image, 0, 0, c.y_bf16 && Bf16Post(c) ? block * kBf16Mr * s.m : 0,
            block * kBf16Mr * s.kc};
  }
  if (s.bf16_rows) {
    const Bf16Plane p = Bf16PlaneFor(s, c);
    const int64_t block = IgemmBlock(c, p.tiles, 4);
    return {p.values, 0, 0, c.y_bf16 && Bf16Post(c) ? block * kBf16Mr * s.m : 0};
  }
  const int64_t tiles = (c.oh * c.ow + kBf16Mr - 1) / kBf16Mr;
  const int64_t copy = Bf16InPlace(s, c) ? 0 : c.n * c.ih * c.iw * s.group * s.kc;
  const int64_t taps = s.kh * s.kw, block = IgemmBlock(c, tiles, 4);
  return {copy, s.kc, block * taps * kBf16Mr, c.y_bf16 && Bf16Post(c) ? block * kBf16Mr * s.m : 0};
}

// A bf16 call's threads and scratch: the copy of x (or the plane), the zero
// row of the tap-pointer form, then the threads' slices.
struct Bf16Regions {
  ThreadPool* pool;
  Bf16Scratch bs;
  ScratchRegion region;
  uint16_t* copy = nullptr;
  uint16_t* zeros = nullptr;
  uint8_t* slices = nullptr;
  Bf16Regions(const ConvNhwcF32State& s, const ConvNhwcF32Call& c)
      : pool(Bf16Pool(s, c)),
        bs(Bf16ScratchFor(s, c)),
        region(c.scratch, bs.Bytes(NumThreads(pool))) {
    ScratchLayout l;
    copy = region.at<uint16_t>(l.Add(size_t(bs.copy) * 2));
    zeros = region.at<uint16_t>(l.Add(size_t(bs.zeros) * 2));
    slices = region.at<uint8_t>(l.Add(0));
  }
};

// Panel chunks per block of the pointwise and kernel-row forms: with fewer
// than 4 blocks a thread, the threads also split a block's panels (ResNet-50's
// 7x7 stage has 2 blocks, so both threads streamed all 4.7 MB of a
// convolution's weights, and 7 blocks of a 14x14 layer left one thread 4 of
// them). Not with an activation after the epilogue, which runs on a block's
// outputs once all its panels are done, nor when x is larger than the
// weights: each thread then reads all of x (DenseNet-121's 1x1s from 1024
// channels at 14x14, 2 threads: 1.09x the time). Work unit u: chunk u /
// units, block u % units, so each thread's range covers few chunks.
int64_t Bf16PanelChunks(const ConvNhwcF32Call& c, ThreadPool* pool, int64_t units, int64_t panels,
                        int64_t weight_values, int64_t x_values) {
  const int64_t threads = NumThreads(pool);
  if (threads == 1 || Bf16Post(c) || units >= 4 * threads || weight_values <= x_values) return 1;
  return std::min(panels, (4 * threads + units - 1) / units);
}

// x into the kernel-row forms' bf16 plane (`values` in all: every image's
// plane, then zeros).
void FillPlaneBf16(const ConvNhwcBf16Kernels& k, const ConvNhwcF32Call& c, const Bf16Plane& pl,
                   int64_t values, ThreadPool* pool, uint16_t* plane) {
  const int64_t row = pl.pw * c.c, left = c.pad_left * c.c;
  const int64_t copy = std::min(c.iw, pl.pw - c.pad_left) * c.c;
  ParallelFor(pool, c.n * pl.ph, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      uint16_t* const dst = plane + r * row;
      const int64_t iy = r % pl.ph - c.pad_top;
      if (iy < 0 || iy >= c.ih) {
        std::fill(dst, dst + row, uint16_t(0));
        continue;
      }
      const int64_t src = (r / pl.ph * c.ih + iy) * c.iw * c.c;
      std::fill(dst, dst + left, uint16_t(0));
      if (c.x_bf16)
        std::memcpy(dst + left, c.x_bf16 + src, size_t(copy) * 2);
      else
        k.convert_flat(c.x + src, copy, dst + left);
      std::fill(dst + left + copy, dst + row, uint16_t(0));
    }
  });
  std::fill(plane + c.n * pl.image, plane + values, uint16_t(0));
}

// The im2col form: the plane, then per block of 32-pixel tiles the pixels'
// windows copied into rows of kc values, run as one k-long kernel row.
void RunBf16Im2col(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcBf16Kernels& k = *s.bf16;
  const Bf16Plane pl = Bf16PlaneFor(s, c);
  const int64_t panels = (s.m + kBf16Nr - 1) / kBf16Nr, panel_size = s.kc * kBf16Nr;
  const int64_t pixels = c.oh * c.ow, tiles = (pixels + kBf16Mr - 1) / kBf16Mr;
  const int64_t block = IgemmBlock(c, tiles, 4), blocks = (tiles + block - 1) / block;
  const Bf16Regions r(s, c);
  ThreadPool* const pool = r.pool;
  const Bf16Scratch& bs = r.bs;
  uint16_t* const plane = r.copy;
  uint8_t* const slices = r.slices;
  FillPlaneBf16(k, c, pl, bs.copy, pool, plane);
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const Bf16Scratch::Parts parts = bs.At(slices, slot);
    float* const yblock = parts.block;
    uint16_t* const rows = parts.rows;
    if (k.begin) k.begin();
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(tiles, t0 + block);
      const int64_t q0 = t0 * kBf16Mr, q1 = std::min(pixels, t1 * kBf16Mr), count = q1 - q0;
      Im2colBf16Args im;
      im.plane = plane + b * pl.image;
      im.pw = pl.pw;
      im.c = c.c;
      im.kh = s.kh;
      im.kw = s.kw;
      im.sh = c.sh;
      im.sw = c.sw;
      im.dh = c.dh;
      im.oy = q0 / c.ow;
      im.ox = q0 % c.ow;
      im.ow = c.ow;
      im.count = count;
      im.rows = (t1 - t0) * kBf16Mr;
      im.kc = s.kc;
      im.out = rows;
      k.im2col(im);
      const int64_t yb = b * pixels * s.m;
      for (int64_t pn = 0; pn < panels; ++pn) {
        PlaneBf16Args a;
        a.x = rows;
        a.pixel_step = s.kc;
        a.vw = (count + 15) / 16 * 16;
        a.row_step = a.vw * s.kc;
        a.oh = 1;
        a.ow = count;
        a.v1 = count;
        a.kh = 1;
        a.kc = s.kc;
        a.kv = s.kh * s.kw * s.cg;
        SetBf16Panel(s, c, pn, panel_size, yb + q0 * s.m, yblock, 0, &a);
        k.plane(a);
      }
      FinishBf16Block(k, c, yblock, yb + q0 * s.m, count * s.m);
    }
    if (k.end) k.end();
  };
  ParallelFor(pool, c.n * blocks, work);
}

void RunBf16Pointwise(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcBf16Kernels& k = *s.bf16;
  const int64_t pixels = c.oh * c.ow, tiles = (pixels + kBf16Mr - 1) / kBf16Mr;
  const int64_t padded = tiles * kBf16Mr;
  const int64_t panels = (s.m + kBf16Nr - 1) / kBf16Nr, panel_size = s.kc * kBf16Nr;
  const int64_t block = IgemmBlock(c, tiles, 4), blocks = (tiles + block - 1) / block;
  const bool in_place = Bf16PointwiseInPlace(s, c);
  const Bf16Regions r(s, c);
  ThreadPool* const pool = r.pool;
  const Bf16Scratch& bs = r.bs;
  uint16_t* const copy = r.copy;
  uint8_t* const slices = r.slices;
  if (!in_place) {
    ParallelFor(pool, c.n * c.oh, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / c.oh, oy = r % c.oh;
        const int64_t src = ((b * c.ih + oy * c.sh) * c.iw) * c.c;
        uint16_t* const dst = copy + (b * padded + oy * c.ow) * s.kc;
        k.gather_rows(c.x ? c.x + src : nullptr, c.x ? nullptr : c.x_bf16 + src, c.ow, c.sw * c.c,
                      c.c, dst, s.kc);
        if (oy == c.oh - 1)
          std::fill(dst + c.ow * s.kc, copy + (b + 1) * padded * s.kc, uint16_t(0));
      }
    });
  }
  const uint16_t* const x = in_place ? c.x_bf16 : copy;
  const int64_t image = in_place ? pixels * s.kc : padded * s.kc;
  const int64_t units = c.n * blocks;
  const int64_t chunks =
      Bf16PanelChunks(c, pool, units, panels, panels * panel_size, c.n * pixels * s.kc);
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const Bf16Scratch::Parts parts = bs.At(slices, slot);
    float* const yblock = parts.block;
    uint16_t* const tail = parts.rows;
    if (k.begin) k.begin();
    for (int64_t w = begin; w < end; ++w) {
      const int64_t u = w % units, chunk = w / units;
      const int64_t pn0 = panels * chunk / chunks, pn1 = panels * (chunk + 1) / chunks;
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(tiles, t0 + block);
      const int64_t q0 = t0 * kBf16Mr, q1 = std::min(pixels, t1 * kBf16Mr);
      // In place, a partial last tile would read past x: its rows are copied.
      const int64_t direct = in_place ? (q1 - q0) / kBf16Mr * kBf16Mr : q1 - q0;
      if (direct < q1 - q0) {
        std::memcpy(tail, x + b * image + (q0 + direct) * s.kc,
                    size_t((q1 - q0 - direct) * s.kc) * 2);
        std::fill(tail + (q1 - q0 - direct) * s.kc, tail + kBf16Mr * s.kc, uint16_t(0));
      }
      const int64_t yb = b * pixels * s.m;
      for (int64_t pn = pn0; pn < pn1; ++pn) {
        PlaneBf16Args a;
        a.pixel_step = s.kc;
        a.oh = 1;
        a.kh = 1;
        a.kc = s.kc;
        a.kv = s.cg;
        // Pixels q0 + from .. q0 + to, whose rows start at `rows`.
        auto run = [&](const uint16_t* rows, int64_t from, int64_t to) {
          if (to <= from) return;
          a.x = rows;
          a.v0 = 0;
          a.v1 = a.ow = a.vw = to - from;
          a.row_step = a.vw * s.kc;
          SetBf16Panel(s, c, pn, panel_size, yb + (q0 + from) * s.m, yblock, from * s.m, &a);
          k.plane(a);
        };
        run(x + b * image + q0 * s.kc, 0, direct);
        run(tail, direct, q1 - q0);
      }
      FinishBf16Block(k, c, yblock, yb + q0 * s.m, (q1 - q0) * s.m);
    }
    if (k.end) k.end();
  };
  ParallelFor(pool, units * chunks, work);
}

// The kernel-row form: x copied once into the zero-padded bf16 plane, then
// blocks of tiles of positions (Bf16PlaneFor), panels inside.
void RunBf16Plane(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  const ConvNhwcBf16Kernels& k = *s.bf16;
  const Bf16Plane pl = Bf16PlaneFor(s, c);
  const int64_t panels = (s.m + kBf16Nr - 1) / kBf16Nr, panel_size = s.kh * s.kc * kBf16Nr;
  const int64_t block = IgemmBlock(c, pl.tiles, 4), blocks = (pl.tiles + block - 1) / block;
  const int64_t positions = c.oh * pl.vw, pixels = c.oh * c.ow;
  const Bf16Regions r(s, c);
  ThreadPool* const pool = r.pool;
  const Bf16Scratch& bs = r.bs;
  uint16_t* const plane = r.copy;
  uint8_t* const slices = r.slices;
  const int64_t row = pl.pw * c.c;
  FillPlaneBf16(k, c, pl, bs.copy, pool, plane);
  // The first output pixel at or after position v.
  auto pixel_at = [&](int64_t v) {
    const int64_t oy = v / pl.vw, ox = v % pl.vw;
    return std::min(pixels, ox < c.ow ? oy * c.ow + ox : (oy + 1) * c.ow);
  };
  const int64_t units = c.n * blocks;
  const int64_t chunks =
      Bf16PanelChunks(c, pool, units, panels, panels * panel_size, c.n * pl.image);
  auto work = [&](int64_t begin, int64_t end, int slot) {
    float* const yblock = bs.At(slices, slot).block;
    if (k.begin) k.begin();
    for (int64_t w = begin; w < end; ++w) {
      const int64_t u = w % units, chunk = w / units;
      const int64_t pn0 = panels * chunk / chunks, pn1 = panels * (chunk + 1) / chunks;
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(pl.tiles, t0 + block);
      const int64_t v0 = t0 * kBf16Mr, v1 = std::min(positions, t1 * kBf16Mr);
      const int64_t q0 = pixel_at(v0), q1 = pixel_at(v1), yb = b * pixels * s.m;
      for (int64_t pn = pn0; pn < pn1; ++pn) {
        PlaneBf16Args a;
        a.x = plane + b * pl.image;
        a.pixel_step = c.sw * c.c;
        a.row_step = c.sh * row;
        a.kernel_row = c.dh * row;
        a.vw = pl.vw;
        a.oh = c.oh;
        a.ow = c.ow;
        a.v0 = v0;
        a.v1 = v1;
        a.kh = s.kh;
        a.kc = s.kc;
        a.kv = s.kw * s.cg;
        a.p0 = q0;
        SetBf16Panel(s, c, pn, panel_size, yb + q0 * s.m, yblock, 0, &a);
        k.plane(a);
      }
      FinishBf16Block(k, c, yblock, yb + q0 * s.m, (q1 - q0) * s.m);
    }
    if (k.end) k.end();
  };
  ParallelFor(pool, units * chunks, work);
}

void RunBf16(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  if (s.bf16_im2col) return RunBf16Im2col(s, c);
  if (s.bf16_rows) return RunBf16Plane(s, c);
  if (Bf16Pointwise(s, c)) return RunBf16Pointwise(s, c);
  const ConvNhwcBf16Kernels& k = *s.bf16;
  const int64_t pixels = c.oh * c.ow, taps = s.kh * s.kw, kc = s.kc;
  // Per pixel the copy holds each group's channels padded to kc.
  const int64_t mg = s.m / s.group, gkc = s.group * kc;
  const int64_t panels = (mg + kBf16Nr - 1) / kBf16Nr, panel_size = taps * kc * kBf16Nr;
  const int64_t tiles = (pixels + kBf16Mr - 1) / kBf16Mr;
  const int64_t block = IgemmBlock(c, tiles, 4), blocks = (tiles + block - 1) / block;
  const Bf16Regions r(s, c);
  ThreadPool* const pool = r.pool;
  const Bf16Scratch& bs = r.bs;
  uint16_t* const scratch_copy = r.copy;
  uint16_t* const zeros = r.zeros;
  std::fill(zeros, zeros + kc, uint16_t(0));
  const uint16_t* const copy = Bf16InPlace(s, c) ? c.x_bf16 : scratch_copy;
  if (!Bf16InPlace(s, c)) {
    // A (pixel, group) pair is cg channels of x, kc of the copy.
    ParallelFor(pool, c.n * c.ih * c.iw * s.group, [&](int64_t p0, int64_t p1, int) {
      if (!c.x_bf16) return k.convert(c.x + p0 * s.cg, p1 - p0, s.cg, scratch_copy + p0 * kc, kc);
      for (int64_t p = p0; p < p1; ++p) {
        std::memcpy(scratch_copy + p * kc, c.x_bf16 + p * s.cg, size_t(s.cg) * 2);
        std::fill(scratch_copy + p * kc + s.cg, scratch_copy + (p + 1) * kc, uint16_t(0));
      }
    });
  }
  auto work = [&](int64_t begin, int64_t end, int slot) {
    const Bf16Scratch::Parts parts = bs.At(r.slices, slot);
    const uint16_t** ptrs = parts.ptrs;
    float* const yblock = parts.block;
    if (k.begin) k.begin();
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / blocks, t0 = u % blocks * block, t1 = std::min(tiles, t0 + block);
      const uint16_t* xb = copy + b * c.ih * c.iw * gkc;
      // Offsets into y and the residual, whichever of their forms is set.
      const int64_t yb = b * pixels * s.m;
      const int64_t q0 = t0 * kBf16Mr, q1 = std::min(pixels, t1 * kBf16Mr);
      for (int64_t g = 0; g < s.group; ++g) {
        const uint16_t* xg = xb + g * kc;
        // Tap pointers of the block's tiles, [tile][tap][32]; rows past the
        // last pixel repeat it (the kernel does not store them).
        // A 1x1 whose every output pixel reads inside the input (no pads,
        // none past its end) takes one pointer per pixel, never the zero row.
        const bool inside_1x1 = taps == 1 && c.pad_top == 0 && c.pad_left == 0 &&
                                (c.oh - 1) * c.sh < c.ih && (c.ow - 1) * c.sw < c.iw;
        // (One division per block: the pixel's row and column advance.)
        int64_t oy = q0 / c.ow, ox = q0 % c.ow;
        for (int64_t t = t0; t < t1; ++t) {
          const uint16_t** tp = ptrs + (t - t0) * taps * kBf16Mr;
          for (int64_t r = 0; r < kBf16Mr; ++r) {
            if (t * kBf16Mr + r >= pixels) {
              for (int64_t tap = 0; tap < taps; ++tap)
                tp[tap * kBf16Mr + r] = tp[tap * kBf16Mr + r - 1];
              continue;
            }
            if (inside_1x1) {
              tp[r] = xg + (oy * c.sh * c.iw + ox * c.sw) * gkc;  // a 1x1 inside the input
            } else {
              for (int64_t ky = 0; ky < s.kh; ++ky) {
                const int64_t iy = oy * c.sh - c.pad_top + ky * c.dh;
                for (int64_t kx = 0; kx < s.kw; ++kx) {
                  const int64_t ix = ox * c.sw - c.pad_left + kx * c.dw;
                  tp[(ky * s.kw + kx) * kBf16Mr + r] = iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw
                                                           ? zeros
                                                           : xg + (iy * c.iw + ix) * gkc;
                }
              }
            }
            if (++ox == c.ow) ox = 0, ++oy;
          }
        }
        for (int64_t pn = 0; pn < panels; ++pn) {
          IgemmBf16Args a;
          a.a = ptrs;
          a.rows = q1 - q0;
          a.taps = taps;
          a.kc = kc;
          a.kv = s.cg;
          const int64_t col0 = g * mg + pn * kBf16Nr;
          a.w = s.wb.data() + (g * panels + pn) * panel_size;
          a.cols = std::min<int64_t>(kBf16Nr, mg - pn * kBf16Nr);
          a.bias = c.bias ? c.bias + col0 : nullptr;
          const int64_t at = yb + q0 * s.m + col0;
          a.residual = c.residual ? c.residual + at : nullptr;
          a.residual_bf16 = c.residual_bf16 ? c.residual_bf16 + at : nullptr;
          a.act = c.act;
          a.lo = c.lo;
          a.hi = c.hi;
          a.y = yblock ? yblock + col0 : c.y ? c.y + at : nullptr;
          a.y_bf16 = !yblock && c.y_bf16 ? c.y_bf16 + at : nullptr;
          a.ldy = s.m;
          SetBf16HardSwish(c, &a);
          k.igemm(a);
        }
      }
      FinishBf16Block(k, c, yblock, yb + q0 * s.m, (q1 - q0) * s.m);
    }
    if (k.end) k.end();
  };
  ParallelFor(pool, c.n * blocks, work);
}

}  // namespace

const ConvNhwcF32Kernels* ConvNhwcF32For(const CpuFeatures& f, const char** variant) {
  const ConvNhwcF32Kernels* k = nullptr;
  if (HighestIsa(f) != Isa::kReference) k = &kConvNhwcF32Portable;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) k = f.avx512f ? &kConvNhwcF32Avx512F : &kConvNhwcF32Avx2;
#endif
#if defined(__aarch64__)
  if (f.asimd) k = &kConvNhwcF32Neon;  // fmla only: Armv8.0 NEON
#endif
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

const ConvNhwcBf16Kernels* ConvNhwcBf16For(const CpuFeatures& f, const char** variant) {
  const ConvNhwcBf16Kernels* k = nullptr;
#if defined(QFOLD_HAVE_AMX)
  if (f.amx && f.amx_bf16 && f.avx512bf16 && f.avx512_core())
    k = &kConvNhwcBf16Amx;
  else if (f.avx512bf16 && f.avx512_core())
    k = &kConvNhwcBf16Avx512;
#endif
  (void)f;
  if (variant) *variant = k ? k->name : nullptr;
  return k;
}

uint16_t Bf16FromFloat(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t(bits >> 16 | 0x40);  // quiet NaN
  return uint16_t((bits + 0x7fffu + (bits >> 16 & 1)) >> 16);
}

float FloatFromBf16(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const ConvNhwcF32Kernels* ConvNhwcF32Portable() {
  return &kConvNhwcF32Portable;
}

std::shared_ptr<void> PrepareConvNhwcF32(const ConvNhwcF32Kernels* k, const Tensor& w,
                                         int64_t group, const ConvNhwcBf16Kernels* bf16,
                                         const Fp16Kernels* fp16, int64_t dilation_w,
                                         int64_t output_pixels) {
  if (!k || w.dtype != DType::kFloat32 || w.rank() != 4 || group <= 0) return nullptr;
  auto s = std::make_shared<ConvNhwcF32State>();
  s->k = k;
  s->m = w.shape[0];
  s->cg = w.shape[1];
  s->group = group;
  s->kh = w.shape[2];
  s->kw = w.shape[3];
  const int64_t taps = s->kh * s->kw;
  if (s->m <= 0 || s->m % group != 0 || s->cg <= 0 || taps <= 0) return nullptr;
  const int64_t mg = s->m / group;
  const float* wd = w.ptr<float>();  // [m][cg][kh][kw]
  s->depthwise = s->cg == 1 && mg == 1;
  if (s->depthwise) {
    s->w.resize(size_t(taps * s->m));
    for (int64_t oc = 0; oc < s->m; ++oc)
      for (int64_t t = 0; t < taps; ++t) s->w[size_t(t * s->m + oc)] = wd[oc * taps + t];
    s->dw_bf16 = bf16;
    return s;
  }
  if (fp16 && (s->fp16 = PrepareConvNhwcFp16(*fp16, w, group))) return s;
  // Kernel rows of fewer than 16 values fill under half of a 32-value k
  // block: fp32 was faster there (a 3x3 RGB stem to 32 channels 323 against
  // 382 us, a 1x1 from 12 channels 220 against 286; a 7x7 RGB stem, 21 values
  // a row, 697 against 1612 in bf16), so windows of 16 to 64 values go to
  // im2col rows instead.
  const bool rows = group == 1 && taps > 1 && dilation_w == 1;
  const bool im2col = rows && s->kw * s->cg < 16 && taps * s->cg >= 16 && taps * s->cg <= 64 &&
                      bf16 && mg >= bf16->im2col_min_m;
  const bool pays = s->cg >= 16 || (rows && s->kw * s->cg >= 16) || im2col;
  const int tile =
      group == 1 && s->kh == 3 && s->kw == 3 ? WinogradTile(*k, s->cg, s->m, output_pixels) : 0;
  // bf16 mode: F(4x4, 3x3) in fp32 against the bf16 kernels (their products
  // at twice the fp32 rate, its 36 against 144 multiplications a tile). It
  // won from 64 channels and 512 output pixels (inside the models, 1
  // thread, Zen 5: VGG-19 bf16 0.87x the time, PP-OCRv4 det 0.90x,
  // Inception-v1 and v2 0.94x, ResNet-50 0.97-0.99x, DenseNet-121 even), but
  // not for 64 -> 64 at 224x224, where the bf16 kernel rows run long (VGG-19
  // 1.05x the time with it): from 128x128 pixels on it takes 128 channels.
  // Its results are the fp32 ones (closer to fp32 than bf16's).
  const bool winograd_first = bf16 && tile == 4 && s->cg >= 64 && output_pixels >= 512 &&
                              (s->cg >= 128 || output_pixels < 128 * 128);
  if (bf16 && pays && (group == 1 || s->cg >= 16) && !winograd_first) {
    // [panel][tap][value pair][32 outputs][2], zeros past the values and m;
    // a kernel row's values are (kx, channel) pairs, an im2col row's (ky, kx,
    // channel) triples.
    s->bf16 = bf16;
    s->bf16_rows = rows;
    s->bf16_im2col = im2col;
    const int64_t btaps = im2col ? 1 : s->bf16_rows ? s->kh : taps;
    s->kc = ((im2col ? taps * s->cg : s->bf16_rows ? s->kw * s->cg : s->cg) + 31) / 32 * 32;
    const int64_t panel_size = btaps * s->kc * kBf16Nr, gpanels = (mg + kBf16Nr - 1) / kBf16Nr;
    s->wb.assign(size_t(group * gpanels * panel_size), uint16_t(0));
    for (int64_t oc = 0; oc < s->m; ++oc)
      for (int64_t ch = 0; ch < s->cg; ++ch)
        for (int64_t ky = 0; ky < s->kh; ++ky)
          for (int64_t kx = 0; kx < s->kw; ++kx) {
            const int64_t t = im2col ? 0 : s->bf16_rows ? ky : ky * s->kw + kx;
            const int64_t j = im2col         ? (ky * s->kw + kx) * s->cg + ch
                              : s->bf16_rows ? kx * s->cg + ch
                                             : ch;
            const int64_t panel = oc / mg * gpanels + oc % mg / kBf16Nr;
            s->wb[size_t(panel * panel_size + t * s->kc * kBf16Nr + j / 2 * 2 * kBf16Nr +
                         oc % mg % kBf16Nr * 2 + j % 2)] =
                Bf16FromFloat(wd[((oc * s->cg + ch) * s->kh + ky) * s->kw + kx]);
          }
    return s;
  }
  const int64_t panels = (mg + k->nr - 1) / k->nr, kdim = taps * s->cg;
  s->group_stride = panels * kdim * k->nr;
  s->w.assign(size_t(s->group_stride * group), 0.f);
  for (int64_t g = 0; g < group; ++g)
    for (int64_t j = 0; j < mg; ++j) {
      const int64_t oc = g * mg + j;
      float* panel = s->w.data() + g * s->group_stride + j / k->nr * kdim * k->nr + j % k->nr;
      // Reduction index (tap, channel): the order the kernels walk X's taps.
      for (int64_t ch = 0; ch < s->cg; ++ch)
        for (int64_t t = 0; t < taps; ++t)
          panel[(t * s->cg + ch) * k->nr] = wd[(oc * s->cg + ch) * taps + t];
    }
  if (tile) {
    // U = G g G^T per (output, input) channel pair, in double then rounded once.
    static const double kG2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
    static const double kG4[6][3] = {{1. / 4, 0, 0},
                                     {-1. / 6, -1. / 6, -1. / 6},
                                     {-1. / 6, 1. / 6, -1. / 6},
                                     {1. / 24, 1. / 12, 1. / 6},
                                     {1. / 24, -1. / 12, 1. / 6},
                                     {0, 0, 1}};
    const double(*G)[3] = tile == 4 ? kG4 : kG2;
    const int side = tile + 2;
    s->winograd_tile = tile;
    s->winograd_u.assign(size_t(side * side * panels * s->cg * k->nr), 0.f);
    for (int64_t oc = 0; oc < s->m; ++oc)
      for (int64_t ch = 0; ch < s->cg; ++ch) {
        const float* g = wd + (oc * s->cg + ch) * 9;
        double gg[6][3];  // G g
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < 3; ++j)
            gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < side; ++j) {
            const double u = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
            s->winograd_u[size_t(((i * side + j) * panels + oc / k->nr) * s->cg * k->nr +
                                 ch * k->nr + oc % k->nr)] = float(u);
          }
      }
  }
  return s;
}

Bf16Io ConvNhwcF32Bf16Io(const void* state, const ConvNhwcF32Call& c) {
  Bf16Io io;
  if (!state) return io;
  const ConvNhwcF32State& s = *static_cast<const ConvNhwcF32State*>(state);
  if (c.c != s.cg * s.group || c.kh != s.kh || c.kw != s.kw) return io;
  const char* method = ConvNhwcF32Method(state, c);
  if (std::strcmp(method, "depthwise") == 0) {
    io.y = s.dw_bf16 != nullptr;  // rounded per row, after every activation
    return io;
  }
  if (std::strcmp(method, "bf16") != 0) return io;
  // Activations after the epilogue run on a block's fp32 outputs first.
  io.x = io.residual = io.y = true;
  return io;
}

// A channels-first x that the call's method does not read as planes
// (only the padded copy of RunIgemm does): transposed into the first part
// of the scratch, the method's own scratch after it.
bool ReadsPlanes(const ConvNhwcF32State& s, const ConvNhwcF32Call& c) {
  int64_t ph = 0, pw = 0;
  return std::strcmp(ConvNhwcF32Method(&s, c), "igemm") == 0 && UsePlane(s, c, &ph, &pw);
}

size_t PlanarCopyBytes(const ConvNhwcF32Call& c) {
  ScratchLayout l;
  l.Add(size_t(c.n * c.ih * c.iw * c.c) * sizeof(float));
  return l.total();
}

bool RunConvNhwcF32(const void* state, const ConvNhwcF32Call& c) {
  if (!state) return false;
  const ConvNhwcF32State& s = *static_cast<const ConvNhwcF32State*>(state);
  if (c.c != s.cg * s.group || c.kh != s.kh || c.kw != s.kw) return false;
  if (c.x_planar && (c.x_bf16 || !c.x)) return false;
  if (c.x_planar && !ReadsPlanes(s, c) && c.n > 0 && c.oh * c.ow > 0) {
    ConvNhwcF32Call inner = c;
    inner.x_planar = false;
    const size_t copy = PlanarCopyBytes(c);
    inner.scratch = ScratchSpan{};
    const size_t rest = ConvNhwcF32Scratch(state, inner);
    const ScratchRegion region(c.scratch, copy + rest);
    float* const x = region.at<float>(0);
    const int64_t pixels = c.ih * c.iw;
    ParallelFor(PoolForWork(c.pool, c.n * pixels * c.c * 8), c.n * pixels,
                [&](int64_t p0, int64_t p1, int) {
                  // Runs of pixels within one image.
                  for (int64_t p = p0; p < p1;) {
                    const int64_t b = p / pixels, i = p % pixels;
                    const int64_t run = std::min(p1 - p, pixels - i);
                    InterleaveRow(*s.k, c.x + b * c.c * pixels + i, pixels, c.c, run, x + p * c.c);
                    p += run;
                  }
                });
    inner.x = x;
    inner.scratch = ScratchSpan{region.data() + copy, rest, true};
    return RunConvNhwcF32(state, inner);
  }
  if (s.depthwise && (c.residual || c.residual_bf16)) return false;
  if (c.x_bf16 || c.y_bf16 || c.residual_bf16) {
    const Bf16Io io = ConvNhwcF32Bf16Io(state, c);
    if ((c.x_bf16 && !io.x) || (c.y_bf16 && !io.y) || (c.residual_bf16 && !io.residual))
      return false;
  }
  const char* method = ConvNhwcF32Method(state, c);
  if (method[0] == 'n') return false;
  if (c.n == 0 || c.oh * c.ow == 0) return true;  // empty output
  if (method[0] == 'f')
    RunConvNhwcFp16(s.fp16.get(), c);
  else if (method[0] == 'b')
    RunBf16(s, c);
  else if (method[0] == 'd')
    RunDepthwise(s, c);
  else if (method[0] != 'w')
    RunIgemm(s, c);
  else if (!RunWinograd(s, c))
    // An output came out NaN or infinite: the transforms may have carried it
    // to outputs whose windows lack it, or made NaN of infinities the direct
    // sums keep. Those give each output its own IEEE value.
    RunIgemm(s, c);
  return true;
}

size_t ConvNhwcF32Scratch(const void* state, const ConvNhwcF32Call& c) {
  if (!state) return 0;
  const ConvNhwcF32State& s = *static_cast<const ConvNhwcF32State*>(state);
  if (c.c != s.cg * s.group || c.kh != s.kh || c.kw != s.kw) return 0;
  if (c.n == 0 || c.oh * c.ow == 0) return 0;
  if (c.x_planar && !ReadsPlanes(s, c)) {
    ConvNhwcF32Call inner = c;
    inner.x_planar = false;
    return PlanarCopyBytes(c) + ConvNhwcF32Scratch(state, inner);
  }
  const char* method = ConvNhwcF32Method(state, c);
  if (method[0] == 'n') return 0;
  if (method[0] == 'f') return ConvNhwcFp16Scratch(s.fp16.get(), c);
  if (method[0] == 'b') return Bf16ScratchFor(s, c).Bytes(NumThreads(Bf16Pool(s, c)));
  if (method[0] == 'd') return DepthwiseScratch(s, c).Bytes(NumThreads(DepthwisePool(s, c)));
  if (method[0] == 'w') {
    const size_t winograd = WinogradScratch(s).Bytes(NumThreads(WinogradPool(s, c)));
    // It may fall back to the direct sums (RunWinograd).
    return std::max(winograd, IgemmScratch(s, c).Bytes(NumThreads(IgemmPool(s, c))));
  }
  return IgemmScratch(s, c).Bytes(NumThreads(IgemmPool(s, c)));
}

const char* ConvNhwcF32Method(const void* state, const ConvNhwcF32Call& c) {
  const ConvNhwcF32State& s = *static_cast<const ConvNhwcF32State*>(state);
  if (s.fp16) return "fp16";
  if (s.bf16) return s.bf16_rows && c.dw != 1 ? "none" : "bf16";
  if (s.depthwise) return "depthwise";
  if (!s.winograd_u.empty() && c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1)
    return s.winograd_tile == 4 ? "winograd4x4" : "winograd";
  return "igemm";
}

}  // namespace kernels
}  // namespace qfold
