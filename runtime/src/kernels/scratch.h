// Kernel scratch (KernelContext::scratch, OpDef::scratch): a session plans one
// region per op in its arena, sized by the op's scratch function, and the
// kernel carves it into 64-byte aligned parts with ScratchLayout. The same
// layout function sizes the request and the run, so the two cannot drift.
// Outside a session (the converter, ops evaluated at plan time) nothing is
// planned and the kernel allocates the region for the call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace qfold {
namespace kernels {

// The scratch a kernel call may use, as KernelContext holds it.
struct ScratchSpan {
  void* data = nullptr;
  size_t bytes = 0;
  bool planned = false;  // a session planned it (possibly 0 bytes)
};

// Consecutive parts of one region, each at a multiple of 64 bytes.
class ScratchLayout {
 public:
  // The offset of a new part of `bytes` bytes.
  size_t Add(size_t bytes) {
    const size_t at = total_;
    total_ += (bytes + 63) / 64 * 64;
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// The planned region when it holds `bytes`, else one allocated for this call
// (throws std::bad_alloc on failure; the session turns that into a status).
// A planned region that is too small means an op's scratch function and its
// kernel disagree: counted by ScratchShortfalls, which tests keep at 0.
class ScratchRegion {
 public:
  ScratchRegion(const ScratchSpan& span, size_t bytes);
  uint8_t* data() const { return data_; }
  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(data_ + offset);
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> own_;
  uint8_t* data_ = nullptr;
};

// Calls, since the process started, that found their planned scratch too small.
size_t ScratchShortfalls();

}  // namespace kernels
}  // namespace qfold
