// The kernels one session uses: every kernel family picks its variant from
// the CPU features it needs, once, when the configuration is made (a session
// makes one at creation). Ops reach it through KernelContext::kernel_config();
// nothing process-wide selects kernels, so a converter folding constants with
// the reference configuration never changes what a running session uses.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/binary_f32.h"
#include "kernels/conv_a16_nhwc.h"
#include "kernels/conv_f32.h"
#include "kernels/conv_f32_nhwc.h"
#include "kernels/cpu_features.h"
#include "kernels/dwconv_nhwc_s8.h"
#include "kernels/dwconv_s8.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_f32.h"
#include "kernels/gemm_s8.h"
#include "kernels/gemm_wq_f32.h"
#include "kernels/gemm_wq_s8.h"
#include "kernels/igemm_fp16.h"
#include "kernels/igemm_s8.h"
#include "kernels/pool_2d.h"
#include "kernels/pool_nhwc_s8.h"
#include "kernels/qmatmul_a16a16.h"
#include "kernels/quant_s8.h"
#include "kernels/resize_2d.h"
#include "kernels/rowops_f32.h"
#include "kernels/vmath.h"

namespace qfold {
namespace kernels {

// A null pointer (or empty list) means the family has no fast variant here:
// the ops run their reference kernels.
struct KernelConfig {
  CpuFeatures features;  // what the variants were chosen from
  const GemmF32Kernels* gemm_f32 = nullptr;
  DwF32PlaneFn dw_f32 = nullptr;                      // float depthwise planes (conv_f32.h)
  const ConvNhwcF32Kernels* conv_nhwc_f32 = nullptr;  // channels-last float Conv
  // Its bf16 variant: set only by EnableBf16 (SessionOptions::precision).
  const ConvNhwcBf16Kernels* conv_nhwc_bf16 = nullptr;
  // bf16 Gemm with a constant B: set only by EnableBf16.
  const GemmBf16Kernels* gemm_bf16 = nullptr;
  // fp16 convolutions and Gemm with a constant B: set only by EnableFp16.
  const Fp16Kernels* conv_nhwc_fp16 = nullptr;
  const Fp16Kernels* gemm_fp16 = nullptr;
  const GemmS8Kernels* gemm_s8 = nullptr;
  // Float A times weight-only quantized B (QfMatMulWeightQ).
  const GemmWqF32Kernels* gemm_wq_f32 = nullptr;
  // QfMatMulWeightQ with accuracy_level 4: 4-bit weights, int8 activations.
  const GemmWqS8Kernels* gemm_wq_s8 = nullptr;
  // Channels-last convolution microkernels (x86, Arm NEON), widest panel
  // first; empty without SIMD (the driver then uses gemm_s8).
  std::vector<const IgemmS8Kernel*> igemm_s8;
  const DwConvS8Kernels* dwconv_s8 = nullptr;
  const DwConvNhwcKernels* dwconv_nhwc_s8 = nullptr;
  const PoolNhwcKernels* pool_nhwc_s8 = nullptr;
  const Pool2dKernels* pool_2d = nullptr;
  const ResizeKernels* resize_2d = nullptr;
  const QuantS8Kernels* quant_s8 = nullptr;
  const A16Kernels* a16 = nullptr;        // 16-bit activations x 8-bit weights
  const A16A16Kernels* a16a16 = nullptr;  // 16-bit activations x 16-bit activations
  // Vectorized sigmoid/tanh (never null once made: the reference loops without SIMD).
  const VMathKernels* vmath = nullptr;
  // Float row kernels (LayerNormalization, row sums, Softmax's scaling).
  const RowOpsF32Kernels* rowops_f32 = nullptr;
  // The ops' portable fast loops (tiled Transpose, LRN window sums,
  // channels-last nearest Resize); off only without any SIMD feature, so the
  // reference configuration runs every op's reference kernel.
  bool fast_loops = false;
  // (family, variant) in a fixed order, "reference" where the family has none.
  std::vector<std::pair<const char*, const char*>> variants;

  // "gemm_f32=avx512f gemm_s8=avx512vnni ..." (every family, fixed order).
  std::string Describe() const;
  // Float element-wise Add/Sub/Mul/Div/Max/Min runs (binary_f32.h).
  const BinaryF32Kernels* binary_f32 = nullptr;
};

// The variant of every family that `features` allow.
KernelConfig MakeKernelConfig(const CpuFeatures& features);
// Opt-in bf16 convolutions and Gemm (AMX-BF16, or AVX-512 BF16 where
// features.avx512bf16_fast) where they are faster than fp32 (else nothing
// changes); listed as conv_nhwc_bf16 and gemm_bf16 in Describe().
void EnableBf16(KernelConfig* config);
// Opt-in fp16 convolutions and Gemm/MatMul with a constant B (NEON half
// arithmetic) where the CPU has Armv8.2 FEAT_FP16 (else nothing changes);
// listed as conv_nhwc_fp16 and gemm_fp16 in Describe().
void EnableFp16(KernelConfig* config);
// No fast kernels: every op runs its reference kernel (the converter's
// constant folding, the oracle of the kernel tests).
const KernelConfig& ReferenceKernelConfig();
// Made once from DefaultCpuFeatures() (the CPU's, lowered by QFOLD_ISA):
// what ops use when their KernelContext names no configuration.
const KernelConfig& DefaultKernelConfig();
// Tests: the configuration of the named feature set (clamped to the CPU's).
KernelConfig KernelConfigForIsa(Isa isa);

}  // namespace kernels
}  // namespace qfold
