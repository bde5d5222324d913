// The SIMD sigmoid/tanh algorithm (vmath.h), written once over a vector trait
// V; included only by the per-ISA files, which compile it with their flags.
//
// exp(x): n = round(x / ln2), r = x - n ln2 (ln2 split in two so n ln2 is
// exact), |r| <= ln2/2, e^r by its Taylor polynomial to degree 7 (truncation
// below 6e-9 relative), times 2^n built in the exponent bits. x is clamped
// to [-87.33655, 88.3] so 2^n stays a normal float (exp(-87.33655) is just
// below FLT_MIN: smaller results are inexact, but no larger than FLT_MIN).
// sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, e = exp(-|x|):
//   never overflows, and keeps relative accuracy for large negative x.
// tanh(x) = x + x^3 q(x^2) for |x| < 0.625 (q fitted by least squares with
//   relative weight on [0, 0.625]: 1 - 2 / (e^{2|x|} + 1) would cancel there),
//   else sign(x) (1 - 2 / (exp(2|x|) + 1)).
//
// V provides: type F, Load/Store, Set, Add, Sub, Mul, Div, Fma(a, b, c) = a*b + c,
// Min, Max, Abs, Round (to nearest), Pow2(n) (2^n for integral float n in
// [-126, 127]), Less(a, b) and IsNan(a) masks, Select(mask, a, b), CopySign(mag, sgn).
#pragma once
#include <algorithm>
#include <cstdint>

namespace qfold {
namespace kernels {
namespace vmath {

template <class V>
inline typename V::F Exp(typename V::F x) {
  using F = typename V::F;
  x = V::Min(V::Max(x, V::Set(-87.33655f)), V::Set(88.3f));
  const F n = V::Round(V::Mul(x, V::Set(1.44269504088896341f)));
  F r = V::Fma(n, V::Set(-0.693145751953125f), x);  // ln2 high part: n * it is exact
  r = V::Fma(n, V::Set(-1.428606765330187e-06f), r);
  F p = V::Set(1.f / 5040.f);
  p = V::Fma(p, r, V::Set(1.f / 720.f));
  p = V::Fma(p, r, V::Set(1.f / 120.f));
  p = V::Fma(p, r, V::Set(1.f / 24.f));
  p = V::Fma(p, r, V::Set(1.f / 6.f));
  p = V::Fma(p, r, V::Set(0.5f));
  p = V::Fma(p, r, V::Set(1.f));
  p = V::Fma(p, r, V::Set(1.f));
  return V::Mul(p, V::Pow2(n));
}

template <class V>
inline typename V::F Sigmoid(typename V::F x) {
  using F = typename V::F;
  const F e = Exp<V>(V::Sub(V::Set(0.f), V::Abs(x)));
  const F d = V::Add(V::Set(1.f), e);
  const F pos = V::Div(V::Set(1.f), d);
  const F neg = V::Div(e, d);
  const F y = V::Select(V::Less(x, V::Set(0.f)), neg, pos);
  return V::Select(V::IsNan(x), x, y);
}

template <class V>
inline typename V::F Tanh(typename V::F x) {
  using F = typename V::F;
  const F a = V::Abs(x);
  // Small |x|: odd polynomial.
  const F u = V::Mul(a, a);
  F q = V::Set(-5.810467061e-03f);
  q = V::Fma(q, u, V::Set(2.073152922e-02f));
  q = V::Fma(q, u, V::Set(-5.376731232e-02f));
  q = V::Fma(q, u, V::Set(1.333176196e-01f));
  q = V::Fma(q, u, V::Set(-3.333329260e-01f));
  const F small = V::Fma(V::Mul(a, u), q, a);
  // Large |x|: through exp (saturates to 1 from |x| ~ 9 on).
  const F e = Exp<V>(V::Add(a, a));
  const F large = V::Sub(V::Set(1.f), V::Div(V::Set(2.f), V::Add(e, V::Set(1.f))));
  const F y = V::CopySign(V::Select(V::Less(a, V::Set(0.625f)), small, large), x);
  return V::Select(V::IsNan(x), x, y);
}

// Whole vectors, then the tail through a zero-padded copy.
template <class V, typename V::F (*Fn)(typename V::F)>
void Map(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::Store(y + i, Fn(V::Load(x + i)));
  if (i < n) {
    float buf[V::kLanes] = {};
    const int64_t rest = n - i;
    std::copy(x + i, x + n, buf);
    V::Store(buf, Fn(V::Load(buf)));
    std::copy(buf, buf + rest, y + i);
  }
}

}  // namespace vmath
}  // namespace kernels
}  // namespace qfold
