// libFuzzer target: arbitrary bytes as .npy and as .npz (the CLI's tensor files).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cli/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qfold::io::NpyArray array;
  (void)qfold::io::ParseNpy(data, size, "fuzz.npy", &array);
  std::vector<qfold::io::NpzEntry> entries;
  qfold::Status st = qfold::io::ParseNpz(data, size, "fuzz.npz", &entries);
  // What parses must encode again (the CLI writes outputs with the same code).
  if (st.ok()) {
    std::vector<uint8_t> out;
    (void)qfold::io::EncodeNpz(entries, "fuzz.npz", &out);
  }
  (void)qfold::io::LooksLikeZip(data, size);
  return 0;
}
