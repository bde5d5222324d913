// x86 channels-last pooling row kernels (pool_nhwc_s8.h) over the vector
// traits of dwconv_nhwc_s8_x86.h; included by pool_nhwc_s8_avx2.cc and
// pool_nhwc_s8_avx512vnni.cc.
//
// Max: byte vectors, vpmaxsb/vpmaxub over the taps. Average: taps widened
// to int16 and summed (up to 128 taps: |sum| <= 128 * 255 fits), the
// partial sums widened to int32, then the reference's float32 steps one by
// one, ((x_scale * float(sum)) / count) / y_scale, each a single IEEE
// operation (no fused multiply-add can arise), so the bytes are identical.
#pragma once
#include "kernels/dwconv_nhwc_s8_x86.h"
#include "kernels/pool_nhwc_s8.h"

namespace qfold {
namespace kernels {
namespace {

template <class Tr, bool kS>
void MaxRow(const PoolNhwcRowArgs& a) {
  using VI = typename Tr::VI;
  constexpr int kB = Tr::kBytes;
  const int64_t c = a.c, nfull = c / kB, rem = c % kB;
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const int64_t x0 = a.xoff + px * a.pix_step;
    int64_t b = 0;
    for (; b + 2 <= nfull; b += 2) {
      const int64_t o = x0 + b * kB;
      VI m0 = Tr::Load(t[0] + o), m1 = Tr::Load(t[0] + o + kB);
      for (int64_t k = 1; k < a.ntaps; ++k) {
        m0 = Tr::template MaxB<kS>(m0, Tr::Load(t[k] + o));
        m1 = Tr::template MaxB<kS>(m1, Tr::Load(t[k] + o + kB));
      }
      Tr::StoreB(y + b * kB, m0);
      Tr::StoreB(y + b * kB + kB, m1);
    }
    for (; b < nfull; ++b) {
      const int64_t o = x0 + b * kB;
      VI m = Tr::Load(t[0] + o);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::Load(t[k] + o));
      Tr::StoreB(y + b * kB, m);
    }
    if (rem == 0) continue;
    if (!Tr::kMasked && c >= kB) {  // overlap the last full vector: same bytes again
      const int64_t o = x0 + c - kB;
      VI m = Tr::Load(t[0] + o);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::Load(t[k] + o));
      Tr::StoreB(y + c - kB, m);
    } else {
      const int64_t o = x0 + nfull * kB;
      VI m = Tr::LoadBN(t[0] + o, rem);
      for (int64_t k = 1; k < a.ntaps; ++k) m = Tr::template MaxB<kS>(m, Tr::LoadBN(t[k] + o, rem));
      Tr::StoreBN(y + nfull * kB, m, rem);
    }
  }
}

// One block of channels at `off` of every tap: sum(x - x_zp) in int32, in
// UnpackLo/UnpackHi order, then the average quantized and stored.
template <class Tr, class Ld>
inline void AvgBlock(const PoolNhwcRowArgs& a, const uint8_t* const* t, int64_t off, Ld load,
                     typename Tr::VF div, const Requant<Tr>& rq, uint8_t* y, int64_t n) {
  using VI = typename Tr::VI;
  using VF = typename Tr::VF;
  VI lo = Tr::Set1(a.corr), hi = lo;
  for (int64_t k0 = 0; k0 < a.ntaps; k0 += 128) {
    const int64_t k1 = a.ntaps < k0 + 128 ? a.ntaps : k0 + 128;
    VI s = Tr::Zero();
    for (int64_t k = k0; k < k1; ++k) s = Tr::Add16(s, load(t[k] + off));
    lo = Tr::Add32(lo, Tr::Lo32(s));
    hi = Tr::Add32(hi, Tr::Hi32(s));
  }
  const VF xs = Tr::Set1F(a.x_scale), ys = Tr::Set1F(a.y_scale);
  const VF flo = Tr::Div(Tr::Div(Tr::Mul(xs, Tr::ToF(lo)), div), ys);
  const VF fhi = Tr::Div(Tr::Div(Tr::Mul(xs, Tr::ToF(hi)), div), ys);
  if (n >= Tr::kV)
    Tr::Store(y, rq(flo), rq(fhi));
  else
    Tr::StoreN(y, rq(flo), rq(fhi), n);
}

template <class Tr, bool kS>
void AvgRow(const PoolNhwcRowArgs& a) {
  constexpr int kV = Tr::kV;
  const int64_t c = a.c, nfull = c / kV, rem = c % kV;
  const Requant<Tr> rq(a.yzp, a.lo, a.hi);
  for (int64_t px = 0; px < a.npix; ++px) {
    const uint8_t* const* t = a.taps + px * a.tap_stride;
    uint8_t* y = a.y + px * a.ystride;
    const typename Tr::VF div = Tr::Set1F(a.div[px]);
    const int64_t x0 = a.xoff + px * a.pix_step;
    for (int64_t b = 0; b < nfull; ++b)
      AvgBlock<Tr>(a, t, x0 + b * kV, FullLoad<Tr, kS>(), div, rq, y + b * kV, kV);
    if (rem == 0) continue;
    if (!Tr::kMasked && c >= kV)
      AvgBlock<Tr>(a, t, x0 + c - kV, FullLoad<Tr, kS>(), div, rq, y + c - kV, kV);
    else
      AvgBlock<Tr>(a, t, x0 + nfull * kV, PartLoad<Tr, kS>{rem}, div, rq, y + nfull * kV, rem);
  }
}

template <class Tr>
constexpr PoolNhwcKernels MakePoolNhwcKernels() {
  return {MaxRow<Tr, true>, MaxRow<Tr, false>, AvgRow<Tr, true>, AvgRow<Tr, false>};
}

}  // namespace
}  // namespace kernels
}  // namespace qfold
