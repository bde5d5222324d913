// Transpose: output axis i is input axis perm[i] (default: reversed axes).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "kernels/transpose_tile.h"
#include "ops/shape_common.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

// Validated permutation for rank r, or an error.
Status GetPerm(KernelContext& ctx, int r, std::vector<int64_t>* perm) {
  const Attr* a = ctx.attr().Find("perm");
  if (!a) {
    perm->resize(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) (*perm)[i] = r - 1 - i;
    return Status::Ok();
  }
  *perm = a->ints;
  if (int(perm->size()) != r)
    return ctx.Invalid("perm has " + std::to_string(perm->size()) + " entries for rank " +
                       std::to_string(r));
  std::vector<bool> seen(size_t(r), false);
  for (int64_t& p : *perm) {
    int n;
    // Negative entries are not in the spec, but harmless to accept.
    if (!NormalizeAxis(p, r, &n) || seen[n]) return ctx.Invalid("perm is not a permutation");
    seen[n] = true;
    p = n;
  }
  return Status::Ok();
}

Status InferTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  if (!x->rank_known) {
    const Attr* a = ctx.attr().Find("perm");
    if (a)
      SetOutput(y, x->dtype, Shape(a->ints.size(), kUnknownDim));
    else
      SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  std::vector<int64_t> perm;
  QF_RETURN_IF_ERROR(GetPerm(ctx, x->rank(), &perm));
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = x->shape[perm[i]];
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

// Fast path (bit-exact, it only moves bytes): drops size-1 axes and merges
// output axes that are contiguous in the input, then copies contiguous runs
// with memcpy when the last axis stays last, or else transposes 2-D tiles
// between the input's last axis and the output's last axis.
// out[o][a][b] = in[o * istride[r-3].. + b * istride[r-1] + a] for the last
// two output axes (a: na, b: kRows), outer axes by odometer.
template <int kRows, class E>
void InterleaveRows(const std::vector<int64_t>& odims, const std::vector<int64_t>& istride,
                    const E* in, E* out) {
  const size_t r = odims.size();
  const int64_t na = odims[r - 2], sl = istride[r - 1];
  std::vector<int64_t> dims(odims.begin(), odims.end() - 2), idx(r - 2, 0);
  do {
    int64_t ioff = 0;
    for (size_t i = 0; i + 2 < r; ++i) ioff += idx[i] * istride[i];
    const E* src = in + ioff;
    for (int64_t a = 0; a < na; ++a, out += kRows)
      for (int b = 0; b < kRows; ++b) out[b] = src[b * sl + a];
  } while (NextIndex(dims, &idx));
}

template <class E>
void TransposeTiles(const std::vector<int64_t>& odims, const std::vector<int64_t>& istride,
                    size_t j, const E* in, E* out) {
  // Output axis j reads the input's contiguous axis; the output's last axis
  // reads input stride sl.
  const size_t r = odims.size();
  const int64_t na = odims[j], nb = odims[r - 1], sl = istride[r - 1];
  int64_t ostride_j = 1;
  for (size_t i = j + 1; i < r; ++i) ostride_j *= odims[i];
  // The other axes: an odometer over output positions with those two fixed at 0.
  std::vector<int64_t> idx(r, 0), dims = odims;
  dims[j] = 1;
  dims[r - 1] = 1;
  std::vector<int64_t> ostride(r, 1);
  for (size_t i = r - 1; i > 0; --i) ostride[i - 1] = ostride[i] * odims[i];
  if (j + 2 == r && nb <= 4 && ostride_j == nb) {
    // Few short rows interleaved per outer index (a channel shuffle of NHWC
    // pixels: [g][C/g] -> [C/g][g]): one pass with the row count fixed.
    switch (nb) {
      case 2:
        return InterleaveRows<2>(odims, istride, in, out);
      case 3:
        return InterleaveRows<3>(odims, istride, in, out);
      default:
        return InterleaveRows<4>(odims, istride, in, out);
    }
  }
  // Blocks of kBlockA output rows (whole cache lines of each input row read)
  // by kBlockB columns (512 bytes of each output row written before the
  // next block: with all columns at once, an NHWC -> NCHW output of 32
  // planes 100 KiB apart, all in the same L1 sets, had a line of each of the
  // 32 planes open at a time; a 160x160x32 float tensor took 1.05 ms at 1
  // thread, 0.074 ms now), in 128-bit tiles of kN x kN elements; the edges
  // element by element.
  constexpr int64_t kN = 16 / int64_t(sizeof(E)), kBlockA = 64, kBlockB = 32 * kN;
  do {
    int64_t ioff = 0, ooff = 0;
    for (size_t i = 0; i < r; ++i) {
      ioff += idx[i] * istride[i];
      ooff += idx[i] * ostride[i];
    }
    const E* src = in + ioff;
    E* dst = out + ooff;
    for (int64_t a0 = 0; a0 < na; a0 += kBlockA) {
      const int64_t a1 = std::min(na, a0 + kBlockA);
      const int64_t tiled_b = nb / kN * kN;
      for (int64_t b0 = 0; b0 < tiled_b; b0 += kBlockB) {
        const int64_t b1 = std::min(tiled_b, b0 + kBlockB);
        int64_t a = a0;
        for (; a + kN <= a1; a += kN)
          for (int64_t b = b0; b < b1; b += kN)
            kernels::TransposeTile(src + b * sl + a, sl, dst + a * ostride_j + b, ostride_j);
        for (; a < a1; ++a)
          for (int64_t t = b0; t < b1; ++t) dst[a * ostride_j + t] = src[t * sl + a];
      }
      for (int64_t b = tiled_b; b < nb; ++b)
        for (int64_t a = a0; a < a1; ++a) dst[a * ostride_j + b] = src[b * sl + a];
    }
  } while (NextIndex(dims, &idx));
}

// Copies the simplified transpose (output dims odims, input strides istride,
// both in elements of esize bytes) from in to out.
void CopyTransposed(const std::vector<int64_t>& odims, const std::vector<int64_t>& istride,
                    size_t esize, const uint8_t* in, uint8_t* out) {
  const size_t r = odims.size();
  if (r <= 1 || istride[r - 1] == 1) {
    // The last axis stays last: contiguous runs (one memcpy when r <= 1).
    const int64_t run = r == 0 ? 1 : odims[r - 1];
    const size_t bytes = size_t(run) * esize;
    if (r <= 1) {
      std::memcpy(out, in, bytes);
      return;
    }
    std::vector<int64_t> dims(odims.begin(), odims.end() - 1), idx(r - 1, 0);
    do {
      int64_t ioff = 0;
      for (size_t i = 0; i + 1 < r; ++i) ioff += idx[i] * istride[i];
      std::memcpy(out, in + size_t(ioff) * esize, bytes);
      out += bytes;
    } while (NextIndex(dims, &idx));
    return;
  }
  size_t j = 0;  // the output axis that reads the input's last (contiguous) axis
  while (istride[j] != 1) ++j;
  switch (esize) {
    case 1:
      TransposeTiles(odims, istride, j, in, out);
      break;
    case 2:
      TransposeTiles(odims, istride, j, reinterpret_cast<const uint16_t*>(in),
                     reinterpret_cast<uint16_t*>(out));
      break;
    case 4:
      TransposeTiles(odims, istride, j, reinterpret_cast<const uint32_t*>(in),
                     reinterpret_cast<uint32_t*>(out));
      break;
    default:
      TransposeTiles(odims, istride, j, reinterpret_cast<const uint64_t*>(in),
                     reinterpret_cast<uint64_t*>(out));
      break;
  }
}

bool RunTransposeFast(const kernels::KernelConfig& kc, const Tensor& x,
                      const std::vector<int64_t>& perm, Tensor* y, kernels::ThreadPool* pool) {
  if (!kc.fast_loops || y->numel() == 0) return false;
  const size_t esize = dtype_size(x.dtype);
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
  // Simplified output axes: dims and input strides (elements), merging runs
  // of consecutive input axes.
  const std::vector<int64_t> xs = ContiguousStrides(x.shape);
  std::vector<int64_t> odims, istride;
  for (int64_t p : perm) {
    const int64_t d = x.shape[size_t(p)], st = xs[size_t(p)];
    if (d == 1) continue;
    if (!odims.empty() && istride.back() == st * d) {  // contiguous with the previous axis
      odims.back() *= d;
      istride.back() = st;
    } else {
      odims.push_back(d);
      istride.push_back(st);
    }
  }
  const auto* in = static_cast<const uint8_t*>(x.data);
  auto* out = static_cast<uint8_t*>(y->data);
  // Large tensors: the output's first axis is split between threads (every
  // byte is only moved, so the split cannot change the result).
  const int64_t bytes = y->numel() * int64_t(esize);
  if (odims.size() < 2 || odims[0] < 2 || bytes < (int64_t(1) << 15)) pool = nullptr;
  const int64_t rows = odims.empty() ? 1 : odims[0], out_step = bytes / rows;
  // When the split axis is the one the 16-byte tiles run along (it reads the
  // input's contiguous axis: NHWC -> NCHW), ranges hold whole tiles: ranges
  // of a few channels would all take TransposeTiles' element-wise edge path.
  const bool tiled_split = odims.size() >= 2 && istride[0] == 1 && istride.back() != 1;
  const int64_t unit = tiled_split ? 16 / int64_t(esize) : 1;
  kernels::ParallelFor(pool, (rows + unit - 1) / unit, [&](int64_t ub, int64_t ue, int) {
    if (!pool) return CopyTransposed(odims, istride, esize, in, out);
    const int64_t b = ub * unit, e = std::min(rows, ue * unit);
    std::vector<int64_t> part = odims;
    part[0] = e - b;
    CopyTransposed(part, istride, esize, in + b * istride[0] * int64_t(esize), out + b * out_step);
  });
  return true;
}

Status RunTranspose(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  std::vector<int64_t> perm;
  QF_RETURN_IF_ERROR(GetPerm(ctx, x->rank(), &perm));
  if (RunTransposeFast(ctx.kernel_config(), *x, perm, y, ctx.pool)) return Status::Ok();
  std::vector<int64_t> strides = ContiguousStrides(x->shape);
  std::vector<std::vector<int64_t>> offsets(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t n = x->shape[perm[i]];
    offsets[i].resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) offsets[i][j] = j * strides[perm[i]];
  }
  GatherCopy(offsets, dtype_size(x->dtype), x->data, y->data, nullptr);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Transpose() {
  static const OpDef def =
      WithTraits({"Transpose", InferTranspose, RunTranspose, 0, false, 1, 1}, kTraitMovesElements);
  return def;
}

}  // namespace qfold
