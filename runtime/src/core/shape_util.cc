#include "core/shape_util.h"

#include <algorithm>

#include "core/half.h"

namespace qfold {

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

bool CheckedNumel(const Shape& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > INT64_MAX / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out, std::string* err) {
  size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db) {
      r[i] = da;
    } else if (da == 1) {
      r[i] = db;
    } else if (db == 1) {
      r[i] = da;
    } else if (da < 0) {
      r[i] = db;
    } else if (db < 0) {
      r[i] = da;
    } else {
      if (err)
        *err = "cannot broadcast " + std::to_string(da) + " by " + std::to_string(db) +
               " at axis " + std::to_string(i) + " of shapes " + ShapeToString(a) + " and " +
               ShapeToString(b);
      return false;
    }
  }
  *out = std::move(r);
  return true;
}

bool NormalizeAxis(int64_t axis, int rank, int* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = int(axis < 0 ? axis + rank : axis);
  return true;
}

bool ReadInts(const Tensor* t, std::vector<int64_t>* out) {
  if (!t || !t->data || !t->shape_known()) return false;
  int64_t n = t->numel();
  out->resize(size_t(n));
  if (t->dtype == DType::kInt64) {
    std::copy(t->ptr<int64_t>(), t->ptr<int64_t>() + n, out->begin());
  } else if (t->dtype == DType::kInt32) {
    std::copy(t->ptr<int32_t>(), t->ptr<int32_t>() + n, out->begin());
  } else {
    return false;
  }
  return true;
}

bool ReadFloats(const Tensor* t, std::vector<float>* out) {
  if (!t || !t->data || !t->shape_known()) return false;
  out->resize(size_t(t->numel()));
  return ReadFloatsInto(t, out->data());
}

bool ReadFloatsInto(const Tensor* t, float* out, int64_t count) {
  if (!t || !t->data || !t->shape_known()) return false;
  const int64_t n = count < 0 ? t->numel() : std::min(count, t->numel());
  for (int64_t i = 0; i < n; ++i) {
    switch (t->dtype) {
      case DType::kFloat32: out[i] = t->ptr<float>()[i]; break;
      case DType::kFloat64: out[i] = float(t->ptr<double>()[i]); break;
      case DType::kFloat16: out[i] = HalfToFloat(t->ptr<uint16_t>()[i]); break;
      case DType::kBFloat16: out[i] = BFloat16ToFloat(t->ptr<uint16_t>()[i]); break;
      default: return false;
    }
  }
  return true;
}

void SetOutputsUnknown(KernelContext& ctx) {
  for (Tensor* o : ctx.outputs)
    if (o) {
      o->rank_known = false;
      o->shape.clear();
    }
}

BroadcastIndexer::BroadcastIndexer(const std::vector<Shape>& in_shapes, const Shape& out)
    : out_(out) {
  size_t rank = out.size();
  for (const Shape& s : in_shapes) {
    std::vector<int64_t> st(rank, 0);
    std::vector<int64_t> cs = ContiguousStrides(s);
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) st[off + i] = s[i] == 1 ? 0 : cs[i];
    strides_.push_back(std::move(st));
  }
}

}  // namespace qfold
