// Integer convolutions with a float output. FoldQdq folds DQ -> Conv -> Q;
// a Conv whose 8-bit inputs come through DequantizeLinear but whose output
// stays float (a graph output in AIMET exports; NNCF leaves Conv outputs
// unquantized before BatchNormalization, SiLU or a residual Add) would run
// float. It becomes QfConvDequant instead: the int8 kernels, then
// y = float(acc) * x_scale * w_scale[m] + B[m] in the epilogue. A directly
// following inference BatchNormalization folds into a per-channel multiplier
// and the bias, then an activation into the _activation attributes (Relu,
// Clip, ..., and x * Sigmoid(x) / x * HardSigmoid(x) as Swish / HardSwish),
// when the convolution's output is read by them alone.
//
// Only what the fast kernels cover is rewritten: 1-D and 2-D convolutions,
// and MatMul/Gemm with a constant 2-D weight and a static A, which become a
// 1x1 QfConvDequant over A's rows between two Reshapes (NNCF leaves the
// classifier's Gemm float before its Softmax; AIMET makes it a graph output).
// A MatMul of two 8-bit activations (attention) becomes MatMulInteger, Cast
// and one Mul by the product of the scales.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

bool ReadFloats(const Graph& g, const std::string& name, std::vector<float>* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32) return false;
  out->resize(v->data->size() / 4);
  if (!out->empty()) std::memcpy(out->data(), v->data->data(), v->data->size());
  return true;
}

bool ReadInts(const Graph& g, const std::string& name, std::vector<int32_t>* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant()) return false;
  const uint8_t* p = v->data->data();
  const size_t bytes = v->data->size();
  out->clear();
  if (v->dtype == DType::kInt8)
    for (size_t i = 0; i < bytes; ++i) out->push_back(int8_t(p[i]));
  else if (v->dtype == DType::kUInt8)
    for (size_t i = 0; i < bytes; ++i) out->push_back(p[i]);
  else if (v->dtype == DType::kInt32)
    out->resize(bytes / 4), std::memcpy(out->data(), p, bytes);
  else
    return false;
  return true;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

class FloatOutputFolder {
 public:
  explicit FloatOutputFolder(Graph* g) : g_(*g) {}

