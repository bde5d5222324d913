// CheckModel: reads the model, runs every check family, and formats the report.
#include "converter/check/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "converter/check/internal.h"
#include "converter/onnx_reader.h"
#include "converter/passes/passes.h"
#include "core/half.h"
#include "core/tensor.h"

namespace qfold {
namespace check {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

int Report::count(Severity s) const {
  int n = 0;
  for (const Issue& i : issues) n += i.severity == s;
  return n;
}

std::string Quote(const std::string& s) {
  return "'" + s + "'";
}

std::string DimsText(const Shape& s, const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    if (s[i] >= 0)
      out += std::to_string(s[i]);
    else
      out += i < names.size() && !names[i].empty() ? names[i] : "?";
  }
  return out + "]";
}

std::string FloatText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", v);
  return buf;
}

bool ConstFloats(const conv::Value* v, std::vector<double>* out) {
  if (!v || !v->is_constant()) return false;
  const uint8_t* p = v->data->data();
  const size_t bytes = v->data->size();
  out->clear();
  switch (v->dtype) {
    case DType::kFloat32:
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        float f;
        std::memcpy(&f, p + i, 4);
        out->push_back(f);
      }
      return true;
    case DType::kFloat64:
      for (size_t i = 0; i + 8 <= bytes; i += 8) {
        double f;
        std::memcpy(&f, p + i, 8);
        out->push_back(f);
      }
      return true;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (size_t i = 0; i + 2 <= bytes; i += 2) {
        uint16_t h;
        std::memcpy(&h, p + i, 2);
        out->push_back(v->dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h));
      }
      return true;
    default: {
      std::vector<int64_t> ints;
      if (!ConstInts(v, &ints)) return false;
      out->assign(ints.begin(), ints.end());
      return true;
    }
  }
}

bool ConstInts(const conv::Value* v, std::vector<int64_t>* out) {
  if (!v || !v->is_constant()) return false;
  const uint8_t* p = v->data->data();
  const size_t bytes = v->data->size();
  out->clear();
  auto read = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i + sizeof(T) <= bytes; i += sizeof(T)) {
      T x;
      std::memcpy(&x, p + i, sizeof(T));
      out->push_back(int64_t(x));
    }
  };
  int64_t n = 1;
  for (int64_t d : v->shape) n *= d;
  switch (v->dtype) {
    case DType::kInt8:
      read(int8_t());
      return true;
    case DType::kUInt8:
    case DType::kBool:
      read(uint8_t());
      return true;
    case DType::kInt16:
      read(int16_t());
      return true;
    case DType::kUInt16:
      read(uint16_t());
      return true;
    case DType::kInt32:
      read(int32_t());
      return true;
    case DType::kUInt32:
      read(uint32_t());
      return true;
    case DType::kInt64:
      read(int64_t());
      return true;
    case DType::kUInt64:
      read(uint64_t());
      return true;
    case DType::kInt4:
    case DType::kUInt4:
      for (int64_t i = 0; i < n && size_t(i / 2) < bytes; ++i) {
        int nib = (p[i / 2] >> (i % 2 ? 4 : 0)) & 0xF;
        out->push_back(v->dtype == DType::kInt4 && nib >= 8 ? nib - 16 : nib);
      }
      return true;
    default:
      return false;
  }
}

void Analysis::Add(Severity s, const std::string& code, const conv::Node* n,
                   const std::string& tensor, const std::string& message, const std::string& fix) {
  Issue i;
  i.severity = s;
  i.code = code;
  if (n) i.node = n->name, i.op_type = n->op_type;
  i.tensor = tensor;
  i.message = message;
  i.fix = fix;
  report->issues.push_back(std::move(i));
}

std::string Analysis::Describe(const std::string& value) const {
  auto it = producer.find(value);
  if (it != producer.end()) return g.nodes[it->second].Label();
  if (std::find(g.inputs.begin(), g.inputs.end(), value) != g.inputs.end())
    return "graph input " + Quote(value);
  if (g.IsConstant(value)) return "initializer " + Quote(value);
  return Quote(value);
}

std::string Analysis::ShapeText(const std::string& value) const {
  const conv::Value* v = g.Find(value);
  if (!v || !v->rank_known) return "[unknown rank]";
  return DimsText(v->shape, v->dim_names);
}

DimOrigin Analysis::Origin(const std::string& value, int axis) const {
  auto it = origins.find(value);
  if (it != origins.end() && axis >= 0 && size_t(axis) < it->second.size())
    return it->second[size_t(axis)];
  DimOrigin o;
  o.text = Describe(value);
  return o;
}

