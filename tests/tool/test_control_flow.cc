// Loop and Scan at run time on hand-built graphs with hand-computed results
// (trip count, a condition that stops early, zero iterations, a reversed Scan
// stacked on axis 1), the conversion errors (unbounded Loop, a subgraph
// reading a missing value, branches that disagree) and .qfm files written
// before subgraphs existed still loading.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model_impl.h"
#include "tests/tool/onnx_builder.h"

namespace qfold {
namespace conv {
namespace test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kInt64 = onnx::TensorProto::INT64;

void SetValueType(onnx::ValueInfoProto* vi, const std::string& name, int elem,
                  const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::GraphProto* GraphAttr(onnx::NodeProto* n, const std::string& attr) {
  auto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(attr);
  return a->mutable_g();
}

void SubNode(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
             const std::vector<std::string>& out, const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
}

void SubInt64(onnx::GraphProto* g, const std::string& name, int64_t v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(kInt64);
  t->add_int64_data(v);
}

void SetInt64Input(Session* s, const std::string& name, int64_t v) {
  Status st = s->SetInput(name, DType::kInt64, {}, &v, 8);
  REQUIRE_MESSAGE(st.ok(), st.message());
}

// y0 [2], x [2], M (int64), stop_after (int64): Loop(M, true, y0) whose body
// adds the enclosing x to y (captured), emits y as a scan output, and keeps
// going while iteration < stop_after. Runs min(M, stop_after + 1) times.
// `with_m` false leaves M out: an unbounded loop.
std::string AccumulateLoop(const TempDir& dir, bool with_m, const std::string& body_reads = "x") {
  OnnxBuilder b(17);
  b.Input("y0", kFloat, {2});
  b.Input("x", kFloat, {2});
  b.Input("M", kInt64, {});
  b.Input("stop_after", kInt64, {});
  b.Output("y", kFloat, {2});
  b.Output("ys", kFloat, {-1, 2}, "iterations");
  onnx::TensorProto* t = b.graph()->add_initializer();
  t->set_name("true");
  t->set_data_type(kBool);
  t->add_int32_data(1);
  onnx::NodeProto* loop =
      b.Node("Loop", {with_m ? "M" : "", "true", "y0"}, {"y", "ys"}, "accumulate");
  onnx::GraphProto* body = GraphAttr(loop, "body");
  SetValueType(body->add_input(), "i", kInt64, {});
  SetValueType(body->add_input(), "cond_in", kBool, {});
  SetValueType(body->add_input(), "y_in", kFloat, {2});
  SubNode(body, "Add", {"y_in", body_reads}, {"y_out"}, "add_x");
  SubNode(body, "Less", {"i", "stop_after"}, {"cond_out"}, "keep_going");
  SubNode(body, "Identity", {"y_out"}, {"y_scan"}, "emit");
  SetValueType(body->add_output(), "cond_out", kBool, {});
  SetValueType(body->add_output(), "y_out", kFloat, {2});
  SetValueType(body->add_output(), "y_scan", kFloat, {2});
  return b.Write(dir);
}

std::vector<float> Output(const Session& s, const std::string& name, Shape* shape) {
  DType dt;
  const void* data = nullptr;
  Status st = s.GetOutput(name, &dt, shape, &data);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(dt == DType::kFloat32);
  int64_t n = 1;
  for (int64_t d : *shape) n *= d;
  const float* f = static_cast<const float*>(data);
  return std::vector<float>(f, f + n);
}

TEST_CASE("runtime Loop: trip count, early stop by condition, zero iterations") {
  TempDir dir;
  Converted c;
  Status st = ConvertAndOpen(AccumulateLoop(dir, true), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  REQUIRE(c.model->impl()->subgraphs.size() == 1);
  struct Case {
    int64_t m, stop_after;
    int64_t iterations;
  };
  for (const Case& k : {Case{3, 100, 3}, Case{10, 1, 2}, Case{0, 5, 0}, Case{4, 3, 4}}) {
    CAPTURE(k.m);
    CAPTURE(k.stop_after);
    SetFloatInput(c.session.get(), "y0", {2}, {1.f, -1.f});
    SetFloatInput(c.session.get(), "x", {2}, {0.5f, 2.f});
    SetInt64Input(c.session.get(), "M", k.m);
    SetInt64Input(c.session.get(), "stop_after", k.stop_after);
    st = c.session->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    Shape shape;
    const std::vector<float> y = Output(*c.session, "y", &shape);
    const float n = float(k.iterations);
    CHECK(y == std::vector<float>{1.f + 0.5f * n, -1.f + 2.f * n});
    const std::vector<float> ys = Output(*c.session, "ys", &shape);
    CHECK(shape == Shape{k.iterations, 2});
    for (int64_t i = 0; i < k.iterations; ++i) {
      CHECK(ys[size_t(2 * i)] == 1.f + 0.5f * float(i + 1));
      CHECK(ys[size_t(2 * i + 1)] == -1.f + 2.f * float(i + 1));
    }
  }
}

TEST_CASE("runtime Loop: max_loop_iterations and the memory bound stop a Loop that runs on") {
  // Found by fuzz_convert_run: a decoder Loop whose trip count became 2^45 and
  // whose stop token never came grew its scan output for 6 minutes until it
  // ran out of memory. Here a trip count of 2^45 with the condition always true.
  TempDir dir;
  Converted c;
  Status st = ConvertAndOpen(AccumulateLoop(dir, true), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  const int64_t forever = int64_t(1) << 45;
  auto run = [&](const SessionOptions& opts, Status* out) {
    std::unique_ptr<Session> s;
    Status created = Session::Create(c.model, opts, &s);
    REQUIRE_MESSAGE(created.ok(), created.message());
    SetFloatInput(s.get(), "y0", {2}, {1.f, -1.f});
    SetFloatInput(s.get(), "x", {2}, {0.5f, 2.f});
    SetInt64Input(s.get(), "M", forever);
    SetInt64Input(s.get(), "stop_after", forever);
    *out = s->Run();
  };
  SessionOptions bounded;
  bounded.max_loop_iterations = 50;
  run(bounded, &st);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "'accumulate'"), st.message());
  CHECK_MESSAGE(Contains(st.message(), "max_loop_iterations (50)"), st.message());
  // Within the bound the Loop runs as before: 3 trips.
  {
    std::unique_ptr<Session> s;
    REQUIRE(Session::Create(c.model, bounded, &s).ok());
    SetFloatInput(s.get(), "y0", {2}, {1.f, -1.f});
    SetFloatInput(s.get(), "x", {2}, {0.5f, 2.f});
    SetInt64Input(s.get(), "M", 3);
    SetInt64Input(s.get(), "stop_after", forever);
    st = s->Run();
    REQUIRE_MESSAGE(st.ok(), st.message());
    Shape shape;
    Output(*s, "ys", &shape);
    CHECK(shape == Shape{3, 2});
  }
  // Without an iteration bound, the scan output (8 bytes a trip) stops at the
  // memory bound: 1 MiB is reached after 2^17 trips, not 2^45.
  SessionOptions small;
  small.max_memory_bytes = size_t(1) << 20;
  run(small, &st);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK_MESSAGE(Contains(st.message(), "scan output 'ys' grows past the 1048576 bytes"),
                st.message());
}

TEST_CASE("runtime Scan: reversed input, reversed output stacked on axis 1") {
  TempDir dir;
  OnnxBuilder b(17);
  b.Input("s0", kFloat, {2});
  b.Input("x", kFloat, {3, 2});
  b.Output("s", kFloat, {2});
  b.Output("z", kFloat, {2, 3});
  onnx::NodeProto* scan = b.Node("Scan", {"s0", "x"}, {"s", "z"}, "rsum");
  auto set_ints = [&](const char* name, std::vector<int64_t> v) {
    auto* a = scan->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t i : v) a->add_ints(i);
  };
  auto* n = scan->add_attribute();
  n->set_name("num_scan_inputs");
  n->set_type(onnx::AttributeProto::INT);
  n->set_i(1);
  set_ints("scan_input_directions", {1});
  set_ints("scan_output_directions", {1});
  set_ints("scan_output_axes", {1});
  onnx::GraphProto* body = GraphAttr(scan, "body");
  SetValueType(body->add_input(), "s_in", kFloat, {2});
  SetValueType(body->add_input(), "row", kFloat, {2});
  SubNode(body, "Add", {"s_in", "row"}, {"s_out"}, "acc");
  SubNode(body, "Identity", {"s_out"}, {"z_t"}, "emit");
  SetValueType(body->add_output(), "s_out", kFloat, {2});
  SetValueType(body->add_output(), "z_t", kFloat, {2});
  Converted c;
  Status st = ConvertAndOpen(b.Write(dir), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "s0", {2}, {0.f, 0.f});
  SetFloatInput(c.session.get(), "x", {3, 2}, {1, 2, 3, 4, 5, 6});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  // Rows taken last first: [5,6], [8,10], [9,12]; written last first along axis 1.
  CHECK(FloatOutput(*c.session, "s", {2}) == std::vector<float>{9, 12});
  CHECK(FloatOutput(*c.session, "z", {2, 3}) == std::vector<float>{9, 8, 5, 12, 10, 6});
}

// Scan of opset 8: batch axis first, `directions` for the scan inputs.
std::string BatchedScan8(const TempDir& dir, int64_t batch, bool with_lens) {
  OnnxBuilder b(8);
  b.Input("s0", kFloat, {batch, 2});
  b.Input("x", kFloat, {batch, 3, 2});
  if (with_lens) b.Input("lens", onnx::TensorProto::INT32, {batch});
  b.Output("s", kFloat, {batch, 2});
  b.Output("z", kFloat, {batch, 3, 2});
  onnx::NodeProto* scan =
      b.Node("Scan", {with_lens ? "lens" : "", "s0", "x"}, {"s", "z"}, "rsum8");
  auto* n = scan->add_attribute();
  n->set_name("num_scan_inputs");
  n->set_type(onnx::AttributeProto::INT);
  n->set_i(1);
  auto* d = scan->add_attribute();
  d->set_name("directions");
  d->set_type(onnx::AttributeProto::INTS);
  d->add_ints(1);
  onnx::GraphProto* body = GraphAttr(scan, "body");
  SetValueType(body->add_input(), "s_in", kFloat, {2});
  SetValueType(body->add_input(), "row", kFloat, {2});
  SubNode(body, "Add", {"s_in", "row"}, {"s_out"}, "acc");
  SubNode(body, "Identity", {"s_out"}, {"z_t"}, "emit");
  SetValueType(body->add_output(), "s_out", kFloat, {2});
  SetValueType(body->add_output(), "z_t", kFloat, {2});
  return b.Write(dir);
}

TEST_CASE("Scan of opset 8 with a batch of one runs as the opset-9 Scan; other forms are refused") {
  TempDir dir;
  Converted c;
  Status st = ConvertAndOpen(BatchedScan8(dir, 1, false), ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  SetFloatInput(c.session.get(), "s0", {1, 2}, {1.f, 0.f});
  SetFloatInput(c.session.get(), "x", {1, 3, 2}, {1, 2, 3, 4, 5, 6});
  st = c.session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  // Rows taken last first (directions = [1]) from [1, 0]: [6,6], [9,10], [10,12];
  // scan outputs stacked in step order.
  CHECK(FloatOutput(*c.session, "s", {1, 2}) == std::vector<float>{10, 12});
  CHECK(FloatOutput(*c.session, "z", {1, 3, 2}) == std::vector<float>{6, 6, 9, 10, 10, 12});

  TempDir dir2;
  Graph g;
  st = LoadAndOptimize(BatchedScan8(dir2, 2, false), ConvertOptions(), &g);
  CHECK(st.code() == StatusCode::kUnsupported);
  CHECK(Contains(st.message(), "Scan 'rsum8': Scan of opset 8 with input 's0' not of batch 1"));
  TempDir dir3;
  Graph g3;
  st = LoadAndOptimize(BatchedScan8(dir3, 1, true), ConvertOptions(), &g3);
  CHECK(st.code() == StatusCode::kUnsupported);
  CHECK(Contains(st.message(), "Scan 'rsum8': Scan of opset 8 with sequence_lens"));
}

TEST_CASE("control flow conversion errors name the node") {
  TempDir dir;
  Graph g;
  Status st = LoadAndOptimize(AccumulateLoop(dir, false), ConvertOptions(), &g);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK(Contains(st.message(), "Loop 'accumulate': unbounded loop"));
  CHECK(Contains(st.message(), "'cond_out'"));

  TempDir dir2;
  Graph g2;
  st = LoadAndOptimize(AccumulateLoop(dir2, true, "nowhere"), ConvertOptions(), &g2);
  CHECK(st.code() == StatusCode::kInvalidModel);
  CHECK(Contains(st.message(), "Loop 'accumulate': subgraph 'body' reads 'nowhere'"));

  // A Loop without its body: an error, not an exception.
  {
    TempDir d;
    OnnxBuilder b(17);
    b.Input("M", kInt64, {});
    b.Input("x", kFloat, {2});
    b.Output("y", kFloat, {2});
    b.Node("Loop", {"M", "", "x"}, {"y"}, "bodiless");
    Graph gb;
    st = LoadAndOptimize(b.Write(d), ConvertOptions(), &gb);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK(Contains(st.message(), "Loop 'bodiless': has no graph attribute 'body'"));
  }

  // Branches whose declared outputs differ in dtype and in rank (inferred ranks
  // may differ, as ONNX allows: backend test affine_grid_3d_..._expanded).
  for (bool rank : {false, true}) {
    CAPTURE(rank);
    TempDir d;
    OnnxBuilder b(17);
    b.Input("c", kBool, {});
    b.Input("x", kFloat, {2});
    b.Output("y", kFloat, {2});
    onnx::NodeProto* n = b.Node("If", {"c"}, {"y"}, "pick");
    onnx::GraphProto* then_g = GraphAttr(n, "then_branch");
    SubNode(then_g, "Identity", {"x"}, {"a"}, "a");
    SetValueType(then_g->add_output(), "a", kFloat, {2});
    onnx::GraphProto* else_g = GraphAttr(n, "else_branch");
    if (rank) {
      SubInt64(else_g, "shape", 2);
      onnx::TensorProto* t = else_g->mutable_initializer(0);
      t->add_dims(1);
      SubNode(else_g, "Reshape", {"x", "shape"}, {"b"}, "b");
      SubNode(else_g, "Unsqueeze", {"b", "shape0"}, {"e"}, "e");
      SubInt64(else_g, "shape0", 0);
      else_g->mutable_initializer(1)->add_dims(1);
    } else {
      SubNode(else_g, "Shape", {"x"}, {"e"}, "e");
    }
    // Declared types: a rank-2 float, or an int64 of then's rank.
    SetValueType(else_g->add_output(), "e", rank ? kFloat : kInt64,
                 rank ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1});
    Graph gi;
    st = LoadAndOptimize(b.Write(d), ConvertOptions(), &gi);
    CHECK(st.code() == StatusCode::kInvalidModel);
    CHECK(Contains(st.message(), "If 'pick'"));
    CHECK(Contains(st.message(), rank ? "rank" : "int64"));
  }
}

TEST_CASE("a .qfm written before subgraphs existed (format 1) still loads and runs") {
  const std::string path = std::string(QFOLD_SOURCE_DIR) + "/tests/fuzz/seeds/qfm/conv_relu.qfm";
  std::shared_ptr<Model> model;
  Status st = Model::LoadFile(path, &model);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(model->impl()->fb->format_version() < 3);
  CHECK(model->impl()->subgraphs.empty());
  std::unique_ptr<Session> session;
  st = Session::Create(model, SessionOptions(), &session);
  REQUIRE_MESSAGE(st.ok(), st.message());
  st = session->Run();
  CHECK_MESSAGE(st.ok(), st.message());
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
