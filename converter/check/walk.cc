// The per-node walk of `qfold check`: dtype and shape inference with the
// runtime's OpDefs (as InferAndFold does), but a node that fails marks its
// outputs unknown and the walk goes on, so every problem is reported. Before
// inference each node gets explicit checks that name the origin of every dim
// involved: broadcasting (elementwise, MatMul, Gemm), equal input dtypes, and
// Conv channels (a permuted input layout).
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>

#include "converter/check/internal.h"
#include "converter/onnx_dtype.h"
#include "converter/passes/passes.h"
#include "core/half.h"
#include "core/op.h"
#include "core/shape_util.h"
#include "kernels/kernel_config.h"

namespace qfold {
namespace check {

namespace {

bool HasSequenceIssue(const Report& r) {
  for (const Issue& i : r.issues)
    if (i.code == "dynamic_sequence" || i.code == "invalid_sequence") return true;
  return false;
}

using conv::Node;
using conv::Value;

constexpr size_t kMaxFoldedBytes = size_t(16) << 20;

bool IsHalf(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}

std::string ShapeArg(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? "x" : "") + (s[i] < 0 ? std::string("D") : std::to_string(s[i]));
  return out;
}

class Walker {
 public:
  explicit Walker(Analysis* a) : a_(*a), g_(a->g) {}

  void Run() {
    for (auto& kv : g_.values) {
      const Value& v = kv.second;
      if (!v.is_constant() || a_.origins.count(kv.first)) continue;
      std::vector<DimOrigin>& org = a_.origins[kv.first];
      for (size_t i = 0; i < v.shape.size(); ++i) {
        DimOrigin d;
        d.text =
            "initializer " + Quote(kv.first) +
            (v.shape.size() == 1 ? "" : " axis " + std::to_string(i) + " of " + DimsText(v.shape));
        org.push_back(d);
      }
    }
    for (size_t k = 0; k < g_.nodes.size(); ++k) Visit(k);
    ReportHalfIslands();
  }

 private:
  const Value* In(const Node& n, size_t i) const {
    return n.input(i).empty() ? nullptr : g_.Find(n.input(i));
  }
  bool Guessed(const std::string& v) const { return a_.guessed.count(v) > 0; }

  // Marks every output unknown (rank too); the dtype is a guess so later nodes
  // can still be inferred, and dtype checks ignore it.
  void SetUnknown(size_t k) {
    const Node& n = g_.nodes[k];
    DType guess = DType::kUndefined;
    for (size_t i = 0; i < n.inputs.size() && guess == DType::kUndefined; ++i)
      if (const Value* v = In(n, i)) guess = v->dtype;
    if (guess == DType::kUndefined || n.op_type == "DequantizeLinear") guess = DType::kFloat32;
    if (n.op_type == "QuantizeLinear") {
      const Value* z = In(n, 2);
      guess = z ? z->dtype : DType::kUInt8;
    }
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      Value& v = g_.values[o];
      v.name = o;
      v.dtype = guess;
      v.rank_known = false;
      v.shape.clear();
      v.data.reset();
      a_.origins.erase(o);
      a_.guessed.insert(o);
    }
    a_.failed.insert(k);
  }

  // "input 'x' axis 0 must be 160 (or 1) here: --input-shape x=160".
  std::string InputFix(const DimOrigin& o, int64_t want) const {
    const Value* v = g_.Find(o.input);
    if (!v || o.axis < 0 || size_t(o.axis) >= v->shape.size()) return "";
    Shape s = v->shape;
    s[size_t(o.axis)] = want;
    std::string fix = "input " + Quote(o.input) + " axis " + std::to_string(o.axis) + " must be " +
                      std::to_string(want) + " (or 1) for this node: e.g. --input-shape " +
                      o.input + "=" + ShapeArg(s);
    for (size_t b = 0; b < v->shape.size(); ++b)
      if (int(b) != o.axis && v->shape[b] == want)
        return fix + "; the input has " + std::to_string(want) + " at axis " + std::to_string(b) +
               ": are its axes permuted?";
    return fix;
  }

