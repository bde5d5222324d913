// QDQ folding: DequantizeLinear -> float op -> QuantizeLinear becomes one
// integer operator, so a model quantized by quantize_static, AIMET or a
// PyTorch export runs int8 instead of simulating quantization in float.
//
// Patterns are matched by what feeds each op (a DQ of a per-tensor activation,
// a DQ of a constant weight quantized on the op's channel axis), never by a
// tensor's rank. What does not match stays a float op between explicit Q and
// DQ nodes, with the rule that failed in Node::float_reason; `qfold inspect
// --ops` shows it and `qfold check` warns when most heavy ops stay float.
//
// One table of rules (QdqFolder::Rules) binds the float ops, by type or by an
// OpDef trait, to a selector and an action. A selector finds the node group a
// rewrite needs without changing the graph, or records why it does not match
// (the first reason is kept in why_); the action rewrites the group. Matching
// helpers return "" on success or the reason. Indexes are updated per rewrite
// (no re-index of the whole graph), so folding stays linear.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "converter/onnx_dtype.h"
#include "converter/passes/passes.h"
#include "core/op.h"
#include "kernels/kernel_config.h"

namespace qfold {
namespace conv {

namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}
bool Is16Bit(DType t) {
  return t == DType::kInt16 || t == DType::kUInt16;
}

int32_t QMin(DType t) {
  return t == DType::kInt8 ? -128 : t == DType::kInt16 ? -32768 : 0;
}
int32_t QMax(DType t) {
  return t == DType::kInt8 ? 127 : t == DType::kInt16 ? 32767 : t == DType::kUInt16 ? 65535 : 255;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

bool ReadFloatsConst(const Value* v, std::vector<float>* out) {
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32) return false;
  out->resize(v->data->size() / 4);
  if (!out->empty()) std::memcpy(out->data(), v->data->data(), v->data->size());
  return true;
}

bool ReadIntsConst(const Value* v, std::vector<int32_t>* out) {
  if (!v || !v->is_constant()) return false;
  const uint8_t* p = v->data->data();
  size_t n = 0;
  switch (v->dtype) {
    case DType::kInt8:
      n = v->data->size();
      out->resize(n);
      for (size_t i = 0; i < n; ++i) (*out)[i] = int8_t(p[i]);
      return true;
    case DType::kUInt8:
      n = v->data->size();
      out->resize(n);
      for (size_t i = 0; i < n; ++i) (*out)[i] = p[i];
      return true;
    case DType::kInt16:
    case DType::kUInt16:
      n = v->data->size() / 2;
      out->resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t u = uint16_t(p[2 * i] | (p[2 * i + 1] << 8));
        (*out)[i] = v->dtype == DType::kInt16 ? int32_t(int16_t(u)) : int32_t(u);
      }
      return true;
    case DType::kInt32:
      n = v->data->size() / 4;
      out->resize(n);
      std::memcpy(out->data(), p, n * 4);
      return true;
    default:
      return false;
  }
}

// The quantization one DequantizeLinear or QuantizeLinear node describes.
struct QParams {
  std::string scale, zero_point;    // value names; zero_point may be ""
  DType qtype = DType::kUndefined;  // the integer side's dtype
  std::vector<float> scales;
  std::vector<int32_t> zps;  // empty when no zero point (0)
  int axis = 1;
  int block_size = 0;
  bool per_tensor() const { return scales.size() == 1; }
  int32_t zp(size_t i) const { return zps.empty() ? 0 : zps[zps.size() == 1 ? 0 : i]; }
  float scale_at(size_t i) const { return scales[scales.size() == 1 ? 0 : i]; }
};

class QdqFolder {
 public:
  explicit QdqFolder(Graph* g) : g_(*g) {}

