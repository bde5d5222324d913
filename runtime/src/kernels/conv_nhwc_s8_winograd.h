// Exact integer Winograd F(2x2, 3x3) for channels-last 8-bit convolutions
// (conv_nhwc_s8.cc), for kernels whose products are 16-bit (vpmaddwd on
// AVX2, smull on Armv8.0 NEON), where VNNI and sdot multiply 4 k per lane:
// there 16 multiplications per 2x2 output tile and channel pair instead of
// 36 pay for the transforms. Per tile, with d the 4x4 patch of (x - x_zp) (padding
// is x_zp, hence 0), g a channel's 3x3 filter of (w - w_zp):
//   V = B^T d B                 |V| <= 4 * 255          (int16)
//   U = G' g G'^T, G' = 2G      |U| <= 9 * max|w - w_zp| (int16, at prepare)
//   M[xi] = sum_c V[xi][c] U[xi][c][m]   (16 GEMMs, int32 with wraparound)
//   4 * acc = A^T M A
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G' = [2 0 0; 1 1 1;
// 1 -1 1; 0 0 2], A^T = [1 1 1 0; 0 1 -1 -1]. Every step is integer, so
// A^T M A is 4 times the direct sum exactly (modulo 2^32); where
// 255 * sum |w - w_zp| < 2^29 for every channel (checked at prepare) that
// sum fits in 30 bits and the shift by 2 recovers it: the result equals the
// reference's accumulator, then bias and requantization as Requantize, bit
// for bit.
#pragma once
#include <cstdint>

namespace qfold {
namespace kernels {

struct WinogradS8Transforms {
  // V of one tile for channels [0, c), zeros in [c, cp) (cp a multiple of
  // 4): patch pixel i (row-major) at d[i], null in the padding; x's bytes
  // are xor-ed with xmask (int8 to u8 values) and x_zp_u subtracted.
  // V[xi][ch] goes to v[xi * v_stride + ch].
  void (*input)(const uint8_t* const* d, int64_t c, int64_t cp, uint8_t xmask, int32_t x_zp_u,
                int16_t* v, int64_t v_stride);
  // Outputs of one tile for channels [0, m): M[xi][ch] at m_sums[xi *
  // m_stride + ch]; acc = (A^T M A) / 4 + bias[ch], then
  // clamp(nearbyint(float(acc) * mult[ch]) + yzp, lo, hi) as a byte to
  // y[a * 2 + e][ch] (null: outside the output, skipped).
  void (*output)(const int32_t* m_sums, int64_t m_stride, int64_t m, const int32_t* bias,
                 const float* mult, int32_t yzp, int32_t lo, int32_t hi, uint8_t* const* y);
  // The same for QfConvDequant's float output: acc = (A^T M A) / 4 (no
  // int32 bias), clamp(fma(float(acc), mult[ch], bias[ch]), lo, hi) to
  // y[a * 2 + e][ch], as the igemm kernels' float epilogue.
  void (*output_float)(const int32_t* m_sums, int64_t m_stride, int64_t m, const float* mult,
                       const float* bias, float lo, float hi, float* const* y);
  // One position's GEMM for one panel of kWinogradNr channels, where the
  // convolution's own microkernel cannot run it (null: an igemm kernel does,
  // in its raw mode, on panels in its own layout; AVX2:
  // kIgemmS8Avx2Winograd, 16 channels by k pairs): rows [0, rows) of V at v + r * cp,
  // weights packed as the igemm panels with 16-bit weights
  // ([cp / 4][kWinogradNr][4] int16), the first `cols` channels' int32 sums
  // to out[r * ldo + j].
  void (*gemm)(const int16_t* v, int64_t rows, int64_t cp, const uint8_t* w, int64_t cols,
               int32_t* out, int64_t ldo);
};

// Channels per packed panel of transformed filters where `gemm` runs them.
constexpr int kWinogradNr = 8;

#if defined(__x86_64__)
extern const WinogradS8Transforms kWinogradS8Avx2;
#elif defined(__aarch64__)
// Armv8.0 NEON (no dotprod): the direct sums' smull + sadalp do 16 MACs in 4
// instructions, the transformed ones' smlal 8 in 2, on 16/36 of the products.
extern const WinogradS8Transforms kWinogradS8Neon;
#endif

}  // namespace kernels
}  // namespace qfold