  void ReportBroadcast(const Node& n, const std::string& what, const std::string& ia, int aa,
                       int64_t da, const std::string& ib, int ab, int64_t db,
                       const std::string& where) {
    DimOrigin oa = a_.Origin(ia, aa), ob = a_.Origin(ib, ab);
    std::string msg = n.Label() + ": " + what + " " + std::to_string(da) + " (from " + oa.text +
                      ") with " + std::to_string(db) + " (from " + ob.text + ") " + where +
                      " (shapes " + a_.ShapeText(ia) + " and " + a_.ShapeText(ib) + ")";
    std::string fix, tensor = ia;
    if (!oa.input.empty()) {
      fix = InputFix(oa, db);
      tensor = oa.input;
    } else if (!ob.input.empty()) {
      fix = InputFix(ob, da);
      tensor = ob.input;
    } else {
      fix = "the shapes of " + Quote(ia) + " and " + Quote(ib) +
            " must be equal or 1 on each axis (right-aligned)";
    }
    a_.Add(Severity::kError, "broadcast", &n, tensor, msg, fix);
  }

  // Multidirectional broadcast of the inputs in `idx`; false (reported) on a conflict.
  bool CheckBroadcast(const Node& n, const std::vector<size_t>& idx) {
    int rank = 0;
    for (size_t i : idx) {
      const Value* v = In(n, i);
      if (!v || !v->rank_known) return true;
      rank = std::max(rank, int(v->shape.size()));
    }
    for (int r = 0; r < rank; ++r) {
      int first = -1, fa = 0;
      int64_t fd = 0;
      for (size_t i : idx) {
        const Value* v = In(n, i);
        int ax = r - (rank - int(v->shape.size()));
        if (ax < 0) continue;
        int64_t d = v->shape[size_t(ax)];
        if (d < 0 || d == 1) continue;
        if (first < 0) {
          first = int(i), fa = ax, fd = d;
        } else if (d != fd) {
          ReportBroadcast(n, "cannot broadcast", n.input(size_t(first)), fa, fd, n.input(i), ax, d,
                          "at output axis " + std::to_string(r));
          return false;
        }
      }
    }
    return true;
  }

  bool CheckMatMul(const Node& n) {
    const Value* a = In(n, 0);
    const Value* b = In(n, 1);
    if (!a || !b || !a->rank_known || !b->rank_known || a->shape.empty() || b->shape.empty())
      return true;
    int ka = int(a->shape.size()) - 1;
    int kb = b->shape.size() == 1 ? 0 : int(b->shape.size()) - 2;
    int64_t da = a->shape[size_t(ka)], db = b->shape[size_t(kb)];
    if (da >= 0 && db >= 0 && da != db) {
      ReportBroadcast(
          n, "inner dims differ:", n.input(0), ka, da, n.input(1), kb, db,
          "(A axis " + std::to_string(ka) + " against B axis " + std::to_string(kb) + ")");
      return false;
    }
    // Batch dims broadcast like elementwise ops.
    int ra = int(a->shape.size()) - 2, rb = int(b->shape.size()) - 2;
    int rank = std::max(ra, rb);
    for (int r = 0; r < rank; ++r) {
      int ax = r - (rank - ra), bx = r - (rank - rb);
      if (ax < 0 || bx < 0) continue;
      int64_t x = a->shape[size_t(ax)], y = b->shape[size_t(bx)];
      if (x > 1 && y > 1 && x != y) {
        ReportBroadcast(n, "cannot broadcast batch dim", n.input(0), ax, x, n.input(1), bx, y,
                        "(batch axis " + std::to_string(r) + ")");
        return false;
      }
    }
    return true;
  }

