// Channels-last fp32 convolution (2-D): x [N, H, W, C], y [N, OH, OW, M],
// for Conv nodes the converter's layout planning marked channels_last = 1.
//
// Every convolution but depthwise runs as an indirect GEMM: the weights are
// packed once into panels of nr output channels, [kh * kw * C/group][nr],
// and the microkernel reads the activations in place through one pointer
// per (output pixel, kernel tap) to the tap's C/group input values (a zero
// row where the tap reads padding). No im2col copy is made, which is what
// keeps convolutions with few output channels (a K x K conv to 24 channels)
// from spending more time packing than multiplying; a 1x1 convolution is a
// plain GEMM on the [pixels x C] activation tensor.
// Depthwise (one input and one output channel per group) vectorizes across
// channels with weights packed [kh * kw][C].
//
// 3x3 stride-1 convolutions with enough channels (WinogradTile) run as
// Winograd F(4x4, 3x3) (36 multiplications per 4x4 output tile and channel
// pair instead of 144, through 36 GEMMs on the same microkernel) or, where
// its larger filters would cost more than it saves (WinogradTile), F(2x2,
// 3x3) (16 instead of 36); the filters are transformed at prepare.
// docs/NUMERICS.md bounds the difference from the direct sums. F(4x4)'s
// transforms carry a NaN or infinity to outputs whose windows lack it: such
// a call runs again as the direct sums.
//
// Every output element sums its taps in the same order (tap-major, then
// channel; for Winograd the same transforms and channel order) in one
// accumulator started at 0, then adds the bias and applies the epilogue
// activation, whatever the tile or thread that computes it: results are
// identical for every thread count.
#pragma once
#include <cstdint>
#include <memory>

#include "core/activation.h"
#include "core/tensor.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_f32.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h
struct Fp16Kernels;   // igemm_fp16.h

// One tile of the indirect GEMM: `rows` (<= mr) output pixels by one panel
// of `cols` (<= nr) output channels.
//   y[r * ldy + j] = act(bias[j] + sum_{t < taps, ch < c} a[t * mr + r][ch] * w[(t * c + ch) * nr +
//   j] + residual[r * ldy + j])
// a holds taps * mr pointers; rows past `rows` must still point at c
// readable floats (the driver repeats a valid row). w is zero past `cols`.
struct IgemmF32Args {
  const float* const* a = nullptr;
  int64_t rows = 0, taps = 0, c = 0;
  const float* w = nullptr;
  int64_t cols = 0;
  const float* bias = nullptr;      // cols values, or null
  const float* residual = nullptr;  // laid out as y, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
  // Bytes to fetch into L2 while the tile runs (the next panel's weights,
  // which a 7x7 stage's few tiles would otherwise wait for from memory), or
  // none; one 64-byte line per weight row at most. A hint: kernels may ignore it.
  const void* prefetch = nullptr;
  int64_t prefetch_bytes = 0;
};

// `pixels` output pixels of a depthwise convolution:
//   y[p * ldy + ch] = act(bias[ch] + sum_{t < taps} a[p * taps + t][ch] * w[t * c + ch])
// or, with a_step != 0 (a run of pixels whose windows are a fixed step
// apart, as inside a row), a holds the first pixel's taps only:
//   y[p * ldy + ch] = act(bias[ch] + sum_{t < taps} a[t][p * a_step + ch] * w[t * c + ch])
struct DwNhwcF32Args {
  const float* const* a = nullptr;
  int64_t a_step = 0;
  int64_t pixels = 0, taps = 0, c = 0;
  const float* w = nullptr;
  const float* bias = nullptr;  // c values, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
};