namespace {

// ReadOnnxModel failures are fatal for the model; name the tensor when the
// message does ("... tensor 'w' external data ...").
void ReportReadError(const Status& st, Analysis* a) {
  const std::string& m = st.message();
  bool external = m.find("external data") != std::string::npos;
  std::string tensor;
  size_t t = m.find("tensor '");
  if (t != std::string::npos) {
    size_t end = m.find('\'', t + 8);
    if (end != std::string::npos) tensor = m.substr(t + 8, end - t - 8);
  }
  a->Add(Severity::kError, external ? "external_data" : "invalid_model", nullptr, tensor, m,
         external ? "keep the external data file next to the model, with the name, offset and "
                    "length the model records (re-save with onnx.save(..., "
                    "save_as_external_data=True))"
                  : "");
}

// --const, then If folding and subgraph captures as the converter does them.
void FoldConstsAndIfs(Analysis* a) {
  Status st = conv::BindInputConsts(&a->g, a->opts->consts);
  if (!st.ok()) a->Add(Severity::kError, "invalid_argument", nullptr, "", st.message());
  // An If whose condition stays dynamic is kept (it runs at run time).
  st = conv::FoldIfs(&a->g);
  if (!st.ok()) {
    const conv::Node* node = nullptr;
    for (const conv::Node& n : a->g.nodes)
      if (n.op_type == "If" && st.message().find(n.Label() + ":") != std::string::npos) node = &n;
    a->Add(Severity::kError, "invalid_if", node, "", st.message());
  }
  // Sequences whose lengths are known become tensors, as when converting; the
  // graph is left as it was when one cannot.
  std::string kept_why;
  st = conv::LowerSequences(&a->g, &kept_why);
  if (st.ok() && !kept_why.empty()) {
    const conv::Node* node = nullptr;
    for (const conv::Node& n : a->g.nodes)
      if (!node && kept_why.find(n.Label() + ":") != std::string::npos) node = &n;
    a->Add(Severity::kWarning, "dynamic_sequence", node, "",
           "runs on sequence values at run time, in dynamic mode (every operator inferred and "
           "allocated per run): " +
               kept_why,
           "fix the dims the sequence depends on with --dim/--input-shape so that it becomes "
           "tensors at conversion, where that is possible");
  }
  if (!st.ok()) {
    const conv::Node* node = nullptr;
    for (const conv::Node& n : a->g.nodes)
      if (st.message().find(n.Label() + ":") != std::string::npos) node = &n;
    const bool dynamic = st.code() == StatusCode::kUnsupported;
    a->Add(Severity::kError, dynamic ? "dynamic_sequence" : "invalid_sequence", node, "",
           st.message(),
           dynamic ? "sequences inside this operator's subgraphs run only when their lengths "
                     "are known at conversion; fix the dims they depend on with "
                     "--dim/--input-shape"
                   : "");
  }
  // The values subgraphs read become inputs of their If/Loop/Scan, as when
  // converting; a Loop that nothing bounds is explained here, not in the runtime.
  st = conv::CaptureOuterValues(&a->g);
  if (!st.ok()) {
    const conv::Node* node = nullptr;
    for (const conv::Node& n : a->g.nodes)
      if (st.message().find(n.Label() + ":") != std::string::npos) node = &n;
    const bool unbounded = st.message().find("unbounded loop") != std::string::npos;
    a->Add(Severity::kError, unbounded ? "dynamic_loop" : "invalid_subgraph", node, "",
           st.message(),
           unbounded ? "give the Loop a trip count M (the most iterations it may run); the "
                       "condition may still end it earlier"
                     : "");
  }
  // Folding inlined nodes: the producer map is rebuilt.
  a->producer.clear();
  for (size_t k = 0; k < a->g.nodes.size(); ++k)
    for (const std::string& o : a->g.nodes[k].outputs)
      if (!o.empty()) a->producer[o] = k;
}

}  // namespace

