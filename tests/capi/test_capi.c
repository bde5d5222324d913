/* Tests of the C API, written in C99 against qfold/qfold.h only.
 *   test_capi [dynamic_convnet.qfm [vad_like_16k.qfm]]
 * Without an argument only the model-independent checks run (runtime-only builds
 * have no converter to make a .qfm). The .qfm is models/dynamic_convnet.onnx
 * converted by the CLI: input [batch,3,height,width] -> Conv, Relu, 2x nearest
 * Resize, Conv -> output [batch,4,2*height,2*width]. The second .qfm is
 * models/streaming/vad_like.onnx converted with --const sr=16000: input [1,512],
 * state [2,1,64] -> output [1,1], stateN [2,1,64]. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qfold/qfold.h"

static int g_failures = 0;

#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                      \
    }                                                                    \
  } while (0)

/* The call fails with `code` and qfold_last_error() contains `needle`. */
#define EXPECT_ERROR(call, code, needle)                                                           \
  do {                                                                                             \
    qfold_status st_ = (call);                                                                     \
    if (st_ != (code) || !strstr(qfold_last_error(), (needle))) {                                  \
      fprintf(stderr, "%s:%d: FAILED: %s\n  got %s \"%s\", want %s containing \"%s\"\n", __FILE__, \
              __LINE__, #call, qfold_status_string(st_), qfold_last_error(),                       \
              qfold_status_string(code), (needle));                                                \
      ++g_failures;                                                                                \
    }                                                                                              \
  } while (0)

#define EXPECT_OK(call) EXPECT_ERROR(call, QFOLD_OK, "")

static int Near(float a, float b) {
  return a - b < 1e-4f && b - a < 1e-4f;
}

static void* FailOnOtherThread(void* arg) {
  qfold_model* m = NULL;
  (void)arg;
  EXPECT_ERROR(qfold_model_load_file("/nonexistent/other_thread.qfm", &m), QFOLD_IO_ERROR,
               "other_thread.qfm");
  return NULL;
}

static void TestWithoutModel(void) {
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_session_options opts;
  pthread_t thread;
  static const unsigned char kGarbage[64] = {1, 2, 3, 4, 5, 6, 7, 8};

  EXPECT(strcmp(qfold_last_error(), "") == 0);
  EXPECT(strcmp(qfold_status_string(QFOLD_OK), "QFOLD_OK") == 0);
  EXPECT(strcmp(qfold_status_string(QFOLD_INVALID_MODEL), "QFOLD_INVALID_MODEL") == 0);
  EXPECT(strcmp(qfold_status_string((qfold_status)99), "QFOLD_UNKNOWN_STATUS") == 0);
  EXPECT(strcmp(qfold_dtype_name(QFOLD_DTYPE_FLOAT32), "float32") == 0);
  EXPECT(qfold_dtype_size(QFOLD_DTYPE_INT64) == 8);
  EXPECT(qfold_dtype_size((qfold_dtype)99) == 0 && qfold_dtype_size((qfold_dtype)-1) == 0);
  EXPECT(strcmp(qfold_dtype_name((qfold_dtype)-5), "undefined") == 0);
  EXPECT(strlen(qfold_version()) > 0);

  EXPECT_ERROR(qfold_model_load_file("/nonexistent/dir/model.qfm", &m), QFOLD_IO_ERROR,
               "/nonexistent/dir/model.qfm: cannot open");
  EXPECT(m == NULL);
  EXPECT_ERROR(qfold_model_load_file(NULL, &m), QFOLD_INVALID_ARGUMENT, "path is NULL");
  EXPECT_ERROR(qfold_model_load_memory(kGarbage, sizeof(kGarbage), &m), QFOLD_INVALID_MODEL,
               "not a qfold model");
  EXPECT_ERROR(qfold_model_load_memory(kGarbage, sizeof(kGarbage), NULL), QFOLD_INVALID_ARGUMENT,
               "out is NULL");
  EXPECT(m == NULL);

  /* The error message is per thread. */
  EXPECT(pthread_create(&thread, NULL, FailOnOtherThread, NULL) == 0);
  EXPECT(pthread_join(thread, NULL) == 0);
  EXPECT(strstr(qfold_last_error(), "out is NULL") != NULL);

  qfold_session_options_init(&opts);
  EXPECT(opts.num_threads == 1 && opts.struct_size == sizeof(opts));
  EXPECT(opts.precision == QFOLD_PRECISION_FLOAT32);
  EXPECT_ERROR(qfold_session_create(NULL, &opts, &s), QFOLD_INVALID_ARGUMENT, "model is NULL");
  EXPECT(qfold_model_num_inputs(NULL) == 0 && qfold_session_arena_bytes(NULL) == 0);
  EXPECT(strcmp(qfold_session_kernels(NULL), "") == 0);
  qfold_model_free(NULL);
  qfold_session_free(NULL);
}

