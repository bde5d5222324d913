// fp16/bf16 models compute in fp32 on CPUs without native half arithmetic;
// only the model's inputs and outputs keep their declared dtype.
#include <algorithm>
#include <cstring>

#include "converter/onnx_dtype.h"
#include "converter/passes/passes.h"
#include "core/half.h"

namespace qfold {
namespace conv {

namespace {
bool IsHalf(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

std::shared_ptr<const std::vector<uint8_t>> WidenData(DType t, const std::vector<uint8_t>& in) {
  size_t n = in.size() / 2;
  auto out = std::make_shared<std::vector<uint8_t>>(n * 4);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in.data() + 2 * i, 2);
    float f = t == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
    std::memcpy(out->data() + 4 * i, &f, 4);
  }
  return out;
}

Value WideValue(const std::string& name, const Value& half,
                std::shared_ptr<const std::vector<uint8_t>> data) {
  Value v;
  v.name = name;
  v.dtype = DType::kFloat32;
  v.rank_known = half.rank_known;
  v.shape = half.shape;
  v.data = std::move(data);
  return v;
}

Node MakeCast(const std::string& name, const std::string& in, const std::string& out, DType to) {
  Node c;
  c.op_type = "Cast";
  c.name = name;
  c.inputs = {in};
  c.outputs = {out};
  c.attrs.SetInt("to", OnnxFromDType(to));
  return c;
}
}  // namespace

Status WidenHalfFloats(Graph* g) {
  bool any = false;
  for (auto& kv : g->values) {
    Value& v = kv.second;
    if (!IsHalf(v.dtype)) continue;
    any = true;
    if (v.is_constant()) {
      g->had_float16_constants |= v.dtype == DType::kFloat16;
      v.data = WidenData(v.dtype, *v.data);
      v.dtype = DType::kFloat32;
    }
  }
  if (!any) return Status::Ok();
  // Casts to half inside the graph become casts to fp32.
  for (Node& n : g->nodes) {
    if (n.op_type == "Cast" && n.domain.empty()) {
      DType to = DTypeFromOnnx(int(n.attrs.GetInt("to", 0)));
      if (IsHalf(to)) n.attrs.SetInt("to", OnnxFromDType(DType::kFloat32));
    }
    // DequantizeLinear (opset 23+) may ask for a half output; compute in fp32 too.
    if (n.op_type == "DequantizeLinear" && n.domain.empty() &&
        IsHalf(DTypeFromOnnx(int(n.attrs.GetInt("output_dtype", 0)))))
      n.attrs.SetInt("output_dtype", OnnxFromDType(DType::kFloat32));
  }
  std::vector<Node> prologue, epilogue;
  for (const std::string& in : g->inputs) {
    Value& v = g->values[in];
    if (!IsHalf(v.dtype)) continue;
    std::string wide = g->UniqueName(in + "_fp32");
    g->values[wide] = WideValue(wide, v, nullptr);
    for (Node& n : g->nodes)
      for (std::string& s : n.inputs)
        if (s == in) s = wide;
    prologue.push_back(MakeCast(in + "_to_fp32", in, wide, DType::kFloat32));
  }
  for (std::string& out : g->outputs) {
    Value* v = g->Find(out);
    if (!v || !IsHalf(v->dtype)) continue;
    if (std::find(g->inputs.begin(), g->inputs.end(), out) != g->inputs.end()) continue;
    DType half = v->dtype;
    std::string wide = g->UniqueName(out + "_fp32");
    g->values[wide] = WideValue(wide, *v, v->data);
    for (Node& n : g->nodes) {
      for (std::string& s : n.outputs)
        if (s == out) s = wide;
      for (std::string& s : n.inputs)
        if (s == out) s = wide;
    }
    if (g->values[wide].is_constant()) g->values[out].data = nullptr;
    epilogue.push_back(MakeCast(out + "_to_half", wide, out, half));
  }
  prologue.insert(prologue.end(), std::make_move_iterator(g->nodes.begin()),
                  std::make_move_iterator(g->nodes.end()));
  prologue.insert(prologue.end(), std::make_move_iterator(epilogue.begin()),
                  std::make_move_iterator(epilogue.end()));
  g->nodes = std::move(prologue);
  // Intermediate values are re-typed by inference; clear their stale half dtype.
  for (auto& kv : g->values) {
    Value& v = kv.second;
    bool boundary = std::find(g->inputs.begin(), g->inputs.end(), v.name) != g->inputs.end() ||
                    g->IsGraphOutput(v.name);
    if (IsHalf(v.dtype) && !boundary) v.dtype = DType::kFloat32;
  }
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
