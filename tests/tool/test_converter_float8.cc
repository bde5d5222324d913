// float8 constants have no integer kernel: they are widened when read and
// their DequantizeLinear becomes float arithmetic, with a conversion note.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "converter/onnx_dtype.h"
#include "model_impl.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kE4M3FN = 17, kE4M3FNUZ = 18, kE5M2 = 19, kE5M2FNUZ = 20;

TEST_CASE("float8: decoding follows the ONNX float8 tables") {
  // Hand-decoded: sign | exponent | mantissa with the type's bias.
  CHECK(Float8ToFloat(kE4M3FN, 0x38) == 1.0f);  // 0 0111 000: 2^(7-7)
  CHECK(Float8ToFloat(kE4M3FN, 0xB8) == -1.0f);
  CHECK(Float8ToFloat(kE4M3FN, 0x7E) == 448.0f);  // 1.75 * 2^8, the largest
  CHECK(std::isnan(Float8ToFloat(kE4M3FN, 0x7F)));
  CHECK(Float8ToFloat(kE4M3FN, 0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(Float8ToFloat(kE4M3FNUZ, 0x40) == 1.0f);                // bias 8
  CHECK(std::isnan(Float8ToFloat(kE4M3FNUZ, 0x80)));
  CHECK(Float8ToFloat(kE5M2, 0x3C) == 1.0f);  // 0 01111 00: bias 15
  CHECK(std::isinf(Float8ToFloat(kE5M2, 0x7C)));
  CHECK(std::isnan(Float8ToFloat(kE5M2, 0x7D)));
  CHECK(Float8ToFloat(kE5M2FNUZ, 0x40) == 1.0f);      // bias 16
  CHECK(Float8ToFloat(kE5M2FNUZ, 0x7F) == 57344.0f);  // 1.75 * 2^15
}

TEST_CASE("float8: a DequantizeLinear'd float8 weight runs as float") {
  TempDir dir;
  OnnxBuilder b(21);
  b.Input("x", onnx::TensorProto::FLOAT, {1, 2});
  b.Output("y", onnx::TensorProto::FLOAT, {1, 2});
  // w = [[1, 2], [-1, 0.5]] in E4M3FN; zero point 0; per-column scales [2, 3] (axis 1).
  const unsigned char w[] = {0x38, 0x40, 0xB8, 0x30};
  b.Init("w", kE4M3FN, {2, 2}, w, 4);
  const unsigned char zp[] = {0x00, 0x00};
  b.Init("zp", kE4M3FN, {2}, zp, 2);
  b.InitFloat("s", {2}, {2.f, 3.f});
  OnnxBuilder::AttrInt(b.Node("DequantizeLinear", {"w", "s", "zp"}, {"wf"}, "dq_w"), "axis", 1);
  b.Node("MatMul", {"x", "wf"}, {"y"}, "mm");
  std::string path = b.Write(dir);

  std::vector<std::string> notes;
  std::string out = dir.File("m.qfm");
  Status st = ConvertFile(path, out, ConvertOptions(), &notes);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(notes.size() == 1);
  CHECK(Contains(notes[0], "DequantizeLinear 'dq_w': FLOAT8E4M3FN constant 'w'"));
  CHECK(Contains(notes[0], "dequantized to float at conversion"));

  // The note travels in the .qfm so `qfold inspect` can show it.
  std::shared_ptr<Model> loaded;
  REQUIRE(Model::LoadFile(out, &loaded).ok());
  const auto* notes_fb = loaded->impl()->fb->metadata()->notes();
  REQUIRE(notes_fb != nullptr);
  REQUIRE(notes_fb->size() == 1);
  CHECK(notes_fb->Get(0)->str() == notes[0]);

  Converted c;
  st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "x", {1, 2}, {1.f, 10.f});
  REQUIRE(c.session->Run().ok());
  // Dequantized w = [[2, 6], [-2, 1.5]]; y = [1*2 + 10*-2, 1*6 + 10*1.5] = [-18, 21].
  std::vector<float> y = FloatOutput(*c.session, "y", {1, 2});
  CHECK(y[0] == doctest::Approx(-18.f));
  CHECK(y[1] == doctest::Approx(21.f));
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
