// Resize (opset 11-19): nearest / linear / cubic interpolation over any
// subset of axes, with every coordinate_transformation_mode, axes,
// keep_aspect_ratio_policy and antialias. Interpolation is separable, so each
// axis gets a list of (input index, weight) taps per output index; an output
// element is the sum over the product of its axes' taps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"
#include "kernels/resize_2d.h"
#include "kernels/thread_pool.h"
#include "ops/channels_last.h"
#include "ops/elementwise_util.h"
#include "ops/window_util.h"

namespace qfold {
namespace {

enum class Mode { kNearest, kLinear, kCubic };

struct ResizeAttrs {
  Mode mode = Mode::kNearest;
  std::string coord;  // coordinate_transformation_mode
  std::string nearest_mode;
  std::string aspect;  // keep_aspect_ratio_policy
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  float extrapolation = 0.f;
  std::vector<int> axes;  // normalized; all axes when the attribute is absent
};

Status ParseResizeAttrs(const KernelContext& ctx, int rank, ResizeAttrs* r) {
  const AttrMap& a = ctx.attr();
  const std::string mode = a.GetString("mode", "nearest");
  if (mode == "nearest") {
    r->mode = Mode::kNearest;
  } else if (mode == "linear") {
    r->mode = Mode::kLinear;
  } else if (mode == "cubic") {
    r->mode = Mode::kCubic;
  } else {
    return ctx.Unsupported("mode '" + mode + "'");
  }
  r->coord = a.GetString("coordinate_transformation_mode", "half_pixel");
  static const char* kCoords[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                  "align_corners", "asymmetric",           "tf_crop_and_resize"};
  if (std::find_if(std::begin(kCoords), std::end(kCoords),
                   [&](const char* c) { return r->coord == c; }) == std::end(kCoords))
    return ctx.Unsupported("coordinate_transformation_mode '" + r->coord + "'");
  r->nearest_mode = a.GetString("nearest_mode", "round_prefer_floor");
  if (r->nearest_mode != "round_prefer_floor" && r->nearest_mode != "round_prefer_ceil" &&
      r->nearest_mode != "floor" && r->nearest_mode != "ceil")
    return ctx.Unsupported("nearest_mode '" + r->nearest_mode + "'");
  r->aspect = a.GetString("keep_aspect_ratio_policy", "stretch");
  if (r->aspect != "stretch" && r->aspect != "not_larger" && r->aspect != "not_smaller")
    return ctx.Unsupported("keep_aspect_ratio_policy '" + r->aspect + "'");
  r->cubic_a = a.GetFloat("cubic_coeff_a", -0.75f);
  r->exclude_outside = a.GetInt("exclude_outside", 0) != 0;
  // Antialiasing only changes linear and cubic filters.
  r->antialias = a.GetInt("antialias", 0) != 0 && r->mode != Mode::kNearest;
  r->extrapolation = a.GetFloat("extrapolation_value", 0.f);
  r->axes.clear();
  if (const Attr* ax = a.Find("axes")) {
    std::vector<bool> seen(size_t(std::max(rank, 0)), false);
    for (int64_t v : ax->ints) {
      int n;
      if (!NormalizeAxis(v, rank, &n)) return ctx.Invalid("axes value out of range");
      if (seen[size_t(n)]) return ctx.Invalid("axes has duplicates");
      seen[size_t(n)] = true;
      r->axes.push_back(n);
    }
  } else {
    for (int i = 0; i < rank; ++i) r->axes.push_back(i);
  }
  return Status::Ok();
}

// An optional value input that is present and not an empty tensor.
bool Given(const Tensor* t) {
  return t && (!t->shape_known() || t->numel() > 0);
}

// Output shape and per-axis scales (for every axis of X). Returns false in
// *known when the scales/sizes values are not known yet (converter).
Status ComputeResizeShape(const KernelContext& ctx, const ResizeAttrs& r, const Shape& in,
                          Shape* out, std::vector<double>* scales, bool* known) {
  const Tensor* scales_t = ctx.input(2);
  const Tensor* sizes_t = ctx.input(3);
  const bool has_scales = Given(scales_t), has_sizes = Given(sizes_t);
  if (has_scales == has_sizes) return ctx.Invalid("exactly one of scales and sizes must be given");
  const size_t rank = in.size(), naxes = r.axes.size();
  *out = in;
  scales->assign(rank, 1.0);
  *known = true;
  if (has_scales) {
    std::vector<float> s;
    if (!ReadFloats(scales_t, &s)) {
      if (scales_t->data) return ctx.Unsupported("scales must be a float tensor");
      *known = false;
      for (int ax : r.axes) (*out)[size_t(ax)] = kUnknownDim;
      return Status::Ok();
    }
    if (s.size() != naxes)
      return ctx.Invalid("scales has " + std::to_string(s.size()) + " values, expected " +
                         std::to_string(naxes));
    for (size_t i = 0; i < naxes; ++i) {
      if (!(s[i] > 0.f) || !std::isfinite(s[i]))
        return ctx.Invalid("scales must be positive and finite");
      const size_t ax = size_t(r.axes[i]);
      (*scales)[ax] = s[i];
      if (in[ax] < 0) continue;
      const double d = std::floor(double(in[ax]) * double(s[i]));
      if (d > double(int64_t(1) << 40)) return ctx.Invalid("scales give a huge output");
      (*out)[ax] = int64_t(d);
    }
    return Status::Ok();
  }
  std::vector<int64_t> sizes;
  if (!ReadInts(sizes_t, &sizes)) {
    if (sizes_t->data) return ctx.Invalid("sizes must be an int64 tensor");
    *known = false;
    for (int ax : r.axes) (*out)[size_t(ax)] = kUnknownDim;
    return Status::Ok();
  }
  if (sizes.size() != naxes)
    return ctx.Invalid("sizes has " + std::to_string(sizes.size()) + " values, expected " +
                       std::to_string(naxes));
  for (int64_t v : sizes)
    if (v < 0) return ctx.Invalid("sizes must be >= 0");
  for (size_t i = 0; i < naxes; ++i) {
    const size_t ax = size_t(r.axes[i]);
    (*out)[ax] = sizes[i];
    if (in[ax] > 0) (*scales)[ax] = double(sizes[i]) / double(in[ax]);
  }
  if (r.aspect != "stretch") {
    // One scale for all resized axes: the smallest (not_larger) or largest
    // (not_smaller) of the per-axis ratios; sizes round half up.
    for (int ax : r.axes)
      if (in[size_t(ax)] < 0) {
        for (int a2 : r.axes) (*out)[size_t(a2)] = kUnknownDim;
        return Status::Ok();
      }
    double s = (*scales)[size_t(r.axes[0])];
    for (int ax : r.axes)
      s = r.aspect == "not_larger" ? std::min(s, (*scales)[size_t(ax)])
                                   : std::max(s, (*scales)[size_t(ax)]);
    for (int ax : r.axes) {
      (*scales)[size_t(ax)] = s;
      (*out)[size_t(ax)] = int64_t(s * double(in[size_t(ax)]) + 0.5);
    }
  }
  return Status::Ok();
}

Status InferResizeChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  y->dtype = x->dtype;
  if (x->dtype != DType::kFloat32 && x->dtype != DType::kFloat64 && x->dtype != DType::kInt8 &&
      x->dtype != DType::kUInt8 && x->dtype != DType::kInt16 && x->dtype != DType::kUInt16 &&
      x->dtype != DType::kInt32 && x->dtype != DType::kInt64)
    return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype));
  if (!x->rank_known) {
    SetOutputsUnknown(ctx);
    return Status::Ok();
  }
  ResizeAttrs r;
  QF_RETURN_IF_ERROR(ParseResizeAttrs(ctx, x->rank(), &r));
  if (r.mode != Mode::kNearest && !dtype_is_float(x->dtype))
    return ctx.Unsupported(std::string("linear/cubic Resize of ") + dtype_name(x->dtype));
  std::vector<double> scales;
  bool known;
  y->rank_known = true;
  return ComputeResizeShape(ctx, r, x->shape, &y->shape, &scales, &known);
}

