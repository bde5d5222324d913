// An activation fused into the preceding op (Conv, ConvTranspose, Gemm,
// MatMul) by the converter. The node carries it as attributes:
//   "_activation": Relu | LeakyRelu | Clip | Sigmoid | HardSigmoid | HardSwish | Tanh |
//                  Swish (x * sigmoid(alpha * x); SiLU with alpha 1)
//   "_act_alpha", "_act_beta": LeakyRelu alpha, HardSigmoid alpha/beta, Swish alpha
//   "_act_min", "_act_max": Clip bounds (absent = unbounded)
// Kernels parse it once and apply it to their float outputs in place;
// Sigmoid, Tanh and Swish through the vectorized kernels of kernels/vmath.h.
#pragma once
#include <cstdint>

#include "core/attr.h"
#include "qfold/status.h"

namespace qfold {
namespace kernels {
struct VMathKernels;
}

struct FusedActivation {
  enum Kind { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kHardSwish, kTanh, kSwish };
  Kind kind = kNone;
  float alpha = 0.f;
  float beta = 0.f;
  float min = 0.f;  // Clip bounds; +-infinity when unbounded
  float max = 0.f;
  // The vectorized kernels Apply(data, n) uses: an op sets its session's;
  // null means the process default (kernels::DefaultKernelConfig()).
  const kernels::VMathKernels* vmath = nullptr;

  // kNone when "_activation" is absent. An unknown name sets *status to
  // kUnsupported (the message names it) and returns kNone.
  static FusedActivation FromAttrs(const AttrMap& attrs, Status* status);

  bool active() const { return kind != kNone; }
  void Apply(float* data, int64_t n) const;
  float Apply(float x) const;
};

}  // namespace qfold