static unsigned char* ReadFile(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* data;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = malloc((size_t)n + 1);
  *size = fread(data + 1, 1, (size_t)n, f); /* +1: deliberately misaligned */
  fclose(f);
  return data;
}

static void TestTruncated(const char* path) {
  size_t size = 0;
  unsigned char* data = ReadFile(path, &size);
  qfold_model* m = NULL;
  char truncated[] = "/tmp/qfold_capi_truncated_XXXXXX";
  FILE* f;
  int fd = mkstemp(truncated);
  EXPECT(data != NULL && size > 100 && fd >= 0);
  if (!data || fd < 0) return;
  EXPECT_ERROR(qfold_model_load_memory(data + 1, size / 2, &m), QFOLD_INVALID_MODEL,
               "corrupt or truncated");
  f = fdopen(fd, "wb");
  fwrite(data + 1, 1, size - 16, f);
  fclose(f);
  EXPECT_ERROR(qfold_model_load_file(truncated, &m), QFOLD_INVALID_MODEL, truncated);
  EXPECT(m == NULL);
  remove(truncated);

  /* Unaligned memory is copied, so the buffer may go right after loading. */
  EXPECT_OK(qfold_model_load_memory(data + 1, size, &m));
  free(data);
  EXPECT(qfold_model_num_inputs(m) == 1 && qfold_model_num_outputs(m) == 1);
  qfold_model_free(m);
}

