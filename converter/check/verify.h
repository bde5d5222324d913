// `qfold verify`: runs a .qfm and a reference built from its ONNX model on the
// same inputs and compares every output (and, per layer, every intermediate
// tensor both graphs name alike). The reference is the ONNX graph converted
// without QDQ folding and without fusions: literal DequantizeLinear -> float
// op -> QuantizeLinear through the runtime's own kernels, independent of the
// folded integer path. A caller may supply another reference (the CLI runs ONNX
// Runtime) through VerifyOptions::external_reference.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/runtime.h"
#include "qfold/status.h"

namespace qfold {
namespace check {

struct NamedArray {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<uint8_t> data;
};

// Computes reference tensors for `inputs`: the graph outputs and, with `per_layer`, any
// intermediate tensors it can, named as in the ONNX model.
using ExternalReference = std::function<Status(const std::vector<NamedArray>& inputs,
                                               bool per_layer, std::vector<NamedArray>* out)>;

struct VerifyOptions {
  std::vector<NamedArray> inputs;  // missing inputs get random data
  uint32_t seed = 1;
  bool per_layer = false;
  double threshold = 0.99;  // cosine similarity below this is "bad"
  // The .qfm's session only, so the error bf16 adds shows against the fp32 reference.
  SessionOptions::Precision precision = SessionOptions::Precision::kFloat32;
  // Replaces the built-in unfolded reference when set; the inputs are decided first, so the
  // reference is computed from the same (possibly random) data.
  ExternalReference external_reference;
  std::string reference_name = "qfold (unfolded ONNX model)";  // shown in the results
};

struct TensorDiff {
  std::string name;
  std::string node, op_type;        // the .qfm operator producing it ("" for graph inputs)
  DType dtype = DType::kUndefined;  // in the .qfm
  Shape shape;
  bool is_output = false;
  double cosine = 1, max_abs = 0, rel_l2 = 0;
  double max_steps = -1;  // quantized tensors: largest error in quantization steps; -1 otherwise
};

struct VerifyResult {
  std::vector<NamedArray> inputs;  // the inputs both models ran on
  std::vector<TensorDiff> outputs;
  std::vector<TensorDiff> layers;  // with per_layer: intermediate tensors, topological order
  std::string first_bad;           // first layer (else output) under the threshold, or ""
  std::vector<std::string> notes;  // tensors that could not be compared, and why
};

Status VerifyModel(const std::string& onnx_path, const std::string& qfm_path,
                   const VerifyOptions& opts, VerifyResult* out);

std::string VerifyText(const VerifyResult& r, const VerifyOptions& opts);
std::string VerifyJson(const VerifyResult& r, const VerifyOptions& opts);
// A self-contained page (inline SVG, no external assets).
std::string VerifyHtml(const VerifyResult& r, const VerifyOptions& opts, const std::string& title);

}  // namespace check
}  // namespace qfold
