// libFuzzer target: arbitrary bytes as an .onnx file, through the converter's
// reader, normalization, verification, inference and constant folding
// (conv::LoadAndOptimize), then serialization. Nothing may crash or hang.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "converter/converter.h"
#include "converter/qfm_writer.h"

namespace {
// One folder per process, created on first use and removed at exit: the reader
// resolves external data relative to it, and nothing else lives there. Plain
// char arrays, so the exit handler never sees a destroyed string.
char g_dir[] = "/tmp/qfold_fuzz_onnx_XXXXXX";
char g_file[sizeof(g_dir) + 16];

const char* ModelPath() {
  static const bool made = [] {
    if (!mkdtemp(g_dir)) abort();
    std::snprintf(g_file, sizeof(g_file), "%s/model.onnx", g_dir);
    std::atexit([] {
      std::remove(g_file);
      std::remove(g_dir);
    });
    return true;
  }();
  (void)made;
  return g_file;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ModelPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) abort();
  if (size && std::fwrite(data, 1, size, f) != size) abort();
  std::fclose(f);
  qfold::conv::Graph g;
  qfold::Status st = qfold::conv::LoadAndOptimize(path, qfold::conv::ConvertOptions(), &g);
  if (st.ok()) {
    std::vector<uint8_t> bytes;
    (void)qfold::conv::SerializeQfm(g, &bytes);
  }
  return 0;
}
