// libFuzzer target: arbitrary bytes as an .onnx file, through the converter's
// reader, normalization, verification, inference and constant folding
// (conv::LoadAndOptimize), then serialization. Nothing may crash or hang.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "converter/converter.h"
#include "converter/qfm_writer.h"
#include "fuzz_onnx_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qfold_fuzz::WriteOnnxFile(data, size);
  qfold::conv::Graph g;
  qfold::Status st = qfold::conv::LoadAndOptimize(path, qfold::conv::ConvertOptions(), &g);
  if (st.ok()) {
    std::vector<uint8_t> bytes;
    (void)qfold::conv::SerializeQfm(g, &bytes);
  }
  return 0;
}
