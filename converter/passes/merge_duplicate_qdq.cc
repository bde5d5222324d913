// Identical QuantizeLinear (or DequantizeLinear) nodes on one tensor become
// one. quantize_static with DedicatedQDQPair gives every consumer of a tensor
// its own Q -> DQ pair; folding needs one Q per op output, so the pairs merge
// first: the Qs (same input, same parameters), then the DQs that now read the
// same Q output.
//
// One pass in graph order: a node's inputs are renamed before its key is
// built, so a DQ whose Q merged a moment ago is seen with the surviving Q's
// output. Keys hash the parameter constants' contents, not their names
// (quantize_static writes one scale initializer per pair).
#include <unordered_map>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {

bool IsQdq(const Node& n) {
  return n.domain.empty() && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear");
}

// A constant is described by its contents; anything else (a graph input, an
// activation) by its name.
void AppendOperand(const Graph& g, const std::string& name, std::string* key) {
  const Value* v = g.Find(name);
  if (!v || !v->is_constant()) {
    *key += "n:" + name;
  } else {
    *key += "c:" + std::to_string(int(v->dtype)) + ":";
    for (int64_t d : v->shape) *key += std::to_string(d) + ",";
    *key += ":";
    key->append(reinterpret_cast<const char*>(v->data->data()), v->data->size());
  }
  *key += '\x1f';
}

void AppendAttrs(const AttrMap& attrs, std::string* key) {
  // AttrMap keeps attributes sorted by name, so equal sets give equal text.
  for (const Attr& a : attrs.all()) {
    *key += a.name + "=" + std::to_string(int(a.kind)) + ":";
    switch (a.kind) {
      case Attr::kInt:
        *key += std::to_string(a.i);
        break;
      case Attr::kFloat:
        key->append(reinterpret_cast<const char*>(&a.f), sizeof(a.f));
        break;
      case Attr::kInts:
        for (int64_t i : a.ints) *key += std::to_string(i) + ",";
        break;
      case Attr::kFloats:
        key->append(reinterpret_cast<const char*>(a.floats.data()), a.floats.size() * 4);
        break;
      case Attr::kString:
        *key += a.s;
        break;
    }
    *key += '\x1f';
  }
}

// Everything that decides a Q/DQ node's result: op, data input, parameter
// contents, attributes (axis, block_size, output_dtype, saturate, ...).
std::string Key(const Graph& g, const Node& n) {
  std::string key = n.op_type + '\x1e' + n.input(0) + '\x1e';
  for (size_t i = 1; i < n.inputs.size(); ++i) AppendOperand(g, n.inputs[i], &key);
  key += '\x1e';
  AppendAttrs(n.attrs, &key);
  return key;
}

}  // namespace

Status MergeDuplicateQdq(Graph* g) {
  std::unordered_map<std::string, std::string> renamed;  // dropped output -> kept output
  std::unordered_map<std::string, size_t> first;         // key -> index of the kept node
  std::vector<bool> drop(g->nodes.size(), false);
  size_t merged = 0;
  for (size_t k = 0; k < g->nodes.size(); ++k) {
    Node& n = g->nodes[k];
    for (std::string& in : n.inputs) {
      auto it = renamed.find(in);
      if (it != renamed.end()) in = it->second;
    }
    if (!IsQdq(n) || n.outputs.size() != 1 || n.outputs[0].empty()) continue;
    auto ins = first.emplace(Key(*g, n), k);
    if (ins.second) continue;
    // A graph output keeps its own producer: its name is part of the model's interface.
    if (g->IsGraphOutput(n.outputs[0])) continue;
    const Node& kept = g->nodes[ins.first->second];
    renamed[n.outputs[0]] = kept.outputs[0];
    g->values.erase(n.outputs[0]);
    drop[k] = true;
    ++merged;
  }
  if (!merged) return Status::Ok();
  std::vector<Node> nodes;
  nodes.reserve(g->nodes.size() - merged);
  for (size_t k = 0; k < g->nodes.size(); ++k)
    if (!drop[k]) nodes.push_back(std::move(g->nodes[k]));
  g->nodes = std::move(nodes);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
