#include "ops/window_util.h"

#include <algorithm>
#include <string>

#include "core/checked_math.h"

namespace qfold {

Status ReadPositiveInts(const KernelContext& ctx, const char* name, size_t n, int64_t dflt,
                        std::vector<int64_t>* out) {
  const Attr* a = ctx.attr().Find(name);
  if (!a) {
    out->assign(n, dflt);
    return Status::Ok();
  }
  if (a->ints.size() != n)
    return ctx.Invalid(std::string(name) + " has " + std::to_string(a->ints.size()) +
                       " values, expected " + std::to_string(n));
  for (int64_t v : a->ints)
    if (v <= 0) return ctx.Invalid(std::string(name) + " values must be positive");
  *out = a->ints;
  return Status::Ok();
}

Status ComputeWindowGeometry(const KernelContext& ctx, const Shape& in_spatial,
                             const std::vector<int64_t>& kernel, bool ceil_mode,
                             WindowGeometry* g) {
  const size_t n = in_spatial.size();
  if (kernel.size() != n)
    return ctx.Invalid("kernel has " + std::to_string(kernel.size()) + " spatial dims, input has " +
                       std::to_string(n));
  for (int64_t k : kernel)
    if (k <= 0) return ctx.Invalid("kernel dims must be positive");
  g->kernel = kernel;
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "strides", n, 1, &g->strides));
  QF_RETURN_IF_ERROR(ReadPositiveInts(ctx, "dilations", n, 1, &g->dilations));
  g->pad_begin.assign(n, 0);
  g->pad_end.assign(n, 0);
  g->out.assign(n, kUnknownDim);

  const std::string auto_pad = ctx.attr().GetString("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "NOTSET") {
    if (const Attr* p = ctx.attr().Find("pads")) {
      if (p->ints.size() != 2 * n)
        return ctx.Invalid("pads has " + std::to_string(p->ints.size()) + " values, expected " +
                           std::to_string(2 * n));
      for (size_t i = 0; i < n; ++i) {
        g->pad_begin[i] = p->ints[i];
        g->pad_end[i] = p->ints[n + i];
        if (g->pad_begin[i] < 0 || g->pad_end[i] < 0) return ctx.Invalid("pads must be >= 0");
      }
    }
  } else if (!same && auto_pad != "VALID") {
    return ctx.Invalid("unknown auto_pad '" + auto_pad + "'");
  }

  // Checked arithmetic (core/checked_math.h): the attributes come from the
  // model, and every kernel indexes memory with products of these values.
  auto overflow = [&](size_t i) {
    return ctx.Invalid("window geometry overflows int64 on spatial axis " + std::to_string(i) +
                       " (kernel, strides, dilations or pads too large)");
  };
  for (size_t i = 0; i < n; ++i) {
    int64_t dk = 0;  // kernel extent with dilation
    if (!CheckedMulAdd(g->kernel[i] - 1, g->dilations[i], 1, &dk)) return overflow(i);
    const int64_t in = in_spatial[i];
    if (in < 0) continue;
    const int64_t s = g->strides[i];
    if (same) {
      // Output covers ceil(in / stride) windows; padding is whatever that needs.
      const int64_t out = in / s + (in % s != 0 ? 1 : 0);
      int64_t reach = 0;  // (out - 1) * s + dk
      if (!CheckedMulAdd(std::max<int64_t>(out - 1, 0), s, dk, &reach)) return overflow(i);
      const int64_t total = std::max<int64_t>(0, reach - in);
      const int64_t small = total / 2;
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g->pad_end[i] = total - g->pad_begin[i];
      g->out[i] = out;
    } else {
      int64_t start_limit = 0, padded = 0, out = 0;
      if (!CheckedAdd(in, g->pad_begin[i], &start_limit) ||
          !CheckedAdd(start_limit, g->pad_end[i], &padded))
        return overflow(i);
      const int64_t span = padded - dk;  // both >= 0: cannot overflow
      if (!CheckedAdd(ceil_mode ? -FloorDiv(-span, s) : FloorDiv(span, s), 1, &out))
        return overflow(i);
      int64_t last_start = 0;
      // A product past int64 certainly starts beyond the input and its padding.
      if (ceil_mode && out > 0 &&
          (!CheckedMul(out - 1, s, &last_start) || last_start >= start_limit))
        --out;
      if (in > 0 && out <= 0)
        return ctx.Invalid("kernel extent " + std::to_string(dk) + " exceeds padded input size " +
                           std::to_string(padded) + " on spatial axis " + std::to_string(i));
      g->out[i] = std::max<int64_t>(out, 0);
    }
    // With a single window the stride is never applied; the kernels size
    // scratch rows by the stride (phases, strided rows), so a huge stride on a
    // small input (a 760-byte model asked for 8 GB) is reduced to 1 here.
    if (g->out[i] <= 1) g->strides[i] = 1;
  }
  return Status::Ok();
}

}  // namespace qfold