static void TestModel(const char* path) {
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_session_options opts;
  qfold_tensor_info info;
  const int64_t batch2[4] = {2, 3, 5, 7};
  const int64_t tiny[4] = {1, 3, 1, 1};
  const int64_t bad_fixed[4] = {1, 4, 5, 7};
  const int64_t* dims = NULL;
  const void* data = NULL;
  const float* y;
  size_t rank = 0, n = 2 * 3 * 5 * 7, k;
  qfold_dtype dtype = QFOLD_DTYPE_UNDEFINED;
  float* x = malloc(n * sizeof(float));
  for (k = 0; k < n; ++k) x[k] = 0.5f;

  EXPECT_OK(qfold_model_load_file(path, &m));
  if (!m) return;
  EXPECT_OK(qfold_model_input_info(m, 0, &info));
  EXPECT(strcmp(info.name, "input") == 0 && info.dtype == QFOLD_DTYPE_FLOAT32 && info.rank == 4);
  EXPECT(info.dims[0] == -1 && info.dims[1] == 3 && info.dims[2] == -1 && info.dims[3] == -1);
  EXPECT(strcmp(info.dim_names[0], "batch") == 0 && strcmp(info.dim_names[1], "") == 0);
  EXPECT(strcmp(info.dim_names[3], "width") == 0);
  EXPECT_OK(qfold_model_output_info(m, 0, &info));
  EXPECT(strcmp(info.name, "output") == 0 && info.rank == 4 && info.dims[1] == 4);
  EXPECT_ERROR(qfold_model_input_info(m, 1, &info), QFOLD_INVALID_ARGUMENT,
               "input index 1 out of range");

  qfold_session_options_init(&opts);
  opts.num_threads = 2;
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  qfold_model_free(m); /* the session keeps the model alive */
  if (!s) return;

  /* The kernels chosen at creation: a "family=variant" pair per kernel family,
   * the same string (and pointer) for the session's whole life. */
  const char* kernels = qfold_session_kernels(s);
  EXPECT(strncmp(kernels, "gemm_f32=", 9) == 0);
  EXPECT(strstr(kernels, " gemm_s8=") != NULL && strstr(kernels, " quant_s8=") != NULL);
  EXPECT(strstr(kernels, " portable_loops=") != NULL);
  const char* isa = getenv("QFOLD_ISA");
  if (isa && strcmp(isa, "reference") == 0)
    EXPECT(strstr(kernels, "=avx") == NULL && strstr(kernels, "=neon") == NULL);

  /* Symbolic dims not resized yet. */
  EXPECT_ERROR(qfold_session_run(s), QFOLD_INVALID_ARGUMENT, "'batch'");
  EXPECT_ERROR(qfold_session_get_output(s, "output", &dtype, &dims, &rank, &data),
               QFOLD_INVALID_ARGUMENT, "call qfold_session_run");
  EXPECT_ERROR(qfold_session_resize_input(s, "nope", batch2, 4), QFOLD_INVALID_ARGUMENT,
               "no input named 'nope'");
  EXPECT_ERROR(qfold_session_resize_input(s, "input", batch2, 3), QFOLD_INVALID_ARGUMENT,
               "has rank 3");
  EXPECT_ERROR(qfold_session_resize_input(s, "input", batch2, (size_t)-1), QFOLD_INVALID_ARGUMENT,
               "exceeds the maximum");
  EXPECT_ERROR(qfold_session_resize_input(s, "input", NULL, 4), QFOLD_INVALID_ARGUMENT,
               "dims (with rank > 0) is NULL");
  EXPECT_ERROR(qfold_session_resize_input(s, "input", bad_fixed, 4), QFOLD_INVALID_ARGUMENT,
               "fixed dim 3");

  EXPECT_OK(qfold_session_resize_input(s, "input", batch2, 4));
  EXPECT(qfold_session_arena_bytes(s) > 0);
  EXPECT_ERROR(
      qfold_session_set_input(s, "nope", QFOLD_DTYPE_FLOAT32, batch2, 4, x, n * sizeof(float)),
      QFOLD_INVALID_ARGUMENT, "no input named 'nope'");
  EXPECT_ERROR(
      qfold_session_set_input(s, "input", QFOLD_DTYPE_INT32, batch2, 4, x, n * sizeof(float)),
      QFOLD_INVALID_ARGUMENT, "input 'input' is float32, given int32");
  EXPECT_ERROR(qfold_session_set_input(s, "input", (qfold_dtype)77, batch2, 4, x, 4),
               QFOLD_INVALID_ARGUMENT, "invalid dtype value 77");
  EXPECT_ERROR(
      qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, batch2, 4, x, n * sizeof(float) - 4),
      QFOLD_INVALID_ARGUMENT, "needs 840 bytes, given 836");
  EXPECT_ERROR(qfold_session_get_output(s, "nope", &dtype, &dims, &rank, &data),
               QFOLD_INVALID_ARGUMENT, "no output named 'nope'");

  EXPECT_OK(
      qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, batch2, 4, x, n * sizeof(float)));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", &dtype, &dims, &rank, &data));
  EXPECT(dtype == QFOLD_DTYPE_FLOAT32 && rank == 4);
  EXPECT(dims[0] == 2 && dims[1] == 4 && dims[2] == 10 && dims[3] == 14);
  /* First values for an all-0.5 input, from ONNX Runtime 1.x on the same .onnx. */
  y = (const float*)data;
  EXPECT(Near(y[0], -0.172753364f) && Near(y[1], -0.301421553f) && Near(y[2], -0.238652527f));
  EXPECT(Near(y[3], -0.400044769f) && Near(y[4], -0.400044769f));
  /* Both samples of the batch got the same input. */
  EXPECT(memcmp(y, y + 4 * 10 * 14, 4 * 10 * 14 * sizeof(float)) == 0);

  /* A new shape through resize: outputs follow. */
  EXPECT_OK(qfold_session_resize_input(s, "input", tiny, 4));
  EXPECT_ERROR(qfold_session_get_output(s, "output", NULL, NULL, NULL, NULL),
               QFOLD_INVALID_ARGUMENT, "call qfold_session_run");
  EXPECT_OK(qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, tiny, 4, x, 3 * 4));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", &dtype, &dims, &rank, &data));
  EXPECT(rank == 4 && dims[0] == 1 && dims[1] == 4 && dims[2] == 2 && dims[3] == 2);
  /* Re-planning and running never change the kernels. */
  EXPECT(qfold_session_kernels(s) == kernels);

  qfold_session_free(s);
  free(x);
}

