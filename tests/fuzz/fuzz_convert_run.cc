// libFuzzer target: ONNX bytes converted as `qfold convert` does, the .qfm
// loaded, then run with random input shapes (within the declared dims, small)
// and random values (NaN, Inf and integer extremes included) at 1 and 2
// threads. Conversion may refuse anything; what converts must load, and no
// step may crash, trip ASan/UBSan, hang or allocate without bound. Built with
// the ONNX structure-aware mutator (onnx_mutator.cc), so mutations stay models.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "converter/converter.h"
#include "converter/qfm_writer.h"
#include "fuzz_inputs.h"
#include "fuzz_onnx_file.h"
#include "qfold/runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfold_fuzz::WriteOnnxFile(data, size);
  qfold::conv::Graph g;
  if (!qfold::conv::LoadAndOptimize(path, qfold::conv::ConvertOptions(), &g).ok()) return 0;
  std::vector<uint8_t> bytes;
  if (!qfold::conv::SerializeQfm(g, &bytes).ok()) return 0;
  std::shared_ptr<qfold::Model> model;
  // The converter's own output must load: a refusal here is a converter bug.
  qfold::Status st = qfold::Model::LoadMemory(bytes.data(), bytes.size(), &model);
  if (!st.ok()) {
    std::fprintf(stderr, "converted model does not load: %s\n", st.message().c_str());
    abort();
  }
  // The input bytes seed every random choice, so a saved input reproduces.
  std::mt19937_64 rng(qfold_fuzz::HashBytes(data, size));
  std::vector<qfold_fuzz::Feed> feeds;
  if (!qfold_fuzz::MakeFeeds(model->inputs(), rng, &feeds)) return 0;
  qfold_fuzz::RunOnce(model, feeds, 1);
  // Every other input's 2-thread run in bf16 mode: on a CPU with AVX-512 BF16 its
  // plan stores activations as bfloat16 (a no-op elsewhere).
  qfold_fuzz::RunOnce(model, feeds, 2,
                      rng() % 2 ? qfold::SessionOptions::Precision::kBfloat16
                                : qfold::SessionOptions::Precision::kFloat32);
  return 0;
}
