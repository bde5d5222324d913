// Serializes the IR to a .qfm flatbuffer.
#pragma once
#include <string>
#include <vector>

#include "converter/ir.h"

namespace qfold {
namespace conv {

// Builds the flatbuffer bytes; the graph must have passed VerifyGraph and inference.
Status SerializeQfm(const Graph& g, std::vector<uint8_t>* out);

// Writes `bytes` to a temporary file beside `path` and renames it into place,
// so a failed or interrupted write never leaves a partial file at `path`.
Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace conv
}  // namespace qfold
