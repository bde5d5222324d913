// QLinearMatMul with two 16-bit activations (a16 x a16: attention's Q.K^T and
// P.V in 16-bit-activation models), and any mix of 8- and 16-bit operands the
// a16w8 kernel (conv_a16_nhwc.h) does not take: exact int64 sums on int16
// pairs. Both operands enter as int16 (uint16 with its sign bit flipped,
// x' = x - 32768). A product of two int16 reaches 2^30 and a pair 2^31, so B
// is split into bytes, b' = 256 * bh + bl (bl in [0, 255], bh in [-128, 127]):
// a' * bl pairs stay below 2^24 and a' * bh pairs below 2^23, so int32
// partial sums over 128 pairs are exact; they are widened into int64 after
// each 128 pairs, and sum(a' * b') = sum(a' * bl) + 256 * sum(a' * bh).
// The zero points enter through the row sums of A and the column sums of B.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"
#include "qfold/dtype.h"

namespace qfold {
namespace kernels {

class ThreadPool;     // thread_pool.h
struct KernelConfig;  // kernel_config.h

// Panel width (columns) of packed B.
constexpr int kA16A16Cols = 8;
// Pairs of k an int32 partial sum may take exactly (see above).
constexpr int64_t kA16A16Chunk = 128;

// The microkernel: out[r][c] (int64, row stride kA16A16Cols) = sum over
// kpairs pairs of a[r][2p..2p+1] . B[2p..2p+1][c] for 4 rows of a (int16,
// 2 * kpairs each) and one panel in two byte planes, lo and hi, each
// [kpairs][kA16A16Cols][2] int16.
using A16A16GemmFn = void (*)(const int16_t* const* a, const int16_t* lo, const int16_t* hi,
                              int64_t kpairs, int64_t* out);

struct A16A16Kernels {
  A16A16GemmFn gemm;
};
// The variant `f` allows (AVX2, Armv8.0 NEON), or null (the op runs its reference kernel).
const A16A16Kernels* A16A16KernelsFor(const CpuFeatures& f, const char** variant);

// The scratch MatMulA16A16 needs for these sizes: B's byte planes and column
// sums, A's rows as int16 and their sums (64-byte aligned parts). The caller
// plans it (OpDef::scratch), so a call allocates nothing.
size_t MatMulA16A16Scratch(int64_t rows, int64_t k, int64_t n);

// acc[i][j] = sum_k (a[i][k] - a_zp) * (b[k][j] - b_zp[j]) exactly, for a
// [rows, k] and b [k, n] of any 8- or 16-bit integer dtypes (b_zp: 1 or n
// values), with `scratch` 64-byte aligned and MatMulA16A16Scratch(rows, k,
// n) bytes long. False when kc has no kernel.
bool MatMulA16A16(const KernelConfig& kc, const void* a, DType at, int32_t a_zp, int64_t rows,
                  int64_t k, const void* b, DType bt, const std::vector<int32_t>& b_zp, int64_t n,
                  int64_t* acc, uint8_t* scratch, ThreadPool* pool);

}  // namespace kernels
}  // namespace qfold