struct Tap {
  int64_t index;
  double weight;
};

// Source coordinate of output index `o` along an axis, per the coordinate
// transformation mode. length_resized is in * scale (not the rounded output
// size), as in the ONNX reference.
double SourceCoord(const ResizeAttrs& r, int64_t o, double scale, int64_t in, int64_t out,
                   double roi_start, double roi_end) {
  const double x = double(o);
  const double length_resized = scale * double(in);
  if (r.coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (r.coord == "half_pixel_symmetric") {
    const double adjustment = double(out) / length_resized;
    const double center = double(in) / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  if (r.coord == "pytorch_half_pixel") return length_resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (r.coord == "align_corners")
    return length_resized == 1 ? 0.0 : x * double(in - 1) / (length_resized - 1);
  if (r.coord == "asymmetric") return x / scale;
  // tf_crop_and_resize
  if (length_resized == 1) return 0.5 * (roi_start + roi_end) * double(in - 1);
  return roi_start * double(in - 1) +
         x * (roi_end - roi_start) * double(in - 1) / (length_resized - 1);
}

double CubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Taps for one output index; empty when the output takes extrapolation_value.
std::vector<Tap> AxisTaps(const ResizeAttrs& r, double coord, double scale, int64_t in) {
  std::vector<Tap> taps;
  if (r.coord == "tf_crop_and_resize" && (coord < 0 || coord > double(in - 1))) return taps;
  if (r.mode == Mode::kNearest) {
    int64_t i;
    const double fl = std::floor(coord);
    if (r.nearest_mode == "floor") {
      i = int64_t(fl);
    } else if (r.nearest_mode == "ceil") {
      i = int64_t(std::ceil(coord));
    } else if (coord - fl == 0.5) {
      i = int64_t(r.nearest_mode == "round_prefer_floor" ? fl : fl + 1);
    } else {
      i = int64_t(std::round(coord));
    }
    taps.push_back({std::min(std::max<int64_t>(i, 0), in - 1), 1.0});
    return taps;
  }
  // Linear/cubic filter f with radius R (1 or 2); antialiasing stretches it
  // by 1/scale when downsampling. Input index j gets weight f((j - coord) * s).
  const double radius = r.mode == Mode::kLinear ? 1.0 : 2.0;
  const double s = r.antialias ? std::min(scale, 1.0) : 1.0;
  const int64_t start = int64_t(std::floor(-radius / s)) + 1;
  const int64_t count = 2 - 2 * start;
  // base + ratio == coord with ratio in (0, 1]; the window is base + [start, start + count).
  const int64_t base = int64_t(std::ceil(coord)) - 1;
  const double ratio = coord - double(base);
  double sum = 0.0;
  for (int64_t i = start; i < start + count; ++i) {
    const double d = (double(i) - ratio) * s;
    double w =
        r.mode == Mode::kLinear ? std::max(0.0, 1.0 - std::fabs(d)) : CubicKernel(d, r.cubic_a);
    const int64_t j = base + i;
    if (r.exclude_outside && (j < 0 || j >= in)) w = 0.0;
    sum += w;
    if (w != 0.0) taps.push_back({std::min(std::max<int64_t>(j, 0), in - 1), w});
  }
  // Antialias and exclude_outside renormalize; plain filters already sum to 1.
  if ((r.antialias || r.exclude_outside) && sum != 0.0)
    for (Tap& t : taps) t.weight /= sum;
  if (taps.empty()) taps.push_back({std::min(std::max<int64_t>(base, 0), in - 1), 0.0});
  return taps;
}

// A value converted to the tensor's type as Cast converts it (FloatToInt: no
// undefined behaviour for extrapolation_value -7.5 into uint8, or NaN).
template <class T>
T ToElement(double v) {
  if constexpr (std::is_integral_v<T>) {
    return FloatToInt<T>(v);
  } else {
    return T(v);
  }
}

template <class T>
void ResizeKernel(const Tensor& x, const std::vector<std::vector<std::vector<Tap>>>& taps,
                  float extrapolation, Tensor* y) {
  const size_t rank = x.shape.size();
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape);
  const int64_t total = y->numel();
  std::vector<int64_t> o(rank, 0);
  std::vector<const std::vector<Tap>*> t(rank);
  // Sum over the product of each axis's taps, innermost axis last.
  auto accumulate = [&](auto&& self, size_t axis, int64_t offset, double weight) -> double {
    if (axis == rank) return weight * double(x.ptr<T>()[offset]);
    double acc = 0.0;
    for (const Tap& tap : *t[axis])
      acc += self(self, axis + 1, offset + tap.index * in_strides[axis], weight * tap.weight);
    return acc;
  };
  for (int64_t e = 0; e < total; ++e) {
    bool extrapolate = false;
    for (size_t a = 0; a < rank; ++a) {
      t[a] = &taps[a][size_t(o[a])];
      if (t[a]->empty()) extrapolate = true;
    }
    y->ptr<T>()[e] =
        ToElement<T>(extrapolate ? double(extrapolation) : accumulate(accumulate, 0, 0, 1.0));
    NextIndex(y->shape, &o);
  }
}

// Fast paths for 4-D tensors resized over H and W only (axes 0 and 1 keep
// one weight-1 tap each), bit-identical to ResizeKernel; false when not
// covered or when the reference ISA level is forced.
bool IdentityAxis(const std::vector<std::vector<Tap>>& taps) {
  for (size_t o = 0; o < taps.size(); ++o)
    if (taps[o].size() != 1 || taps[o][0].index != int64_t(o) || taps[o][0].weight != 1.0)
      return false;
  return true;
}

// Nearest: every output is one input value v, which the reference returns as
// T(0.0 + 1.0 * v): v itself, except that float -0 becomes +0 (v + 0.f).
template <class T>
void NearestPlanes(const Tensor& x, const std::vector<std::vector<Tap>>& rows,
                   const std::vector<int64_t>& col_src, const std::vector<char>& col_extra,
                   bool any_col_extra, T extra, Tensor* y, kernels::ThreadPool* pool) {
  const int64_t planes = x.shape[0] * x.shape[1], ih = x.shape[2], iw = x.shape[3];
  const int64_t oh = y->shape[2], ow = y->shape[3];
  auto work = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x.ptr<T>() + p * ih * iw;
      T* yp = y->ptr<T>() + p * oh * ow;
      for (int64_t o = 0; o < oh; ++o) {
        T* yr = yp + o * ow;
        if (rows[size_t(o)].empty()) {
          std::fill(yr, yr + ow, extra);
          continue;
        }
        const int64_t r = rows[size_t(o)][0].index;
        // Same source row as the previous output row: copy that row.
        if (o > 0 && !rows[size_t(o - 1)].empty() && rows[size_t(o - 1)][0].index == r) {
          std::copy(yr - ow, yr, yr);
          continue;
        }
        const T* xr = xp + r * iw;
        for (int64_t c = 0; c < ow; ++c) yr[c] = T(xr[col_src[size_t(c)]] + T(0));
        if (any_col_extra)
          for (int64_t c = 0; c < ow; ++c)
            if (col_extra[size_t(c)]) yr[c] = extra;
      }
    }
  };
  const bool small = planes * oh * ow < (int64_t(1) << 15);
  kernels::ParallelFor(small ? nullptr : pool, planes,
                       [&](int64_t p0, int64_t p1, int) { work(p0, p1); });
}

