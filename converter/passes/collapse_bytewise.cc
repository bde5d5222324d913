// CollapseBytewise: an 8-bit tensor x feeding a chain of element-wise
// operators whose other inputs are single-element constants (hardswish as
// QLinearAdd -> QfLookupTable -> QLinearMul(x, .), a scale-and-shift
// x * a + b, DequantizeLinear -> Div -> QuantizeLinear...) computes every
// 8-bit result element from the one byte of x at the same position. So each
// such result is a function of 256 possible bytes: the pass evaluates the
// chain once on all 256 bytes with the runtime's own kernels and replaces it
// by one QfLookupTable per result. Running the same kernels on the same
// bytes, the table reproduces the chain exactly, for a single byte load per
// element instead of several passes of float arithmetic over the tensor.
// Constants that vary along the channel axis (axis 1) only — a
// BatchNormalization after a concatenation, a per-channel scale and shift,
// per-axis Q/DQ — make the result a function of (channel, byte): the chain is
// evaluated on a [1, C, 256, 1...] tensor and becomes a [C, 256] table.
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

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
// A region's results: quantized values a table can hold.
bool IsTableDType(DType t) {
  return Is8Bit(t) || Is16Bit(t);
}

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

class Collapser {
 public:
  explicit Collapser(Graph* g) : g_(*g) {}

  Status Run() {
    // Sources: graph inputs first, then node outputs in graph order. Each
    // collapse rewrites the graph, so the candidates are listed up front and
    // re-checked when their turn comes.
    consumers_ = BuildConsumers(g_);
    std::vector<std::string> sources(g_.inputs.begin(), g_.inputs.end());
    for (const Node& n : g_.nodes)
      for (const std::string& o : n.outputs)
        if (!o.empty()) sources.push_back(o);
    for (const std::string& x : sources) {
      const Value* v = g_.Find(x);
      if (!v || v->is_constant() || !IsTableDType(v->dtype) || !v->rank_known) continue;
      QF_RETURN_IF_ERROR(TryCollapse(x));
    }
    if (collapsed_)
      g_.notes.push_back(std::to_string(collapsed_) +
                         " chain(s) of element-wise 8/16-bit operators became lookup tables");
    return Status::Ok();
  }

