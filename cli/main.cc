#include <cstdio>
#include <cstring>

#include "cli/commands.h"
#include "core/file_io.h"

namespace {
const char* kUsage =
    "usage: qfold <command> [options]\n"
    "\n"
    "commands:\n"
    "  convert   convert an ONNX model to .qfm\n"
    "  run       run a .qfm model on .npy/.npz inputs\n"
    "  inspect   show a model's inputs, outputs, operators and sizes\n"
    "  check     find what would break on device in an ONNX model, by name\n"
    "  verify    compare a .qfm against its ONNX model run without QDQ folding\n"
    "  bench     time a .qfm model: latency, throughput, memory\n"
    "\n"
    "'qfold <command> --help' describes a command's options.\n";
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::puts("qfold " QFOLD_VERSION_STRING);
    return 0;
  }
  // Outputs are written to temp files and renamed: a signal must not leave one.
  qfold::fileio::InstallTempFileCleanup();
  qfold::cli::Args args(argv + 2, argv + argc);
  std::string cmd = argv[1];
  if (cmd == "convert") return qfold::cli::Convert(args);
  if (cmd == "run") return qfold::cli::Run(args);
  if (cmd == "inspect") return qfold::cli::Inspect(args);
  if (cmd == "check") return qfold::cli::Check(args);
  if (cmd == "verify") return qfold::cli::Verify(args);
  if (cmd == "bench") return qfold::cli::Bench(args);
  std::fprintf(stderr, "qfold: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
