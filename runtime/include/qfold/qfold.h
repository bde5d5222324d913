/* qfold C API: load a .qfm model and run it from C (C99) or any language with a
 * C FFI. Link with -lqfold_runtime -lpthread (and the C++ standard library when
 * linking the static archive: CMake's qfold::runtime target and qfold.pc handle it).
 *
 * Conventions:
 * - Every function that can fail returns a qfold_status. On failure the output
 *   parameters are left untouched and qfold_last_error() describes the problem
 *   (naming the file, operator or tensor). No C++ exception ever crosses this API;
 *   running out of memory is reported as QFOLD_INTERNAL.
 * - Strings are NUL-terminated UTF-8. Pointers returned by the library are owned
 *   by the library; their lifetime is stated next to each function.
 * - A qfold_model is immutable after loading and may be shared by any number of
 *   sessions, also across threads. A qfold_session must be used by one thread at a
 *   time; use one session per thread to run in parallel.
 */
#ifndef QFOLD_QFOLD_H_
#define QFOLD_QFOLD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result of every fallible call. Values mirror qfold::StatusCode. */
typedef enum qfold_status {
  QFOLD_OK = 0,
  QFOLD_INVALID_ARGUMENT = 1, /* caller's fault: unknown name, wrong shape, dtype or size */
  QFOLD_INVALID_MODEL = 2,    /* the .qfm is malformed, truncated or not a .qfm */
  QFOLD_UNSUPPORTED = 3,      /* valid, but this runtime cannot run it */
  QFOLD_IO_ERROR = 4,         /* the file cannot be opened or mapped */
  QFOLD_INTERNAL = 5          /* out of memory, or a bug in qfold */
} qfold_status;

/* Element types. Values match qfold::DType and the .qfm schema. */
typedef enum qfold_dtype {
  QFOLD_DTYPE_UNDEFINED = 0,
  QFOLD_DTYPE_FLOAT32 = 1,
  QFOLD_DTYPE_FLOAT16 = 2,
  QFOLD_DTYPE_BFLOAT16 = 3,
  QFOLD_DTYPE_FLOAT64 = 4,
  QFOLD_DTYPE_INT8 = 5,
  QFOLD_DTYPE_UINT8 = 6,
  QFOLD_DTYPE_INT16 = 7,
  QFOLD_DTYPE_UINT16 = 8,
  QFOLD_DTYPE_INT32 = 9,
  QFOLD_DTYPE_UINT32 = 10,
  QFOLD_DTYPE_INT64 = 11,
  QFOLD_DTYPE_UINT64 = 12,
  QFOLD_DTYPE_BOOL = 13,
  QFOLD_DTYPE_INT4 = 14,
  QFOLD_DTYPE_UINT4 = 15,
  /* Not a type: spans the enum over every int, so a value a caller passes from C
   * that is none of the above is still a valid qfold_dtype in C++ (the call then
   * returns QFOLD_INVALID_ARGUMENT). */
  QFOLD_DTYPE_MAX_ENUM = 0x7fffffff
} qfold_dtype;

/* Arithmetic of a session's float convolutions (qfold_session_options.precision).
 * Values match qfold::SessionOptions::Precision. */
typedef enum qfold_precision {
  QFOLD_PRECISION_FLOAT32 = 0,  /* fp32 throughout (the default) */
  QFOLD_PRECISION_BFLOAT16 = 1, /* opt-in: channels-last float convolutions multiply
                                   bfloat16-rounded values on AMX-BF16 or AVX-512 BF16
                                   (vdpbf16ps), summing in fp32; changes nothing where it
                                   would not be faster (no AVX-512 BF16; Intel without
                                   AMX-BF16, whose vdpbf16ps runs at half the FMA rate) */
  QFOLD_PRECISION_FLOAT16 = 2,  /* opt-in (Armv8.2 FEAT_FP16): channels-last float
                                   convolutions and Gemm/MatMul with a constant B multiply
                                   half-rounded values with NEON fp16 arithmetic, short runs
                                   summed in fp16 and those in fp32; changes nothing on CPUs
                                   without FEAT_FP16 */
  /* Not a precision: as QFOLD_DTYPE_MAX_ENUM. */
  QFOLD_PRECISION_MAX_ENUM = 0x7fffffff
} qfold_precision;

/* Opaque handles. */
typedef struct qfold_model qfold_model;
typedef struct qfold_session qfold_session;

/* Description of a graph input or output. All pointers point into the model and
 * stay valid until the qfold_model handle they came from is freed. */
typedef struct qfold_tensor_info {
  const char* name;
  qfold_dtype dtype;
  size_t rank;
  const int64_t* dims;          /* rank entries; -1 where the dim is symbolic */
  const char* const* dim_names; /* rank entries; the symbolic name, "" for fixed dims */
} qfold_tensor_info;

/* Session settings. Always call qfold_session_options_init first, then change
 * fields: new fields are only ever appended, and struct_size tells the library
 * which ones the caller knows about. */
/* Streaming state: after each run, `output`'s value becomes `input`'s (see
 * qfold_session_options.state_bindings). */
