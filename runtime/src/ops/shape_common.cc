#include "ops/shape_common.h"

#include <cstring>
#include <string>

namespace qfold {

Status CheckByteDType(const KernelContext& ctx, const Tensor* t, const char* what) {
  if (dtype_size(t->dtype) == 0)
    return ctx.Unsupported(std::string(what) + " dtype " + dtype_name(t->dtype) +
                           " is not supported");
  return Status::Ok();
}

Status CheckIntDType(const KernelContext& ctx, const Tensor* t, const char* what) {
  if (t->dtype != DType::kInt64 && t->dtype != DType::kInt32)
    return ctx.Invalid(std::string(what) + " must be int32 or int64, got " + dtype_name(t->dtype));
  return Status::Ok();
}

void SetOutput(Tensor* out, DType dtype, Shape shape) {
  if (!out) return;
  out->dtype = dtype;
  out->rank_known = true;
  out->shape = std::move(shape);
}

void SetOutputUnknownRank(Tensor* out, DType dtype) {
  if (!out) return;
  out->dtype = dtype;
  out->rank_known = false;
  out->shape.clear();
}

int64_t DimProduct(const Shape& shape, int begin, int end) {
  int64_t p = 1;
  bool unknown = false;
  for (int i = begin; i < end; ++i) {
    if (shape[i] == 0) return 0;
    if (shape[i] < 0)
      unknown = true;
    else
      p *= shape[i];
  }
  return unknown ? kUnknownDim : p;
}

namespace {

struct GatherState {
  const std::vector<std::vector<int64_t>>* offsets;
  size_t esz;
  const uint8_t* in;
  uint8_t* out;
  const uint8_t* fill;
};

void GatherAxis(GatherState& s, size_t axis, int64_t base, bool filling) {
  const std::vector<int64_t>& offs = (*s.offsets)[axis];
  bool last = axis + 1 == s.offsets->size();
  for (int64_t off : offs) {
    bool f = filling || off == kFillOffset;
    if (last) {
      std::memcpy(s.out, f ? s.fill : s.in + (base + off) * int64_t(s.esz), s.esz);
      s.out += s.esz;
    } else {
      GatherAxis(s, axis + 1, f ? 0 : base + off, f);
    }
  }
}

}  // namespace

void GatherCopy(const std::vector<std::vector<int64_t>>& offsets, size_t elem_size, const void* in,
                void* out, const void* fill) {
  if (offsets.empty()) {
    std::memcpy(out, in, elem_size);
    return;
  }
  for (const auto& o : offsets)
    if (o.empty()) return;  // empty output
  GatherState s{&offsets, elem_size, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out),
                static_cast<const uint8_t*>(fill)};
  GatherAxis(s, 0, 0, false);
}

}  // namespace qfold
