// Layout planning: quantized and 2-D float convolutions and pools run
// channels-last inside the model, where the C values of a pixel are
// contiguous and a kernel broadcasts them straight from the activation tensor. External shapes
// never change: graph inputs and outputs keep the model's layout.
//
// One forward pass over the topologically sorted nodes:
// - an op with LayoutRole::kChannelsLast (and, where the op has the hook,
//   OpDef::layout_channels_last true for its attributes) gets
//   channels_last = 1 between Transpose(NCHW -> NHWC) and Transpose(NHWC -> NCHW);
// - a Transpose whose input comes from a Transpose composes with it, and
//   disappears when the two cancel;
// - an element-wise or axis op (kElementwise, kAxis) whose data inputs all
//   come from the same Transpose (or are constants, permuted here) runs on
//   the untransposed tensors, and the Transpose moves to its outputs.
// Transposes left without readers are removed by RemoveDeadCode, so what
// remains sits where the graph really needs another layout: a graph input or
// output, a Reshape/Flatten/MatMul that reads axes by position.
#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {
namespace {

using Perm = std::vector<int64_t>;

// NCHW -> NHWC ([0, 2, ..., r-1, 1]) and its inverse.
Perm ToChannelsLast(size_t rank) {
  Perm p = {0};
  for (size_t i = 2; i < rank; ++i) p.push_back(int64_t(i));
  p.push_back(1);
  return p;
}
Perm ToChannelsFirst(size_t rank) {
  Perm p = {0, int64_t(rank) - 1};
  for (size_t i = 1; i + 1 < rank; ++i) p.push_back(int64_t(i));
  return p;
}

Perm Inverse(const Perm& p) {
  Perm inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[size_t(p[i])] = int64_t(i);
  return inv;
}

bool IsIdentity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// transpose(transpose(x, first), second) == transpose(x, result).
Perm Compose(const Perm& first, const Perm& second) {
  Perm r(second.size());
  for (size_t i = 0; i < second.size(); ++i) r[i] = first[size_t(second[i])];
  return r;
}

// Shape of transpose(x, p): axis i is x's axis p[i].
Shape Permuted(const Shape& s, const Perm& p) {
  Shape r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[i] = s[size_t(p[i])];
  return r;
}

// Bytes of transpose(x, p) for a constant of `esize`-byte elements.
std::vector<uint8_t> TransposeBytes(const std::vector<uint8_t>& src, const Shape& shape,
                                    const Perm& p, size_t esize) {
  const Shape out_shape = Permuted(shape, p);
  const std::vector<int64_t> in_strides = ContiguousStrides(shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> dst(src.size());
  std::vector<int64_t> idx(out_shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t a = 0; a < idx.size(); ++a) off += idx[a] * in_strides[size_t(p[a])];
    std::copy(src.begin() + off * int64_t(esize), src.begin() + (off + 1) * int64_t(esize),
              dst.begin() + i * int64_t(esize));
    for (size_t a = idx.size(); a-- > 0;) {
      if (++idx[a] < out_shape[a]) break;
      idx[a] = 0;
    }
  }
  return dst;
}

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

// The op definition of a node of the default or com.microsoft domain.
const OpDef* FindNodeOp(const Node& n) {
  return n.domain.empty() || n.domain == "com.microsoft" ? FindOp(n.op_type) : nullptr;
}

class LayoutPlanner {
 public:
  explicit LayoutPlanner(Graph* g) : g_(*g) {}

  Status Run() {
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (const Node& n : nodes) {
      for (const std::string& in : n.inputs)
        if (!in.empty()) readers_[in].push_back(&n);
      for (const std::string& out : n.outputs)
        if (!out.empty()) producers_[out] = n.op_type;
    }
    for (Node& n : nodes) {
      for (std::string& in : n.inputs) {
        auto it = rename_.find(in);
        if (it != rename_.end()) in = it->second;
      }
      if (IsTranspose(n))
        EmitTranspose(std::move(n));
      else if (!TryChannelsLast(n) && !TrySinkTransposes(n))
        g_.nodes.push_back(std::move(n));
    }
    for (const std::string& v : channels_last_)
      if (Value* val = g_.Find(v)) val->layout = Value::Layout::kNHWC;
    return Status::Ok();
  }

 private:
  struct Transposed {
    std::string source;
    Perm perm;
  };

  static bool IsTranspose(const Node& n) {
    return n.op_type == "Transpose" && n.domain.empty() && n.inputs.size() == 1 &&
           n.outputs.size() == 1;
  }

  const Value* Known(const std::string& name) const {
    const Value* v = g_.Find(name);
    return v && v->rank_known ? v : nullptr;
  }

