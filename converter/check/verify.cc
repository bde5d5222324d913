// qfold verify: the .qfm against the unfolded ONNX reference, per output and per layer.
#include "converter/check/verify.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "converter/check/internal.h"
#include "converter/converter.h"
#include "converter/qfm_writer.h"
#include "core/half.h"
#include "model_impl.h"

namespace qfold {
namespace check {

namespace {

using conv::Graph;
using conv::Node;
using conv::QuantInfo;
using conv::Value;

// A loaded model plus the bytes it may point into; an external reference has only `arrays`.
struct Loaded {
  std::vector<uint8_t> bytes;
  std::shared_ptr<Model> model;
  std::unique_ptr<Session> session;
  std::map<std::string, NamedArray> arrays;
  std::map<std::string, QuantInfo> quant;                               // per tensor name
  std::map<std::string, std::pair<std::string, std::string>> producer;  // name -> (node, type)
  std::vector<std::string> order;  // op outputs in topological order
  // Tensors the layout planning keeps channels-last inside ([N, ..., C]);
  // compared with the reference's [N, C, ...] after moving the channels back.
  std::set<std::string> channels_last;
};

// The .qfm back as a graph, so outputs can be added and it can be re-serialized.
void QfmToGraph(const Model::Impl& m, Graph* g) {
  g->source = m.source;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorEntry& t = m.tensors[i];
    Value v;
    v.name = t.info.name;
    v.dtype = t.info.dtype;
    v.rank_known = true;
    v.shape = t.info.shape;
    v.dim_names = t.info.dim_names;
    v.layout = t.info.layout == Layout::kNHWC   ? Value::Layout::kNHWC
               : t.info.layout == Layout::kNCHW ? Value::Layout::kNCHW
                                                : Value::Layout::kPlain;
    if (t.const_data) {
      int64_t n = 1;
      for (int64_t d : v.shape) n *= d;
      const uint8_t* p = static_cast<const uint8_t*>(t.const_data);
      v.data = std::make_shared<const std::vector<uint8_t>>(p, p + dtype_storage_bytes(v.dtype, n));
    }
    const fb::Quantization* q = m.fb->tensors()->Get(uint32_t(i))->quant();
    if (q) {
      auto qi = std::make_shared<QuantInfo>();
      if (q->scales()) qi->scales.assign(q->scales()->begin(), q->scales()->end());
      if (q->zero_points())
        qi->zero_points.assign(q->zero_points()->begin(), q->zero_points()->end());
      qi->axis = q->axis();
      qi->block_size = q->block_size();
      v.quant = qi;
    }
    g->values[v.name] = std::move(v);
  }
  auto name = [&](int id) { return id < 0 ? std::string() : m.tensors[size_t(id)].info.name; };
  for (const OpEntry& op : m.ops) {
    Node n;
    n.op_type = op.type;
    n.name = op.name;
    n.attrs = op.attrs;
    for (int i : op.inputs) n.inputs.push_back(name(i));
    for (int o : op.outputs) n.outputs.push_back(name(o));
    g->nodes.push_back(std::move(n));
  }
  for (int i : m.input_ids) g->inputs.push_back(name(i));
  for (int o : m.output_ids) g->outputs.push_back(name(o));
}

// Every op output that is not a constant becomes a graph output too.
void ExposeAll(Graph* g) {
  std::set<std::string> have(g->outputs.begin(), g->outputs.end());
  for (const Node& n : g->nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty() && !have.count(o) && !g->IsConstant(o)) {
        g->outputs.push_back(o);
        have.insert(o);
      }
}

Status LoadGraph(const Graph& g, Loaded* out) {
  QF_RETURN_IF_ERROR(conv::SerializeQfm(g, &out->bytes));
  return Model::LoadMemory(out->bytes.data(), out->bytes.size(), &out->model);
}

// model_outputs: the outputs of the model itself (before ExposeAll), whose
// layout is the model's, not the layout planning's.
void IndexModel(Loaded* l, size_t model_outputs) {
  const Model::Impl& m = *l->model->impl();
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const fb::Quantization* q = m.fb->tensors()->Get(uint32_t(i))->quant();
    if (!q || !q->scales() || q->scales()->size() == 0) continue;
    QuantInfo qi;
    qi.scales.assign(q->scales()->begin(), q->scales()->end());
    if (q->zero_points()) qi.zero_points.assign(q->zero_points()->begin(), q->zero_points()->end());
    qi.axis = q->axis();
    qi.block_size = q->block_size();
    l->quant[m.tensors[i].info.name] = qi;
  }
  std::set<int> boundary(m.input_ids.begin(), m.input_ids.end());
  boundary.insert(m.output_ids.begin(),
                  m.output_ids.begin() + long(std::min(model_outputs, m.output_ids.size())));
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].info.layout == Layout::kNHWC && !boundary.count(int(i)))
      l->channels_last.insert(m.tensors[i].info.name);
  for (const OpEntry& op : m.ops)
    for (int o : op.outputs)
      if (o >= 0) {
        const std::string& n = m.tensors[size_t(o)].info.name;
        l->producer[n] = {op.name, op.type};
        l->order.push_back(n);
      }
}

