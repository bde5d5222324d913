// std::vector whose storage starts on a 64-byte boundary, for packed weights:
// std::vector's (malloc's) 16-byte alignment puts a 64-byte row across two
// cache lines three times in four, and an AMX tile load of misaligned rows
// took 4x as long as of aligned ones (Xeon, 16 rows of 64 bytes from L1:
// 4.5 vs 19 ns); zmm loads split likewise.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace qfold {
namespace kernels {

constexpr std::size_t kPackedAlign = 64;

template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kPackedAlign)));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete(p, std::align_val_t(kPackedAlign));
  }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const AlignedAllocator<U>&) const noexcept {
    return false;
  }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace kernels
}  // namespace qfold