  // Adds value `name` like `like`, with its shape permuted by p.
  void AddValueLike(const std::string& name, const Value& like, const Perm& p) {
    Value v;
    v.name = name;
    v.dtype = like.dtype;
    v.rank_known = like.rank_known;
    if (like.rank_known && like.shape.size() == p.size()) v.shape = Permuted(like.shape, p);
    if (like.quant && like.quant->axis >= 0 && size_t(like.quant->axis) < p.size()) {
      auto q = std::make_shared<QuantInfo>(*like.quant);
      q->axis = int(Inverse(p)[size_t(like.quant->axis)]);
      v.quant = q;
    } else {
      v.quant = like.quant;
    }
    g_.values[name] = std::move(v);
  }

  void EmitTranspose(Node n) {
    const Value* x = Known(n.inputs[0]);
    Perm perm = n.attrs.GetInts("perm");
    if (x && perm.empty()) {
      perm.resize(x->shape.size());
      std::iota(perm.rbegin(), perm.rend(), 0);
    }
    auto it = transposed_.find(n.inputs[0]);
    if (it != transposed_.end() && it->second.perm.size() == perm.size()) {
      const Transposed src = it->second;
      const Perm composed = Compose(src.perm, perm);
      const std::string& out = n.outputs[0];
      if (IsIdentity(composed) && !g_.IsGraphOutput(out)) {
        rename_[out] = src.source;
        g_.values.erase(out);
        return;
      }
      n.inputs[0] = src.source;
      if (IsIdentity(composed)) {
        n.op_type = "Identity";
        n.attrs = AttrMap();
      } else {
        n.attrs.SetInts("perm", composed);
        transposed_[out] = {src.source, composed};
      }
      g_.nodes.push_back(std::move(n));
      return;
    }
    if (!perm.empty()) transposed_[n.outputs[0]] = {n.inputs[0], perm};
    g_.nodes.push_back(std::move(n));
  }

  // A value equal to transpose(v, p), through the Transposes already known.
  std::string TransposeOf(const std::string& v, const Perm& p) {
    const auto key = std::make_pair(v, p);
    auto cached = made_.find(key);
    if (cached != made_.end()) return cached->second;
    Node t;
    t.op_type = "Transpose";
    t.name = g_.UniqueName(v + "_transpose");
    t.inputs = {v};
    const std::string out = g_.UniqueName(v + (p == ToChannelsLast(p.size()) ? "_nhwc" : "_t"));
    t.outputs = {out};
    t.attrs.SetInts("perm", p);
    AddValueLike(out, *g_.Find(v), p);
    EmitTranspose(std::move(t));
    auto r = rename_.find(out);
    const std::string result = r != rename_.end() ? r->second : out;
    if (result == out && p == ToChannelsLast(p.size())) channels_last_.push_back(out);
    made_[key] = result;
    return result;
  }

  // The outputs of n hold permuted data; a Transpose(outer_from_inner)
  // gives the readers that still need the model's layout a copy. Values keep
  // their ONNX names (qfold verify compares layers by name), except graph
  // outputs, whose name must keep the model's shape.
  void RedirectOutputs(Node& n, const Perm& inner_from_outer, const Perm& outer_from_inner,
                       bool channels_last) {
    std::vector<Node> restores;
    for (std::string& out : n.outputs) {
      if (out.empty()) continue;
      const Value* found = g_.Find(out);
      Value original;
      if (found) original = *found;
      original.name = out;
      const bool graph_output = g_.IsGraphOutput(out);
      const std::string suffix = channels_last ? (graph_output ? "_nhwc" : "_nchw") : "_t";
      const std::string other = g_.UniqueName(out + suffix);
      const std::string inner = graph_output ? other : out;
      const std::string outer = graph_output ? out : other;
      AddValueLike(inner, original, inner_from_outer);
      AddValueLike(outer, original, Perm(IdentityPerm(inner_from_outer.size())));
      if (graph_output) {
        // The model's own layout, as annotate_layouts recorded it.
        Value& v = g_.values[outer];
        v.layout = original.layout;
        v.batch_axis = original.batch_axis;
        v.channel_axis = original.channel_axis;
      }
      if (!graph_output) rename_[out] = outer;
      Node t;
      t.op_type = "Transpose";
      t.name = g_.UniqueName(out + "_to_model_layout");
      t.inputs = {inner};
      t.outputs = {outer};
      t.attrs.SetInts("perm", outer_from_inner);
      if (channels_last) channels_last_.push_back(inner);
      out = inner;
      restores.push_back(std::move(t));
    }
    g_.nodes.push_back(std::move(n));
    for (Node& t : restores) EmitTranspose(std::move(t));
  }

