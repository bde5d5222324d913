// Tests for FuseQdqLstm (converter/passes/fuse_qdq_lstm.cc) through LoadAndOptimize:
// the layout of the integers and parameters it hands DynamicQuantizeLSTM /
// QfLSTMInteger, checked element by element against the ONNX weights, and the
// cases it must leave float. (tests/e2e/compare_dynamic.py checks the numbers
// against ONNX Runtime.)
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI8 = onnx::TensorProto::INT8;

constexpr int64_t kDirs = 2, kHidden = 2, kIn = 3, kRows = 4 * kHidden;

int8_t WeightAt(int64_t d, int64_t r, int64_t c) {
  return int8_t(d * 24 + r * 3 + c - 20);
}

// Bidirectional LSTM: W = DQ(int8 [2, 8, 3], scale and zero point per gate row
// along `w_axis`), R = DQ(int8 [2, 8, 2], one scale, no zero point); X float,
// or QuantizeLinear -> DequantizeLinear of it when `static_x`.
std::string Build(const TempDir& dir, bool static_x, int64_t w_axis = 1) {
  OnnxBuilder b(17);
  b.Input("X", kF32, {5, 1, kIn});
  b.Output("Y", kF32, {});
  std::vector<int8_t> w(size_t(kDirs * kRows * kIn)), r(size_t(kDirs * kRows * kHidden), 7);
  for (int64_t d = 0; d < kDirs; ++d)
    for (int64_t row = 0; row < kRows; ++row)
      for (int64_t c = 0; c < kIn; ++c)
        w[size_t((d * kRows + row) * kIn + c)] = WeightAt(d, row, c);
  const int64_t n = w_axis == 1 ? kRows : kIn;
  std::vector<float> w_scale;
  std::vector<int8_t> w_zp;
  for (int64_t i = 0; i < n; ++i) {
    w_scale.push_back(0.01f * float(i + 1));
    w_zp.push_back(int8_t(i - 3));
  }
  b.Init("Wq", kI8, {kDirs, kRows, kIn}, w.data(), w.size());
  b.InitFloat("Ws", {n}, w_scale);
  b.Init("Wz", kI8, {n}, w_zp.data(), w_zp.size());
  b.Init("Rq", kI8, {kDirs, kRows, kHidden}, r.data(), r.size());
  b.InitFloat("Rs", {}, {0.5f});
  OnnxBuilder::AttrInt(b.Node("DequantizeLinear", {"Wq", "Ws", "Wz"}, {"W"}, "w_dq"), "axis",
                       w_axis);
  b.Node("DequantizeLinear", {"Rq", "Rs"}, {"R"}, "r_dq");
  std::string x = "X";
  if (static_x) {
    b.InitFloat("xs", {}, {0.02f});
    const int8_t xz = -5;
    b.Init("xz", kI8, {}, &xz, 1);
    b.Node("QuantizeLinear", {"X", "xs", "xz"}, {"xq"}, "x_q");
    b.Node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "x_dq");
    x = "xd";
  }
  onnx::NodeProto* lstm = b.Node("LSTM", {x, "W", "R"}, {"Y"}, "lstm");
  OnnxBuilder::AttrInt(lstm, "hidden_size", kHidden);
  OnnxBuilder::AttrString(lstm, "direction", "bidirectional");
  return b.Write(dir);
}

template <class T>
std::vector<T> Values(const Graph& g, const std::string& name, const Shape& shape) {
  const Value* v = g.Find(name);
  REQUIRE_MESSAGE(v != nullptr, name);
  REQUIRE(v->is_constant());
  CHECK(v->shape == shape);
  std::vector<T> out(v->data->size() / sizeof(T));
  std::memcpy(out.data(), v->data->data(), out.size() * sizeof(T));
  return out;
}