bool RunResizeFast(const KernelContext& ctx, const ResizeAttrs& r,
                   const std::vector<std::vector<std::vector<Tap>>>& taps) {
  const Tensor& x = *ctx.input(0);
  Tensor* y = ctx.output(0);
  if (!ctx.kernel_config().resize_2d) return false;
  if (x.rank() != 4 || x.numel() == 0 || y->numel() == 0) return false;
  if (y->shape[0] != x.shape[0] || y->shape[1] != x.shape[1]) return false;
  if (!IdentityAxis(taps[0]) || !IdentityAxis(taps[1])) return false;
  const std::vector<std::vector<Tap>>& rows = taps[2];
  const std::vector<std::vector<Tap>>& cols = taps[3];
  const int64_t ow = y->shape[3];
  std::vector<char> col_extra(static_cast<size_t>(ow), 0);
  bool any_col_extra = false;
  for (int64_t c = 0; c < ow; ++c)
    if (cols[size_t(c)].empty()) col_extra[size_t(c)] = 1, any_col_extra = true;

  if (r.mode == Mode::kNearest) {
    std::vector<int64_t> col_src(static_cast<size_t>(ow), 0);
    for (int64_t c = 0; c < ow; ++c) {
      const std::vector<Tap>& t = cols[size_t(c)];
      if (t.size() > 1 || (t.size() == 1 && t[0].weight != 1.0)) return false;
      if (!t.empty()) col_src[size_t(c)] = t[0].index;
    }
    for (const std::vector<Tap>& t : rows)
      if (t.size() > 1 || (t.size() == 1 && t[0].weight != 1.0)) return false;
    switch (x.dtype) {
      case DType::kFloat32:
        NearestPlanes<float>(x, rows, col_src, col_extra, any_col_extra, r.extrapolation, y,
                             ctx.pool);
        return true;
      case DType::kInt8:
        NearestPlanes<int8_t>(x, rows, col_src, col_extra, any_col_extra,
                              ToElement<int8_t>(r.extrapolation), y, ctx.pool);
        return true;
      case DType::kUInt8:
        NearestPlanes<uint8_t>(x, rows, col_src, col_extra, any_col_extra,
                               ToElement<uint8_t>(r.extrapolation), y, ctx.pool);
        return true;
      default:
        return false;
    }
  }

  if (x.dtype != DType::kFloat32) return false;
  size_t kw = 1, kh = 1;
  for (const std::vector<Tap>& t : cols) kw = std::max(kw, t.size());
  for (const std::vector<Tap>& t : rows) kh = std::max(kh, t.size());
  if (kw > 4) return false;
  const int64_t stride = (ow + 7) / 8 * 8;
  std::vector<int64_t> col_idx(kw * size_t(stride), 0);
  std::vector<uint64_t> col_mask(kw * size_t(stride), 0);
  std::vector<double> col_w(kw * size_t(stride), 0.0);
  for (int64_t c = 0; c < ow; ++c) {
    const std::vector<Tap>& t = cols[size_t(c)];
    for (size_t k = 0; k < kw; ++k) {
      const size_t e = k * size_t(stride) + size_t(c);
      if (k < t.size()) {
        col_idx[e] = t[k].index;
        col_w[e] = t[k].weight;
        col_mask[e] = ~uint64_t(0);
      }
    }
  }
  const int64_t oh = y->shape[2];
  std::vector<int64_t> row_count(static_cast<size_t>(oh)), row_idx(size_t(oh) * kh, 0);
  std::vector<double> row_w(size_t(oh) * kh, 0.0);
  for (int64_t o = 0; o < oh; ++o) {
    const std::vector<Tap>& t = rows[size_t(o)];
    row_count[size_t(o)] = int64_t(t.size());
    for (size_t k = 0; k < t.size(); ++k) {
      row_idx[size_t(o) * kh + k] = t[k].index;
      row_w[size_t(o) * kh + k] = t[k].weight;
    }
  }
  kernels::ResizeLinearArgs a;
  a.planes = x.shape[0] * x.shape[1];
  a.ih = x.shape[2];
  a.iw = x.shape[3];
  a.oh = oh;
  a.ow = ow;
  a.kw = int(kw);
  a.col_stride = stride;
  a.col_idx = col_idx.data();
  a.col_w = col_w.data();
  a.col_mask = col_mask.data();
  a.col_extrapolate = reinterpret_cast<const uint8_t*>(col_extra.data());
  a.any_col_extrapolate = any_col_extra;
  a.row_count = row_count.data();
  a.row_idx = row_idx.data();
  a.row_w = row_w.data();
  a.kh_max = int(kh);
  a.extrapolation = r.extrapolation;
  a.pool = ctx.pool;
  kernels::ResizeLinearF32(*ctx.kernel_config().resize_2d, a, x.ptr<float>(), y->ptr<float>());
  return true;
}

