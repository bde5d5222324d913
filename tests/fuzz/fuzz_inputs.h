// Random input shapes and values for the fuzz targets that run a model: shapes
// within the model's declared dims (symbolic dims get a small size, the same
// one for every dim of one name) and values that mix ordinary numbers with the
// extremes a kernel must survive (NaN, Inf, denormals, integer limits).
// Everything derives from one seed, so an input file reproduces exactly.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/runtime.h"

namespace qfold_fuzz {

// Small limits: the point is the kernels' edge cases, not their throughput, and
// a big input would only slow the fuzzer down.
constexpr int64_t kMaxSymbolicDim = 5;
constexpr int64_t kMaxFedElements = int64_t(1) << 14;

// FNV-1a of the fuzzer's bytes: the seed of every random choice.
inline uint64_t HashBytes(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

struct Feed {
  std::string name;
  qfold::DType dtype;
  qfold::Shape shape;
  std::vector<uint8_t> bytes;
  // A sequence input: its elements (each with its own shape), `shape` and
  // `bytes` unused.
  bool is_sequence = false;
  std::vector<Feed> elements;
};

// A sequence's elements as the session takes them.
inline std::vector<qfold::TensorView> ElementViews(const Feed& f) {
  std::vector<qfold::TensorView> v;
  for (const Feed& e : f.elements)
    v.push_back(qfold::TensorView{e.dtype, e.shape, e.bytes.data(), e.bytes.size()});
  return v;
}

// Reads every byte of `bytes` bytes at `data`, so a wrong size or pointer shows under ASan.
inline void Touch(const void* data, size_t bytes) {
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < bytes; ++i) sink = sink ^ static_cast<const uint8_t*>(data)[i];
  (void)sink;
}

inline float RandomFloat(std::mt19937_64& rng) {
  switch (rng() % 16) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return (rng() & 1) ? std::numeric_limits<float>::infinity()
                         : -std::numeric_limits<float>::infinity();
    case 2:
      return (rng() & 1) ? 3.0e38f : -3.0e38f;
    case 3:
      return std::numeric_limits<float>::denorm_min();
    case 4:
      return 0.0f;
    default:
      return std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
  }
}

inline void FillValues(qfold::DType dtype, int64_t numel, std::mt19937_64& rng,
                       std::vector<uint8_t>* out) {
  out->assign(qfold::dtype_storage_bytes(dtype, numel), 0);
  uint8_t* p = out->data();
  switch (dtype) {
    case qfold::DType::kFloat32:
      for (int64_t i = 0; i < numel; ++i) {
        float v = RandomFloat(rng);
        std::memcpy(p + 4 * i, &v, 4);
      }
      return;
    case qfold::DType::kFloat64:
      for (int64_t i = 0; i < numel; ++i) {
        double v = RandomFloat(rng);
        std::memcpy(p + 8 * i, &v, 8);
      }
      return;
    case qfold::DType::kInt64:
    case qfold::DType::kInt32:
      // Often shape-like (Reshape targets, Gather indices, axes): mostly small,
      // sometimes negative or extreme.
      for (int64_t i = 0; i < numel; ++i) {
        int64_t v = int64_t(rng() % 12) - 3;
        if (rng() % 16 == 0)
          v = (rng() & 1) ? std::numeric_limits<int64_t>::max()
                          : std::numeric_limits<int64_t>::min();
        if (dtype == qfold::DType::kInt64) {
          std::memcpy(p + 8 * i, &v, 8);
        } else {
          int32_t v32 = static_cast<int32_t>(v);
          std::memcpy(p + 4 * i, &v32, 4);
        }
      }
      return;
    case qfold::DType::kBool:
      for (int64_t i = 0; i < numel; ++i) p[i] = rng() & 1;
      return;
    default:  // every other type: any bit pattern is a value (half floats: NaN too)
      for (size_t i = 0; i < out->size(); ++i) p[i] = static_cast<uint8_t>(rng());
      return;
  }
}