const Node* Only(const Graph& g, const std::string& type) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes) {
    CHECK(n.op_type != "DequantizeLinear");
    if (n.op_type == type) found = &n;
  }
  REQUIRE_MESSAGE(found != nullptr, type);
  return found;
}

void CheckWeights(const Graph& g, const Node& n) {
  // W^T [dirs, in, 4H]: element (d, c, row) is W's (d, row, c).
  const std::vector<int8_t> wt = Values<int8_t>(g, n.input(1), {kDirs, kIn, kRows});
  for (int64_t d = 0; d < kDirs; ++d)
    for (int64_t c = 0; c < kIn; ++c)
      for (int64_t row = 0; row < kRows; ++row)
        CHECK(wt[size_t((d * kIn + c) * kRows + row)] == WeightAt(d, row, c));
  Values<int8_t>(g, n.input(2), {kDirs, kHidden, kRows});
  // Per-row parameters repeated for each direction; R's one scale per direction.
  const std::vector<float> ws = Values<float>(g, n.input(8), {kDirs, kRows});
  const std::vector<int8_t> wz = Values<int8_t>(g, n.input(9), {kDirs, kRows});
  for (int64_t d = 0; d < kDirs; ++d)
    for (int64_t row = 0; row < kRows; ++row) {
      CHECK(ws[size_t(d * kRows + row)] == 0.01f * float(row + 1));
      CHECK(wz[size_t(d * kRows + row)] == row - 3);
    }
  CHECK(Values<float>(g, n.input(10), {kDirs}) == std::vector<float>{0.5f, 0.5f});
  CHECK(n.input(11).empty());  // R had no zero point
}