  Status Run() {
    Index();
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (removed_.count(k) || !g_.nodes[k].domain.empty()) continue;
      const std::string t = g_.nodes[k].op_type;
      why_.clear();
      if (t == "QuantizeLinear") {
        TryRequantize(k);
        continue;
      }
      if (t == "DequantizeLinear") continue;
      // The rules for op k in table order; the first whose selector matches rewrites.
      bool folded = false, has_rule = false;
      for (const Rule& rule : Rules()) {
        if (rule.op_type ? t != rule.op_type : !HasTraits(t, rule.traits)) continue;
        has_rule = true;
        Group m;
        if ((this->*rule.select)(k, &m)) {
          (this->*rule.act)(k, m);
          folded = true;
          break;
        }
      }
      if (!has_rule) why_ = "no integer kernel for " + t;
      if (!folded && IsFloatResult(k) && HasQdqNeighbour(k))
        g_.nodes[k].float_reason = why_.empty() ? "no folding rule matched" : why_;
    }
    std::vector<Node> kept;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      auto before = insert_before_.find(k);
      if (before != insert_before_.end())
        for (Node& n : before->second) kept.push_back(std::move(n));
      if (!removed_.count(k)) kept.push_back(std::move(g_.nodes[k]));
      auto it = insert_after_.find(k);
      if (it != insert_after_.end())
        for (Node& n : it->second) kept.push_back(std::move(n));
    }
    g_.nodes = std::move(kept);
    return Status::Ok();
  }

 private:
  // What a rule's selector found: the nodes its rewrite reads and replaces and
  // their quantization, gathered without changing the graph (only the reason
  // in why_ is written); the rule's action rewrites from it. Each rule fills
  // the fields it needs.
  struct Group {
    const char* op_type = nullptr;  // the integer op the action emits
    const Node* dqx = nullptr;      // DQ of the data input (A)
    const Node* dqw = nullptr;      // DQ of the weight or of the second input (B)
    QParams xq, wq, yq;
    int64_t channels = 0;
    int weight_axis = 0;                     // the output-channel axis of the weight
    size_t qk = SIZE_MAX, act_k = SIZE_MAX;  // the output Q; a Relu/Clip before it
    int32_t lo = 0, hi = 0;                  // the output clamp of that Relu/Clip
    std::vector<int32_t> bias;
    // Conv: a depthwise input quantized per channel (NNCF): its scales moved
    // into the weight scales in memory; the action writes them as constants,
    // and the input keeps its own per-axis parameters (x_record) in the .qfm.
    bool x_per_channel = false;
    QParams x_record;
    // A ConvTranspose that lowers to QLinearConv takes 16-bit activations too.
    bool a16 = false;
    // MatMul: the Add after it whose constant is the bias.
    size_t add_k = SIZE_MAX;
    // Concat: each input's DQ and parameters. Split: each output's Q.
    std::vector<std::pair<const Node*, QParams>> inputs;
    std::vector<size_t> output_qs;
    // Unary op as a table: the output code of each of the 256 input codes.
    std::vector<uint8_t> table;
    // Weight-only MatMul/Gemm: the packed weight's block size (0: none).
    int64_t block = 0;
  };

  // Selector: true when node k and its neighbours match the rule, with what
  // the action needs in *m; else false, with the reason (if any) in why_.
  using Selector = bool (QdqFolder::*)(size_t k, Group* m);
  // Action: the rewrite of a group the selector matched.
  using Action = void (QdqFolder::*)(size_t k, Group& m);
  struct Rule {
    const char* op_type;  // the float op it folds; nullptr: any op with `traits`
    unsigned traits;
    Selector select;
    Action act;
  };

  // Tried in order; for a node the first rule whose selector matches rewrites
  // it, and the reason kept for a node left float is the first one a selector gave.
  static const std::vector<Rule>& Rules() {
    static const std::vector<Rule> rules = {
        {"Conv", 0, &QdqFolder::SelectConv, &QdqFolder::EmitQLinearConv},
        {"ConvTranspose", 0, &QdqFolder::SelectConvTranspose, &QdqFolder::EmitQLinearConv},
        {"MatMul", 0, &QdqFolder::SelectMatMul, &QdqFolder::EmitMatMul},
        {"Gemm", 0, &QdqFolder::SelectGemm, &QdqFolder::EmitGemm},
        // The weight-only forms (float A, 4-bit B) give no reason: their own
        // mismatch is not why an 8-bit pattern stayed float.
        {"MatMul", 0, &QdqFolder::SelectWeightOnlyMatMul, &QdqFolder::EmitWeightOnlyMatMul},
        {"Gemm", 0, &QdqFolder::SelectWeightOnlyGemm, &QdqFolder::EmitWeightOnlyGemm},
        {"Add", 0, &QdqFolder::SelectBinary, &QdqFolder::EmitBinary},
        {"Mul", 0, &QdqFolder::SelectBinary, &QdqFolder::EmitBinary},
        {"GlobalAveragePool", 0, &QdqFolder::SelectPool, &QdqFolder::EmitPool},
        {"AveragePool", 0, &QdqFolder::SelectPool, &QdqFolder::EmitPool},
        {"Concat", 0, &QdqFolder::SelectConcat, &QdqFolder::EmitConcat},
        {"Split", 0, &QdqFolder::SelectSplit, &QdqFolder::EmitSplit},
        {"LRN", 0, &QdqFolder::SelectLrn, &QdqFolder::EmitLrn},
        {nullptr, kTraitMovesElements, &QdqFolder::SelectLayout, &QdqFolder::EmitLayout},
        {nullptr, kTraitUnaryLut, &QdqFolder::SelectLookupTable, &QdqFolder::EmitLookupTable},
    };
    return rules;
  }

  void Index() {
    producer_.clear();
    consumers_.clear();
    for (size_t k = 0; k < g_.nodes.size(); ++k) IndexNode(k);
  }

  // Records node k's current inputs and outputs. Entries of what a node no
  // longer reads stay behind; Consumers() filters them.
  void IndexNode(size_t k) {
    for (const std::string& o : g_.nodes[k].outputs)
      if (!o.empty()) producer_[o] = k;
    for (const std::string& i : g_.nodes[k].inputs)
      if (!i.empty()) consumers_[i].push_back(k);
  }

  // The live nodes reading `name`, each once.
  std::vector<size_t> Consumers(const std::string& name) const {
    std::vector<size_t> out;
    auto it = consumers_.find(name);
    if (it == consumers_.end()) return out;
    for (size_t k : it->second) {
      if (removed_.count(k) || std::find(out.begin(), out.end(), k) != out.end()) continue;
      const auto& in = g_.nodes[k].inputs;
      if (std::find(in.begin(), in.end(), name) != in.end()) out.push_back(k);
    }
    return out;
  }

  bool IsLiveQdq(size_t k, const char* op_type) const {
    return !removed_.count(k) && g_.nodes[k].op_type == op_type && g_.nodes[k].domain.empty();
  }

  // Reads a DequantizeLinear or QuantizeLinear next to op k (an activation or a weight).
  bool HasQdqNeighbour(size_t k) const {
    for (const std::string& i : g_.nodes[k].inputs) {
      auto it = producer_.find(i);
      if (!i.empty() && it != producer_.end() && IsLiveQdq(it->second, "DequantizeLinear"))
        return true;
    }
    // The cheap op-type test first: Consumers() scans each reader's inputs, and a
    // Split with n outputs into one Concat would make that n^2 string compares.
    for (const std::string& o : g_.nodes[k].outputs) {
      auto it = consumers_.find(o);
      if (o.empty() || it == consumers_.end()) continue;
      for (size_t c : it->second) {
        if (!IsLiveQdq(c, "QuantizeLinear")) continue;
        const auto& in = g_.nodes[c].inputs;
        if (std::find(in.begin(), in.end(), o) != in.end()) return true;
      }
    }
    return false;
  }

  // Op k computes a float result (integer ops a rewrite put here do not).
  bool IsFloatResult(size_t k) const {
    const Node& n = g_.nodes[k];
    const Value* v = n.outputs.empty() ? nullptr : g_.Find(n.outputs[0]);
    return v && dtype_is_float(v->dtype);
  }

  // Records the first reason a selector gave up; returns false for `return Fail(...)`.
  bool Fail(const std::string& why) {
    if (why_.empty()) why_ = why;
    return false;
  }

  // Reads a Q or DQ node's parameters; "" when they are constant, valid and
  // of an 8-bit integer type (or a 16-bit activation when a16 is set: the
  // ops with a16w8 kernels), else why not.
  std::string ReadQParams(const Node& n, QParams* q, bool a16 = false) {
    q->scale = n.input(1);
    q->zero_point = n.input(2);
    if (!ReadFloatsConst(g_.Find(q->scale), &q->scales) || q->scales.empty())
      return n.Label() + " has a non-constant or non-float32 scale";
    for (float s : q->scales)
      if (!(s > 0) || !std::isfinite(s)) return n.Label() + " has a non-positive scale";
    if (!q->zero_point.empty()) {
      const Value* zp = g_.Find(q->zero_point);
      if (!zp || !ReadIntsConst(zp, &q->zps) || q->zps.size() != q->scales.size())
        return n.Label() + " has a non-constant or unreadable zero point";
    }
    q->axis = int(n.attrs.GetInt("axis", 1));
    q->block_size = int(n.attrs.GetInt("block_size", 0));
    if (q->block_size != 0) return n.Label() + " is block-quantized";
    if (n.op_type == "DequantizeLinear") {
      const Value* x = g_.Find(n.input(0));
      q->qtype = x ? x->dtype : DType::kUndefined;
    } else {
      const Value* zp = q->zero_point.empty() ? nullptr : g_.Find(q->zero_point);
      int64_t od = n.attrs.GetInt("output_dtype", 0);
      q->qtype = zp ? zp->dtype : od ? DTypeFromOnnx(int(od)) : DType::kUInt8;
    }
    if (Is8Bit(q->qtype)) return "";
    const bool weight = g_.IsConstant(n.input(0));
    if (a16 && !weight && Is16Bit(q->qtype)) return "";
    if (Is16Bit(q->qtype))
      return weight ? "16-bit weights: no integer kernel" : "16-bit activations: no integer kernel";
    return std::string(dtype_name(q->qtype)) + (weight ? " weights" : " activations") +
           ": no integer kernel";
  }

  // The DQ node producing `name`, with its parameters; null (and why_ set,
  // naming `what`) when there is none or it does not qualify.
  const Node* DqOf(const std::string& name, QParams* q, const std::string& what = "input",
                   bool a16 = false) {
    auto it = producer_.find(name);
    if (it == producer_.end() || removed_.count(it->second)) {
      Fail(what + " '" + name + "' is float (not dequantized)");
      return nullptr;
    }
    const Node& n = g_.nodes[it->second];
    if (n.op_type != "DequantizeLinear" || !n.domain.empty()) {
      Fail(what + " '" + name + "' is float (from " + n.Label() + ", not dequantized)");
      return nullptr;
    }
    std::string why = ReadQParams(n, q, a16);
    if (!why.empty()) {
      Fail(why);
      return nullptr;
    }
    return &n;
  }

  // The single Q consuming `name` (an op's float output), with its parameters.
  bool SoleQConsumer(const std::string& name, size_t* qk, QParams* q, bool a16 = false) {
    if (g_.IsGraphOutput(name))
      return Fail("output '" + name + "' is a graph output, so no QuantizeLinear can take it");
    std::vector<size_t> cs = Consumers(name);
    if (cs.size() != 1) {
      size_t qs = 0;
      for (size_t c : cs) qs += IsLiveQdq(c, "QuantizeLinear");
      return Fail("output is not quantized by a single QuantizeLinear (" +
                  std::to_string(cs.size()) + " readers, " + std::to_string(qs) + " of them Q)");
    }
    size_t k = cs[0];
    const Node& n = g_.nodes[k];
    if (n.op_type != "QuantizeLinear" || !n.domain.empty())
      return Fail("output feeds a float op (" + n.Label() + ")");
    std::string why = ReadQParams(n, q, a16);
    if (!why.empty()) return Fail(why);
    if (!q->per_tensor()) return Fail("output " + n.Label() + " is per-axis");
    *qk = k;
    return true;
  }

  std::string ZeroPointName(const QParams& q, const std::string& base) {
    if (!q.zero_point.empty()) return q.zero_point;
    return g_.AddConstant(base + "_zero_point", q.qtype, {}, std::vector<uint8_t>(1, 0));
  }

  void SetQuant(const std::string& name, const QParams& q, int axis) {
    Value* v = g_.Find(name);
    if (!v) return;
    auto info = std::make_shared<QuantInfo>();
    info->scales = q.scales;
    for (size_t i = 0; i < q.scales.size(); ++i) info->zero_points.push_back(q.zp(i));
    info->axis = q.per_tensor() ? -1 : axis;
    v->quant = info;
  }

  // Replaces node k by `n`, writing the Q node qk's output, and drops qk.
  void Replace(size_t k, Node n, size_t qk, const QParams& yq) {
    const std::string float_out = g_.nodes[k].outputs[0];
    n.outputs = {g_.nodes[qk].outputs[0]};
    g_.values.erase(float_out);
    g_.nodes[k] = std::move(n);
    removed_.insert(qk);
    SetQuant(g_.nodes[k].outputs[0], yq, -1);
    IndexNode(k);
  }

  // Output clamp for a Relu/Clip between the op and its Q, in the Q's domain.
  bool ActivationClamp(const Node& act, const QParams& yq, int32_t* lo, int32_t* hi) {
    auto quantize = [&](float v) {
      double q = std::nearbyint(double(v) / yq.scales[0]) + yq.zp(0);
      return int32_t(std::max<double>(QMin(yq.qtype), std::min<double>(QMax(yq.qtype), q)));
    };
    *lo = QMin(yq.qtype);
    *hi = QMax(yq.qtype);
    if (act.op_type == "Relu") {
      *lo = std::max(*lo, quantize(0.f));
      return true;
    }
    if (act.op_type == "Clip") {
      std::vector<float> v;
      if (!act.input(1).empty()) {
        if (!ReadFloatsConst(g_.Find(act.input(1)), &v) || v.size() != 1) return false;
        *lo = std::max(*lo, quantize(v[0]));
      }
      if (!act.input(2).empty()) {
        if (!ReadFloatsConst(g_.Find(act.input(2)), &v) || v.size() != 1) return false;
        *hi = std::min(*hi, quantize(v[0]));
      }
      return true;
    }
    return false;
  }

  // Finds the Q after op k's output, optionally through one Relu/Clip.
  // On success *act_k is the activation node (or SIZE_MAX) and lo/hi its clamp.
  bool OutputQ(size_t k, size_t* qk, QParams* yq, size_t* act_k, int32_t* lo, int32_t* hi,
               bool a16 = false) {
    const std::string& out = g_.nodes[k].outputs[0];
    *act_k = SIZE_MAX;
    if (SoleQConsumer(out, qk, yq, a16)) {
      *lo = QMin(yq->qtype);
      *hi = QMax(yq->qtype);
      return true;
    }
    std::vector<size_t> cs = Consumers(out);
    if (g_.IsGraphOutput(out) || cs.size() != 1) return false;
    size_t a = cs[0];
    const Node& act = g_.nodes[a];
    if (act.op_type != "Relu" && act.op_type != "Clip") return false;
    why_.clear();  // the activation's own output decides now
    if (!SoleQConsumer(act.outputs[0], qk, yq, a16)) return false;
    if (!ActivationClamp(act, *yq, lo, hi))
      return Fail(act.Label() + " has non-constant or per-element bounds");
    *act_k = a;
    return true;
  }

  void DropActivation(size_t act_k) {
    if (act_k == SIZE_MAX) return;
    g_.values.erase(g_.nodes[act_k].outputs[0]);
    removed_.insert(act_k);
  }

  // int32 bias with scale x_scale * w_scale[c] from a DQ'd int32 or a float constant.
  bool BiasInt32(const std::string& name, const QParams& xq, const QParams& wq, int64_t channels,
                 std::vector<int32_t>* out, double alpha = 1.0, double beta = 1.0) {
    std::vector<double> real(size_t(channels), 0.0);
    QParams bq;
    std::vector<float> f;
    auto pit = producer_.find(name);
    const Value* v = g_.Find(name);
    if (v && v->is_constant() && v->dtype == DType::kFloat32) {
      ReadFloatsConst(v, &f);
      if (int64_t(f.size()) != channels && f.size() != 1) return false;
      for (int64_t c = 0; c < channels; ++c) real[c] = f[f.size() == 1 ? 0 : c];
    } else if (pit != producer_.end() && g_.nodes[pit->second].op_type == "DequantizeLinear") {
      const Node& dq = g_.nodes[pit->second];
      std::vector<int32_t> q;
      std::vector<float> s, zpf;
      if (!ReadIntsConst(g_.Find(dq.input(0)), &q) || !ReadFloatsConst(g_.Find(dq.input(1)), &s))
        return false;
      std::vector<int32_t> zp;
      if (!dq.input(2).empty() && !ReadIntsConst(g_.Find(dq.input(2)), &zp)) return false;
      if (int64_t(q.size()) != channels || (s.size() != 1 && int64_t(s.size()) != channels))
        return false;
      for (int64_t c = 0; c < channels; ++c) {
        int32_t z = zp.empty() ? 0 : zp[zp.size() == 1 ? 0 : c];
        real[c] = double(q[c] - z) * s[s.size() == 1 ? 0 : c];
      }
    } else {
      return false;
    }
    out->resize(size_t(channels));
    for (int64_t c = 0; c < channels; ++c) {
      double acc_scale = double(xq.scale_at(0)) * double(wq.scale_at(size_t(c))) * alpha;
      double q = std::nearbyint(real[c] * beta / acc_scale);
      if (q > 2147483647.0 || q < -2147483648.0) return false;
      (*out)[c] = int32_t(q);
    }
    return true;
  }

  // True when `name`, added to the [..., N] output `out`, is one value per column (or one
  // value) without broadcasting the output to another shape: a [N, 1] bias is per row.
  bool IsColumnBias(const std::string& name, int64_t n, const std::string& out) {
    const Value* v = g_.Find(name);
    const Value* o = g_.Find(out);
    if (!v || !o || !v->rank_known || !o->rank_known || v->shape.size() > o->shape.size())
      return false;
    for (size_t i = 0; i + 1 < v->shape.size(); ++i)
      if (v->shape[i] != 1) return false;
    return v->shape.empty() || v->shape.back() == n || v->shape.back() == 1;
  }

  std::string AddInt32(const std::string& base, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return g_.AddConstant(base, DType::kInt32, {int64_t(v.size())}, std::move(b));
  }

  void SetClamp(Node* n, int32_t lo, int32_t hi, DType t) {
    if (lo > QMin(t)) n->attrs.SetInt("_qmin", lo);
    if (hi < QMax(t)) n->attrs.SetInt("_qmax", hi);
  }

  // Selector: false with the reason in why_ when Conv k does not fold.
  bool SelectConv(size_t k, Group* c) {
    const Node& conv = g_.nodes[k];
    c->op_type = "QLinearConv";
    c->dqx = DqOf(conv.input(0), &c->xq, "input", /*a16=*/true);
    c->dqw = DqOf(conv.input(1), &c->wq, "weight");
    if (!c->dqx || !c->dqw) return false;
    const Value* w = g_.Find(c->dqw->input(0));
    if (!w || !w->is_constant() || w->shape.empty()) return Fail("weight is not a constant");
    c->channels = w->shape[0];
    const QParams& wq = c->wq;
    int waxis = wq.axis < 0 ? wq.axis + int(w->shape.size()) : wq.axis;
    if (!wq.per_tensor() && waxis != 0)
      return Fail("weight axis " + std::to_string(waxis) + " != 0");
    if (!wq.per_tensor() && int64_t(wq.scales.size()) != c->channels)
      return Fail("weight has " + std::to_string(wq.scales.size()) + " scales for " +
                  std::to_string(c->channels) + " output channels");
    c->weight_axis = 0;
    if (!c->xq.per_tensor() && !MoveInputScalesToWeights(conv, *w, c))
      return Fail("input is quantized per axis");
    return SelectConvOutput(k, c);
  }

  // Depthwise (each output channel reads its own input channel): per-channel
  // input scales multiply into the weight scales, leaving the input scale 1.
  // Needs one zero point for all channels.
  bool MoveInputScalesToWeights(const Node& conv, const Value& w, Group* c) {
    const int64_t group = conv.attrs.GetInt("group", 1);
    const Value* x = g_.Find(c->dqx->input(0));
    if (!x || !x->rank_known || w.shape.size() < 3 || w.shape[1] != 1 || group != c->channels)
      return false;
    const int axis = c->xq.axis < 0 ? c->xq.axis + int(x->shape.size()) : c->xq.axis;
    if (axis != 1 || int64_t(c->xq.scales.size()) != c->channels) return false;
    for (size_t i = 1; i < c->xq.zps.size(); ++i)
      if (c->xq.zps[i] != c->xq.zps[0]) return false;
    c->x_record = c->xq;
    c->x_per_channel = true;
    std::vector<float> ws(size_t(c->channels));
    for (int64_t m = 0; m < c->channels; ++m)
      ws[size_t(m)] = c->wq.scale_at(size_t(m)) * c->xq.scales[size_t(m)];
    c->wq.scales = ws;
    c->xq.scales = {1.f};
    if (!c->xq.zps.empty()) c->xq.zps = {c->xq.zps[0]};
    return true;
  }

  // ConvTranspose: W is [C, M/group, k...], so per-channel weights are on axis 1, which
  // is the output channel only with group 1.
  bool SelectConvTranspose(size_t k, Group* c) {
    const Node& ct = g_.nodes[k];
    c->op_type = "QfQLinearConvTranspose";
    // 16-bit activations where it becomes a 1x1 QLinearConv (LowerConvTranspose).
    const Value* xv = g_.Find(ct.input(0));
    const Value* wv = g_.Find(ct.input(1));
    auto wq_it = producer_.find(ct.input(1));
    const Value* wq_v =
        wq_it == producer_.end() ? nullptr : g_.Find(g_.nodes[wq_it->second].input(0));
    c->a16 = xv && xv->rank_known && wv && wv->rank_known && wq_v && wq_v->rank_known &&
             ConvTransposeIsConv1x1(ct.attrs, xv->shape, wq_v->shape);
    c->dqx = DqOf(ct.input(0), &c->xq, "input", c->a16);
    c->dqw = DqOf(ct.input(1), &c->wq, "weight");
    if (!c->dqx || !c->dqw) return false;
    if (!c->xq.per_tensor()) return Fail("input is quantized per axis");
    const Value* w = g_.Find(c->dqw->input(0));
    if (!w || !w->is_constant() || w->shape.size() < 3)
      return Fail("weight is not a constant of rank >= 3");
    const int64_t group = ct.attrs.GetInt("group", 1);
    if (group <= 0) return Fail("group <= 0");
    c->channels = w->shape[1] * group;
    const QParams& wq = c->wq;
    int waxis = wq.axis < 0 ? wq.axis + int(w->shape.size()) : wq.axis;
    if (!wq.per_tensor() && group != 1)
      return Fail("per-channel weights with group " + std::to_string(group) + " != 1");
    if (!wq.per_tensor() && waxis != 1)
      return Fail("weight axis " + std::to_string(waxis) + " != 1");
    if (!wq.per_tensor() && int64_t(wq.scales.size()) != c->channels)
      return Fail("weight has " + std::to_string(wq.scales.size()) + " scales for " +
                  std::to_string(c->channels) + " output channels");
    c->weight_axis = 1;
    return SelectConvOutput(k, c);
  }

  // The output Q (through Relu/Clip) and the int32 bias over the output channels.
  bool SelectConvOutput(size_t k, Group* c) {
    // 16-bit activations (a16w8) on QLinearConv only.
    const bool a16 = std::string(c->op_type) == "QLinearConv" || c->a16;
    if (!OutputQ(k, &c->qk, &c->yq, &c->act_k, &c->lo, &c->hi, a16)) return false;
    const std::string& bias = g_.nodes[k].input(2);
    if (!bias.empty() && !BiasInt32(bias, c->xq, c->wq, c->channels, &c->bias))
      return Fail(
          "bias is neither a float constant nor a dequantized int32 constant that fits "
          "int32 at the accumulator scale");
    return true;
  }

  // Action: the integer node in place of the float one.
  void EmitQLinearConv(size_t k, Group& c) {
    const Node& conv = g_.nodes[k];
    if (c.x_per_channel) {
      c.xq.scale = g_.AddConstant(conv.name + "_x_scale_moved", DType::kFloat32, {},
                                  FloatBytes(c.xq.scales));
      c.wq.scale = g_.AddConstant(conv.name + "_w_scale_times_x", DType::kFloat32,
                                  {int64_t(c.wq.scales.size())}, FloatBytes(c.wq.scales));
      if (!c.xq.zero_point.empty()) {
        const Value* zp = g_.Find(c.xq.zero_point);
        const size_t bytes = dtype_storage_bytes(zp->dtype, 1);
        std::vector<uint8_t> first(zp->data->begin(), zp->data->begin() + long(bytes));
        c.xq.zero_point =
            g_.AddConstant(conv.name + "_x_zero_point_moved", zp->dtype, {}, std::move(first));
      }
    }
    Node q;
    q.op_type = c.op_type;
    q.name = conv.name;
    q.attrs = conv.attrs;
    q.inputs = {c.dqx->input(0),
                c.xq.scale,
                ZeroPointName(c.xq, conv.name + "_x"),
                c.dqw->input(0),
                c.wq.scale,
                ZeroPointName(c.wq, conv.name + "_w"),
                c.yq.scale,
                ZeroPointName(c.yq, conv.name + "_y")};
    if (!c.bias.empty()) q.inputs.push_back(AddInt32(conv.name + "_bias_int32", c.bias));
    SetClamp(&q, c.lo, c.hi, c.yq.qtype);
    if (c.x_per_channel)
      SetQuant(c.dqx->input(0), c.x_record, 1);
    else
      SetQuant(c.dqx->input(0), c.xq, -1);
    SetQuant(c.dqw->input(0), c.wq, c.weight_axis);
    DropActivation(c.act_k);
    Replace(k, std::move(q), c.qk, c.yq);
  }

  // Float A times a constant weight stored as int4/uint4 (or blocked int8):
  // the weight stays packed and is dequantized block by block while running.
  bool SelectWeightOnlyMatMul(size_t k, Group* m) {
    const Node& mm = g_.nodes[k];
    auto it = producer_.find(mm.input(1));
    if (it == producer_.end() || removed_.count(it->second)) return false;
    const Node& dq = g_.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty()) return false;
    const Value* b = g_.Find(dq.input(0));
    const Value* s = g_.Find(dq.input(1));
    const Value* a = g_.Find(mm.input(0));
    if (!b || !s || !a || !b->is_constant() || !s->is_constant() || b->shape.size() != 2)
      return false;
    if (a->dtype != DType::kFloat32 || s->dtype != DType::kFloat32) return false;
    if (!dq.input(2).empty() && !g_.IsConstant(dq.input(2))) return false;
    const int64_t block = dq.attrs.GetInt("block_size", 0);
    const bool four_bit = b->dtype == DType::kInt4 || b->dtype == DType::kUInt4;
    if (!four_bit && !(Is8Bit(b->dtype) && block > 0)) return false;
    int64_t axis = dq.attrs.GetInt("axis", 1);
    if (axis < 0) axis += 2;
    int64_t scale_n = 1;
    for (int64_t d : s->shape) scale_n *= d;
    // Supported: per tensor, per column (axis 1, [N]) or blocks along K (axis 0).
    if (block > 0 ? axis != 0 : (scale_n != 1 && (axis != 1 || scale_n != b->shape[1])))
      return false;
    m->dqw = &dq;
    m->block = block;
    return true;
  }

  void EmitWeightOnlyMatMul(size_t k, Group& m) {
    const Node& mm = g_.nodes[k];
    const Node& dq = *m.dqw;
    Node q;
    q.op_type = "QfMatMulWeightQ";
    q.name = mm.name;
    q.inputs = {mm.input(0), dq.input(0), dq.input(1)};
    if (!dq.input(2).empty()) q.inputs.push_back(dq.input(2));
    if (m.block > 0) q.attrs.SetInt("block_size", m.block);
    q.outputs = mm.outputs;
    g_.nodes[k] = std::move(q);
    IndexNode(k);
  }

  // Gemm with float A and a 4-bit (or blocked 8-bit) constant B: the MatMul
  // form above, with transB applied to the packed weight at conversion and
  // beta * C added in float after it.
  bool SelectWeightOnlyGemm(size_t k, Group* m) {
    const Node& gm = g_.nodes[k];
    if (gm.attrs.GetInt("transA", 0) != 0 || gm.attrs.GetFloat("alpha", 1.f) != 1.f) return false;
    auto it = producer_.find(gm.input(1));
    if (it == producer_.end() || removed_.count(it->second)) return false;
    const Node& dq = g_.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty()) return false;
    const Value* b = g_.Find(dq.input(0));
    if (!b || !b->is_constant() || b->shape.size() != 2) return false;
    const bool four_bit = b->dtype == DType::kInt4 || b->dtype == DType::kUInt4;
    const int64_t block = dq.attrs.GetInt("block_size", 0);
    if (!four_bit && !(Is8Bit(b->dtype) && block > 0)) return false;
    if (!gm.input(2).empty()) {
      const Value* c = g_.Find(gm.input(2));
      if (!c || c->dtype != DType::kFloat32) return false;
      // beta * C is computed here, so C must be a constant.
      if (gm.attrs.GetFloat("beta", 1.f) != 1.f && !c->is_constant()) return false;
    }
    const Value* sv = g_.Find(dq.input(1));
    const Value* zv = dq.input(2).empty() ? nullptr : g_.Find(dq.input(2));
    Shape s_shape = sv->shape, w_shape = b->shape;
    int64_t axis = dq.attrs.GetInt("axis", 1);
    if (axis < 0) axis += 2;
    if (gm.attrs.GetInt("transB", 0) != 0) {
      // The action transposes [N, K] (blocks along K, axis 1) to [K, N]
      // (blocks along axis 0); 2-D scales and zero points with it.
      std::swap(w_shape[0], w_shape[1]);
      if (s_shape.size() == 2) {
        if (!sv->is_constant()) return false;
        std::swap(s_shape[0], s_shape[1]);
      }
      if (zv && zv->shape.size() == 2 && !zv->is_constant()) return false;
      axis = 1 - axis;
    }
    int64_t scale_n = 1;
    for (int64_t d : s_shape) scale_n *= d;
    if (block > 0 ? axis != 0 : (scale_n != 1 && (axis != 1 || scale_n != w_shape[1])))
      return false;
    m->dqw = &dq;
    m->block = block;
    return true;
  }

  void EmitWeightOnlyGemm(size_t k, Group& m) {
    Node& gm = g_.nodes[k];
    const Node& dq = *m.dqw;
    std::string w = dq.input(0), s = dq.input(1), zp = dq.input(2);
    if (gm.attrs.GetInt("transB", 0) != 0) {
      w = TransposeConstant(w);
      if (g_.Find(s)->shape.size() == 2) s = TransposeConstant(s);
      if (!zp.empty() && g_.Find(zp)->shape.size() == 2) zp = TransposeConstant(zp);
    }
    Node q;
    q.op_type = "QfMatMulWeightQ";
    q.name = gm.name;
    q.inputs = {gm.input(0), w, s};
    if (!zp.empty()) q.inputs.push_back(zp);
    if (m.block > 0) q.attrs.SetInt("block_size", m.block);
    const float beta = gm.attrs.GetFloat("beta", 1.f);
    if (gm.input(2).empty()) {
      q.outputs = gm.outputs;
      g_.nodes[k] = std::move(q);
    } else {
      std::string mm = g_.UniqueName(gm.outputs[0] + "_matmul");
      g_.values[mm].name = mm;
      q.outputs = {mm};
      std::string c = gm.input(2);
      if (beta != 1.f) {
        const Value* cv = g_.Find(c);
        std::vector<uint8_t> bytes = *cv->data;
        for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
          float f;
          std::memcpy(&f, &bytes[i], 4);
          f *= beta;
          std::memcpy(&bytes[i], &f, 4);
        }
        c = g_.AddConstant(c + "_beta", DType::kFloat32, cv->shape, std::move(bytes));
      }
      Node add;
      add.op_type = "Add";
      add.name = gm.name + "_bias";
      add.inputs = {mm, c};
      add.outputs = gm.outputs;
      g_.nodes[k] = std::move(q);
      // Emitted right after node k when the graph is rebuilt; nothing folds
      // through the float Add, so it needs no index entries before that.
      producer_.erase(add.outputs[0]);
      insert_after_[k].push_back(std::move(add));
    }
    IndexNode(k);
  }

  // A 2-D constant transposed (sub-byte types unpacked and repacked); "" when
  // the constant is not 2-D.
  std::string TransposeConstant(const std::string& name) {
    const Value* v = g_.Find(name);
    if (!v || !v->is_constant() || v->shape.size() != 2) return "";
    const int64_t rows = v->shape[0], cols = v->shape[1];
    const bool nibbles = v->dtype == DType::kInt4 || v->dtype == DType::kUInt4;
    const size_t es = nibbles ? 0 : dtype_size(v->dtype);
    std::vector<uint8_t> out(v->data->size(), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t from = size_t(r * cols + c), to = size_t(c * rows + r);
        if (nibbles) {
          uint8_t nib = ((*v->data)[from / 2] >> (4 * (from % 2))) & 0xf;
          out[to / 2] |= uint8_t(nib << (4 * (to % 2)));
        } else {
          std::memcpy(&out[to * es], &(*v->data)[from * es], es);
        }
      }
    return g_.AddConstant(name + "_t", v->dtype, {cols, rows}, std::move(out));
  }

  // MatMul whose B is a per-tensor activation or a constant weight quantized
  // per tensor or per column (axis 1 of a 2-D weight).
  bool SelectMatMul(size_t k, Group* m) {
    const Node& mm = g_.nodes[k];
    // A may be a 16-bit activation (a16w8), and so may B when it is one too
    // (attention); weights stay 8-bit.
    m->dqx = DqOf(mm.input(0), &m->xq, "input", /*a16=*/true);
    m->dqw = DqOf(mm.input(1), &m->wq, "input B", /*a16=*/true);
    if (!m->dqx || !m->dqw) return false;
    if (!m->xq.per_tensor()) return Fail("input A is quantized per axis");
    const Value* b = g_.Find(m->dqw->input(0));
    if (!b) return false;
    if (!m->wq.per_tensor()) {
      int axis = m->wq.axis < 0 ? m->wq.axis + int(b->shape.size()) : m->wq.axis;
      if (!b->is_constant() || b->shape.size() != 2)
        return Fail("per-axis B is not a 2-D constant weight");
      if (axis != 1) return Fail("weight axis " + std::to_string(axis) + " != 1");
    }
    // MatMul -> Add(bias) -> Q, as quantize_static leaves a MatMul with bias.
    std::vector<size_t> cs = Consumers(mm.outputs[0]);
    if (b->is_constant() && b->shape.size() == 2 && cs.size() == 1 &&
        !g_.IsGraphOutput(mm.outputs[0]) && g_.nodes[cs[0]].op_type == "Add") {
      const Node& add = g_.nodes[cs[0]];
      std::string other = add.input(0) == mm.outputs[0] ? add.input(1) : add.input(0);
      if (IsColumnBias(other, b->shape[1], mm.outputs[0]) &&
          BiasInt32(other, m->xq, m->wq, b->shape[1], &m->bias))
        m->add_k = cs[0];
    }
    const size_t out_k = m->add_k == SIZE_MAX ? k : m->add_k;
    return OutputQ(out_k, &m->qk, &m->yq, &m->act_k, &m->lo, &m->hi, /*a16=*/true);
  }

  void EmitMatMul(size_t k, Group& m) {
    const Node& mm = g_.nodes[k];
    Node q;
    q.op_type = "QLinearMatMul";
    q.name = mm.name;
    q.inputs = {m.dqx->input(0),
                m.xq.scale,
                ZeroPointName(m.xq, mm.name + "_a"),
                m.dqw->input(0),
                m.wq.scale,
                ZeroPointName(m.wq, mm.name + "_b"),
                m.yq.scale,
                ZeroPointName(m.yq, mm.name + "_y")};
    if (m.add_k != SIZE_MAX) q.inputs.push_back(AddInt32(mm.name + "_bias_int32", m.bias));
    SetClamp(&q, m.lo, m.hi, m.yq.qtype);
    SetQuant(m.dqx->input(0), m.xq, -1);
    SetQuant(m.dqw->input(0), m.wq, 1);
    DropActivation(m.act_k);
    if (m.add_k != SIZE_MAX) {
      g_.values.erase(g_.nodes[m.add_k].outputs[0]);
      removed_.insert(m.add_k);
    }
    Replace(k, std::move(q), m.qk, m.yq);
  }

  // Gemm becomes QLinearMatMul: transB is applied to the constant weight,
  // alpha goes into the weight scale and beta * C into the int32 bias.
  bool SelectGemm(size_t k, Group* m) {
    const Node& gm = g_.nodes[k];
    if (gm.attrs.GetInt("transA", 0) != 0) return Fail("transA=1");
    m->dqx = DqOf(gm.input(0), &m->xq, "input", /*a16=*/true);
    m->dqw = DqOf(gm.input(1), &m->wq, "input B");
    if (!m->dqx || !m->dqw) return false;
    if (!m->xq.per_tensor()) return Fail("input A is quantized per axis");
    const Value* b = g_.Find(m->dqw->input(0));
    if (!b || !b->is_constant() || b->shape.size() != 2)
      return Fail("B is not a 2-D constant weight");
    const bool trans_b = gm.attrs.GetInt("transB", 0) != 0;
    const int64_t n = trans_b ? b->shape[0] : b->shape[1];
    const QParams& bq = m->wq;
    int axis = bq.axis < 0 ? bq.axis + 2 : bq.axis;
    if (!bq.per_tensor() && axis != (trans_b ? 0 : 1))
      return Fail("weight axis " + std::to_string(axis) + " != " + (trans_b ? "0" : "1") +
                  " (transB=" + (trans_b ? "1" : "0") + ")");
    if (!bq.per_tensor() && int64_t(bq.scales.size()) != n)
      return Fail("weight has " + std::to_string(bq.scales.size()) + " scales for " +
                  std::to_string(n) + " columns");
    const double alpha = gm.attrs.GetFloat("alpha", 1.f), beta = gm.attrs.GetFloat("beta", 1.f);
    if (!(alpha > 0)) return Fail("alpha <= 0");
    if (!gm.input(2).empty() && !BiasInt32(gm.input(2), m->xq, bq, n, &m->bias, alpha, beta))
      return Fail("C is neither a float constant nor a dequantized int32 constant per column");
    return OutputQ(k, &m->qk, &m->yq, &m->act_k, &m->lo, &m->hi, /*a16=*/true);
  }

  // transB is applied to the constant weight, alpha goes into the weight scale.
  void EmitGemm(size_t k, Group& m) {
    const Node& gm = g_.nodes[k];
    const Value* b = g_.Find(m.dqw->input(0));
    const bool trans_b = gm.attrs.GetInt("transB", 0) != 0;
    const int64_t kdim = trans_b ? b->shape[1] : b->shape[0];
    const int64_t n = trans_b ? b->shape[0] : b->shape[1];
    const double alpha = gm.attrs.GetFloat("alpha", 1.f);
    QParams& bq = m.wq;
    std::string wname = m.dqw->input(0);
    if (trans_b) {
      std::vector<uint8_t> t(b->data->size());
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < kdim; ++c) t[size_t(c * n + r)] = (*b->data)[size_t(r * kdim + c)];
      wname = g_.AddConstant(wname + "_t", b->dtype, {kdim, n}, std::move(t));
    }
    std::string scale = bq.scale;
    if (alpha != 1.0) {
      std::vector<float> s = bq.scales;
      for (float& v : s) v = float(v * alpha);
      std::vector<uint8_t> sb(s.size() * 4);
      std::memcpy(sb.data(), s.data(), sb.size());
      scale = g_.AddConstant(gm.name + "_b_scale_alpha", DType::kFloat32, g_.Find(bq.scale)->shape,
                             std::move(sb));
      bq.scales = s;
    }
    Node q;
    q.op_type = "QLinearMatMul";
    q.name = gm.name;
    q.inputs = {m.dqx->input(0),
                m.xq.scale,
                ZeroPointName(m.xq, gm.name + "_a"),
                wname,
                scale,
                ZeroPointName(bq, gm.name + "_b"),
                m.yq.scale,
                ZeroPointName(m.yq, gm.name + "_y")};
    if (!m.bias.empty()) q.inputs.push_back(AddInt32(gm.name + "_bias_int32", m.bias));
    SetClamp(&q, m.lo, m.hi, m.yq.qtype);
    SetQuant(m.dqx->input(0), m.xq, -1);
    SetQuant(wname, bq, 1);
    DropActivation(m.act_k);
    Replace(k, std::move(q), m.qk, m.yq);
  }

  // Add/Mul of two per-tensor quantized inputs.
  bool SelectBinary(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    // 16-bit activations too (QLinearAdd/QLinearMul take int16/uint16 in qfold).
    m->dqx = DqOf(n.input(0), &m->xq, "input A", /*a16=*/true);
    m->dqw = DqOf(n.input(1), &m->wq, "input B", /*a16=*/true);
    if (!m->dqx || !m->dqw) return false;
    if (!m->xq.per_tensor() || !m->wq.per_tensor()) return Fail("an input is quantized per axis");
    // The output Q, possibly through a Relu/Clip (residual Add -> Relu).
    if (!OutputQ(k, &m->qk, &m->yq, &m->act_k, &m->lo, &m->hi, /*a16=*/true)) return false;
    // 8-bit operands may differ in signedness (the kernel flips them); 16-bit
    // ones must match.
    const bool all8 = Is8Bit(m->xq.qtype) && Is8Bit(m->wq.qtype) && Is8Bit(m->yq.qtype);
    if (!all8 && (m->xq.qtype != m->yq.qtype || m->wq.qtype != m->yq.qtype))
      return Fail("16-bit inputs and output differ in dtype");
    return true;
  }

  void EmitBinary(size_t k, Group& m) {
    const Node& n = g_.nodes[k];
    Node q;
    q.op_type = n.op_type == "Add" ? "QLinearAdd" : "QLinearMul";
    q.domain = "com.microsoft";
    q.name = n.name;
    q.inputs = {m.dqx->input(0),
                m.xq.scale,
                ZeroPointName(m.xq, n.name + "_a"),
                m.dqw->input(0),
                m.wq.scale,
                ZeroPointName(m.wq, n.name + "_b"),
                m.yq.scale,
                ZeroPointName(m.yq, n.name + "_y")};
    SetClamp(&q, m.lo, m.hi, m.yq.qtype);
    DropActivation(m.act_k);
    Replace(k, std::move(q), m.qk, m.yq);
  }

  bool SelectPool(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    // The global pool also averages 16-bit codes (a16 models' classifier heads).
    const bool a16 = n.op_type == "GlobalAveragePool";
    m->dqx = DqOf(n.input(0), &m->xq, "input", a16);
    if (!m->dqx) return false;
    if (!m->xq.per_tensor()) return Fail("input is quantized per axis");
    if (!SoleQConsumer(n.outputs[0], &m->qk, &m->yq, a16)) return false;
    if (m->xq.qtype != m->yq.qtype) return Fail("input and output differ in signedness");
    return true;
  }

  void EmitPool(size_t k, Group& m) {
    const Node& n = g_.nodes[k];
    Node q;
    q.op_type =
        n.op_type == "GlobalAveragePool" ? "QLinearGlobalAveragePool" : "QLinearAveragePool";
    q.domain = "com.microsoft";
    q.name = n.name;
    q.attrs = n.attrs;
    q.inputs = {m.dqx->input(0), m.xq.scale, ZeroPointName(m.xq, n.name + "_x"), m.yq.scale,
                ZeroPointName(m.yq, n.name + "_y")};
    Replace(k, std::move(q), m.qk, m.yq);
  }

  // DQ -> LRN -> Q, or DQ -> LRN -> MaxPool -> Q (AlexNet, ZFNet: the
  // quantizer leaves both float): QfQLinearLRN, then the MaxPool on its
  // codes. Quantization is monotone, so the max of the quantized values is
  // the quantized max, exactly (NaN aside: it quantizes to the zero point).
  bool SelectLrn(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    m->dqx = DqOf(n.input(0), &m->xq);
    if (!m->dqx) return false;
    if (!m->xq.per_tensor()) return Fail("input is quantized per axis");
    const std::string& out = n.outputs[0];
    if (SoleQConsumer(out, &m->qk, &m->yq)) return true;
    std::vector<size_t> cs = Consumers(out);
    if (g_.IsGraphOutput(out) || cs.size() != 1) return false;
    const Node& pool = g_.nodes[cs[0]];
    if (pool.op_type != "MaxPool" || !pool.domain.empty() ||
        (pool.outputs.size() > 1 && !pool.outputs[1].empty()))
      return false;
    why_.clear();  // the MaxPool's output decides now
    if (!SoleQConsumer(pool.outputs[0], &m->qk, &m->yq)) return false;
    m->act_k = cs[0];
    return true;
  }

  void EmitLrn(size_t k, Group& m) {
    const Node& n = g_.nodes[k];
    Node q;
    q.op_type = "QfQLinearLRN";
    q.name = n.name;
    q.attrs = n.attrs;
    q.inputs = {m.dqx->input(0), m.xq.scale, ZeroPointName(m.xq, n.name + "_x"), m.yq.scale,
                ZeroPointName(m.yq, n.name + "_y")};
    if (m.act_k == SIZE_MAX) {
      Replace(k, std::move(q), m.qk, m.yq);
      return;
    }
    // The MaxPool moves the codes: it reads the new op's output and writes the Q's.
    Node& pool = g_.nodes[m.act_k];
    const std::string mid = g_.UniqueName(n.outputs[0] + "_q");
    g_.values[mid].name = mid;
    g_.values.erase(n.outputs[0]);
    g_.values.erase(pool.outputs[0]);
    q.outputs = {mid};
    pool.inputs[0] = mid;
    pool.outputs.resize(1);
    pool.outputs[0] = g_.nodes[m.qk].outputs[0];
    removed_.insert(m.qk);
    g_.nodes[k] = std::move(q);
    SetQuant(mid, m.yq, -1);
    SetQuant(pool.outputs[0], m.yq, -1);
    IndexNode(k);
    IndexNode(m.act_k);
  }

  bool SelectConcat(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    if (!SoleQConsumer(n.outputs[0], &m->qk, &m->yq, /*a16=*/true)) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      QParams xq;
      const Node* dq = DqOf(n.inputs[i], &xq, "input " + std::to_string(i), /*a16=*/true);
      if (!dq) return false;
      if (!xq.per_tensor()) return Fail("input " + std::to_string(i) + " is quantized per axis");
      if (xq.qtype != m->yq.qtype) return Fail("inputs and output differ in signedness");
      m->inputs.emplace_back(dq, xq);
    }
    return true;
  }

  void EmitConcat(size_t k, Group& m) {
    if (Is16Bit(m.yq.qtype)) return EmitConcat16(k, m);
    const Node& n = g_.nodes[k];
    Node q;
    q.op_type = "QLinearConcat";
    q.domain = "com.microsoft";
    q.name = n.name;
    q.attrs = n.attrs;
    q.inputs = {m.yq.scale, ZeroPointName(m.yq, n.name + "_y")};
    for (size_t i = 0; i < m.inputs.size(); ++i) {
      const auto& [dq, xq] = m.inputs[i];
      q.inputs.push_back(dq->input(0));
      q.inputs.push_back(xq.scale);
      q.inputs.push_back(ZeroPointName(xq, n.name + "_x" + std::to_string(i)));
    }
    Replace(k, std::move(q), m.qk, m.yq);
  }

  // 16-bit codes (QLinearConcat's tables are 8-bit): inputs quantized unlike
  // the output are requantized first, then a plain Concat joins the integers.
  void EmitConcat16(size_t k, Group& m) {
    Node cat = g_.nodes[k];
    std::vector<Node> requantized;
    for (size_t i = 0; i < m.inputs.size(); ++i) {
      const auto& [dq, xq] = m.inputs[i];
      cat.inputs[i] = dq->input(0);
      if (SameParams(xq, m.yq)) continue;
      const std::string mid = g_.UniqueName(cat.name + "_in" + std::to_string(i) + "_q");
      g_.values[mid].name = mid;
      Node req = Requantize(cat.name + "_requantize" + std::to_string(i), dq->input(0), xq, m.yq);
      req.outputs = {mid};
      cat.inputs[i] = mid;
      SetQuant(mid, m.yq, -1);
      requantized.push_back(std::move(req));
    }
    Replace(k, std::move(cat), m.qk, m.yq);
    // The requantizations must run before the Concat: they go in front of it.
    for (Node& r : requantized) insert_before_[k].push_back(std::move(r));
  }

  // Split of a DQ'd tensor whose every output is quantized with the DQ's own
  // parameters: split the integers.
  bool SelectSplit(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    m->dqx = DqOf(n.input(0), &m->xq);
    if (!m->dqx) return false;
    if (!m->xq.per_tensor()) return Fail("input is quantized per axis");
    for (const std::string& out : n.outputs) {
      QParams yq;
      size_t qk;
      if (out.empty()) return Fail("an output is unnamed");
      if (!SoleQConsumer(out, &qk, &yq)) return false;
      if (!SameParams(m->xq, yq)) return Fail("output '" + out + "' is quantized unlike the input");
      m->output_qs.push_back(qk);
    }
    return true;
  }

  void EmitSplit(size_t k, Group& m) {
    Node moved = g_.nodes[k];
    moved.inputs[0] = m.dqx->input(0);
    for (size_t i = 0; i < m.output_qs.size(); ++i) {
      g_.values.erase(moved.outputs[i]);
      moved.outputs[i] = g_.nodes[m.output_qs[i]].outputs[0];
      removed_.insert(m.output_qs[i]);
      SetQuant(moved.outputs[i], m.xq, -1);
    }
    g_.nodes[k] = std::move(moved);
    IndexNode(k);
  }

  static bool SameParams(const QParams& a, const QParams& b) {
    return a.qtype == b.qtype && a.per_tensor() && b.per_tensor() && a.scales[0] == b.scales[0] &&
           a.zp(0) == b.zp(0);
  }

  // y_q -> (x_scale, x_zp) to (y_scale, y_zp); no node when they are equal.
  Node Requantize(const std::string& name, const std::string& in, const QParams& from,
                  const QParams& to) {
    Node r;
    r.op_type = "QfRequantize";
    r.name = name;
    r.inputs = {in, from.scale, ZeroPointName(from, name + "_x"), to.scale,
                ZeroPointName(to, name + "_y")};
    return r;
  }

  // Data-movement ops run on the integers; a different output scale adds a requantize.
  bool SelectLayout(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    if (n.outputs.size() != 1) return Fail("more than one output");
    if (n.op_type == "Resize" && n.attrs.GetString("mode", "nearest") != "nearest")
      return Fail("Resize mode is not nearest");
    // 16-bit codes move like 8-bit ones: every op with this trait takes
    // 16-bit integers, and QfRequantize maps 16-bit scales.
    m->dqx = DqOf(n.input(0), &m->xq, "input", /*a16=*/true);
    if (!m->dqx) return false;
    if (!m->xq.per_tensor()) return Fail("input is quantized per axis");
    if (!SoleQConsumer(n.outputs[0], &m->qk, &m->yq, /*a16=*/true)) return false;
    if (!SameParams(m->xq, m->yq) && m->xq.qtype != m->yq.qtype)
      return Fail("input and output differ in type");
    return true;
  }

  void EmitLayout(size_t k, Group& m) {
    const Node& n = g_.nodes[k];
    Node moved = n;
    moved.inputs[0] = m.dqx->input(0);
    if (SameParams(m.xq, m.yq)) {
      Replace(k, std::move(moved), m.qk, m.yq);
      return;
    }
    // op on x_q into a fresh value, then requantize into the Q's output.
    std::string mid = g_.UniqueName(n.outputs[0] + "_q");
    moved.outputs = {mid};
    g_.values[mid].name = mid;
    Node req = Requantize(n.name + "_requantize", mid, m.xq, m.yq);
    req.outputs = {g_.nodes[m.qk].outputs[0]};
    g_.values.erase(n.outputs[0]);
    g_.nodes[k] = std::move(moved);
    g_.nodes[m.qk] = std::move(req);  // keeps order: qk comes after k
    SetQuant(mid, m.xq, -1);
    SetQuant(g_.nodes[m.qk].outputs[0], m.yq, -1);
    IndexNode(k);
    IndexNode(m.qk);
  }

  // Unary float op between per-tensor 8-bit DQ and Q: precompute all 256
  // outputs with the op's own kernel and run a table lookup.
  bool SelectLookupTable(size_t k, Group* m) {
    const Node& n = g_.nodes[k];
    if (n.outputs.size() != 1) return Fail("more than one output");
    QParams& xq = m->xq;
    const QParams& yq = m->yq;
    m->dqx = DqOf(n.input(0), &xq);
    if (!m->dqx) return false;
    if (!xq.per_tensor()) return Fail("input is quantized per axis");
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (!n.inputs[i].empty() && !g_.IsConstant(n.inputs[i]))
        return Fail("input " + std::to_string(i) + " is not a constant");
    if (!SoleQConsumer(n.outputs[0], &m->qk, &m->yq)) return false;
    const OpDef* def = FindOp(n.op_type);
    if (!def) return Fail("no kernel to tabulate");

    std::vector<float> xs(256), ys(256);
    for (int b = 0; b < 256; ++b) {
      int32_t v = xq.qtype == DType::kInt8 ? int32_t(int8_t(uint8_t(b))) : b;
      xs[b] = float(v - xq.zp(0)) * xq.scales[0];
    }
    std::vector<Tensor> ins(n.inputs.size());
    Tensor out;
    KernelContext ctx;
    ctx.kernels = &kernels::ReferenceKernelConfig();  // results must not depend on the machine
    ctx.op_type = &n.op_type;
    ctx.op_name = &n.name;
    ctx.attrs = &n.attrs;
    ins[0].dtype = DType::kFloat32;
    ins[0].shape = {256};
    ins[0].data = xs.data();
    ctx.inputs.push_back(&ins[0]);
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      const Value* c = g_.Find(n.inputs[i]);
      ins[i].dtype = c->dtype;
      ins[i].shape = c->shape;
      ins[i].data = const_cast<uint8_t*>(c->data->data());
      ctx.inputs.push_back(&ins[i]);
    }
    ctx.outputs.push_back(&out);
    if (!def->infer(ctx).ok() || out.dtype != DType::kFloat32 || out.numel() != 256)
      return Fail("constant inputs broadcast the output beyond the 256 codes");
    out.data = ys.data();
    if (!def->run(ctx).ok()) return Fail("tabulating the op failed");
    m->table.resize(256);
    for (int b = 0; b < 256; ++b) {
      double q = std::nearbyint(double(ys[b]) / yq.scales[0]) + yq.zp(0);
      q = std::max<double>(QMin(yq.qtype), std::min<double>(QMax(yq.qtype), q));
      m->table[b] = uint8_t(int32_t(q));
    }
    return true;
  }

  void EmitLookupTable(size_t k, Group& m) {
    const Node& n = g_.nodes[k];
    Node lut;
    lut.op_type = "QfLookupTable";
    lut.name = n.name;
    lut.inputs = {m.dqx->input(0),
                  g_.AddConstant(n.name + "_table", m.yq.qtype, {256}, std::move(m.table))};
    Replace(k, std::move(lut), m.qk, m.yq);
  }

  // DQ -> Q with nothing between: the same parameters cancel; others requantize.
  void TryRequantize(size_t k) {
    const Node& qn = g_.nodes[k];
    QParams xq, yq;
    const Node* dq = DqOf(qn.input(0), &xq);
    if (!dq || !xq.per_tensor() || !ReadQParams(qn, &yq).empty() || !yq.per_tensor()) return;
    if (SameParams(xq, yq)) {
      // Readers of the Q output read the DQ input instead (unless it is a graph output).
      if (g_.IsGraphOutput(qn.outputs[0])) return;
      const std::string from = qn.outputs[0], to = dq->input(0);
      for (size_t c : Consumers(from)) {
        for (std::string& s : g_.nodes[c].inputs)
          if (s == from) s = to;
        consumers_[to].push_back(c);
      }
      g_.values.erase(from);
      removed_.insert(k);
      return;
    }
    Node req = Requantize(qn.name, dq->input(0), xq, yq);
    req.outputs = qn.outputs;
    g_.nodes[k] = std::move(req);
    SetQuant(g_.nodes[k].outputs[0], yq, -1);
    IndexNode(k);
  }

  Graph& g_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::set<size_t> removed_;
  // Nodes a rewrite adds after node k (a float bias Add); placed when the graph is rebuilt.
  std::map<size_t, std::vector<Node>> insert_after_;
  // Nodes a rewrite adds before node k (requantized Concat inputs).
  std::map<size_t, std::vector<Node>> insert_before_;
  std::string why_;  // the first reason a selector for the current node gave up
};

}  // namespace

Status FoldQdq(Graph* g) {
  return QdqFolder(g).Run();
}

}  // namespace conv
}  // namespace qfold