 private:
  // A node that may join a region whose source has rank `rank` and
  // `channels` channels at axis 1 (<= 0: unknown): one output, every
  // constant input a single element of rank <= rank (so broadcasting cannot
  // grow the shape), except QfLookupTable's table, which is indexed by value,
  // not by position. With known channels, constants may also vary along
  // axis 1 only (*per_channel is then set): broadcast ones of shape
  // [C, 1, ...] right-aligned to axis 1, BatchNormalization's [C] parameters,
  // per-axis Q/DQ along axis 1.
  bool Pointwise(const Node& n, int rank, int64_t channels, bool* per_channel) const {
    if (!HasTraits(n.op_type, kTraitPointwise) || n.outputs.size() != 1 || n.outputs[0].empty())
      return false;
    const bool qdq = n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear";
    if (qdq && n.attrs.GetInt("block_size", 0) != 0) return false;
    const bool bn = n.op_type == "BatchNormalization";
    if (bn && (rank < 3 || channels <= 0 || n.attrs.GetInt("training_mode", 0) != 0)) return false;
    if (n.op_type == "QfLookupTable" && n.attrs.Has("axis")) return false;
    int64_t qdq_axis = n.attrs.GetInt("axis", 1);
    if (qdq_axis < 0) qdq_axis += rank;
    bool uses_channels = bn;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const Value* v = g_.Find(n.inputs[i]);
      if (!v || !v->rank_known) return false;
      if (!v->is_constant()) continue;
      if (n.op_type == "QfLookupTable" && i == 1) continue;
      const int64_t numel = Numel(v->shape);
      if (numel == 1 && int(v->shape.size()) <= rank) continue;
      if (channels <= 0 || rank < 3 || numel != channels) return false;
      if (bn || (qdq && v->shape.size() == 1 && qdq_axis == 1)) {
        uses_channels = true;
        continue;
      }
      // Broadcast [.., C, 1, ..., 1] with C at axis 1 once right-aligned.
      const int r = int(v->shape.size());
      if (r > rank || r < rank - 1) return false;
      for (int d = 0; d < r; ++d) {
        const int axis = d + rank - r;
        if (v->shape[size_t(d)] != (axis == 1 ? channels : 1)) return false;
      }
      uses_channels = true;
    }
    if (bn && n.inputs.size() < 5) return false;
    *per_channel = *per_channel || uses_channels;
    return true;
  }

  Status TryCollapse(const std::string& x) {
    // Most tensors feed no point-wise operator at all: skip them cheaply.
    auto uses = consumers_.find(x);
    if (uses == consumers_.end()) return Status::Ok();
    bool any = false;
    for (const auto& use : uses->second)
      any = any || HasTraits(g_.nodes[use.first].op_type, kTraitPointwise);
    if (!any) return Status::Ok();
    const Value* xv = g_.Find(x);
    const int rank = int(xv->shape.size());
    const int64_t channels = rank >= 3 ? xv->shape[1] : -1;
    bool per_channel = false;
    // Grow the region in graph (topological) order: a node joins when all its
    // non-constant inputs are x or region results.
    std::set<std::string> reach = {x};
    std::vector<size_t> region;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      const Node& n = g_.nodes[k];
      bool node_per_channel = false;
      if (!Pointwise(n, rank, channels, &node_per_channel)) continue;
      bool dynamic = false, inside = true;
      for (const std::string& in : n.inputs) {
        if (in.empty() || g_.IsConstant(in)) continue;
        dynamic = true;
        inside = inside && reach.count(in);
      }
      if (!dynamic || !inside) continue;
      region.push_back(k);
      reach.insert(n.outputs[0]);
      per_channel = per_channel || node_per_channel;
    }
    // A region node whose non-8-bit result is read outside the region (the
    // DequantizeLinear feeding a float graph output, say) cannot become a
    // table: it leaves the region, and so do the nodes that depended on it.
    auto read_outside = [&](const std::string& v, const std::set<size_t>& in_region) {
      if (g_.IsGraphOutput(v)) return true;
      auto it = consumers_.find(v);
      if (it != consumers_.end())
        for (const auto& use : it->second)
          if (!in_region.count(use.first)) return true;
      return false;
    };
    std::set<size_t> in_region(region.begin(), region.end());
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string> kept = {x};
      std::vector<size_t> next;
      for (size_t k : region) {
        const Node& n = g_.nodes[k];
        bool inside = true;
        for (const std::string& in : n.inputs)
          if (!in.empty() && !g_.IsConstant(in)) inside = inside && kept.count(in);
        const Value* v = g_.Find(n.outputs[0]);
        const bool exit =
            !v || !IsTableDType(v->dtype) ? read_outside(n.outputs[0], in_region) : false;
        if (inside && !exit) {
          next.push_back(k);
          kept.insert(n.outputs[0]);
        } else {
          changed = true;
        }
      }
      region = std::move(next);
      in_region = std::set<size_t>(region.begin(), region.end());
    }
    if (region.empty()) return Status::Ok();
    // 16-bit sources: 65536 entries per table, so one table for the tensor.
    const bool wide = Is16Bit(xv->dtype);
    if (wide && per_channel) return Status::Ok();
    // One node that already is a table, or a plain requantization (one
    // multiply per element, and clearer in the graph), gains nothing.
    if (region.size() == 1 && (g_.nodes[region[0]].op_type == "QfLookupTable" ||
                               g_.nodes[region[0]].op_type == "QfRequantize"))
      return Status::Ok();

    // Results read outside the region (or graph outputs) get a table: all 8/16-bit now.
    std::vector<size_t> tabled;
    for (size_t k : region)
      if (read_outside(g_.nodes[k].outputs[0], in_region)) tabled.push_back(k);
    if (tabled.empty()) return Status::Ok();

    // Evaluate the region on the 256 bytes of x's dtype, in graph order: a
    // [256] tensor, or [1, C, 256, 1...] (every byte in every channel) when a
    // constant varies along the channels.
    struct Computed {
      Tensor t;
      std::vector<uint8_t> storage;
    };
    std::unordered_map<std::string, Computed> computed;
    Computed& src = computed[x];
    const int64_t values = wide ? 65536 : 256;
    Shape stand_in = {values};
    if (per_channel) {
      stand_in = {1, channels, 256};
      stand_in.resize(size_t(rank), 1);
    }
    const int64_t entries = Numel(stand_in);
    if (wide) {
      src.storage.resize(size_t(entries) * 2);
      for (int64_t i = 0; i < entries; ++i) {
        src.storage[size_t(2 * i)] = uint8_t(i);  // little-endian uint16 i
        src.storage[size_t(2 * i + 1)] = uint8_t(i >> 8);
      }
    } else {
      src.storage.resize(size_t(entries));
      for (int64_t i = 0; i < entries; ++i) src.storage[size_t(i)] = uint8_t(i % 256);
    }
    src.t.dtype = xv->dtype;
    src.t.shape = stand_in;
    src.t.data = src.storage.data();
    for (size_t k : region) {
      const Node& n = g_.nodes[k];
      const OpDef* def = FindOp(n.op_type);
      if (!def) return Status::Ok();
      std::vector<Tensor> consts(n.inputs.size());
      KernelContext ctx;
      ctx.kernels = &kernels::ReferenceKernelConfig();  // results must not depend on the machine
      ctx.op_type = &n.op_type;
      ctx.op_name = &n.name;
      ctx.attrs = &n.attrs;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const std::string& in = n.inputs[i];
        if (in.empty()) {
          ctx.inputs.push_back(nullptr);
          continue;
        }
        auto c = computed.find(in);
        if (c != computed.end()) {
          ctx.inputs.push_back(&c->second.t);
          continue;
        }
        const Value* v = g_.Find(in);
        consts[i].name = in;
        consts[i].dtype = v->dtype;
        consts[i].shape = v->shape;
        consts[i].data = const_cast<uint8_t*>(v->data->data());
        ctx.inputs.push_back(&consts[i]);
      }
      Computed& out = computed[n.outputs[0]];
      out.t.name = n.outputs[0];
      ctx.outputs.push_back(&out.t);
      // Anything unexpected (a kernel refusing the 1-D stand-in shape, say)
      // leaves the graph as it is: the pass is an optimization.
      if (!def->infer(ctx).ok() || !out.t.shape_known() || out.t.shape != stand_in)
        return Status::Ok();
      out.storage.resize(out.t.bytes() + 1);
      out.t.data = out.storage.data();
      if (!def->run(ctx).ok()) return Status::Ok();
    }

    // Each tabled result is now produced by a lookup in its own table; the
    // nodes that only fed those results become dead and are removed.
    for (size_t k : tabled) {
      Node& n = g_.nodes[k];
      const Computed& c = computed[n.outputs[0]];
      const int64_t bytes = entries * (Is16Bit(c.t.dtype) ? 2 : 1);
      std::vector<uint8_t> table(c.storage.begin(), c.storage.begin() + bytes);
      Node lut;
      lut.op_type = "QfLookupTable";
      lut.name = n.name;
      lut.outputs = n.outputs;
      const Shape table_shape = per_channel ? Shape{channels, 256} : Shape{values};
      lut.inputs = {x, g_.AddConstant(n.name + "_table", c.t.dtype, table_shape, std::move(table))};
      if (per_channel) lut.attrs.SetInt("axis", 1);
      n = std::move(lut);
    }
    collapsed_ += 1;
    QF_RETURN_IF_ERROR(RemoveDeadCode(&g_));
    consumers_ = BuildConsumers(g_);
    return Status::Ok();
  }

  Graph& g_;
  // Readers of every value, rebuilt after each collapse rewrites the graph.
  std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> consumers_;
  int collapsed_ = 0;
};

}  // namespace

Status CollapseBytewise(Graph* g) {
  return Collapser(g).Run();
}

}  // namespace conv
}  // namespace qfold