// A run of `pixels` output pixels of one output row whose windows lie inside
// the input's width, of a depthwise convolution:
//   y[p * ldy + ch] = act(bias[ch] + sum_{ky, kx} rows[ky][(p * sw + kx * dw) * c + ch]
//                                                 * w[(ky * kw + kx) * c + ch])
// rows[ky] points at the first pixel's window in kernel row ky, or is null
// where that kernel row reads padding (it adds nothing). The taps are summed
// in the same order as DwNhwcF32Args' (kernel row, then column).
struct DwRunF32Args {
  const float* const* rows = nullptr;
  int64_t kh = 0, kw = 0, sw = 1, dw = 1;
  int64_t pixels = 0, c = 0;
  const float* w = nullptr;
  const float* bias = nullptr;  // c values, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
};

// A run of `pixels` output pixels of one output row, by one panel of `cols`
// (<= nr) channels, of a convolution without groups or dilation reading a
// zero-padded plane (every window inside it): kernel row ky of pixel p reads
// the kw * c floats at x + ky * x_row + p * sw * c, and
//   y[p * ldy + j] = act(bias[j] + sum_{ky, kx, ch} x[ky * x_row + (p * sw + kx) * c + ch]
//                                                * w[((ky * kw + kx) * c + ch) * nr + j])
// with the terms summed in the indirect GEMM's order (kernel row, column,
// channel); w is the GEMM's packed panel.
struct StemRunF32Args {
  const float* x = nullptr;
  int64_t x_row = 0;
  int64_t kh = 0, kw = 0, sw = 1, c = 0, pixels = 0;
  const float* w = nullptr;
  int64_t nr = 0, cols = 0;
  const float* bias = nullptr;  // cols values, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
};

// The geometries stem runs have (conv_f32_nhwc_stem.h): 1- and 3-channel
// kernel rows of 3, 5 or 7 columns at width stride 1 or 2.
inline bool StemRunSupports(int64_t kw, int64_t sw, int64_t c) {
  return (kw == 3 || kw == 5 || kw == 7) && (sw == 1 || sw == 2) && (c == 1 || c == 3);
}

struct ConvNhwcF32Kernels {
  // The features it needs ("avx2" = AVX2 + FMA; "avx512f" = those + AVX-512F; "neon" =
  // Armv8.0 Advanced SIMD; "portable").
  const char* name;
  int mr, nr;
  void (*igemm)(const IgemmF32Args& args);
  void (*dw)(const DwNhwcF32Args& args);
  // Winograd F(2x2, 3x3) transforms of c channels of one tile
  // (conv_f32_nhwc_winograd.h). In: d holds the 4x4 patch's pixel pointers,
  // row-major; writes v[xi * v_stride + ch]. Out: reads m[xi * m_stride + ch],
  // writes act(bias + Y + r) to y[0..3] (the 2x2 tile, row-major; null:
  // outside), r from res[0..3] (res itself may be null: no residual); false
  // when a value it stored (before the activation) is not finite. (These
  // transforms keep a NaN of the patch out of outputs whose windows lack it,
  // but two infinities subtracted make NaN where the direct sums are
  // infinite.)
  void (*winograd_in)(const float* const* d, int64_t c, float* v, int64_t v_stride);
  bool (*winograd_out)(const float* m, int64_t m_stride, int64_t c, const float* bias, F32Act act,
                       float lo, float hi, const float* const* res, float* const* y);
  // Depthwise runs with each input column loaded once for the several
  // outputs whose windows share it (a 5x5's 25 taps load 12 columns a row
  // for 8 pixels, not 25 vectors a pixel); false, or null: the kernel size,
  // stride or dilation is not one it has, and the driver calls dw instead.
  bool (*dw_run)(const DwRunF32Args& args) = nullptr;
  // Stem runs (StemRunF32Args) of the geometries StemRunSupports accepts, or
  // null; nr is two vectors.
  void (*stem_run)(const StemRunF32Args& args) = nullptr;
  // Winograd F(4x4, 3x3) transforms, as winograd_in/out with the 6x6 patch's
  // 36 pointers and a 4x4 tile of 16 outputs (conv_f32_nhwc_winograd.h).
  // These carry a NaN or infinity of the patch into outputs whose windows do
  // not hold it.
  void (*winograd4_in)(const float* const* d, int64_t c, float* v, int64_t v_stride) = nullptr;
  bool (*winograd4_out)(const float* m, int64_t m_stride, int64_t c, const float* bias, F32Act act,
                        float lo, float hi, const float* const* res, float* const* y) = nullptr;
  // `width` pixels of three planes `plane` floats apart (an RGB input read
  // channels-first, ConvNhwcF32Call::x_planar) into dst [width][3], or null
  // (the driver's plain loop).
  void (*interleave3)(const float* src, int64_t plane, int64_t width, float* dst) = nullptr;
};

