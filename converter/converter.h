// The converter's entry point: ONNX file in, .qfm bytes out.
#pragma once
#include <string>
#include <vector>

#include "converter/ir.h"

namespace qfold {
namespace conv {

struct ConvertOptions {
  bool fold_constants = true;
  bool fuse = true;
  bool fold_qdq = true;  // QDQ patterns -> integer operators
};

// Reads, normalizes, checks support, infers and optimizes. On success `g` holds
// the graph that would be written.
Status LoadAndOptimize(const std::string& onnx_path, const ConvertOptions& opts, Graph* g);

// LoadAndOptimize + SerializeQfm + WriteFileAtomic; on error no output file exists.
Status ConvertFile(const std::string& onnx_path, const std::string& qfm_path,
                   const ConvertOptions& opts);

}  // namespace conv
}  // namespace qfold