/* Runs the dynamic convnet on a fixed pseudo-random 1x3x5x7 input with `precision`;
 * copies the 1x4x10x14 output to `y` and the session's kernels to `kernels`. */
static void RunWithPrecision(qfold_model* m, int32_t precision, float* y, char* kernels,
                             size_t kernels_size) {
  static const int64_t dims[4] = {1, 3, 5, 7};
  float x[3 * 5 * 7];
  qfold_session_options opts;
  qfold_session* s = NULL;
  const void* data = NULL;
  size_t k;
  for (k = 0; k < 3 * 5 * 7; ++k) x[k] = (float)((k * 29) % 17) / 8.0f - 1.0f;
  qfold_session_options_init(&opts);
  opts.precision = precision;
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  if (!s) return;
  snprintf(kernels, kernels_size, "%s", qfold_session_kernels(s));
  EXPECT_OK(qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, dims, 4, x, sizeof(x)));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  if (data) memcpy(y, data, 4 * 10 * 14 * sizeof(float));
  qfold_session_free(s);
}

static void TestPrecision(const char* path) {
  enum { kOutputs = 4 * 10 * 14 };
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_session_options opts;
  float fp32[kOutputs], bf16[kOutputs], fp16[kOutputs];
  char fp32_kernels[1024] = "", bf16_kernels[1024] = "", fp16_kernels[1024] = "";
  double dot = 0, fp32_norm = 0, bf16_norm = 0;
  size_t k;
  EXPECT_OK(qfold_model_load_file(path, &m));
  if (!m) return;
  qfold_session_options_init(&opts);
  EXPECT(opts.precision == QFOLD_PRECISION_FLOAT32);

  memset(fp32, 0, sizeof(fp32));
  memset(bf16, 0xff, sizeof(bf16));
  RunWithPrecision(m, QFOLD_PRECISION_FLOAT32, fp32, fp32_kernels, sizeof(fp32_kernels));
  RunWithPrecision(m, QFOLD_PRECISION_BFLOAT16, bf16, bf16_kernels, sizeof(bf16_kernels));
  EXPECT(strstr(fp32_kernels, "conv_nhwc_bf16=") == NULL);
  if (!strstr(bf16_kernels, "conv_nhwc_bf16=")) {
    /* No AVX-512 BF16 (or QFOLD_ISA lowered it): bfloat16 changes nothing. */
    EXPECT(memcmp(fp32, bf16, sizeof(fp32)) == 0);
  } else {
    /* bfloat16 keeps 8 significant bits: close to fp32, cosine > 0.999. */
    for (k = 0; k < kOutputs; ++k) {
      dot += (double)fp32[k] * bf16[k];
      fp32_norm += (double)fp32[k] * fp32[k];
      bf16_norm += (double)bf16[k] * bf16[k];
    }
    EXPECT(dot > 0 && dot * dot > 0.999 * 0.999 * fp32_norm * bf16_norm);
  }
  /* float16: NEON half arithmetic where the CPU has FEAT_FP16, else fp32 exactly. */
  memset(fp16, 0xff, sizeof(fp16));
  RunWithPrecision(m, QFOLD_PRECISION_FLOAT16, fp16, fp16_kernels, sizeof(fp16_kernels));
  EXPECT(strstr(fp32_kernels, "fp16=") == NULL);
  if (!strstr(fp16_kernels, "conv_nhwc_fp16=")) {
    EXPECT(memcmp(fp32, fp16, sizeof(fp32)) == 0);
  } else {
    dot = fp32_norm = bf16_norm = 0;
    for (k = 0; k < kOutputs; ++k) {
      dot += (double)fp32[k] * fp16[k];
      fp32_norm += (double)fp32[k] * fp32[k];
      bf16_norm += (double)fp16[k] * fp16[k];
    }
    EXPECT(dot > 0 && dot * dot > 0.9999 * 0.9999 * fp32_norm * bf16_norm);
  }

  opts.precision = 7;
  EXPECT_ERROR(qfold_session_create(m, &opts, &s), QFOLD_INVALID_ARGUMENT,
               "opts->precision: invalid value 7");
  opts.precision = -1;
  EXPECT_ERROR(qfold_session_create(m, &opts, &s), QFOLD_INVALID_ARGUMENT, "invalid value -1");
  EXPECT(s == NULL);
  /* A caller built against a header without `precision` never set it: ignored. */
  opts.struct_size = offsetof(qfold_session_options, precision);
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  if (s) EXPECT(strstr(qfold_session_kernels(s), "conv_nhwc_bf16=") == NULL);
  qfold_session_free(s);
  qfold_model_free(m);
}

