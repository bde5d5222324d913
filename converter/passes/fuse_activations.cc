// A Conv or ConvTranspose followed by Mul and Add by constants per output
// channel (or scalars: the "learnable affine" blocks of PP-LCNet) and inference
// BatchNormalizations (a detection head's ConvTranspose, bias Add, BN) folds
// them into its weights and bias; a BatchNormalization followed by them into its scale and B.
// Activations spelled as several elementwise nodes become one node (one pass over memory, the
// vectorized kernel): x * Sigmoid(x) (SiLU, also with Sigmoid(alpha * x)) -> Swish, x *
// HardSigmoid(x) with alpha 1/6, beta 1/2 and x
// * Clip(x + 3, 0, 6) / 6 -> HardSwish, 0.5 x (1 + Erf(x / sqrt2)) -> Gelu. Then a linear op (or
// BatchNormalization) followed by a pointwise activation becomes one node with the activation
// applied to its output in the same pass over memory, and Mul/Add by scalars after that
// activation join it ("_act_scale", "_act_shift").
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {
bool ScalarFloat(const Graph& g, const std::string& name, float* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32 || v->data->size() != 4) return false;
  std::memcpy(out, v->data->data(), 4);
  return true;
}

// Matches the multi-node activations ending at one node. Intermediate values
// must be read by the next node of the pattern alone (and not be graph
// outputs); the pattern's input x may have other readers.
class GatedActivationMatcher {
 public:
  explicit GatedActivationMatcher(Graph* g) : g_(*g), consumers_(BuildConsumers(*g)) {
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs) producer_[o] = k;
    removed_.assign(g_.nodes.size(), false);
  }

  void Run() {
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (removed_[k]) continue;
      Node& n = g_.nodes[k];
      if (!n.domain.empty() || n.outputs.size() != 1 || !IsFloat32(n.outputs[0])) continue;
      std::vector<size_t> chain;
      std::string x;
      if (MatchSwish(k, &x, &chain)) continue;  // rewritten inside (alpha)
      if (MatchHardSigmoidGate(k, &x, &chain) || MatchClipHardSwish(k, &x, &chain)) {
        Rewrite(k, "HardSwish", x, chain);
      } else if (MatchErfGelu(k, &x, &chain)) {
        Rewrite(k, "Gelu", x, chain);
      }
    }
    std::vector<Node> kept;
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      if (!removed_[k]) kept.push_back(std::move(g_.nodes[k]));
    g_.nodes = std::move(kept);
  }

 private:
  bool IsFloat32(const std::string& name) const {
    const Value* v = g_.Find(name);
    return v && v->dtype == DType::kFloat32;
  }

  // The node producing `name` when `name` is read by node `reader` alone, of
  // type `op` (default domain, one output); SIZE_MAX otherwise.
  size_t SoleProducer(const std::string& name, size_t reader, const char* op) const {
    auto p = producer_.find(name);
    if (p == producer_.end() || removed_[p->second] || g_.IsGraphOutput(name)) return SIZE_MAX;
    const Node& n = g_.nodes[p->second];
    if (n.op_type != op || !n.domain.empty() || n.outputs.size() != 1) return SIZE_MAX;
    auto c = consumers_.find(name);
    if (c == consumers_.end() || c->second.size() != 1 || c->second[0].first != reader)
      return SIZE_MAX;
    return p->second;
  }

  // A float scalar constant (any rank, one element) within 1e-6 relative of `want`.
  bool ConstNear(const std::string& name, float want) const {
    float v;
    const Value* c = g_.Find(name);
    if (!c || !c->is_constant() || c->dtype != DType::kFloat32 || c->data->size() != 4)
      return false;
    std::memcpy(&v, c->data->data(), 4);
    return std::fabs(v - want) <= 1e-6f * std::fabs(want);
  }
  bool ScalarConst(const std::string& name, float* out) const {
    const Value* c = g_.Find(name);
    if (!c || !c->is_constant() || c->dtype != DType::kFloat32 || c->data->size() != 4)
      return false;
    std::memcpy(out, c->data->data(), 4);
    return true;
  }

  // For a commutative two-input node: calls f(a, b) with both orders.
  template <class F>
  static bool EitherOrder(const Node& n, F f) {
    return n.inputs.size() == 2 && (f(n.inputs[0], n.inputs[1]) || f(n.inputs[1], n.inputs[0]));
  }

  // Mul(x, Sigmoid(x)) or Mul(x, Sigmoid(Mul(x, alpha))).
  bool MatchSwish(size_t k, std::string* x, std::vector<size_t>* chain) {
    const Node& mul = g_.nodes[k];
    if (mul.op_type != "Mul") return false;
    float alpha = 1.f;
    const bool ok = EitherOrder(mul, [&](const std::string& a, const std::string& b) {
      const size_t sig = SoleProducer(b, k, "Sigmoid");
      if (sig == SIZE_MAX) return false;
      const std::string& t = g_.nodes[sig].input(0);
      chain->assign({sig});
      alpha = 1.f;
      if (t == a) return true;
      const size_t scale = SoleProducer(t, sig, "Mul");
      if (scale == SIZE_MAX) return false;
      return EitherOrder(g_.nodes[scale], [&](const std::string& u, const std::string& c) {
        if (u != a || !ScalarConst(c, &alpha) || !std::isfinite(alpha)) return false;
        chain->push_back(scale);
        return true;
      });
    });
    if (!ok) return false;
    *x = mul.inputs[0] == g_.nodes[(*chain)[0]].outputs[0] ? mul.inputs[1] : mul.inputs[0];
    Rewrite(k, "Swish", *x, *chain);
    g_.nodes[k].attrs.SetFloat("alpha", alpha);
    return true;
  }

  // Mul(x, HardSigmoid(x)) with alpha 1/6, beta 1/2.
  bool MatchHardSigmoidGate(size_t k, std::string* x, std::vector<size_t>* chain) {
    const Node& mul = g_.nodes[k];
    if (mul.op_type != "Mul") return false;
    return EitherOrder(mul, [&](const std::string& a, const std::string& b) {
      const size_t hs = SoleProducer(b, k, "HardSigmoid");
      if (hs == SIZE_MAX || g_.nodes[hs].input(0) != a) return false;
      const AttrMap& at = g_.nodes[hs].attrs;
      if (std::fabs(at.GetFloat("alpha", 0.2f) - 1.f / 6.f) > 1e-6f ||
          at.GetFloat("beta", 0.5f) != 0.5f)
        return false;
      *x = a;
      chain->assign({hs});
      return true;
    });
  }

  // Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6), or the last step as Mul by 1/6.
  bool MatchClipHardSwish(size_t k, std::string* x, std::vector<size_t>* chain) {
    const Node& last = g_.nodes[k];
    std::string prod;
    if (last.op_type == "Div" && last.inputs.size() == 2 && ConstNear(last.inputs[1], 6.f)) {
      prod = last.inputs[0];
    } else if (last.op_type == "Mul") {
      EitherOrder(last, [&](const std::string& a, const std::string& c) {
        if (!ConstNear(c, 1.f / 6.f)) return false;
        prod = a;
        return true;
      });
    }
    if (prod.empty()) return false;
    const size_t mul = SoleProducer(prod, k, "Mul");
    if (mul == SIZE_MAX) return false;
    return EitherOrder(g_.nodes[mul], [&](const std::string& a, const std::string& b) {
      const size_t clip = SoleProducer(b, mul, "Clip");
      if (clip == SIZE_MAX) return false;
      const Node& c = g_.nodes[clip];
      if (c.inputs.size() != 3 || !ConstNear(c.inputs[1], 0.f) || !ConstNear(c.inputs[2], 6.f))
        return false;
      // ConstNear(0) accepts only an exact 0 (the tolerance scales with it).
      const size_t add = SoleProducer(c.inputs[0], clip, "Add");
      if (add == SIZE_MAX) return false;
      return EitherOrder(g_.nodes[add], [&](const std::string& u, const std::string& three) {
        if (u != a || !ConstNear(three, 3.f)) return false;
        *x = a;
        chain->assign({mul, clip, add});
        return true;
      });
    });
  }

  // Add(Erf(x / sqrt2), 1): the Add's index, x set.
  size_t MatchOnePlusErf(const std::string& name, size_t reader, std::string* x,
                         std::vector<size_t>* chain) {
    const size_t add = SoleProducer(name, reader, "Add");
    if (add == SIZE_MAX) return SIZE_MAX;
    bool ok = EitherOrder(g_.nodes[add], [&](const std::string& e, const std::string& one) {
      if (!ConstNear(one, 1.f)) return false;
      const size_t erf = SoleProducer(e, add, "Erf");
      if (erf == SIZE_MAX) return false;
      const std::string& t = g_.nodes[erf].input(0);
      const size_t div = SoleProducer(t, erf, "Div");
      if (div != SIZE_MAX && g_.nodes[div].inputs.size() == 2 &&
          ConstNear(g_.nodes[div].inputs[1], 1.41421356f)) {
        *x = g_.nodes[div].inputs[0];
        chain->insert(chain->end(), {add, erf, div});
        return true;
      }
      const size_t mul = SoleProducer(t, erf, "Mul");
      if (mul == SIZE_MAX) return false;
      return EitherOrder(g_.nodes[mul], [&](const std::string& u, const std::string& c) {
        if (!ConstNear(c, 0.70710678f)) return false;
        *x = u;
        chain->insert(chain->end(), {add, erf, mul});
        return true;
      });
    });
    return ok ? add : SIZE_MAX;
  }

  // Mul(Mul(x, 1 + Erf(x / sqrt2)), 0.5) or Mul(Mul(x, 0.5), 1 + Erf(x / sqrt2)).
  bool MatchErfGelu(size_t k, std::string* x, std::vector<size_t>* chain) {
    const Node& last = g_.nodes[k];
    if (last.op_type != "Mul") return false;
    return EitherOrder(last, [&](const std::string& a, const std::string& b) {
      chain->clear();
      if (ConstNear(b, 0.5f)) {  // 0.5 * (x * (1 + erf))
        const size_t m = SoleProducer(a, k, "Mul");
        if (m == SIZE_MAX) return false;
        return EitherOrder(g_.nodes[m], [&](const std::string& u, const std::string& v) {
          chain->assign({m});
          std::string xe;
          return MatchOnePlusErf(v, m, &xe, chain) != SIZE_MAX && xe == u && (*x = u, true);
        });
      }
      // (x * 0.5) * (1 + erf)
      const size_t h = SoleProducer(a, k, "Mul");
      if (h == SIZE_MAX) return false;
      return EitherOrder(g_.nodes[h], [&](const std::string& u, const std::string& half) {
        if (!ConstNear(half, 0.5f)) return false;
        chain->assign({h});
        std::string xe;
        return MatchOnePlusErf(b, k, &xe, chain) != SIZE_MAX && xe == u && (*x = u, true);
      });
    });
  }

  // Node k becomes `op`(x); the chain's nodes and values go.
  void Rewrite(size_t k, const char* op, const std::string& x, const std::vector<size_t>& chain) {
    Node& n = g_.nodes[k];
    n.op_type = op;
    n.inputs = {x};
    n.attrs = AttrMap();
    for (size_t c : chain) {
      removed_[c] = true;
      g_.values.erase(g_.nodes[c].outputs[0]);
    }
  }

  Graph& g_;
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> consumers_;
  std::unordered_map<std::string, size_t> producer_;
  std::vector<bool> removed_;
};