// The attributes, and the taps of every axis for resizing input 0 read as
// shape `in` (channels-first).
Status ResizeTaps(const KernelContext& ctx, const Shape& in, ResizeAttrs* attrs,
                  std::vector<std::vector<std::vector<Tap>>>* taps) {
  QF_RETURN_IF_ERROR(ParseResizeAttrs(ctx, int(in.size()), attrs));
  if (ctx.output(0)->numel() > 0 && ctx.input(0)->numel() == 0)
    return ctx.Invalid("cannot resize an empty input");
  const ResizeAttrs& r = *attrs;
  Shape out;
  std::vector<double> scales;
  bool known;
  QF_RETURN_IF_ERROR(ComputeResizeShape(ctx, r, in, &out, &scales, &known));
  const size_t rank = in.size();

  // roi: [starts..., ends...] over `axes`; default 0..1 on every axis.
  std::vector<double> roi_start(rank, 0.0), roi_end(rank, 1.0);
  if (r.coord == "tf_crop_and_resize" && Given(ctx.input(1))) {
    std::vector<float> roi;
    if (!ReadFloats(ctx.input(1), &roi)) return ctx.Unsupported("roi must be a float tensor");
    if (roi.size() != 2 * r.axes.size())
      return ctx.Invalid("roi has " + std::to_string(roi.size()) + " values, expected " +
                         std::to_string(2 * r.axes.size()));
    for (size_t i = 0; i < r.axes.size(); ++i) {
      roi_start[size_t(r.axes[i])] = roi[i];
      roi_end[size_t(r.axes[i])] = roi[r.axes.size() + i];
    }
  }

  taps->assign(rank, {});
  for (size_t a = 0; a < rank; ++a) {
    const bool resized = std::find(r.axes.begin(), r.axes.end(), int(a)) != r.axes.end();
    for (int64_t o = 0; o < out[a]; ++o) {
      if (!resized) {
        (*taps)[a].push_back({{o, 1.0}});
        continue;
      }
      const double coord = SourceCoord(r, o, scales[a], in[a], out[a], roi_start[a], roi_end[a]);
      (*taps)[a].push_back(AxisTaps(r, coord, scales[a], in[a]));
    }
  }
  return Status::Ok();
}