// The reference's QuantizeLinear outputs, with their (constant) parameters.
void ReferenceQuant(const Graph& g, Loaded* l) {
  for (const Node& n : g.nodes) {
    if (n.op_type != "QuantizeLinear" || n.outputs.empty()) continue;
    std::vector<double> s;
    std::vector<int64_t> z;
    if (!ConstFloats(g.Find(n.input(1)), &s) || s.empty()) continue;
    if (!n.input(2).empty() && !ConstInts(g.Find(n.input(2)), &z)) continue;
    QuantInfo qi;
    qi.scales.assign(s.begin(), s.end());
    for (size_t i = 0; i < s.size(); ++i)
      qi.zero_points.push_back(z.empty() ? 0 : int32_t(z[i % z.size()]));
    qi.axis = s.size() > 1 ? int(n.attrs.GetInt("axis", 1)) : -1;
    qi.block_size = int(n.attrs.GetInt("block_size", 0));
    l->quant[n.outputs[0]] = qi;
  }
}

NamedArray RandomInput(const TensorInfo& t, std::mt19937* rng) {
  NamedArray a;
  a.name = t.name;
  a.dtype = t.dtype;
  for (int64_t d : t.shape) a.shape.push_back(d < 0 ? 1 : d);
  int64_t n = 1;
  for (int64_t d : a.shape) n *= d;
  a.data.resize(dtype_storage_bytes(t.dtype, n));
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int> ui(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* p = a.data.data() + size_t(i) * dtype_size(t.dtype);
    switch (t.dtype) {
      case DType::kFloat32: {
        float f = uf(*rng);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kFloat64: {
        double f = uf(*rng);
        std::memcpy(p, &f, 8);
        break;
      }
      case DType::kFloat16: {
        uint16_t h = FloatToHalf(uf(*rng));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t h = FloatToBFloat16(uf(*rng));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kInt32: {
        int32_t v = ui(*rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kInt64: {
        int64_t v = ui(*rng);
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kBool:
        *p = uint8_t(ui(*rng) & 1);
        break;
      default:
        if (dtype_size(t.dtype) == 1) *p = uint8_t(ui(*rng));
        break;
    }
  }
  return a;
}

Status Feed(Loaded* l, const std::vector<NamedArray>& inputs,
            SessionOptions::Precision precision = SessionOptions::Precision::kFloat32) {
  SessionOptions session_options;
  session_options.precision = precision;
  QF_RETURN_IF_ERROR(Session::Create(l->model, session_options, &l->session));
  for (const NamedArray& a : inputs) {
    QF_RETURN_IF_ERROR(l->session->ResizeInput(a.name, a.shape));
    QF_RETURN_IF_ERROR(
        l->session->SetInput(a.name, a.dtype, a.shape, a.data.data(), a.data.size()));
  }
  return l->session->Run();
}

// Tensor values as doubles: integers with a quantization table are dequantized.
std::vector<double> AsReal(DType dt, const Shape& shape, const void* data, const QuantInfo* q) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> out(size_t(std::max<int64_t>(n, 0)));
  const uint8_t* p = static_cast<const uint8_t*>(data);
  Value v;
  v.dtype = dt;
  v.shape = shape;
  v.data = std::make_shared<const std::vector<uint8_t>>(p, p + dtype_storage_bytes(dt, n));
  std::vector<double> raw;
  if (!ConstFloats(&v, &raw) || raw.size() != out.size()) return {};
  if (!q || dtype_is_float(dt) || q->scales.empty()) return raw;
  int64_t inner = 1, dim = 1;
  if (q->scales.size() > 1 && q->axis >= 0 && size_t(q->axis) < shape.size()) {
    dim = shape[size_t(q->axis)];
    for (size_t i = size_t(q->axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  }
  for (size_t i = 0; i < raw.size(); ++i) {
    size_t c = q->scales.size() > 1 ? size_t((int64_t(i) / inner) % dim) % q->scales.size() : 0;
    int32_t z = q->zero_points.empty() ? 0 : q->zero_points[c % q->zero_points.size()];
    out[i] = (raw[i] - z) * q->scales[c];
  }
  return out;
}

double StepOf(const QuantInfo& q, const Shape& shape, size_t i) {
  if (q.scales.size() <= 1 || q.axis < 0 || size_t(q.axis) >= shape.size()) return q.scales[0];
  int64_t inner = 1;
  for (size_t k = size_t(q.axis) + 1; k < shape.size(); ++k) inner *= shape[k];
  return q.scales[size_t((int64_t(i) / inner) % shape[size_t(q.axis)]) % q.scales.size()];
}

// A tensor from the session's run, else from the external arrays (checked for size, since
// AsReal reads the whole extent).
bool GetTensor(const Loaded& l, const std::string& name, DType* dt, Shape* shape,
               const void** data) {
  if (l.session) return l.session->GetOutput(name, dt, shape, data).ok();
  auto it = l.arrays.find(name);
  if (it == l.arrays.end()) return false;
  const NamedArray& a = it->second;
  int64_t n = 1;
  for (int64_t d : a.shape) n = d < 0 ? -1 : n * d;
  if (n < 0 || a.data.size() != dtype_storage_bytes(a.dtype, n)) return false;
  *dt = a.dtype;
  *shape = a.shape;
  *data = a.data.data();
  return true;
}

// A channels-last tensor [N, d..., C] as [N, C, d...], bytes copied into *buf.
void ToChannelsFirst(DType dt, Shape* shape, const void** data, std::vector<uint8_t>* buf) {
  const Shape& s = *shape;
  const size_t esize = dtype_storage_bytes(dt, 1);
  int64_t inner = 1;
  for (size_t i = 1; i + 1 < s.size(); ++i) inner *= s[i];
  const int64_t n = s[0], c = s.back();
  buf->resize(size_t(n * inner * c) * esize);
  const uint8_t* src = static_cast<const uint8_t*>(*data);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < inner; ++p)
      for (int64_t ch = 0; ch < c; ++ch)
        std::memcpy(buf->data() + size_t((b * c + ch) * inner + p) * esize,
                    src + size_t((b * inner + p) * c + ch) * esize, esize);
  Shape cf = {s[0], s.back()};
  cf.insert(cf.end(), s.begin() + 1, s.end() - 1);
  *shape = cf;
  *data = buf->data();
}

bool Compare(const Loaded& cand, const Loaded& ref, const std::string& name, TensorDiff* d,
             std::string* note) {
  DType ct, rt;
  Shape cs, rs;
  const void* cp = nullptr;
  const void* rp = nullptr;
  if (!GetTensor(cand, name, &ct, &cs, &cp)) return false;
  if (!GetTensor(ref, name, &rt, &rs, &rp)) return false;
  std::vector<uint8_t> cbuf, rbuf;
  if (cand.channels_last.count(name) && cs.size() >= 3 && dtype_storage_bytes(ct, 2) > 1)
    ToChannelsFirst(ct, &cs, &cp, &cbuf);
  if (ref.channels_last.count(name) && rs.size() >= 3 && dtype_storage_bytes(rt, 2) > 1)
    ToChannelsFirst(rt, &rs, &rp, &rbuf);
  if (cs != rs) {
    *note = Quote(name) + ": shape " + DimsText(cs) + " in the .qfm, " + DimsText(rs) +
            " in the reference";
    return false;
  }
  auto cq = cand.quant.find(name);
  auto rq = ref.quant.find(name);
  const QuantInfo* cqi = cq == cand.quant.end() ? nullptr : &cq->second;
  // An integer reference value without its own parameters is the same Q output.
  const QuantInfo* rqi = rq != ref.quant.end() ? &rq->second : dtype_is_float(rt) ? nullptr : cqi;
  if (!dtype_is_float(ct) && !cqi) cqi = rqi;
  std::vector<double> c = AsReal(ct, cs, cp, dtype_is_float(ct) ? nullptr : cqi);
  std::vector<double> r = AsReal(rt, rs, rp, dtype_is_float(rt) ? nullptr : rqi);
  if (c.size() != r.size()) {
    *note = Quote(name) + ": cannot read " + dtype_name(ct) + " / " + dtype_name(rt);
    return false;
  }
  d->name = name;
  d->dtype = ct;
  d->shape = cs;
  auto p = cand.producer.find(name);
  if (p != cand.producer.end()) d->node = p->second.first, d->op_type = p->second.second;
  double dot = 0, nc = 0, nr = 0, ne = 0, max_abs = 0, max_steps = 0;
  const QuantInfo* step = !dtype_is_float(ct) && cqi ? cqi : nullptr;
  for (size_t i = 0; i < c.size(); ++i) {
    const double e = c[i] - r[i];
    dot += c[i] * r[i];
    nc += c[i] * c[i];
    nr += r[i] * r[i];
    ne += e * e;
    max_abs = std::max(max_abs, std::fabs(e));
    if (std::isnan(e)) max_abs = NAN;
    if (step) max_steps = std::max(max_steps, std::fabs(e) / StepOf(*step, cs, i));
  }
  d->cosine = nc == 0 && nr == 0 ? 1.0 : (nc == 0 || nr == 0) ? 0.0 : dot / std::sqrt(nc * nr);
  d->max_abs = max_abs;
  d->rel_l2 = nr == 0 ? (ne == 0 ? 0.0 : INFINITY) : std::sqrt(ne / nr);
  d->max_steps = step ? max_steps : -1;
  return true;
}

bool Bad(const TensorDiff& d, double threshold) {
  return !(d.cosine >= threshold);
}

std::string HtmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

nlohmann::json DiffJson(const TensorDiff& d, double threshold) {
  auto num = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"name", d.name},
          {"node", d.node},
          {"op_type", d.op_type},
          {"dtype", dtype_name(d.dtype)},
          {"shape", d.shape},
          {"cosine", num(d.cosine)},
          {"max_abs_error", num(d.max_abs)},
          {"relative_l2", num(d.rel_l2)},
          {"max_error_steps", d.max_steps < 0 ? nlohmann::json(nullptr) : num(d.max_steps)},
          {"ok", !Bad(d, threshold)}};
}

std::string DiffLine(const TensorDiff& d, double threshold) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "cos %.6f  max_abs %.4g  rel_l2 %.4g", d.cosine, d.max_abs,
                d.rel_l2);
  std::string s = std::string("  ") + (Bad(d, threshold) ? "BAD " : "ok  ") + d.name +
                  (d.node.empty() ? "" : " (" + d.op_type + " '" + d.node + "')") + ": " + buf;
  if (d.max_steps >= 0) {
    std::snprintf(buf, sizeof(buf), "  max %.3g steps", d.max_steps);
    s += buf;
  }
  return s + "\n";
}

const char* PrecisionName(SessionOptions::Precision p) {
  if (p == SessionOptions::Precision::kBfloat16) return "bf16";
  return p == SessionOptions::Precision::kFloat16 ? "fp16" : "fp32";
}

}  // namespace

