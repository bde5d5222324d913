// The SIMD algorithms of vmath.h, written once over a vector trait V; included
// only by the per-ISA files, which compile them with their flags.
//
// exp(x): n = round(x / ln2), r = x - n ln2 (ln2 split in two so n ln2 is
// exact), |r| <= ln2/2, e^r by a degree-6 polynomial (near-minimax, 3.6e-9
// relative), times 2^n built in the exponent bits. Exp clamps x to
// [-87.33655, 88.3] so 2^n stays a normal float (tanh only needs that range);
// ExpFull clamps to [-104, 88.73] and scales by 2^n rounding once
// (ScalePow2), so results overflow to inf and underflow gradually through
// the subnormals to 0.
// log(x) = e ln2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)) (subnormal x
//   scaled by 2^23 first); log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716,
//   by the atanh series to s^9 (truncation below 3e-9 relative).
// erf(x) = x P(x^2) for |x| < 0.875; above, 1 - erfc(|x|) with the sign of x.
// erfc(z) for z >= 0.875 = exp(-z^2) R(z): R fitted (relative least squares,
//   near-minimax) as a polynomial in z on [0.875, 2.25] and as (1/z) G(1/z) on
//   [2.25, 11]; exp(-z^2) takes z^2 as an exact sum hi + lo (an FMA gives lo)
//   and computes exp(-hi) (1 - lo): a rounded z^2 would cost 2 z^2 2^-24
//   relative, 200 ulp in the far tail.
// sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, e = ExpFull(-|x|):
//   never overflows, and keeps relative accuracy for large negative x.
// tanh(x) = x + x^3 q(x^2) for |x| < 0.625 (q fitted by least squares with
//   relative weight on [0, 0.625]: 1 - 2 / (e^{2|x|} + 1) would cancel there),
//   else sign(x) (1 - 2 / (exp(2|x|) + 1)).
// gelu(x) = x Phi(x), Phi(x) = 1 - erfc(z)/2 for x >= 0 and erfc(z)/2 for x < 0,
//   z = |x|/sqrt2: the literal 0.5 x (1 + erf(x/sqrt2)) cancels for negative x,
//   where the result goes to 0 (x = -5: 1 + erf loses 20 bits).
// gelu_tanh(x) = 0.5 x (1 + tanh(w)) = x sigmoid(2w), w = sqrt(2/pi) (x + 0.044715 x^3):
//   the same identity removes the cancellation.
//
// V provides: type F, Load/Store, Set, Add, Sub, Mul, Div, Fma(a, b, c) = a*b + c,
// Min, Max, Abs, Round (to nearest), Pow2(n) (2^n for integral float n in
// [-126, 127]), ScalePow2(p, n) (p 2^n rounded once, for |p| <= 2^41 and
// integral n in [-217, 128]: ScalePow2TwoSteps below, or one instruction
// that rounds the same way), Less(a, b), Equal(a, b) and IsNan(a) masks (of a type of the
// trait's choice: a vector, or an AVX-512 mask register), Select(mask, a, b),
// CopySign(mag, sgn), All(mask) (every lane set), None(mask) (no lane set), Exponent(x) (the
// unbiased exponent of a normal positive x, as float) and Mantissa(x) (its significand in [1, 2)).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/vmath.h"

