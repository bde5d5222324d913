// DequantizeLinear of a constant that was widened on reading (float8) has no
// integer kernel: it becomes (x - zero_point) * scale in float, which constant
// folding then turns into a float weight. The conversion notes say so.
#include <cstring>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {

namespace {
// A per-axis parameter [C] reshaped to broadcast along `axis` of a rank-r tensor.
std::string Broadcastable(Graph* g, const std::string& name, int axis, int rank) {
  const Value* v = g->Find(name);
  if (!v || v->shape.size() != 1 || v->shape[0] == 1) return name;
  Shape shape(size_t(rank), 1);
  shape[size_t(axis)] = v->shape[0];
  std::vector<uint8_t> bytes = *v->data;
  return g->AddConstant(name + "_axis" + std::to_string(axis), v->dtype, shape, std::move(bytes));
}
}  // namespace

Status DequantizeWidenedConstants(Graph* g) {
  std::vector<Node> out;
  for (Node& n : g->nodes) {
    const Value* x = g->Find(n.input(0));
    if (n.op_type != "DequantizeLinear" || !n.domain.empty() || !x || x->widened_from.empty()) {
      out.push_back(std::move(n));
      continue;
    }
    const Value* scale = g->Find(n.input(1));
    if (!scale || !scale->is_constant() || n.attrs.GetInt("block_size", 0) != 0) {
      out.push_back(std::move(n));  // left for CheckSupported/inference to report
      continue;
    }
    const int rank = int(x->shape.size());
    int axis = int(n.attrs.GetInt("axis", 1));
    if (axis < 0) axis += rank;
    if (rank > 0 && (axis < 0 || axis >= rank)) axis = 0;
    std::string from = x->widened_from, x_name = n.input(0);
    std::string cur = x_name;
    if (!n.input(2).empty()) {
      Node sub;
      sub.op_type = "Sub";
      sub.name = n.name + "_sub_zero_point";
      sub.inputs = {cur, rank ? Broadcastable(g, n.input(2), axis, rank) : n.input(2)};
      cur = g->UniqueName(n.outputs[0] + "_centered");
      g->values[cur].name = cur;
      sub.outputs = {cur};
      out.push_back(std::move(sub));
    }
    Node mul;
    mul.op_type = "Mul";
    mul.name = n.name;
    mul.inputs = {cur, rank ? Broadcastable(g, n.input(1), axis, rank) : n.input(1)};
    mul.outputs = n.outputs;
    out.push_back(std::move(mul));
    g->notes.push_back("DequantizeLinear '" + n.name + "': " + from + " constant '" + x_name +
                       "' has no integer kernel; dequantized to float at conversion");
  }
  g->nodes = std::move(out);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
