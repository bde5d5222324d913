// One table entry per ONNX op whose older opsets differ from the form the
// runtime implements. The runtime kernels then only know the newest form.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

using Rewrite = std::function<Status(Graph*, Node*, int64_t opset)>;

// Moves an INTS attribute into input slot `slot` as an int64 constant.
void AttrToInput(Graph* g, Node* n, const char* attr, size_t slot) {
  const Attr* a = n->attrs.Find(attr);
  if (!a) return;
  std::string c = g->AddInt64Constant(n->name + "_" + attr, a->ints);
  n->attrs.Erase(attr);
  if (n->inputs.size() <= slot) n->inputs.resize(slot + 1);
  n->inputs[slot] = c;
}

std::string AddFloatScalar(Graph* g, const std::string& base, float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return g->AddConstant(base, DType::kFloat32, {}, std::move(b));
}

Status ReduceAxes(Graph* g, Node* n, int64_t opset) {
  // ReduceSum took axes as an input from 13, the other reductions from 18.
  int64_t since = n->op_type == "ReduceSum" ? 13 : 18;
  if (opset < since) AttrToInput(g, n, "axes", 1);
  return Status::Ok();
}

// LSTM/GRU/RNN: the string list `activations` becomes one comma-separated
// string (ops/recurrent.cc splits it); the .qfm has no string lists.
Status JoinActivations(Graph* g, Node* n, int64_t) {
  auto it = n->string_lists.find("activations");
  if (it == n->string_lists.end()) return Status::Ok();
  std::string joined;
  for (const std::string& f : it->second) {
    if (f.empty() || f.find(',') != std::string::npos)
      return Status(StatusCode::kInvalidModel,
                    g->source + ": " + n->Label() + ": activation function name '" + f + "'");
    joined += (joined.empty() ? "" : ",") + f;
  }
  n->attrs.SetString("activations", joined);
  n->string_lists.erase(it);
  auto& un = n->unsupported_attrs;
  un.erase(std::remove(un.begin(), un.end(), "activations"), un.end());
  return Status::Ok();
}

