// File access shared by the runtime, the converter and the CLI, so every
// reader and writer refuses the same hostile paths the same way:
//  - inputs must be regular files: a FIFO, device or directory is refused
//    without blocking (opened O_NONBLOCK, checked with fstat before reading);
//  - outputs are written whole or not at all: a temp file in the target's own
//    folder, fsynced, then renamed over the target; the temp file is removed on
//    error and, once InstallTempFileCleanup() ran, on SIGINT/SIGTERM/SIGHUP;
//  - an output that is a symlink, a non-regular file, read-only, or the same
//    file as one of the inputs is refused before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qfold/status.h"

namespace qfold {
namespace fileio {

// Opens `path` for reading; *fd is a blocking descriptor of a regular file and
// *size its length. Not a regular file (FIFO, device, directory, socket): a
// kIoError naming the path and what it is.
Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size);

// Reads a whole regular file; more than max_bytes is refused (kInvalidModel)
// before reading. `out` is std::string or std::vector<uint8_t>.
Status ReadRegularFile(const std::string& path, size_t max_bytes, std::string* out);
Status ReadRegularFile(const std::string& path, size_t max_bytes, std::vector<uint8_t>* out);

// Refuses (kInvalidArgument, naming the path) an output path that is a
// symlink, exists but is not a regular file, exists read-only, or is the same
// file as any of `inputs` (compared by device and inode, so other spellings
// of the same path are caught). A missing target is fine.
Status CheckOutputPath(const std::string& path, const std::vector<std::string>& inputs = {});

// CheckOutputPath(path, inputs), then writes `bytes` to a temp file beside
// `path`, fsyncs it and renames it over `path`. On any failure `path` is left
// as it was and the temp file is removed.
Status WriteFileAtomic(const std::string& path, const void* bytes, size_t size,
                       const std::vector<std::string>& inputs = {});

// Installs SIGINT, SIGTERM and SIGHUP handlers that remove the temp files of
// writes in progress and then die of the signal as before. For programs (the
// CLI); a library does not install signal handlers behind its host's back.
void InstallTempFileCleanup();

}  // namespace fileio
}  // namespace qfold