// A constant float32 per-output-channel vector of a Conv whose output has
// rank `rank` and `m` channels: one element, or m elements along axis 1 (a
// shape such as [1,m,1,1] or [m,1,1]) that broadcasting does not widen.
bool ChannelConst(const Graph& g, const std::string& name, int rank, int64_t m,
                  std::vector<float>* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32 || int(v->shape.size()) > rank)
    return false;
  const int64_t n = int64_t(v->data->size() / 4);
  if (n != 1) {
    if (n != m) return false;
    const int off = rank - int(v->shape.size());
    for (int i = 0; i < int(v->shape.size()); ++i)
      if (v->shape[size_t(i)] != (i + off == 1 ? m : 1)) return false;
  }
  std::vector<float> vals(static_cast<size_t>(n));
  std::memcpy(vals.data(), v->data->data(), size_t(n) * 4);
  for (float f : vals)
    if (!std::isfinite(f)) return false;
  out->assign(size_t(m), vals[0]);
  if (n == m) *out = vals;
  return true;
}

bool FloatVector(const Graph& g, const std::string& name, int64_t m, std::vector<float>* out) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant() || v->dtype != DType::kFloat32 || int64_t(v->data->size()) != m * 4)
    return false;
  out->resize(size_t(m));
  std::memcpy(out->data(), v->data->data(), size_t(m) * 4);
  return true;
}

