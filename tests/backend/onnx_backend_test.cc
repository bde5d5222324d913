// Runs the ONNX backend node tests (onnx/backend/test/data/node/*) through
// convert + run and compares with their reference outputs.
//
// A test is skipped only when qfold says, by status kUnsupported, that it does
// not support an operator, attribute or dtype the test uses; every other
// difference (wrong value, wrong shape, crash-free error) is a failure.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "converter/converter.h"
#include "converter/onnx_reader.h"
#include "converter/qfm_writer.h"
#include "core/half.h"
#include "qfold/runtime.h"

using namespace qfold;

namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};

std::vector<std::string> ListDir(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.compare(0, prefix.size(), prefix) == 0) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Exists(const std::string& p) {
  struct stat s;
  return stat(p.c_str(), &s) == 0;
}

double ElementAsDouble(DType t, const uint8_t* p, int64_t i) {
  switch (t) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return HalfToFloat(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return BFloat16ToFloat(v);
    }
    default:
      return 0;
  }
}

// Empty string when equal within the ONNX backend's tolerance (rtol 1e-3, atol 1e-7
// for float32; looser for half types whose reference was computed in half).
std::string Compare(const std::string& name, DType dt, const Shape& shape, const void* data,
                    const conv::Value& want) {
  if (dt != want.dtype)
    return "output '" + name + "' is " + dtype_name(dt) + ", expected " + dtype_name(want.dtype);
  if (shape != want.shape) {
    std::string a, b;
    for (auto d : shape) a += std::to_string(d) + ",";
    for (auto d : want.shape) b += std::to_string(d) + ",";
    return "output '" + name + "' has shape (" + a + "), expected (" + b + ")";
  }
  const uint8_t* got = static_cast<const uint8_t*>(data);
  const uint8_t* ref = want.data->data();
  int64_t n = 1;
  for (auto d : shape) n *= d;
  if (dtype_is_float(dt)) {
    double rtol = 1e-3, atol = 1e-7;
    if (dt == DType::kFloat16) rtol = 4e-3, atol = 1e-3;
    if (dt == DType::kBFloat16) rtol = 2e-2, atol = 1e-2;
    if (dt == DType::kFloat32) atol = 1e-5;  // fp32 kernels may sum in another order
    for (int64_t i = 0; i < n; ++i) {
      double a = ElementAsDouble(dt, got, i), b = ElementAsDouble(dt, ref, i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;
      if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b)))
        return "output '" + name + "' element " + std::to_string(i) + ": got " + std::to_string(a) +
               ", expected " + std::to_string(b);
    }
    return "";
  }
  size_t bytes = dtype_storage_bytes(dt, n);
  if (bytes && std::memcmp(got, ref, bytes) != 0) {
    size_t es = std::max<size_t>(dtype_size(dt), 1);
    for (size_t i = 0; i < bytes; ++i)
      if (got[i] != ref[i])
        return "output '" + name + "' differs at element " + std::to_string(i / es);
  }
  return "";
}

enum class Outcome { kPass, kFail, kSkip };