namespace qfold {
namespace kernels {
namespace vmath {

// e^r for |r| <= ln2/2 and the reduction x = n ln2 + r.
template <class V>
inline typename V::F ExpReduced(typename V::F x, typename V::F* n_out) {
  using F = typename V::F;
  const F n = V::Round(V::Mul(x, V::Set(1.44269504088896341f)));
  F r = V::Fma(n, V::Set(-0.693145751953125f), x);  // ln2 high part: n * it is exact
  r = V::Fma(n, V::Set(-1.428606765330187e-06f), r);
  // 1 + r + r^2 q(r), q of degree 4 fitted for relative error on
  // [-ln2/2, ln2/2] (near-minimax: 3.6e-9 with these float coefficients,
  // where the degree-7 Taylor polynomial it replaces had 7.0e-9).
  F p = V::Set(1.3814539415761828e-03f);
  p = V::Fma(p, r, V::Set(8.36874544620514e-03f));
  p = V::Fma(p, r, V::Set(4.166838899254799e-02f));
  p = V::Fma(p, r, V::Set(1.666652113199234e-01f));
  p = V::Fma(p, r, V::Set(4.999999403953552e-01f));
  p = V::Fma(p, r, V::Set(1.f));
  p = V::Fma(p, r, V::Set(1.f));
  *n_out = n;
  return p;
}

template <class V>
inline typename V::F Exp(typename V::F x) {
  using F = typename V::F;
  x = V::Min(V::Max(x, V::Set(-87.33655f)), V::Set(88.3f));
  F n;
  const F p = ExpReduced<V>(x, &n);
  return V::Mul(p, V::Pow2(n));
}

// p 2^n for |p| <= 2^41 and integral n in [-217, 128]: when every lane's
// 2^n is normal, one product (one rounding); else times two normal factors
// 2^n1 and 2^(n - n1), n1 = round(n / 2) (gradual underflow, overflow to
// inf): one rounding too, unless p 2^n1 is itself below the normal range
// (|p| < 2^-17, as only m exp(x) with a tiny m can be), which rounds twice,
// a subnormal result then at most one step from vscalefps's. The traits
// without a scaling instruction (AVX2, NEON) use it as their ScalePow2.
template <class V>
inline typename V::F ScalePow2TwoSteps(typename V::F p, typename V::F n) {
  using F = typename V::F;
  if (V::All(V::Less(V::Set(-126.5f), n)) && V::All(V::Less(n, V::Set(127.5f))))
    return V::Mul(p, V::Pow2(n));
  const F n1 = V::Round(V::Mul(n, V::Set(0.5f)));
  return V::Mul(V::Mul(p, V::Pow2(n1)), V::Pow2(V::Sub(n, n1)));
}

// NaN in gives a number (the clamp): callers restore NaN where they must.
template <class V>
inline typename V::F ExpFullNoNan(typename V::F x) {
  using F = typename V::F;
  x = V::Min(V::Max(x, V::Set(-104.f)), V::Set(88.73f));
  F n;
  const F p = ExpReduced<V>(x, &n);
  return V::ScalePow2(p, n);  // n in [-150, 128]
}

// exp(x) and m exp(x) for |m| <= 2^40, each rounded once: m exp(x) stays
// accurate where exp(x) alone is subnormal.
template <class V>
inline typename V::F ExpFullTimes(typename V::F x, typename V::F m, typename V::F* e_out) {
  using F = typename V::F;
  // Down to -150 (n >= -217: two normal factors still) so m exp(x) reaches 0
  // for every m in range.
  x = V::Min(V::Max(x, V::Set(-150.f)), V::Set(88.73f));
  F n;
  const F p = ExpReduced<V>(x, &n);
  *e_out = V::ScalePow2(p, n);
  return V::ScalePow2(V::Mul(p, m), n);
}

template <class V>
inline typename V::F ExpFull(typename V::F x) {
  return V::Select(V::IsNan(x), x, ExpFullNoNan<V>(x));
}

template <class V>
inline typename V::F Log(typename V::F x) {
  using F = typename V::F;
  const auto tiny = V::Less(x, V::Set(std::numeric_limits<float>::min()));
  const F xs = V::Select(tiny, V::Mul(x, V::Set(8388608.f)), x);  // 2^23
  F e = V::Sub(V::Exponent(xs), V::Select(tiny, V::Set(23.f), V::Set(0.f)));
  F m = V::Mantissa(xs);
  const auto big = V::Less(V::Set(1.41421356f), m);
  m = V::Select(big, V::Mul(m, V::Set(0.5f)), m);
  e = V::Select(big, V::Add(e, V::Set(1.f)), e);
  const F f = V::Sub(m, V::Set(1.f));                         // exact (Sterbenz)
  const F s2 = V::Div(V::Add(f, f), V::Add(m, V::Set(1.f)));  // 2s
  const F z = V::Mul(s2, V::Mul(s2, V::Set(0.25f)));          // s^2
  F q = V::Set(1.f / 9.f);
  q = V::Fma(q, z, V::Set(1.f / 7.f));
  q = V::Fma(q, z, V::Set(1.f / 5.f));
  q = V::Fma(q, z, V::Set(1.f / 3.f));
  // e ln2_lo + 2s z q, then + 2s, then + e ln2_hi (exact product).
  F y = V::Fma(V::Mul(s2, z), q, V::Mul(e, V::Set(1.428606765330187e-06f)));
  y = V::Add(y, s2);
  y = V::Fma(e, V::Set(0.693145751953125f), y);
  const float inf = std::numeric_limits<float>::infinity();
  y = V::Select(V::Equal(x, V::Set(inf)), x, y);
  y = V::Select(V::Equal(x, V::Set(0.f)), V::Set(-inf), y);
  // Negative x and NaN give NaN.
  return V::Select(V::Less(x, V::Set(0.f)), V::Set(std::numeric_limits<float>::quiet_NaN()),
                   V::Select(V::IsNan(x), x, y));
}

// erf(a) / a for 0 <= a < 0.875, as P(a^2).
template <class V>
inline typename V::F ErfSmallOverX(typename V::F a2) {
  using F = typename V::F;
  F p = V::Set(-6.199409253895283e-04f);
  p = V::Fma(p, a2, V::Set(5.031435750424862e-03f));
  p = V::Fma(p, a2, V::Set(-2.679095603525638e-02f));
  p = V::Fma(p, a2, V::Set(1.128244102001190e-01f));
  p = V::Fma(p, a2, V::Set(-3.761254847049713e-01f));
  p = V::Fma(p, a2, V::Set(1.128379106521606e+00f));
  return p;
}

// erfc(z) for z >= 0.875 (finite; z above 11 gives 0), given z^2 = hi + lo
// exactly; m erfc(z) (|m| <= 2^40), rounded once, in *scaled.
template <class V>
inline typename V::F ErfcLarge(typename V::F z, typename V::F hi, typename V::F lo, typename V::F m,
                               typename V::F* scaled) {
  using F = typename V::F;
  // R on [0.875, 2.25] in u = (2z - 3.125) / 1.375.
  // Each fit is evaluated only when a lane needs it (the lanes' results do not
  // depend on their neighbours): activations rarely reach z = 2.25.
  const auto below = V::Less(z, V::Set(2.25f));
  const bool all_below = V::All(below);
  const F u = V::Fma(z, V::Set(1.45454545f), V::Set(-2.27272727f));
  F a = V::Set(-2.233178520327783e-06f);
  a = V::Fma(a, u, V::Set(1.045642875396879e-05f));
  a = V::Fma(a, u, V::Set(-4.055960016557947e-05f));
  a = V::Fma(a, u, V::Set(1.699826825642958e-04f));
  a = V::Fma(a, u, V::Set(-6.896050763316453e-04f));
  a = V::Fma(a, u, V::Set(2.653136383742094e-03f));
  a = V::Fma(a, u, V::Set(-9.676645509898663e-03f));
  a = V::Fma(a, u, V::Set(3.321723639965057e-02f));
  a = V::Fma(a, u, V::Set(-1.062031164765358e-01f));
  a = V::Fma(a, u, V::Set(3.116486072540283e-01f));
  F r = a;
  if (!all_below) {
    // (1/z) G(1/z) on [2.25, 11], G in v = (2t - 0.5353535) / 0.3535354, t = 1/z.
    const F t = V::Div(V::Set(1.f), z);
    const F v = V::Fma(t, V::Set(5.65714286f), V::Set(-1.51428571f));
    F g = V::Set(-5.280479626890155e-07f);
    g = V::Fma(g, v, V::Set(1.098125812859507e-05f));
    g = V::Fma(g, v, V::Set(-4.002155765192583e-05f));
    g = V::Fma(g, v, V::Set(-4.844544309889898e-05f));
    g = V::Fma(g, v, V::Set(1.197121338918805e-03f));
    g = V::Fma(g, v, V::Set(-4.881274886429310e-03f));
    g = V::Fma(g, v, V::Set(-2.212667837738991e-02f));
    g = V::Fma(g, v, V::Set(5.458351969718933e-01f));
    r = V::Select(below, a, V::Mul(t, g));
  }
  const F c = V::Mul(V::Fma(lo, V::Set(-1.f), V::Set(1.f)), r);
  F e;
  *scaled = ExpFullTimes<V>(V::Sub(V::Set(0.f), hi), V::Mul(m, c), &e);
  return V::Mul(e, c);
}

template <class V>
inline typename V::F Erf(typename V::F x) {
  using F = typename V::F;
  // Above 4, erf rounds to 1; the clamp keeps inf out of the arithmetic.
  const F a = V::Min(V::Abs(x), V::Set(4.f));
  const F hi = V::Mul(a, a);
  const F lo = V::Fma(a, a, V::Sub(V::Set(0.f), hi));
  const F small = V::Mul(a, ErfSmallOverX<V>(hi));
  const auto is_small = V::Less(a, V::Set(0.875f));
  if (V::All(is_small)) return V::CopySign(small, x);  // no NaN: Min gave it 4
  F unused;
  const F large =
      V::Sub(V::Set(1.f), ErfcLarge<V>(V::Max(a, V::Set(0.875f)), hi, lo, V::Set(1.f), &unused));
  const F y = V::CopySign(V::Select(is_small, small, large), x);
  return V::Select(V::IsNan(x), x, y);
}

template <class V>
inline typename V::F Sigmoid(typename V::F x) {
  using F = typename V::F;
  const F e = ExpFullNoNan<V>(V::Sub(V::Set(0.f), V::Abs(x)));
  const F d = V::Add(V::Set(1.f), e);
  // e / d for x < 0, 1 / d otherwise: one division of the selected numerator
  // (the same quotients as two divisions and a select, at half the divides).
  const F y = V::Div(V::Select(V::Less(x, V::Set(0.f)), e, V::Set(1.f)), d);
  return V::Select(V::IsNan(x), x, y);
}

// m sigmoid(s) (|m| <= 2^40) with one rounding of the exponential's scale,
// so it stays accurate where sigmoid(s) alone would be subnormal; NaN s or m
// give unspecified numbers (callers restore NaN).
template <class V>
inline typename V::F TimesSigmoid(typename V::F m, typename V::F s) {
  using F = typename V::F;
  F e;
  const F me = ExpFullTimes<V>(V::Sub(V::Set(0.f), V::Abs(s)), m, &e);
  const F d = V::Add(V::Set(1.f), e);
  return V::Div(V::Select(V::Less(s, V::Set(0.f)), me, m), d);
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

template <class V>
inline typename V::F Gelu(typename V::F x) {
  using F = typename V::F;
  // Phi is 0 or 1 in float beyond |x| = 16; the clamp keeps inf out.
  const F a = V::Min(V::Abs(x), V::Set(16.f));
  const F half_a = V::Mul(a, V::Set(0.5f));
  const F hi = V::Mul(half_a, a);  // z^2 = a^2 / 2 = hi + lo
  const F lo = V::Fma(half_a, a, V::Sub(V::Set(0.f), hi));
  const F z = V::Mul(a, V::Set(0.707106781f));
  // Half of erf(z) (small z) or of erfc(z) (large z).
  const F small = V::Mul(V::Mul(z, V::Set(0.5f)), ErfSmallOverX<V>(hi));
  // x below -16 (Phi under 1e-57): -0, not -inf * 0.
  const F xc = V::Max(x, V::Set(-16.f));
  const auto neg = V::Less(x, V::Set(0.f));
  const F half = V::Set(0.5f);
  const F phi_small = V::Select(neg, V::Sub(half, small), V::Add(half, small));
  const F y_small = V::Mul(xc, phi_small);
  const auto is_small = V::Less(z, V::Set(0.875f));
  if (V::All(is_small)) return y_small;  // no NaN: Min gave it 16
  // Large z: erfc(z) / 2, and x erfc(z) / 2 rounded once (it is the result
  // for x < 0, and normal where erfc(z) is already subnormal).
  F x_half_erfc;
  const F half_erfc = V::Mul(
      ErfcLarge<V>(V::Max(z, V::Set(0.875f)), hi, lo, V::Mul(xc, V::Set(0.5f)), &x_half_erfc),
      V::Set(0.5f));
  const F y_large = V::Select(neg, x_half_erfc, V::Mul(xc, V::Sub(V::Set(1.f), half_erfc)));
  const F y = V::Select(is_small, y_small, y_large);
  return V::Select(V::IsNan(x), x, y);
}

template <class V>
inline typename V::F GeluTanh(typename V::F x) {
  using F = typename V::F;
  // sigmoid(2w) underflows below x = -11: clamping there keeps -inf * 0 out.
  const F xc = V::Max(x, V::Set(-16.f));
  const F x2 = V::Mul(xc, xc);
  // 2w = x (2 sqrt(2/pi) + 2 sqrt(2/pi) 0.044715 x^2)
  const F w2 = V::Mul(xc, V::Fma(x2, V::Set(0.0713548162726f), V::Set(1.5957691216057308f)));
  const F y = TimesSigmoid<V>(xc, w2);
  return V::Select(V::IsNan(x), x, y);
}

// Whole vectors, then the tail through a zero-padded copy.
template <class V, class Fn>
void Map(const float* x, float* y, int64_t n, Fn fn) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::Store(y + i, fn(V::Load(x + i)));
  if (i < n) {
    float buf[V::kLanes] = {};
    const int64_t rest = n - i;
    std::copy(x + i, x + n, buf);
    V::Store(buf, fn(V::Load(buf)));
    std::copy(buf, buf + rest, y + i);
  }
}

// The kernels of vmath.h for one trait.
template <class V>
struct Kernels {
  static void Exp(const float* x, float* y, int64_t n) { Map<V>(x, y, n, ExpFull<V>); }
  static void Log(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::Log<V>); }
  static void Erf(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::Erf<V>); }
  static void Sigmoid(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::Sigmoid<V>); }
  static void Tanh(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::Tanh<V>); }
  static void Gelu(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::Gelu<V>); }
  static void GeluTanh(const float* x, float* y, int64_t n) { Map<V>(x, y, n, vmath::GeluTanh<V>); }
  static void Swish(const float* x, float* y, int64_t n, float alpha) {
    const typename V::F va = V::Set(alpha);
    Map<V>(x, y, n, [va](typename V::F v) {
      // |x| above 2^40 (the product's range): x sigmoid(alpha x), computed
      // only for vectors that have such a lane.
      const typename V::F big = V::Set(1099511627776.f);
      const auto huge = V::Less(big, V::Abs(v));
      const typename V::F m = V::Min(V::Max(v, V::Sub(V::Set(0.f), big)), big);
      typename V::F y = TimesSigmoid<V>(m, V::Mul(va, v));
      if (!V::None(huge)) y = V::Select(huge, V::Mul(v, vmath::Sigmoid<V>(V::Mul(va, v))), y);
      return V::Select(V::IsNan(v), v, y);
    });
  }
  static void HardSwish(const float* x, float* y, int64_t n, bool affine, float scale,
                        float shift) {
    using F = typename V::F;
    const F sixth = V::Set(1.f / 6.f), half = V::Set(0.5f), zero = V::Set(0.f), one = V::Set(1.f);
    auto hswish = [=](F v) {
      // As the scalar x * max(0, min(1, x * (1/6) + 0.5)), the product
      // rounded before the sum: NaN and -inf give NaN.
      return V::Mul(v, V::Max(zero, V::Min(one, V::Add(Rounded(V::Mul(v, sixth)), half))));
    };
    if (!affine) return Map<V>(x, y, n, hswish);
    const F vs = V::Set(scale), vt = V::Set(shift);
    Map<V>(x, y, n, [=](F v) { return V::Add(Rounded(V::Mul(hswish(v), vs)), vt); });
  }
  static void Affine(const float* x, float* y, int64_t n, float scale, float shift) {
    const typename V::F vs = V::Set(scale), vt = V::Set(shift);
    Map<V>(x, y, n, [=](typename V::F v) { return V::Add(Rounded(V::Mul(v, vs)), vt); });
  }
  // The largest element (NaN ignored; -inf for n = 0).
  static float Max(const float* x, int64_t n) {
    typename V::F acc = V::Set(-std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + V::kLanes <= n; i += V::kLanes) acc = V::Max(V::Load(x + i), acc);
    float buf[V::kLanes];
    V::Store(buf, acc);
    float m = buf[0];
    for (int k = 1; k < V::kLanes; ++k) m = buf[k] > m ? buf[k] : m;
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
  }
  // x * d^nbeta for d = fma(scale, s, bias): beta = 3/4 (every LRN of
  // AlexNet, GoogLeNet, ZFNet) as x / (sqrt(d) * sqrt(sqrt(d))), four
  // correctly rounded steps (within 2 ulp), instead of log and exp
  // (Inception-v1's LRNs 0.64 -> 0.32 ms on Zen 5).
  struct LrnFinish {
    typename V::F vb, vs, vn;
    bool three_quarters;
    LrnFinish(float bias, float scale, float nbeta)
        : vb(V::Set(bias)), vs(V::Set(scale)), vn(V::Set(nbeta)), three_quarters(nbeta == -0.75f) {}
    typename V::F operator()(typename V::F s, typename V::F x) const {
      return three_quarters ? Finish<true>(s, x) : Finish<false>(s, x);
    }
    template <bool kThreeQuarters>
    typename V::F Finish(typename V::F s, typename V::F x) const {
      const typename V::F d = V::Fma(vs, s, vb);
      if (kThreeQuarters) {
        const typename V::F t = V::Sqrt(d);
        return V::Div(x, V::Mul(t, V::Sqrt(t)));
      }
      return V::Mul(x, ExpFull<V>(V::Mul(vn, vmath::Log<V>(d))));
    }
  };
  // See VMathKernels::lrn. Whole vectors, then the tail through zero-padded
  // copies of each plane.
  static void Lrn(const float* x0, int64_t stride, int64_t count, const float* xc, float* y,
                  int64_t n, float bias, float scale, float nbeta) {
    using F = typename V::F;
    const LrnFinish one(bias, scale, nbeta);
    int64_t i = 0;
    // Four vectors at a time: log and exp are long dependency chains, four
    // of them side by side overlap (0.72 -> 0.64 ms on Inception-v1's LRNs).
    constexpr int kU = 4;
    for (; i + kU * V::kLanes <= n; i += kU * V::kLanes) {
      F s[kU], r[kU];
      for (int u = 0; u < kU; ++u) s[u] = V::Set(0.f);
      for (int64_t k = 0; k < count; ++k)
        for (int u = 0; u < kU; ++u) {
          const F v = V::Load(x0 + k * stride + i + u * V::kLanes);
          s[u] = V::Fma(v, v, s[u]);
        }
      for (int u = 0; u < kU; ++u) r[u] = one(s[u], V::Load(xc + i + u * V::kLanes));
      for (int u = 0; u < kU; ++u) V::Store(y + i + u * V::kLanes, r[u]);
    }
    for (; i + V::kLanes <= n; i += V::kLanes) {
      F s = V::Set(0.f);
      for (int64_t k = 0; k < count; ++k) {
        const F v = V::Load(x0 + k * stride + i);
        s = V::Fma(v, v, s);
      }
      V::Store(y + i, one(s, V::Load(xc + i)));
    }
    if (i < n) {
      float buf[V::kLanes] = {};
      F s = V::Set(0.f);
      for (int64_t k = 0; k < count; ++k) {
        std::copy(x0 + k * stride + i, x0 + k * stride + n, buf);
        const F v = V::Load(buf);
        s = V::Fma(v, v, s);
      }
      std::copy(xc + i, xc + n, buf);
      V::Store(buf, one(s, V::Load(buf)));
      std::copy(buf, buf + (n - i), y + i);
    }
  }
  // See VMathKernels::lrn_channels_last. Lane i sums window positions
  // i - before .. i + after in order; where they leave the row they read
  // zeros, which add exactly nothing (fma(0, 0, s) = s for the s >= 0 of a
  // sum of squares), so the bits are lrn's.
  static void LrnChannelsLast(const float* x, float* y, int64_t rows, int64_t c, int64_t before,
                              int64_t after, float bias, float scale, float nbeta) {
    if (nbeta == -0.75f)
      LrnRows<true>(x, y, rows, c, before, after, bias, scale, nbeta);
    else
      LrnRows<false>(x, y, rows, c, before, after, bias, scale, nbeta);
  }
  // Rows are copied, a chunk of them at a time, into lines with zeros in
  // front and behind (a row wider than a chunk in several lines), and the
  // windows read the lines: the vectors at a row's ends had gone through a
  // copy made just before its loads, which then waited for the stores
  // (ZFNet's 96-channel LRN at 110x110: 0.55 -> 0.33 ms on Zen 5). Four
  // vectors side by side: one vector's window sum and square roots are a
  // chain of latencies. The finishing form is a template argument, so its
  // test stays out of the loop.
  template <bool kThreeQuarters>
  static void LrnRows(const float* x, float* y, int64_t rows, int64_t c, int64_t before,
                      int64_t after, float bias, float scale, float nbeta) {
    using F = typename V::F;
    constexpr int kU = 4;
    constexpr int64_t kChunk = 4096;  // floats of lines per chunk: 16 KiB
    const LrnFinish one(bias, scale, nbeta);
    const int64_t taps = before + after + 1;
    const int64_t vectors = (c + V::kLanes - 1) / V::kLanes;
    // Vectors per line: a whole row where a chunk holds it.
    const int64_t line_vectors = std::min(vectors, (kChunk - (taps - 1)) / V::kLanes);
    alignas(64) float lines[kChunk];
    alignas(64) float zeros[V::kLanes + 2 * kLrnMaxChannelsLastSize] = {};
    float out_buf[V::kLanes];
    const float* win[kU];
    float* dst[kU];
    int64_t len[kU];
    int nu = 0;
    // The group's vectors: every lane computes (a spare one reads zeros and
    // divides zeros), so the four chains overlap; the ones in use store.
    auto flush = [&] {
      for (int u = nu; u < kU; ++u) win[u] = zeros;
      F s[kU];
      for (int u = 0; u < kU; ++u) s[u] = V::Set(0.f);
      for (int64_t t = 0; t < taps; ++t)
        for (int u = 0; u < kU; ++u) {
          const F v = V::Load(win[u] + t);
          s[u] = V::Fma(v, v, s[u]);
        }
      F out[kU];
      for (int u = 0; u < kU; ++u)
        out[u] = one.template Finish<kThreeQuarters>(s[u], V::Load(win[u] + before));
      for (int u = 0; u < nu; ++u) {
        if (len[u] == V::kLanes) {
          V::Store(dst[u], out[u]);
        } else {
          V::Store(out_buf, out[u]);
          std::copy(out_buf, out_buf + len[u], dst[u]);
        }
      }
      nu = 0;
    };
    // Line positions of the current chunk: its row, first channel and vectors.
    struct Line {
      int64_t row, i0, nv, at;
    };
    Line chunk[kChunk / V::kLanes + 1];
    int64_t r = 0, i0 = 0;  // the next line: row r from channel i0
    while (r < rows) {
      int nl = 0;
      int64_t used = 0;
      // Copy lines while the chunk has room.
      while (r < rows) {
        const int64_t nv = std::min(line_vectors, vectors - i0 / V::kLanes);
        const int64_t width = nv * V::kLanes + taps - 1;
        if (used + width > kChunk) break;
        const float* row = x + r * c;
        const int64_t first = i0 - before;
        const int64_t lo = std::max<int64_t>(first, 0), hi = std::min(first + width, c);
        float* line = lines + used;
        std::fill(line, line + (lo - first), 0.f);
        std::copy(row + lo, row + hi, line + (lo - first));
        std::fill(line + (hi - first), line + width, 0.f);
        chunk[nl++] = {r, i0, nv, used};
        used += width;
        i0 += nv * V::kLanes;
        if (i0 >= c) i0 = 0, ++r;
      }
      for (int l = 0; l < nl; ++l) {
        const Line& ln = chunk[l];
        for (int64_t v = 0; v < ln.nv; ++v) {
          const int64_t i = ln.i0 + v * V::kLanes;
          win[nu] = lines + ln.at + v * V::kLanes;
          dst[nu] = y + ln.row * c + i;
          len[nu] = std::min<int64_t>(V::kLanes, c - i);
          if (++nu == kU) flush();
        }
      }
      if (nu) flush();  // the chunk's lines are overwritten next
    }
  }
  // exp(x - shift), and the sum of the results: Softmax's numerator.
  static float ExpShiftSum(const float* x, float* y, int64_t n, float shift) {
    const typename V::F vs = V::Set(shift);
    typename V::F acc = V::Set(0.f);
    int64_t i = 0;
    for (; i + V::kLanes <= n; i += V::kLanes) {
      const typename V::F e = ExpFull<V>(V::Sub(V::Load(x + i), vs));
      acc = V::Add(acc, e);
      V::Store(y + i, e);
    }
    float buf[V::kLanes];
    V::Store(buf, acc);
    float sum = 0.f;
    for (int k = 0; k < V::kLanes; ++k) sum += buf[k];
    if (i < n) {
      // Padding lanes hold -inf: exp gives 0 and the sum is unchanged.
      for (int k = 0; k < V::kLanes; ++k) buf[k] = -std::numeric_limits<float>::infinity();
      std::copy(x + i, x + n, buf);
      V::Store(buf, ExpFull<V>(V::Sub(V::Load(buf), vs)));
      for (int64_t k = 0; k < n - i; ++k) {
        y[i + k] = buf[k];
        sum += buf[k];
      }
    }
    return sum;
  }
};

}  // namespace vmath
}  // namespace kernels
}  // namespace qfold