Status VerifyModel(const std::string& onnx_path, const std::string& qfm_path,
                   const VerifyOptions& opts, VerifyResult* out) {
  *out = VerifyResult();
  conv::ConvertOptions ropts;
  ropts.fold_qdq = false;
  ropts.fuse = false;
  ropts.channels_last = false;  // the literal graph, float convolutions included
  Graph rg;
  QF_RETURN_IF_ERROR(conv::LoadAndOptimize(onnx_path, ropts, &rg));
  Loaded ref, cand;
  ReferenceQuant(rg, &ref);
  if (!opts.external_reference) {
    if (opts.per_layer) ExposeAll(&rg);
    QF_RETURN_IF_ERROR(LoadGraph(rg, &ref));
  }

  std::shared_ptr<Model> file_model;
  QF_RETURN_IF_ERROR(Model::LoadFile(qfm_path, &file_model));
  if (opts.per_layer) {
    Graph cg;
    QfmToGraph(*file_model->impl(), &cg);
    ExposeAll(&cg);
    QF_RETURN_IF_ERROR(LoadGraph(cg, &cand));
  } else {
    cand.model = file_model;
  }
  IndexModel(&cand, file_model->impl()->output_ids.size());

  std::mt19937 rng(opts.seed);
  for (const TensorInfo& t : file_model->inputs()) {
    auto it = std::find_if(opts.inputs.begin(), opts.inputs.end(),
                           [&](const NamedArray& a) { return a.name == t.name; });
    out->inputs.push_back(it != opts.inputs.end() ? *it : RandomInput(t, &rng));
  }
  for (const NamedArray& a : opts.inputs) {
    bool known = false;
    for (const TensorInfo& t : file_model->inputs()) known = known || t.name == a.name;
    if (!known)
      return Status(StatusCode::kInvalidArgument,
                    qfm_path + ": the model has no input named '" + a.name + "'");
  }
  Status st = Feed(&cand, out->inputs, opts.precision);
  if (!st.ok()) return Status(st.code(), qfm_path + ": " + st.message());
  if (opts.external_reference) {
    std::vector<NamedArray> arrays;
    st = opts.external_reference(out->inputs, opts.per_layer, &arrays);
    if (!st.ok())
      return Status(st.code(), "reference (" + opts.reference_name + "): " + st.message());
    for (NamedArray& a : arrays) ref.arrays[a.name] = std::move(a);
  } else {
    st = Feed(&ref, out->inputs);
    if (!st.ok())
      return Status(st.code(), "reference (" + onnx_path + " unfolded): " + st.message());
  }

  std::set<std::string> outputs;
  for (const TensorInfo& t : file_model->outputs()) {
    outputs.insert(t.name);
    TensorDiff d;
    std::string note;
    if (Compare(cand, ref, t.name, &d, &note)) {
      d.is_output = true;
      out->outputs.push_back(d);
    } else {
      out->notes.push_back(note.empty() ? "output " + Quote(t.name) + " is not in the reference"
                                        : note);
    }
  }
  if (opts.per_layer)
    for (const std::string& name : cand.order) {
      TensorDiff d;
      std::string note;
      if (Compare(cand, ref, name, &d, &note)) {
        d.is_output = outputs.count(name) > 0;
        out->layers.push_back(d);
      } else if (!note.empty()) {
        out->notes.push_back(note);
      }
    }
  for (const TensorDiff& d : out->layers)
    if (Bad(d, opts.threshold)) {
      out->first_bad = d.name;
      break;
    }
  if (out->first_bad.empty())
    for (const TensorDiff& d : out->outputs)
      if (Bad(d, opts.threshold)) {
        out->first_bad = d.name;
        break;
      }
  return Status::Ok();
}