typedef struct qfold_state_binding {
  const char* output;
  const char* input;
} qfold_state_binding;

typedef struct qfold_session_options {
  size_t struct_size;  /* set by qfold_session_options_init; do not change */
  int32_t num_threads; /* threads for kernels that split work; values < 1 mean 1,
                          values above the hardware threads are clamped to them */
  /* num_state_bindings pairs binding a returned state to a state input of the same
   * dtype and shape: chunk after chunk runs without the caller copying the state.
   * A bound input starts at zeros and need not be set; qfold_session_set_input
   * still overrides it, qfold_session_reset_state zeros it. The strings are read
   * by qfold_session_create only. Defaults: 0 and NULL. */
  size_t num_state_bindings;
  const qfold_state_binding* state_bindings;
  /* A qfold_precision value (int32_t keeps the struct's layout independent of the
   * enum's size); other values fail qfold_session_create. qfold_session_kernels
   * lists conv_nhwc_bf16 when bfloat16 is in use, conv_nhwc_fp16/gemm_fp16 for float16. Default:
   * QFOLD_PRECISION_FLOAT32. */
  int32_t precision;
  /* Upper bound on the bytes the session allocates (activation arena with kernel
   * scratch, values computed at plan time, dynamic-mode buffers). A plan that
   * needs more fails qfold_session_create (or qfold_session_resize_input /
   * set_input for symbolic shapes) with QFOLD_INVALID_MODEL naming the op and
   * the bytes, instead of exhausting the device's memory. 0: the library's
   * default bound, 4 GiB (what callers without this field get). Default: 0. */
  size_t max_memory_bytes;
  /* Upper bound on the iterations of each Loop node per run; a Loop that would
   * go further fails qfold_session_run with QFOLD_INVALID_MODEL naming the node.
   * 0 (and negative values): no bound, as ONNX has none. Default: 0. */
  int64_t max_loop_iterations;
} qfold_session_options;

/* ---- errors and helpers ------------------------------------------------- */

/* Message of the most recent failed call on the calling thread ("" if none).
 * Successful calls do not clear it. The pointer is valid until the next failed
 * call on this thread. */
const char* qfold_last_error(void);

/* Static name of a status code, e.g. "QFOLD_INVALID_ARGUMENT"; never NULL. */
const char* qfold_status_string(qfold_status status);

/* Static dtype name, e.g. "float32"; "undefined" for unknown values. */
const char* qfold_dtype_name(qfold_dtype dtype);

/* Bytes per element; 0 for sub-byte types (int4, uint4) and unknown values. */
size_t qfold_dtype_size(qfold_dtype dtype);

/* Static version string of the library, e.g. "0.1.0". */
const char* qfold_version(void);

/* ---- models ------------------------------------------------------------- */

/* Maps the .qfm file read-only and verifies it. On success *out owns a new
 * reference; release it with qfold_model_free. */
qfold_status qfold_model_load_file(const char* path, qfold_model** out);

/* Loads a .qfm from memory. If `data` is 64-byte aligned it is used in place
 * (no copy) and must stay valid and unchanged until the model and every session
 * created from it are freed; otherwise it is copied once and may be released as
 * soon as this returns. */
qfold_status qfold_model_load_memory(const void* data, size_t size, qfold_model** out);

/* Releases the caller's reference. The model is reference-counted: sessions
 * created from it keep it alive, so it may be freed before them. NULL is a no-op.
 * Pointers from qfold_model_input_info/output_info become invalid. */
void qfold_model_free(qfold_model* model);

/* Number of graph inputs / outputs; 0 for NULL. */
size_t qfold_model_num_inputs(const qfold_model* model);
size_t qfold_model_num_outputs(const qfold_model* model);

/* Describes input / output `index` (0-based). See qfold_tensor_info for lifetimes. */
qfold_status qfold_model_input_info(const qfold_model* model, size_t index,
                                    qfold_tensor_info* info);
qfold_status qfold_model_output_info(const qfold_model* model, size_t index,
                                     qfold_tensor_info* info);

/* 1 when input / output `index` is an ONNX sequence of tensors (its info then
 * describes the elements: their dtype, and the dims every element has, -1 where
 * they may differ), 0 for a tensor, a NULL model or an index out of range. */
int qfold_model_input_is_sequence(const qfold_model* model, size_t index);
int qfold_model_output_is_sequence(const qfold_model* model, size_t index);

/* 1 when input / output `index` is an ONNX optional: none, or a value of the
 * tensor (or, with *_is_sequence, the sequence) its info describes; 0 for others,
 * a NULL model or an index out of range. A present value is set and read like a
 * plain one; qfold_session_set_input_none sets none, qfold_session_output_is_none
 * tells whether an output is. */
int qfold_model_input_is_optional(const qfold_model* model, size_t index);
int qfold_model_output_is_optional(const qfold_model* model, size_t index);

/* ---- sessions ----------------------------------------------------------- */

/* Fills `opts` with the defaults (num_threads = 1, precision = QFOLD_PRECISION_FLOAT32,
 * max_memory_bytes = 0: the default bound). */