/* max_memory_bytes bounds what a session plans. The convnet has symbolic dims,
 * so its plan (and the refusal) comes with resize_input; the streaming model's
 * shapes are fixed, so creation plans and refuses. `exact`: a limit equal to
 * arena_bytes fits (no values computed at plan time on top). */
static void CheckMemoryLimit(qfold_model* m, const char* input, const int64_t* dims, size_t rank,
                             int exact) {
  qfold_session_options opts;
  qfold_session* s = NULL;
  size_t arena;
  qfold_session_options_init(&opts);
  EXPECT(opts.max_memory_bytes == 0); /* the library's default bound */
  EXPECT(opts.max_loop_iterations == 0); /* no bound */
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  if (!s) return;
  if (input) EXPECT_OK(qfold_session_resize_input(s, input, dims, rank));
  arena = qfold_session_arena_bytes(s);
  EXPECT(arena > 0);
  qfold_session_free(s);
  s = NULL;

  opts.max_memory_bytes = arena - 1;
  if (input) {
    EXPECT_OK(qfold_session_create(m, &opts, &s));
    if (!s) return;
    EXPECT_ERROR(qfold_session_resize_input(s, input, dims, rank), QFOLD_INVALID_MODEL,
                 "bytes a session may allocate");
    qfold_session_free(s);
    s = NULL;
  } else {
    EXPECT_ERROR(qfold_session_create(m, &opts, &s), QFOLD_INVALID_MODEL,
                 "bytes a session may allocate");
    EXPECT(s == NULL);
  }
  /* The message names the bytes: the limit given. */
  {
    char limit[32];
    snprintf(limit, sizeof(limit), "more than the %zu bytes", arena - 1);
    EXPECT(strstr(qfold_last_error(), limit) != NULL);
  }

  if (exact) {
    opts.max_memory_bytes = arena;
    EXPECT_OK(qfold_session_create(m, &opts, &s));
    if (s && input) EXPECT_OK(qfold_session_resize_input(s, input, dims, rank));
    if (s) EXPECT(qfold_session_arena_bytes(s) == arena);
    qfold_session_free(s);
    s = NULL;
  }

  /* A caller built against a header without the field never set it: ignored. */
  opts.max_memory_bytes = 1;
  opts.struct_size = offsetof(qfold_session_options, max_memory_bytes);
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  if (s && input) EXPECT_OK(qfold_session_resize_input(s, input, dims, rank));
  if (s) EXPECT(qfold_session_arena_bytes(s) == arena);
  qfold_session_free(s);
}

static void TestMemoryLimit(const char* convnet, const char* vad) {
  static const int64_t dims[4] = {2, 3, 5, 7};
  qfold_model* m = NULL;
  EXPECT_OK(qfold_model_load_file(convnet, &m));
  if (m) CheckMemoryLimit(m, "input", dims, 4, 1);
  qfold_model_free(m);
  if (!vad) return;
  m = NULL;
  EXPECT_OK(qfold_model_load_file(vad, &m));
  if (m) CheckMemoryLimit(m, NULL, NULL, 0, 1);
  qfold_model_free(m);
}

/* Runs `steps` chunks; with `bound` the session carries the state, otherwise the
 * caller copies stateN into state as a caller without bindings would. */