std::string VerifyText(const VerifyResult& r, const VerifyOptions& opts) {
  std::string s = "reference: " + opts.reference_name + "\n";
  if (opts.precision != SessionOptions::Precision::kFloat32)  // the default goes unsaid
    s += "precision (.qfm): " + std::string(PrecisionName(opts.precision)) + "\n";
  s += "outputs:\n";
  for (const TensorDiff& d : r.outputs) s += DiffLine(d, opts.threshold);
  if (!r.layers.empty()) {
    s += "layers (" + std::to_string(r.layers.size()) + ", topological order):\n";
    for (const TensorDiff& d : r.layers) s += DiffLine(d, opts.threshold);
  }
  for (const std::string& n : r.notes) s += "note: " + n + "\n";
  if (r.first_bad.empty()) {
    s += "all compared tensors have cosine >= " + FloatText(opts.threshold) + "\n";
  } else {
    const TensorDiff* d = nullptr;
    for (const auto* list : {&r.layers, &r.outputs})
      for (const TensorDiff& x : *list)
        if (!d && x.name == r.first_bad) d = &x;
    s += "first bad " + std::string(r.layers.empty() ? "output" : "layer") + ": " + r.first_bad +
         (d && !d->node.empty() ? " (" + d->op_type + " '" + d->node + "')" : "") + ", cosine " +
         (d ? FloatText(d->cosine) : "?") + " < " + FloatText(opts.threshold) + "\n";
  }
  return s;
}