// Follows Mul/Add by channel constants and inference BatchNormalizations
// from `out` while each value has one reader, folding them into
// y = x * scale + bias (both m-vectors). Returns
// the chain's nodes; *out becomes its last value.
std::vector<size_t> CollectChannelAffine(
    const Graph& g,
    const std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>>& consumers,
    const std::vector<bool>& removed, int rank, int64_t m, std::string* out,
    std::vector<float>* scale, std::vector<float>* bias) {
  std::vector<size_t> chain;
  for (;;) {
    auto it = consumers.find(*out);
    if (g.IsGraphOutput(*out) || it == consumers.end() || it->second.size() != 1) break;
    const size_t nk = it->second[0].first;
    const Node& n = g.nodes[nk];
    if (!removed[nk] && n.domain.empty() && n.op_type == "BatchNormalization" &&
        n.outputs.size() == 1 && n.inputs.size() == 5 && n.inputs[0] == *out &&
        n.attrs.GetInt("training_mode", 0) == 0) {
      // Inference BatchNormalization is x * s + (beta - mean * s) per channel,
      // s = gamma / sqrt(var + eps) (in double, rounded once, as FuseConvBatchNorm).
      std::vector<float> gamma, beta, mean, var;
      if (!FloatVector(g, n.inputs[1], m, &gamma) || !FloatVector(g, n.inputs[2], m, &beta) ||
          !FloatVector(g, n.inputs[3], m, &mean) || !FloatVector(g, n.inputs[4], m, &var))
        break;
      const double eps = n.attrs.GetFloat("epsilon", 1e-5f);
      for (int64_t o = 0; o < m; ++o) {
        const size_t i = size_t(o);
        const float sc = float(double(gamma[i]) / std::sqrt(double(var[i]) + eps));
        (*scale)[i] *= sc;
        (*bias)[i] = float((double((*bias)[i]) - mean[i]) * sc + beta[i]);
      }
      chain.push_back(nk);
      *out = n.outputs[0];
      continue;
    }
    if (removed[nk] || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 2 ||
        (n.op_type != "Mul" && n.op_type != "Add"))
      break;
    const std::string& other = n.inputs[0] == *out ? n.inputs[1] : n.inputs[0];
    std::vector<float> c;
    if (other == *out || !ChannelConst(g, other, rank, m, &c)) break;
    for (int64_t o = 0; o < m; ++o) {
      if (n.op_type == "Mul") {
        (*scale)[size_t(o)] *= c[size_t(o)];
        (*bias)[size_t(o)] *= c[size_t(o)];
      } else {
        (*bias)[size_t(o)] += c[size_t(o)];
      }
    }
    chain.push_back(nk);
    *out = n.outputs[0];
  }
  return chain;
}

