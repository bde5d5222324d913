// The converter's entry point: ONNX file in, .qfm bytes out.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "converter/ir.h"

namespace qfold {
namespace conv {

struct ConvertOptions {
  bool fold_constants = true;
  bool fuse = true;
  bool fold_qdq = true;       // QDQ patterns -> integer operators
  bool channels_last = true;  // quantized and 2-D float convolutions run channels-last inside
  // An fp16 model's weights (constants of ops with kTraitHalfWeights) stay
  // float16 in the .qfm (half the bytes; the runtime widens them at load to
  // the same float32 values). false: store them as float32.
  bool keep_float16_weights = true;
  // Weight-only MatMuls folded from DequantizeLinear -> MatMul get
  // accuracy_level 4 (4-bit B then multiplies int8 activations);
  // MatMulNBits nodes keep their own.
  bool weight_only_int8_activations = false;
  // Input-shape overrides: whole shapes by input name, and symbolic dims by
  // their ONNX dim_param name ("batch" -> 4). Applied before anything else.
  std::map<std::string, Shape> input_shapes;
  std::map<std::string, int64_t> dims;
  // "NHWC" for an input whose data comes channels-last into an NCHW model.
  std::map<std::string, std::string> input_layouts;
  // --const NAME=VALUE: inputs bound to constants ("16000", "0.5,1"), dtype
  // from the model; If nodes they decide are folded to the branch taken.
  std::map<std::string, std::string> consts;
};

// Reads, normalizes, checks support, infers and optimizes. On success `g` holds
// the graph that would be written.
Status LoadAndOptimize(const std::string& onnx_path, const ConvertOptions& opts, Graph* g);

// LoadAndOptimize + SerializeQfm + WriteFileAtomic; on error no output file exists.
// `notes` (optional) receives what the conversion did that a user should know.
Status ConvertFile(const std::string& onnx_path, const std::string& qfm_path,
                   const ConvertOptions& opts, std::vector<std::string>* notes = nullptr);

}  // namespace conv
}  // namespace qfold