  Status Run() {
    Index();
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (removed_[k] || !g_.nodes[k].domain.empty()) continue;
      const std::string& t = g_.nodes[k].op_type;
      if (t == "Conv") TryConv(k);
      if (t == "ConvTranspose") TryConvTranspose(k);
      if (t == "MatMul" || t == "Gemm") TryMatMul(k);
      if (t == "MatMul" && !removed_[k] && g_.nodes[k].op_type == "MatMul") TryActivationMatMul(k);
    }
    std::vector<Node> kept;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      for (Node& n : before_[k]) kept.push_back(std::move(n));
      if (!removed_[k]) kept.push_back(std::move(g_.nodes[k]));
      for (Node& n : after_[k]) kept.push_back(std::move(n));
    }
    g_.nodes = std::move(kept);
    return Status::Ok();
  }

 private:
  // Nodes emitted before / after node k when the graph is rebuilt.
  std::map<size_t, std::vector<Node>> before_, after_;

  // Built once: a rewrite updates the entries of the node it replaces
  // (Replace), so the pass stays linear in the graph size.
  void Index() {
    producer_.clear();
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs)
        if (!o.empty()) producer_[o] = k;
    consumers_ = BuildConsumers(g_);
    removed_.resize(g_.nodes.size(), false);
  }

  // Node k becomes q: its old inputs stop naming k as a reader, q's inputs
  // and outputs are indexed. Nodes a rewrite emits beside q (before_/after_)
  // read and write only names no selector looks up.
  void Replace(size_t k, Node q) {
    for (const std::string& in : g_.nodes[k].inputs) {
      auto it = consumers_.find(in);
      if (it == consumers_.end()) continue;
      auto& uses = it->second;
      uses.erase(std::remove_if(uses.begin(), uses.end(),
                                [k](const std::pair<size_t, size_t>& u) { return u.first == k; }),
                 uses.end());
    }
    for (size_t i = 0; i < q.inputs.size(); ++i)
      if (!q.inputs[i].empty()) consumers_[q.inputs[i]].emplace_back(k, i);
    for (const std::string& o : q.outputs)
      if (!o.empty()) producer_[o] = k;
    g_.nodes[k] = std::move(q);
  }

  // A DequantizeLinear of 8-bit data with constant scales (positive, finite)
  // and zero points; per tensor, or per axis `per_axis` (>= 0) with
  // `channels` values (any number when negative).
  const Node* Dq(const std::string& name, int per_axis, int64_t channels) {
    auto it = producer_.find(name);
    if (it == producer_.end() || removed_[it->second]) return nullptr;
    const Node& n = g_.nodes[it->second];
    if (n.op_type != "DequantizeLinear" || !n.domain.empty()) return nullptr;
    if (n.attrs.GetInt("block_size", 0) != 0) return nullptr;
    const Value* x = g_.Find(n.input(0));
    if (!x || !Is8Bit(x->dtype) || !x->rank_known) return nullptr;
    std::vector<float> scales;
    if (!ReadFloats(g_, n.input(1), &scales) || scales.empty()) return nullptr;
    for (float s : scales)
      if (!(s > 0) || !std::isfinite(s)) return nullptr;
    std::vector<int32_t> zps;
    if (!n.input(2).empty()) {
      const Value* zp = g_.Find(n.input(2));
      if (!zp || zp->dtype != x->dtype || !ReadInts(g_, n.input(2), &zps) ||
          zps.size() != scales.size())
        return nullptr;
    }
    if (scales.size() != 1) {
      int64_t axis = n.attrs.GetInt("axis", 1);
      if (axis < 0) axis += int64_t(x->shape.size());
      if (per_axis < 0 || axis != per_axis || (channels >= 0 && int64_t(scales.size()) != channels))
        return nullptr;
    }
    return &n;
  }

  // The float bias [m]: a float constant or a DequantizeLinear of an int32
  // constant, evaluated as ONNX Runtime's DequantizeLinear does (in float).
  bool Bias(const std::string& name, int64_t m, std::vector<float>* out) {
    out->assign(size_t(m), 0.f);
    if (name.empty()) return true;
    std::vector<float> f;
    if (ReadFloats(g_, name, &f)) {
      if (int64_t(f.size()) != m) return false;
      *out = f;
      return true;
    }
    auto it = producer_.find(name);
    if (it == producer_.end()) return false;
    const Node& dq = g_.nodes[it->second];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty()) return false;
    std::vector<int32_t> q, zp;
    std::vector<float> s;
    const Value* qv = g_.Find(dq.input(0));
    if (!qv || qv->dtype != DType::kInt32 || !ReadInts(g_, dq.input(0), &q) ||
        !ReadFloats(g_, dq.input(1), &s))
      return false;
    if (!dq.input(2).empty() && !ReadInts(g_, dq.input(2), &zp)) return false;
    if (int64_t(q.size()) != m || (s.size() != 1 && int64_t(s.size()) != m) ||
        (!zp.empty() && zp.size() != s.size()))
      return false;
    for (int64_t c = 0; c < m; ++c) {
      const size_t i = s.size() == 1 ? 0 : size_t(c);
      const int32_t z = zp.empty() ? 0 : zp[i];
      (*out)[size_t(c)] = float(q[size_t(c)] - z) * s[i];
    }
    return true;
  }

  // The node that alone reads `name` (not a graph output), or SIZE_MAX.
  size_t SoleConsumer(const std::string& name) {
    if (g_.IsGraphOutput(name)) return SIZE_MAX;
    auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1 || it->second[0].second != 0)
      return SIZE_MAX;
    const size_t k = it->second[0].first;
    return removed_[k] || !g_.nodes[k].domain.empty() ? SIZE_MAX : k;
  }

  std::string Int64s(const std::string& base, const std::vector<int64_t>& v) {
    std::vector<uint8_t> b(v.size() * 8);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return g_.AddConstant(base, DType::kInt64, {int64_t(v.size())}, std::move(b));
  }

  Value& NewValue(const std::string& base, DType dtype, const Shape& shape) {
    const std::string name = g_.UniqueName(base);
    Value& v = g_.values[name];
    v.name = name;
    v.dtype = dtype;
    v.rank_known = true;
    v.shape = shape;
    return v;
  }

  // MatMul / Gemm (transA 0) of a per-tensor 8-bit A with static shape and a
  // constant 8-bit B [K, N] (Gemm transB: [N, K]) quantized per tensor or per
  // column, float output: Reshape A to [R, K, 1, 1], QfConvDequant with W [N,
  // K, 1, 1] (Gemm's alpha in its scales, beta * C its bias), Reshape back.
  void TryMatMul(size_t k) {
    const Node& mm = g_.nodes[k];
    const bool gemm = mm.op_type == "Gemm";
    if (mm.outputs.size() != 1 || mm.attrs.Has("_activation")) return;
    if (gemm && mm.attrs.GetInt("transA", 0) != 0) return;
    const bool trans_b = gemm && mm.attrs.GetInt("transB", 0) != 0;
    const Node* dqb = Dq(mm.input(1), trans_b ? 0 : 1, -1);
    const Node* dqa = Dq(mm.input(0), -1, 0);
    if (!dqa || !dqb) return;
    const Value* a = g_.Find(dqa->input(0));
    const Value* b = g_.Find(dqb->input(0));
    const Value* y = g_.Find(mm.outputs[0]);
    if (!b || !b->is_constant() || b->shape.size() != 2 || !y || y->dtype != DType::kFloat32 ||
        !y->rank_known || !a->rank_known || a->shape.empty())
      return;
    for (int64_t d : a->shape)
      if (d < 0) return;
    for (int64_t d : y->shape)
      if (d < 0) return;
    const int64_t kdim = trans_b ? b->shape[1] : b->shape[0];
    const int64_t n = trans_b ? b->shape[0] : b->shape[1];
    if (a->shape.back() != kdim || kdim <= 0 || n <= 0) return;
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < a->shape.size(); ++i) rows *= a->shape[i];
    if (rows * n != [&] {
          int64_t e = 1;
          for (int64_t d : y->shape) e *= d;
          return e;
        }())
      return;
    std::vector<float> ws;
    ReadFloats(g_, dqb->input(1), &ws);
    if (ws.size() != 1 && int64_t(ws.size()) != n) return;
    const float alpha = gemm ? mm.attrs.GetFloat("alpha", 1.f) : 1.f;
    const float beta = gemm ? mm.attrs.GetFloat("beta", 1.f) : 1.f;
    if (!(alpha > 0)) return;
    std::vector<float> bias(size_t(n), 0.f);
    if (gemm && !mm.input(2).empty()) {
      std::vector<float> c;
      if (!ReadFloats(g_, mm.input(2), &c) || (c.size() != 1 && int64_t(c.size()) != n)) return;
      const Value* cv = g_.Find(mm.input(2));
      if (cv->shape.size() > 1 && cv->shape[0] != 1) return;  // not a row vector
      for (int64_t j = 0; j < n; ++j) bias[size_t(j)] = beta * c[c.size() == 1 ? 0 : size_t(j)];
    }
    // W [N, K, 1, 1] in B's dtype; weight scales times alpha, one per column.
    const uint8_t* src = b->data->data();
    std::vector<uint8_t> w(size_t(n * kdim));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < kdim; ++i)
        w[size_t(j * kdim + i)] = trans_b ? src[j * kdim + i] : src[i * n + j];
    std::vector<float> scales(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) scales[size_t(j)] = ws[ws.size() == 1 ? 0 : size_t(j)] * alpha;
    std::vector<int32_t> zps;
    if (!dqb->input(2).empty()) ReadInts(g_, dqb->input(2), &zps);
    std::vector<uint8_t> zp_bytes(size_t(n), 0);
    for (int64_t j = 0; j < n; ++j)
      zp_bytes[size_t(j)] = uint8_t(zps.empty() ? 0 : zps[zps.size() == 1 ? 0 : size_t(j)]);

    const std::string base = mm.name.empty() ? mm.outputs[0] : mm.name;
    Value& a4 = NewValue(dqa->input(0) + "_rows", a->dtype, {rows, kdim, 1, 1});
    Value& y4 = NewValue(mm.outputs[0] + "_rows", DType::kFloat32, {rows, n, 1, 1});
    const std::string a4n = a4.name, y4n = y4.name;
    Node ra;
    ra.op_type = "Reshape";
    ra.name = g_.UniqueName(base + "_rows");
    ra.inputs = {dqa->input(0), Int64s(base + "_rows_shape", {rows, kdim, 1, 1})};
    ra.outputs = {a4n};
    Node q;
    q.op_type = "QfConvDequant";
    q.name = base;
    q.attrs.SetInts("kernel_shape", {1, 1});
    q.inputs = {a4n,
                dqa->input(1),
                ZeroPoint(*dqa, base + "_x"),
                g_.AddConstant(base + "_w_1x1", b->dtype, {n, kdim, 1, 1}, std::move(w)),
                g_.AddConstant(base + "_w_scale", DType::kFloat32, {n}, FloatBytes(scales)),
                g_.AddConstant(base + "_w_zero_point", b->dtype, {n}, std::move(zp_bytes))};
    bool any_bias = false;
    for (float v : bias) any_bias |= v != 0.f;
    if (any_bias)
      q.inputs.push_back(g_.AddConstant(base + "_bias_f", DType::kFloat32, {n}, FloatBytes(bias)));
    q.outputs = {y4n};
    Node ry;
    ry.op_type = "Reshape";
    ry.name = g_.UniqueName(base + "_restore");
    ry.inputs = {y4n, Int64s(base + "_out_shape", y->shape)};
    ry.outputs = mm.outputs;
    SetQuant(*dqa, -1);
    SetQuant(*dqb, trans_b ? 0 : 1);
    if (Value* v = g_.Find(a4n)) v->quant = g_.Find(dqa->input(0))->quant;
    before_[k].push_back(std::move(ra));
    after_[k].push_back(std::move(ry));
    Replace(k, std::move(q));
  }

  // A ConvTranspose whose kernel equals its stride (LowerConvTranspose's
  // case: the learned 2x upsampling of detection heads) with a per-tensor
  // 8-bit input, a constant 8-bit weight quantized per tensor or per output
  // channel (axis 1) and a float output (NNCF leaves it float before a
  // residual Add): QfConvDequant 1x1 to k*k*M channels, then
  // DepthToSpace(DCR). Each output sums the same C products exactly.
  void TryConvTranspose(size_t k) {
    const Node& ct = g_.nodes[k];
    if (ct.outputs.size() != 1 || ct.attrs.Has("_activation") || ct.inputs.size() < 2) return;
    const Node* dqx = Dq(ct.input(0), -1, 0);
    const Node* dqw = Dq(ct.input(1), 1, -1);
    if (!dqx || !dqw) return;
    const Value* x = g_.Find(dqx->input(0));
    const Value* w = g_.Find(dqw->input(0));
    const Value* y = g_.Find(ct.outputs[0]);
    if (!x || !w || !w->is_constant() || !y || y->dtype != DType::kFloat32 || !x->rank_known ||
        x->shape.size() != 4 || w->shape.size() != 4 ||
        !ConvTransposeIsConv1x1(ct.attrs, x->shape, w->shape))
      return;
    const int64_t c = w->shape[0], m = w->shape[1], kk = w->shape[2], out_c = kk * kk * m;
    dqw = Dq(ct.input(1), 1, m);
    std::vector<float> bias;
    if (!dqw || !Bias(ct.input(2), m, &bias)) return;
    std::vector<float> ws;
    std::vector<int32_t> wz;
    ReadFloats(g_, dqw->input(1), &ws);
    if (!dqw->input(2).empty()) ReadInts(g_, dqw->input(2), &wz);
    // Output channel (ky, kx, m) takes channel m's scale, zero point and bias.
    std::vector<float> scales(static_cast<size_t>(out_c)), tiled_bias(static_cast<size_t>(out_c));
    std::vector<uint8_t> zps(static_cast<size_t>(out_c));
    bool any_bias = false;
    for (int64_t t = 0; t < kk * kk; ++t)
      for (int64_t mi = 0; mi < m; ++mi) {
        const size_t j = size_t(t * m + mi), i = ws.size() == 1 ? 0 : size_t(mi);
        scales[j] = ws[i];
        zps[j] = uint8_t(wz.empty() ? 0 : wz[i]);
        tiled_bias[j] = bias[size_t(mi)];
        any_bias |= bias[size_t(mi)] != 0.f;
      }
    const std::string base = ct.name.empty() ? ct.outputs[0] : ct.name;
    const std::string depth = NewValue(ct.outputs[0] + "_depth", DType::kFloat32,
                                       {x->shape[0], out_c, x->shape[2], x->shape[3]})
                                  .name;
    Node q;
    q.op_type = "QfConvDequant";
    q.name = base;
    q.attrs.SetInts("kernel_shape", {1, 1});
    q.inputs = {
        dqx->input(0),
        dqx->input(1),
        ZeroPoint(*dqx, base + "_x"),
        g_.AddConstant(base + "_w_1x1", w->dtype, {out_c, c, 1, 1},
                       ConvTransposeWeightsAsConv1x1(w->data->data(), c, m, kk, 1)),
        g_.AddConstant(base + "_w_scale_tiled", DType::kFloat32, {out_c}, FloatBytes(scales)),
        g_.AddConstant(base + "_w_zero_point_tiled", w->dtype, {out_c}, std::move(zps))};
    if (any_bias)
      q.inputs.push_back(
          g_.AddConstant(base + "_bias_f", DType::kFloat32, {out_c}, FloatBytes(tiled_bias)));
    q.outputs = {depth};
    Node d2s;
    d2s.op_type = "DepthToSpace";
    d2s.name = g_.UniqueName(base + "_depth_to_space");
    d2s.inputs = {depth};
    d2s.outputs = ct.outputs;
    d2s.attrs.SetInt("blocksize", kk);
    d2s.attrs.SetString("mode", "DCR");
    SetQuant(*dqx, -1);
    after_[k].push_back(std::move(d2s));
    Replace(k, std::move(q));
  }

  // MatMul of two per-tensor 8-bit activations with a float output
  // (attention's Q.K^T and P.V when NNCF leaves the product unquantized):
  // MatMulInteger, Cast, and one Mul by a_scale * b_scale. The sums are
  // exact in int32; the float graph rounds every product and partial sum.
  void TryActivationMatMul(size_t k) {
    const Node& mm = g_.nodes[k];
    if (mm.outputs.size() != 1 || mm.attrs.Has("_activation")) return;
    const Node* dqa = Dq(mm.input(0), -1, 0);
    const Node* dqb = Dq(mm.input(1), -1, 0);
    if (!dqa || !dqb) return;
    const Value* b = g_.Find(dqb->input(0));
    const Value* y = g_.Find(mm.outputs[0]);
    if (!b || b->is_constant() || !y || y->dtype != DType::kFloat32 || !y->rank_known) return;
    std::vector<float> sa, sb;
    if (!ReadFloats(g_, dqa->input(1), &sa) || !ReadFloats(g_, dqb->input(1), &sb)) return;
    const std::string base = mm.name.empty() ? mm.outputs[0] : mm.name;
    const std::string acc = NewValue(mm.outputs[0] + "_int32", DType::kInt32, y->shape).name;
    const std::string accf =
        NewValue(mm.outputs[0] + "_int32_float", DType::kFloat32, y->shape).name;
    Node mi;
    mi.op_type = "MatMulInteger";
    mi.name = base;
    mi.inputs = {dqa->input(0), dqb->input(0), ZeroPoint(*dqa, base + "_a"),
                 ZeroPoint(*dqb, base + "_b")};
    mi.outputs = {acc};
    Node cast;
    cast.op_type = "Cast";
    cast.name = g_.UniqueName(base + "_to_float");
    cast.attrs.SetInt("to", 1);  // FLOAT
    cast.inputs = {acc};
    cast.outputs = {accf};
    Node mul;
    mul.op_type = "Mul";
    mul.name = g_.UniqueName(base + "_scale");
    mul.inputs = {accf, g_.AddConstant(base + "_ab_scale", DType::kFloat32, {},
                                       FloatBytes(std::vector<float>{sa[0] * sb[0]}))};
    mul.outputs = mm.outputs;
    SetQuant(*dqa, -1);
    SetQuant(*dqb, -1);
    after_[k].push_back(std::move(cast));
    after_[k].push_back(std::move(mul));
    Replace(k, std::move(mi));
  }

  void TryConv(size_t k) {
    const Node& cv = g_.nodes[k];
    if (cv.outputs.size() != 1 || cv.attrs.Has("_activation")) return;
    const Node* dqw = Dq(cv.input(1), 0, -1);
    if (!dqw) return;
    const Value* w = g_.Find(dqw->input(0));
    if (!w || !w->is_constant() || (w->shape.size() != 3 && w->shape.size() != 4)) return;
    const int64_t m = w->shape[0];
    dqw = Dq(cv.input(1), 0, m);
    const Node* dqx = Dq(cv.input(0), -1, 0);
    // A depthwise input quantized per channel (NNCF): its scales move into the
    // weight scales, the input scale becomes 1 (one zero point for all).
    const bool depthwise = w->shape[1] == 1 && cv.attrs.GetInt("group", 1) == m;
    std::string x_scale, w_scale, x_zp;
    if (!dqx && depthwise && (dqx = Dq(cv.input(0), 1, m)) != nullptr && dqw) {
      std::vector<float> xs, ws;
      std::vector<int32_t> zps;
      ReadFloats(g_, dqx->input(1), &xs);
      ReadFloats(g_, dqw->input(1), &ws);
      if (!dqx->input(2).empty()) ReadInts(g_, dqx->input(2), &zps);
      for (int32_t z : zps)
        if (z != zps[0]) return;
      for (int64_t c = 0; c < m; ++c) xs[size_t(c)] *= ws[ws.size() == 1 ? 0 : size_t(c)];
      x_scale = g_.AddConstant(cv.name + "_x_scale_moved", DType::kFloat32, {},
                               FloatBytes(std::vector<float>{1.f}));
      w_scale = g_.AddConstant(cv.name + "_w_scale_times_x", DType::kFloat32, {m}, FloatBytes(xs));
      const DType xt = g_.Find(dqx->input(0))->dtype;
      x_zp = g_.AddConstant(cv.name + "_x_zero_point_moved", xt, {},
                            std::vector<uint8_t>(1, uint8_t(zps.empty() ? 0 : zps[0])));
    }
    const Value* y = g_.Find(cv.outputs[0]);
    if (!dqw || !dqx || !y || y->dtype != DType::kFloat32) return;
    std::vector<float> bias;
    if (!Bias(cv.input(2), m, &bias)) return;

    Node q;
    q.op_type = "QfConvDequant";
    q.name = cv.name;
    q.attrs = cv.attrs;
    q.inputs = {dqx->input(0),
                x_scale.empty() ? dqx->input(1) : x_scale,
                x_zp.empty() ? ZeroPoint(*dqx, cv.name + "_x") : x_zp,
                dqw->input(0),
                w_scale.empty() ? dqw->input(1) : w_scale,
                ZeroPoint(*dqw, cv.name + "_w"),
                "",
                ""};
    q.outputs = cv.outputs;
    std::vector<float> out_scale;
    FoldFollowers(&q, m, &bias, &out_scale);
    bool any_bias = false;
    for (float b : bias) any_bias |= b != 0.f;
    if (any_bias)
      q.inputs[6] = g_.AddConstant(cv.name + "_bias_f", DType::kFloat32, {m}, FloatBytes(bias));
    if (!out_scale.empty())
      q.inputs[7] =
          g_.AddConstant(cv.name + "_out_scale", DType::kFloat32, {m}, FloatBytes(out_scale));
    while (!q.inputs.empty() && q.inputs.back().empty()) q.inputs.pop_back();
    SetQuant(*dqx, 1);  // per tensor, or the depthwise input's channel axis
    SetQuant(*dqw, 0);
    Replace(k, std::move(q));
  }

  // Records the integer tensor's quantization (the .qfm carries it).
  void SetQuant(const Node& dq, int axis) {
    Value* v = g_.Find(dq.input(0));
    if (!v || v->quant) return;
    auto info = std::make_shared<QuantInfo>();
    ReadFloats(g_, dq.input(1), &info->scales);
    if (!dq.input(2).empty()) ReadInts(g_, dq.input(2), &info->zero_points);
    info->zero_points.resize(info->scales.size(),
                             info->zero_points.empty() ? 0 : info->zero_points[0]);
    info->axis = info->scales.size() == 1 ? -1 : axis;
    v->quant = info;
  }

  std::string ZeroPoint(const Node& dq, const std::string& base) {
    if (!dq.input(2).empty()) return dq.input(2);
    return g_.AddConstant(base + "_zero_point", g_.Find(dq.input(0))->dtype, {},
                          std::vector<uint8_t>(1, 0));
  }

  // Folds a BatchNormalization, then an activation, reading q's output alone.
  void FoldFollowers(Node* q, int64_t m, std::vector<float>* bias, std::vector<float>* out_scale) {
    size_t bn_k = SoleConsumer(q->outputs[0]);
    if (bn_k != SIZE_MAX && FoldBatchNorm(g_.nodes[bn_k], m, bias, out_scale)) {
      Absorb(q, bn_k);
    }
    if (FoldGatedActivation(q)) return;
    const size_t act_k = SoleConsumer(q->outputs[0]);
    if (act_k == SIZE_MAX || g_.nodes[act_k].outputs.size() != 1) return;
    AttrMap attrs = q->attrs;
    if (!FusedActivationAttrs(g_, g_.nodes[act_k], &attrs)) return;
    q->attrs = std::move(attrs);
    Absorb(q, act_k);
  }

  // y * Sigmoid(y) (SiLU, NNCF's YOLO-style models) or y * HardSigmoid(y)
  // with alpha 1/6, beta 1/2 (HardSwish as exporters spell it): y read by
  // exactly the gate and the Mul, the gate by the Mul alone.
  bool FoldGatedActivation(Node* q) {
    const std::string y = q->outputs[0];
    auto it = consumers_.find(y);
    if (g_.IsGraphOutput(y) || it == consumers_.end() || it->second.size() != 2) return false;
    size_t gate_k = SIZE_MAX, mul_k = SIZE_MAX;
    for (const auto& use : it->second) {
      const Node& n = g_.nodes[use.first];
      if (removed_[use.first] || !n.domain.empty() || n.outputs.size() != 1) return false;
      if ((n.op_type == "Sigmoid" || n.op_type == "HardSigmoid") && use.second == 0)
        gate_k = use.first;
      else if (n.op_type == "Mul")
        mul_k = use.first;
    }
    if (gate_k == SIZE_MAX || mul_k == SIZE_MAX) return false;
    const Node& gate = g_.nodes[gate_k];
    const Node& mul = g_.nodes[mul_k];
    const std::string& gated = gate.outputs[0];
    if (!((mul.input(0) == y && mul.input(1) == gated) ||
          (mul.input(1) == y && mul.input(0) == gated)) ||
        SoleConsumer(gated) != mul_k)
      return false;
    if (gate.op_type == "HardSigmoid" &&
        (std::abs(gate.attrs.GetFloat("alpha", 0.2f) - 1.f / 6.f) > 1e-6f ||
         gate.attrs.GetFloat("beta", 0.5f) != 0.5f))
      return false;
    q->attrs.SetString("_activation", gate.op_type == "Sigmoid" ? "Swish" : "HardSwish");
    g_.values.erase(gated);
    removed_[gate_k] = true;
    Absorb(q, mul_k);
    return true;
  }

  // y = (x - mean) * gamma / sqrt(var + eps) + beta = x * a + (beta - mean * a).
  bool FoldBatchNorm(const Node& bn, int64_t m, std::vector<float>* bias,
                     std::vector<float>* out_scale) {
    if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 ||
        bn.attrs.GetInt("training_mode", 0) != 0)
      return false;
    for (size_t i = 1; i < bn.outputs.size(); ++i)
      if (!bn.outputs[i].empty()) return false;
    std::vector<float> gamma, beta, mean, var;
    if (!ReadFloats(g_, bn.inputs[1], &gamma) || !ReadFloats(g_, bn.inputs[2], &beta) ||
        !ReadFloats(g_, bn.inputs[3], &mean) || !ReadFloats(g_, bn.inputs[4], &var))
      return false;
    const size_t n = size_t(m);
    if (gamma.size() != n || beta.size() != n || mean.size() != n || var.size() != n) return false;
    const double eps = bn.attrs.GetFloat("epsilon", 1e-5f);
    out_scale->resize(n);
    for (size_t c = 0; c < n; ++c) {
      const double a = double(gamma[c]) / std::sqrt(double(var[c]) + eps);
      (*out_scale)[c] = float(a);
      (*bias)[c] = float((double((*bias)[c]) - mean[c]) * a + beta[c]);
    }
    return true;
  }

  // q takes over node k's output; k is dropped.
  void Absorb(Node* q, size_t k) {
    g_.values.erase(q->outputs[0]);
    q->outputs = {g_.nodes[k].outputs[0]};
    removed_[k] = true;
  }

  Graph& g_;
  std::map<std::string, size_t> producer_;
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> consumers_;
  std::vector<bool> removed_;
};

}  // namespace

Status FoldQdqFloatOutput(Graph* g) {
  return FloatOutputFolder(g).Run();
}

}  // namespace conv
}  // namespace qfold
