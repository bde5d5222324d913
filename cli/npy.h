// Reading and writing NumPy .npy arrays and .npz archives, as the CLI's tensor file format.
//
// Supported: .npy format versions 1.0, 2.0 and 3.0, little-endian C-order arrays of
// float16/32/64, (u)int8/16/32/64 and bool; .npz archives with stored or deflated entries,
// including the zip64 fields numpy writes. Every failure (truncated or malformed bytes, unknown
// dtype, size mismatch...) is returned as a Status naming the file, the archive entry and the
// problem; malformed input never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/status.h"

namespace qfold::io {

// A dense array: C order, little-endian element bytes, data.size() == numel * dtype_size.
struct NpyArray {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<uint8_t> data;
};

// One named array of an .npz archive; `name` has the ".npy" suffix removed, as numpy does.
struct NpzEntry {
  std::string name;
  NpyArray array;
};

// Reads the whole file into `bytes`; only regular files (a FIFO or device is
// refused without blocking). kIoError names the path and the OS error.
Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* bytes);
// Writes `bytes` to `path` whole or not at all (temp file, fsync, rename:
// core/file_io.h); a target that is one of `inputs`, a symlink, not a regular
// file or read-only is refused (kInvalidArgument).
Status WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes,
                      const std::vector<std::string>& inputs = {});

// .npy ---------------------------------------------------------------------------------------
// `what` names the source in error messages (a path, or "archive.npz: entry.npy").
Status ParseNpy(const uint8_t* bytes, size_t size, const std::string& what, NpyArray* out);
Status ReadNpy(const std::string& path, NpyArray* out);
// Format 1.0 (2.0 if the header needs it). kInvalidArgument if `array` is inconsistent;
// kUnsupported for dtypes numpy has no type for (bfloat16, int4).
Status EncodeNpy(const NpyArray& array, const std::string& what, std::vector<uint8_t>* out);
Status WriteNpy(const std::string& path, const NpyArray& array,
                const std::vector<std::string>& inputs = {});

// .npz ---------------------------------------------------------------------------------------
// Entries in archive order. Entry names must end in ".npy" and be unique.
Status ParseNpz(const uint8_t* bytes, size_t size, const std::string& what,
                std::vector<NpzEntry>* out);
Status ReadNpz(const std::string& path, std::vector<NpzEntry>* out);
// Uncompressed (stored) archive, as np.savez writes; zip64 fields are added where sizes or
// offsets need them. Names must be unique and non-empty; ".npy" is appended to each.
Status EncodeNpz(const std::vector<NpzEntry>& entries, const std::string& what,
                 std::vector<uint8_t>* out);
Status WriteNpz(const std::string& path, const std::vector<NpzEntry>& entries,
                const std::vector<std::string>& inputs = {});

// True if `bytes` start like a zip archive (an .npz) rather than an .npy.
bool LooksLikeZip(const uint8_t* bytes, size_t size);

namespace internal {
// EncodeNpz with a configurable zip64 threshold, so tests can exercise the zip64 records
// without writing 4 GiB. Sizes/offsets >= threshold (or entry counts >= 0xFFFF) use zip64.
Status EncodeNpzWithZip64Threshold(const std::vector<NpzEntry>& entries, const std::string& what,
                                   uint64_t zip64_threshold, std::vector<uint8_t>* out);
}  // namespace internal

}  // namespace qfold::io