const std::map<std::string, Rewrite>& Rewrites() {
  static const std::map<std::string, Rewrite> table = {
      {"Clip",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 11) {
           float lo = n->attrs.GetFloat("min", -3.402823466e38f);
           float hi = n->attrs.GetFloat("max", 3.402823466e38f);
           n->inputs.resize(3);
           n->inputs[1] = AddFloatScalar(g, n->name + "_min", lo);
           n->inputs[2] = AddFloatScalar(g, n->name + "_max", hi);
           n->attrs.Erase("min");
           n->attrs.Erase("max");
         }
         return Status::Ok();
       }},
      // Sum of two tensors is Add (older exports, e.g. ResNet's residual
      // joins), so QDQ folding and the layout planning see one op.
      {"Sum",
       [](Graph*, Node* n, int64_t) {
         if (n->inputs.size() == 2) n->op_type = "Add";
         return Status::Ok();
       }},
      {"ReduceSum", ReduceAxes},
      {"ReduceMean", ReduceAxes},
      {"ReduceMax", ReduceAxes},
      {"ReduceMin", ReduceAxes},
      {"ReduceProd", ReduceAxes},
      {"ReduceL1", ReduceAxes},
      {"ReduceL2", ReduceAxes},
      {"ReduceLogSum", ReduceAxes},
      {"ReduceLogSumExp", ReduceAxes},
      {"ReduceSumSquare", ReduceAxes},
      {"Squeeze",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) AttrToInput(g, n, "axes", 1);
         return Status::Ok();
       }},
      {"Unsqueeze",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) AttrToInput(g, n, "axes", 1);
         return Status::Ok();
       }},
      {"Split",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) AttrToInput(g, n, "split", 1);
         return Status::Ok();
       }},
      {"Slice",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 10) {
           AttrToInput(g, n, "starts", 1);
           AttrToInput(g, n, "ends", 2);
           AttrToInput(g, n, "axes", 3);
         }
         return Status::Ok();
       }},
      {"Pad",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 11) {
           AttrToInput(g, n, "pads", 1);
           float v = n->attrs.GetFloat("value", 0.f);
           n->attrs.Erase("value");
           n->inputs.resize(3);
           n->inputs[2] = AddFloatScalar(g, n->name + "_value", v);
         }
         return Status::Ok();
       }},
      {"Upsample",
       [](Graph* g, Node* n, int64_t opset) {
         // Upsample is Resize with asymmetric coordinates and floor rounding.
         n->op_type = "Resize";
         std::string scales;
         if (n->attrs.Has("scales")) {
           std::vector<float> s = n->attrs.GetFloats("scales");
           std::vector<uint8_t> b(s.size() * 4);
           std::memcpy(b.data(), s.data(), b.size());
           scales = g->AddConstant(n->name + "_scales", DType::kFloat32, {int64_t(s.size())},
                                   std::move(b));
           n->attrs.Erase("scales");
         } else {
           scales = n->input(1);
         }
         n->inputs = {n->input(0), "", scales};
         std::string mode = n->attrs.GetString("mode", "nearest");
         n->attrs.SetString("mode", mode == "bilinear" ? "linear" : mode);
         n->attrs.SetString("coordinate_transformation_mode", "asymmetric");
         n->attrs.SetString("nearest_mode", "floor");
         return Status::Ok();
       }},
      {"Resize",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 11) {  // opset 10: (X, scales), asymmetric, floor
           n->inputs = {n->input(0), "", n->input(1)};
           n->attrs.SetString("coordinate_transformation_mode", "asymmetric");
           n->attrs.SetString("nearest_mode", "floor");
         }
         return Status::Ok();
       }},
      {"Dropout",
       [](Graph*, Node* n, int64_t opset) {
         // Opsets 7-9 typed the mask like the data; opsets before 7 had
         // is_test, which inference ignores as ONNX Runtime does. The ratio
         // attribute only matters in training.
         if (opset < 10) n->attrs.SetInt("_mask_like_data", 1);
         n->attrs.Erase("is_test");
         n->attrs.Erase("ratio");
         return Status::Ok();
       }},
      {"LSTM", JoinActivations},
      {"GRU", JoinActivations},
      {"RNN", JoinActivations},
      {"DynamicQuantizeLSTM", JoinActivations},  // com.microsoft
      {"Scatter",                                // opset 9-10 name of ScatterElements
       [](Graph* g, Node* n, int64_t opset) {
         n->op_type = "ScatterElements";
         return Status::Ok();
       }},
      {"TopK",
       [](Graph* g, Node* n, int64_t opset) {
         // Opset 1 had k as an attribute; from 10 it is a 1-D input.
         if (opset < 10 && n->attrs.Has("k")) {
           std::string k = g->AddInt64Constant(n->name + "_k", {n->attrs.GetInt("k", 0)});
           n->attrs.Erase("k");
           n->inputs.resize(2);
           n->inputs[1] = k;
         }
         return Status::Ok();
       }},
      {"Softmax",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) n->attrs.SetInt("_coerce_2d", 1);
         return Status::Ok();
       }},
      {"LogSoftmax",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) n->attrs.SetInt("_coerce_2d", 1);
         return Status::Ok();
       }},
      {"Hardmax",
       [](Graph* g, Node* n, int64_t opset) {
         if (opset < 13) n->attrs.SetInt("_coerce_2d", 1);
         return Status::Ok();
       }},
      {"ConstantOfShape",
       [](Graph* g, Node* n, int64_t opset) {
         auto it = n->tensor_attrs.find("value");
         if (it != n->tensor_attrs.end()) {
           Value v = it->second;
           std::string c =
               g->AddConstant(n->name + "_value", v.dtype, v.shape, std::vector<uint8_t>(*v.data));
           n->inputs.resize(2);
           n->inputs[1] = c;
           n->tensor_attrs.erase(it);
         }
         return Status::Ok();
       }},
  };
  return table;
}

