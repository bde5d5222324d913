// Checked parsing of command-line arguments: a numeric value is all decimal
// digits and within [lo, hi]; anything else (signs, spaces, garbage, values
// past int64) is rejected so the caller exits 2 with a usage error instead of
// letting std::stoi throw or wrap. Also --precision's names.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "qfold/runtime.h"

namespace qfold {
namespace cli {

// Largest dim accepted in a shape argument (as before: 12 digits), and the
// --threads range (the runtime further clamps it to the hardware threads).
constexpr int64_t kMaxCliDim = 999999999999;
constexpr int64_t kMaxCliThreads = 1024;

inline bool ParseBoundedInt(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end != s.c_str() + s.size() || v < lo || v > hi) return false;
  *out = int64_t(v);
  return true;
}

template <typename T>
bool ParseBoundedInt(const std::string& s, int64_t lo, int64_t hi, T* out) {
  int64_t v = 0;
  if (!ParseBoundedInt(s, lo, hi, &v)) return false;
  *out = T(v);
  return true;
}

// --precision fp32|bf16|fp16 (run, bench, verify): SessionOptions::precision.
inline bool ParsePrecision(const std::string& s, SessionOptions::Precision* out) {
  if (s == "fp32") {
    *out = SessionOptions::Precision::kFloat32;
  } else if (s == "bf16") {
    *out = SessionOptions::Precision::kBfloat16;
  } else if (s == "fp16") {
    *out = SessionOptions::Precision::kFloat16;
  } else {
    return false;
  }
  return true;
}

// The usage error for a missing or unknown --precision value.
inline std::string BadPrecisionMessage(const std::string& given) {
  return "--precision needs fp32, bf16 or fp16" + (given.empty() ? "" : ", got '" + given + "'");
}

inline const char* PrecisionName(SessionOptions::Precision p) {
  if (p == SessionOptions::Precision::kBfloat16) return "bf16";
  return p == SessionOptions::Precision::kFloat16 ? "fp16" : "fp32";
}

}  // namespace cli
}  // namespace qfold
