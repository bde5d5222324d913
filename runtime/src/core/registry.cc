// The op registry: built from the X-macro lists, so adding an op means one
// line in a list and one file under ops/.
#include <algorithm>
#include <cstring>

#include "core/op.h"
#include "kernels/kernel_config.h"

namespace qfold {

#define QF_OP(NAME) const OpDef& OpDef_##NAME();
#include "ops/list_elementwise.inc"
#include "ops/list_nn.inc"
#include "ops/list_quant.inc"
#include "ops/list_shape.inc"
#undef QF_OP

namespace {
const std::vector<const OpDef*>& AllOps() {
  static const std::vector<const OpDef*> ops = [] {
    std::vector<const OpDef*> v = {
#define QF_OP(NAME) &OpDef_##NAME(),
#include "ops/list_elementwise.inc"
#include "ops/list_nn.inc"
#include "ops/list_quant.inc"
#include "ops/list_shape.inc"
#undef QF_OP
    };
    std::sort(v.begin(), v.end(),
              [](const OpDef* a, const OpDef* b) { return std::strcmp(a->type, b->type) < 0; });
    return v;
  }();
  return ops;
}
}  // namespace

const OpDef* FindOp(const std::string& type) {
  const auto& ops = AllOps();
  auto it = std::lower_bound(
      ops.begin(), ops.end(), type,
      [](const OpDef* a, const std::string& t) { return std::strcmp(a->type, t.c_str()) < 0; });
  return it != ops.end() && type == (*it)->type ? *it : nullptr;
}

bool HasTraits(const std::string& type, unsigned traits) {
  const OpDef* d = FindOp(type);
  return d && (d->traits & traits) == traits;
}

std::vector<std::string> SupportedOps() {
  std::vector<std::string> out;
  for (const OpDef* d : AllOps()) out.push_back(d->type);
  return out;
}

Status KernelContext::Error(StatusCode code, const std::string& msg) const {
  std::string where = op_type ? *op_type : std::string("op");
  if (op_name && !op_name->empty()) where += " '" + *op_name + "'";
  return Status(code, where + ": " + msg);
}

const kernels::KernelConfig& KernelContext::kernel_config() const {
  return kernels ? *kernels : kernels::DefaultKernelConfig();
}

}  // namespace qfold
