// The float element-wise binary kernels (kernels/binary_f32.h): every op,
// broadcast pattern and ISA level, 1 and 2 threads, bit for bit against the
// reference loops of ops/binary.cc; and the kernels alone against a scalar
// oracle, in place and out of place, at every length around the vector tails.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/binary_f32.h"
#include "kernels/cpu_features.h"
#include "op_harness.h"

namespace qfold {
namespace test {
namespace {

using kernels::Isa;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Random values with the special ones mixed in: NaN, +-inf, +-0, subnormals,
// and small integers so that a and b are often equal (Max/Min ties).
std::vector<float> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    switch (rng() % 16) {
      case 0:
        x = kNaN;
        break;
      case 1:
        x = kInf;
        break;
      case 2:
        x = -kInf;
        break;
      case 3:
        x = 0.f;
        break;
      case 4:
        x = -0.f;
        break;
      case 5:
        x = 1e-40f;
        break;
      case 6:
        x = float(int(rng() % 3));
        break;
      default:
        x = u(rng);
    }
  }
  return v;
}

int64_t Count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool SameBits(const std::vector<float>& x, const std::vector<float>& y, size_t* where) {
  if (x.size() != y.size()) {
    *where = 0;
    return false;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &x[i], 4);
    std::memcpy(&b, &y[i], 4);
    if (a != b) {
      *where = i;
      return false;
    }
  }
  return true;
}

const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};

float Oracle(int op, float a, float b) {
  switch (op) {
    case kernels::kBinAdd:
      return a + b;
    case kernels::kBinSub:
      return a - b;
    case kernels::kBinMul:
      return a * b;
    case kernels::kBinDiv:
      return a / b;
    case kernels::kBinMax:
      if (std::isnan(a) || std::isnan(b)) return kNaN;
      return a < b ? b : a;
    default:
      if (std::isnan(a) || std::isnan(b)) return kNaN;
      return b < a ? b : a;
  }
}

TEST_CASE("kernels: float binary ops match the reference loops at every ISA level") {
  struct Case {
    Shape a, b;
  };
  std::vector<Case> cases;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100}) {
    cases.push_back({{n}, {n}});              // same shape
    cases.push_back({{2, n}, {}});            // tensor op scalar
    cases.push_back({{1}, {3, n}});           // scalar op tensor
    cases.push_back({{3, n}, {n}});           // channels-last per channel: [.., C] op [C]
    cases.push_back({{n}, {2, 1, n}});        // the broadcast operand first
    cases.push_back({{n, 5}, {n, 1}});        // outer axis: a row of a per value of b
    cases.push_back({{1, n, 1}, {2, n, 3}});  // [1,C,1] op [N,C,W]
    cases.push_back({{2, 1, n}, {1, 3, 1}});  // both broadcast
  }
  // Large enough for two threads (1 << 18 elements, ops/binary.cc): many short runs, one long run,
  // long runs of a scalar (NCHW per channel), few runs split in parts.
  cases.push_back({{2, 80, 80, 24}, {24}});
  cases.push_back({{1, 520, 521}, {1, 520, 521}});
  cases.push_back({{1, 24, 120, 120}, {1, 24, 1, 1}});
  cases.push_back({{3, 1, 90001}, {3, 1, 1}});
  cases.push_back({{64, 4500}, {64, 1}});

  const kernels::KernelConfig& ref = kernels::ReferenceKernelConfig();
  int fast_levels = 0;
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::KernelConfig& kc = IsaConfig(isa);
    if (kc.binary_f32) ++fast_levels;
    for (int op = 0; op < kernels::kBinaryF32Ops; ++op) {
      uint32_t seed = 1;
      for (const Case& c : cases) {
        auto a = F32(c.a, Values(Count(c.a), seed++));
        auto b = F32(c.b, Values(Count(c.b), seed++));
        const OpRun want = RunOp(kOps[op], {a, b}, AttrMap(), 1, 1, &ref);
        REQUIRE(want.status.ok());
        for (int threads : {1, 2}) {
          const OpRun got = RunOp(kOps[op], {a, b}, AttrMap(), 1, threads, &kc);
          REQUIRE(got.status.ok());
          size_t at = 0;
          const bool same = SameBits(got.values<float>(), want.values<float>(), &at);
          if (!same) {
            INFO(std::string(kernels::IsaName(isa))
                 << " " << std::string(kOps[op]) << " " << ShapeToString(c.a) << " op "
                 << ShapeToString(c.b) << ", " << threads << " threads: first difference at " << at
                 << ": got " << got.values<float>()[at] << " want " << want.values<float>()[at]);
            CHECK(same);
          }
        }
      }
    }
  }
#if defined(__x86_64__) || defined(__aarch64__)
  // Where the CPU has SIMD, the kernels above really ran.
  if (kernels::HighestIsa(kernels::DefaultCpuFeatures()) != Isa::kReference) {
    CHECK(fast_levels > 0);
  }
#endif
}

TEST_CASE("kernels: float binary kernels at every length, in place and out of place") {
  for (Isa isa : kernels::SupportedIsas()) {
    const kernels::BinaryF32Kernels* k = IsaConfig(isa).binary_f32;
    if (!k) continue;
    const std::string isa_name = kernels::IsaName(isa);
    CAPTURE(isa_name);
    for (int op = 0; op < kernels::kBinaryF32Ops; ++op) {
      for (int form = 0; form < kernels::kBinaryF32Forms; ++form) {
        for (int64_t n = 0; n <= 70; ++n) {
          const std::vector<float> a = Values(n + 1, uint32_t(1000 + n));
          const std::vector<float> b = Values(n + 1, uint32_t(2000 + n));
          std::vector<float> want(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            const float u = form == kernels::kBinScalarVec ? a[0] : a[size_t(i)];
            const float v = form == kernels::kBinVecScalar ? b[0] : b[size_t(i)];
            want[size_t(i)] = Oracle(op, u, v);
          }
          // One guard element past the end must stay untouched.
          std::vector<float> y(static_cast<size_t>(n) + 1, 7.f);
          k->fn[op][form](a.data(), b.data(), y.data(), n);
          size_t at = 0;
          const bool tail_kept = y.back() == 7.f;
          y.pop_back();
          const bool same = SameBits(y, want, &at);
          // In place: y over the operand that steps (a, or b for scalar op vector).
          std::vector<float> io = form == kernels::kBinScalarVec ? b : a;
          if (form == kernels::kBinScalarVec)
            k->fn[op][form](a.data(), io.data(), io.data(), n);
          else
            k->fn[op][form](io.data(), b.data(), io.data(), n);
          io.resize(size_t(n));
          size_t at2 = 0;
          const bool same_in_place = SameBits(io, want, &at2);
          if (!same || !tail_kept || !same_in_place) {
            INFO(std::string(kOps[op])
                 << " form " << form << " n " << n << ": out of place first difference "
                 << (same ? -1 : int64_t(at)) << ", in place "
                 << (same_in_place ? -1 : int64_t(at2)));
            CHECK(same);
            CHECK(tail_kept);
            CHECK(same_in_place);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