Status RunResizeChannelsFirst(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  ResizeAttrs r;
  std::vector<std::vector<std::vector<Tap>>> taps;
  QF_RETURN_IF_ERROR(ResizeTaps(ctx, x->shape, &r, &taps));
  if (RunResizeFast(ctx, r, taps)) return Status::Ok();
  switch (x->dtype) {
    case DType::kFloat32:
      ResizeKernel<float>(*x, taps, r.extrapolation, y);
      break;
    case DType::kFloat64:
      ResizeKernel<double>(*x, taps, r.extrapolation, y);
      break;
    case DType::kInt8:
      ResizeKernel<int8_t>(*x, taps, r.extrapolation, y);
      break;
    case DType::kUInt8:
      ResizeKernel<uint8_t>(*x, taps, r.extrapolation, y);
      break;
    case DType::kInt16:
      ResizeKernel<int16_t>(*x, taps, r.extrapolation, y);
      break;
    case DType::kUInt16:
      ResizeKernel<uint16_t>(*x, taps, r.extrapolation, y);
      break;
    case DType::kInt32:
      ResizeKernel<int32_t>(*x, taps, r.extrapolation, y);
      break;
    case DType::kInt64:
      ResizeKernel<int64_t>(*x, taps, r.extrapolation, y);
      break;
    default:
      return ctx.Unsupported(std::string("dtype ") + dtype_name(x->dtype));
  }
  return Status::Ok();
}

