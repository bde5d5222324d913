#include "kernels/scratch.h"

#include <atomic>
#include <new>

namespace qfold {
namespace kernels {

namespace {
std::atomic<size_t> g_shortfalls{0};
}  // namespace

ScratchRegion::ScratchRegion(const ScratchSpan& span, size_t bytes) {
  if (bytes == 0) return;
  if (span.data && span.bytes >= bytes) {
    data_ = static_cast<uint8_t*>(span.data);
    return;
  }
  if (span.planned) g_shortfalls.fetch_add(1, std::memory_order_relaxed);
  // 64 bytes of slack as in the arena: kernels may read a SIMD tail past a part.
  own_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 64 + 63) / 64 * 64)));
  if (!own_) throw std::bad_alloc();
  data_ = own_.get();
}

size_t ScratchShortfalls() {
  return g_shortfalls.load(std::memory_order_relaxed);
}

}  // namespace kernels
}  // namespace qfold
