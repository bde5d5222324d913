#include <map>

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {

Status CheckSupported(const Graph& g) {
  std::map<std::string, std::vector<std::string>> missing;  // op type -> node names
  for (const Node& n : g.nodes) {
    std::string type = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    // com.microsoft contrib ops (QLinearAdd, ...) run when qfold implements them.
    bool known_domain = n.domain.empty() || n.domain == "com.microsoft";
    if (!known_domain || !FindOp(n.op_type)) {
      missing[type].push_back(n.name);
    } else if (!n.unsupported_attrs.empty()) {
      missing[type + " (graph/string-list attribute '" + n.unsupported_attrs[0] + "')"].push_back(
          n.name);
    }
  }
  if (missing.empty()) return Status::Ok();
  size_t count = 0;
  std::string msg;
  for (const auto& kv : missing) {
    count += kv.second.size();
    msg += "\n  " + kv.first + " (" + std::to_string(kv.second.size()) + "): ";
    for (size_t i = 0; i < kv.second.size() && i < 5; ++i)
      msg += (i ? ", '" : "'") + kv.second[i] + "'";
    if (kv.second.size() > 5) msg += ", ...";
  }
  return Status(StatusCode::kUnsupported, g.source + ": " + std::to_string(count) +
                                              " node(s) use operators qfold does not support:" +
                                              msg);
}

}  // namespace conv
}  // namespace qfold
