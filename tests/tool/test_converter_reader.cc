// Tests for converter/onnx_reader.cc: malformed files, external data (including paths
// that try to leave the model's folder) and inline data of the wrong size.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "converter/onnx_reader.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

// Y = X + W with W [3] float; the caller decides how W's data is stored.
OnnxBuilder AddModel() {
  OnnxBuilder b(17);
  b.Input("X", onnx::TensorProto::FLOAT, {3});
  b.Output("Y", onnx::TensorProto::FLOAT, {3});
  b.Node("Add", {"X", "W"}, {"Y"}, "add0");
  return b;
}

constexpr int64_t kOmit = INT64_MIN;

// Declares W as external data at `location`, bytes [offset, offset + length); kOmit
// leaves the key out.
void ExternalW(OnnxBuilder* b, const std::string& location, int64_t offset, int64_t length) {
  onnx::TensorProto* t = b->graph()->add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (offset != kOmit) add("offset", std::to_string(offset));
  if (length != kOmit) add("length", std::to_string(length));
}

// 8 bytes of padding, then the floats 1.5, -2, 4, then 4 bytes of trailer.
std::string WeightFileBytes() {
  const float w[3] = {1.5f, -2.f, 4.f};
  std::string s(8, '\x7f');
  s.append(reinterpret_cast<const char*>(w), sizeof(w));
  s.append(4, '\x01');
  return s;
}

std::vector<float> Floats(const Value& v) {
  REQUIRE(v.data != nullptr);
  std::vector<float> out(v.data->size() / 4);
  std::memcpy(out.data(), v.data->data(), out.size() * 4);
  return out;
}

TEST_CASE("converter reader: truncated model is kInvalidModel naming the file") {
  TempDir dir;
  OnnxBuilder b = AddModel();
  // A large initializer so that cutting the file in half lands inside the graph.
  b.InitFloat("W", {3}, {1.f, 2.f, 3.f});
  b.InitFloat("unused_big", {256}, std::vector<float>(256, 0.5f));
  std::string bytes = b.Bytes();
  std::string path = dir.File("truncated.onnx");
  WriteBytes(path, bytes.substr(0, bytes.size() / 2));
  Graph g;
  Status st = ReadOnnxModel(path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), path), st.message());

  // The same through the converter's entry point.
  Graph g2;
  st = LoadAndOptimize(path, ConvertOptions(), &g2);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), path), st.message());
}

TEST_CASE("converter reader: garbage and empty files are kInvalidModel naming the file") {
  TempDir dir;
  std::string garbage = dir.File("garbage.onnx");
  WriteBytes(garbage, "this is not an ONNX model at all\xff\xff\xff\xff");
  Graph g;
  Status st = ReadOnnxModel(garbage, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), garbage), st.message());

  std::string empty = dir.File("empty.onnx");
  WriteBytes(empty, "");
  Graph g2;
  st = ReadOnnxModel(empty, &g2);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), empty), st.message());

  Graph g3;
  std::string missing = dir.File("missing.onnx");
  st = ReadOnnxModel(missing, &g3);
  CHECK(st.code() == StatusCode::kIoError);
  CHECK_MESSAGE(Contains(st.message(), missing), st.message());
}

TEST_CASE("converter reader: external data relative to the model folder loads the right bytes") {
  TempDir dir;
  REQUIRE(mkdir(dir.File("weights").c_str(), 0755) == 0);
  WriteBytes(dir.File("weights/w.bin"), WeightFileBytes());
  OnnxBuilder b = AddModel();
  ExternalW(&b, "weights/w.bin", 8, 12);
  std::string path = b.Write(dir);

  Graph g;
  Status st = ReadOnnxModel(path, &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const Value* w = g.Find("W");
  REQUIRE(w != nullptr);
  CHECK(w->dtype == DType::kFloat32);
  CHECK(w->shape == Shape{3});
  CHECK(Floats(*w) == std::vector<float>{1.5f, -2.f, 4.f});

  // And the converted model computes with those weights.
  Converted c;
  st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "X", {3}, {1.f, 1.f, 1.f});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(FloatOutput(*c.session, "Y", {3}) == std::vector<float>{2.5f, -1.f, 5.f});
}

