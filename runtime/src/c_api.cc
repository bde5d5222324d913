// The C API (include/qfold/qfold.h) over the C++ runtime. Every entry point
// catches every exception, std::bad_alloc included, so none crosses into C.
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "qfold/qfold.h"
#include "qfold/runtime.h"

#ifndef QFOLD_VERSION_STRING
#define QFOLD_VERSION_STRING "unknown"
#endif

// The C enums mirror the C++ ones value for value.
static_assert(QFOLD_OK == int(qfold::StatusCode::kOk), "status mismatch");
static_assert(QFOLD_INVALID_ARGUMENT == int(qfold::StatusCode::kInvalidArgument), "status");
static_assert(QFOLD_INVALID_MODEL == int(qfold::StatusCode::kInvalidModel), "status mismatch");
static_assert(QFOLD_UNSUPPORTED == int(qfold::StatusCode::kUnsupported), "status mismatch");
static_assert(QFOLD_IO_ERROR == int(qfold::StatusCode::kIoError), "status mismatch");
static_assert(QFOLD_INTERNAL == int(qfold::StatusCode::kInternal), "status mismatch");
static_assert(QFOLD_PRECISION_FLOAT32 == int(qfold::SessionOptions::Precision::kFloat32),
              "precision mismatch");
static_assert(QFOLD_PRECISION_BFLOAT16 == int(qfold::SessionOptions::Precision::kBfloat16),
              "precision mismatch");
static_assert(QFOLD_PRECISION_FLOAT16 == int(qfold::SessionOptions::Precision::kFloat16),
              "precision mismatch");
static_assert(QFOLD_DTYPE_FLOAT32 == int(qfold::DType::kFloat32), "dtype mismatch");
static_assert(QFOLD_DTYPE_INT8 == int(qfold::DType::kInt8), "dtype mismatch");
static_assert(QFOLD_DTYPE_INT64 == int(qfold::DType::kInt64), "dtype mismatch");
static_assert(QFOLD_DTYPE_BOOL == int(qfold::DType::kBool), "dtype mismatch");
static_assert(QFOLD_DTYPE_UINT4 == int(qfold::DType::kUInt4), "dtype mismatch");

// Handles hold the C++ objects plus the arrays the C views point into. The
// session shares ownership of the Model, which makes freeing the model handle
// before its sessions safe.
struct qfold_model {
  std::shared_ptr<qfold::Model> model;
  std::vector<std::vector<const char*>> input_dim_names, output_dim_names;
};

struct qfold_session {
  std::shared_ptr<qfold::Model> model;
  std::unique_ptr<qfold::Session> session;
  std::vector<qfold::Shape> output_shapes;  // backs the dims returned by get_output
  // Sequence outputs: the elements of the last get_output_sequence_length /
  // get_output_element per output (they back the dims returned).
  std::vector<std::vector<qfold::TensorView>> output_elements;
  bool has_run = false;  // outputs hold results of the current inputs
};

