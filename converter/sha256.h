// SHA-256 of the source model, recorded in the .qfm metadata so a converted
// file can be traced back to the exact ONNX bytes it came from.
#pragma once
#include <string>

namespace qfold {
namespace conv {

std::string Sha256Hex(const std::string& bytes);

}  // namespace conv
}  // namespace qfold
