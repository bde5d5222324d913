// QDQ validity (parameters of every QuantizeLinear/DequantizeLinear, Q->DQ
// pairs, bias scales) and quantization coverage (which Conv/MatMul/Gemm are
// per-channel, per-tensor or float, and which of them the converter folds
// into integer kernels).
#include <cmath>
#include <map>
#include <set>

#include "converter/check/internal.h"
#include "converter/converter.h"
#include "converter/onnx_dtype.h"
#include "core/op.h"

namespace qfold {
namespace check {

namespace {

using conv::Node;
using conv::Value;

bool QRange(DType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case DType::kInt8:
      *lo = -128, *hi = 127;
      return true;
    case DType::kUInt8:
      *lo = 0, *hi = 255;
      return true;
    case DType::kInt16:
      *lo = -32768, *hi = 32767;
      return true;
    case DType::kUInt16:
      *lo = 0, *hi = 65535;
      return true;
    case DType::kInt4:
      *lo = -8, *hi = 7;
      return true;
    case DType::kUInt4:
      *lo = 0, *hi = 15;
      return true;
    case DType::kInt32:
      *lo = INT32_MIN, *hi = INT32_MAX;
      return true;
    default:
      return false;
  }
}

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ValuesText(const std::vector<double>& v) {
  if (v.size() == 1) return FloatText(v[0]);
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + FloatText(v[i]);
  return s + (v.size() > 4 ? ", ...]" : "]");
}

bool IsQ(const Node& n) {
  return n.domain.empty() && n.op_type == "QuantizeLinear";
}
bool IsDQ(const Node& n) {
  return n.domain.empty() && n.op_type == "DequantizeLinear";
}

// A float matrix product of the ONNX domain (Conv, ConvTranspose, MatMul,
// Gemm): what QDQ models quantize through DequantizeLinear on its inputs.
// Null otherwise; its OpDef names the weight and bias slots.
const OpDef* FloatMatrixProduct(const Node& n) {
  const OpDef* def = n.domain.empty() ? FindOp(n.op_type) : nullptr;
  return def && (def->traits & (kTraitMatrixProduct | kTraitIntegerKernel)) == kTraitMatrixProduct
             ? def
             : nullptr;
}

class QdqChecker {
 public:
  explicit QdqChecker(Analysis* a) : a_(*a), g_(a->g) {
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& i : g_.nodes[k].inputs)
        if (!i.empty()) consumers_[i].push_back(k);
  }

  void Run() {
    for (const Node& n : g_.nodes) {
      if (IsQ(n) || IsDQ(n)) CheckParams(n);
      if (IsQ(n)) CheckPairs(n);
      const OpDef* def = FloatMatrixProduct(n);
      if (def && def->bias_input >= 0) CheckBias(n, *def);
    }
  }

 private:
  const Node* DqProducer(const std::string& value) const {
    auto it = a_.producer.find(value);
    if (it == a_.producer.end()) return nullptr;
    const Node& n = g_.nodes[it->second];
    return IsDQ(n) ? &n : nullptr;
  }