// channels_last = 1 (set by the layout planning for 8-bit and float nearest
// resizes): x [N, H, W, C], y [N, OH, OW, C], the scales and sizes those of
// the channels-first view. Nearest over H and W copies whole pixels: the C
// values of the source pixel the reference picks (the same taps).
// Whether the channels-last pixel copies below take the call (with the taps
// it computes); otherwise it runs through RunViaChannelsFirst. ResizeScratch
// asks this too, so the fallback's copies are planned exactly when taken.
Status ResizeChannelsLastCovered(const KernelContext& ctx, ResizeAttrs* r,
                                 std::vector<std::vector<std::vector<Tap>>>* taps, bool* covered) {
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(ResizeTaps(ctx, ChannelsFirstShape(x->shape), r, taps));
  auto single = [](const std::vector<std::vector<Tap>>& axis) {
    for (const std::vector<Tap>& t : axis)
      if (t.size() != 1 || t[0].weight != 1.0) return false;
    return true;
  };
  const auto& t = *taps;
  *covered =
      x->rank() == 4 && r->mode == Mode::kNearest &&
      (x->dtype == DType::kInt8 || x->dtype == DType::kUInt8 || x->dtype == DType::kFloat32) &&
      ctx.kernel_config().fast_loops && IdentityAxis(t[0]) && IdentityAxis(t[1]) && single(t[2]) &&
      single(t[3]);
  return Status::Ok();
}

