// qfold C++ wrapper: RAII, move-only classes over the C API (qfold/qfold.h).
// Header-only, so it is compiled with the application and may throw: every failed
// call throws qfold::api::Error carrying the status code and the library's message.
//
//   qfold::api::Model model = qfold::api::Model::LoadFile("m.qfm");
//   qfold::api::Session session(model);
//   session.SetInput("input", {1, 3, 224, 224}, pixels);  // std::vector<float>
//   session.Run();
//   qfold::api::Output out = session.GetOutput("logits");
//   const float* logits = out.data<float>();
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qfold/qfold.h"

namespace qfold {
namespace api {

class Error : public std::runtime_error {
 public:
  Error(qfold_status code, const std::string& message) : std::runtime_error(message), code_(code) {}
  qfold_status code() const noexcept { return code_; }

 private:
  qfold_status code_;
};

inline void Check(qfold_status status) {
  if (status != QFOLD_OK) throw Error(status, qfold_last_error());
}

// Maps C++ element types to qfold dtypes for the typed helpers.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_FLOAT32;
};
template <>
struct DTypeOf<double> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_FLOAT64;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_INT8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_UINT8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_INT16;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_UINT16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_INT32;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_UINT32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_INT64;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_UINT64;
};
template <>
struct DTypeOf<bool> {
  static constexpr qfold_dtype value = QFOLD_DTYPE_BOOL;
};

struct TensorInfo {
  std::string name;
  qfold_dtype dtype = QFOLD_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;           // -1 where the dim is symbolic
  std::vector<std::string> dim_names;  // "" for fixed dims
};

// A view of one output; `data` is valid until the session's next Run,
// ResizeInput or SetInput.
struct Output {
  qfold_dtype dtype = QFOLD_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  const void* raw = nullptr;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  // Typed access; throws if T does not match the output's dtype.
  template <class T>
  const T* data() const {
    if (DTypeOf<T>::value != dtype)
      throw Error(QFOLD_INVALID_ARGUMENT, std::string("output is ") + qfold_dtype_name(dtype) +
                                              ", requested " + qfold_dtype_name(DTypeOf<T>::value));
    return static_cast<const T*>(raw);
  }
};

class Model {
 public:
  static Model LoadFile(const std::string& path) {
    qfold_model* m = nullptr;
    Check(qfold_model_load_file(path.c_str(), &m));
    return Model(m);
  }
  // See qfold_model_load_memory for when `data` must outlive the model.
  static Model LoadMemory(const void* data, size_t size) {
    qfold_model* m = nullptr;
    Check(qfold_model_load_memory(data, size, &m));
    return Model(m);
  }

  Model(Model&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Model& operator=(Model&& other) noexcept {
    if (this != &other) {
      qfold_model_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model() { qfold_model_free(handle_); }

  std::vector<TensorInfo> inputs() const { return Infos(true); }
  std::vector<TensorInfo> outputs() const { return Infos(false); }
  qfold_model* handle() const noexcept { return handle_; }

 private:
  explicit Model(qfold_model* handle) : handle_(handle) {}

  std::vector<TensorInfo> Infos(bool input) const {
    size_t n = input ? qfold_model_num_inputs(handle_) : qfold_model_num_outputs(handle_);
    std::vector<TensorInfo> out(n);
    for (size_t i = 0; i < n; ++i) {
      qfold_tensor_info c;
      Check(input ? qfold_model_input_info(handle_, i, &c)
                  : qfold_model_output_info(handle_, i, &c));
      out[i].name = c.name;
      out[i].dtype = c.dtype;
      out[i].dims.assign(c.dims, c.dims + c.rank);
      out[i].dim_names.assign(c.dim_names, c.dim_names + c.rank);
    }
    return out;
  }

  qfold_model* handle_ = nullptr;
};

class Session {
 public:
  // The session keeps the model's data alive; `model` may be destroyed first.
  // `precision`: qfold_session_options.precision (bfloat16 is opt-in).
  explicit Session(const Model& model, int num_threads = 1,
                   qfold_precision precision = QFOLD_PRECISION_FLOAT32) {
    qfold_session_options opts;
    qfold_session_options_init(&opts);
    opts.num_threads = num_threads;
    opts.precision = precision;
    Check(qfold_session_create(model.handle(), &opts, &handle_));
  }
  // Streaming: {output, input} pairs; after each Run the output becomes the input
  // (qfold_session_options.state_bindings).
  Session(const Model& model,
          const std::vector<std::pair<std::string, std::string>>& state_bindings,
          int num_threads = 1, qfold_precision precision = QFOLD_PRECISION_FLOAT32) {
    std::vector<qfold_state_binding> bindings;
    for (const auto& b : state_bindings) bindings.push_back({b.first.c_str(), b.second.c_str()});
    qfold_session_options opts;
    qfold_session_options_init(&opts);
    opts.num_threads = num_threads;
    opts.precision = precision;
    opts.num_state_bindings = bindings.size();
    opts.state_bindings = bindings.data();
    Check(qfold_session_create(model.handle(), &opts, &handle_));
  }

  Session(Session&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Session& operator=(Session&& other) noexcept {
    if (this != &other) {
      qfold_session_free(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { qfold_session_free(handle_); }

  void ResizeInput(const std::string& name, const std::vector<int64_t>& dims) {
    Check(qfold_session_resize_input(handle_, name.c_str(), dims.data(), dims.size()));
  }
  void SetInput(const std::string& name, qfold_dtype dtype, const std::vector<int64_t>& dims,
                const void* data, size_t bytes) {
    Check(qfold_session_set_input(handle_, name.c_str(), dtype, dims.data(), dims.size(), data,
                                  bytes));
  }
  template <class T>
  void SetInput(const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<T>& values) {
    static_assert(!std::is_same<T, bool>::value, "std::vector<bool> is packed: use the raw form");
    SetInput(name, DTypeOf<T>::value, dims, values.data(), values.size() * sizeof(T));
  }
  void Run() { Check(qfold_session_run(handle_)); }
  // Zeros the inputs bound by state_bindings (a new stream).
  void ResetState() { Check(qfold_session_reset_state(handle_)); }
  Output GetOutput(const std::string& name) const {
    Output out;
    const int64_t* dims = nullptr;
    size_t rank = 0;
    Check(qfold_session_get_output(handle_, name.c_str(), &out.dtype, &dims, &rank, &out.raw));
    out.dims.assign(dims, dims + rank);
    return out;
  }
  size_t arena_bytes() const noexcept { return qfold_session_arena_bytes(handle_); }
  // The kernel variant per family, fixed at creation (qfold_session_kernels).
  std::string kernels() const { return qfold_session_kernels(handle_); }
  qfold_session* handle() const noexcept { return handle_; }

 private:
  qfold_session* handle_ = nullptr;
};

}  // namespace api
}  // namespace qfold
