// Slice: per-axis start/end/step selection with the ONNX clamping rules
// (negative indices count from the end; ends may be INT64_MAX/INT64_MIN).
#include <algorithm>
#include <cstring>
#include <string>

#include "ops/shape_common.h"

namespace qfold {
namespace {

struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// Start, step and element count for one axis of size d, as the spec clamps them.
AxisSlice ClampSlice(int64_t start, int64_t end, int64_t step, int64_t d) {
  AxisSlice s;
  s.step = step;
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), d);
    end = std::min(std::max<int64_t>(end, 0), d);
    s.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::min(std::max<int64_t>(start, 0), d - 1);
    end = std::min(std::max<int64_t>(end, -1), d - 1);
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    s.count = start > end ? (start - end - 1) / mag + 1 : 0;
  }
  s.start = start;
  return s;
}

// The params as per-input-axis vectors (unsliced axes: full range, step 1).
// *known is false when some values are not available yet.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

Status ReadSliceParams(KernelContext& ctx, int rank, SliceParams* p, bool* known,
                       bool* axes_known) {
  *known = true;
  *axes_known = true;
  const char* names[] = {"starts", "ends", "axes", "steps"};
  std::vector<int64_t>* dst[] = {&p->starts, &p->ends, &p->axes, &p->steps};
  for (int i = 1; i <= 4; ++i) {
    const Tensor* t = ctx.input(i);
    if (!t) continue;
    QF_RETURN_IF_ERROR(CheckIntDType(ctx, t, names[i - 1]));
    if (t->rank_known && t->rank() != 1)
      return ctx.Invalid(std::string(names[i - 1]) + " must be 1-D");
    if (!ReadInts(t, dst[i - 1])) {
      *known = false;
      if (i == 3) *axes_known = false;
    }
  }
  if (!*known) {
    if (*axes_known && !ctx.input(3)) {
      // Without axes the sliced axes are 0..n-1; n is the length of starts if known.
      const Tensor* st = ctx.input(1);
      if (st->rank_known && st->rank() == 1 && st->shape[0] >= 0) {
        if (st->shape[0] > kMaxRank)
          return ctx.Invalid("starts has " + std::to_string(st->shape[0]) +
                             " entries, more than rank " + std::to_string(kMaxRank));
        p->axes.resize(size_t(st->shape[0]));
        for (size_t i = 0; i < p->axes.size(); ++i) p->axes[i] = int64_t(i);
      } else {
        *axes_known = false;
      }
    }
    if (*axes_known && rank >= 0) {
      for (int64_t& a : p->axes) {
        int n;
        if (!NormalizeAxis(a, rank, &n))
          return ctx.Invalid("axis " + std::to_string(a) + " out of range for rank " +
                             std::to_string(rank));
        a = n;
      }
    }
    return Status::Ok();
  }
  size_t n = p->starts.size();
  if (p->ends.size() != n)
    return ctx.Invalid("starts and ends differ in length: " + std::to_string(n) + " vs " +
                       std::to_string(p->ends.size()));
  if (!ctx.input(3)) {
    p->axes.resize(n);
    for (size_t i = 0; i < n; ++i) p->axes[i] = int64_t(i);
  }
  if (!ctx.input(4)) p->steps.assign(n, 1);
  if (p->axes.size() != n || p->steps.size() != n)
    return ctx.Invalid("axes/steps length does not match starts");
  if (rank < 0) return Status::Ok();
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < n; ++i) {
    int a;
    if (!NormalizeAxis(p->axes[i], rank, &a))
      return ctx.Invalid("axis " + std::to_string(p->axes[i]) + " out of range for rank " +
                         std::to_string(rank));
    if (seen[a]) return ctx.Invalid("axis " + std::to_string(p->axes[i]) + " repeated");
    seen[a] = true;
    p->axes[i] = a;
    if (p->steps[i] == 0) return ctx.Invalid("step is 0");
  }
  return Status::Ok();
}

Status InferSlice(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  SliceParams p;
  bool known, axes_known;
  QF_RETURN_IF_ERROR(ReadSliceParams(ctx, x->rank_known ? x->rank() : -1, &p, &known, &axes_known));
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  Shape out = x->shape;
  if (!known) {
    if (axes_known) {
      for (int64_t a : p.axes) out[a] = kUnknownDim;
    } else {
      for (int64_t& d : out) d = kUnknownDim;
    }
    SetOutput(y, x->dtype, std::move(out));
    return Status::Ok();
  }
  for (size_t i = 0; i < p.axes.size(); ++i) {
    int64_t a = p.axes[i];
    if (x->shape[a] < 0) continue;
    out[a] = ClampSlice(p.starts[i], p.ends[i], p.steps[i], x->shape[a]).count;
  }
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

Status RunSlice(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  int r = x->rank();
  SliceParams p;
  bool known, axes_known;
  QF_RETURN_IF_ERROR(ReadSliceParams(ctx, r, &p, &known, &axes_known));
  if (!known) return ctx.Invalid("slice parameters are not known at run time");
  std::vector<AxisSlice> sl(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) sl[a].count = x->shape[a];
  for (size_t i = 0; i < p.axes.size(); ++i)
    sl[p.axes[i]] = ClampSlice(p.starts[i], p.ends[i], p.steps[i], x->shape[p.axes[i]]);
  std::vector<int64_t> strides = ContiguousStrides(x->shape);
  // The trailing axes kept whole, and before them an axis taken with step 1,
  // are one contiguous run of the input per output run: copied at once (an
  // element at a time, PP-OCRv4 rec's q/k/v slices of its attention's
  // [3, ...] tensor took 9 us each).
  int outer = r;
  int64_t run = 1;
  while (outer > 0 && sl[outer - 1].start == 0 && sl[outer - 1].step == 1 &&
         sl[outer - 1].count == x->shape[outer - 1]) {
    run *= x->shape[outer - 1];
    --outer;
  }
  int64_t base = 0;
  if (outer > 0 && sl[outer - 1].step == 1) {
    --outer;
    base = sl[outer].start * strides[outer];
    run *= sl[outer].count;
  }
  const size_t esize = dtype_size(x->dtype), run_bytes = size_t(run) * esize;
  if (y->numel() == 0) return Status::Ok();
  if (outer == 0) {
    std::memcpy(y->data, x->ptr<uint8_t>() + size_t(base) * esize, run_bytes);
    return Status::Ok();
  }
  if (run > 1) {
    // An odometer over the outer axes' kept positions.
    std::vector<int64_t> idx(size_t(outer), 0);
    const uint8_t* in = x->ptr<uint8_t>();
    uint8_t* out = y->ptr<uint8_t>();
    for (;;) {
      int64_t off = base;
      for (int a = 0; a < outer; ++a) off += (sl[a].start + idx[a] * sl[a].step) * strides[a];
      std::memcpy(out, in + size_t(off) * esize, run_bytes);
      out += run_bytes;
      int a = outer - 1;
      while (a >= 0 && ++idx[a] == sl[a].count) idx[a--] = 0;
      if (a < 0) break;
    }
    return Status::Ok();
  }
  std::vector<std::vector<int64_t>> offsets(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) {
    offsets[a].resize(size_t(sl[a].count));
    for (int64_t j = 0; j < sl[a].count; ++j)
      offsets[a][j] = (sl[a].start + j * sl[a].step) * strides[a];
  }
  GatherCopy(offsets, esize, x->data, y->data, nullptr);
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Slice() {
  static const OpDef def =
      WithTraits({"Slice", InferSlice, RunSlice, 0x1eu, false, 3, 5}, kTraitMovesElements);
  return def;
}

}  // namespace qfold
