#include "planner.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

namespace qfold {

namespace {

size_t RoundUp(size_t v, size_t alignment) {
  return (v + alignment - 1) / alignment * alignment;
}

// Greedy by size: for each request, the placed requests alive at the same
// time are collected and sorted, so it costs O(n^2 log n) when lifetimes all
// overlap; it packs tightest, and typical graphs are small.
size_t PlanGreedyBySize(const std::vector<BufferRequest>& requests, size_t alignment,
                        std::vector<size_t>* offsets) {
  const size_t n = requests.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
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
        busy.emplace_back((*offsets)[p], (*offsets)[p] + RoundUp(q.bytes, alignment));
    }
    std::sort(busy.begin(), busy.end());
    size_t candidate = 0;
    const size_t need = RoundUp(r.bytes, alignment);
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

// Sweep in time, O(n log n): requests in order of their first use; those
// whose last use has passed return their block to a free list (coalesced with
// free neighbours, or with the top of the arena); each new request takes the
// smallest free block that fits (best fit), else grows the arena.
size_t PlanSweep(const std::vector<BufferRequest>& requests, size_t alignment,
                 std::vector<size_t>* offsets) {
  const size_t n = requests.size();
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (requests[i].bytes > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].first_use != requests[b].first_use)
      return requests[a].first_use < requests[b].first_use;
    return requests[a].bytes > requests[b].bytes;
  });
  std::map<size_t, size_t> free_by_offset;           // offset -> size
  std::set<std::pair<size_t, size_t>> free_by_size;  // (size, offset)
  size_t top = 0, arena = 0;
  auto add_free = [&](size_t off, size_t size) {
    // Merge with the free block that ends where this one starts, and the one
    // that starts where it ends.
    auto next = free_by_offset.lower_bound(off);
    if (next != free_by_offset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        size += prev->second;
        free_by_size.erase({prev->second, prev->first});
        free_by_offset.erase(prev);
      }
    }
    if (next != free_by_offset.end() && off + size == next->first) {
      size += next->second;
      free_by_size.erase({next->second, next->first});
      free_by_offset.erase(next);
    }
    if (off + size == top) {  // the arena's free tail: give it back to the top
      top = off;
      return;
    }
    free_by_offset[off] = size;
    free_by_size.insert({size, off});
  };
  using Live = std::pair<int, size_t>;  // (last use, request), earliest end first
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    while (!live.empty() && live.top().first < r.first_use) {
      const size_t done = live.top().second;
      live.pop();
      add_free((*offsets)[done], RoundUp(requests[done].bytes, alignment));
    }
    const size_t need = RoundUp(r.bytes, alignment);
    auto fit = free_by_size.lower_bound({need, 0});
    if (fit != free_by_size.end()) {
      const size_t off = fit->second, size = fit->first;
      free_by_size.erase(fit);
      free_by_offset.erase(off);
      (*offsets)[idx] = off;
      if (size > need) {
        free_by_offset[off + need] = size - need;
        free_by_size.insert({size - need, off + need});
      }
    } else {
      (*offsets)[idx] = top;
      top += need;
      arena = std::max(arena, top);
    }
    live.push({r.last_use, idx});
  }
  return arena;
}

}  // namespace

size_t PlanArena(const std::vector<BufferRequest>& requests, size_t alignment,
                 std::vector<size_t>* offsets) {
  offsets->assign(requests.size(), 0);
  size_t placed = 0;
  for (const BufferRequest& r : requests) placed += r.bytes > 0 ? 1 : 0;
  // The greedy packs tighter but is quadratic; beyond this many tensors (the
  // largest models in models/, PP-OCRv4 in QDQ form, have about 1300 nodes)
  // planning time wins: a hostile Split with 100k outputs took 49 s greedily.
  if (placed <= kGreedyPlanLimit) return PlanGreedyBySize(requests, alignment, offsets);
  return PlanSweep(requests, alignment, offsets);
}

}  // namespace qfold