  static Perm IdentityPerm(size_t rank) {
    Perm p(rank);
    std::iota(p.begin(), p.end(), 0);
    return p;
  }

  // Integer convolutions (QLinearConv, QfConvDequant), 8-bit pools and the
  // float ops with OpDef::layout_float -> channels_last = 1.
  bool TryChannelsLast(Node& n) {
    const OpDef* def = FindNodeOp(n);
    if (!def || def->layout != LayoutRole::kChannelsLast || n.inputs.empty()) return false;
    if (n.attrs.GetInt("channels_last", 0) != 0) return false;
    if (def->layout_channels_last && !def->layout_channels_last(n.attrs)) return false;
    const Value* x = Known(n.inputs[0]);
    // 16-bit activations: QLinearConv's a16w8 kernel, MaxPool's and
    // QLinearGlobalAveragePool's 16-bit ones are channels-last too.
    const bool a16 = (n.op_type == "QLinearConv" || n.op_type == "MaxPool" ||
                      n.op_type == "QLinearGlobalAveragePool") &&
                     (x && (x->dtype == DType::kInt16 || x->dtype == DType::kUInt16));
    // Float: 2-D ops whose channels-last kernel takes float32 (Conv, nearest
    // Resize, GlobalAveragePool); the others would run between transposes.
    const bool f32 = x && x->dtype == DType::kFloat32 && def->layout_float && x->shape.size() == 4;
    if (!x || (x->shape.size() != 3 && x->shape.size() != 4) || !(Is8Bit(x->dtype) || a16 || f32))
      return false;
    const size_t rank = x->shape.size();
    const Perm to_last = ToChannelsLast(rank), to_first = ToChannelsFirst(rank);
    if (def->const_inputs) {
      // Convolutions: their kernels are prepared from constant weights.
      for (size_t i = 0; i < 32; ++i)
        if ((def->const_inputs >> i & 1u) && (i >= n.inputs.size() || !g_.IsConstant(n.inputs[i])))
          return false;
      const Value* w = n.inputs.size() > 1 ? Known(n.inputs[1]) : nullptr;
      if (f32 && (!w || w->shape.size() != 4)) return false;
    } else {
      // A pool (or Resize, DepthToSpace) alone between channels-first ops
      // would only add Transposes.
      auto it = transposed_.find(n.inputs[0]);
      if (it == transposed_.end() || it->second.perm != to_first) return false;
      if (n.op_type == "MaxPool" && n.outputs.size() > 1 && !n.outputs[1].empty()) return false;
    }
    n.inputs[0] = TransposeOf(n.inputs[0], to_last);
    n.attrs.SetInt("channels_last", 1);
    RedirectOutputs(n, to_last, to_first, /*channels_last=*/true);
    return true;
  }

  // Moves Transposes from the data inputs of a layout-agnostic op to its outputs.
  bool TrySinkTransposes(Node& n) {
    const OpDef* def = FindNodeOp(n);
    if (!def || (def->layout != LayoutRole::kElementwise && def->layout != LayoutRole::kAxis))
      return false;
    if (n.attrs.GetInt("block_size", 0) != 0) return false;  // blocked Q/DQ: rank-r scales
    const int num_inputs = int(n.inputs.size());
    // The permutation: that of the first data input coming from a Transpose.
    const Perm* perm = nullptr;
    for (int i = 0; i < num_inputs && !perm; ++i) {
      if (!def->layout_input(i, num_inputs) || n.inputs[size_t(i)].empty()) continue;
      auto it = transposed_.find(n.inputs[size_t(i)]);
      if (it != transposed_.end()) perm = &it->second.perm;
    }
    if (!perm) return false;
    const Perm p = *perm, inv = Inverse(p);
    const size_t rank = p.size();
    // Moving a Transpose past an op that widens the data (DequantizeLinear,
    // Cast to float) would move more bytes, not fewer; unless it brings
    // channels-last data back to NCHW for readers that all run channels-last
    // float (LRN, pools, Conv after a DequantizeLinear), where it cancels.
    size_t in_bytes = 0;
    for (int i = 0; i < num_inputs; ++i)
      if (def->layout_input(i, num_inputs) && transposed_.count(n.inputs[size_t(i)]))
        if (const Value* v = g_.Find(n.inputs[size_t(i)]))
          in_bytes = std::max(in_bytes, dtype_storage_bytes(v->dtype, 1));
    for (const std::string& out : n.outputs) {
      const Value* v = out.empty() ? nullptr : g_.Find(out);
      if (v && dtype_storage_bytes(v->dtype, 1) > in_bytes &&
          !(p == ToChannelsFirst(rank) && ReadersRunChannelsLastFloat(out)))
        return false;
    }
    // Every data input must come from a Transpose with the same permutation,
    // be a constant (permuted here) or a scalar.
    std::vector<std::string> new_inputs = n.inputs;
    for (int i = 0; i < num_inputs; ++i) {
      const std::string& in = n.inputs[size_t(i)];
      if (!def->layout_input(i, num_inputs) || in.empty()) continue;
      auto it = transposed_.find(in);
      if (it != transposed_.end()) {
        if (it->second.perm != p) return false;
        new_inputs[size_t(i)] = it->second.source;
        continue;
      }
      const Value* v = Known(in);
      if (!v || v->shape.size() > rank) return false;
      if (v->shape.empty()) continue;
      if (!v->is_constant() || v->dtype == DType::kInt4 || v->dtype == DType::kUInt4) return false;
      for (int64_t d : v->shape)
        if (d < 0) return false;
      new_inputs[size_t(i)] = PermutedConstant(*v, inv);
    }
    if (def->layout == LayoutRole::kAxis &&
        (n.attrs.Has("axis") || def->layout_default_axis != kNoDefaultAxis)) {
      const int64_t r = int64_t(rank);
      int64_t axis = n.attrs.GetInt("axis", def->layout_default_axis);
      if (axis < 0) axis += r;
      if (axis < 0 || axis >= r) return false;
      n.attrs.SetInt("axis", p[size_t(axis)]);
    }
    n.inputs = new_inputs;
    RedirectOutputs(n, inv, p, p == ToChannelsFirst(rank));
    return true;
  }