void qfold_session_options_init(qfold_session_options* opts);

/* Creates a session holding its own activation memory. `opts` may be NULL for
 * the defaults. The session takes a reference on the model. If every input has a
 * fixed shape the memory is planned now; with symbolic dims, call
 * qfold_session_resize_input (or qfold_session_set_input) first. */
qfold_status qfold_session_create(qfold_model* model, const qfold_session_options* opts,
                                  qfold_session** out);

/* Frees the session and its reference on the model. NULL is a no-op. */
void qfold_session_free(qfold_session* session);

/* Sets the shape of input `name` (`rank` dims, all >= 0; fixed dims of the model
 * must match) and re-plans memory. Invalidates output pointers and input data
 * already set. A no-op when the shape is unchanged. */
qfold_status qfold_session_resize_input(qfold_session* session, const char* name,
                                        const int64_t* dims, size_t rank);

/* Copies `bytes` bytes from `data` into input `name`. `dtype` must be the input's
 * dtype and `bytes` must equal the element count times the dtype size. If the
 * shape differs from the current one the input is resized first (see
 * qfold_session_resize_input). `data` may be released as soon as this returns. */
qfold_status qfold_session_set_input(qfold_session* session, const char* name, qfold_dtype dtype,
                                     const int64_t* dims, size_t rank, const void* data,
                                     size_t bytes);

/* As qfold_session_set_input, but runs read `data` in place instead of a copy:
 * it stays bound until qfold_session_release_inputs, a set_input or bind_input of
 * this input, or any resize, and must stay valid and unchanged until then (no op
 * writes it). Sequence, optional and bool inputs, inputs bound as streaming state
 * and data not aligned to its element size are copied, as by set_input. */
qfold_status qfold_session_bind_input(qfold_session* session, const char* name, qfold_dtype dtype,
                                      const int64_t* dims, size_t rank, const void* data,
                                      size_t bytes);

/* Ends every qfold_session_bind_input: those inputs hold no value afterwards, and
 * qfold_session_run fails naming one until each is set or bound again. */
void qfold_session_release_inputs(qfold_session* session);

/* Sets sequence input `name` (qfold_model_input_is_sequence) to copies of `count`
 * tensors: element i has dtype `dtype`, ranks[i] dims at dims[i] (matching the
 * model's fixed element dims) and bytes[i] bytes at data[i]. `count` may be 0 (an
 * empty sequence); the arrays may be NULL then. A sequence input never set is empty. */
qfold_status qfold_session_set_input_sequence(qfold_session* session, const char* name,
                                              qfold_dtype dtype, size_t count,
                                              const int64_t* const* dims, const size_t* ranks,
                                              const void* const* data, const size_t* bytes);

/* Sets optional input `name` (qfold_model_input_is_optional) to none; an
 * optional input never set is none. QFOLD_INVALID_ARGUMENT for other inputs. */
qfold_status qfold_session_set_input_none(qfold_session* session, const char* name);

/* Runs the model on the inputs set so far. */
qfold_status qfold_session_run(qfold_session* session);

/* Reads output `name` after a successful run. Any out-parameter may be NULL if
 * not wanted. *dims (`*rank` entries) and *data are owned by the session and valid
 * until the next qfold_session_run, resize_input, set_input or session_free. */
qfold_status qfold_session_get_output(qfold_session* session, const char* name, qfold_dtype* dtype,
                                      const int64_t** dims, size_t* rank, const void** data);

/* After a successful run, *none = 1 when optional output `name` holds no value
 * (qfold_session_get_output and the sequence readers then fail), else 0. */
qfold_status qfold_session_output_is_none(qfold_session* session, const char* name, int* none);

/* Reads sequence output `name` after a successful run: *count elements. Then
 * qfold_session_get_output_element reads element `index` as qfold_session_get_output
 * reads a tensor (same lifetimes). */
qfold_status qfold_session_get_output_sequence_length(qfold_session* session, const char* name,
                                                      size_t* count);
qfold_status qfold_session_get_output_element(qfold_session* session, const char* name,
                                              size_t index, qfold_dtype* dtype,
                                              const int64_t** dims, size_t* rank,
                                              const void** data);

/* Zeros every input bound by qfold_session_options.state_bindings (a new stream);
 * a no-op for a NULL session or one without bindings. */
qfold_status qfold_session_reset_state(qfold_session* session);

/* Bytes of the planned activation arena, kernel scratch included (0 before
 * planning or when the model needs data-dependent shapes and allocates per
 * tensor); 0 for NULL. */
size_t qfold_session_arena_bytes(const qfold_session* session);

/* The kernel variant of every kernel family the session uses, chosen once from
 * the CPU's features (lowered by the QFOLD_ISA environment variable) when the
 * session was created and never changed afterwards, as "family=variant" pairs
 * separated by spaces: "gemm_f32=avx2 dwconv_f32=avx2 gemm_s8=avxvnni ...";
 * "reference" where a family runs its reference kernel. Owned by the session,
 * valid until qfold_session_free; "" for NULL. */
const char* qfold_session_kernels(const qfold_session* session);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QFOLD_QFOLD_H_ */