namespace {

thread_local std::string g_error;
thread_local const char* g_error_ptr = "";

qfold_status Fail(qfold_status code, const char* fn, const std::string& msg) noexcept {
  try {
    g_error = std::string(fn) + ": " + msg;
    g_error_ptr = g_error.c_str();
  } catch (...) {
    g_error_ptr = "qfold: out of memory while reporting an error";
  }
  return code;
}

qfold_status FromStatus(const char* fn, const qfold::Status& st) noexcept {
  if (st.ok()) return QFOLD_OK;
  return Fail(static_cast<qfold_status>(st.code()), fn, st.message());
}

// Runs `body` and turns any exception into a status.
template <class F>
qfold_status Guard(const char* fn, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(QFOLD_INTERNAL, fn, "out of memory");
  } catch (const std::exception& e) {
    return Fail(QFOLD_INTERNAL, fn, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(QFOLD_INTERNAL, fn, "internal error: unknown exception");
  }
}

// C callers may pass any int where an enum is expected; in C++ loading an enum
// outside its enumerators' range is undefined, so read the bits as an int.
static_assert(sizeof(qfold_dtype) == sizeof(int) && sizeof(qfold_status) == sizeof(int),
              "enums are int-sized");
template <class E>
int EnumValue(const E& e) {
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

qfold_status NullArg(const char* fn, const char* what) {
  return Fail(QFOLD_INVALID_ARGUMENT, fn, std::string(what) + " is NULL");
}

std::vector<const char*> DimNamePointers(const qfold::TensorInfo& info) {
  std::vector<const char*> names;
  for (const std::string& n : info.dim_names) names.push_back(n.c_str());
  return names;
}

qfold_status MakeModel(std::shared_ptr<qfold::Model> m, qfold_model** out) {
  std::unique_ptr<qfold_model> h(new qfold_model);
  for (const qfold::TensorInfo& info : m->inputs())
    h->input_dim_names.push_back(DimNamePointers(info));
  for (const qfold::TensorInfo& info : m->outputs())
    h->output_dim_names.push_back(DimNamePointers(info));
  h->model = std::move(m);
  *out = h.release();
  return QFOLD_OK;
}

qfold_status GetInfo(const char* fn, const qfold_model* model, size_t index, bool input,
                     qfold_tensor_info* info) {
  if (!model) return NullArg(fn, "model");
  if (!info) return NullArg(fn, "info");
  const auto& list = input ? model->model->inputs() : model->model->outputs();
  if (index >= list.size())
    return Fail(QFOLD_INVALID_ARGUMENT, fn,
                std::string(input ? "input" : "output") + " index " + std::to_string(index) +
                    " out of range (the model has " + std::to_string(list.size()) + ")");
  const qfold::TensorInfo& t = list[index];
  const auto& names = input ? model->input_dim_names[index] : model->output_dim_names[index];
  info->name = t.name.c_str();
  info->dtype = static_cast<qfold_dtype>(t.dtype);
  info->rank = t.shape.size();
  info->dims = t.shape.data();
  info->dim_names = names.data();
  return QFOLD_OK;
}

// Validates a (dims, rank) pair from the caller and copies it into a Shape.
qfold_status ReadShape(const char* fn, const int64_t* dims, size_t rank, qfold::Shape* shape) {
  if (rank > 0 && !dims) return NullArg(fn, "dims (with rank > 0)");
  if (rank > size_t(qfold::kMaxRank))
    return Fail(QFOLD_INVALID_ARGUMENT, fn,
                "rank " + std::to_string(rank) + " exceeds the maximum of " +
                    std::to_string(qfold::kMaxRank));
  shape->assign(dims, dims + rank);
  return QFOLD_OK;
}

}  // namespace

extern "C" {

const char* qfold_last_error(void) {
  return g_error_ptr;
}

const char* qfold_status_string(qfold_status status) {
  switch (EnumValue(status)) {
    case QFOLD_OK:
      return "QFOLD_OK";
    case QFOLD_INVALID_ARGUMENT:
      return "QFOLD_INVALID_ARGUMENT";
    case QFOLD_INVALID_MODEL:
      return "QFOLD_INVALID_MODEL";
    case QFOLD_UNSUPPORTED:
      return "QFOLD_UNSUPPORTED";
    case QFOLD_IO_ERROR:
      return "QFOLD_IO_ERROR";
    case QFOLD_INTERNAL:
      return "QFOLD_INTERNAL";
  }
  return "QFOLD_UNKNOWN_STATUS";
}

const char* qfold_dtype_name(qfold_dtype dtype) {
  if (!qfold::dtype_is_valid(EnumValue(dtype))) return "undefined";
  return qfold::dtype_name(static_cast<qfold::DType>(EnumValue(dtype)));
}

size_t qfold_dtype_size(qfold_dtype dtype) {
  if (!qfold::dtype_is_valid(EnumValue(dtype))) return 0;
  return qfold::dtype_size(static_cast<qfold::DType>(EnumValue(dtype)));
}

const char* qfold_version(void) {
  return QFOLD_VERSION_STRING;
}

qfold_status qfold_model_load_file(const char* path, qfold_model** out) {
  static const char* fn = "qfold_model_load_file";
  return Guard(fn, [&] {
    if (!path) return NullArg(fn, "path");
    if (!out) return NullArg(fn, "out");
    std::shared_ptr<qfold::Model> m;
    qfold::Status st = qfold::Model::LoadFile(path, &m);
    if (!st.ok()) return FromStatus(fn, st);
    return MakeModel(std::move(m), out);
  });
}

qfold_status qfold_model_load_memory(const void* data, size_t size, qfold_model** out) {
  static const char* fn = "qfold_model_load_memory";
  return Guard(fn, [&] {
    if (!data) return NullArg(fn, "data");
    if (!out) return NullArg(fn, "out");
    std::shared_ptr<qfold::Model> m;
    qfold::Status st = qfold::Model::LoadMemory(data, size, &m);
    if (!st.ok()) return FromStatus(fn, st);
    return MakeModel(std::move(m), out);
  });
}

void qfold_model_free(qfold_model* model) {
  delete model;
}

size_t qfold_model_num_inputs(const qfold_model* model) {
  return model ? model->model->inputs().size() : 0;
}

size_t qfold_model_num_outputs(const qfold_model* model) {
  return model ? model->model->outputs().size() : 0;
}

qfold_status qfold_model_input_info(const qfold_model* model, size_t index,
                                    qfold_tensor_info* info) {
  static const char* fn = "qfold_model_input_info";
  return Guard(fn, [&] { return GetInfo(fn, model, index, true, info); });
}

qfold_status qfold_model_output_info(const qfold_model* model, size_t index,
                                     qfold_tensor_info* info) {
  static const char* fn = "qfold_model_output_info";
  return Guard(fn, [&] { return GetInfo(fn, model, index, false, info); });
}

int qfold_model_input_is_sequence(const qfold_model* model, size_t index) {
  return model && index < model->model->inputs().size() && model->model->inputs()[index].is_sequence
             ? 1
             : 0;
}

int qfold_model_input_is_optional(const qfold_model* model, size_t index) {
  return model && index < model->model->inputs().size() && model->model->inputs()[index].is_optional
             ? 1
             : 0;
}

int qfold_model_output_is_optional(const qfold_model* model, size_t index) {
  return model && index < model->model->outputs().size() &&
                 model->model->outputs()[index].is_optional
             ? 1
             : 0;
}

int qfold_model_output_is_sequence(const qfold_model* model, size_t index) {
  return model && index < model->model->outputs().size() &&
                 model->model->outputs()[index].is_sequence
             ? 1
             : 0;
}

void qfold_session_options_init(qfold_session_options* opts) {
  if (!opts) return;
  opts->struct_size = sizeof(qfold_session_options);
  opts->num_threads = 1;
  opts->num_state_bindings = 0;
  opts->state_bindings = nullptr;
  opts->precision = QFOLD_PRECISION_FLOAT32;
  opts->max_memory_bytes = 0;
  opts->max_loop_iterations = 0;
}

qfold_status qfold_session_create(qfold_model* model, const qfold_session_options* opts,
                                  qfold_session** out) {
  static const char* fn = "qfold_session_create";
  return Guard(fn, [&] {
    if (!model) return NullArg(fn, "model");
    if (!out) return NullArg(fn, "out");
    qfold::SessionOptions o;
    if (opts) {
      if (opts->struct_size == 0)
        return Fail(QFOLD_INVALID_ARGUMENT, fn,
                    "options were not initialized with qfold_session_options_init");
      // Read only the fields the caller's header version has.
      if (opts->struct_size >= offsetof(qfold_session_options, num_threads) + sizeof(int32_t))
        o.num_threads = opts->num_threads < 1 ? 1 : int(opts->num_threads);
      if (opts->struct_size >=
              offsetof(qfold_session_options, state_bindings) + sizeof(opts->state_bindings) &&
          opts->num_state_bindings > 0) {
        if (!opts->state_bindings) return NullArg(fn, "opts->state_bindings");
        for (size_t i = 0; i < opts->num_state_bindings; ++i) {
          const qfold_state_binding& b = opts->state_bindings[i];
          if (!b.output || !b.input) return NullArg(fn, "opts->state_bindings[i].output/input");
          o.state_bindings.emplace_back(b.output, b.input);
        }
      }
      if (opts->struct_size >= offsetof(qfold_session_options, precision) + sizeof(int32_t)) {
        if (opts->precision != QFOLD_PRECISION_FLOAT32 &&
            opts->precision != QFOLD_PRECISION_BFLOAT16 &&
            opts->precision != QFOLD_PRECISION_FLOAT16)
          return Fail(QFOLD_INVALID_ARGUMENT, fn,
                      "opts->precision: invalid value " + std::to_string(opts->precision) +
                          " (QFOLD_PRECISION_FLOAT32 = 0, QFOLD_PRECISION_BFLOAT16 = 1 or "
                          "QFOLD_PRECISION_FLOAT16 = 2)");
        o.precision = static_cast<qfold::SessionOptions::Precision>(opts->precision);
      }
      // 0 keeps SessionOptions' bound: C callers had it before the field existed.
      if (opts->struct_size >= offsetof(qfold_session_options, max_memory_bytes) + sizeof(size_t) &&
          opts->max_memory_bytes > 0)
        o.max_memory_bytes = opts->max_memory_bytes;
      if (opts->struct_size >=
              offsetof(qfold_session_options, max_loop_iterations) + sizeof(int64_t) &&
          opts->max_loop_iterations > 0)
        o.max_loop_iterations = opts->max_loop_iterations;
    }
    std::unique_ptr<qfold_session> h(new qfold_session);
    h->model = model->model;
    qfold::Status st = qfold::Session::Create(h->model, o, &h->session);
    if (!st.ok()) return FromStatus(fn, st);
    h->output_shapes.resize(h->model->outputs().size());
    *out = h.release();
    return QFOLD_OK;
  });
}

qfold_status qfold_session_reset_state(qfold_session* session) {
  static const char* fn = "qfold_session_reset_state";
  return Guard(fn, [&] {
    if (session) session->session->ResetState();
    return QFOLD_OK;
  });
}

void qfold_session_free(qfold_session* session) {
  delete session;
}

qfold_status qfold_session_resize_input(qfold_session* session, const char* name,
                                        const int64_t* dims, size_t rank) {
  static const char* fn = "qfold_session_resize_input";
  return Guard(fn, [&] {
    if (!session) return NullArg(fn, "session");
    if (!name) return NullArg(fn, "name");
    qfold::Shape shape;
    if (qfold_status s = ReadShape(fn, dims, rank, &shape)) return s;
    session->has_run = false;
    return FromStatus(fn, session->session->ResizeInput(name, shape));
  });
}

namespace {

// set_input and bind_input: the same checks, then a copy or a binding.
qfold_status SetOrBindInput(const char* fn, bool bind, qfold_session* session, const char* name,
                            qfold_dtype dtype, const int64_t* dims, size_t rank, const void* data,
                            size_t bytes) {
  return Guard(fn, [&] {
    if (!session) return NullArg(fn, "session");
    if (!name) return NullArg(fn, "name");
    if (!data && bytes > 0) return NullArg(fn, "data (with bytes > 0)");
    const int dtype_value = EnumValue(dtype);
    if (!qfold::dtype_is_valid(dtype_value) || dtype_value == QFOLD_DTYPE_UNDEFINED)
      return Fail(
          QFOLD_INVALID_ARGUMENT, fn,
          "input '" + std::string(name) + "': invalid dtype value " + std::to_string(dtype_value));
    qfold::Shape shape;
    if (qfold_status s = ReadShape(fn, dims, rank, &shape)) return s;
    session->has_run = false;
    const auto dt = static_cast<qfold::DType>(dtype_value);
    return FromStatus(fn, bind ? session->session->BindInput(name, dt, shape, data, bytes)
                               : session->session->SetInput(name, dt, shape, data, bytes));
  });
}

}  // namespace

qfold_status qfold_session_set_input(qfold_session* session, const char* name, qfold_dtype dtype,
                                     const int64_t* dims, size_t rank, const void* data,
                                     size_t bytes) {
  return SetOrBindInput("qfold_session_set_input", false, session, name, dtype, dims, rank, data,
                        bytes);
}

qfold_status qfold_session_bind_input(qfold_session* session, const char* name, qfold_dtype dtype,
                                      const int64_t* dims, size_t rank, const void* data,
                                      size_t bytes) {
  return SetOrBindInput("qfold_session_bind_input", true, session, name, dtype, dims, rank, data,
                        bytes);
}

void qfold_session_release_inputs(qfold_session* session) {
  if (session) session->session->ReleaseInputs();
}

qfold_status qfold_session_set_input_sequence(qfold_session* session, const char* name,
                                              qfold_dtype dtype, size_t count,
                                              const int64_t* const* dims, const size_t* ranks,
                                              const void* const* data, const size_t* bytes) {
  static const char* fn = "qfold_session_set_input_sequence";
  return Guard(fn, [&] {
    if (!session) return NullArg(fn, "session");
    if (!name) return NullArg(fn, "name");
    if (count > 0 && (!dims || !ranks || !data || !bytes))
      return NullArg(fn, "dims, ranks, data or bytes (with count > 0)");
    const int dtype_value = EnumValue(dtype);
    if (!qfold::dtype_is_valid(dtype_value) || dtype_value == QFOLD_DTYPE_UNDEFINED)
      return Fail(
          QFOLD_INVALID_ARGUMENT, fn,
          "input '" + std::string(name) + "': invalid dtype value " + std::to_string(dtype_value));
    std::vector<qfold::TensorView> elements(count);
    for (size_t i = 0; i < count; ++i) {
      if (!data[i] && bytes[i] > 0) return NullArg(fn, "data[i] (with bytes[i] > 0)");
      if (qfold_status s = ReadShape(fn, dims[i], ranks[i], &elements[i].shape)) return s;
      elements[i].dtype = static_cast<qfold::DType>(dtype_value);
      elements[i].data = data[i];
      elements[i].bytes = bytes[i];
    }
    session->has_run = false;
    return FromStatus(fn, session->session->SetInputSequence(name, elements));
  });
}

qfold_status qfold_session_set_input_none(qfold_session* session, const char* name) {
  static const char* fn = "qfold_session_set_input_none";
  return Guard(fn, [&] {
    if (!session) return NullArg(fn, "session");
    if (!name) return NullArg(fn, "name");
    session->has_run = false;
    return FromStatus(fn, session->session->SetInputNone(name));
  });
}

qfold_status qfold_session_run(qfold_session* session) {
  static const char* fn = "qfold_session_run";
  return Guard(fn, [&] {
    if (!session) return NullArg(fn, "session");
    session->has_run = false;
    qfold::Status st = session->session->Run();
    if (!st.ok()) return FromStatus(fn, st);
    session->has_run = true;
    return QFOLD_OK;
  });
}

namespace {

// The index of output `name`, once a run has computed it.
qfold_status ComputedOutput(const char* fn, const qfold_session* session, const char* name,
                            size_t* index) {
  if (!session) return NullArg(fn, "session");
  if (!name) return NullArg(fn, "name");
  const auto& outputs = session->model->outputs();
  *index = 0;
  while (*index < outputs.size() && outputs[*index].name != name) ++*index;
  if (*index == outputs.size())
    return Fail(QFOLD_INVALID_ARGUMENT, fn, "no output named '" + std::string(name) + "'");
  if (!session->has_run)
    return Fail(QFOLD_INVALID_ARGUMENT, fn,
                "output '" + std::string(name) +
                    "' is not computed: call qfold_session_run after setting the inputs");
  return QFOLD_OK;
}

}  // namespace

qfold_status qfold_session_get_output(qfold_session* session, const char* name, qfold_dtype* dtype,
                                      const int64_t** dims, size_t* rank, const void** data) {
  static const char* fn = "qfold_session_get_output";
  return Guard(fn, [&] {
    size_t index = 0;
    if (qfold_status s = ComputedOutput(fn, session, name, &index)) return s;
    qfold::DType dt = qfold::DType::kUndefined;
    qfold::Shape& shape = session->output_shapes[index];
    const void* ptr = nullptr;
    qfold::Status st = session->session->GetOutput(name, &dt, &shape, &ptr);
    if (!st.ok()) return FromStatus(fn, st);
    if (dtype) *dtype = static_cast<qfold_dtype>(dt);
    if (dims) *dims = shape.data();
    if (rank) *rank = shape.size();
    if (data) *data = ptr;
    return QFOLD_OK;
  });
}

namespace {

// The elements of sequence output `name` after a run, kept in the session.
qfold_status OutputElements(const char* fn, qfold_session* session, const char* name,
                            const std::vector<qfold::TensorView>** out) {
  size_t index = 0;
  if (qfold_status s = ComputedOutput(fn, session, name, &index)) return s;
  session->output_elements.resize(session->model->outputs().size());
  qfold::Status st = session->session->GetOutputSequence(name, &session->output_elements[index]);
  if (!st.ok()) return FromStatus(fn, st);
  *out = &session->output_elements[index];
  return QFOLD_OK;
}

}  // namespace

qfold_status qfold_session_output_is_none(qfold_session* session, const char* name, int* none) {
  static const char* fn = "qfold_session_output_is_none";
  return Guard(fn, [&] {
    if (!none) return NullArg(fn, "none");
    size_t index = 0;
    if (qfold_status s = ComputedOutput(fn, session, name, &index)) return s;
    bool is_none = false;
    qfold::Status st = session->session->OutputIsNone(name, &is_none);
    if (!st.ok()) return FromStatus(fn, st);
    *none = is_none ? 1 : 0;
    return QFOLD_OK;
  });
}

qfold_status qfold_session_get_output_sequence_length(qfold_session* session, const char* name,
                                                      size_t* count) {
  static const char* fn = "qfold_session_get_output_sequence_length";
  return Guard(fn, [&] {
    if (!count) return NullArg(fn, "count");
    const std::vector<qfold::TensorView>* elements = nullptr;
    if (qfold_status s = OutputElements(fn, session, name, &elements)) return s;
    *count = elements->size();
    return QFOLD_OK;
  });
}

qfold_status qfold_session_get_output_element(qfold_session* session, const char* name,
                                              size_t index, qfold_dtype* dtype,
                                              const int64_t** dims, size_t* rank,
                                              const void** data) {
  static const char* fn = "qfold_session_get_output_element";
  return Guard(fn, [&] {
    const std::vector<qfold::TensorView>* elements = nullptr;
    if (qfold_status s = OutputElements(fn, session, name, &elements)) return s;
    if (index >= elements->size())
      return Fail(QFOLD_INVALID_ARGUMENT, fn,
                  "output '" + std::string(name) + "' has " + std::to_string(elements->size()) +
                      " elements, no element " + std::to_string(index));
    const qfold::TensorView& e = (*elements)[index];
    if (dtype) *dtype = static_cast<qfold_dtype>(e.dtype);
    if (dims) *dims = e.shape.data();
    if (rank) *rank = e.shape.size();
    if (data) *data = e.data;
    return QFOLD_OK;
  });
}

size_t qfold_session_arena_bytes(const qfold_session* session) {
  return session ? session->session->arena_bytes() : 0;
}

const char* qfold_session_kernels(const qfold_session* session) {
  return session ? session->session->kernels().c_str() : "";
}

}  // extern "C"