Outcome RunTest(const std::string& dir, std::string* why, std::set<std::string>* ops) {
  conv::Graph g;
  conv::Graph raw;
  if (conv::ReadOnnxModel(dir + "/model.onnx", &raw).ok())
    for (const auto& n : raw.nodes)
      ops->insert(n.domain.empty() ? n.op_type : n.domain + "." + n.op_type);
  Status st = conv::LoadAndOptimize(dir + "/model.onnx", conv::ConvertOptions(), &g);
  if (!st.ok()) {
    *why = st.message();
    return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
  }
  std::vector<uint8_t> bytes;
  st = conv::SerializeQfm(g, &bytes);
  if (!st.ok()) return *why = st.message(), Outcome::kFail;
  // Flatbuffers wants the copy aligned for in-place constants.
  std::shared_ptr<Model> model;
  st = Model::LoadMemory(bytes.data(), bytes.size(), &model);
  if (!st.ok()) return *why = st.message(), Outcome::kFail;
  std::unique_ptr<Session> session;
  st = Session::Create(model, SessionOptions(), &session);
  if (!st.ok() && st.code() != StatusCode::kInvalidArgument) {
    *why = st.message();
    return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
  }
  if (!session) {  // symbolic input dims: created lazily below via SetInput
    st = Session::Create(model, SessionOptions(), &session);
    if (!st.ok()) return *why = st.message(), Outcome::kFail;
  }
  auto sets = ListDir(dir, "test_data_set_");
  if (sets.empty()) return *why = "no test data", Outcome::kSkip;
  for (const std::string& set : sets) {
    const std::string sd = dir + "/" + set;
    for (size_t i = 0; i < model->inputs().size(); ++i) {
      if (model->inputs()[i].is_optional) {
        conv::OptionalValue opt;
        st = conv::ReadOptionalProtoFile(sd + "/input_" + std::to_string(i) + ".pb", &opt);
        const std::string& name = model->inputs()[i].name;
        if (st.ok() && opt.none) st = session->SetInputNone(name);
        if (st.ok() && !opt.none && opt.is_sequence) {
          std::vector<TensorView> views;
          for (const conv::Value& e : opt.sequence)
            views.push_back(TensorView{e.dtype, e.shape, e.data->data(), e.data->size()});
          st = session->SetInputSequence(name, views);
        }
        if (st.ok() && !opt.none && !opt.is_sequence)
          st = session->SetInput(name, opt.tensor.dtype, opt.tensor.shape, opt.tensor.data->data(),
                                 opt.tensor.data->size());
        if (!st.ok()) {
          *why = st.message();
          return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
        }
        continue;
      }
      if (model->inputs()[i].is_sequence) {
        std::vector<conv::Value> elems;
        st = conv::ReadSequenceProtoFile(sd + "/input_" + std::to_string(i) + ".pb", &elems);
        std::vector<TensorView> views;
        for (const conv::Value& e : elems)
          views.push_back(TensorView{e.dtype, e.shape, e.data->data(), e.data->size()});
        if (st.ok()) st = session->SetInputSequence(model->inputs()[i].name, views);
        if (!st.ok()) {
          *why = st.message();
          return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
        }
        continue;
      }
      conv::Value v;
      st = conv::ReadTensorProtoFile(sd + "/input_" + std::to_string(i) + ".pb", &v);
      if (!st.ok()) {
        *why = st.message();
        return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
      }
      st = session->SetInput(model->inputs()[i].name, v.dtype, v.shape, v.data->data(),
                             v.data->size());
      if (!st.ok()) {
        *why = st.message();
        return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
      }
    }
    st = session->Run();
    if (!st.ok()) {
      *why = st.message();
      return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
    }
    for (size_t i = 0; i < model->outputs().size(); ++i) {
      const std::string out_file = sd + "/output_" + std::to_string(i) + ".pb";
      // An optional output: none where ONNX's is none, else its value compared below.
      conv::OptionalValue want_opt;
      if (model->outputs()[i].is_optional) {
        const std::string& name = model->outputs()[i].name;
        st = conv::ReadOptionalProtoFile(out_file, &want_opt);
        if (!st.ok()) {
          *why = st.message();
          return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
        }
        bool none = false;
        st = session->OutputIsNone(name, &none);
        if (!st.ok()) return *why = st.message(), Outcome::kFail;
        if (none != want_opt.none)
          return *why = set + ": output '" + name + "' is " + (none ? "none" : "a value") +
                        ", expected " + (want_opt.none ? "none" : "a value"),
                 Outcome::kFail;
        if (none) continue;
      }
      if (model->outputs()[i].is_sequence) {
        const std::string& name = model->outputs()[i].name;
        std::vector<conv::Value> want;
        st = model->outputs()[i].is_optional ? Status::Ok()
                                             : conv::ReadSequenceProtoFile(out_file, &want);
        if (model->outputs()[i].is_optional) want = want_opt.sequence;
        if (!st.ok()) {
          *why = st.message();
          return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
        }
        std::vector<TensorView> got;
        st = session->GetOutputSequence(name, &got);
        if (!st.ok()) return *why = st.message(), Outcome::kFail;
        if (got.size() != want.size())
          return *why = set + ": output '" + name + "' has " + std::to_string(got.size()) +
                        " elements, expected " + std::to_string(want.size()),
                 Outcome::kFail;
        for (size_t e = 0; e < got.size(); ++e) {
          std::string diff = Compare(name + "[" + std::to_string(e) + "]", got[e].dtype,
                                     got[e].shape, got[e].data, want[e]);
          if (!diff.empty()) return *why = set + ": " + diff, Outcome::kFail;
        }
        continue;
      }
      conv::Value want = want_opt.tensor;
      st = model->outputs()[i].is_optional ? Status::Ok()
                                           : conv::ReadTensorProtoFile(out_file, &want);
      if (!st.ok()) {
        *why = st.message();
        return st.code() == StatusCode::kUnsupported ? Outcome::kSkip : Outcome::kFail;
      }
      DType dt;
      Shape shape;
      const void* data;
      st = session->GetOutput(model->outputs()[i].name, &dt, &shape, &data);
      if (!st.ok()) return *why = st.message(), Outcome::kFail;
      std::string diff = Compare(model->outputs()[i].name, dt, shape, data, want);
      if (!diff.empty()) return *why = set + ": " + diff, Outcome::kFail;
    }
  }
  return Outcome::kPass;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s NODE_TEST_DIR [NAME_SUBSTRING] [-v]\n", argv[0]);
    return 2;
  }
  std::string root = argv[1];
  std::string filter = argc > 2 && std::string(argv[2]) != "-v" ? argv[2] : "";
  bool verbose = false;
  for (int i = 2; i < argc; ++i) verbose = verbose || std::string(argv[i]) == "-v";
  if (!Exists(root)) {
    std::fprintf(stderr, "no such directory: %s\n", root.c_str());
    return 2;
  }
  std::map<std::string, Tally> per_op;
  Tally total;
  std::vector<std::string> failures;
  for (const std::string& name : ListDir(root, "test_")) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    std::string dir = root + "/" + name;
    if (!Exists(dir + "/model.onnx")) continue;
    std::string why;
    std::set<std::string> ops;
    Outcome o = RunTest(dir, &why, &ops);
    for (const std::string& op : ops) {
      Tally& t = per_op[op];
      (o == Outcome::kPass ? t.passed : o == Outcome::kFail ? t.failed : t.skipped)++;
    }
    (o == Outcome::kPass ? total.passed : o == Outcome::kFail ? total.failed : total.skipped)++;
    if (o == Outcome::kFail) failures.push_back(name + ": " + why);
    if (verbose && o != Outcome::kPass)
      std::printf("%s %s: %s\n", o == Outcome::kFail ? "FAIL" : "skip", name.c_str(), why.c_str());
  }
  std::printf("%-28s %6s %6s %6s\n", "operator", "passed", "failed", "skipped");
  for (const auto& kv : per_op)
    if (kv.second.passed || kv.second.failed)
      std::printf("%-28s %6d %6d %6d\n", kv.first.c_str(), kv.second.passed, kv.second.failed,
                  kv.second.skipped);
  for (const std::string& f : failures) std::printf("FAIL %s\n", f.c_str());
  std::printf("backend: %d passed, %d failed, %d skipped\n", total.passed, total.failed,
              total.skipped);
  return total.failed ? 1 : 0;
}