std::string FloatConstant(Graph* g, const std::string& name, const Shape& shape,
                          const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return g->AddConstant(name, DType::kFloat32, shape, std::move(bytes));
}

// The chain's nodes are removed and the node writes the chain's last value.
void TakeOverChain(Graph* g, Node* n, const std::vector<size_t>& chain, const std::string& out,
                   std::vector<bool>* removed) {
  g->values.erase(n->outputs[0]);
  for (size_t c : chain) {
    (*removed)[c] = true;
    if (g->nodes[c].outputs[0] != out) g->values.erase(g->nodes[c].outputs[0]);
  }
  n->outputs[0] = out;
}

}  // namespace

Status FuseConvAffine(Graph* g) {
  auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    Node& cv = g->nodes[k];
    if (removed[k] || !cv.domain.empty() || cv.outputs.size() != 1 || cv.attrs.Has("_activation"))
      continue;
    if (cv.op_type == "BatchNormalization") {
      // Inference BatchNormalization, y = (x - mean) * scale / sqrt(var + eps) + B:
      // a following x * c + d folds into scale * c and B * c + d (DenseNet's
      // pre-activation blocks).
      const Value* x = g->Find(cv.input(0));
      const Value* sc = g->Find(cv.input(1));
      if (!x || x->shape.size() < 2 || !sc || sc->shape.size() != 1 || cv.inputs.size() != 5)
        continue;
      const int64_t m = sc->shape[0];
      std::vector<float> scale, bias, unused;
      if (!FloatVector(*g, cv.input(1), m, &scale) || !FloatVector(*g, cv.input(2), m, &bias) ||
          !FloatVector(*g, cv.input(3), m, &unused) || !FloatVector(*g, cv.input(4), m, &unused))
        continue;
      std::string out = cv.outputs[0];
      const std::vector<size_t> chain = CollectChannelAffine(
          *g, consumers, removed, int(x->shape.size()), m, &out, &scale, &bias);
      if (chain.empty()) continue;
      cv.inputs[1] = FloatConstant(g, cv.name + "_affine_scale", {m}, scale);
      cv.inputs[2] = FloatConstant(g, cv.name + "_affine_bias", {m}, bias);
      TakeOverChain(g, &cv, chain, out, &removed);
      continue;
    }
    const bool transposed = cv.op_type == "ConvTranspose";
    if (cv.op_type != "Conv" && !transposed) continue;
    const Value* w = g->Find(cv.input(1));
    if (!w || !w->is_constant() || w->dtype != DType::kFloat32 || w->shape.size() < 3) continue;
    // ConvTranspose weights are [C, M / group, k...]: output channels on axis 1.
    if (transposed && cv.attrs.GetInt("group", 1) != 1) continue;
    const int64_t m = transposed ? w->shape[1] : w->shape[0];
    const int rank = int(w->shape.size());
    std::vector<float> scale(size_t(m), 1.f), bias(size_t(m), 0.f);
    if (!cv.input(2).empty() && !FloatVector(*g, cv.input(2), m, &bias)) continue;
    std::string out = cv.outputs[0];
    const std::vector<size_t> chain =
        CollectChannelAffine(*g, consumers, removed, rank, m, &out, &scale, &bias);
    if (chain.empty()) continue;
    std::vector<float> weights(w->data->size() / 4);
    std::memcpy(weights.data(), w->data->data(), w->data->size());
    if (transposed) {
      const size_t taps = weights.size() / size_t(w->shape[0] * m);
      for (size_t at = 0; at < weights.size(); ++at) weights[at] *= scale[at / taps % size_t(m)];
    } else {
      const size_t per_oc = weights.size() / size_t(m);
      for (int64_t o = 0; o < m; ++o)
        for (size_t i = 0; i < per_oc; ++i) weights[size_t(o) * per_oc + i] *= scale[size_t(o)];
    }
    const Shape wshape = w->shape;
    cv.inputs.resize(3);
    cv.inputs[1] = FloatConstant(g, cv.name + "_affine_weight", wshape, weights);
    cv.inputs[2] = FloatConstant(g, cv.name + "_affine_bias", {m}, bias);
    TakeOverChain(g, &cv, chain, out, &removed);
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  return Status::Ok();
}