static void RunChunks(qfold_model* m, int bound, int steps, float* probs) {
  static const int64_t chunk_dims[2] = {1, 512}, state_dims[3] = {2, 1, 64};
  qfold_session_options o;
  qfold_state_binding b;
  qfold_session* s = NULL;
  float x[512], state[128];
  int k, i;
  qfold_session_options_init(&o);
  b.output = "stateN";
  b.input = "state";
  if (bound) {
    o.num_state_bindings = 1;
    o.state_bindings = &b;
  }
  memset(state, 0, sizeof(state));
  EXPECT_OK(qfold_session_create(m, &o, &s));
  if (!s) return;
  for (k = 0; k < steps; ++k) {
    const void* data = NULL;
    for (i = 0; i < 512; ++i) x[i] = (float)((i * 37 + k * 11) % 23 - 11) / 20.0f;
    EXPECT_OK(
        qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, chunk_dims, 2, x, sizeof(x)));
    if (!bound)
      EXPECT_OK(qfold_session_set_input(s, "state", QFOLD_DTYPE_FLOAT32, state_dims, 3, state,
                                        sizeof(state)));
    EXPECT_OK(qfold_session_run(s));
    EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
    probs[k] = data ? *(const float*)data : -1.0f;
    EXPECT_OK(qfold_session_get_output(s, "stateN", NULL, NULL, NULL, &data));
    if (data) memcpy(state, data, sizeof(state));
  }
  if (bound) {
    /* A new stream: the first chunk gives the first result again. */
    const void* data = NULL;
    EXPECT_OK(qfold_session_reset_state(s));
    for (i = 0; i < 512; ++i) x[i] = (float)((i * 37) % 23 - 11) / 20.0f;
    EXPECT_OK(
        qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, chunk_dims, 2, x, sizeof(x)));
    EXPECT_OK(qfold_session_run(s));
    EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
    EXPECT(data && *(const float*)data == probs[0]);
  }
  qfold_session_free(s);
}

static void TestStateBinding(const char* path) {
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_session_options o;
  qfold_state_binding bad;
  float carried[4], copied[4];
  int k;
  EXPECT_OK(qfold_model_load_file(path, &m));
  if (!m) return;
  RunChunks(m, 1, 4, carried);
  RunChunks(m, 0, 4, copied);
  /* The same kernels on the same values: bit-identical, and the state matters. */
  for (k = 0; k < 4; ++k) EXPECT(carried[k] == copied[k]);
  EXPECT(carried[0] != carried[3] || carried[1] != carried[2]);

  qfold_session_options_init(&o);
  o.num_state_bindings = 1;
  o.state_bindings = &bad;
  bad.output = "stateN";
  bad.input = "input";
  EXPECT_ERROR(qfold_session_create(m, &o, &s), QFOLD_INVALID_ARGUMENT,
               "state binding 'stateN' -> 'input'");
  bad.output = "nope";
  bad.input = "state";
  EXPECT_ERROR(qfold_session_create(m, &o, &s), QFOLD_INVALID_ARGUMENT, "no output named 'nope'");
  o.state_bindings = NULL;
  EXPECT_ERROR(qfold_session_create(m, &o, &s), QFOLD_INVALID_ARGUMENT, "state_bindings");
  EXPECT(s == NULL);
  qfold_model_free(m);
}

/* models/sequences/sequence_io.onnx: s (a sequence of float [?, 3]) and t [1, 3] ->
 * grown = s with t appended, n = its length, all = s concatenated along axis 0. */
