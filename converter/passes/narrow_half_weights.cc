// An fp16 model's weights go back to float16 storage after the passes that
// compute on constants (folding, BatchNormalization fusion, layout planning
// transposes) ran on their float32 values; see passes.h.
#include <cstring>
#include <set>

#include "converter/passes/passes.h"
#include "core/half.h"
#include "core/op.h"

namespace qfold {
namespace conv {

namespace {
// The float16 bytes of `f32`, or false if some value does not convert back to
// the same float32 bits (then the weight keeps its float32 storage).
bool ExactHalves(const std::vector<uint8_t>& f32, std::vector<uint8_t>* out) {
  const size_t n = f32.size() / 4;
  out->resize(n * 2);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, f32.data() + 4 * i, 4);
    float f;
    std::memcpy(&f, &bits, 4);
    const uint16_t h = FloatToHalf(f);
    const float back = HalfToFloat(h);
    uint32_t back_bits;
    std::memcpy(&back_bits, &back, 4);
    if (back_bits != bits) return false;
    std::memcpy(out->data() + 2 * i, &h, 2);
  }
  return true;
}
}  // namespace

Status NarrowHalfWeights(Graph* g) {
  if (!g->had_float16_constants) return Status::Ok();
  // Constants some op without the trait reads (or the caller sees) stay float32.
  std::set<std::string> weights, others;
  for (const Node& n : g->nodes) {
    const bool half_ok = n.domain.empty() && HasTraits(n.op_type, kTraitHalfWeights);
    for (const std::string& s : n.inputs)
      if (!s.empty() && g->IsConstant(s)) (half_ok ? weights : others).insert(s);
  }
  size_t narrowed = 0, bytes_before = 0, bytes_after = 0;
  for (const std::string& name : weights) {
    Value& v = g->values[name];
    if (others.count(name) || g->IsGraphOutput(name) || v.dtype != DType::kFloat32) continue;
    std::vector<uint8_t> half;
    if (!ExactHalves(*v.data, &half)) continue;
    bytes_before += v.data->size();
    bytes_after += half.size();
    v.data = std::make_shared<const std::vector<uint8_t>>(std::move(half));
    v.dtype = DType::kFloat16;
    ++narrowed;
  }
  if (narrowed)
    g->notes.push_back("kept " + std::to_string(narrowed) + " float16 weight tensors as float16 (" +
                       std::to_string(bytes_after) + " bytes instead of " +
                       std::to_string(bytes_before) +
                       "); the runtime widens them when it loads the model "
                       "(--widen-fp16-weights stores float32)");
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