Status FuseGatedActivations(Graph* g) {
  GatedActivationMatcher(g).Run();
  return Status::Ok();
}

bool FusedActivationAttrs(const Graph& g, const Node& act, AttrMap* attrs) {
  const std::string& t = act.op_type;
  if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "HardSwish") {
    attrs->SetString("_activation", t);
    return true;
  }
  if (t == "Swish") {
    attrs->SetString("_activation", t);
    attrs->SetFloat("_act_alpha", act.attrs.GetFloat("alpha", 1.f));
    return true;
  }
  if (t == "LeakyRelu") {
    attrs->SetString("_activation", t);
    attrs->SetFloat("_act_alpha", act.attrs.GetFloat("alpha", 0.01f));
    return true;
  }
  if (t == "HardSigmoid") {
    attrs->SetString("_activation", t);
    attrs->SetFloat("_act_alpha", act.attrs.GetFloat("alpha", 0.2f));
    attrs->SetFloat("_act_beta", act.attrs.GetFloat("beta", 0.5f));
    return true;
  }
  if (t == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = -lo;
    if (!act.input(1).empty() && !ScalarFloat(g, act.input(1), &lo)) return false;
    if (!act.input(2).empty() && !ScalarFloat(g, act.input(2), &hi)) return false;
    attrs->SetString("_activation", t);
    if (!act.input(1).empty()) attrs->SetFloat("_act_min", lo);
    if (!act.input(2).empty()) attrs->SetFloat("_act_max", hi);
    return true;
  }
  return false;
}

