/* Loads a .qfm, prints its inputs and outputs, fills each float32 input with 0.5 (input 0
 * from a raw float32 file unless "-"), runs, and prints the first values of each output.
 * usage: classify model.qfm [input.raw|-] [dim ...]  (dims of input 0; symbolic ones: 1) */
#include <qfold/qfold.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) \
  if ((call) != QFOLD_OK) return fprintf(stderr, "error: %s\n", qfold_last_error()), 1

static void print_info(const char* kind, const qfold_tensor_info* t, const char* end) {
  printf("%s %s %s [", kind, t->name, qfold_dtype_name(t->dtype));
  for (size_t d = 0; d < t->rank; ++d)
    t->dims[d] < 0 ? printf("%s%s", d ? "," : "", t->dim_names[d])
                   : printf("%s%lld", d ? "," : "", (long long)t->dims[d]);
  printf("]%s", end);
}

int main(int argc, char** argv) {
  qfold_model* model;
  qfold_session* session;
  qfold_tensor_info t;
  if (argc < 2) return fprintf(stderr, "usage: %s model.qfm [input.raw|-] [dim ...]\n", argv[0]), 2;
  CHECK(qfold_model_load_file(argv[1], &model));
  CHECK(qfold_session_create(model, NULL, &session));
  for (size_t i = 0; i < qfold_model_num_inputs(model); ++i) {
    int64_t dims[8], n = 1;
    CHECK(qfold_model_input_info(model, i, &t));
    print_info("input", &t, "\n");
    for (size_t d = 0; d < t.rank; ++d)
      n *= dims[d] = (i == 0 && 3 + (int)d < argc) ? atoll(argv[3 + d])
                     : t.dims[d] < 0               ? 1
                                                   : t.dims[d];
    float* x = malloc((size_t)n * sizeof(float) + 1);
    for (int64_t k = 0; k < n; ++k) x[k] = 0.5f;
    FILE* f = (i == 0 && argc > 2 && argv[2][0] != '-') ? fopen(argv[2], "rb") : NULL;
    if (f && fread(x, sizeof(float), (size_t)n, f) != (size_t)n) fprintf(stderr, "short read\n");
    if (f) fclose(f);
    CHECK(qfold_session_set_input(session, t.name, QFOLD_DTYPE_FLOAT32, dims, t.rank, x,
                                  (size_t)n * sizeof(float)));
    free(x);
  }
  CHECK(qfold_session_run(session));
  for (size_t i = 0; i < qfold_model_num_outputs(model); ++i) {
    const void* data;
    int64_t n = 1;
    CHECK(qfold_model_output_info(model, i, &t));
    CHECK(qfold_session_get_output(session, t.name, &t.dtype, &t.dims, &t.rank, &data));
    print_info("output", &t, ":");
    for (size_t d = 0; d < t.rank; ++d) n *= t.dims[d];
    for (int64_t k = 0; k < n && k < 5 && t.dtype == QFOLD_DTYPE_FLOAT32; ++k)
      printf(" %.6g", ((const float*)data)[k]);
    printf("\n");
  }
  printf("arena %zu bytes\n", qfold_session_arena_bytes(session));
  qfold_model_free(model); /* the session keeps the model alive */
  qfold_session_free(session);
  return 0;
}
