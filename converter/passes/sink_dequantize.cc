// DequantizeLinear -> data-movement op (no QuantizeLinear after it) becomes
// op -> DequantizeLinear: the op moves the integers instead of the floats.
// NNCF and other producers quantize a MaxPool's input but not its output (a
// max of dequantized values is the dequantized max, so they see no need);
// without this, the Conv after the MaxPool reads a float tensor and stays
// float. Exact for per-tensor parameters: every op here only selects or
// reorders elements, and dequantization with a positive scale is monotone,
// so MaxPool commutes with it too (padding never wins a max either way).
// A Concat sinks one DequantizeLinear when all its inputs share the parameters.
#include <cstring>
#include <string>
#include <unordered_map>

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {

namespace {

bool Is8Bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

// MaxPool and Resize run on the integers only where their kernels take the
// dtype (8-bit).
bool MovesElements(const Node& n, DType q) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !HasTraits(n.op_type, kTraitMovesElements))
    return false;
  if (n.op_type == "MaxPool") return Is8Bit(q);
  if (n.op_type == "Resize") return Is8Bit(q) && n.attrs.GetString("mode", "nearest") == "nearest";
  return true;
}

bool PerTensorConstants(const Graph& g, const Node& dq) {
  for (size_t i = 1; i < dq.inputs.size() && i < 3; ++i) {
    if (dq.inputs[i].empty()) continue;
    const Value* v = g.Find(dq.inputs[i]);
    if (!v || !v->is_constant() || !v->rank_known) return false;
    for (int64_t d : v->shape)
      if (d != 1) return false;
  }
  return dq.attrs.GetInt("block_size", 0) == 0 && !dq.input(1).empty();
}

// Two parameter inputs with the same constant value (or both absent).
bool SameConstant(const Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  const Value* va = g.Find(a);
  const Value* vb = g.Find(b);
  return va && vb && va->is_constant() && vb->is_constant() && va->dtype == vb->dtype &&
         va->data->size() == vb->data->size() &&
         std::memcmp(va->data->data(), vb->data->data(), va->data->size()) == 0;
}

}  // namespace

Status SinkDequantize(Graph* g) {
  std::unordered_map<std::string, size_t> producer;  // value -> index in `out`
  std::unordered_map<std::string, int> q_readers;    // value -> QuantizeLinear consumers
  for (const Node& n : g->nodes)
    if (n.domain.empty() && n.op_type == "QuantizeLinear") ++q_readers[n.input(0)];
  std::vector<Node> out;
  out.reserve(2 * g->nodes.size());  // `dq` below points into it
  size_t sunk = 0;
  for (Node& n : g->nodes) {
    // Concat of DequantizeLinears with one scale and zero point (NNCF's
    // detection neck before a Conv): the Concat joins the integers.
    if (n.domain.empty() && n.op_type == "Concat" && n.outputs.size() == 1 && !n.inputs.empty() &&
        !q_readers.count(n.outputs[0])) {
      const Node* first = nullptr;
      const Value* first_q = nullptr;
      bool same = true;
      for (const std::string& in : n.inputs) {
        auto p = producer.find(in);
        const Node* dq = p == producer.end() ? nullptr : &out[p->second];
        const Value* xq = dq ? g->Find(dq->input(0)) : nullptr;
        if (!dq || !dq->domain.empty() || dq->op_type != "DequantizeLinear" || !xq ||
            !PerTensorConstants(*g, *dq) ||
            !(Is8Bit(xq->dtype) || xq->dtype == DType::kInt16 || xq->dtype == DType::kUInt16) ||
            (first &&
             (xq->dtype != first_q->dtype || !SameConstant(*g, dq->input(1), first->input(1)) ||
              !SameConstant(*g, dq->input(2), first->input(2))))) {
          same = false;
          break;
        }
        if (!first) first = dq, first_q = xq;
      }
      const Value* y = g->Find(n.outputs[0]);
      if (same && y) {
        const std::string moved = g->UniqueName(n.outputs[0] + "_quantized");
        Value& mv = g->values[moved];
        mv.name = moved;
        mv.dtype = first_q->dtype;
        mv.shape = y->shape;
        mv.rank_known = y->rank_known;
        Node after;
        after.op_type = "DequantizeLinear";
        after.name = n.name + "_dequantize";
        after.attrs = first->attrs;
        after.inputs = {moved, first->input(1)};
        if (!first->input(2).empty()) after.inputs.push_back(first->input(2));
        after.outputs = {n.outputs[0]};
        for (std::string& in : n.inputs) in = out[producer[in]].input(0);
        n.outputs[0] = moved;
        out.push_back(std::move(n));
        producer[moved] = out.size() - 1;
        out.push_back(std::move(after));
        producer[out.back().outputs[0]] = out.size() - 1;
        ++sunk;
        continue;
      }
    }
    auto it = n.inputs.empty() ? producer.end() : producer.find(n.inputs[0]);
    const Node* dq = it == producer.end() ? nullptr : &out[it->second];
    const Value* xq = dq ? g->Find(dq->input(0)) : nullptr;
    const Value* y = n.outputs.empty() ? nullptr : g->Find(n.outputs[0]);
    if (dq && dq->domain.empty() && dq->op_type == "DequantizeLinear" && xq &&
        (Is8Bit(xq->dtype) || xq->dtype == DType::kInt16 || xq->dtype == DType::kUInt16) &&
        MovesElements(n, xq->dtype) && PerTensorConstants(*g, *dq) && y &&
        !q_readers.count(n.outputs[0])) {
      // The op on the integers into a fresh value, then the same DQ after it.
      const std::string moved = g->UniqueName(n.outputs[0] + "_quantized");
      Value& mv = g->values[moved];
      mv.name = moved;
      mv.dtype = xq->dtype;
      mv.shape = y->shape;
      mv.rank_known = y->rank_known;
      Node after;
      after.op_type = "DequantizeLinear";
      after.name = n.name + "_dequantize";
      after.attrs = dq->attrs;  // output_dtype and the like
      after.inputs = {moved, dq->input(1)};
      if (!dq->input(2).empty()) after.inputs.push_back(dq->input(2));
      after.outputs = {n.outputs[0]};
      n.inputs[0] = dq->input(0);
      n.outputs[0] = moved;
      out.push_back(std::move(n));
      producer[moved] = out.size() - 1;
      out.push_back(std::move(after));
      producer[out.back().outputs[0]] = out.size() - 1;
      ++sunk;
      continue;
    }
    out.push_back(std::move(n));
    for (const std::string& o : out.back().outputs)
      if (!o.empty()) producer[o] = out.size() - 1;
  }
  g->nodes = std::move(out);
  if (sunk)
    g->notes.push_back(std::to_string(sunk) +
                       " data-movement op(s) now run on quantized values (their "
                       "DequantizeLinear moved after them)");
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
