// Arena planning: place tensors with known sizes and lifetimes in one buffer
// so that tensors alive at the same time never overlap.
#pragma once
#include <cstddef>
#include <vector>

namespace qfold {

struct BufferRequest {
  size_t bytes = 0;
  int first_use = 0;  // step that writes it
  int last_use = 0;   // last step that reads it (inclusive)
};

// Up to kGreedyPlanLimit non-empty requests: greedy by size, largest first,
// each at the lowest offset that does not collide with an already placed
// request whose lifetime overlaps (tightest, O(n^2 log n) at worst). More: a
// sweep in time with a best-fit free list, O(n log n). Offsets are multiples
// of `alignment`. Returns the arena size.
constexpr size_t kGreedyPlanLimit = 2048;
size_t PlanArena(const std::vector<BufferRequest>& requests, size_t alignment,
                 std::vector<size_t>* offsets);

}  // namespace qfold
