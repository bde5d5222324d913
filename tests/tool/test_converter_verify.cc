// Tests for VerifyGraph (cycles, undefined inputs, duplicate producers, ordering) and for
// ConvertFile / WriteFileAtomic (no partial output on failure, loadable output on success).
#include <dirent.h>
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "converter/qfm_writer.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  return names;
}

Status Load(const OnnxBuilder& b, const TempDir& dir, std::string* path, Graph* g) {
  *path = b.Write(dir);
  return LoadAndOptimize(*path, ConvertOptions(), g);
}

TEST_CASE("converter VerifyGraph: a cycle is kInvalidModel naming a node in it") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Node("Add", {"X", "b"}, {"a"}, "cyc_add");
  b.Node("Neg", {"a"}, {"b"}, "cyc_neg");
  b.Node("Relu", {"a"}, {"Y"}, "relu_out");
  std::string path;
  Graph g;
  Status st = Load(b, dir, &path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "cycle"), st.message());
  CHECK_MESSAGE(
      (Contains(st.message(), "Add 'cyc_add'") || Contains(st.message(), "Neg 'cyc_neg'")),
      st.message());
  CHECK_MESSAGE(Contains(st.message(), path), st.message());
}

TEST_CASE("converter VerifyGraph: a node reading an undefined tensor is named with the tensor") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Node("Add", {"X", "ghost_tensor"}, {"Y"}, "reader_node");
  std::string path;
  Graph g;
  Status st = Load(b, dir, &path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "Add 'reader_node'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "'ghost_tensor'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), path), st.message());
}

TEST_CASE("converter VerifyGraph: two producers of one tensor are both named") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Node("Relu", {"X"}, {"Y"}, "first_producer");
  b.Node("Neg", {"X"}, {"Y"}, "second_producer");
  std::string path;
  Graph g;
  Status st = Load(b, dir, &path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "Relu 'first_producer'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "Neg 'second_producer'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "'Y'"), st.message());
}

TEST_CASE("converter VerifyGraph: a node overwriting an initializer is refused") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.InitFloat("W", {2}, {1.f, 2.f});
  b.Node("Neg", {"X"}, {"W"}, "clobber");
  b.Node("Add", {"X", "W"}, {"Y"}, "add0");
  std::string path;
  Graph g;
  Status st = Load(b, dir, &path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "Neg 'clobber'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "'W'"), st.message());
}

TEST_CASE("converter VerifyGraph: a graph output nobody produces is refused") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2});
  b.Output("Y", kFloat, {2});
  b.Output("never_made", kFloat, {2});
  b.Node("Neg", {"X"}, {"Y"}, "neg0");
  std::string path;
  Graph g;
  Status st = Load(b, dir, &path, &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "'never_made'"), st.message());
}

TEST_CASE("converter VerifyGraph: nodes listed out of order are sorted") {
  Graph g;
  g.source = "inline";
  Value x;
  x.name = "X";
  x.dtype = DType::kFloat32;
  x.rank_known = true;
  x.shape = {2};
  g.values["X"] = x;
  g.inputs = {"X"};
  g.outputs = {"Y"};
  Node last, first;
  last.op_type = "Neg";
  last.name = "last";
  last.inputs = {"a"};
  last.outputs = {"Y"};
  first.op_type = "Relu";
  first.name = "first";
  first.inputs = {"X"};
  first.outputs = {"a"};
  g.nodes = {last, first};
  Status st = VerifyGraph(&g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].name == "first");
  CHECK(g.nodes[1].name == "last");
}

TEST_CASE("converter ConvertFile: a bad model leaves no file at the output path") {
  TempDir dir;
  const std::string out = dir.File("out.qfm");
  SUBCASE("unparseable") {
    WriteBytes(dir.File("bad.onnx"), "not a model");
    Status st = ConvertFile(dir.File("bad.onnx"), out, ConvertOptions());
    CHECK(st.code() == StatusCode::kInvalidModel);
  }
  SUBCASE("undefined input") {
    OnnxBuilder b(17);
    b.Input("X", kFloat, {2});
    b.Output("Y", kFloat, {2});
    b.Node("Add", {"X", "nope"}, {"Y"}, "add0");
    Status st = ConvertFile(b.Write(dir, "bad.onnx"), out, ConvertOptions());
    CHECK(st.code() == StatusCode::kInvalidModel);
  }
  CHECK_FALSE(FileExists(out));
  // Nothing else (temporary files) was left beside it either.
  CHECK(ListDir(dir.path()) == std::vector<std::string>{"bad.onnx"});
}

TEST_CASE("converter ConvertFile: a good model writes a file Model::LoadFile accepts") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("X", kFloat, {2, 2});
  b.Output("Y", kFloat, {2, 2});
  b.InitFloat("W", {2, 2}, {1.f, 0.f, 0.f, 2.f});
  b.Node("MatMul", {"X", "W"}, {"Y"}, "mm0");
  const std::string onnx_path = b.Write(dir);
  const std::string out = dir.File("model.qfm");
  Status st = ConvertFile(onnx_path, out, ConvertOptions());
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(FileExists(out));

  std::shared_ptr<Model> model;
  st = Model::LoadFile(out, &model);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(model->inputs().size() == 1);
  CHECK(model->inputs()[0].name == "X");
  CHECK(model->inputs()[0].shape == Shape{2, 2});
  REQUIRE(model->outputs().size() == 1);
  CHECK(model->outputs()[0].name == "Y");
  std::unique_ptr<Session> session;
  st = Session::Create(model, SessionOptions(), &session);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(session.get(), "X", {2, 2}, {1.f, 2.f, 3.f, 4.f});
  st = session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  // X * diag(1, 2) doubles the second column.
  CHECK(FloatOutput(*session, "Y", {2, 2}) == std::vector<float>{1.f, 4.f, 3.f, 8.f});

  // Converting again replaces the file in place.
  st = ConvertFile(onnx_path, out, ConvertOptions());
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::vector<std::string> files = ListDir(dir.path());
  CHECK(files.size() == 2);
}

TEST_CASE("converter WriteFileAtomic: an unwritable path fails cleanly") {
  TempDir dir;
  const std::string path = dir.File("no_such_dir/out.qfm");
  Status st = WriteFileAtomic(path, {1, 2, 3});
  CHECK(st.code() == StatusCode::kIoError);
  CHECK_MESSAGE(Contains(st.message(), path), st.message());
  CHECK_FALSE(FileExists(path));
  CHECK(ListDir(dir.path()).empty());
}

TEST_CASE("converter WriteFileAtomic: writes exactly the bytes, replacing an old file") {
  TempDir dir;
  const std::string path = dir.File("out.bin");
  WriteBytes(path, "old contents that are longer");
  std::vector<uint8_t> bytes = {0, 1, 2, 255};
  Status st = WriteFileAtomic(path, bytes);
  REQUIRE_MESSAGE(st.ok(), st.message());
  std::ifstream f(path, std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(got == std::string("\x00\x01\x02\xff", 4));
  CHECK(ListDir(dir.path()) == std::vector<std::string>{"out.bin"});
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
