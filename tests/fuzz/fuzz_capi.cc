// libFuzzer target: .qfm bytes through the C API's from-bytes path
// (qfold_model_load_memory, both the in-place path for 64-byte aligned data
// and the copying path for unaligned data, which the Python module's bytes
// constructor also takes), then the whole session life cycle: input/output
// info, create at 2 threads, resize, set inputs of random shapes and values,
// run, read outputs, reset state. Statuses are fine; a crash, sanitizer
// report, hang or exception escaping the C API (libFuzzer reports it as a
// crash) is not. Built with the .qfm structure-aware mutator (qfm_mutator.cc).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "fuzz_inputs.h"
#include "qfold/qfold.h"
#include "qfold/runtime.h"

namespace {
// A C++ session with the same bound runs the same shapes and values first:
// what it refuses for size is not fed to the C API (libFuzzer's
// -malloc_limit_mb would report a legitimate large plan), whose own
// max_memory_bytes is set too.
bool FitsInLimit(const std::shared_ptr<qfold::Model>& model,
                 const std::vector<qfold_fuzz::Feed>& feeds) {
  qfold::SessionOptions opts;
  opts.max_memory_bytes = size_t(32) << 20;  // as fuzz_inputs.h RunOnce
  opts.max_loop_iterations = 1000;
  std::unique_ptr<qfold::Session> session;
  if (!qfold::Session::Create(model, opts, &session).ok()) return false;
  for (const qfold_fuzz::Feed& f : feeds) {
    const qfold::Status st =
        f.is_sequence
            ? session->SetInputSequence(f.name, qfold_fuzz::ElementViews(f))
            : session->SetInput(f.name, f.dtype, f.shape, f.bytes.data(), f.bytes.size());
    if (!st.ok()) return false;
  }
  return session->Run().ok();
}

void RunThroughCApi(qfold_model* model, const std::vector<qfold_fuzz::Feed>& feeds,
                    std::mt19937_64& rng) {
  qfold_session_options opts;
  qfold_session_options_init(&opts);
  opts.num_threads = 2;
  opts.max_memory_bytes = size_t(32) << 20;  // as FitsInLimit
  opts.max_loop_iterations = 1000;
  qfold_session* session = nullptr;
  if (qfold_session_create(model, &opts, &session) != QFOLD_OK) return;
  for (const qfold_fuzz::Feed& f : feeds) {
    if (f.is_sequence) {
      std::vector<const int64_t*> dims;
      std::vector<size_t> ranks, bytes;
      std::vector<const void*> data;
      for (const qfold_fuzz::Feed& e : f.elements) {
        dims.push_back(e.shape.data());
        ranks.push_back(e.shape.size());
        data.push_back(e.bytes.data());
        bytes.push_back(e.bytes.size());
      }
      (void)qfold_session_set_input_sequence(session, f.name.c_str(),
                                             static_cast<qfold_dtype>(f.dtype), f.elements.size(),
                                             dims.data(), ranks.data(), data.data(), bytes.data());
      continue;
    }
    // Half the time through resize_input first, as a streaming caller would.
    if (rng() & 1) {
      (void)qfold_session_resize_input(session, f.name.c_str(), f.shape.data(), f.shape.size());
    }
    (void)qfold_session_set_input(session, f.name.c_str(), static_cast<qfold_dtype>(f.dtype),
                                  f.shape.data(), f.shape.size(), f.bytes.data(), f.bytes.size());
  }
  (void)qfold_session_arena_bytes(session);
  (void)qfold_session_kernels(session);
  if (qfold_session_run(session) == QFOLD_OK) {
    for (size_t i = 0; i < qfold_model_num_outputs(model); ++i) {
      qfold_tensor_info info;
      if (qfold_model_output_info(model, i, &info) != QFOLD_OK) continue;
      qfold_dtype dtype;
      const int64_t* dims = nullptr;
      size_t rank = 0;
      const void* data = nullptr;
      if (qfold_model_output_is_sequence(model, i)) {
        size_t count = 0;
        if (qfold_session_get_output_sequence_length(session, info.name, &count) != QFOLD_OK)
          continue;
        for (size_t k = 0; k <= count; ++k) {  // one past the end: an error, not a read
          if (qfold_session_get_output_element(session, info.name, k, &dtype, &dims, &rank,
                                               &data) != QFOLD_OK)
            continue;
          int64_t numel = 1;
          for (size_t d = 0; d < rank; ++d) numel *= dims[d];
          qfold_fuzz::Touch(data,
                            qfold::dtype_storage_bytes(static_cast<qfold::DType>(dtype), numel));
        }
        continue;
      }
      if (qfold_session_get_output(session, info.name, &dtype, &dims, &rank, &data) != QFOLD_OK) {
        continue;
      }
      int64_t numel = 1;
      for (size_t d = 0; d < rank; ++d) numel *= dims[d];
      const size_t bytes = qfold::dtype_storage_bytes(static_cast<qfold::DType>(dtype), numel);
      volatile uint8_t sink = 0;
      for (size_t b = 0; b < bytes; ++b) sink = sink ^ static_cast<const uint8_t*>(data)[b];
      (void)sink;
    }
    (void)qfold_session_reset_state(session);
    (void)qfold_session_run(session);  // a second run on the same session
  }
  qfold_session_free(session);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::mt19937_64 rng(qfold_fuzz::HashBytes(data, size));
  // 64-byte aligned: used in place; one byte further: copied by the library.
  const bool in_place = rng() & 1;
  std::unique_ptr<uint8_t[]> storage(new uint8_t[size + 128]);
  uint8_t* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(storage.get()) + 63) &
                                                ~uintptr_t(63));
  uint8_t* bytes = in_place ? aligned : aligned + 1;
  if (size) std::memcpy(bytes, data, size);

  qfold_model* model = nullptr;
  if (qfold_model_load_memory(bytes, size, &model) != QFOLD_OK) return 0;
  for (size_t i = 0; i < qfold_model_num_inputs(model); ++i) {
    qfold_tensor_info info;
    if (qfold_model_input_info(model, i, &info) != QFOLD_OK) abort();
    for (size_t d = 0; d < info.rank; ++d) (void)std::strlen(info.dim_names[d]);
  }
  // The same bytes through the C++ loader, to pick shapes and check the limit.
  std::shared_ptr<qfold::Model> cpp_model;
  if (!qfold::Model::LoadMemory(bytes, size, &cpp_model).ok()) {
    std::fprintf(stderr, "the C API loaded a model the C++ API refuses\n");
    abort();
  }
  std::vector<qfold_fuzz::Feed> feeds;
  if (qfold_fuzz::MakeFeeds(cpp_model->inputs(), rng, &feeds) && FitsInLimit(cpp_model, feeds)) {
    RunThroughCApi(model, feeds, rng);
  }
  // Freed before the session would be fine too (reference-counted); here after.
  qfold_model_free(model);
  return 0;
}
