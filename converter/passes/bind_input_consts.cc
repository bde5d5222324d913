// --const NAME=VALUE: a graph input becomes a constant (a sample rate, a mode
// flag), so that constant folding and FoldIfs can resolve what depends on it.
// The value's dtype is the input's; its shape is the declared one, with one
// unknown dim (or an unknown rank) taken from the number of values given.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "converter/passes/passes.h"
#include "core/shape_util.h"

namespace qfold {
namespace conv {

namespace {

Status Bad(const Graph& g, const std::string& msg) {
  return Status(StatusCode::kInvalidArgument, g.source + ": " + msg);
}

bool ParseOne(const std::string& text, DType dt, uint8_t* out) {
  if (text.empty()) return false;
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  if (dt == DType::kBool) {
    const bool t = text == "1" || text == "true" || text == "True";
    const bool f = text == "0" || text == "false" || text == "False";
    if (!t && !f) return false;
    *out = t ? 1 : 0;
    return true;
  }
  if (dt == DType::kFloat32 || dt == DType::kFloat64) {
    const double v = std::strtod(s, &end);
    if (*end || errno == ERANGE || std::isnan(v)) return false;
    if (dt == DType::kFloat64) {
      std::memcpy(out, &v, 8);
    } else {
      if (std::fabs(v) > double(std::numeric_limits<float>::max())) return false;
      const float f = float(v);
      std::memcpy(out, &f, 4);
    }
    return true;
  }
  int64_t lo = 0;
  uint64_t hi = 0;
  switch (dt) {
    case DType::kInt8:
      lo = INT8_MIN, hi = INT8_MAX;
      break;
    case DType::kUInt8:
      lo = 0, hi = UINT8_MAX;
      break;
    case DType::kInt16:
      lo = INT16_MIN, hi = INT16_MAX;
      break;
    case DType::kUInt16:
      lo = 0, hi = UINT16_MAX;
      break;
    case DType::kInt32:
      lo = INT32_MIN, hi = INT32_MAX;
      break;
    case DType::kUInt32:
      lo = 0, hi = UINT32_MAX;
      break;
    case DType::kInt64:
      lo = INT64_MIN, hi = INT64_MAX;
      break;
    case DType::kUInt64:
      lo = 0, hi = UINT64_MAX;
      break;
    default:
      return false;
  }
  uint64_t bits = 0;
  if (lo < 0) {
    const long long v = std::strtoll(s, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > int64_t(hi)) return false;
    bits = uint64_t(v);
  } else {
    if (text[0] == '-') return false;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (*end || errno == ERANGE || v > hi) return false;
    bits = v;
  }
  std::memcpy(out, &bits, dtype_size(dt));  // little-endian: the low bytes
  return true;
}

// The shape the values take: the declared shape, completed by the count.
bool ConstShape(const Value& v, int64_t count, Shape* out) {
  if (!v.rank_known) {
    *out = count == 1 ? Shape{} : Shape{count};
    return true;
  }
  int64_t known = 1;
  int unknown = 0;
  for (int64_t d : v.shape) d < 0 ? ++unknown : known *= d;
  *out = v.shape;
  if (unknown == 0) return known == count;
  if (known == 0 || count % known) return false;
  // Several unknown dims: all but the last are 1 (a scalar given for [N, M]).
  for (int64_t& d : *out)
    if (d < 0) d = --unknown ? 1 : count / known;
  return true;
}

}  // namespace

Status BindInputConsts(Graph* g, const std::map<std::string, std::string>& consts) {
  for (const auto& kv : consts) {
    auto it = std::find(g->inputs.begin(), g->inputs.end(), kv.first);
    if (it == g->inputs.end()) {
      std::string list;
      for (const std::string& in : g->inputs) list += (list.empty() ? "'" : ", '") + in + "'";
      return Bad(*g, "--const names '" + kv.first + "', which is not a graph input; inputs: " +
                         (list.empty() ? std::string("none") : list));
    }
    Value& v = g->values[kv.first];
    const DType dt = v.dtype;
    if (dtype_size(dt) == 0 || dt == DType::kFloat16 || dt == DType::kBFloat16)
      return Bad(*g, "--const " + kv.first + ": input '" + kv.first + "' is " + dtype_name(dt) +
                         "; --const takes bool, integer, float32 and float64 inputs");
    std::vector<uint8_t> bytes;
    size_t start = 0;
    for (;;) {
      const size_t comma = kv.second.find(',', start);
      const std::string item = kv.second.substr(start, comma - start);
      bytes.resize(bytes.size() + dtype_size(dt));
      if (!ParseOne(item, dt, bytes.data() + bytes.size() - dtype_size(dt)))
        return Bad(*g, "--const " + kv.first + "=" + kv.second + ": '" + item +
                           "' is not a valid " + dtype_name(dt) + " (the input's type)");
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    const int64_t count = int64_t(bytes.size() / dtype_size(dt));
    Shape shape;
    if (!ConstShape(v, count, &shape))
      return Bad(*g, "--const " + kv.first + " gives " + std::to_string(count) +
                         " value(s), input '" + kv.first + "' is declared " +
                         ShapeToString(v.shape));
    v.shape = shape;
    v.rank_known = true;
    v.dim_names.clear();
    v.data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    g->inputs.erase(it);
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