  bool CheckGemm(const Node& n) {
    const Value* a = In(n, 0);
    const Value* b = In(n, 1);
    if (!a || !b || !a->rank_known || !b->rank_known || a->shape.size() != 2 ||
        b->shape.size() != 2)
      return true;
    const bool ta = n.attrs.GetInt("transA", 0) != 0, tb = n.attrs.GetInt("transB", 0) != 0;
    int ka = ta ? 0 : 1, kb = tb ? 1 : 0;
    int64_t da = a->shape[size_t(ka)], db = b->shape[size_t(kb)];
    if (da >= 0 && db >= 0 && da != db) {
      ReportBroadcast(n, "inner dims differ:", n.input(0), ka, da, n.input(1), kb, db,
                      "(A axis " + std::to_string(ka) + " against B axis " + std::to_string(kb) +
                          ", transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) + ")");
      return false;
    }
    const Value* c = In(n, 2);
    if (!c || !c->rank_known || c->shape.size() > 2) return true;
    int64_t m = a->shape[ta ? 1 : 0], nn = b->shape[tb ? 0 : 1];
    int ma = ta ? 1 : 0, nb = tb ? 0 : 1;
    for (size_t i = 0; i < c->shape.size(); ++i) {
      int64_t d = c->shape[c->shape.size() - 1 - i];
      bool col = i == 0;
      int64_t want = col ? nn : m;
      if (d >= 0 && want >= 0 && d != 1 && d != want) {
        int cax = int(c->shape.size() - 1 - i);
        if (col)
          ReportBroadcast(n, "cannot broadcast C", n.input(2), cax, d, n.input(1), nb, want,
                          "to the output's columns");
        else
          ReportBroadcast(n, "cannot broadcast C", n.input(2), cax, d, n.input(0), ma, want,
                          "to the output's rows");
        return false;
      }
    }
    return true;
  }

  // Conv input channels against the weight: a mismatch traced to a graph input
  // that has the wanted count on another axis is a permuted layout.
  bool CheckConvChannels(const Node& n) {
    const Value* x = In(n, 0);
    const Value* w = In(n, 1);
    if (!x || !w || !x->rank_known || !w->rank_known || x->shape.size() < 3 ||
        w->shape.size() != x->shape.size())
      return true;
    const int64_t group = n.attrs.GetInt("group", 1);
    const int64_t c = x->shape[1], per_group = w->shape[1];
    if (c < 0 || per_group < 0 || c == per_group * group) return true;
    const int64_t need = per_group * group;
    DimOrigin o = a_.Origin(n.input(0), 1);
    const Value* in = o.input.empty() ? nullptr : g_.Find(o.input);
    std::string weight = "weight " + Quote(n.input(1)) + " " + a_.ShapeText(n.input(1)) +
                         (group != 1 ? " with group " + std::to_string(group) : "");
    if (in && o.axis >= 0 && in->shape.size() == x->shape.size()) {
      int found = -1;
      for (int b = int(in->shape.size()) - 1; b >= 0; --b)
        if (b != o.axis && in->shape[size_t(b)] == need) {
          found = b;
          break;
        }
      if (found >= 0) {
        Shape fixed = in->shape;
        int64_t moved = fixed[size_t(found)];
        fixed.erase(fixed.begin() + found);
        fixed.insert(fixed.begin() + o.axis, moved);
        const bool nhwc = found == int(in->shape.size()) - 1 && o.axis == 1;
        std::string src = o.text.substr(o.text.find(", ") + 2);
        std::string msg =
            n.Label() + " needs " + std::to_string(need) + " input channels at axis " +
            std::to_string(o.axis) + " (" + weight + "), but input " + Quote(o.input) + " " + src +
            " has " + std::to_string(c) + " there and " + std::to_string(need) + " at axis " +
            std::to_string(found) + ": " +
            (nhwc ? "it looks channels-last (NHWC) while the model wants channels-first (NCHW)"
                  : "axes " + std::to_string(std::min(found, o.axis)) + " and " +
                        std::to_string(std::max(found, o.axis)) + " look swapped");
        std::string fix = "feed " + Quote(o.input) + " as " + DimsText(fixed);
        auto srcit = a_.input_shape_source.find(o.input);
        if (srcit != a_.input_shape_source.end() && srcit->second == "--input-shape")
          fix += " (--input-shape " + o.input + "=" + ShapeArg(fixed) + ")";
        else
          fix += nhwc ? " (transpose the data with perm (0,3,1,2))"
                      : " (move axis " + std::to_string(found) + " to axis " +
                            std::to_string(o.axis) + ")";
        a_.Add(Severity::kError, "layout_permuted", &n, o.input, msg, fix);
        return false;
      }
    }
    a_.Add(Severity::kError, "shape_mismatch", &n, n.input(0),
           n.Label() + ": input " + Quote(n.input(0)) + " has " + std::to_string(c) +
               " channels at axis 1 (from " + o.text + "), but " + weight + " needs " +
               std::to_string(need),
           o.input.empty() ? "" : InputFix(o, need));
    return false;
  }