// The variant `f` allows, or nullptr without any SIMD feature (the op then
// runs its channels-first reference kernel between transposes).
const ConvNhwcF32Kernels* ConvNhwcF32For(const CpuFeatures& f, const char** variant = nullptr);

// What every bf16 kernel call writes (IgemmBf16Args, PlaneBf16Args): one
// panel of `cols` <= 32 output channels, w's columns (zero past cols),
//   y[p * ldy + j] = post(act(bias[j] + sum + residual[p * ldy + j]))
// with bf16 products summed in fp32 accumulators (not bit-exact against any
// other order of the sums).
struct Bf16Output {
  const uint16_t* w = nullptr;
  int64_t cols = 0;
  const float* bias = nullptr;      // cols values, or null
  const float* residual = nullptr;  // laid out as y, or null
  F32Act act = F32Act::kNone;
  float lo = 0.f, hi = 0.f;
  float* y = nullptr;
  int64_t ldy = 0;
  // Stored bf16 activations (ConvNhwcF32Call::y_bf16, residual_bf16): set
  // instead of y / residual, same layout; y is rounded to nearest even.
  uint16_t* y_bf16 = nullptr;
  const uint16_t* residual_bf16 = nullptr;
  // post: HardSwish after the activation (a fused FusedActivation::kHardSwish
  // with act kNone), then with hswish_affine y * scale + shift, each step
  // rounded as vmath's hardswish rounds it; else nothing.
  bool hswish = false, hswish_affine = false;
  float hswish_scale = 1.f, hswish_shift = 0.f;
  // The next call's weights (the next panel), `next_values` bf16 values to
  // fetch into L2 while this call runs, or null.
  const uint16_t* next_w = nullptr;
  int64_t next_values = 0;
};

