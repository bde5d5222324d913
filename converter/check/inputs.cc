// Graph input shapes: --input-shape and --dim overrides, sample/calibration
// data against the model's inputs (data_mismatch), and the origin of every
// input dim for later messages.
#include <algorithm>
#include <map>

#include "converter/check/internal.h"

namespace qfold {
namespace check {

namespace {

bool IsInput(const Analysis& a, const std::string& name) {
  return std::find(a.g.inputs.begin(), a.g.inputs.end(), name) != a.g.inputs.end();
}

std::string InputList(const Analysis& a) {
  std::string s;
  for (const std::string& n : a.g.inputs) s += (s.empty() ? "" : ", ") + Quote(n);
  return s.empty() ? "none" : s;
}

// "1xCx224x224" with unknown dims as C.
std::string ShapeArg(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "x" : "") + (s[i] < 0 ? std::string("D") : std::to_string(s[i]));
  return out;
}

// Checks one data array against its input; true when its shape may serve as the
// input's shape for the walk. `bound` collects dim_param values seen so far.
bool CheckData(Analysis* a, const DataInfo& d,
               std::map<std::string, std::pair<int64_t, std::string>>* bound) {
  conv::Value* v = a->g.Find(d.name);
  if (!v || !IsInput(*a, d.name)) {
    a->Add(Severity::kError, "data_mismatch", nullptr, d.name,
           "data " + Quote(d.source) + " is named " + Quote(d.name) +
               ", which is not an input of the model (inputs: " + InputList(*a) + ")",
           "name the array like the input it feeds");
    return false;
  }
  bool ok = true;
  if (v->dtype != d.dtype) {
    a->Add(Severity::kError, "data_mismatch", nullptr, d.name,
           "data " + Quote(d.source) + " is " + dtype_name(d.dtype) + " but input " +
               Quote(d.name) + " is " + dtype_name(v->dtype),
           std::string("convert the array, e.g. arr.astype(np.") + dtype_name(v->dtype) + ")");
    ok = false;
  }
  if (!v->rank_known) return ok;
  const std::string given = a->input_shape_source.count(d.name) ? "given as " : "fixed at ";
  if (v->shape.size() != d.shape.size()) {
    a->Add(Severity::kError, "data_mismatch", nullptr, d.name,
           "data " + Quote(d.source) + " has shape " + DimsText(d.shape) + " (rank " +
               std::to_string(d.shape.size()) + ") but input " + Quote(d.name) + " is " +
               DimsText(v->shape, v->dim_names) + " (rank " + std::to_string(v->shape.size()) +
               ")");
    return false;
  }
  for (size_t i = 0; i < d.shape.size(); ++i) {
    const std::string dn = i < v->dim_names.size() ? v->dim_names[i] : "";
    if (v->shape[i] >= 0 && v->shape[i] != d.shape[i]) {
      a->Add(Severity::kError, "data_mismatch", nullptr, d.name,
             "data " + Quote(d.source) + " has shape " + DimsText(d.shape) + " but input " +
                 Quote(d.name) + " is " + given + DimsText(v->shape, v->dim_names) + ": dim " +
                 std::to_string(i) + " is " + std::to_string(d.shape[i]) +
                 ", the model fixes it at " + std::to_string(v->shape[i]),
             i == 0 ? "feed batches of " + std::to_string(v->shape[i]) +
                          " (split the data), or export the model with a dynamic batch dim"
                    : "resize the data to " + DimsText(v->shape));
      ok = false;
    } else if (v->shape[i] < 0 && !dn.empty()) {
      auto it = bound->find(dn);
      if (it != bound->end() && it->second.first != d.shape[i]) {
        a->Add(Severity::kError, "data_mismatch", nullptr, d.name,
               "data " + Quote(d.source) + " sets dim " + Quote(dn) + " (input " + Quote(d.name) +
                   " dim " + std::to_string(i) + ") to " + std::to_string(d.shape[i]) + ", but " +
                   it->second.second + " sets it to " + std::to_string(it->second.first));
        ok = false;
      } else {
        (*bound)[dn] = {d.shape[i], Quote(d.source)};
      }
    }
  }
  return ok;
}

}  // namespace

void ApplyInputShapes(Analysis* a) {
  const CheckOptions& o = *a->opts;
  for (const auto& kv : o.input_shapes) {
    conv::Value* v = a->g.Find(kv.first);
    if (!v || !IsInput(*a, kv.first)) {
      a->Add(Severity::kError, "invalid_argument", nullptr, kv.first,
             "--input-shape names " + Quote(kv.first) +
                 ", which is not an input of the model (inputs: " + InputList(*a) + ")");
      continue;
    }
    if (v->rank_known && v->shape.size() != kv.second.size())
      a->Add(Severity::kWarning, "invalid_argument", nullptr, kv.first,
             "--input-shape gives " + Quote(kv.first) + " rank " +
                 std::to_string(kv.second.size()) + " (" + DimsText(kv.second) +
                 "), the model declares " + a->ShapeText(kv.first));
    v->shape = kv.second;
    v->rank_known = true;
    v->dim_names.resize(v->shape.size());
    a->input_shape_source[kv.first] = "--input-shape";
  }
  std::map<std::string, std::pair<int64_t, std::string>> bound;
  for (const auto& kv : o.dims) {
    bool used = false;
    for (const std::string& in : a->g.inputs) {
      conv::Value* v = a->g.Find(in);
      for (size_t i = 0; v && i < v->shape.size() && i < v->dim_names.size(); ++i)
        if (v->shape[i] < 0 && v->dim_names[i] == kv.first) {
          v->shape[i] = kv.second;
          used = true;
          if (!a->input_shape_source.count(in)) a->input_shape_source[in] = "--dim";
        }
    }
    bound[kv.first] = {kv.second, "--dim " + kv.first};
    if (!used)
      a->Add(Severity::kWarning, "invalid_argument", nullptr, "",
             "--dim " + kv.first + " names no symbolic dim of any input");
  }
  // Data: check every array; a consistent one fixes the symbolic dims it feeds.
  std::map<std::string, bool> fed;
  for (const DataInfo& d : o.data) {
    bool ok = CheckData(a, d, &bound);
    if (IsInput(*a, d.name)) fed[d.name] = true;
    conv::Value* v = a->g.Find(d.name);
    if (!ok || !v) continue;
    bool changed = false;
    for (size_t i = 0; i < v->shape.size(); ++i)
      if (v->shape[i] < 0) v->shape[i] = d.shape[i], changed = true;
    if (changed && !a->input_shape_source.count(d.name))
      a->input_shape_source[d.name] = "data " + Quote(d.source);
  }
  if (!o.data.empty())
    for (const std::string& in : a->g.inputs)
      if (!fed.count(in))
        a->Add(Severity::kWarning, "data_mismatch", nullptr, in,
               "no data for input " + Quote(in) + " " + a->ShapeText(in),
               "add an array named " + Quote(in) + " to the .npz (or --data " + in + "=FILE.npy)");

  for (const std::string& in : a->g.inputs) {
    const conv::Value* v = a->g.Find(in);
    if (!v || !v->rank_known) continue;
    auto src = a->input_shape_source.find(in);
    const std::string how = src == a->input_shape_source.end()
                                ? "declared as " + DimsText(v->shape, v->dim_names)
                                : "given as " + DimsText(v->shape, v->dim_names) +
                                      (src->second == "--input-shape" ? "" : " by " + src->second);
    std::vector<DimOrigin>& org = a->origins[in];
    bool symbolic = false;
    for (size_t i = 0; i < v->shape.size(); ++i) {
      DimOrigin d;
      d.text = "input " + Quote(in) + (v->shape.size() == 1 ? "" : " axis " + std::to_string(i)) +
               ", " + how;
      d.input = in;
      d.axis = int(i);
      org.push_back(d);
      symbolic = symbolic || v->shape[i] < 0;
    }
    if (symbolic) {
      std::string names;
      for (size_t i = 0; i < v->shape.size(); ++i)
        if (v->shape[i] < 0 && i < v->dim_names.size() && !v->dim_names[i].empty())
          names += " --dim " + v->dim_names[i] + "=VALUE";
      if (!names.empty()) names += " or";
      a->Add(Severity::kInfo, "symbolic_dims", nullptr, in,
             "input " + Quote(in) + " has symbolic dims " + DimsText(v->shape, v->dim_names) +
                 ": shapes that depend on them are not checked",
             "pass" + names + " --input-shape " + in + "=" + ShapeArg(v->shape));
    }
  }
}

}  // namespace check
}  // namespace qfold