  void CheckParams(const Node& n) {
    const Value* x = g_.Find(n.input(0));
    const Value* s = n.input(1).empty() ? nullptr : g_.Find(n.input(1));
    const Value* z = n.input(2).empty() ? nullptr : g_.Find(n.input(2));
    const std::string label = n.Label();
    DType qtype = DType::kUInt8;
    if (IsQ(n)) {
      const int64_t od = n.attrs.GetInt("output_dtype", 0);
      const DType odt = od ? conv::DTypeFromOnnx(int(od)) : DType::kUndefined;
      int64_t lo, hi;
      if (od && !QRange(odt, &lo, &hi)) {
        a_.Add(Severity::kError, "qdq_output_dtype", &n, n.outputs[0],
               label + ": output_dtype " + conv::OnnxTypeName(int(od)) + " (" + std::to_string(od) +
                   ") is not an integer type QuantizeLinear can produce");
      } else if (od && z && z->dtype != odt) {
        a_.Add(Severity::kError, "qdq_output_dtype", &n, n.input(2),
               label + ": output_dtype is " + dtype_name(odt) + " (" + std::to_string(od) +
                   ") but zero point " + Quote(n.input(2)) + " is " + dtype_name(z->dtype) +
                   "; ONNX requires them to agree",
               std::string("set output_dtype to ") + dtype_name(z->dtype) + " (" +
                   std::to_string(conv::OnnxFromDType(z->dtype)) + ") or store " +
                   Quote(n.input(2)) + " as " + dtype_name(odt));
      }
      qtype = z ? z->dtype : od ? odt : DType::kUInt8;
    } else {
      qtype = x ? x->dtype : DType::kUndefined;
      if (z && x && z->dtype != x->dtype && !a_.guessed.count(n.input(0)))
        a_.Add(Severity::kError, "qdq_zero_point", &n, n.input(2),
               label + ": zero point " + Quote(n.input(2)) + " is " + dtype_name(z->dtype) +
                   " but the quantized input " + Quote(n.input(0)) + " is " + dtype_name(x->dtype),
               std::string("store the zero point as ") + dtype_name(x->dtype));
    }
    if (!s) return;
    if (!dtype_is_float(s->dtype)) {
      a_.Add(Severity::kError, "qdq_scale", &n, n.input(1),
             label + ": scale " + Quote(n.input(1)) + " is " + dtype_name(s->dtype) +
                 ", scales must be float");
      return;
    }
    CheckGranularity(n, x, s, z);
    std::vector<double> sv;
    if (ConstFloats(s, &sv)) {
      std::string bad;
      int count = 0;
      for (size_t i = 0; i < sv.size(); ++i)
        if (!(sv[i] > 0) || !std::isfinite(sv[i])) {
          if (++count <= 3)
            bad += std::string(bad.empty() ? "" : ", ") +
                   (sv.size() > 1 ? "[" + std::to_string(i) + "] = " : "") + FloatText(sv[i]);
        }
      if (count)
        a_.Add(Severity::kError, "qdq_scale", &n, n.input(1),
               label + ": scale " + Quote(n.input(1)) + " has " + std::to_string(count) +
                   " non-positive or non-finite value(s): " + bad + (count > 3 ? ", ..." : ""),
               "scales must be positive and finite; recalibrate (a zero scale usually means a "
               "constant or dead tensor)");
    }
    std::vector<int64_t> zv;
    int64_t lo, hi;
    if (z && ConstInts(z, &zv) && QRange(qtype, &lo, &hi)) {
      for (size_t i = 0; i < zv.size(); ++i) {
        if (qtype == DType::kInt32 && zv[i] != 0) {
          a_.Add(Severity::kError, "qdq_zero_point", &n, n.input(2),
                 label + ": int32 zero point " + Quote(n.input(2)) +
                     (zv.size() > 1 ? "[" + std::to_string(i) + "]" : "") + " is " +
                     std::to_string(zv[i]) + "; int32 (bias) quantization has zero point 0",
                 "set the zero point to 0");
          break;
        }
        if (zv[i] < lo || zv[i] > hi) {
          a_.Add(Severity::kError, "qdq_zero_point", &n, n.input(2),
                 label + ": zero point " + Quote(n.input(2)) +
                     (zv.size() > 1 ? "[" + std::to_string(i) + "]" : "") + " is " +
                     std::to_string(zv[i]) + ", outside the " + dtype_name(qtype) + " range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
          break;
        }
      }
    }
  }

  void CheckGranularity(const Node& n, const Value* x, const Value* s, const Value* z) {
    const std::string label = n.Label();
    if (z && z->rank_known && s->rank_known && z->shape != s->shape &&
        !(Numel(z->shape) == 1 && Numel(s->shape) == 1))
      a_.Add(Severity::kError, "qdq_zero_point", &n, n.input(2),
             label + ": zero point " + Quote(n.input(2)) + " has shape " + DimsText(z->shape) +
                 " but scale " + Quote(n.input(1)) + " has shape " + DimsText(s->shape) +
                 "; they must be equal");
    if (!x || !x->rank_known || !s->rank_known) return;
    const int rank = int(x->shape.size());
    const int64_t block = n.attrs.GetInt("block_size", 0);
    int64_t axis = n.attrs.GetInt("axis", 1);
    const bool per_tensor = block == 0 && s->shape.size() <= 1 && Numel(s->shape) == 1;
    if (per_tensor) return;
    if (axis < -rank || axis >= rank) {
      a_.Add(Severity::kError, "qdq_scale", &n, n.input(1),
             label + ": axis " + std::to_string(axis) + " is out of range for input " +
                 Quote(n.input(0)) + " " + a_.ShapeText(n.input(0)) + " (rank " +
                 std::to_string(rank) + "), scale " + Quote(n.input(1)) + " " + DimsText(s->shape));
      return;
    }
    if (axis < 0) axis += rank;
    if (block > 0) {
      Shape want = x->shape;
      if (want[size_t(axis)] >= 0) want[size_t(axis)] = (want[size_t(axis)] + block - 1) / block;
      bool bad = s->shape.size() != want.size();
      for (size_t i = 0; !bad && i < want.size(); ++i) bad = want[i] >= 0 && s->shape[i] != want[i];
      if (bad)
        a_.Add(Severity::kError, "qdq_scale", &n, n.input(1),
               label + ": scale " + Quote(n.input(1)) + " has shape " + DimsText(s->shape) +
                   ", but block_size " + std::to_string(block) + " along axis " +
                   std::to_string(axis) + " of " + Quote(n.input(0)) + " " +
                   a_.ShapeText(n.input(0)) + " needs " + DimsText(want));
      return;
    }
    const int64_t d = x->shape[size_t(axis)];
    if (s->shape.size() != 1 || (d >= 0 && s->shape[0] != d))
      a_.Add(Severity::kError, "qdq_scale", &n, n.input(1),
             label + ": scale " + Quote(n.input(1)) + " has shape " + DimsText(s->shape) +
                 " but axis " + std::to_string(axis) + " of " + Quote(n.input(0)) + " " +
                 a_.ShapeText(n.input(0)) + " has " + std::to_string(d) +
                 (s->shape.size() != 1 ? "; a per-axis scale must be 1-D" : ""),
             "per-axis scales need one value per slice along 'axis' (per-channel weights of a "
             "Conv use axis 0)");
  }

  void CheckPairs(const Node& q) {
    auto it = consumers_.find(q.outputs.empty() ? "" : q.outputs[0]);
    if (it == consumers_.end()) return;
    std::vector<double> qs, ds;
    std::vector<int64_t> qz, dz;
    if (!ConstFloats(g_.Find(q.input(1)), &qs)) return;
    if (!q.input(2).empty() && !ConstInts(g_.Find(q.input(2)), &qz)) return;
    if (qz.empty()) qz.assign(qs.size(), 0);
    for (size_t k : it->second) {
      const Node& dq = g_.nodes[k];
      if (!IsDQ(dq) || dq.input(0) != q.outputs[0]) continue;
      if (!ConstFloats(g_.Find(dq.input(1)), &ds)) continue;
      if (!dq.input(2).empty() && !ConstInts(g_.Find(dq.input(2)), &dz)) continue;
      if (dq.input(2).empty()) dz.assign(ds.size(), 0);
      bool differ = qs.size() != ds.size() || qz.size() != dz.size() ||
                    (qs.size() > 1 && q.attrs.GetInt("axis", 1) != dq.attrs.GetInt("axis", 1));
      for (size_t i = 0; !differ && i < qs.size(); ++i)
        differ = std::fabs(qs[i] - ds[i]) > 1e-6 * std::fabs(qs[i]) || qz[i] != dz[i];
      if (!differ) continue;
      std::vector<double> qzd(qz.begin(), qz.end()), dzd(dz.begin(), dz.end());
      a_.Add(Severity::kWarning, "qdq_pair_mismatch", &dq, q.outputs[0],
             q.Label() + " writes " + Quote(q.outputs[0]) + " with scale " + ValuesText(qs) +
                 " and zero point " + ValuesText(qzd) + ", but " + dq.Label() +
                 " reads it with scale " + ValuesText(ds) + " and zero point " + ValuesText(dzd),
             "a DequantizeLinear should invert the QuantizeLinear before it: use the same "
             "scale and zero point");
    }
  }

  // The integer kernels add the bias at input scale x weight scale (per output channel).
  void CheckBias(const Node& n, const OpDef& def) {
    const Node* db = DqProducer(n.input(size_t(def.bias_input)));
    const Node* dx = DqProducer(n.input(0));
    const Node* dw = DqProducer(n.input(size_t(def.weight_input)));
    if (!db || !dx || !dw) return;
    const Value* bq = g_.Find(db->input(0));
    if (!bq || bq->dtype != DType::kInt32) return;
    std::vector<double> xs, ws, bs;
    if (!ConstFloats(g_.Find(dx->input(1)), &xs) || xs.size() != 1 ||
        !ConstFloats(g_.Find(dw->input(1)), &ws) || ws.empty() ||
        !ConstFloats(g_.Find(db->input(1)), &bs) || bs.empty())
      return;
    const double alpha = n.op_type == "Gemm" ? n.attrs.GetFloat("alpha", 1.f) : 1.0;
    const size_t channels = std::max(ws.size(), bs.size());
    size_t bad = 0, first = 0;
    for (size_t c = 0; c < channels; ++c) {
      double want = xs[0] * ws[ws.size() == 1 ? 0 : c % ws.size()] * alpha;
      double got = bs[bs.size() == 1 ? 0 : c % bs.size()];
      if (std::fabs(got - want) > 1e-3 * std::fabs(want)) {
        if (!bad) first = c;
        ++bad;
      }
    }
    if (!bad) return;
    const double w = ws[ws.size() == 1 ? 0 : first % ws.size()];
    const double b = bs[bs.size() == 1 ? 0 : first % bs.size()];
    a_.Add(Severity::kWarning, "bias_scale", &n, db->input(0),
           n.Label() + ": bias " + Quote(db->input(0)) + " is dequantized with scale " +
               FloatText(b) + (channels > 1 ? " (channel " + std::to_string(first) + ")" : "") +
               ", but input scale " + FloatText(xs[0]) + " x weight scale " + FloatText(w) +
               (alpha != 1.0 ? " x alpha " + FloatText(alpha) : "") + " = " +
               FloatText(xs[0] * w * alpha) + " (" + std::to_string(bad) + " of " +
               std::to_string(channels) +
               " channel(s) differ); the integer kernel adds the bias "
               "at the accumulator scale, so it is requantized and rounded",
           "quantize the bias with scale = input scale x weight scale and zero point 0");
  }

  Analysis& a_;
  conv::Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
};

}  // namespace

void CheckQdq(Analysis* a) {
  QdqChecker(a).Run();
}

void CheckCoverage(Analysis* a, const std::string& onnx_path) {
  conv::Graph& g = a->g;
  std::map<std::string, std::vector<size_t>> consumers;
  bool any_qdq = false;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const std::string& i : g.nodes[k].inputs)
      if (!i.empty()) consumers[i].push_back(k);
    any_qdq = any_qdq || IsQ(g.nodes[k]) || IsDQ(g.nodes[k]);
  }
  auto dq_of = [&](const std::string& v) -> const Node* {
    auto it = a->producer.find(v);
    return it != a->producer.end() && IsDQ(g.nodes[it->second]) ? &g.nodes[it->second] : nullptr;
  };
  auto granularity = [&](const Node& dq) -> std::string {
    if (dq.attrs.GetInt("block_size", 0) > 0) return "blocked";
    const Value* s = g.Find(dq.input(1));
    return s && s->rank_known && Numel(s->shape) > 1 ? "per-channel" : "per-tensor";
  };
  // Which nodes the converter turns into integer kernels.
  std::set<std::string> folded;
  std::map<std::string, std::string> reasons;  // node -> why FoldQdq left it float
  bool fold_known = false;
  if (any_qdq && !onnx_path.empty()) {
    conv::Graph og;
    conv::ConvertOptions copts;
    copts.consts = a->opts->consts;  // a model with an If converts only with them
    Status st = conv::LoadAndOptimize(onnx_path, copts, &og);
    if (st.ok()) {
      fold_known = true;
      for (const Node& n : og.nodes) {
        if (HasTraits(n.op_type, kTraitMatrixProduct | kTraitIntegerKernel)) folded.insert(n.name);
        if (!n.float_reason.empty()) reasons[n.name] = n.float_reason;
      }
    } else if (a->report->count(Severity::kError) == 0) {
      a->Add(Severity::kInfo, "quant_coverage", nullptr, "",
             "folding analysis skipped: the converter fails: " + st.message());
    }
  }
  std::map<std::string, std::vector<std::pair<const Node*, std::string>>> by_weight;
  for (const Node& n : g.nodes) {
    const OpDef* def = FloatMatrixProduct(n);
    if (!def) continue;
    const std::string& t = n.op_type;
    const std::string& weight = n.input(size_t(def->weight_input));
    QuantOp q;
    q.node = n.name;
    q.op_type = t;
    const Node* dw = dq_of(weight);
    if (dw) {
      q.weight = dw->input(0);
      q.granularity = granularity(*dw);
      by_weight[q.weight].push_back({dw, q.granularity});
    } else {
      q.weight = g.IsConstant(weight) ? weight : "";
      q.granularity = "float";
    }
    q.folded = folded.count(n.name) > 0;
    a->report->quant_ops.push_back(q);
    if (!fold_known || q.granularity == "float" || q.folded) continue;
    const std::string& out = n.outputs[0];
    std::string why, fix;
    if (t == "ConvTranspose" && n.attrs.GetInt("group", 1) != 1 && q.granularity == "per-channel") {
      why =
          "the integer ConvTranspose kernel takes per-channel weights only with group 1, so it "
          "runs in float between DequantizeLinear and QuantizeLinear";
      fix = "quantize its weight per tensor";
    } else if (g.IsGraphOutput(out)) {
      why = "its output " + Quote(out) +
            " is also a graph output, so the QuantizeLinear after it "
            "cannot be folded into it";
      fix = "drop " + Quote(out) +
            " from the graph outputs, or output the value after its "
            "QuantizeLinear/DequantizeLinear";
    } else if (!dq_of(n.input(0))) {
      why = "its input " + Quote(n.input(0)) + " is float (" + a->Describe(n.input(0)) +
            "), not dequantized";
      fix = "quantize the activation feeding it (QuantizeLinear -> DequantizeLinear)";
    } else if (reasons.count(n.name)) {
      why = "the converter's folding rule failed: " + reasons[n.name];
      if (reasons[n.name].find("16-bit") != std::string::npos)
        fix = "quantize activations to 8 bits (activation_type=QUInt8/QInt8) for integer kernels";
    } else {
      auto it = consumers.find(out);
      bool q_after = it != consumers.end() && it->second.size() == 1;
      if (q_after) {
        const Node* c = &g.nodes[it->second[0]];
        if ((c->op_type == "Relu" || c->op_type == "Clip" || c->op_type == "Add") &&
            consumers.count(c->outputs[0]) && consumers[c->outputs[0]].size() == 1)
          c = &g.nodes[consumers[c->outputs[0]][0]];
        q_after = IsQ(*c);
      }
      why = q_after ? "the converter cannot fold its quantization parameters (see qfold inspect "
                      "--ops on the converted model)"
                    : "its output " + Quote(out) + " is not quantized by a single QuantizeLinear";
    }
    a->Add(Severity::kWarning, "quant_coverage", &n, out,
           n.Label() + " has " + q.granularity + " quantized weights " + Quote(q.weight) +
               " but stays float: " + why,
           fix);
  }
  // The same integer weight quantized per-channel in one place and not in another.
  for (const auto& kv : by_weight) {
    const Node* pc = nullptr;
    const Node* other = nullptr;
    std::string other_g;
    for (const auto& p : kv.second) {
      if (p.second == "per-channel")
        pc = p.first;
      else
        other = p.first, other_g = p.second;
    }
    if (pc && other && pc != other)
      a->Add(Severity::kWarning, "per_channel_lost", other, kv.first,
             "weight " + Quote(kv.first) + " is quantized per-channel by " + pc->Label() + " but " +
                 other_g + " by " + other->Label() +
                 ": the consumers of the latter lose per-channel precision",
             "quantize every use of the weight per-channel (axis 0 for Conv)");
  }
  // A per-channel dequantized weight shared by ops of which only some fold.
  if (fold_known)
    for (const Node& dq : g.nodes) {
      if (!IsDQ(dq) || granularity(dq) != "per-channel") continue;
      auto it = consumers.find(dq.outputs[0]);
      if (it == consumers.end() || it->second.size() < 2) continue;
      const Node* yes = nullptr;
      const Node* no = nullptr;
      for (size_t k : it->second) (folded.count(g.nodes[k].name) ? yes : no) = &g.nodes[k];
      if (yes && no)
        a->Add(Severity::kWarning, "per_channel_lost", no, dq.input(0),
               "weight " + Quote(dq.input(0)) + " is per-channel and folds into " + yes->Label() +
                   ", but " + no->Label() + " reads the same dequantized weight and stays float",
               "give each consumer its own DequantizeLinear, quantized so it can fold");
    }
  if (any_qdq && !a->report->quant_ops.empty()) {
    std::map<std::string, int> by;
    int nf = 0;
    for (const QuantOp& q : a->report->quant_ops) by[q.granularity]++, nf += q.folded;
    std::string msg = std::to_string(a->report->quant_ops.size()) + " Conv/MatMul/Gemm:";
    for (const char* k : {"per-channel", "per-tensor", "blocked", "float"})
      msg += std::string(" ") + std::to_string(by[k]) + " " + k + ",";
    msg += fold_known ? " " + std::to_string(nf) + " fold into integer kernels"
                      : " folding not analyzed";
    a->Add(Severity::kInfo, "quant_coverage", nullptr, "", msg);
    const int total = int(a->report->quant_ops.size());
    if (fold_known && (total - nf) * 2 > total) {
      // The most frequent reason names the pattern to fix first.
      std::map<std::string, int> why;
      for (const QuantOp& q : a->report->quant_ops)
        if (!q.folded)
          why[reasons.count(q.node)      ? reasons[q.node]
              : q.granularity == "float" ? "no quantized weight or input"
                                         : "see the quant_coverage warnings"]++;
      auto top = why.begin();
      for (auto it = why.begin(); it != why.end(); ++it)
        if (it->second > top->second) top = it;
      a->Add(Severity::kWarning, "quant_mostly_float", nullptr, "",
             "the model carries QuantizeLinear/DequantizeLinear, but " +
                 std::to_string(total - nf) + " of " + std::to_string(total) +
                 " Conv/ConvTranspose/MatMul/Gemm run in float (most often: " + top->first + ")",
             top->first.find("16-bit") != std::string::npos
                 ? "quantize activations to 8 bits for integer kernels (16-bit runs Q/DQ "
                   "emulated in float)"
                 : "see the quant_coverage warnings and qfold inspect --ops on the converted "
                   "model");
    }
  }
}

}  // namespace check
}  // namespace qfold
