#include "planner.h"

#include <algorithm>
#include <numeric>

namespace qfold {

size_t PlanArena(const std::vector<BufferRequest>& requests, size_t alignment,
                 std::vector<size_t>* offsets) {
  const size_t n = requests.size();
  offsets->assign(n, 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  auto round_up = [&](size_t v) { return (v + alignment - 1) / alignment * alignment; };

  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    if (r.bytes == 0) continue;
    // Intervals of live, overlapping requests, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t p : placed) {
      const BufferRequest& q = requests[p];
      if (q.first_use <= r.last_use && r.first_use <= q.last_use)
        busy.emplace_back((*offsets)[p], (*offsets)[p] + round_up(q.bytes));
    }
    std::sort(busy.begin(), busy.end());
    size_t candidate = 0;
    const size_t need = round_up(r.bytes);
    for (const auto& b : busy) {
      if (candidate + need <= b.first) break;
      candidate = std::max(candidate, b.second);
    }
    (*offsets)[idx] = candidate;
    placed.push_back(idx);
    arena = std::max(arena, candidate + need);
  }
  return arena;
}

}  // namespace qfold