// bf16 reduced precision (SessionOptions::precision), taps through pointers
// (1x1 convolutions with pads, groups, dilation across the width): the
// driver copies x once per run into bf16 rows of kc channels (C rounded up
// to 32, to nearest even, zeros past C), and the sum is
//   sum_{t < taps, ch < kc} a[t * 32 + r][ch] * w[t][ch][j]
// for `rows` pixels (32 per tile, every tile's taps * 32 pointers in turn;
// rows past `rows` point at readable rows), w [taps][kc / 2][32][2] bf16.
struct IgemmBf16Args : Bf16Output {
  const uint16_t* const* a = nullptr;
  int64_t rows = 0, taps = 0, kc = 0;
  // The values of a row before its zero padding (kv <= kc; 0: kc): a kernel
  // that can may skip the rest, whose weights are zero.
  int64_t kv = 0;
};
// bf16 mode, a convolution without groups or dilation across the width on
// a zero-padded bf16 plane [ph][pw][c] of one image: output pixel (oy, ox)
// reads kernel row ky as the kw * c values at
//   x + (oy * row_step + ox * pixel_step) + ky * kernel_row
// (row_step = sh * pw * c, pixel_step = sw * c, kernel_row = dh * pw * c),
// one k block of 32 values after another (kc of them a row, the last block's
// values past kw * c multiplied by the zero weights past them), against w
// packed [kh][kc / 2][32][2]. The kernel walks *positions* v = oy * vw + ox,
// vw >= ow per output row, in tiles of 32 from v0 (a multiple of 32) to v1,
// each A tile's 16 rows loaded in place at a stride of pixel_step: so
// either vw is a multiple of 16 (a tile stays in one output row) or
// row_step == vw * pixel_step (the rows run on across output rows; a
// stride-1 convolution with vw = pw). Positions with ox >= ow or oy >= oh
// read whatever lies there and are not stored. Output pixel p = oy * ow + ox
// goes to y[(p - p0) * ldy + j] (Bf16Output).
struct PlaneBf16Args : Bf16Output {
  const uint16_t* x = nullptr;
  int64_t pixel_step = 0, row_step = 0, kernel_row = 0;
  int64_t vw = 0, oh = 0, ow = 0, v0 = 0, v1 = 0;
  int64_t kh = 0, kc = 0;
  int64_t p0 = 0;
  // As IgemmBf16Args::kv: the values of a kernel row (kw * c) or an im2col
  // row; a kernel that skips the rest also skips the next pixels' values a
  // kernel row's last block would read.
  int64_t kv = 0;
};
// `count` output pixels' windows from a bf16 plane (as PlaneBf16Args'), the
// first at (oy, ox), rows of ow pixels: out[i * kc ...] = the kh kernel rows'
// kw * c values side by side, zeros up to kc; rows count..rows - 1 zeros.
struct Im2colBf16Args {
  const uint16_t* plane = nullptr;
  int64_t pw = 0, c = 0, kh = 0, kw = 0, sh = 1, sw = 1, dh = 1;
  int64_t oy = 0, ox = 0, ow = 0, count = 0, rows = 0, kc = 0;
  uint16_t* out = nullptr;
};
struct ConvNhwcBf16Kernels {
  const char* name;  // the features it needs ("amx_bf16", "avx512bf16")
  // x [pixels][c] fp32 -> out [pixels][kc] bf16 (rounded to nearest even; zeros past c).
  void (*convert)(const float* x, int64_t pixels, int64_t c, uint16_t* out, int64_t kc);
  // n values, nothing past them written.
  void (*convert_flat)(const float* x, int64_t n, uint16_t* out);
  // bf16 -> fp32 (exact), n values.
  void (*widen)(const uint16_t* x, int64_t n, float* out);
  void (*igemm)(const IgemmBf16Args& args);
  void (*plane)(const PlaneBf16Args& args);
  void (*im2col)(const Im2colBf16Args& args);
  // `pixels` pixels of c values, x32[p * x_step] (fp32) or x16[p * x_step]
  // (bf16, when x32 is null) -> out[p * kc], bf16 (rounded to nearest even),
  // zeros from c to kc.
  void (*gather_rows)(const float* x32, const uint16_t* x16, int64_t pixels, int64_t x_step,
                      int64_t c, uint16_t* out, int64_t kc);
  // Per-thread state around the igemm calls of one range of work (null:
  // none), as IgemmS8Kernel's (igemm_s8.h): the AMX tile configuration.
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
  // About how many times the fp32 kernels' multiply-adds a cycle these
  // kernels do: a call's work, divided by it, decides whether threads pay.
  int64_t speedup = 1;
  // im2col rows (RGB stems) from this many output channels (per group) on;
  // fewer stay fp32, whose stem runs were faster there.
  int64_t im2col_min_m = 0;
};
// The bf16 variant `f` allows (AMX-BF16, else AVX-512 BF16), or nullptr (then
// convolutions stay fp32).
const ConvNhwcBf16Kernels* ConvNhwcBf16For(const CpuFeatures& f, const char** variant = nullptr);
// bf16 as the kernels round it (to nearest even; NaN stays NaN), and back.
uint16_t Bf16FromFloat(float v);
float FloatFromBf16(uint16_t v);

// The plain C++ variant (tests run it on x86 too).
const ConvNhwcF32Kernels* ConvNhwcF32Portable();

