// A read-only view of n values (C++17 has no std::span): lets a kernel call
// take per-channel parameters from constant data or planned scratch without
// copying them into a std::vector per run.
#pragma once
#include <cstddef>
#include <vector>

namespace qfold {
namespace kernels {

template <class T>
struct ConstSpan {
  const T* ptr = nullptr;
  size_t count = 0;

  ConstSpan() = default;
  ConstSpan(const T* p, size_t n) : ptr(p), count(n) {}
  // A vector the caller keeps alive for the call.
  ConstSpan(const std::vector<T>& v) : ptr(v.data()), count(v.size()) {}  // NOLINT
  // A temporary would dangle (`c.b_zp = {0}`): refused at compile time.
  ConstSpan(std::vector<T>&&) = delete;

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  const T* data() const { return ptr; }
  const T& operator[](size_t i) const { return ptr[i]; }
  const T* begin() const { return ptr; }
  const T* end() const { return ptr + count; }
};

}  // namespace kernels
}  // namespace qfold