// OpDef::scratch: a channels-last resize the pixel copies do not take gets
// RunViaChannelsFirst's copies of input and output (the channels-first
// kernel needs no scratch).
Status ResizeScratch(KernelContext& ctx, ScratchNeeds* needs) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  const Tensor* x = ctx.input(0);
  if (!cl || !x->shape_known() || x->rank() < 3) return Status::Ok();
  ResizeAttrs r;
  std::vector<std::vector<std::vector<Tap>>> taps;
  bool covered = false;
  QF_RETURN_IF_ERROR(ResizeChannelsLastCovered(ctx, &r, &taps, &covered));
  return covered ? Status::Ok() : ChannelsFirstScratch(ctx, nullptr, needs);
}

Status RunResizeChannelsLast(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  Tensor* y = ctx.output(0);
  ResizeAttrs r;
  std::vector<std::vector<std::vector<Tap>>> taps;
  bool covered = false;
  QF_RETURN_IF_ERROR(ResizeChannelsLastCovered(ctx, &r, &taps, &covered));
  if (!covered)
    return RunViaChannelsFirst(ctx, RunResizeChannelsFirst, nullptr, /*planned_for_fallback=*/true);
  const int64_t n = x->shape[0], ih = x->shape[1], iw = x->shape[2];
  const int64_t oh = y->shape[1], ow = y->shape[2];
  const size_t pixel = dtype_storage_bytes(x->dtype, x->shape[3]);
  const uint8_t* xd = x->ptr<uint8_t>();
  uint8_t* yd = y->ptr<uint8_t>();
  const size_t row = size_t(ow) * pixel;
  // Output rows [r0, r1) of all images, split between threads from 32 KiB
  // on (it ran alone: PP-OCRv4 det's six took 0.13 ms of its 2.9 at 2 threads).
  auto rows = [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, o = r % oh;
      uint8_t* yr = yd + size_t(r) * row;
      const int64_t src_row = taps[2][size_t(o)][0].index;
      // Same source row as the previous output row (written by this call): copy that row.
      if (o > 0 && r > r0 && taps[2][size_t(o - 1)][0].index == src_row) {
        std::memcpy(yr, yr - row, row);
        continue;
      }
      const uint8_t* xr = xd + size_t((b * ih + src_row) * iw) * pixel;
      for (int64_t col = 0; col < ow; ++col)
        std::memcpy(yr + size_t(col) * pixel, xr + size_t(taps[3][size_t(col)][0].index) * pixel,
                    pixel);
    }
  };
  const bool small = int64_t(row) * n * oh < (int64_t(1) << 15);
  kernels::ParallelFor(small ? nullptr : ctx.pool, n * oh, rows);
  return Status::Ok();
}

Status InferResize(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? InferViaChannelsFirst(ctx, InferResizeChannelsFirst) : InferResizeChannelsFirst(ctx);
}

Status RunResize(KernelContext& ctx) {
  bool cl = false;
  QF_RETURN_IF_ERROR(ReadChannelsLast(ctx, &cl));
  return cl ? RunResizeChannelsLast(ctx) : RunResizeChannelsFirst(ctx);
}

}  // namespace

const OpDef& OpDef_Resize() {
  // roi, scales and sizes are read by value (sizes/scales decide the shape).
  static const OpDef def = [] {
    OpDef d{"Resize",
            InferResize,
            RunResize,
            /*value_inputs=*/0b1110,
            /*shape_only=*/false,
            /*min_inputs=*/1,
            /*max_inputs=*/4};
    // 8-bit data is only resized by nearest, which copies pixels channels-last.
    d.layout = LayoutRole::kChannelsLast;
    d.layout_float = true;
    d.layout_channels_last = [](const AttrMap& a) {
      return a.GetString("mode", "nearest") == "nearest";
    };
    d.traits = kTraitMovesElements | kTraitSpatial;
    d.scratch = ResizeScratch;
    return d;
  }();
  return def;
}

}  // namespace qfold