TEST_CASE("FuseQdqLstm: float X -> DynamicQuantizeLSTM on W^T, R^T and per-direction params") {
  TempDir dir;
  Graph g;
  Status st = LoadAndOptimize(Build(dir, false), ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const Node* n = Only(g, "DynamicQuantizeLSTM");
  CHECK(n->input(0) == "X");
  CHECK(n->inputs.size() == 11);
  CheckWeights(g, *n);
}

TEST_CASE("FuseQdqLstm: X from DequantizeLinear -> QfLSTMInteger reading the 8-bit X") {
  TempDir dir;
  Graph g;
  Status st = LoadAndOptimize(Build(dir, true), ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const Node* n = Only(g, "QfLSTMInteger");
  const Value* x = g.Find(n->input(0));
  REQUIRE(x != nullptr);
  CHECK(x->dtype == DType::kInt8);
  REQUIRE(n->inputs.size() == 14);
  CHECK(Values<float>(g, n->input(12), {}) == std::vector<float>{0.02f});
  CHECK(Values<int8_t>(g, n->input(13), {}) == std::vector<int8_t>{-5});
  CheckWeights(g, *n);
}

TEST_CASE("FuseQdqLstm: scales along W's input axis or fold_qdq off leave a float LSTM") {
  TempDir dir;
  Graph g;
  Status st = LoadAndOptimize(Build(dir, false, /*w_axis=*/2), ConvertOptions(), &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(Only(g, "LSTM")->input(1) != "");
  Graph g2;
  ConvertOptions no_fold;
  no_fold.fold_qdq = false;
  st = LoadAndOptimize(Build(dir, false), no_fold, &g2);
  REQUIRE_MESSAGE(st.ok(), st.message());
  bool lstm = false;
  for (const Node& n : g2.nodes) lstm = lstm || n.op_type == "LSTM";
  CHECK(lstm);
}

// Forward GRU (H = 2, in = 3) with W = DQ(int8 [1, 6, 3], per gate row), R =
// DQ(int8 [1, 6, 2], one scale), X float or through Q -> DQ; or the RNN
// (linear_before_reset < 0) of one gate with the same weights' first rows.
std::string BuildGru(const TempDir& dir, bool static_x, int64_t linear_before_reset) {
  const bool rnn = linear_before_reset < 0;
  OnnxBuilder b(17);
  b.Input("X", kF32, {5, 1, kIn});
  b.Output("Y", kF32, {});
  const int64_t rows = (rnn ? 1 : 3) * kHidden;
  std::vector<int8_t> w(size_t(rows * kIn)), r(size_t(rows * kHidden), -3);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t c = 0; c < kIn; ++c) w[size_t(row * kIn + c)] = WeightAt(0, row, c);
  std::vector<float> w_scale;
  for (int64_t i = 0; i < rows; ++i) w_scale.push_back(0.02f * float(i + 1));
  b.Init("Wq", kI8, {1, rows, kIn}, w.data(), w.size());
  b.InitFloat("Ws", {rows}, w_scale);
  b.Init("Rq", kI8, {1, rows, kHidden}, r.data(), r.size());
  b.InitFloat("Rs", {}, {0.25f});
  OnnxBuilder::AttrInt(b.Node("DequantizeLinear", {"Wq", "Ws"}, {"W"}, "w_dq"), "axis", 1);
  b.Node("DequantizeLinear", {"Rq", "Rs"}, {"R"}, "r_dq");
  std::string x = "X";
  if (static_x) {
    b.InitFloat("xs", {}, {0.02f});
    const int8_t xz = 4;
    b.Init("xz", kI8, {}, &xz, 1);
    b.Node("QuantizeLinear", {"X", "xs", "xz"}, {"xq"}, "x_q");
    b.Node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "x_dq");
    x = "xd";
  }
  onnx::NodeProto* gru = b.Node(rnn ? "RNN" : "GRU", {x, "W", "R"}, {"Y"}, "gru");
  OnnxBuilder::AttrInt(gru, "hidden_size", kHidden);
  if (!rnn) OnnxBuilder::AttrInt(gru, "linear_before_reset", linear_before_reset);
  return b.Write(dir);
}

TEST_CASE(
    "FuseQdqLstm: a GRU (with or without linear_before_reset) or an RNN -> QfGRUInteger, "
    "QfRNNInteger") {
  for (int64_t lbr : {0, 1, -1})
    for (bool static_x : {false, true}) {
      CAPTURE(lbr);
      CAPTURE(static_x);
      TempDir dir;
      Graph g;
      Status st = LoadAndOptimize(BuildGru(dir, static_x, lbr), ConvertOptions(), &g);
      REQUIRE_MESSAGE(st.ok(), st.message());
      const Node* n = Only(g, lbr < 0 ? "QfRNNInteger" : "QfGRUInteger");
      CHECK(n->domain.empty());
      const int64_t rows = (lbr < 0 ? 1 : 3) * kHidden;
      // W^T [1, in, 3H]: element (c, row) is W's (row, c); R^T [1, H, 3H].
      const std::vector<int8_t> wt = Values<int8_t>(g, n->input(1), {1, kIn, rows});
      for (int64_t c = 0; c < kIn; ++c)
        for (int64_t row = 0; row < rows; ++row)
          CHECK(wt[size_t(c * rows + row)] == WeightAt(0, row, c));
      Values<int8_t>(g, n->input(2), {1, kHidden, rows});
      const std::vector<float> ws = Values<float>(g, n->input(8), {1, rows});
      for (int64_t row = 0; row < rows; ++row) CHECK(ws[size_t(row)] == 0.02f * float(row + 1));
      CHECK(Values<float>(g, n->input(10), {1}) == std::vector<float>{0.25f});
      CHECK(n->input(6).empty());
      CHECK(n->input(7).empty());
      const Value* x = g.Find(n->input(0));
      REQUIRE(x != nullptr);
      CHECK(x->dtype == (static_x ? DType::kInt8 : DType::kFloat32));
      CHECK(n->inputs.size() == (static_x ? 14u : 11u));
      CHECK(n->attrs.GetInt("linear_before_reset", 0) == std::max<int64_t>(lbr, 0));
    }
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
