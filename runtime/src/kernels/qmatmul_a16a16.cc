// The a16 x a16 QLinearMatMul driver (qmatmul_a16a16.h): packs B into byte
// planes per call (B is an activation), copies A's rows as int16 padded to
// whole pairs (both in the caller's planned scratch), runs the microkernel over 4-row by 8-column
// tiles and folds the zero points in with A's row sums and B's column sums, all in int64.
#include "kernels/qmatmul_a16a16.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernel_config.h"
#include "kernels/scratch.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
void A16A16GemmAvx2(const int16_t* const* a, const int16_t* lo, const int16_t* hi, int64_t kpairs,
                    int64_t* out);
namespace {
const A16A16Kernels kA16A16Avx2 = {A16A16GemmAvx2};
}  // namespace
#elif defined(__aarch64__)
extern const A16A16GemmFn kA16A16GemmNeon;  // qmatmul_a16a16_neon.cc
namespace {
const A16A16Kernels kA16A16Neon = {kA16A16GemmNeon};
}  // namespace
#endif

const A16A16Kernels* A16A16KernelsFor(const CpuFeatures& f, const char** variant) {
  const A16A16Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) {
    k = &kA16A16Avx2;
    name = "avx2";
  }
#elif defined(__aarch64__)
  if (f.asimd) {  // smlal on plain Armv8.0 NEON
    k = &kA16A16Neon;
    name = "neon";
  }
#else
  (void)f;
#endif
  if (variant) *variant = name;
  return k;
}

namespace {

// What an operand's elements are shifted by to fit int16 (uint16 only).
int32_t Offset(DType t) {
  return t == DType::kUInt16 ? 32768 : 0;
}

int32_t Load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kInt8:
      return static_cast<const int8_t*>(p)[i];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(p)[i];
    default:
      return static_cast<const uint16_t*>(p)[i];
  }
}

// Where MatMulA16A16's parts go, alike for the request and the call.
struct A16A16Parts {
  ScratchLayout layout;
  size_t lo = 0, hi = 0, col_sum = 0, a16 = 0, row_sum = 0;
  int64_t kpairs = 0, panels = 0, panel_elems = 0;
};

A16A16Parts PlanA16A16(int64_t rows, int64_t k, int64_t n) {
  A16A16Parts p;
  p.kpairs = (k + 1) / 2;
  p.panels = (n + kA16A16Cols - 1) / kA16A16Cols;
  p.panel_elems = p.kpairs * kA16A16Cols * 2;
  const size_t plane = size_t(p.panels * p.panel_elems) * sizeof(int16_t);
  p.lo = p.layout.Add(plane);
  p.hi = p.layout.Add(plane);
  p.col_sum = p.layout.Add(size_t(n) * sizeof(int64_t));
  p.a16 = p.layout.Add(size_t(rows * p.kpairs * 2) * sizeof(int16_t));
  p.row_sum = p.layout.Add(size_t(rows) * sizeof(int64_t));
  return p;
}

}  // namespace

size_t MatMulA16A16Scratch(int64_t rows, int64_t k, int64_t n) {
  if (rows <= 0 || n <= 0) return 0;
  return PlanA16A16(rows, k, n).layout.total();
}

bool MatMulA16A16(const KernelConfig& kc, const void* a, DType at, int32_t a_zp, int64_t rows,
                  int64_t k, const void* b, DType bt, const std::vector<int32_t>& b_zp, int64_t n,
                  int64_t* acc, uint8_t* scratch, ThreadPool* pool) {
  const A16A16Kernels* kern = kc.a16a16;
  if (!kern || rows <= 0 || n <= 0) return kern != nullptr;
  const A16A16Parts parts = PlanA16A16(rows, k, n);
  const int64_t kpairs = parts.kpairs, panels = parts.panels, panel_elems = parts.panel_elems;
  // B' = B - offset split into byte planes, [panel][pair][column][2]; pads are 0.
  int16_t* lo = reinterpret_cast<int16_t*>(scratch + parts.lo);
  int16_t* hi = reinterpret_cast<int16_t*>(scratch + parts.hi);
  int64_t* col_sum = reinterpret_cast<int64_t*>(scratch + parts.col_sum);
  std::fill(lo, lo + panels * panel_elems, int16_t(0));
  std::fill(hi, hi + panels * panel_elems, int16_t(0));
  std::fill(col_sum, col_sum + n, int64_t(0));
  const int32_t b_off = Offset(bt);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t v = Load(b, bt, kk * n + j) - b_off;  // in [-32768, 32767]
      const size_t slot = size_t((j / kA16A16Cols) * panel_elems +
                                 ((kk / 2) * kA16A16Cols + j % kA16A16Cols) * 2 + kk % 2);
      lo[slot] = int16_t(v & 0xff);
      hi[slot] = int16_t(v >> 8);  // arithmetic: v = 256 * hi + lo
      col_sum[j] += v;
    }
  // A' rows padded to whole pairs (the pad pairs with B's zero pad).
  const int64_t lda = kpairs * 2;
  int16_t* a16 = reinterpret_cast<int16_t*>(scratch + parts.a16);
  int64_t* row_sum = reinterpret_cast<int64_t*>(scratch + parts.row_sum);
  std::fill(row_sum, row_sum + rows, int64_t(0));
  const int32_t a_off = Offset(at);
  for (int64_t i = 0; i < rows; ++i) {
    if (lda > k) a16[i * lda + k] = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t v = Load(a, at, i * k + kk) - a_off;
      a16[i * lda + kk] = int16_t(v);
      row_sum[i] += v;
    }
  }
  // sum (a - za)(b - zb) = sum a'b' - zb' sum a' - za' sum b' + k za' zb'
  // with za' = za - a_off, zb' = zb - b_off (a - za = a' - za').
  const int64_t za = int64_t(a_zp) - a_off;
  const int64_t row_blocks = (rows + 3) / 4;
  ParallelFor(
      row_blocks * panels > 8 ? pool : nullptr, row_blocks, [&](int64_t rb0, int64_t rb1, int) {
        int64_t tile[4 * kA16A16Cols];
        for (int64_t rb = rb0; rb < rb1; ++rb) {
          const int64_t i0 = rb * 4, nr = std::min<int64_t>(4, rows - i0);
          const int16_t* rows_a[4];
          for (int r = 0; r < 4; ++r)  // missing rows repeat the first; ignored
            rows_a[r] = a16 + (i0 + (r < nr ? r : 0)) * lda;
          for (int64_t p = 0; p < panels; ++p) {
            kern->gemm(rows_a, lo + p * panel_elems, hi + p * panel_elems, kpairs, tile);
            const int64_t j0 = p * kA16A16Cols, nc = std::min<int64_t>(kA16A16Cols, n - j0);
            for (int64_t r = 0; r < nr; ++r)
              for (int64_t c = 0; c < nc; ++c) {
                const int64_t j = j0 + c;
                const int64_t zb = int64_t(b_zp.size() == 1 ? b_zp[0] : b_zp[size_t(j)]) - b_off;
                acc[(i0 + r) * n + j] = tile[r * kA16A16Cols + c] - zb * row_sum[i0 + r] -
                                        za * col_sum[j] + k * za * zb;
              }
          }
        }
      });
  return true;
}

}  // namespace kernels
}  // namespace qfold