std::string VerifyJson(const VerifyResult& r, const VerifyOptions& opts) {
  nlohmann::json j;
  j["threshold"] = opts.threshold;
  j["seed"] = opts.seed;
  j["reference"] = opts.reference_name;
  j["precision"] = PrecisionName(opts.precision);
  j["inputs"] = nlohmann::json::array();
  for (const NamedArray& a : r.inputs)
    j["inputs"].push_back({{"name", a.name}, {"dtype", dtype_name(a.dtype)}, {"shape", a.shape}});
  j["outputs"] = nlohmann::json::array();
  for (const TensorDiff& d : r.outputs) j["outputs"].push_back(DiffJson(d, opts.threshold));
  j["layers"] = nlohmann::json::array();
  for (const TensorDiff& d : r.layers) j["layers"].push_back(DiffJson(d, opts.threshold));
  j["first_bad"] = r.first_bad.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.first_bad);
  j["notes"] = r.notes;
  return j.dump(2) + "\n";
}

std::string VerifyHtml(const VerifyResult& r, const VerifyOptions& opts, const std::string& title) {
  const std::vector<TensorDiff>& rows = r.layers.empty() ? r.outputs : r.layers;
  const double w = 960, h = 260, left = 60, right = 20, top = 20, bottom = 30;
  double ymin = opts.threshold;
  for (const TensorDiff& d : rows)
    if (std::isfinite(d.cosine)) ymin = std::min(ymin, d.cosine);
  ymin = std::max(-1.0, std::floor((ymin - 0.005) * 100) / 100);
  double emax = 0;
  for (const TensorDiff& d : rows)
    if (std::isfinite(d.rel_l2)) emax = std::max(emax, d.rel_l2);
  if (emax <= 0) emax = 1e-6;
  const size_t n = rows.size();
  auto x = [&](size_t i) {
    return left + (n <= 1 ? 0.0 : (w - left - right) * double(i) / double(n - 1));
  };
  auto ycos = [&](double c) {
    double v = std::isfinite(c) ? std::max(ymin, std::min(1.0, c)) : ymin;
    return top + (h - top - bottom) * (1.0 - (v - ymin) / (1.0 - ymin));
  };
  auto yerr = [&](double e) {
    double v = std::isfinite(e) ? std::min(emax, e) : emax;
    return top + (h - top - bottom) * (1.0 - v / emax);
  };
  auto chart = [&](const std::string& label, bool cosine) {
    std::string s = "<h2>" + label + "</h2><svg xmlns='http://www.w3.org/2000/svg' width='" +
                    FloatText(w) + "' height='" + FloatText(h) + "'>";
    s += "<rect x='" + FloatText(left) + "' y='" + FloatText(top) + "' width='" +
         FloatText(w - left - right) + "' height='" + FloatText(h - top - bottom) +
         "' fill='#fafafa' stroke='#ccc'/>";
    for (int t = 0; t <= 4; ++t) {
      double v = cosine ? ymin + (1.0 - ymin) * t / 4 : emax * t / 4;
      double y = cosine ? ycos(v) : yerr(v);
      s += "<text x='" + FloatText(left - 4) + "' y='" + FloatText(y + 4) +
           "' font-size='10' text-anchor='end'>" + FloatText(v) + "</text>";
    }
    if (cosine)
      s += "<line x1='" + FloatText(left) + "' x2='" + FloatText(w - right) + "' y1='" +
           FloatText(ycos(opts.threshold)) + "' y2='" + FloatText(ycos(opts.threshold)) +
           "' stroke='#d33' stroke-dasharray='4 3'/>";
    std::string pts;
    for (size_t i = 0; i < n; ++i)
      pts += FloatText(x(i)) + "," +
             FloatText(cosine ? ycos(rows[i].cosine) : yerr(rows[i].rel_l2)) + " ";
    s += "<polyline fill='none' stroke='#36c' stroke-width='1.5' points='" + pts + "'/>";
    for (size_t i = 0; i < n; ++i) {
      const TensorDiff& d = rows[i];
      s += "<circle cx='" + FloatText(x(i)) + "' cy='" +
           FloatText(cosine ? ycos(d.cosine) : yerr(d.rel_l2)) + "' r='3' fill='" +
           (Bad(d, opts.threshold) ? "#d33" : "#36c") + "'><title>" + HtmlEscape(d.name) + " (" +
           HtmlEscape(d.op_type) + "): cosine " + FloatText(d.cosine) + ", rel_l2 " +
           FloatText(d.rel_l2) + "</title></circle>";
    }
    return s + "</svg>";
  };
  std::string s =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + HtmlEscape(title) +
      "</title><style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}td.bad{color:#d33;"
      "font-weight:bold}</style></head><body><h1>" +
      HtmlEscape(title) + "</h1>";
  s += "<p>reference: " + HtmlEscape(opts.reference_name) +
       "; precision (.qfm): " + PrecisionName(opts.precision) +
       "; threshold (cosine): " + FloatText(opts.threshold) + "; " + std::to_string(n) +
       (r.layers.empty() ? " outputs" : " layers") + " compared; first bad: <b>" +
       (r.first_bad.empty() ? "none" : HtmlEscape(r.first_bad)) + "</b></p>";
  s += chart("Cosine similarity along the network", true);
  s += chart("Relative L2 error along the network", false);
  std::vector<const TensorDiff*> worst;
  for (const TensorDiff& d : rows) worst.push_back(&d);
  std::stable_sort(worst.begin(), worst.end(), [](const TensorDiff* a, const TensorDiff* b) {
    double ca = std::isfinite(a->cosine) ? a->cosine : -2,
           cb = std::isfinite(b->cosine) ? b->cosine : -2;
    return ca < cb;
  });
  if (worst.size() > 20) worst.resize(20);
  s += "<h2>Worst layers</h2><table><tr><th>tensor</th><th>operator</th><th>cosine</th>"
       "<th>max abs error</th><th>relative L2</th><th>max error (steps)</th></tr>";
  for (const TensorDiff* d : worst)
    s += "<tr><td>" + HtmlEscape(d->name) + "</td><td>" + HtmlEscape(d->op_type + " " + d->node) +
         "</td><td" + (Bad(*d, opts.threshold) ? " class='bad'" : "") + ">" + FloatText(d->cosine) +
         "</td><td>" + FloatText(d->max_abs) + "</td><td>" + FloatText(d->rel_l2) + "</td><td>" +
         (d->max_steps < 0 ? "" : FloatText(d->max_steps)) + "</td></tr>";
  s += "</table>";
  if (!r.notes.empty()) {
    s += "<h2>Not compared</h2><ul>";
    for (const std::string& note : r.notes) s += "<li>" + HtmlEscape(note) + "</li>";
    s += "</ul>";
  }
  return s + "</body></html>\n";
}

}  // namespace check
}  // namespace qfold
