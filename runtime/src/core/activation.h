// An activation fused into the preceding op (Conv, ConvTranspose, Gemm,
// MatMul) by the converter. The node carries it as attributes:
//   "_activation": Relu | LeakyRelu | Clip | Sigmoid | HardSigmoid | HardSwish | Tanh |
//                  Swish (x * sigmoid(alpha * x); SiLU with alpha 1)
//   "_act_alpha", "_act_beta": LeakyRelu alpha, HardSigmoid alpha/beta, Swish alpha
//   "_act_min", "_act_max": Clip bounds (absent = unbounded)
//   "_act_scale", "_act_shift": y = act(x) * scale + shift after the activation
//                  (scalar Mul/Add nodes that followed it: PP-LCNet's learnable
//                  affine blocks after each HardSwish); absent = 1 and 0
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
  // The affine after the activation ("_act_scale", "_act_shift"); with it,
  // EpilogueFor hands the whole activation to Apply.
  bool affine = false;
  float scale = 1.f;
  float shift = 0.f;
  // The vectorized kernels Apply(data, n) uses: an op sets its session's;
  // null means the process default (kernels::DefaultKernelConfig()).
  const kernels::VMathKernels* vmath = nullptr;

  // kNone when "_activation" is absent. An unknown name sets *status to
  // kUnsupported (the message names it) and returns kNone.
  static FusedActivation FromAttrs(const AttrMap& attrs, Status* status);

  bool active() const { return kind != kNone; }
  // The activation, then the affine.
  void Apply(float* data, int64_t n) const;
  float Apply(float x) const;

 private:
  void ApplyKind(float* data, int64_t n) const;
  float ApplyKind(float x) const;
};

}  // namespace qfold