TEST_CASE("converter reader: external data without a length reads the tensor's size") {
  TempDir dir;
  WriteBytes(dir.File("w.bin"), WeightFileBytes());
  OnnxBuilder b = AddModel();
  ExternalW(&b, "w.bin", 8, kOmit);
  Graph g;
  Status st = ReadOnnxModel(b.Write(dir), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(Floats(*g.Find("W")) == std::vector<float>{1.5f, -2.f, 4.f});
}

TEST_CASE("converter reader: external data leaving the model folder is refused") {
  TempDir dir;
  // The model lives in dir/model; the data file sits one level up, where it exists.
  REQUIRE(mkdir(dir.File("model").c_str(), 0755) == 0);
  WriteBytes(dir.File("outside.bin"), WeightFileBytes());
  const std::string model_path = dir.File("model/model.onnx");

  SUBCASE("../ escape") {
    OnnxBuilder b = AddModel();
    ExternalW(&b, "../outside.bin", 8, 12);
    WriteBytes(model_path, b.Bytes());
    Graph g;
    Status st = ReadOnnxModel(model_path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "leaves the model's folder"), st.message());
    CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
    CHECK_MESSAGE(Contains(st.message(), "../outside.bin"), st.message());
  }
  SUBCASE("../ escape through a subfolder") {
    REQUIRE(mkdir(dir.File("model/sub").c_str(), 0755) == 0);
    OnnxBuilder b = AddModel();
    ExternalW(&b, "sub/../../outside.bin", 8, 12);
    WriteBytes(model_path, b.Bytes());
    Graph g;
    Status st = ReadOnnxModel(model_path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "leaves the model's folder"), st.message());
  }
  SUBCASE("symlink inside the folder pointing outside") {
    REQUIRE(symlink(dir.File("outside.bin").c_str(), dir.File("model/link.bin").c_str()) == 0);
    OnnxBuilder b = AddModel();
    ExternalW(&b, "link.bin", 8, 12);
    WriteBytes(model_path, b.Bytes());
    Graph g;
    Status st = ReadOnnxModel(model_path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "leaves the model's folder"), st.message());
  }
  SUBCASE("absolute path") {
    OnnxBuilder b = AddModel();
    const std::string abs = dir.File("outside.bin");
    ExternalW(&b, abs, 8, 12);
    WriteBytes(model_path, b.Bytes());
    Graph g;
    Status st = ReadOnnxModel(model_path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "model's folder"), st.message());
    CHECK_MESSAGE(Contains(st.message(), abs), st.message());
    CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
  }
  SUBCASE("../ escape to a file that does not exist") {
    // Refused for the same reason, without revealing whether the file exists.
    OnnxBuilder b = AddModel();
    ExternalW(&b, "../no_such_file.bin", 0, 12);
    WriteBytes(model_path, b.Bytes());
    Graph g;
    Status st = ReadOnnxModel(model_path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "leaves the model's folder"), st.message());
  }
}

TEST_CASE("converter reader: external data range beyond the file end is refused") {
  TempDir dir;
  WriteBytes(dir.File("w.bin"), WeightFileBytes());  // 24 bytes
  const int64_t cases[][2] = {{16, 12}, {25, 0}, {0, 100}, {-4, 12}};
  for (const auto& c : cases) {
    CAPTURE(c[0]);
    CAPTURE(c[1]);
    OnnxBuilder b = AddModel();
    ExternalW(&b, "w.bin", c[0], c[1]);
    std::string path = b.Write(dir);
    Graph g;
    Status st = ReadOnnxModel(path, &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
    CHECK_MESSAGE(Contains(st.message(), path), st.message());
  }
  // In range but not the tensor's size.
  OnnxBuilder b = AddModel();
  ExternalW(&b, "w.bin", 8, 8);
  Graph g;
  Status st = ReadOnnxModel(b.Write(dir), &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "needs 12"), st.message());
}

TEST_CASE("converter reader: raw_data of the wrong size is refused naming the tensor") {
  TempDir dir;
  OnnxBuilder b = AddModel();
  const float w[2] = {1.f, 2.f};
  b.Init("W", onnx::TensorProto::FLOAT, {3}, w, sizeof(w));  // 8 bytes for 3 floats
  std::string path = b.Write(dir);
  Graph g;
  Status st = ReadOnnxModel(path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "8 bytes"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "needs 12"), st.message());
  CHECK_MESSAGE(Contains(st.message(), path), st.message());
}

TEST_CASE("converter reader: typed float_data of the wrong count is refused naming the tensor") {
  TempDir dir;
  OnnxBuilder b = AddModel();
  onnx::TensorProto* t = b.graph()->add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->add_float_data(1.f);
  t->add_float_data(2.f);
  Graph g;
  Status st = ReadOnnxModel(b.Write(dir), &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
}

TEST_CASE("converter reader: typed float_data and int64_data load") {
  TempDir dir;
  OnnxBuilder b = AddModel();
  onnx::TensorProto* t = b.graph()->add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  for (float v : {0.5f, 1.5f, -3.f}) t->add_float_data(v);
  onnx::TensorProto* i = b.graph()->add_initializer();
  i->set_name("I");
  i->set_data_type(onnx::TensorProto::INT64);
  i->add_dims(2);
  i->add_int64_data(-7);
  i->add_int64_data(int64_t(1) << 40);
  Graph g;
  Status st = ReadOnnxModel(b.Write(dir), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(Floats(*g.Find("W")) == std::vector<float>{0.5f, 1.5f, -3.f});
  const Value* iv = g.Find("I");
  REQUIRE(iv != nullptr);
  REQUIRE(iv->data->size() == 16);
  int64_t got[2];
  std::memcpy(got, iv->data->data(), 16);
  CHECK(got[0] == -7);
  CHECK(got[1] == (int64_t(1) << 40));
}

TEST_CASE("converter reader: bool tensors holding values other than 0 and 1 are refused") {
  // Found by fuzz_convert_run: a raw bool byte of 37 converted, and the runtime's
  // loader then refused the converter's own output.
  for (bool raw : {true, false}) {
    CAPTURE(raw);
    TempDir dir;
    OnnxBuilder b(17);
    b.Input("X", onnx::TensorProto::BOOL, {3});
    b.Output("Y", onnx::TensorProto::BOOL, {3});
    b.Node("And", {"X", "M"}, {"Y"}, "and0");
    onnx::TensorProto* t = b.graph()->add_initializer();
    t->set_name("M");
    t->set_data_type(onnx::TensorProto::BOOL);
    t->add_dims(3);
    if (raw) {
      t->set_raw_data(std::string("\x01\x00\x25", 3));
    } else {
      for (int v : {1, 0, 256}) t->add_int32_data(v);
    }
    Graph g;
    Status st = ReadOnnxModel(b.Write(dir), &g);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK_MESSAGE(Contains(st.message(), "bool tensor 'M' element 2 is " + std::string(raw ? "37" : "256")),
                  st.message());
  }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
