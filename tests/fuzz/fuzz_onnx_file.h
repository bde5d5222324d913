// Writes fuzzer bytes to model.onnx in a private folder, for targets that go
// through the converter's file reader. One folder per process, created on first
// use and removed at exit: the reader resolves external data relative to it,
// and nothing else lives there. Plain char arrays, so the exit handler never
// sees a destroyed string.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace qfold_fuzz {

inline char* OnnxDir() {
  static char dir[] = "/tmp/qfold_fuzz_onnx_XXXXXX";
  return dir;
}

inline char* OnnxFile() {
  static char file[64];
  return file;
}

inline std::string WriteOnnxFile(const uint8_t* data, size_t size) {
  static const bool made = [] {
    if (!mkdtemp(OnnxDir())) abort();
    std::snprintf(OnnxFile(), 64, "%s/model.onnx", OnnxDir());
    std::atexit([] {
      std::remove(OnnxFile());
      std::remove(OnnxDir());
    });
    return true;
  }();
  (void)made;
  FILE* f = std::fopen(OnnxFile(), "wb");
  if (!f) abort();
  if (size && std::fwrite(data, 1, size, f) != size) abort();
  std::fclose(f);
  return OnnxFile();
}

}  // namespace qfold_fuzz
