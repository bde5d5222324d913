#include <map>

#include "converter/passes/passes.h"
#include "core/op.h"

namespace qfold {
namespace conv {

namespace {
// Subgraphs of If/Loop/Scan too: their nodes run as well.
void CollectMissing(const Graph& g, std::map<std::string, std::vector<std::string>>* missing_ptr) {
  auto& missing = *missing_ptr;
  for (const Node& n : g.nodes) {
    if (IsControlFlowNode(n))
      for (const auto& sub : n.subgraphs) CollectMissing(*sub.second, missing_ptr);
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
}
}  // namespace

Status CheckSupported(const Graph& g) {
  std::map<std::string, std::vector<std::string>> missing;  // op type -> node names
  CollectMissing(g, &missing);
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
  return Status(StatusCode::kUnsupported,
                g.source + ": " + std::to_string(count) +
                    " node(s) use operators qfold does not support:" + msg);
}

}  // namespace conv
}  // namespace qfold
