// If folding and --const, on hand-built graphs with hand-computed results:
// branch names that collide with the enclosing graph's, a nested If reading a
// renamed branch value, the same model with its Ifs run at run time, and the
// refusals (bad --const).
#include <doctest/doctest.h>

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

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : inputs) n->add_input(s);
  for (const auto& s : outputs) n->add_output(s);
  return n;
}

void AddFloatInit(onnx::GraphProto* g, const std::string& name, float v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(kFloat);
  t->add_float_data(v);
}

void AddOutput(onnx::GraphProto* g, const std::string& name, int elem_type,
               const std::vector<int64_t>& dims) {
  auto* vi = g->add_output();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::GraphProto* Branch(onnx::NodeProto* if_node, const std::string& attr) {
  auto* a = if_node->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(attr);
  return a->mutable_g();
}

// x [2] -> t = x * 2 and u = x - 5 (graph outputs too) -> If(c):
//   then: t = x + 10 (its own 't'), u = t + 1 (its own 'u'),
//         If(d): then v = u * t, else v = u - x  -> then output v
//   else: w = x * 3
// -> y. The branch's 't' and 'u' collide with the outer ones and get renamed;
// the nested If must read the renamed branch values, not the outer ones.
std::string CollidingModel(const TempDir& dir) {
  OnnxBuilder b(17);
  b.Input("x", kFloat, {2});
  b.Input("c", kBool, {});
  b.Input("d", kBool, {});
  b.Output("y", kFloat, {2});
  b.Output("t", kFloat, {2});
  b.Output("u", kFloat, {2});
  b.InitFloat("two", {}, {2.f});
  b.InitFloat("five", {}, {5.f});
  b.Node("Mul", {"x", "two"}, {"t"}, "outer_t");
  b.Node("Sub", {"x", "five"}, {"u"}, "outer_u");
  onnx::NodeProto* top_if = b.Node("If", {"c"}, {"y"}, "top_if");
  onnx::GraphProto* then_g = Branch(top_if, "then_branch");
  AddFloatInit(then_g, "ten", 10.f);
  AddFloatInit(then_g, "one", 1.f);
  AddNode(then_g, "Add", {"x", "ten"}, {"t"}, "inner_t");
  AddNode(then_g, "Add", {"t", "one"}, {"u"}, "inner_u");
  onnx::NodeProto* nested = AddNode(then_g, "If", {"d"}, {"v"}, "nested_if");
  onnx::GraphProto* nested_then = Branch(nested, "then_branch");
  AddNode(nested_then, "Mul", {"u", "t"}, {"v1"}, "v_mul");
  AddOutput(nested_then, "v1", kFloat, {2});
  onnx::GraphProto* nested_else = Branch(nested, "else_branch");
  AddNode(nested_else, "Sub", {"u", "x"}, {"v2"}, "v_sub");
  AddOutput(nested_else, "v2", kFloat, {2});
  AddOutput(then_g, "v", kFloat, {2});
  onnx::GraphProto* else_g = Branch(top_if, "else_branch");
  AddFloatInit(else_g, "three", 3.f);
  AddNode(else_g, "Mul", {"x", "three"}, {"w"}, "else_w");
  AddOutput(else_g, "w", kFloat, {2});
  return b.Write(dir);
}

std::vector<float> RunY(Converted* c, const std::string& output, const std::vector<float>& x) {
  SetFloatInput(c->session.get(), "x", {2}, x);
  Status st = c->session->Run();
  REQUIRE_MESSAGE(st.ok(), st.message());
  return FloatOutput(*c->session, output, {2});
}

TEST_CASE("fold_ifs: colliding branch names are renamed, nested Ifs read the branch's values") {
  TempDir dir;
  const std::string path = CollidingModel(dir);
  const std::vector<float> x = {1.f, -2.f};
  struct Case {
    const char* c;
    const char* d;
    std::vector<float> y;
  };
  // then/then: (x + 11) * (x + 10); then/else: (x + 11) - x = 11; else: 3x.
  const Case cases[] = {{"true", "1", {12.f * 11.f, 9.f * 8.f}},
                        {"1", "false", {11.f, 11.f}},
                        {"0", "1", {3.f, -6.f}}};
  for (const Case& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.d);
    ConvertOptions opts;
    opts.consts["c"] = k.c;
    opts.consts["d"] = k.d;
    Converted c;
    Status st = ConvertAndOpen(path, opts, &c);
    REQUIRE_MESSAGE(st.ok(), st.message());
    CHECK(CountOps(c.graph, "If") == 0);
    CHECK(c.model->inputs().size() == 1);
    CHECK(RunY(&c, "y", x) == k.y);
    // The outer 't' and 'u' are untouched by the branch's own.
    CHECK(FloatOutput(*c.session, "t", {2}) == std::vector<float>{2.f, -4.f});
    CHECK(FloatOutput(*c.session, "u", {2}) == std::vector<float>{-4.f, -7.f});
  }
}

