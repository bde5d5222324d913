// libFuzzer target: arbitrary bytes as a .qfm. Loading must fail cleanly or
// succeed; a loaded model must plan and run on zero inputs of every small,
// fully known input shape without crashing or allocating without bound.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "qfold/runtime.h"

namespace {
// Inputs larger than this are not fed: the point is the loader and planner,
// and a big arena would only slow the fuzzer down.
constexpr int64_t kMaxFedElements = int64_t(1) << 16;

bool SmallKnownShape(const qfold::Shape& shape, int64_t* numel) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxFedElements) return false;
    n *= d;
    if (n > kMaxFedElements) return false;
  }
  *numel = n;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<qfold::Model> model;
  if (!qfold::Model::LoadMemory(data, size, &model).ok()) return 0;
  std::vector<int64_t> numels;
  for (const qfold::TensorInfo& in : model->inputs()) {
    int64_t n = 0;
    if (!SmallKnownShape(in.shape, &n)) return 0;
    numels.push_back(n);
  }
  std::unique_ptr<qfold::Session> session;
  qfold::SessionOptions opts;
  opts.max_memory_bytes = size_t(512) << 20;  // below libFuzzer's -malloc_limit_mb
  opts.max_loop_iterations = 1000;            // a mutated trip count runs for hours
  if (!qfold::Session::Create(model, opts, &session).ok()) return 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const qfold::TensorInfo& in = model->inputs()[i];
    size_t bytes = qfold::dtype_storage_bytes(in.dtype, numels[i]);
    std::vector<uint8_t> zeros(bytes, 0);
    if (!session->SetInput(in.name, in.dtype, in.shape, zeros.data(), bytes).ok()) return 0;
  }
  if (!session->Run().ok()) return 0;
  for (const qfold::TensorInfo& out : model->outputs()) {
    qfold::DType dtype;
    qfold::Shape shape;
    const void* p = nullptr;
    (void)session->GetOutput(out.name, &dtype, &shape, &p);
  }
  return 0;
}
