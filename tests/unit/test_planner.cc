// The arena planner: tensors alive at the same time never share bytes, on
// both paths (greedy by size up to kGreedyPlanLimit requests, the O(n log n)
// sweep beyond), and the sweep plans 100k requests quickly.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "doctest/doctest.h"
#include "planner.h"

namespace qfold {
namespace test {
namespace {

// Checks alignment and that no two lifetime-overlapping requests overlap in
// memory; returns the peak of live bytes (a lower bound for any arena).
size_t CheckPlan(const std::vector<BufferRequest>& r, const std::vector<size_t>& off, size_t arena,
                 size_t align) {
  const size_t n = r.size();
  REQUIRE(off.size() == n);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  // Sorted by offset, each request only needs checking against those that
  // start below its end: fine for the sizes used here.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return off[a] < off[b]; });
  bool overlap = false, unaligned = false, outside = false;
  for (size_t i = 0; i < n; ++i) {
    const size_t a = order[i];
    if (r[a].bytes == 0) continue;
    unaligned |= off[a] % align != 0;
    outside |= off[a] + r[a].bytes > arena;
    for (size_t j = i + 1; j < n && off[order[j]] < off[a] + r[a].bytes; ++j) {
      const size_t b = order[j];
      if (r[b].bytes == 0) continue;
      if (r[a].first_use <= r[b].last_use && r[b].first_use <= r[a].last_use) overlap = true;
    }
  }
  CHECK(!overlap);
  CHECK(!unaligned);
  CHECK(!outside);
  int steps = 0;
  for (const BufferRequest& q : r) steps = std::max(steps, q.last_use + 1);
  std::vector<size_t> live(size_t(steps) + 1, 0);
  for (const BufferRequest& q : r)
    for (int t = q.first_use; t <= q.last_use; ++t) live[size_t(t)] += q.bytes;
  return *std::max_element(live.begin(), live.end());
}

std::vector<BufferRequest> RandomRequests(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<BufferRequest> r(n);
  const int steps = int(n / 2 + 1);
  for (BufferRequest& q : r) {
    q.first_use = int(rng() % unsigned(steps));
    q.last_use = q.first_use + int(rng() % 20);
    q.bytes = rng() % 8 == 0 ? 0 : 1 + rng() % 5000;
  }
  return r;
}

TEST_CASE("PlanArena: no overlap on the greedy and the sweep path") {
  for (size_t n :
       {size_t(1), size_t(10), size_t(500), kGreedyPlanLimit, kGreedyPlanLimit + 1, size_t(6000)}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      CAPTURE(n);
      CAPTURE(seed);
      const std::vector<BufferRequest> r = RandomRequests(n, seed);
      std::vector<size_t> off;
      const size_t arena = PlanArena(r, 64, &off);
      const size_t peak = CheckPlan(r, off, arena, 64);
      CHECK(arena >= peak);
      // Both paths stay within a small factor of the lower bound on such lifetimes.
      CHECK(arena <= 3 * peak + 64 * 64);
    }
  }
}

TEST_CASE("PlanArena: 100k tensors alive at once (a Split with 100k outputs) plan in < 1 s") {
  // Red-team reproducer (issue 18): the greedy planner took 49 s.
  std::vector<BufferRequest> r(100000);
  for (size_t i = 0; i < r.size(); ++i) r[i] = BufferRequest{16, 1, 2};
  r.push_back(BufferRequest{16 * 100000, 0, 1});  // the split input
  r.push_back(BufferRequest{16 * 100000, 2, 3});  // the concat output
  std::vector<size_t> off;
  const auto start = std::chrono::steady_clock::now();
  const size_t arena = PlanArena(r, 64, &off);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  // The input dies at step 1 while the pieces are written: it cannot be reused
  // by them, but the output can take its place afterwards.
  CHECK(arena <= 2 * 64 * 100000 + 64);
  CheckPlan(r, off, arena, 64);
}

}  // namespace
}  // namespace test
}  // namespace qfold