// com.microsoft QGemm (ONNX Runtime's QOperator Gemm) with a quantized output
// is QLinearMatMul with the int32 bias C as its ninth input: B is transposed
// at conversion when transB is set.
Status RewriteQGemm(Graph* g, Node* n) {
  auto unsupported = [&](const std::string& why) {
    return Status(StatusCode::kUnsupported, g->source + ": " + n->Label() + ": " + why);
  };
  if (n->input(7).empty()) return unsupported("QGemm with a float output (no y_scale)");
  if (n->attrs.GetInt("transA", 0) != 0) return unsupported("transA=1");
  if (n->attrs.GetFloat("alpha", 1.f) != 1.f) return unsupported("alpha != 1");
  std::string b = n->input(3);
  if (n->attrs.GetInt("transB", 0) != 0) {
    const Value* v = g->Find(b);
    if (!v || !v->is_constant() || v->shape.size() != 2 || dtype_size(v->dtype) != 1)
      return unsupported("transB=1 needs a constant 2-D 8-bit B");
    const int64_t rows = v->shape[0], cols = v->shape[1];
    std::vector<uint8_t> t(v->data->size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = (*v->data)[size_t(r * cols + c)];
    b = g->AddConstant(b + "_t", v->dtype, {cols, rows}, std::move(t));
  }
  std::vector<std::string> in = {n->input(0), n->input(1), n->input(2), b,
                                 n->input(4), n->input(5), n->input(7), n->input(8)};
  if (!n->input(6).empty()) in.push_back(n->input(6));
  n->inputs = in;
  n->op_type = "QLinearMatMul";
  n->domain.clear();
  n->attrs = AttrMap();
  return Status::Ok();
}

// com.microsoft QLinearSoftmax: dequantize, Softmax in float, quantize.
void ExpandQLinearSoftmax(Graph* g, Node&& n, std::vector<Node>* out) {
  Node dq, sm, q;
  dq.op_type = "DequantizeLinear";
  dq.name = n.name + "_dequantize";
  dq.inputs = {n.input(0), n.input(1), n.input(2)};
  std::string xf = g->UniqueName(n.outputs[0] + "_float_in");
  std::string yf = g->UniqueName(n.outputs[0] + "_float_out");
  g->values[xf].name = xf;
  g->values[yf].name = yf;
  dq.outputs = {xf};
  sm.op_type = "Softmax";
  sm.name = n.name;
  sm.inputs = {xf};
  sm.outputs = {yf};
  sm.attrs.SetInt("axis", n.attrs.GetInt("axis", -1));
  // Its `opset` attribute says which Softmax semantics the node follows.
  if (n.attrs.GetInt("opset", 13) < 13) sm.attrs.SetInt("_coerce_2d", 1);
  q.op_type = "QuantizeLinear";
  q.name = n.name + "_quantize";
  q.inputs = {yf, n.input(3), n.input(4)};
  q.outputs = n.outputs;
  out->push_back(std::move(dq));
  out->push_back(std::move(sm));
  out->push_back(std::move(q));
}

// Scan of opset 8 puts a batch axis in front of every state and scan input
// and output, and takes optional sequence_lens. With a batch of one and no
// sequence_lens it is the opset-9 Scan of the inputs without that axis, its
// outputs given it back (Squeeze/Unsqueeze in the graph's opset-13 form,
// which the normalized graph uses). Anything else stays refused.
Status LowerScan8(Graph* g, Node&& n, std::vector<Node>* out) {
  auto refuse = [&](const std::string& why) {
    return Status(StatusCode::kUnsupported, g->source + ": " + n.Label() + ": Scan of opset 8 " +
                                                why + "; re-export with opset 9 or newer");
  };
  if (!n.input(0).empty()) return refuse("with sequence_lens is not supported");
  if (n.inputs.size() < 2) return refuse("without inputs");
  const std::string axes = g->AddInt64Constant(n.name + "_batch_axis", {0});
  Node scan = n;
  scan.inputs.clear();
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Value* v = g->Find(n.inputs[i]);
    if (!v || !v->rank_known || v->shape.empty() || v->shape[0] != 1)
      return refuse("with input '" + n.inputs[i] + "' not of batch 1 is not supported");
    Node sq;
    sq.op_type = "Squeeze";
    sq.name = n.name + "_unbatch_" + std::to_string(i);
    sq.inputs = {n.inputs[i], axes};
    const std::string x = g->UniqueName(n.inputs[i] + "_unbatched");
    g->values[x].name = x;
    sq.outputs = {x};
    scan.inputs.push_back(x);
    out->push_back(std::move(sq));
  }
  if (const Attr* d = scan.attrs.Find("directions")) {
    scan.attrs.SetInts("scan_input_directions", d->ints);
    scan.attrs.Erase("directions");
  }
  std::vector<Node> unsqueezes;
  for (std::string& o : scan.outputs) {
    if (o.empty()) continue;
    Node un;
    un.op_type = "Unsqueeze";
    un.name = n.name + "_rebatch_" + o;
    const std::string y = g->UniqueName(o + "_unbatched");
    g->values[y].name = y;
    un.inputs = {y, axes};
    un.outputs = {o};
    o = y;
    unsqueezes.push_back(std::move(un));
  }
  out->push_back(std::move(scan));
  for (Node& un : unsqueezes) out->push_back(std::move(un));
  return Status::Ok();
}

