#include "core/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernel_config.h"
#include "kernels/vmath.h"

namespace qfold {

FusedActivation FusedActivation::FromAttrs(const AttrMap& attrs, Status* status) {
  *status = Status::Ok();
  FusedActivation a;
  const Attr* name = attrs.Find("_activation");
  if (!name) return a;
  const std::string& s = name->s;
  if (s == "Relu") {
    a.kind = kRelu;
  } else if (s == "LeakyRelu") {
    a.kind = kLeakyRelu;
    a.alpha = attrs.GetFloat("_act_alpha", 0.01f);
  } else if (s == "Clip") {
    a.kind = kClip;
    a.min = attrs.GetFloat("_act_min", -std::numeric_limits<float>::infinity());
    a.max = attrs.GetFloat("_act_max", std::numeric_limits<float>::infinity());
  } else if (s == "Sigmoid") {
    a.kind = kSigmoid;
  } else if (s == "HardSigmoid") {
    a.kind = kHardSigmoid;
    a.alpha = attrs.GetFloat("_act_alpha", 0.2f);
    a.beta = attrs.GetFloat("_act_beta", 0.5f);
  } else if (s == "HardSwish") {
    a.kind = kHardSwish;
  } else if (s == "Tanh") {
    a.kind = kTanh;
  } else if (s == "Swish") {
    a.kind = kSwish;
    a.alpha = attrs.GetFloat("_act_alpha", 1.f);
  } else {
    *status = Status(StatusCode::kUnsupported, "unsupported fused activation '" + s + "'");
    return a;
  }
  if (attrs.Has("_act_scale") || attrs.Has("_act_shift")) {
    a.affine = true;
    a.scale = attrs.GetFloat("_act_scale", 1.f);
    a.shift = attrs.GetFloat("_act_shift", 0.f);
  }
  return a;
}

float FusedActivation::Apply(float x) const {
  if (affine) return kernels::Rounded(ApplyKind(x) * scale) + shift;
  return ApplyKind(x);
}

float FusedActivation::ApplyKind(float x) const {
  switch (kind) {
    case kNone:
      return x;
    case kRelu:
      return x > 0.f ? x : 0.f;
    case kLeakyRelu:
      return x >= 0.f ? x : alpha * x;
    // Clip via comparisons so NaN passes through, as ONNX Runtime does.
    case kClip:
      return x < min ? min : (x > max ? max : x);
    case kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case kHardSigmoid:
      return std::max(0.f, std::min(1.f, alpha * x + beta));
    case kHardSwish:
      return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f));
    case kTanh:
      return std::tanh(x);
    case kSwish:  // as the unfused graph: Sigmoid, then Mul
      return x * (1.f / (1.f + std::exp(-(alpha * x))));
  }
  return x;
}

void FusedActivation::Apply(float* data, int64_t n) const {
  const kernels::VMathKernels& vm = vmath ? *vmath : *kernels::DefaultKernelConfig().vmath;
  if (kind == kHardSwish) return vm.hardswish(data, data, n, affine, scale, shift);
  ApplyKind(data, n);
  if (affine) vm.affine(data, data, n, scale, shift);
}

void FusedActivation::ApplyKind(float* data, int64_t n) const {
  if (kind == kNone) return;
  const kernels::VMathKernels& vm = vmath ? *vmath : *kernels::DefaultKernelConfig().vmath;
  switch (kind) {
    case kSigmoid:
      return vm.sigmoid(data, data, n);
    case kTanh:
      return vm.tanh(data, data, n);
    case kSwish:
      return vm.swish(data, data, n, alpha);
    // The rest as loops of their own (the compiler vectorizes them), not a
    // switch per element: convolutions call this once per output row.
    case kRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] > 0.f ? data[i] : 0.f;
      return;
    case kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] >= 0.f ? data[i] : alpha * data[i];
      return;
    case kClip:
      for (int64_t i = 0; i < n; ++i)
        data[i] = data[i] < min ? min : (data[i] > max ? max : data[i]);
      return;
    case kHardSigmoid:
      for (int64_t i = 0; i < n; ++i)
        data[i] = std::max(0.f, std::min(1.f, alpha * data[i] + beta));
      return;
    case kHardSwish:
      for (int64_t i = 0; i < n; ++i)
        data[i] = data[i] * std::max(0.f, std::min(1.f, data[i] / 6.f + 0.5f));
      return;
    default:
      for (int64_t i = 0; i < n; ++i) data[i] = Apply(data[i]);
  }
}

}  // namespace qfold
