// Fast paths of QLinearConv and QLinearMatMul on top of the packed GEMM
// (gemm_s8.h) and a depthwise kernel. The ops' prepare builds the state
// from the constant weights once; run calls RunQ*S8, which returns false
// when the case is not covered (the op then runs its reference kernel, which
// stays the oracle: results are bit-identical, docs/NUMERICS.md).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/op.h"
#include "core/tensor.h"
#include "kernels/const_span.h"
#include "kernels/scratch.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h

// Packs W [M, C/group, kh(, kw)] (int8/uint8) for kc's kernels. Returns
// null when no fast kernel applies (reference configuration, other ranks).
std::shared_ptr<void> PrepareQConvS8(const KernelConfig& kc, const Tensor& w, int64_t group);

// One QLinearConv call, 1-D or 2-D (a 1-D convolution is passed as height 1).
struct QConvCall {
  const Tensor* x = nullptr;  // [N, C, ih, iw], int8/uint8
  Tensor* y = nullptr;        // [N, M, oh, ow], int8/uint8
  int64_t ih = 1, iw = 1, oh = 1, ow = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  int32_t x_zp = 0;
  std::vector<int32_t> w_zp;  // 1 or M values
  float x_scale = 1, y_scale = 1;
  std::vector<float> w_scale;        // 1 or M values
  int32_t y_zp = 0, lo = 0, hi = 0;  // output zero point and clamp range
  const int32_t* bias = nullptr;     // M values or null
  ThreadPool* pool = nullptr;        // null: the calling thread only
  ScratchSpan scratch;               // KernelContext::scratch
  // QfConvDequant: y is float32, y = clamp(fma(float(acc), dq_mult[m],
  // dq_bias[m]), dq_lo, dq_hi) with acc the zero-point-corrected int32 sum
  // (y_scale, y_zp, lo, hi and bias unused). Arrays padded with readable
  // entries to a multiple of 64 plus 64. Only RunQConvNhwcS8's microkernels
  // cover it; other paths return false.
  const float* dq_mult = nullptr;
  const float* dq_bias = nullptr;
  float dq_lo = 0, dq_hi = 0;
  // ConvInteger: y is int32, the zero-point-corrected sums with int32
  // wraparound (scales, y_zp, lo, hi and bias unused). RunQConvS8 only (not
  // channels-last).
  bool int32_out = false;
};
// Runs in call.scratch when planned (QConvS8Scratch), else allocates it.
bool RunQConvS8(void* state, const QConvCall& call);
// The scratch RunQConvS8(state, call) uses (call's geometry, x's shape,
// w_zp and pool; not its data): per thread planes or im2col tiles and
// packed blocks, a group's padded input, the depthwise packed weights.
ScratchNeeds QConvS8Scratch(const void* state, const QConvCall& call);

// Packs B [K, N] or [K] (int8/uint8) of QLinearMatMul; null when not applicable.
std::shared_ptr<void> PrepareQMatMulS8(const KernelConfig& kc, const Tensor& b);

struct QMatMulCall {
  const Tensor* a = nullptr;  // [..., M, K] or [K]
  Tensor* y = nullptr;
  float a_scale = 1, y_scale = 1;
  int32_t a_zp = 0;
  // 1 or N values each, viewed (not copied: a recurrent layer's come from
  // its planned scratch); the caller keeps them alive for the call.
  ConstSpan<int32_t> b_zp;
  ConstSpan<float> b_scale;
  int32_t y_zp = 0, lo = 0, hi = 0;
  const int32_t* bias = nullptr;  // N values or null
  ThreadPool* pool = nullptr;     // null: the calling thread only
  // MatMulInteger: y holds the int32 sums sum((a - a_zp) * (b - b_zp)) with
  // int32 wraparound; the scales, y_zp, lo and hi are unused.
  bool int32_out = false;
  // MatMulIntegerToFloat (dynamic quantization): y is float32,
  // y = float(acc) * dq_mult[j] + dq_bias[j] (a product, then a sum: the
  // roundings of the unfused Cast -> Mul -> Add), acc as for int32_out.
  // dq_mult has N values, dq_bias N values or null. Prepared B only.
  const float* dq_mult = nullptr;
  const float* dq_bias = nullptr;
  // Packed A and its row sums (and an activation B's batch): planned by the
  // op (QMatMulS8Scratch, QMatMulS8UnpreparedScratch) or a caller's buffer;
  // allocated for the call when too small.
  ScratchSpan scratch;
};

// The float epilogue of QMatMulCall::dq_mult over columns [c0, c1) of `rows`
// rows: y holds the int32 sums on entry (in place, row stride ld).
void DequantizeColumns(float* y, int64_t rows, int64_t ld, int64_t c0, int64_t c1,
                       const float* mult, const float* bias);
bool RunQMatMulS8(void* state, const QMatMulCall& call);
// The scratch bytes RunQMatMulS8(state, call) uses (a's shape; not its data).
size_t QMatMulS8Scratch(const void* state, const QMatMulCall& call);

// A B [kdim, n] for the packed GEMM seen through pointers only: a prepared
// state's (QMatMulS8View), or one packed into a caller's buffer
// (PackQMatMulS8Into: a recurrent layer whose W or R is an input packs them
// per run into its planned scratch, so nothing is allocated or freed).
struct GemmS8Kernels;  // gemm_s8.h
struct QMatMulPackedB {
  const GemmS8Kernels* k = nullptr;  // null: no fast kernel for it
  DType b_dtype = DType::kUndefined;
  int64_t kdim = 0, n = 0;
  const uint8_t* packed = nullptr;  // null: shapes only (QMatMulS8Shape)
  const int32_t* sum = nullptr;
  // Folded channel values, rewritten by every call (FoldedLength(n) each).
  int32_t* fold_bias = nullptr;
  int32_t* fold_wzp = nullptr;
  float* fold_mult = nullptr;
};
QMatMulPackedB QMatMulS8View(void* state);
// Shapes only (for a scratch request); k null when kc has no kernel for it.
QMatMulPackedB QMatMulS8Shape(const KernelConfig& kc, DType b_dtype, int64_t kdim, int64_t n);
// The bytes PackQMatMulS8Into writes, 0 when it would return false.
size_t QMatMulS8PackedBytes(const KernelConfig& kc, DType b_dtype, int64_t kdim, int64_t n);
// Packs b (2-D int8/uint8) into dst (QMatMulS8PackedBytes bytes, 64-byte
// aligned); false when no fast kernel applies.
bool PackQMatMulS8Into(const KernelConfig& kc, const Tensor& b, void* dst, QMatMulPackedB* out);
bool RunQMatMulS8Packed(const QMatMulPackedB& b, const QMatMulCall& call);
size_t QMatMulS8PackedScratch(const QMatMulPackedB& b, const QMatMulCall& call);

// QLinearMatMul of two activations (attention's Q.K^T and P.V): b [K, N] or
// [..., K, N] with a's batch dims is packed batch by batch during the call,
// into call.scratch. False when not covered (1-D operands, broadcast batches).
bool RunQMatMulS8Unprepared(const KernelConfig& kc, const Tensor& b, const QMatMulCall& call);
// The scratch bytes RunQMatMulS8Unprepared(kc, b, call) uses (shapes only).
size_t QMatMulS8UnpreparedScratch(const KernelConfig& kc, const Tensor& b, const QMatMulCall& call);

}  // namespace kernels
}  // namespace qfold