// Packs W [M, C/group, kh, kw] for `k`; null when W is not a 4-D float32
// tensor or group does not divide M.
// With `bf16` (non-null) a convolution runs in bf16 instead where that pays:
// at least 16 input channels per group, or fewer without groups when a
// kernel row holds at least 16 values; the rest stay fp32. Kernels wider
// than 1 without groups or dilation across the width (`dilation_w`, which
// every call must then have) run as kernel rows on a padded plane
// (PlaneBf16Args: 16 channels 3 wide fill 2 k blocks a row instead of 3);
// others as taps of C values.
// With `fp16` (non-null) every convolution but depthwise runs in fp16
// instead (igemm_fp16.h); it takes precedence over bf16.
// `output_pixels` (oh * ow of the shapes at prepare, 0 when unknown; -1
// for strides or dilations other than 1, which never run Winograd) picks
// the Winograd tile (WinogradTile): calls of other sizes stay correct.
std::shared_ptr<void> PrepareConvNhwcF32(const ConvNhwcF32Kernels* k, const Tensor& w,
                                         int64_t group, const ConvNhwcBf16Kernels* bf16 = nullptr,
                                         const Fp16Kernels* fp16 = nullptr, int64_t dilation_w = 1,
                                         int64_t output_pixels = 0);

struct ConvNhwcF32Call {
  const float* x = nullptr;     // [n, ih, iw, c], or [n, c, ih, iw] with x_planar
  float* y = nullptr;           // [n, oh, ow, m]
  const float* bias = nullptr;  // m values or null
  // [n, oh, ow, m] added before the activation (the converter's fused
  // residual Add), or null; not supported by depthwise (the call fails).
  const float* residual = nullptr;
  int64_t n = 1, c = 1, ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  F32Act act = F32Act::kNone;  // fused into the epilogue
  float lo = 0.f, hi = 0.f;
  const FusedActivation* post = nullptr;  // other activations, applied after; may be null
  ThreadPool* pool = nullptr;             // null: the calling thread only
  ScratchSpan scratch;                    // KernelContext::scratch
  // bf16 mode's activations stored as bfloat16 (the session's choice,
  // ConvNhwcF32Bf16Io): each set pointer replaces the float one of the same
  // name, which is then null. Only the bf16 method takes them.
  const uint16_t* x_bf16 = nullptr;
  uint16_t* y_bf16 = nullptr;
  const uint16_t* residual_bf16 = nullptr;
  // x (float) is channels-first, as a graph input is (the converter's
  // FuseConvInputTranspose): a convolution of few channels that reads a
  // padded copy of x makes that copy from the planes; others transpose x
  // into their scratch first.
  bool x_planar = false;
};
// Which of x, y and the residual RunConvNhwcF32 can take as bfloat16 for
// this call (the bf16 method: all three, `post` applied to a block's fp32
// outputs before they are rounded; depthwise: y, rounded per output row;
// its x stays fp32, since rounding it is a rounding the fp32-stored plan
// does not have: PP-OCRv4 det's cosine on a text page 0.99945 -> 0.99883).
struct Bf16Io {
  bool x = false, y = false, residual = false;
};
Bf16Io ConvNhwcF32Bf16Io(const void* state, const ConvNhwcF32Call& call);
// False when the prepared weights do not match the call's C or kernel size.
// Its scratch (tap pointers, a row of zeros, Winograd's blocks, per thread)
// is call.scratch when planned (ConvNhwcF32Scratch), else allocated here.
bool RunConvNhwcF32(const void* state, const ConvNhwcF32Call& call);
// The scratch bytes RunConvNhwcF32(state, call) uses (shapes and pool only).
size_t ConvNhwcF32Scratch(const void* state, const ConvNhwcF32Call& call);

// How RunConvNhwcF32 computes `call`: "depthwise", "winograd" (F(2x2, 3x3)),
// "winograd4x4", "igemm", "bf16" or "fp16"
// (for tests and diagnostics); "none" for a call the prepared weights cannot
// take (a bf16 kernel-row packing called with dilation across the width).
const char* ConvNhwcF32Method(const void* state, const ConvNhwcF32Call& call);

}  // namespace kernels
}  // namespace qfold