void SetBoolInput(Session* s, const std::string& name, bool v) {
  const uint8_t byte = v ? 1 : 0;
  Status st = s->SetInput(name, DType::kBool, {}, &byte, 1);
  REQUIRE_MESSAGE(st.ok(), st.message());
}

TEST_CASE("runtime If: conditions known only when running pick the branch per run") {
  TempDir dir;
  const std::string path = CollidingModel(dir);
  Converted c;
  Status st = ConvertAndOpen(path, ConvertOptions(), &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(CountOps(c.graph, "If") == 1);  // the nested one lives in then_branch
  CHECK(c.model->impl()->subgraphs.size() == 4);
  const std::vector<float> x = {1.f, -2.f};
  struct Case {
    bool c, d;
    std::vector<float> y;
  };
  // As the folded cases: then/then (x + 11) * (x + 10), then/else 11, else 3x.
  const Case cases[] = {{true, true, {12.f * 11.f, 9.f * 8.f}},
                        {true, false, {11.f, 11.f}},
                        {false, true, {3.f, -6.f}},
                        {false, false, {3.f, -6.f}}};
  for (const Case& k : cases) {
    CAPTURE(k.c);
    CAPTURE(k.d);
    SetBoolInput(c.session.get(), "c", k.c);
    SetBoolInput(c.session.get(), "d", k.d);
    CHECK(RunY(&c, "y", x) == k.y);
    CHECK(FloatOutput(*c.session, "t", {2}) == std::vector<float>{2.f, -4.f});
  }
  // Each branch's arena is counted with the session's.
  CHECK(c.session->arena_bytes() > 0);
}

TEST_CASE("bind_input_consts: values parse as the input's dtype and fit its shape") {
  TempDir dir;
  const std::string path = CollidingModel(dir);
  auto fails = [&](const std::string& name, const std::string& value, const std::string& needle) {
    ConvertOptions opts;
    opts.consts["d"] = "1";
    opts.consts[name] = value;
    Graph g;
    Status st = LoadAndOptimize(path, opts, &g);
    CAPTURE(st.message());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(st.message(), needle));
  };
  fails("c", "yes", "'yes' is not a valid bool");
  fails("c", "1,0", "--const c gives 2 value(s), input 'c' is declared ()");
  fails("sr", "16000", "--const names 'sr', which is not a graph input; inputs: 'x'");
  fails("x", "1,nan", "'nan' is not a valid float32");
  // x bound to a tensor: y = 3x with c false.
  ConvertOptions opts;
  opts.consts["c"] = "0";
  opts.consts["d"] = "0";
  opts.consts["x"] = "0.5,-1";
  Graph g;
  Status st = LoadAndOptimize(path, opts, &g);
  REQUIRE_MESSAGE(st.ok(), st.message());
  CHECK(g.inputs.empty());
  const Value* y = g.Find("y");
  REQUIRE(y);
  REQUIRE(y->is_constant());
  std::vector<float> got(2);
  std::memcpy(got.data(), y->data->data(), 8);
  CHECK(got == std::vector<float>{1.5f, -3.f});
}

}  // namespace
}  // namespace test
}  // namespace conv
}  // namespace qfold
