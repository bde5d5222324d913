// fp16 models' weights stay float16 in the .qfm (converter/passes/narrow_half_weights.cc)
// and are widened when the model loads (Model::Impl::WidenHalfWeights): which constants
// are narrowed, the file's reader version, and the loaded tensors' dtype and values.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "converter/converter.h"
#include "core/half.h"
#include "model_impl.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

std::shared_ptr<Model> Load(const std::string& path) {
  std::shared_ptr<Model> m;
  Status st = Model::LoadFile(path, &m);
  REQUIRE_MESSAGE(st.ok(), st.message());
  return m;
}

// The dtype each constant has in the file, by tensor name.
std::map<std::string, DType> StoredConstDtypes(const Model& m) {
  std::map<std::string, DType> out;
  const auto* tensors = m.impl()->fb->tensors();
  for (uint32_t i = 0; i < tensors->size(); ++i)
    if (tensors->Get(i)->buffer() != 0)
      out[tensors->Get(i)->name()->str()] = DType(int(tensors->Get(i)->dtype()));
  return out;
}

TEST_CASE("fp16 weights: fp16_convnet keeps its Conv weights float16, the option widens them") {
  TempDir dir;
  const std::string onnx = std::string(QFOLD_SOURCE_DIR) + "/models/fp16_convnet.onnx";
  ConvertOptions keep, widen;
  widen.keep_float16_weights = false;
  std::vector<std::string> notes;
  REQUIRE(ConvertFile(onnx, dir.File("h.qfm"), keep, &notes).ok());
  REQUIRE(ConvertFile(onnx, dir.File("w.qfm"), widen).ok());
  auto h = Load(dir.File("h.qfm")), w = Load(dir.File("w.qfm"));
  CHECK(h->impl()->fb->min_reader_version() == 4);
  CHECK(w->impl()->fb->min_reader_version() < 4);
  auto hd = StoredConstDtypes(*h), wd = StoredConstDtypes(*w);
  REQUIRE(hd.size() == 4);  // two Conv weights and biases
  for (const auto& kv : hd) {
    CHECK(kv.second == DType::kFloat16);
    CHECK(wd[kv.first] == DType::kFloat32);
  }
  CHECK(notes.size() == 1);
  // Loaded, they are the float32 file's values, bit for bit.
  size_t widened = 0;
  for (size_t i = 0; i < h->impl()->tensors.size(); ++i) {
    const TensorEntry& a = h->impl()->tensors[i];
    if (!a.const_data) continue;
    const TensorEntry* b = nullptr;
    for (const TensorEntry& e : w->impl()->tensors)
      if (e.info.name == a.info.name) b = &e;
    REQUIRE(b != nullptr);
    CHECK(a.info.dtype == DType::kFloat32);
    int64_t n = 1;
    for (int64_t d : a.info.shape) n *= d;
    CHECK(std::memcmp(a.const_data, b->const_data, size_t(n) * 4) == 0);
    widened += size_t(n) * 4;
  }
  CHECK(h->impl()->widened_bytes == widened);
}

TEST_CASE("fp16 weights: a float32 model and shared or changed weights stay float32") {
  TempDir dir;
  // float32 model: nothing narrowed even where values are float16 numbers.
  REQUIRE(ConvertFile(std::string(QFOLD_SOURCE_DIR) + "/models/mobilenetv2_like.onnx",
                      dir.File("f32.qfm"), ConvertOptions())
              .ok());
  for (const auto& kv : StoredConstDtypes(*Load(dir.File("f32.qfm"))))
    CHECK(kv.second != DType::kFloat16);

  // fp16: W feeds a MatMul only (narrowed); S feeds a MatMul and an Add (kept float32).
  OnnxBuilder b(17);
  b.Input("X", onnx::TensorProto::FLOAT16, {4, 4});
  b.Output("Y", onnx::TensorProto::FLOAT16, {4, 4});
  std::vector<uint16_t> w(16), s(16);
  for (int i = 0; i < 16; ++i) w[size_t(i)] = FloatToHalf(0.25f * float(i - 8));
  for (int i = 0; i < 16; ++i) s[size_t(i)] = FloatToHalf(0.5f - 0.125f * float(i));
  b.Init("W", onnx::TensorProto::FLOAT16, {4, 4}, w.data(), 32);
  b.Init("S", onnx::TensorProto::FLOAT16, {4, 4}, s.data(), 32);
  b.Node("MatMul", {"X", "W"}, {"a"}, "mm_w");
  b.Node("MatMul", {"a", "S"}, {"c"}, "mm_s");
  b.Node("Add", {"c", "S"}, {"Y"}, "add_s");
  REQUIRE(ConvertFile(b.Write(dir), dir.File("mixed.qfm"), ConvertOptions()).ok());
  auto m = Load(dir.File("mixed.qfm"));
  auto dt = StoredConstDtypes(*m);
  CHECK(dt["W"] == DType::kFloat16);
  CHECK(dt["S"] == DType::kFloat32);
  CHECK(m->impl()->widened_bytes == 64);
  std::unique_ptr<Session> session;
  Status st = Session::Create(m, SessionOptions(), &session);
  CHECK_MESSAGE(st.ok(), st.message());
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