Status FuseActivations(Graph* g) {
  QF_RETURN_IF_ERROR(FuseConvAffine(g));
  QF_RETURN_IF_ERROR(FuseGatedActivations(g));
  auto consumers = BuildConsumers(*g);
  std::vector<bool> removed(g->nodes.size(), false);
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    Node& n = g->nodes[k];
    if (n.op_type != "Conv" && n.op_type != "ConvTranspose" && n.op_type != "Gemm" &&
        n.op_type != "MatMul" && n.op_type != "BatchNormalization")
      continue;
    if (n.outputs.size() != 1 || n.attrs.Has("_activation")) continue;
    const Value* out = g->Find(n.outputs[0]);
    if (!out || out->dtype != DType::kFloat32 || g->IsGraphOutput(n.outputs[0])) continue;
    auto it = consumers.find(n.outputs[0]);
    if (it == consumers.end() || it->second.size() != 1) continue;
    size_t ai = it->second[0].first;
    Node& act = g->nodes[ai];
    if (!act.domain.empty() || it->second[0].second != 0 || act.outputs.size() != 1) continue;
    AttrMap fused = n.attrs;
    if (!FusedActivationAttrs(*g, act, &fused)) continue;
    const int rank = int(out->shape.size());  // the activation keeps it
    n.attrs = std::move(fused);
    g->values.erase(n.outputs[0]);
    n.outputs[0] = act.outputs[0];
    removed[ai] = true;
    // Mul and Add by scalars after the activation (PP-LCNet's learnable
    // affine after each HardSwish) join it: one pass instead of two more.
    std::string last = n.outputs[0];
    std::vector<float> scale(1, 1.f), shift(1, 0.f);
    const std::vector<size_t> chain =
        CollectChannelAffine(*g, consumers, removed, rank, 1, &last, &scale, &shift);
    if (chain.empty()) continue;
    n.attrs.SetFloat("_act_scale", scale[0]);
    n.attrs.SetFloat("_act_shift", shift[0]);
    TakeOverChain(g, &n, chain, last, &removed);
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(kept);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