Status CheckModel(const std::string& onnx_path, const CheckOptions& opts, Report* out) {
  *out = Report();
  out->model = onnx_path;
  Analysis a;
  a.opts = &opts;
  a.report = out;
  Status st = conv::ReadOnnxModel(onnx_path, &a.g);
  if (!st.ok()) {
    ReportReadError(st, &a);
    return Status::Ok();
  }
  st = conv::NormalizeOpsets(&a.g);
  if (!st.ok()) {
    a.Add(Severity::kError, "invalid_model", nullptr, "", st.message());
    return Status::Ok();
  }
  st = conv::VerifyGraph(&a.g);
  if (!st.ok()) {
    a.Add(Severity::kError, "invalid_graph", nullptr, "", st.message());
    return Status::Ok();
  }
  for (size_t k = 0; k < a.g.nodes.size(); ++k)
    for (const std::string& o : a.g.nodes[k].outputs)
      if (!o.empty()) a.producer[o] = k;
  ApplyInputShapes(&a);
  FoldConstsAndIfs(&a);
  WalkGraph(&a);
  CheckQdq(&a);
  CheckCoverage(&a, opts.analyze_folding ? onnx_path : "");
  // A Q/DQ node's own inference failure repeats what the QDQ checks say more precisely.
  std::set<std::string> qdq_nodes;
  for (const Issue& i : out->issues)
    if (i.code.compare(0, 4, "qdq_") == 0) qdq_nodes.insert(i.node);
  out->issues.erase(
      std::remove_if(out->issues.begin(), out->issues.end(),
                     [&](const Issue& i) {
                       return (i.op_type == "QuantizeLinear" || i.op_type == "DequantizeLinear") &&
                              i.code.compare(0, 4, "qdq_") != 0 && qdq_nodes.count(i.node);
                     }),
      out->issues.end());
  std::stable_sort(out->issues.begin(), out->issues.end(), [](const Issue& x, const Issue& y) {
    return int(x.severity) < int(y.severity);
  });
  return Status::Ok();
}

std::string ReportJson(const Report& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["summary"] = {{"errors", r.count(Severity::kError)},
                  {"warnings", r.count(Severity::kWarning)},
                  {"infos", r.count(Severity::kInfo)}};
  nlohmann::json issues = nlohmann::json::array();
  for (const Issue& i : r.issues)
    issues.push_back({{"severity", SeverityName(i.severity)},
                      {"code", i.code},
                      {"node", i.node},
                      {"op_type", i.op_type},
                      {"tensor", i.tensor},
                      {"message", i.message},
                      {"fix", i.fix}});
  j["issues"] = issues;
  int per_channel = 0, per_tensor = 0, blocked = 0, flt = 0, folded = 0;
  nlohmann::json ops = nlohmann::json::array();
  for (const QuantOp& q : r.quant_ops) {
    per_channel += q.granularity == "per-channel";
    per_tensor += q.granularity == "per-tensor";
    blocked += q.granularity == "blocked";
    flt += q.granularity == "float";
    folded += q.folded;
    ops.push_back({{"node", q.node},
                   {"op_type", q.op_type},
                   {"weight", q.weight},
                   {"granularity", q.granularity},
                   {"folded", q.folded}});
  }
  j["quantization"] = {{"per_channel", per_channel}, {"per_tensor", per_tensor},
                       {"blocked", blocked},         {"float", flt},
                       {"folded", folded},           {"ops", ops}};
  return j.dump(2) + "\n";
}

std::string ReportText(const Report& r, bool color) {
  const char* reset = color ? "\033[0m" : "";
  auto paint = [&](Severity s) -> const char* {
    if (!color) return "";
    return s == Severity::kError     ? "\033[1;31m"
           : s == Severity::kWarning ? "\033[1;33m"
                                     : "\033[36m";
  };
  const int e = r.count(Severity::kError), w = r.count(Severity::kWarning),
            n = r.count(Severity::kInfo);
  std::string out = r.model + ": " + std::to_string(e) + (e == 1 ? " error, " : " errors, ") +
                    std::to_string(w) + (w == 1 ? " warning, " : " warnings, ") +
                    std::to_string(n) + (n == 1 ? " info\n" : " infos\n");
  for (Severity s : {Severity::kError, Severity::kWarning, Severity::kInfo}) {
    bool header = false;
    for (const Issue& i : r.issues) {
      if (i.severity != s) continue;
      if (!header) {
        out += std::string("\n") + paint(s) + SeverityName(s) + "s:" + reset + "\n";
        header = true;
      }
      out += std::string("  ") + paint(s) + SeverityName(s) + reset + " [" + i.code + "] " +
             i.message + "\n";
      if (!i.fix.empty()) out += "      fix: " + i.fix + "\n";
    }
  }
  bool quantized = false;
  for (const QuantOp& q : r.quant_ops) quantized = quantized || q.granularity != "float";
  if (quantized) {
    std::map<std::string, int> by;
    int folded = 0;
    for (const QuantOp& q : r.quant_ops) by[q.granularity]++, folded += q.folded;
    out += "\nquantization: " + std::to_string(r.quant_ops.size()) + " Conv/MatMul/Gemm:";
    for (const auto& kv : by) out += " " + kv.first + " " + std::to_string(kv.second) + ",";
    out += " " + std::to_string(folded) + " fold into integer kernels\n";
  }
  return out;
}

int ExitCode(const Report& r, bool strict) {
  if (r.count(Severity::kError)) return 2;
  if (strict && r.count(Severity::kWarning)) return 1;
  return 0;
}

}  // namespace check
}  // namespace qfold