// Picks a shape for every input (declared dims kept, symbolic ones drawn from
// [0, kMaxSymbolicDim], one size per dim name) and fills it. False when an
// input would be larger than kMaxFedElements or has an undefined dtype.
inline bool MakeFeeds(const std::vector<qfold::TensorInfo>& inputs, std::mt19937_64& rng,
                      std::vector<Feed>* feeds) {
  std::map<std::string, int64_t> named;
  for (const qfold::TensorInfo& in : inputs) {
    if (in.is_sequence) {
      // 0 to 3 elements, each with its own sizes for the symbolic dims.
      Feed f{in.name, in.dtype, {}, {}, true, {}};
      const int count = int(rng() % 4);
      qfold::TensorInfo elem = in;
      elem.is_sequence = false;
      for (int k = 0; k < count; ++k) {
        std::vector<Feed> one;
        for (std::string& n : elem.dim_names) n.clear();  // no shared sizes between elements
        if (!MakeFeeds({elem}, rng, &one)) return false;
        f.elements.push_back(std::move(one[0]));
      }
      feeds->push_back(std::move(f));
      continue;
    }
    Feed f{in.name, in.dtype, in.shape, {}, false, {}};
    int64_t numel = 1;
    for (size_t d = 0; d < f.shape.size(); ++d) {
      if (f.shape[d] < 0) {
        const std::string dim_name = d < in.dim_names.size() ? in.dim_names[d] : "";
        // Zero-sized dims are legal and a classic source of divide-by-zero,
        // but rare, so most runs reach the kernels with data.
        int64_t pick = (rng() % 8 == 0) ? 0 : 1 + int64_t(rng() % kMaxSymbolicDim);
        if (!dim_name.empty()) pick = named.emplace(dim_name, pick).first->second;
        f.shape[d] = pick;
      }
      if (f.shape[d] > kMaxFedElements) return false;
      numel *= f.shape[d];
      if (numel > kMaxFedElements) return false;
    }
    if (!qfold::dtype_is_valid(static_cast<int>(f.dtype)) || f.dtype == qfold::DType::kUndefined)
      return false;
    FillValues(f.dtype, numel, rng, &f.bytes);
    feeds->push_back(std::move(f));
  }
  return true;
}

// Creates a session with `threads` kernel threads (and `precision`), feeds,
// runs and reads every output. Any status is fine; crashes, sanitizer
// reports and hangs are not.
inline void RunOnce(
    const std::shared_ptr<qfold::Model>& model, const std::vector<Feed>& feeds, int threads,
    qfold::SessionOptions::Precision precision = qfold::SessionOptions::Precision::kFloat32) {
  qfold::SessionOptions opts;
  opts.num_threads = threads;
  opts.precision = precision;
  // Below libFuzzer's -malloc_limit_mb, and small: legitimately large models
  // (a 20M-element ConstantOfShape) take seconds under ASan and only slow the
  // search; the limits themselves are tested in tests/malformed.
  opts.max_memory_bytes = size_t(32) << 20;
  // A mutated trip count (2^45 steps of a decoder whose stop token never comes)
  // would run for hours; real Loops in the seeds take a few dozen.
  opts.max_loop_iterations = 1000;
  std::unique_ptr<qfold::Session> session;
  if (!qfold::Session::Create(model, opts, &session).ok()) return;
  for (const Feed& f : feeds) {
    const qfold::Status st =
        f.is_sequence ? session->SetInputSequence(f.name, ElementViews(f))
                      : session->SetInput(f.name, f.dtype, f.shape, f.bytes.data(), f.bytes.size());
    if (!st.ok()) return;
  }
  if (!session->Run().ok()) return;
  for (const qfold::TensorInfo& out : model->outputs()) {
    if (out.is_sequence) {
      std::vector<qfold::TensorView> elements;
      if (!session->GetOutputSequence(out.name, &elements).ok()) continue;
      for (const qfold::TensorView& e : elements) Touch(e.data, e.bytes);
      continue;
    }
    qfold::DType dtype;
    qfold::Shape shape;
    const void* data = nullptr;
    if (!session->GetOutput(out.name, &dtype, &shape, &data).ok()) continue;
    // Touch every byte, so a wrong size or pointer shows under ASan.
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const size_t bytes = qfold::dtype_storage_bytes(dtype, numel);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < bytes; ++i) sink = sink ^ static_cast<const uint8_t*>(data)[i];
    (void)sink;
  }
}

}  // namespace qfold_fuzz
