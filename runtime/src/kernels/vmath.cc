// Reference vmath kernels (libm, the oracle of the SIMD variants) and the
// choice of variant per ISA level.
#include "kernels/vmath.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace qfold {
namespace kernels {

#if defined(__x86_64__)
extern const VMathKernels kVMathAvx2;
extern const VMathKernels kVMathAvx512f;
#endif
#if defined(__aarch64__)
extern const VMathKernels kVMathNeon;
#endif

namespace {

void SigmoidRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
}

void TanhRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void ExpRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void LogRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}

void ErfRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}

// Gelu in double, through erfc and a sigmoid: the literal float formula
// 0.5 x (1 + erf(x / sqrt2)) loses all its bits to cancellation for negative x.
void GeluRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = v < -40 ? -0.f : float(0.5 * v * std::erfc(-v * 0.70710678118654752));
  }
}

void GeluTanhRef(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double w2 = 1.5957691216057308 * (v + 0.044715 * v * v * v);  // 2 tanh's argument
    y[i] = v < -40 ? -0.f : float(v / (1.0 + std::exp(-w2)));
  }
}

// In double: in float, sigmoid(alpha x) goes subnormal (and loses its bits)
// where x sigmoid(alpha x) is still a normal float.
void SwishRef(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = float(v / (1.0 + std::exp(-double(alpha * x[i]))));
  }
}

void HardSwishRef(const float* x, float* y, int64_t n, bool affine, float scale, float shift) {
  for (int64_t i = 0; i < n; ++i) {
    // The spec's alpha = 1/6 as a float product, rounded before the sum (as
    // ONNX Runtime computes it: bit for bit; x / 6 differed in 1 of 10).
    const float h = x[i] * std::max(0.f, std::min(1.f, Rounded(x[i] * (1.f / 6.f)) + 0.5f));
    const float t = Rounded(h * scale);
    y[i] = affine ? t + shift : h;
  }
}

void AffineRef(const float* x, float* y, int64_t n, float scale, float shift) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = Rounded(x[i] * scale);
    y[i] = t + shift;
  }
}

float MaxRef(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i];
  return m;
}

float ExpShiftSumRef(const float* x, float* y, int64_t n, float shift) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

void LrnRef(const float* x0, int64_t stride, int64_t count, const float* xc, float* y, int64_t n,
            float bias, float scale, float nbeta) {
  for (int64_t i = 0; i < n; ++i) {
    float s = 0.f;
    for (int64_t k = 0; k < count; ++k) s = std::fma(x0[k * stride + i], x0[k * stride + i], s);
    const float d = std::fma(scale, s, bias);
    if (nbeta == -0.75f) {
      const float t = std::sqrt(d);
      y[i] = xc[i] / (t * std::sqrt(t));
    } else {
      y[i] = xc[i] * std::exp(nbeta * std::log(d));
    }
  }
}

void LrnChannelsLastRef(const float* x, float* y, int64_t rows, int64_t c, int64_t before,
                        int64_t after, float bias, float scale, float nbeta) {
  for (int64_t r = 0; r < rows; ++r, x += c, y += c)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t k0 = std::max<int64_t>(0, ch - before), k1 = std::min(c - 1, ch + after);
      LrnRef(x + k0, 1, k1 - k0 + 1, x + ch, y + ch, 1, bias, scale, nbeta);
    }
}

const VMathKernels kVMathRef = {"reference",
                                SigmoidRef,
                                TanhRef,
                                ExpRef,
                                LogRef,
                                ErfRef,
                                GeluRef,
                                GeluTanhRef,
                                SwishRef,
                                MaxRef,
                                ExpShiftSumRef,
                                LrnRef,
                                LrnChannelsLastRef,
                                HardSwishRef,
                                AffineRef};

}  // namespace

const VMathKernels& VMathFor(Isa isa) {
  return *VMathFor(IsaFeatures(isa), nullptr);
}

const VMathKernels* VMathFor(const CpuFeatures& f, const char** variant) {
  const VMathKernels* k = &kVMathRef;
#if defined(__x86_64__)
  if (f.avx2 && f.fma) k = f.avx512f ? &kVMathAvx512f : &kVMathAvx2;
#endif
#if defined(__aarch64__)
  if (f.asimd) k = &kVMathNeon;
#endif
  (void)f;
  if (variant) *variant = k == &kVMathRef ? nullptr : k->name;
  return k;
}

}  // namespace kernels
}  // namespace qfold
