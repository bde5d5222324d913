// A Reshape between two Transposes stops them from composing: ShuffleNet's
// channel shuffle (Reshape to [N, g, C/g, H, W], Transpose, Reshape back)
// sits between the planner's NHWC -> NCHW and NCHW -> NHWC Transposes, and
// costs three full copies of the activations. A Reshape only splits and
// merges runs of axes, so a Transpose next to it can move to its other side
// whenever every merged run stays contiguous and in order across the
// Transpose. It moves only towards another Transpose, with which
// CancelTransposes then composes it: the shuffle becomes one Transpose of
// two inner axes of each pixel, on the NHWC data.
#include <algorithm>
#include <numeric>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {
namespace {

using Perm = std::vector<int64_t>;

// Axis runs [first, last] of a reshape's input and output with equal products,
// in order: the reshape maps run k of `from` onto run k of `to`.
struct Run {
  int64_t from_first, from_last, to_first, to_last;
};

bool Static(const Value* v) {
  if (!v || !v->rank_known || v->shape.empty()) return false;
  for (int64_t d : v->shape)
    if (d <= 0) return false;
  return true;
}

// Greedy split of `from` -> `to` into the finest runs with equal products.
// Axes of size 1 join the run before them (or the first run).
bool ReshapeRuns(const Shape& from, const Shape& to, std::vector<Run>* runs) {
  runs->clear();
  const int64_t nf = int64_t(from.size()), nt = int64_t(to.size());
  int64_t i = 0, j = 0;
  while (i < nf && j < nt) {
    Run r{i, i, j, j};
    int64_t pf = from[size_t(i)], pt = to[size_t(j)];
    while (pf != pt) {
      if (pf < pt) {
        if (++i >= nf) return false;
        pf *= from[size_t(i)];
      } else {
        if (++j >= nt) return false;
        pt *= to[size_t(j)];
      }
    }
    // Trailing size-1 axes on either side belong to this run.
    while (i + 1 < nf && from[size_t(i + 1)] == 1 && (j + 1 >= nt || to[size_t(j + 1)] != 1)) ++i;
    while (j + 1 < nt && to[size_t(j + 1)] == 1 && (i + 1 >= nf || from[size_t(i + 1)] != 1)) ++j;
    r.from_last = i++;
    r.to_last = j++;
    runs->push_back(r);
  }
  if (i < nf || j < nt) {
    // Only size-1 axes may be left; they join the last run.
    if (runs->empty()) return false;
    for (; i < nf; ++i)
      if (from[size_t(i)] != 1) return false;
    for (; j < nt; ++j)
      if (to[size_t(j)] != 1) return false;
    runs->back().from_last = nf - 1;
    runs->back().to_last = nt - 1;
  }
  return true;
}

// Axes [first, last] of a tensor sit at positions pos[first..last] of another:
// true when those are consecutive and increasing.
bool StaysTogether(const Perm& pos, int64_t first, int64_t last) {
  for (int64_t a = first; a < last; ++a)
    if (pos[size_t(a + 1)] != pos[size_t(a)] + 1) return false;
  return true;
}

Perm Inverse(const Perm& p) {
  Perm inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[size_t(p[i])] = int64_t(i);
  return inv;
}

bool ValidPerm(const Perm& p, size_t rank) {
  if (p.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t a : p) {
    if (a < 0 || a >= int64_t(rank) || seen[size_t(a)]) return false;
    seen[size_t(a)] = true;
  }
  return true;
}

Perm PermOf(const Node& t, size_t rank) {
  Perm p = t.attrs.GetInts("perm");
  if (p.empty()) {
    p.resize(rank);
    std::iota(p.rbegin(), p.rend(), 0);
  }
  return p;
}

class Commuter {
 public:
  explicit Commuter(Graph* g) : g_(*g) {}

  // One rewrite; false when none applies.
  bool Step() {
    consumers_ = BuildConsumers(g_);
    producer_.clear();
    for (size_t k = 0; k < g_.nodes.size(); ++k)
      for (const std::string& o : g_.nodes[k].outputs) producer_[o] = k;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (!IsPlain(g_.nodes[k], "Reshape")) continue;
      if (SinkTransposeBelow(k) || HoistTransposeAbove(k)) return true;
    }
    return false;
  }

 private:
  static bool IsPlain(const Node& n, const char* op) {
    return n.op_type == op && n.domain.empty() && n.outputs.size() == 1;
  }

  // The node that reads `value` as its only reader, or null.
  Node* SoleReader(const std::string& value) {
    if (g_.IsGraphOutput(value)) return nullptr;
    auto it = consumers_.find(value);
    if (it == consumers_.end() || it->second.size() != 1) return nullptr;
    return &g_.nodes[it->second[0].first];
  }

  Node* Producer(const std::string& value) {
    auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : &g_.nodes[it->second];
  }

  // A value like `like` (dtype, quantization) with another shape.
  std::string NewValue(const std::string& base, const Value& like, const Shape& shape) {
    Value v;
    v.name = g_.UniqueName(base);
    v.dtype = like.dtype;
    v.quant = like.quant;
    v.rank_known = true;
    v.shape = shape;
    const std::string name = v.name;
    g_.values[name] = std::move(v);
    return name;
  }

