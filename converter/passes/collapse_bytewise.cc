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
#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "converter/passes/passes.h"
#include "core/op.h"
#include "kernels/kernel_config.h"
#include "kernels/quant_s8.h"

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

  static std::vector<uint8_t> Int32Bytes(const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    for (size_t i = 0; i < v.size(); ++i)
      for (int k = 0; k < 4; ++k) b[i * 4 + size_t(k)] = uint8_t(uint32_t(v[i]) >> (8 * k));
    return b;
  }

  // Fits each 8-bit step of a per-channel chain (steps: its [1, C, 256, ..]
  // results on every byte of x, in order) as a clamped line of the step
  // before (x itself for the first) per channel: params [S][5][C] (mult,
  // add, shift, lo, hi). Each step is a function of the one before on the
  // values that occur; the chain of lines is then checked against the last
  // step on all 256 bytes of every channel.
  static bool FitLines(DType x_dtype, const std::vector<const Tensor*>& steps, int64_t channels,
                       std::vector<int32_t>* params) {
    const int64_t stages = int64_t(steps.size());
    params->assign(size_t(stages * 5 * channels), 0);
    auto value = [](const Tensor& t, int64_t at) {
      const uint8_t b = t.ptr<uint8_t>()[at];
      return t.dtype == DType::kInt8 ? int32_t(int8_t(b)) : int32_t(b);
    };
    for (int64_t ch = 0; ch < channels; ++ch) {
      int32_t prev[256];
      for (int i = 0; i < 256; ++i)
        prev[i] = x_dtype == DType::kInt8 ? int32_t(int8_t(uint8_t(i))) : i;
      int32_t v[256];
      std::copy(prev, prev + 256, v);
      for (int64_t st = 0; st < stages; ++st) {
        // The step's value for each previous value (index + 256), or none.
        int32_t map[512];
        bool seen[512] = {};
        int32_t cur[256];
        for (int i = 0; i < 256; ++i) {
          cur[i] = value(*steps[size_t(st)], ch * 256 + i);
          const int key = prev[i] + 256;
          if (seen[key] && map[key] != cur[i]) return false;
          seen[key] = true;
          map[key] = cur[i];
        }
        int32_t xs[512], ys[512];
        int n = 0;
        for (int key = 0; key < 512; ++key)
          if (seen[key]) xs[n] = key - 256, ys[n] = map[key], ++n;
        int32_t line[5];
        if (!kernels::FitClampedLine(xs, ys, n, &line[0], &line[1], &line[2], &line[3], &line[4]))
          return false;
        for (int r = 0; r < 5; ++r) (*params)[size_t((st * 5 + r) * channels + ch)] = line[r];
        for (int i = 0; i < 256; ++i)
          v[i] = std::min(std::max((v[i] * line[0] + line[1]) >> line[2], line[3]), line[4]);
        std::copy(cur, cur + 256, prev);
      }
      for (int i = 0; i < 256; ++i)
        if (v[i] != prev[i]) return false;
    }
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

    // A per-channel chain to one result whose 8-bit steps are each a clamped
    // line of the step before becomes QfChannelLines (integer arithmetic
    // instead of a lookup per byte on channels-last data).
    if (per_channel && !wide && tabled.size() == 1) {
      std::vector<const Tensor*> steps;
      for (size_t k : region) {
        const Tensor& t = computed[g_.nodes[k].outputs[0]].t;
        if (Is8Bit(t.dtype)) steps.push_back(&t);
      }
      const Node& last = g_.nodes[tabled[0]];
      if (!steps.empty() && steps.back() == &computed[last.outputs[0]].t) {
        std::vector<int32_t> params;
        if (FitLines(xv->dtype, steps, channels, &params)) {
          Node lines;
          lines.op_type = "QfChannelLines";
          lines.name = last.name;
          lines.outputs = last.outputs;
          lines.inputs = {x,
                          g_.AddConstant(last.name + "_lines", DType::kInt32,
                                         {int64_t(steps.size()), 5, channels}, Int32Bytes(params))};
          lines.attrs.SetInt("axis", 1);
          lines.attrs.SetInt("y_signed", steps.back()->dtype == DType::kInt8 ? 1 : 0);
          g_.nodes[tabled[0]] = std::move(lines);
          collapsed_ += 1;
          QF_RETURN_IF_ERROR(RemoveDeadCode(&g_));
          consumers_ = BuildConsumers(g_);
          return Status::Ok();
        }
      }
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
