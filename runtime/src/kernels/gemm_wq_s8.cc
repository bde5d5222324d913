// Weight-only 4-bit GEMM with int8 activations (gemm_wq_s8.h): packing,
// A's quantization, the driver, the portable variant and the choice of variant.
#include "kernels/gemm_wq_s8.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/gemm_f32.h"
#include "kernels/gemm_wq_s8_impl.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const GemmWqS8Kernels kGemmWqS8Avx2;
extern const GemmWqS8Kernels kGemmWqS8Avx512Vnni;
#endif
#if defined(__aarch64__)
extern const GemmWqS8Kernels kGemmWqS8Neon;
#endif

namespace {

// One column a lane; U holds a column's 4 codes.
struct ScalarLane {
  static constexpr int kAccumulators = 16;
  static constexpr int kLanes = 1;
  using I = int32_t;
  using F = float;
  struct U {
    uint8_t c[4];
  };
  static I Zero() { return 0; }
  static F ZeroF() { return 0.f; }
  static void Unpack(const uint8_t* w, U* lo, U* hi) {
    for (int j = 0; j < kWqS8Nr; ++j)
      for (int t = 0; t < 4; ++t) {
        lo[j].c[t] = uint8_t(w[4 * j + t] & 15);
        hi[j].c[t] = uint8_t(w[4 * j + t] >> 4);
      }
  }
  static I Dot(I acc, U u, int32_t a4) {
    for (int t = 0; t < 4; ++t) acc += int32_t(u.c[t]) * int32_t(int8_t(uint32_t(a4) >> (8 * t)));
    return acc;
  }
  static F Block(I acc, const uint8_t* zp, int32_t asum, float a_scale, const float* scale, F y) {
    return std::fma(float(acc - int32_t(*zp) * asum), a_scale * *scale, y);
  }
  static void StoreCols(float* p, F v, int) { *p = v; }
};

const GemmWqS8Kernels kGemmWqS8Portable = {"portable", 4, gemm_wq_s8::Panel<ScalarLane, 4>};

// Row r of A quantized per block (gemm_wq_s8.h).
void QuantizeRow(const float* a, int64_t k, int64_t blocks, int64_t block, int8_t* q, float* scale,
                 int32_t* sum) {
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * block, k1 = std::min(k, k0 + block);
    float amax = 0.f;
    bool finite = true;
    for (int64_t i = k0; i < k1; ++i) {
      finite = finite && std::isfinite(a[i]);
      amax = std::max(amax, std::fabs(a[i]));
    }
    // NaN or infinity in the block: no int8 form; the block's products
    // then come out as NaN through its scale.
    const float inv = amax > 0.f && finite ? 127.f / amax : 0.f;
    int32_t s = 0;
    for (int64_t i = k0; i < k0 + block; ++i) {
      int32_t v = 0;
      if (i < k1) v = int32_t(std::nearbyint(std::min(127.f, std::max(-127.f, a[i] * inv))));
      q[i] = int8_t(v);
      s += v;
    }
    scale[b] = finite ? amax / 127.f : std::numeric_limits<float>::quiet_NaN();
    sum[b] = s;
  }
}

}  // namespace

const GemmWqS8Kernels* GemmWqS8Portable() {
  return &kGemmWqS8Portable;
}

const GemmWqS8Kernels* GemmWqS8For(const CpuFeatures& f, const char** variant) {
  // Names spelled here, not read from the tables: a static initializer
  // could get here before those are initialized.
  const GemmWqS8Kernels* k = nullptr;
  const char* name = nullptr;
#if defined(__x86_64__)
  if (f.avx512vnni) {
    k = &kGemmWqS8Avx512Vnni;
    name = "avx512vnni";
  } else if (f.avx2 && f.fma) {
    k = &kGemmWqS8Avx2;
    name = "avx2";
  }
#endif
#if defined(__aarch64__)
  if (f.asimd) {
    k = &kGemmWqS8Neon;
    name = "neon";
  }
#endif
  // Without SIMD the portable variant: accuracy_level 4 gives the same
  // results on every CPU (ONNX Runtime would compute in float there).
  if (!k) {
    k = &kGemmWqS8Portable;
    name = "portable";
  }
  (void)f;
  if (variant) *variant = name;
  return k;
}