  std::string Producer(const std::string& value) const {
    auto it = a_.producer.find(value);
    if (it != a_.producer.end()) return "output of " + g_.nodes[it->second].Label();
    return a_.Describe(value);
  }

  // The inputs the op wants of one dtype (OpDef::same_dtype_inputs) must agree.
  bool CheckTypes(const Node& n, const OpDef& def) {
    std::vector<std::pair<size_t, DType>> seen;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!SameDtypeInput(def, i)) continue;
      const Value* v = In(n, i);
      if (!v || v->dtype == DType::kUndefined || Guessed(n.input(i))) continue;
      seen.push_back({i, v->dtype});
    }
    bool mixed = false;
    for (const auto& s : seen) mixed = mixed || s.second != seen[0].second;
    if (!mixed) return true;
    // Cast toward a float type when one is involved: that is what the model computes in.
    DType target = seen[0].second;
    for (const auto& s : seen)
      if (dtype_is_float(s.second)) {
        target = s.second;
        break;
      }
    std::string parts, fix;
    for (const auto& s : seen) {
      const std::string& name = n.input(s.first);
      parts += std::string(parts.empty() ? "" : ", ") + "input " + std::to_string(s.first) + " " +
               Quote(name) + " is " + dtype_name(s.second) + " (" + Producer(name) + ")";
      if (s.second == target) continue;
      auto it = a_.producer.find(name);
      const Node* p = it == a_.producer.end() ? nullptr : &g_.nodes[it->second];
      fix += std::string(fix.empty() ? "" : "; ");
      if (p && p->op_type == "Cast")
        fix += "change " + p->Label() + " to=" + dtype_name(target) + " (ONNX " +
               std::to_string(conv::OnnxFromDType(target)) + ")";
      else
        fix += "insert Cast(to=" + std::string(dtype_name(target)) + ") on " + Quote(name);
    }
    a_.Add(Severity::kError, "dtype_mismatch", &n, n.input(seen[0].first),
           n.Label() + " needs inputs of one type, but " + parts, fix);
    return false;
  }

  void Visit(size_t k) {
    const Node& n = g_.nodes[k];
    const bool default_domain = n.domain.empty();
    if (default_domain && n.op_type == "Dropout") {  // removed by the converter
      const Value* x = In(n, 0);
      SetUnknown(k);
      if (x && !n.outputs.empty()) {
        Value v = *x;
        v.name = n.outputs[0];
        a_.guessed.erase(v.name);
        g_.values[v.name] = v;
        if (a_.origins.count(n.input(0))) a_.origins[v.name] = a_.origins[n.input(0)];
      }
      return;
    }
    const OpDef* def = FindOp(n.op_type);
    // A sequence op left in the graph was refused by LowerSequences, whose
    // dynamic_sequence issue says why; "not supported" would be wrong.
    if (!def && default_domain && conv::IsSequenceOp(n) && HasSequenceIssue(*a_.report)) {
      SetUnknown(k);
      return;
    }
    if (!def || !(default_domain || n.domain == "com.microsoft") || !n.unsupported_attrs.empty()) {
      std::string what = !def ? "operator " +
                                    (default_domain ? n.op_type : n.domain + "." + n.op_type) +
                                    " is not supported by qfold"
                         : !(default_domain || n.domain == "com.microsoft")
                             ? "domain '" + n.domain + "' is not supported by qfold"
                             : "attribute '" + n.unsupported_attrs[0] +
                                   "' (a graph or string list) is not supported";
      a_.Add(Severity::kError, "unsupported_op", &n, "", n.Label() + ": " + what,
             "replace it with supported operators before converting (qfold has " +
                 std::to_string(SupportedOps().size()) + " op types)");
      SetUnknown(k);
      return;
    }
    if (def->has_subgraphs) {  // If/Loop/Scan: typed through their subgraphs
      conv::Node copy = n;
      Status st = conv::InferSubgraphNode(&g_, &copy, /*fold=*/false);
      if (!st.ok()) {
        // Said once: capturing the subgraph's values may have found it already.
        bool said = false;
        for (const Issue& i : a_.report->issues) said = said || i.message == st.message();
        if (!said) a_.Add(Severity::kError, "invalid_subgraph", &n, "", st.message());
        SetUnknown(k);
        return;
      }
      // A Loop whose count only running tells: its scan outputs are sized then.
      const conv::Value* m = In(n, 0);
      if (n.op_type == "Loop" && m && !m->is_constant())
        a_.Add(Severity::kInfo, "dynamic_loop", &n, n.input(0),
               n.Label() + ": its trip count '" + n.input(0) +
                   "' comes from data, so its scan outputs are sized while it runs (the "
                   "session runs in dynamic mode); --const " +
                   n.input(0) + "=N would fix it if it is a graph input");
      return;
    }
    const int n_in = int(n.inputs.size());
    if (n_in < def->min_inputs || n_in > def->max_inputs) {
      a_.Add(Severity::kError, "invalid_node", &n, "",
             n.Label() + " has " + std::to_string(n_in) + " inputs, expected " +
                 std::to_string(def->min_inputs) + ".." + std::to_string(def->max_inputs));
      SetUnknown(k);
      return;
    }
    for (int i = 0; i < def->min_inputs; ++i)
      if (n.inputs[size_t(i)].empty()) {
        a_.Add(Severity::kError, "invalid_node", &n, "",
               n.Label() + ": required input " + std::to_string(i) + " is omitted");
        SetUnknown(k);
        return;
      }
    bool any_guessed = false;
    for (const std::string& in : n.inputs)
      any_guessed = any_guessed || (!in.empty() && Guessed(in));
    bool ok = CheckTypes(n, *def);
    if (ok && HasTraits(n.op_type, kTraitBroadcasting)) {
      std::vector<size_t> idx;
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (!n.inputs[i].empty()) idx.push_back(i);
      ok = CheckBroadcast(n, idx);
    }
    if (ok && n.op_type == "MatMul") ok = CheckMatMul(n);
    if (ok && n.op_type == "Gemm") ok = CheckGemm(n);
    if (ok && n.op_type == "Conv") ok = CheckConvChannels(n);
    if (!ok) {
      SetUnknown(k);
      return;
    }
    Infer(k, *def, any_guessed);
  }

  void Infer(size_t k, const OpDef& def, bool any_guessed) {
    const Node& n = g_.nodes[k];
    std::vector<Tensor> ins(n.inputs.size()), outs(n.outputs.size());
    std::vector<std::vector<float>> widened(n.inputs.size());
    KernelContext ctx;
    ctx.kernels = &kernels::ReferenceKernelConfig();  // results must not depend on the machine
    ctx.op_type = &n.op_type;
    ctx.op_name = &n.name;
    ctx.attrs = &n.attrs;
    static uint8_t empty_marker;
    bool all_const = true, inputs_known = true;
    DType half = DType::kUndefined;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = In(n, i);
      if (!v) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      Tensor& t = ins[i];
      t.name = v->name;
      t.dtype = v->dtype;
      t.rank_known = v->rank_known;
      t.shape = v->shape;
      t.is_sequence = v->is_sequence;
      t.is_optional = v->is_optional;
      if (v->is_optional && !(def.traits & kTraitOptional) && !def.has_subgraphs) {
        ReportInferFailure(n, Status(StatusCode::kInvalidModel,
                                     n.Label() + ": input '" + v->name +
                                         "' is an optional; this op does not take optionals"));
        SetUnknown(k);
        return;
      }
      if (v->is_sequence && !(def.traits & kTraitSequence) && !def.has_subgraphs) {
        // The converter refuses it naming the node (infer_and_fold.cc).
        ReportInferFailure(
            n, Status(StatusCode::kInvalidModel, n.Label() + ": input '" + v->name +
                                                     "' is a sequence; this op takes tensors"));
        SetUnknown(k);
        return;
      }
      if (v->data)
        t.data = v->data->empty() ? &empty_marker : const_cast<uint8_t*>(v->data->data());
      // Kernels do not compute in fp16 (the converter widens it): infer as float32.
      if (IsHalf(v->dtype)) {
        half = v->dtype;
        t.dtype = DType::kFloat32;
        if (v->data) {
          std::vector<double> f;
          ConstFloats(v, &f);
          widened[i].assign(f.begin(), f.end());
          t.data = widened[i].empty() ? static_cast<void*>(&empty_marker)
                                      : static_cast<void*>(widened[i].data());
        }
      }
      all_const = all_const && v->is_constant();
      inputs_known = inputs_known && t.shape_known();
      ctx.inputs.push_back(&t);
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      outs[i].name = n.outputs[i];
      ctx.outputs.push_back(n.outputs[i].empty() ? nullptr : &outs[i]);
    }
    Status st = def.infer(ctx);
    if (!st.ok()) {
      if (!any_guessed) ReportInferFailure(n, st);
      SetUnknown(k);
      return;
    }
    bool outputs_known = true;
    size_t out_bytes = 0;
    for (Tensor* o : ctx.outputs)
      if (o) {
        outputs_known = outputs_known && o->shape_known();
        if (o->shape_known()) out_bytes += dtype_storage_bytes(o->dtype, o->numel());
      }
    bool has_sequence = false;
    for (const Tensor& t : ins) has_sequence = has_sequence || t.boxed();
    for (const Tensor& t : outs) has_sequence = has_sequence || t.boxed();
    bool fold = !has_sequence && half == DType::kUndefined && outputs_known &&
                out_bytes <= kMaxFoldedBytes && inputs_known && (all_const || def.shape_only);
    std::vector<std::shared_ptr<std::vector<uint8_t>>> storage;
    if (fold) {
      for (Tensor* o : ctx.outputs) {
        if (!o) continue;
        storage.push_back(
            std::make_shared<std::vector<uint8_t>>(dtype_storage_bytes(o->dtype, o->numel()) + 1));
        o->data = storage.back()->data();
      }
      fold = def.run(ctx).ok();
    }
    size_t s = 0;
    for (Tensor* o : ctx.outputs) {
      if (!o) continue;
      Value& v = g_.values[o->name];
      v.name = o->name;
      v.dtype = o->dtype;
      if (half != DType::kUndefined && n.op_type != "Cast" && o->dtype == DType::kFloat32)
        v.dtype = half;
      v.rank_known = o->rank_known;
      v.shape = o->shape;
      v.is_sequence = o->is_sequence;
      v.is_optional = o->is_optional;
      v.data.reset();
      if (fold) {
        storage[s]->resize(storage[s]->size() - 1);
        v.data = storage[s++];
      }
      if (any_guessed) a_.guessed.insert(o->name);
    }
    SetOrigins(n);
  }

  void ReportInferFailure(const Node& n, const Status& st) {
    const std::string& m = st.message();
    static const char* kTypes[] = {"float16", "bfloat16", "float64", "int8",   "uint8",
                                   "int16",   "uint16",   "int32",   "uint32", "int64",
                                   "uint64",  "bool",     "int4",    "uint4",  "dtype"};
    bool about_type = false;
    for (const char* t : kTypes) about_type = about_type || m.find(t) != std::string::npos;
    std::string code = st.code() == StatusCode::kUnsupported
                           ? (about_type ? "unsupported_dtype" : "unsupported_op")
                           : (about_type ? "dtype_mismatch" : "shape_inference");
    std::string ins;
    for (const std::string& i : n.inputs)
      if (!i.empty()) {
        const Value* v = g_.Find(i);
        ins += std::string(ins.empty() ? "" : ", ") + Quote(i) + " " +
               (v ? dtype_name(v->dtype) : "?") + " " + a_.ShapeText(i);
      }
    a_.Add(Severity::kError, code, &n, "", m + " (inputs: " + ins + ")");
  }

  void Inherit(DimOrigin* d, const std::string& value, int axis, int64_t want) {
    const Value* v = g_.Find(value);
    if (!v || !v->rank_known || axis < 0 || size_t(axis) >= v->shape.size()) return;
    if (v->shape[size_t(axis)] != want) return;
    *d = a_.Origin(value, axis);
  }

  void SetOrigins(const Node& n) {
    for (const std::string& out : n.outputs) {
      if (out.empty()) continue;
      const Value* ov = g_.Find(out);
      if (!ov || !ov->rank_known) {
        a_.origins.erase(out);
        continue;
      }
      const Shape& os = ov->shape;
      const int r = int(os.size());
      std::vector<DimOrigin> org(os.size());
      for (DimOrigin& d : org) d.text = "computed by " + n.Label();
      const Value* x = In(n, 0);
      const std::string& t = n.op_type;
      if (HasTraits(t, kTraitBroadcasting) && out == n.outputs[0]) {
        for (int i = 0; i < r; ++i) {
          bool done = false;
          for (size_t j = 0; j < n.inputs.size() && !done; ++j) {
            const Value* v = In(n, j);
            if (!v || !v->rank_known) continue;
            int ax = i - (r - int(v->shape.size()));
            if (ax < 0 || v->shape[size_t(ax)] != os[size_t(i)]) continue;
            if (os[size_t(i)] == 1 && j + 1 < n.inputs.size()) {
              // Prefer an input whose dim is not a broadcast 1, else the first.
              if (org[size_t(i)].text.rfind("computed", 0) == 0)
                org[size_t(i)] = a_.Origin(n.input(j), ax);
              continue;
            }
            org[size_t(i)] = a_.Origin(n.input(j), ax);
            done = true;
          }
        }
      } else if (t == "Transpose" && x && x->rank_known && int(x->shape.size()) == r) {
        std::vector<int64_t> perm = n.attrs.GetInts("perm");
        if (perm.empty())
          for (int i = r - 1; i >= 0; --i) perm.push_back(i);
        for (int i = 0; i < r && size_t(i) < perm.size(); ++i)
          Inherit(&org[size_t(i)], n.input(0), int(perm[size_t(i)]), os[size_t(i)]);
      } else if ((t == "Conv" || t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" ||
                  t == "GlobalMaxPool" || t == "LpPool") &&
                 r >= 2) {
        Inherit(&org[0], n.input(0), 0, os[0]);
        if (t == "Conv")
          Inherit(&org[1], n.input(1), 0, os[1]);
        else
          Inherit(&org[1], n.input(0), 1, os[1]);
        for (int i = 2; i < r; ++i) Inherit(&org[size_t(i)], n.input(0), i, os[size_t(i)]);
      } else if (t == "Gemm" && r == 2) {
        Inherit(&org[0], n.input(0), n.attrs.GetInt("transA", 0) ? 1 : 0, os[0]);
        Inherit(&org[1], n.input(1), n.attrs.GetInt("transB", 0) ? 0 : 1, os[1]);
      } else if (t == "MatMul" && r >= 2 && x && In(n, 1) && x->rank_known &&
                 In(n, 1)->rank_known && x->shape.size() >= 2 && In(n, 1)->shape.size() >= 2) {
        const Value* b = In(n, 1);
        const int ra = int(x->shape.size()), rb = int(b->shape.size());
        Inherit(&org[size_t(r - 1)], n.input(1), rb - 1, os[size_t(r - 1)]);
        Inherit(&org[size_t(r - 2)], n.input(0), ra - 2, os[size_t(r - 2)]);
        for (int i = 0; i < r - 2; ++i) {
          Inherit(&org[size_t(i)], n.input(1), i - (r - rb), os[size_t(i)]);
          Inherit(&org[size_t(i)], n.input(0), i - (r - ra), os[size_t(i)]);
        }
      } else if (x && x->rank_known) {
        // Data movement: match dims to input 0 in order (Reshape, Unsqueeze, Concat, ...).
        size_t j = 0;
        for (int i = 0; i < r; ++i)
          for (size_t p = j; p < x->shape.size(); ++p)
            if (x->shape[p] == os[size_t(i)] && (os[size_t(i)] != 1 || p == size_t(i))) {
              org[size_t(i)] = a_.Origin(n.input(0), int(p));
              j = p + 1;
              break;
            }
      }
      a_.origins[out] = std::move(org);
    }
  }

  // fp16/bf16 compute: which nodes, in how many connected islands.
  void ReportHalfIslands() {
    std::vector<size_t> parent(g_.nodes.size());
    std::iota(parent.begin(), parent.end(), 0);
    std::function<size_t(size_t)> find = [&](size_t x) {
      return parent[x] == x ? x : parent[x] = find(parent[x]);
    };
    std::vector<bool> half(g_.nodes.size(), false);
    std::map<std::string, size_t> first_user;
    DType kind = DType::kUndefined;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      const Node& n = g_.nodes[k];
      if (n.op_type == "Cast") continue;  // a boundary, not compute
      for (const auto* list : {&n.inputs, &n.outputs})
        for (const std::string& s : *list) {
          const Value* v = s.empty() ? nullptr : g_.Find(s);
          if (!v || !IsHalf(v->dtype) || v->is_constant()) continue;
          half[k] = true;
          kind = v->dtype;
          auto it = first_user.find(s);
          if (it == first_user.end())
            first_user[s] = k;
          else
            parent[find(k)] = find(it->second);
        }
    }
    std::map<size_t, std::vector<size_t>> islands;
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      if (half[k]) islands[find(k)].push_back(k);
    if (islands.empty()) return;
    size_t count = 0;
    std::string list;
    for (const auto& kv : islands) {
      count += kv.second.size();
      if (list.size() < 200)
        list += std::string(list.empty() ? "" : "; ") + g_.nodes[kv.second.front()].Label() +
                (kv.second.size() > 1 ? " .. " + g_.nodes[kv.second.back()].Label() : "") + " (" +
                std::to_string(kv.second.size()) + " nodes)";
    }
    a_.Add(Severity::kInfo, "half_float", nullptr, "",
           std::to_string(count) + " node(s) compute in " + dtype_name(kind) + " in " +
               std::to_string(islands.size()) + " island(s): " + list +
               "; qfold computes them in float32 (graph inputs and outputs keep their dtype)");
  }

  Analysis& a_;
  conv::Graph& g_;
};

}  // namespace

void WalkGraph(Analysis* a) {
  Walker(a).Run();
}

}  // namespace check
}  // namespace qfold
