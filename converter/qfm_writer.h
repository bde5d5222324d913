// Serializes the IR to a .qfm flatbuffer.
#pragma once
#include <string>
#include <vector>

#include "converter/ir.h"

namespace qfold {
namespace conv {

// Builds the flatbuffer bytes; the graph must have passed VerifyGraph and inference.
Status SerializeQfm(const Graph& g, std::vector<uint8_t>* out);

// Writes `bytes` to a temporary file beside `path`, fsyncs and renames it into
// place (core/file_io.h), so a failed or interrupted write never leaves a
// partial file at `path`; a target that is one of `inputs`, a symlink, not a
// regular file or read-only is refused.
Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes,
                       const std::vector<std::string>& inputs = {});

}  // namespace conv
}  // namespace qfold
