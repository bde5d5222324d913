// Builds a KernelConfig from CPU features; see kernel_config.h. Each family's
// selector (XxxFor in the family's driver) says which features its variants need.
#include "kernels/kernel_config.h"

namespace qfold {
namespace kernels {

void EnableBf16(KernelConfig* config) {
  const CpuFeatures& f = config->features;
  // Only where bf16 is faster than fp32: with AMX-BF16, or where vdpbf16ps keeps
  // the FMA's pace; else the session stays fp32 (better numbers, same speed).
  if (!(f.amx && f.amx_bf16) && !f.avx512bf16_fast) return;
  const char* v = nullptr;
  config->conv_nhwc_bf16 = config->conv_nhwc_f32 ? ConvNhwcBf16For(f, &v) : nullptr;
  if (config->conv_nhwc_bf16) config->variants.emplace_back("conv_nhwc_bf16", v);
  config->gemm_bf16 = config->gemm_f32 ? GemmBf16For(f, &v) : nullptr;
  if (config->gemm_bf16) config->variants.emplace_back("gemm_bf16", v);
}

void EnableFp16(KernelConfig* config) {
  const char* v = nullptr;
  const Fp16Kernels* k = Fp16KernelsFor(config->features, &v);
  config->conv_nhwc_fp16 = config->conv_nhwc_f32 ? k : nullptr;
  if (config->conv_nhwc_fp16) config->variants.emplace_back("conv_nhwc_fp16", v);
  config->gemm_fp16 = config->gemm_f32 ? k : nullptr;
  if (config->gemm_fp16) config->variants.emplace_back("gemm_fp16", v);
}

KernelConfig MakeKernelConfig(const CpuFeatures& f) {
  KernelConfig c;
  c.features = f;
  auto add = [&c](const char* family, const char* variant) {
    c.variants.emplace_back(family, variant ? variant : "reference");
  };
  const char* v = nullptr;
  c.gemm_f32 = GemmF32For(f, &v);
  add("gemm_f32", v);
  c.dw_f32 = DwF32PlaneFor(f, &v);
  add("dwconv_f32", v);
  c.conv_nhwc_f32 = ConvNhwcF32For(f, &v);
  add("conv_nhwc_f32", v);
  c.gemm_s8 = GemmS8For(f, &v);
  add("gemm_s8", v);
  c.igemm_s8 = IgemmS8Kernels(f, &v);
  add("igemm_s8", v);
  c.dwconv_s8 = DwConvS8For(f, &v);
  add("dwconv_s8", v);
  c.dwconv_nhwc_s8 = DwConvNhwcFor(f, &v);
  add("dwconv_nhwc_s8", v);
  c.pool_nhwc_s8 = PoolNhwcFor(f, &v);
  add("pool_nhwc_s8", v);
  c.pool_2d = Pool2dFor(f, &v);
  add("pool_2d", v);
  c.resize_2d = ResizeFor(f, &v);
  add("resize_2d", v);
  c.quant_s8 = QuantS8For(f, &v);
  add("quant_s8", v);
  c.a16 = A16KernelsFor(f, &v);
  add("a16w8", v);
  c.a16a16 = A16A16KernelsFor(f, &v);
  add("a16a16", v);
  c.vmath = VMathFor(f, &v);
  add("vmath", v);
  c.rowops_f32 = RowOpsF32For(f, &v);
  add("rowops_f32", v);
  c.fast_loops = HighestIsa(f) != Isa::kReference;
  add("portable_loops", c.fast_loops ? "on" : nullptr);
  c.binary_f32 = BinaryF32For(f, &v);
  add("binary_f32", v);
  c.gemm_wq_f32 = GemmWqF32For(f, &v);
  add("gemm_wq_f32", v);
  c.gemm_wq_s8 = GemmWqS8For(f, &v);
  add("gemm_wq_s8", v);
  return c;
}

std::string KernelConfig::Describe() const {
  std::string s;
  for (const auto& fv : variants) {
    if (!s.empty()) s += ' ';
    s += fv.first;
    s += '=';
    s += fv.second;
  }
  return s;
}

const KernelConfig& ReferenceKernelConfig() {
  static const KernelConfig config = MakeKernelConfig(CpuFeatures());
  return config;
}

const KernelConfig& DefaultKernelConfig() {
  static const KernelConfig config = MakeKernelConfig(DefaultCpuFeatures());
  return config;
}

KernelConfig KernelConfigForIsa(Isa isa) {
  return MakeKernelConfig(FeaturesForIsa(isa));
}

}  // namespace kernels
}  // namespace qfold
