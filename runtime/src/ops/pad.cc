// Pad: constant/reflect/edge/wrap padding with per-axis begin/end amounts
// (negative amounts crop). Each output index maps to one input index or to
// the fill value, so the kernel is a GatherCopy.
#include <cstring>
#include <string>
#include <vector>

#include "ops/shape_common.h"

namespace qfold {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

Status GetMode(const KernelContext& ctx, PadMode* mode) {
  std::string m = ctx.attr().GetString("mode", "constant");
  if (m == "constant")
    *mode = PadMode::kConstant;
  else if (m == "reflect")
    *mode = PadMode::kReflect;
  else if (m == "edge")
    *mode = PadMode::kEdge;
  else if (m == "wrap")
    *mode = PadMode::kWrap;
  else
    return ctx.Unsupported("mode '" + m + "' is not supported");
  return Status::Ok();
}

// Per-axis (begin, end) pads for a rank-r input; *known false when the pads
// or axes values are not available yet.
Status GetPads(const KernelContext& ctx, int r, std::vector<int64_t>* begin,
               std::vector<int64_t>* end, bool* known) {
  const Tensor* p = ctx.input(1);
  const Tensor* a = ctx.input(3);
  std::vector<int64_t> pads, axes;
  *known = ReadInts(p, &pads) && (!a || ReadInts(a, &axes));
  if (!*known) return Status::Ok();
  if (!a) {
    axes.resize(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) axes[i] = i;
  }
  if (pads.size() != 2 * axes.size())
    return ctx.Invalid("pads has " + std::to_string(pads.size()) + " entries for " +
                       std::to_string(axes.size()) + " axes");
  begin->assign(static_cast<size_t>(r), 0);
  end->assign(static_cast<size_t>(r), 0);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  size_t n = axes.size();
  for (size_t i = 0; i < n; ++i) {
    int ax;
    if (!NormalizeAxis(axes[i], r, &ax))
      return ctx.Invalid("axis " + std::to_string(axes[i]) + " out of range for rank " +
                         std::to_string(r));
    if (seen[ax]) return ctx.Invalid("axis " + std::to_string(axes[i]) + " repeated");
    seen[ax] = true;
    (*begin)[ax] = pads[i];
    (*end)[ax] = pads[n + i];
  }
  return Status::Ok();
}

Status InferPad(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "data"));
  PadMode mode;
  QF_RETURN_IF_ERROR(GetMode(ctx, &mode));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, ctx.input(1), "pads"));
  if (ctx.input(3)) QF_RETURN_IF_ERROR(CheckIntDType(ctx, ctx.input(3), "axes"));
  if (const Tensor* c = ctx.input(2)) {
    if (c->dtype != x->dtype)
      return ctx.Invalid(std::string("constant_value dtype ") + dtype_name(c->dtype) +
                         " differs from data dtype " + dtype_name(x->dtype));
    if (c->shape_known() && c->numel() > 1) return ctx.Invalid("constant_value must be a scalar");
  }
  if (!x->rank_known) {
    SetOutputUnknownRank(y, x->dtype);
    return Status::Ok();
  }
  int r = x->rank();
  std::vector<int64_t> b, e;
  bool known;
  QF_RETURN_IF_ERROR(GetPads(ctx, r, &b, &e, &known));
  Shape out(x->shape.size(), kUnknownDim);
  if (known) {
    for (int i = 0; i < r; ++i) {
      int64_t d = x->shape[i];
      if (d < 0) continue;
      if (__builtin_add_overflow(d, b[i], &out[i]) || __builtin_add_overflow(out[i], e[i], &out[i]))
        return ctx.Invalid("pads of axis " + std::to_string(i) + " overflow int64");
      if (out[i] < 0)
        return ctx.Invalid("pads crop axis " + std::to_string(i) + " of size " + std::to_string(d) +
                           " below zero");
      if (mode != PadMode::kConstant && d == 0 && out[i] > 0)
        return ctx.Invalid("cannot pad an empty axis in non-constant mode");
    }
  }
  SetOutput(y, x->dtype, std::move(out));
  return Status::Ok();
}

// Input index for output index i of an axis of size d padded by `begin`,
// or -1 for the fill value.
int64_t SourceIndex(PadMode mode, int64_t i, int64_t begin, int64_t d) {
  int64_t s = i - begin;
  if (s >= 0 && s < d) return s;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return s < 0 ? 0 : d - 1;
    case PadMode::kWrap:
      return ((s % d) + d) % d;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      int64_t period = 2 * (d - 1);
      int64_t m = ((s % period) + period) % period;
      return m < d ? m : period - m;
    }
  }
  return -1;
}

Status RunPad(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  const Tensor* c = ctx.input(2);
  Tensor* y = ctx.output(0);
  PadMode mode;
  QF_RETURN_IF_ERROR(GetMode(ctx, &mode));
  int r = x->rank();
  std::vector<int64_t> b, e;
  bool known;
  QF_RETURN_IF_ERROR(GetPads(ctx, r, &b, &e, &known));
  if (!known) return ctx.Invalid("pads are not known at run time");
  size_t esz = dtype_size(x->dtype);
  std::vector<uint8_t> fill(esz, 0);
  if (c && c->numel() == 1) std::memcpy(fill.data(), c->data, esz);
  std::vector<int64_t> strides = ContiguousStrides(x->shape);
  std::vector<std::vector<int64_t>> offsets(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a) {
    int64_t n = y->shape[a], d = x->shape[a];
    if (d == 0 && n > 0 && mode != PadMode::kConstant)
      return ctx.Invalid("cannot pad an empty axis in non-constant mode");
    offsets[a].resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t s = SourceIndex(mode, i, b[a], d);
      offsets[a][i] = s < 0 ? kFillOffset : s * strides[a];
    }
  }
  GatherCopy(offsets, esz, x->data, y->data, fill.data());
  return Status::Ok();
}

}  // namespace

const OpDef& OpDef_Pad() {
  static const OpDef def{"Pad", InferPad, RunPad, (1u << 1) | (1u << 3), false, 2, 4};
  return def;
}

}  // namespace qfold