// Constant nodes become constant values; they are not operators at run time.
Status ConstantNodeToValue(Graph* g, const Node& n) {
  Value v;
  auto set_bytes = [&](DType dt, const void* p, size_t bytes, Shape shape) {
    v.dtype = dt;
    v.shape = std::move(shape);
    v.rank_known = true;
    v.data = std::make_shared<const std::vector<uint8_t>>(static_cast<const uint8_t*>(p),
                                                          static_cast<const uint8_t*>(p) + bytes);
  };
  if (n.tensor_attrs.count("value")) {
    v = n.tensor_attrs.at("value");
  } else if (const Attr* a = n.attrs.Find("value_float")) {
    set_bytes(DType::kFloat32, &a->f, 4, {});
  } else if (const Attr* a = n.attrs.Find("value_floats")) {
    set_bytes(DType::kFloat32, a->floats.data(), a->floats.size() * 4, {int64_t(a->floats.size())});
  } else if (const Attr* a = n.attrs.Find("value_int")) {
    set_bytes(DType::kInt64, &a->i, 8, {});
  } else if (const Attr* a = n.attrs.Find("value_ints")) {
    set_bytes(DType::kInt64, a->ints.data(), a->ints.size() * 8, {int64_t(a->ints.size())});
  } else {
    return Status(StatusCode::kUnsupported,
                  g->source + ": " + n.Label() +
                      ": only tensor, float(s) and int(s) constants are supported");
  }
  if (n.outputs.empty()) return Status::Ok();
  v.name = n.outputs[0];
  g->values[v.name] = std::move(v);
  return Status::Ok();
}

}  // namespace

Status NormalizeOpsets(Graph* g) {
  std::vector<Node> kept;
  for (Node& n : g->nodes) {
    // Subgraphs first, so that FoldIfs inlines nodes already normalized.
    for (auto& sub : n.subgraphs) QF_RETURN_IF_ERROR(NormalizeOpsets(sub.second.get()));
    if (n.domain.empty() && n.op_type == "Constant" && n.unsupported_attrs.empty()) {
      QF_RETURN_IF_ERROR(ConstantNodeToValue(g, n));
      continue;
    }
    if (n.domain.empty()) {
      auto it = Rewrites().find(n.op_type);
      if (it != Rewrites().end()) QF_RETURN_IF_ERROR(it->second(g, &n, g->opset));
    }
    // ONNX Runtime's contrib QuantizeLinear/DequantizeLinear (quantize_static with
    // UseQDQContribOps) are the standard ops with the same inputs and `axis`; the
    // runtime's Q/DQ implement every type they allow (int4 to uint16, int32 DQ), and
    // a missing zero point means uint8 / 0 in both. Later passes then see one op.
    if (n.domain == "com.microsoft" &&
        (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear"))
      n.domain.clear();
    if (n.domain == "com.microsoft" && n.op_type == "QGemm")
      QF_RETURN_IF_ERROR(RewriteQGemm(g, &n));
    if (n.domain.empty() && n.op_type == "Scan" && g->opset < 9) {
      QF_RETURN_IF_ERROR(LowerScan8(g, std::move(n), &kept));
      continue;
    }
    if (n.domain.empty() && n.op_type == "SequenceMap") {
      QF_RETURN_IF_ERROR(ExpandSequenceMap(g, std::move(n), &kept));
      continue;
    }
    if (n.domain == "com.microsoft" && n.op_type == "MatMulNBits") {
      QF_RETURN_IF_ERROR(LowerMatMulNBits(g, std::move(n), &kept));
      continue;
    }
    if (n.domain == "com.microsoft" && n.op_type == "QLinearSoftmax") {
      ExpandQLinearSoftmax(g, std::move(n), &kept);
      continue;
    }
    kept.push_back(std::move(n));
  }
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
