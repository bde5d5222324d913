// Test helpers for the converter tests: build small ONNX models with the generated
// protobuf classes, write them to per-test temp folders, convert and run them.
#pragma once
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "converter/converter.h"
#include "converter/qfm_writer.h"
#include "onnx.pb.h"
#include "qfold/runtime.h"

namespace qfold {
namespace conv {
namespace test {

// A fresh folder under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/qfold_convtest_XXXXXX";
    char* p = mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  REQUIRE(f.good());
  f.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

inline bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Builds a ModelProto one piece at a time. Dims of -1 become symbolic dims named
// by `sym` (or "N").
class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("qfold-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  void AddOpset(const std::string& domain, int64_t version) {
    auto* op = model_.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }

  void Input(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
             const std::string& sym = "N") {
    SetType(graph()->add_input(), name, elem_type, dims, sym);
  }
  void Output(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
              const std::string& sym = "N") {
    SetType(graph()->add_output(), name, elem_type, dims, sym);
  }

  onnx::TensorProto* Init(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                          const void* data, size_t bytes) {
    onnx::TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
    return t;
  }
  onnx::TensorProto* InitFloat(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<float>& v) {
    return Init(name, onnx::TensorProto::FLOAT, dims, v.data(), v.size() * 4);
  }
  onnx::TensorProto* InitInt64(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& v) {
    return Init(name, onnx::TensorProto::INT64, dims, v.data(), v.size() * 8);
  }

  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name,
                        const std::string& domain = "") {
    onnx::NodeProto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    if (!domain.empty()) n->set_domain(domain);
    for (const auto& s : inputs) n->add_input(s);
    for (const auto& s : outputs) n->add_output(s);
    return n;
  }

  static void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = NewAttr(n, name, onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = NewAttr(n, name, onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = NewAttr(n, name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void AttrFloats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
    auto* a = NewAttr(n, name, onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
  }
  static void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = NewAttr(n, name, onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  std::string Bytes() const {
    std::string s;
    REQUIRE(model_.SerializeToString(&s));
    return s;
  }
  // Writes the model into `dir` and returns its path.
  std::string Write(const TempDir& dir, const std::string& file = "model.onnx") const {
    std::string path = dir.File(file);
    WriteBytes(path, Bytes());
    return path;
  }

 private:
  static void SetType(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                      const std::vector<int64_t>& dims, const std::string& sym) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0) {
        dim->set_dim_param(sym);
      } else {
        dim->set_dim_value(d);
      }
    }
  }
  static onnx::AttributeProto* NewAttr(onnx::NodeProto* n, const std::string& name,
                                       onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  onnx::ModelProto model_;
};

// Converts `onnx_path` to .qfm bytes and opens a session on them.
struct Converted {
  Graph graph;
  std::vector<uint8_t> bytes;
  std::shared_ptr<Model> model;
  std::unique_ptr<Session> session;
};

inline Status ConvertAndOpen(const std::string& onnx_path, const ConvertOptions& opts,
                             Converted* out) {
  QF_RETURN_IF_ERROR(LoadAndOptimize(onnx_path, opts, &out->graph));
  QF_RETURN_IF_ERROR(SerializeQfm(out->graph, &out->bytes));
  QF_RETURN_IF_ERROR(Model::LoadMemory(out->bytes.data(), out->bytes.size(), &out->model));
  return Session::Create(out->model, SessionOptions(), &out->session);
}

inline void SetFloatInput(Session* s, const std::string& name, const Shape& shape,
                          const std::vector<float>& v) {
  Status st = s->SetInput(name, DType::kFloat32, shape, v.data(), v.size() * 4);
  REQUIRE_MESSAGE(st.ok(), st.message());
}

// Returns the named float output after Run; checks its shape.
inline std::vector<float> FloatOutput(const Session& s, const std::string& name,
                                      const Shape& want_shape) {
  DType dt = DType::kUndefined;
  Shape shape;
  const void* data = nullptr;
  Status st = s.GetOutput(name, &dt, &shape, &data);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(dt == DType::kFloat32);
  REQUIRE(shape == want_shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  if (n) std::memcpy(v.data(), data, size_t(n) * 4);
  return v;
}

inline size_t CountOps(const Graph& g, const std::string& op_type) {
  size_t c = 0;
  for (const auto& n : g.nodes)
    if (n.op_type == op_type) ++c;
  return c;
}

}  // namespace test
}  // namespace conv
}  // namespace qfold
