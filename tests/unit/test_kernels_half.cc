// The float16 -> float32 widening of float16 weights (runtime/src/kernels/half_f32*)
// at every ISA level this CPU supports: every float16 bit pattern but the
// signaling NaNs (which the converter never stores) widens to the bits of the
// scalar reference, at lengths around the vector tails, and the reference
// against hand-checked values.
#include <cstdint>
#include <cstring>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/half_f32.h"

namespace qfold {
namespace test {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST_CASE("kernels: half_f32 reference on hand-checked values") {
  const uint16_t h[] = {0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff,
                        0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e00};
  const uint32_t want[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xc0000000u,
                           0x477fe000u,  // 65504, the largest finite half
                           0x33800000u,  // 2^-24, the smallest subnormal
                           0x387fc000u,  // the largest subnormal, 1023 * 2^-24
                           0x7f800000u, 0xff800000u, 0x7fc00000u};
  float f[10];
  kernels::HalfToF32Reference(h, f, 10);
  for (int i = 0; i < 10; ++i) CHECK(Bits(f[i]) == want[i]);
}

TEST_CASE("kernels: half_f32 variants match the reference bit for bit at every ISA level") {
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan && !(h & 0x200)) continue;  // signaling NaN
    all.push_back(uint16_t(h));
  }
  std::vector<float> want(all.size());
  kernels::HalfToF32Reference(all.data(), want.data(), all.size());
  for (kernels::Isa isa : kernels::SupportedIsas()) {
    const char* name = nullptr;
    kernels::HalfToF32Fn fn = kernels::HalfToF32For(kernels::FeaturesForIsa(isa), &name);
    CAPTURE(kernels::IsaName(isa));
    const bool have_fn = fn != nullptr;
    REQUIRE(have_fn);

    // Every SIMD level has a vector variant (F16C comes with AVX2 CPUs).
    if (isa != kernels::Isa::kReference) CHECK(name != nullptr);
    // Offsets and lengths around 4- and 8-lane tails; the sentinel after n stays.
    for (size_t off : {size_t(0), size_t(1), size_t(3)})
      for (size_t n : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33}) {
        std::vector<float> got(n + 1, -7.f);
        fn(all.data() + off, got.data(), n);
        for (size_t i = 0; i < n; ++i) CHECK(Bits(got[i]) == Bits(want[off + i]));
        CHECK(got[n] == -7.f);
      }
    std::vector<float> got(all.size());
    fn(all.data(), got.data(), all.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < all.size(); ++i) mismatches += Bits(got[i]) != Bits(want[i]);
    CHECK(mismatches == 0);
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