  // Transpose(x, p) -> Reshape -> Transpose becomes
  // Reshape(x) -> Transpose(p') -> Transpose.
  bool SinkTransposeBelow(size_t k) {
    Node& reshape = g_.nodes[k];
    Node* t = Producer(reshape.input(0));
    if (!t || !IsPlain(*t, "Transpose") || SoleReader(t->outputs[0]) != &reshape) return false;
    Node* next = SoleReader(reshape.outputs[0]);
    if (!next || !IsPlain(*next, "Transpose")) return false;
    const Value* x = g_.Find(t->input(0));
    const Value* a = g_.Find(reshape.input(0));
    const Value* b = g_.Find(reshape.outputs[0]);
    if (!Static(x) || !Static(a) || !Static(b)) return false;
    const Perm p = PermOf(*t, x->shape.size());
    std::vector<Run> runs;
    if (!ValidPerm(p, x->shape.size()) || !ReshapeRuns(a->shape, b->shape, &runs)) return false;
    // Run k covers a's axes [from_first, from_last] = x's axes p[from_first..].
    for (const Run& r : runs)
      if (!StaysTogether(p, r.from_first, r.from_last)) return false;
    // The runs in x's order give the reshape of x; p' puts them back in a's order.
    std::vector<size_t> order(runs.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t l, size_t r) {
      return p[size_t(runs[l].from_first)] < p[size_t(runs[r].from_first)];
    });
    Shape xr;
    std::vector<int64_t> start(runs.size());
    for (size_t r : order) {
      start[r] = int64_t(xr.size());
      for (int64_t j = runs[r].to_first; j <= runs[r].to_last; ++j)
        xr.push_back(b->shape[size_t(j)]);
    }
    Perm pr;
    for (size_t r = 0; r < runs.size(); ++r)
      for (int64_t j = 0; j <= runs[r].to_last - runs[r].to_first; ++j) pr.push_back(start[r] + j);
    const std::string mid = NewValue(reshape.outputs[0] + "_pre", *b, xr);
    const std::string shape_name = g_.AddInt64Constant(reshape.name + "_shape", xr);
    const std::string x_name = t->input(0), out = reshape.outputs[0];
    // Reuse the two nodes: the Reshape now reads x, the Transpose writes out.
    reshape.inputs = {x_name, shape_name};
    reshape.attrs = AttrMap();
    reshape.outputs = {mid};
    const std::string old_mid = t->outputs[0];
    t->inputs = {mid};
    t->outputs = {out};
    t->attrs.SetInts("perm", pr);
    g_.values.erase(old_mid);
    MoveAfter(Index(*t), Index(reshape));
    return true;
  }

  // Transpose -> Reshape -> Transpose(q) becomes
  // Transpose -> Transpose(q') -> Reshape.
  bool HoistTransposeAbove(size_t k) {
    Node& reshape = g_.nodes[k];
    Node* prev = Producer(reshape.input(0));
    if (!prev || !IsPlain(*prev, "Transpose") || SoleReader(prev->outputs[0]) != &reshape)
      return false;
    Node* t = SoleReader(reshape.outputs[0]);
    if (!t || !IsPlain(*t, "Transpose")) return false;
    const Value* x = g_.Find(reshape.input(0));
    const Value* a = g_.Find(reshape.outputs[0]);
    if (!Static(x) || !Static(a)) return false;
    const Perm q = PermOf(*t, a->shape.size());
    std::vector<Run> runs;
    if (!ValidPerm(q, a->shape.size()) || !ReshapeRuns(x->shape, a->shape, &runs)) return false;
    // Run k's output axes [to_first, to_last] sit at inv[to_first..] after q.
    const Perm inv = Inverse(q);
    for (const Run& r : runs)
      if (!StaysTogether(inv, r.to_first, r.to_last)) return false;
    std::vector<size_t> order(runs.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t l, size_t r) {
      return inv[size_t(runs[l].to_first)] < inv[size_t(runs[r].to_first)];
    });
    Perm qx;
    Shape xt;
    for (size_t r : order)
      for (int64_t i = runs[r].from_first; i <= runs[r].from_last; ++i) {
        qx.push_back(i);
        xt.push_back(x->shape[size_t(i)]);
      }
    const Shape out_shape = [&] {
      Shape s;
      for (int64_t axis : q) s.push_back(a->shape[size_t(axis)]);
      return s;
    }();
    const std::string mid = NewValue(t->outputs[0] + "_pre", *x, xt);
    const std::string shape_name = g_.AddInt64Constant(reshape.name + "_shape", out_shape);
    const std::string x_name = reshape.input(0), out = t->outputs[0], old_mid = reshape.outputs[0];
    t->inputs = {x_name};
    t->outputs = {mid};
    t->attrs.SetInts("perm", qx);
    reshape.inputs = {mid, shape_name};
    reshape.attrs = AttrMap();
    reshape.outputs = {out};
    g_.values.erase(old_mid);
    MoveAfter(Index(reshape), Index(*t));
    return true;
  }

  size_t Index(const Node& n) const { return size_t(&n - g_.nodes.data()); }

  // Keeps the order topological: node `late` must come after node `early`.
  void MoveAfter(size_t late, size_t early) {
    if (late > early) return;
    Node moved = std::move(g_.nodes[late]);
    g_.nodes.erase(g_.nodes.begin() + long(late));
    g_.nodes.insert(g_.nodes.begin() + long(early), std::move(moved));
  }

  Graph& g_;
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> consumers_;
  std::unordered_map<std::string, size_t> producer_;
};

}  // namespace

Status CommuteReshapeTransposes(Graph* g) {
  Commuter c(g);
  // Each step is followed by a composition that removes a Transpose, so the
  // loop ends after at most as many steps as there are Transposes.
  while (c.Step()) QF_RETURN_IF_ERROR(CancelTransposes(g));
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