static void TestSequences(const char* path) {
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_tensor_info info;
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9}, t[3] = {-1, -2, -3};
  const int64_t a_dims[2] = {2, 3}, b_dims[2] = {1, 3}, bad_dims[2] = {1, 4};
  const int64_t* dims[2];
  const void* data[2];
  size_t ranks[2] = {2, 2}, bytes[2] = {sizeof(a), sizeof(b)}, count = 0, rank = 0, k;
  const int64_t* out_dims = NULL;
  const void* out = NULL;
  qfold_dtype dt = QFOLD_DTYPE_UNDEFINED;
  EXPECT_OK(qfold_model_load_file(path, &m));
  if (!m) return;
  EXPECT(qfold_model_input_is_sequence(m, 0) == 1);
  EXPECT(qfold_model_input_is_sequence(m, 1) == 0);
  EXPECT(qfold_model_input_is_sequence(m, 2) == 0);
  EXPECT(qfold_model_output_is_sequence(m, 0) == 1);
  EXPECT(qfold_model_output_is_sequence(m, 1) == 0);
  EXPECT(qfold_model_input_is_sequence(NULL, 0) == 0);
  EXPECT_OK(qfold_model_input_info(m, 0, &info));
  EXPECT(info.dtype == QFOLD_DTYPE_FLOAT32 && info.rank == 2 && info.dims[0] == -1 &&
         info.dims[1] == 3);
  EXPECT_OK(qfold_session_create(m, NULL, &s));
  if (!s) {
    qfold_model_free(m);
    return;
  }
  dims[0] = a_dims;
  dims[1] = b_dims;
  data[0] = a;
  data[1] = b;
  EXPECT_OK(qfold_session_set_input_sequence(s, "s", QFOLD_DTYPE_FLOAT32, 2, dims, ranks, data,
                                             bytes));
  EXPECT_OK(qfold_session_set_input(s, "t", QFOLD_DTYPE_FLOAT32, b_dims, 2, t, sizeof(t)));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output_sequence_length(s, "grown", &count));
  EXPECT(count == 3);
  EXPECT_OK(qfold_session_get_output_element(s, "grown", 2, &dt, &out_dims, &rank, &out));
  EXPECT(dt == QFOLD_DTYPE_FLOAT32 && rank == 2 && out_dims[0] == 1 && out_dims[1] == 3);
  for (k = 0; k < 3 && out; ++k) EXPECT(((const float*)out)[k] == t[k]);
  EXPECT_OK(qfold_session_get_output_element(s, "grown", 0, &dt, &out_dims, &rank, &out));
  EXPECT(rank == 2 && out_dims[0] == 2 && out && ((const float*)out)[5] == 6.f);
  EXPECT_OK(qfold_session_get_output(s, "all", &dt, &out_dims, &rank, &out));
  EXPECT(rank == 2 && out_dims[0] == 3 && out_dims[1] == 3);
  for (k = 0; k < 9 && out; ++k) EXPECT(((const float*)out)[k] == (float)(k + 1));
  EXPECT_OK(qfold_session_get_output(s, "n", &dt, &out_dims, &rank, &out));
  EXPECT(dt == QFOLD_DTYPE_INT64 && rank == 0 && out && *(const int64_t*)out == 2);
  /* Misuse: each an error naming what is wrong, never a crash. */
  EXPECT_ERROR(qfold_session_get_output_element(s, "grown", 3, &dt, &out_dims, &rank, &out),
               QFOLD_INVALID_ARGUMENT, "has 3 elements, no element 3");
  EXPECT_ERROR(qfold_session_get_output(s, "grown", &dt, &out_dims, &rank, &out),
               QFOLD_INVALID_ARGUMENT, "is a sequence");
  EXPECT_ERROR(qfold_session_get_output_sequence_length(s, "all", &count),
               QFOLD_INVALID_ARGUMENT, "is a tensor");
  EXPECT_ERROR(qfold_session_set_input(s, "s", QFOLD_DTYPE_FLOAT32, a_dims, 2, a, sizeof(a)),
               QFOLD_INVALID_ARGUMENT, "is a sequence");
  EXPECT_ERROR(qfold_session_set_input_sequence(s, "t", QFOLD_DTYPE_FLOAT32, 0, NULL, NULL, NULL,
                                                NULL),
               QFOLD_INVALID_ARGUMENT, "is a tensor");
  dims[1] = bad_dims;
  bytes[1] = 16;
  EXPECT_ERROR(qfold_session_set_input_sequence(s, "s", QFOLD_DTYPE_FLOAT32, 2, dims, ranks, data,
                                                bytes),
               QFOLD_INVALID_ARGUMENT, "element 1 has shape (1,4)");
  EXPECT_ERROR(qfold_session_set_input_sequence(s, "s", QFOLD_DTYPE_INT32, 1, dims, ranks, data,
                                                bytes),
               QFOLD_INVALID_ARGUMENT, "element 0 is int32");
  EXPECT_ERROR(qfold_session_set_input_sequence(s, "s", QFOLD_DTYPE_FLOAT32, 1, NULL, ranks, data,
                                                bytes),
               QFOLD_INVALID_ARGUMENT, "dims");
  /* No optionals here: none cannot be set, and no output is none. */
  EXPECT(qfold_model_input_is_optional(m, 0) == 0 && qfold_model_output_is_optional(m, 0) == 0);
  EXPECT(qfold_model_input_is_optional(NULL, 0) == 0);
  EXPECT_ERROR(qfold_session_set_input_none(s, "t"), QFOLD_INVALID_ARGUMENT, "is not optional");
  EXPECT_ERROR(qfold_session_output_is_none(s, "n", NULL), QFOLD_INVALID_ARGUMENT, "none");
  /* An empty sequence: the length is 0 and concatenating nothing is an error naming the op. */
  EXPECT_OK(qfold_session_set_input_sequence(s, "s", QFOLD_DTYPE_FLOAT32, 0, NULL, NULL, NULL,
                                             NULL));
  EXPECT_ERROR(qfold_session_run(s), QFOLD_INVALID_MODEL, "ConcatFromSequence 'join'");
  qfold_session_free(s);
  qfold_model_free(m);
}