  // Whether `name` is read, only by ops that take channels-last float data
  // of its rank (OpDef::layout_float) as their first input, or by float
  // element-wise ops whose outputs are read so in turn (ResNet's last
  // residual Add of two DequantizeLinear results and Relu before a float
  // AveragePool), and is not a graph output. `depth` bounds the chains.
  bool ReadersRunChannelsLastFloat(const std::string& name, int depth = 3) const {
    const Value* v = g_.Find(name);
    auto it = readers_.find(name);
    if (!v || v->dtype != DType::kFloat32 || v->shape.size() != 4 || it == readers_.end() ||
        g_.IsGraphOutput(name))
      return false;
    for (const Node* r : it->second) {
      const OpDef* def = FindNodeOp(*r);
      if (!def) return false;
      if (def->layout == LayoutRole::kElementwise && depth > 0 && r->outputs.size() == 1 &&
          !r->outputs[0].empty()) {
        // Its other data inputs must be constants or DequantizeLinear
        // results (which move their Transposes the same way), or the
        // element-wise op would put a Transpose back on float data.
        const int num = int(r->inputs.size());
        for (int i = 0; i < num; ++i) {
          const std::string& in = r->inputs[size_t(i)];
          if (in.empty() || in == name || !def->layout_input(i, num) || g_.IsConstant(in)) continue;
          auto p = producers_.find(in);
          if (p == producers_.end() || p->second != "DequantizeLinear") return false;
        }
        if (!ReadersRunChannelsLastFloat(r->outputs[0], depth - 1)) return false;
        continue;
      }
      if (def->layout != LayoutRole::kChannelsLast || !def->layout_float || r->inputs.empty() ||
          r->inputs[0] != name ||
          (def->layout_channels_last && !def->layout_channels_last(r->attrs)))
        return false;
    }
    return true;
  }

  // A constant broadcast to `rank` dims (leading 1s) and transposed by p.
  std::string PermutedConstant(const Value& v, const Perm& p) {
    Shape full(p.size() - v.shape.size(), 1);
    full.insert(full.end(), v.shape.begin(), v.shape.end());
    const size_t esize = dtype_storage_bytes(v.dtype, 1);
    return g_.AddConstant(v.name + "_nhwc", v.dtype, Permuted(full, p),
                          TransposeBytes(*v.data, full, p, esize));
  }

  Graph& g_;
  std::unordered_map<std::string, Transposed> transposed_;
  // The nodes reading each value and the op type making it, as the graph
  // stood before planning (readers come later in the order, so they are
  // still in place when asked about; producers may have moved: types kept).
  std::unordered_map<std::string, std::vector<const Node*>> readers_;
  std::unordered_map<std::string, std::string> producers_;
  std::unordered_map<std::string, std::string> rename_;
  std::map<std::pair<std::string, Perm>, std::string> made_;
  std::vector<std::string> channels_last_;
};

}  // namespace

Status PlanLayouts(Graph* g) {
  return LayoutPlanner(g).Run();
}

}  // namespace conv
}  // namespace qfold
