// The loops of binary_f32.h, written once over a vector trait V; included only
// by the per-ISA files, which compile them with their flags.
//
// V provides: type F, kLanes, Load/Store, LoadPart/StorePart (the first m <
// kLanes lanes; the other lanes of LoadPart are unspecified), Set, Add, Sub,
// Mul, Div, Less(a, b) and Unordered(a, b) masks, Select(mask, a, b).
#pragma once
#include <cstdint>
#include <limits>

#include "kernels/binary_f32.h"

namespace qfold {
namespace kernels {
namespace binary_f32 {

template <class V, int kOp>
inline typename V::F Apply(typename V::F a, typename V::F b) {
  if constexpr (kOp == kBinAdd) {
    return V::Add(a, b);
  } else if constexpr (kOp == kBinSub) {
    return V::Sub(a, b);
  } else if constexpr (kOp == kBinMul) {
    return V::Mul(a, b);
  } else if constexpr (kOp == kBinDiv) {
    return V::Div(a, b);
  } else {
    // Compare and select rather than the max/min instructions, whose choice
    // between equal operands (-0, +0) and NaN differs between ISAs.
    const typename V::F r =
        kOp == kBinMax ? V::Select(V::Less(a, b), b, a) : V::Select(V::Less(b, a), b, a);
    return V::Select(V::Unordered(a, b), V::Set(std::numeric_limits<float>::quiet_NaN()), r);
  }
}

template <class V, int kOp, int kForm>
void Run(const float* a, const float* b, float* y, int64_t n) {
  using F = typename V::F;
  constexpr int64_t L = V::kLanes;
  // The repeated operand is read before any store (y may alias it when n = 1).
  const F sa = kForm == kBinScalarVec ? V::Set(a[0]) : V::Set(0.f);
  const F sb = kForm == kBinVecScalar ? V::Set(b[0]) : V::Set(0.f);
  auto lhs = [&](int64_t i) { return kForm == kBinScalarVec ? sa : V::Load(a + i); };
  auto rhs = [&](int64_t i) { return kForm == kBinVecScalar ? sb : V::Load(b + i); };
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    const F y0 = Apply<V, kOp>(lhs(i), rhs(i));
    const F y1 = Apply<V, kOp>(lhs(i + L), rhs(i + L));
    const F y2 = Apply<V, kOp>(lhs(i + 2 * L), rhs(i + 2 * L));
    const F y3 = Apply<V, kOp>(lhs(i + 3 * L), rhs(i + 3 * L));
    V::Store(y + i, y0);
    V::Store(y + i + L, y1);
    V::Store(y + i + 2 * L, y2);
    V::Store(y + i + 3 * L, y3);
  }
  for (; i + L <= n; i += L) V::Store(y + i, Apply<V, kOp>(lhs(i), rhs(i)));
  if (i < n) {
    const int m = int(n - i);
    const F u = kForm == kBinScalarVec ? sa : V::LoadPart(a + i, m);
    const F v = kForm == kBinVecScalar ? sb : V::LoadPart(b + i, m);
    V::StorePart(y + i, Apply<V, kOp>(u, v), m);
  }
}

template <class V, int kOp>
constexpr void FillOp(BinaryF32Kernels* k) {
  k->fn[kOp][kBinVecVec] = Run<V, kOp, kBinVecVec>;
  k->fn[kOp][kBinVecScalar] = Run<V, kOp, kBinVecScalar>;
  k->fn[kOp][kBinScalarVec] = Run<V, kOp, kBinScalarVec>;
}

// constexpr so that each table is constant-initialized: a dynamic initializer
// in an AVX-512 translation unit would run AVX-512 code at program start on
// every CPU.
template <class V>
constexpr BinaryF32Kernels Make(const char* name) {
  BinaryF32Kernels k{};
  k.name = name;
  FillOp<V, kBinAdd>(&k);
  FillOp<V, kBinSub>(&k);
  FillOp<V, kBinMul>(&k);
  FillOp<V, kBinDiv>(&k);
  FillOp<V, kBinMax>(&k);
  FillOp<V, kBinMin>(&k);
  return k;
}

}  // namespace binary_f32
}  // namespace kernels
}  // namespace qfold