/* bind_input: runs read the caller's buffer in place (the outputs set_input gives,
 * later changes to the buffer seen by the next run); release_inputs and any
 * resize leave the input without a value until it is set or bound again. */
static void TestBindInput(const char* path) {
  qfold_model* m = NULL;
  qfold_session* s = NULL;
  qfold_session_options opts;
  const int64_t shape[4] = {1, 3, 5, 7}, other[4] = {1, 3, 2, 2};
  const size_t n = 3 * 5 * 7, out = 4 * 10 * 14;
  float x[3 * 5 * 7], want_a[4 * 10 * 14], want_b[4 * 10 * 14];
  const void* data = NULL;
  size_t k;
  EXPECT_OK(qfold_model_load_file(path, &m));
  if (!m) return;
  qfold_session_options_init(&opts);
  EXPECT_OK(qfold_session_create(m, &opts, &s));
  qfold_model_free(m);
  if (!s) return;
  for (k = 0; k < n; ++k) x[k] = (float)((int)(k * 37 % 23) - 11) / 7.f;
  EXPECT_OK(qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, sizeof x));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  if (data) memcpy(want_a, data, sizeof want_a);
  for (k = 0; k < n; ++k) x[k] = -x[k];
  EXPECT_OK(qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, sizeof x));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  if (data) memcpy(want_b, data, sizeof want_b);

  EXPECT_OK(qfold_session_bind_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, sizeof x));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  EXPECT(data && memcmp(data, want_b, out * sizeof(float)) == 0);
  for (k = 0; k < n; ++k) x[k] = -x[k]; /* read in place: the next run sees it */
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  EXPECT(data && memcmp(data, want_a, out * sizeof(float)) == 0);

  qfold_session_release_inputs(s);
  EXPECT_ERROR(qfold_session_run(s), QFOLD_INVALID_ARGUMENT, "input 'input' was bound");
  EXPECT_OK(qfold_session_bind_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, sizeof x));
  EXPECT_OK(qfold_session_resize_input(s, "input", other, 4)); /* a re-plan releases it */
  EXPECT_ERROR(qfold_session_run(s), QFOLD_INVALID_ARGUMENT, "input 'input' was bound");
  EXPECT_ERROR(qfold_session_bind_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, 8),
               QFOLD_INVALID_ARGUMENT, "needs 420 bytes, given 8");
  EXPECT_OK(qfold_session_set_input(s, "input", QFOLD_DTYPE_FLOAT32, shape, 4, x, sizeof x));
  EXPECT_OK(qfold_session_run(s));
  EXPECT_OK(qfold_session_get_output(s, "output", NULL, NULL, NULL, &data));
  EXPECT(data && memcmp(data, want_a, out * sizeof(float)) == 0);
  qfold_session_release_inputs(NULL); /* a no-op */
  qfold_session_free(s);
}

int main(int argc, char** argv) {
  TestWithoutModel();
  if (argc > 1) {
    TestTruncated(argv[1]);
    TestModel(argv[1]);
    TestPrecision(argv[1]);
    TestMemoryLimit(argv[1], argc > 2 ? argv[2] : NULL);
    TestBindInput(argv[1]);
  }
  if (argc > 2) TestStateBinding(argv[2]);
  if (argc > 3) TestSequences(argv[3]);
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("capi: all checks passed%s\n", argc > 1 ? "" : " (no model given: model checks skipped)");
  return 0;
}