bool PackWqS8B(const uint8_t* q, const int32_t* zp, const float* scales, int64_t k, int64_t n,
               int64_t block, WqS8PackedB* out) {
  if (k <= 0 || n <= 0 || block <= 0 || block % 8) return false;
  // One block over all of K is the same whatever its size past K (zeros
  // change neither amax nor the sums): no padding beyond K rounded to 8.
  block = std::min(block, (k + 7) / 8 * 8);
  const int64_t blocks = (k + block - 1) / block;
  for (int64_t i = 0; i < k * n; ++i)
    if (q[i] > 15) return false;
  for (int64_t i = 0; i < blocks * n; ++i)
    if (zp[i] < 0 || zp[i] > 15) return false;
  const int64_t panels = (n + kWqS8Nr - 1) / kWqS8Nr, bb = gemm_wq_s8::BlockBytes(block);
  out->k = k;
  out->n = n;
  out->block = block;
  out->blocks = blocks;
  out->panel_bytes = blocks * bb;
  out->data.assign(size_t(panels * out->panel_bytes), 0);
  for (int64_t pn = 0; pn < panels; ++pn)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* blk = out->data.data() + pn * out->panel_bytes + b * bb;
      uint8_t* zps = blk + block / 8 * 64;
      float* sc = reinterpret_cast<float*>(zps + kWqS8Nr);
      for (int64_t jj = 0; jj < kWqS8Nr; ++jj) {
        const int64_t j = pn * kWqS8Nr + jj;
        if (j >= n) break;  // padding columns: codes, zero points and scales 0
        zps[jj] = uint8_t(zp[b * n + j]);
        sc[jj] = scales[b * n + j];
        for (int64_t i = 0; i < block; ++i) {
          const int64_t kk = b * block + i;
          if (kk >= k) break;  // past K: code 0 against activation 0
          // Chunk i / 8; k-group (i / 4) % 2 in the low or high nibble.
          const int64_t byte = i / 8 * 64 + jj * 4 + i % 4;
          blk[byte] = uint8_t(blk[byte] | (q[kk * n + j] << ((i / 4) % 2 * 4)));
        }
      }
    }
  return true;
}

size_t GemmWqS8ScratchBytes(const WqS8PackedB& b, int64_t rows) {
  const size_t q = size_t(rows * b.blocks * b.block);
  return (q + 63) / 64 * 64 + size_t(rows * b.blocks) * (sizeof(float) + sizeof(int32_t));
}

void GemmWqS8(const GemmWqS8Kernels& kernels, const WqS8PackedB& b, const float* a, int64_t rows,
              float* y, void* scratch, ThreadPool* pool) {
  uint8_t* base = static_cast<uint8_t*>(scratch);
  const int64_t stride = b.blocks * b.block;
  int8_t* aq = reinterpret_cast<int8_t*>(base);
  float* as = reinterpret_cast<float*>(base + (size_t(rows * stride) + 63) / 64 * 64);
  int32_t* asum = reinterpret_cast<int32_t*>(as + rows * b.blocks);
  ParallelFor(PoolForWork(pool, 8 * rows * b.k), rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r)
      QuantizeRow(a + r * b.k, b.k, b.blocks, b.block, aq + r * stride, as + r * b.blocks,
                  asum + r * b.blocks);
  });
  const int64_t panels = (b.n + kWqS8Nr - 1) / kWqS8Nr, mr = kernels.mr;
  const int64_t tiles = (rows + mr - 1) / mr;
  // Work unit: a group of 8 panels by one tile of rows, group-major, so
  // that a thread's range reuses the panels it reads.
  constexpr int64_t kGroup = 8;
  const int64_t groups = (panels + kGroup - 1) / kGroup;
  ThreadPool* const p = PoolForWork(pool, 2 * rows * b.k * b.n);
  ParallelFor(p, groups * tiles, [&](int64_t begin, int64_t end, int) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t g0 = u / tiles * kGroup, r0 = u % tiles * mr;
      WqS8PanelArgs g;
      g.a.q = aq + r0 * stride;
      g.a.scale = as + r0 * b.blocks;
      g.a.sum = asum + r0 * b.blocks;
      g.rows = std::min(mr, rows - r0);
      g.blocks = b.blocks;
      g.block = b.block;
      g.w = b.data.data() + g0 * b.panel_bytes;
      g.panel_bytes = b.panel_bytes;
      g.panels = std::min(kGroup, panels - g0);
      g.y = y + r0 * b.n + g0 * kWqS8Nr;
      g.ldy = b.n;
      g.cols = std::min<int64_t>(kGroup * kWqS8Nr, b.n - g0 * kWqS8Nr);
      kernels.panel(g);
    }
  });
}

}  // namespace kernels
}  // namespace qfold
