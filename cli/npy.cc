#include "cli/npy.h"

#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <utility>

#include "core/file_io.h"

// The element bytes are handed to the runtime as they are in the file (little-endian).
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "qfold npy I/O assumes a little-endian host"
#endif

namespace qfold::io {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;
// numpy itself refuses headers over 10000 bytes unless told otherwise; allow more, but bound it.
constexpr uint64_t kMaxNpyHeader = 1 << 20;

constexpr uint32_t kZipLocalSig = 0x04034b50;
constexpr uint32_t kZipCentralSig = 0x02014b50;
constexpr uint32_t kZipEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kZipLocalSize = 30;
constexpr size_t kZipCentralSize = 46;
constexpr size_t kZipEndSize = 22;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint32_t kU32Max = 0xFFFFFFFFu;
// Deflate cannot expand data by more than ~1032x; a larger declared size is corrupt.
constexpr uint64_t kMaxDeflateRatio = 1032;

Status Invalid(const std::string& what, const std::string& msg) {
  return Status(StatusCode::kInvalidArgument, what + ": " + msg);
}

uint16_t Rd16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
uint32_t Rd32(const uint8_t* p) {
  return uint32_t(Rd16(p)) | (uint32_t(Rd16(p + 2)) << 16);
}
uint64_t Rd64(const uint8_t* p) {
  return uint64_t(Rd32(p)) | (uint64_t(Rd32(p + 4)) << 32);
}

void Put16(std::vector<uint8_t>* out, uint16_t v) {
  out->push_back(uint8_t(v));
  out->push_back(uint8_t(v >> 8));
}
void Put32(std::vector<uint8_t>* out, uint32_t v) {
  Put16(out, uint16_t(v));
  Put16(out, uint16_t(v >> 16));
}
void Put64(std::vector<uint8_t>* out, uint64_t v) {
  Put32(out, uint32_t(v));
  Put32(out, uint32_t(v >> 32));
}
void PutBytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out->insert(out->end(), b, b + n);
}

// dtype <-> numpy type string (without the byte-order character).
struct DTypeCode {
  DType dtype;
  const char* code;
};
constexpr DTypeCode kDTypeCodes[] = {
    {DType::kFloat16, "f2"}, {DType::kFloat32, "f4"}, {DType::kFloat64, "f8"},
    {DType::kInt8, "i1"},    {DType::kUInt8, "u1"},   {DType::kInt16, "i2"},
    {DType::kUInt16, "u2"},  {DType::kInt32, "i4"},   {DType::kUInt32, "u4"},
    {DType::kInt64, "i8"},   {DType::kUInt64, "u8"},  {DType::kBool, "b1"},
};

Status DTypeFromDescr(const std::string& descr, const std::string& what, DType* dtype) {
  const std::string unsupported =
      "unsupported dtype '" + descr + "' (supported: float16/32/64, (u)int8/16/32/64, bool)";
  if (descr.size() < 2) return Invalid(what, unsupported);
  char order = descr[0];
  std::string code = descr.substr(1);
  for (const DTypeCode& c : kDTypeCodes) {
    if (code != c.code) continue;
    bool one_byte = dtype_size(c.dtype) == 1;
    if (order == '>' && !one_byte) {
      return Invalid(what, "big-endian dtype '" + descr +
                               "' is not supported; save the array "
                               "with arr.astype(arr.dtype.newbyteorder('<'))");
    }
    if (order == '<' || order == '=' || (one_byte && (order == '|' || order == '>'))) {
      *dtype = c.dtype;
      return Status::Ok();
    }
    return Invalid(what, unsupported);
  }
  return Invalid(what, unsupported);
}

// Parses the header dict, a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Status Parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("header is not a dict");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      QF_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Eat(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr" && !have_descr) {
        if (Peek() == '[') {
          return Invalid(what_, "structured dtypes are not supported (only plain numeric arrays)");
        }
        QF_RETURN_IF_ERROR(ParseString(descr));
        have_descr = true;
      } else if (key == "fortran_order" && !have_fortran) {
        QF_RETURN_IF_ERROR(ParseBool(fortran_order));
        have_fortran = true;
      } else if (key == "shape" && !have_shape) {
        QF_RETURN_IF_ERROR(ParseTuple(shape));
        have_shape = true;
      } else {
        return Error("unexpected or repeated key '" + key + "'");
      }
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the dict");
    if (!have_descr || !have_fortran || !have_shape) {
      return Error("header must have the keys 'descr', 'fortran_order' and 'shape'");
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& msg) const {
    return Invalid(what_,
                   "malformed .npy header (" + msg + " at offset " + std::to_string(pos_) + ")");
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status ParseString(std::string* out) {
    char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) return Error("unterminated string");
    *out = s_.substr(pos_, end - pos_);
    if (out->find('\\') != std::string::npos) return Error("escapes in strings");
    pos_ = end + 1;
    return Status::Ok();
  }
  Status ParseBool(bool* out) {
    if (s_.compare(pos_, 4, "True") == 0) {
      *out = true;
      pos_ += 4;
    } else if (s_.compare(pos_, 5, "False") == 0) {
      *out = false;
      pos_ += 5;
    } else {
      return Error("expected True or False");
    }
    return Status::Ok();
  }
  Status ParseTuple(std::vector<int64_t>* out) {
    out->clear();
    if (!Eat('(')) return Error("expected a shape tuple");
    while (true) {
      SkipSpace();
      if (Eat(')')) return Status::Ok();
      if (Peek() < '0' || Peek() > '9') return Error("expected a non-negative dimension");
      int64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        int digit = Peek() - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("dimension does not fit in int64");
        }
        v = v * 10 + digit;
        ++pos_;
      }
      Eat('L');  // Python 2 long suffix, found in old files.
      out->push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat(')')) return Status::Ok();
      return Error("expected ',' or ')' in shape");
    }
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Byte size of an array; false if a dim is negative or the size overflows.
bool ByteSize(const std::vector<int64_t>& shape, DType dtype, uint64_t* bytes) {
  uint64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) zero = true;
  }
  if (zero) {
    *bytes = 0;
    return true;
  }
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max());
  for (int64_t d : shape) {
    if (n > limit / uint64_t(d)) return false;
    n *= uint64_t(d);
  }
  uint64_t item = dtype_size(dtype);
  if (item == 0 || n > limit / item) return false;
  *bytes = n * item;
  return *bytes <= std::numeric_limits<size_t>::max();
}

uint32_t Crc32(const uint8_t* p, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    uInt chunk = uInt(n > (1u << 30) ? (1u << 30) : n);
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return uint32_t(crc);
}

// Inflates raw deflate data; the result must be exactly `expected` bytes.
Status Inflate(const uint8_t* in, uint64_t in_size, uint64_t expected, const std::string& what,
               std::vector<uint8_t>* out) {
  // One spare byte detects data that inflates to more than the declared size.
  out->assign(size_t(expected) + 1, 0);
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
    return Status(StatusCode::kInternal, what + ": zlib inflateInit2 failed");
  }
  constexpr uint64_t kChunk = 1u << 30;  // avail_in/avail_out are 32-bit
  uint64_t in_left = in_size, out_left = out->size();
  zs.next_in = const_cast<Bytef*>(in);
  zs.next_out = out->data();
  Status result;
  while (true) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = uInt(in_left < kChunk ? in_left : kChunk);
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left > 0) {
      zs.avail_out = uInt(out_left < kChunk ? out_left : kChunk);
      out_left -= zs.avail_out;
    }
    int r = inflate(&zs, Z_NO_FLUSH);
    if (r == Z_STREAM_END) break;
    if (r == Z_OK) continue;
    if (r == Z_BUF_ERROR && zs.avail_out == 0 && out_left == 0) {
      result = Invalid(what, "deflated data is larger than the declared size of " +
                                 std::to_string(expected) + " bytes");
    } else if (r == Z_BUF_ERROR) {
      result = Invalid(what, "deflated data is truncated");
    } else {
      result = Invalid(what, std::string("corrupt deflated data (") +
                                 (zs.msg ? zs.msg : "zlib error " + std::to_string(r)) + ")");
    }
    break;
  }
  uint64_t produced = uint64_t(out->size()) - out_left - zs.avail_out;
  inflateEnd(&zs);
  QF_RETURN_IF_ERROR(result);
  if (produced != expected) {
    return Invalid(what, "deflated data inflates to " + std::to_string(produced) +
                             " bytes, the archive declares " + std::to_string(expected));
  }
  out->resize(size_t(expected));
  return Status::Ok();
}

// Central directory fields of one archive member.
struct ZipMember {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

// Fills in the zip64 values of fields that hold 0xFFFFFFFF, from the zip64 extra field.
Status ApplyZip64Extra(const uint8_t* extra, size_t len, const std::string& what, ZipMember* m) {
  bool need = m->uncompressed == kU32Max || m->compressed == kU32Max || m->local_offset == kU32Max;
  size_t pos = 0;
  while (pos + 4 <= len) {
    uint16_t id = Rd16(extra + pos), field_len = Rd16(extra + pos + 2);
    pos += 4;
    if (field_len > len - pos) return Invalid(what, "extra field runs past its record");
    if (id == kZip64ExtraId) {
      const uint8_t* f = extra + pos;
      size_t used = 0;
      for (uint64_t* v : {&m->uncompressed, &m->compressed, &m->local_offset}) {
        if (*v != kU32Max) continue;
        if (used + 8 > field_len) return Invalid(what, "zip64 extra field is too short");
        *v = Rd64(f + used);
        used += 8;
      }
      return Status::Ok();
    }
    pos += field_len;
  }
  if (need) return Invalid(what, "sizes need a zip64 extra field, but it is missing");
  return Status::Ok();
}

// Finds the central directory: returns its offset, size and entry count.
Status FindCentralDirectory(const uint8_t* b, size_t size, const std::string& what,
                            uint64_t* cd_offset, uint64_t* cd_size, uint64_t* count) {
  if (size < kZipEndSize) {
    return Invalid(what, "truncated or not a zip archive (" + std::to_string(size) + " bytes)");
  }
  // The end record is followed only by its comment (at most 65535 bytes); search backwards.
  size_t lowest = size - kZipEndSize > 0xFFFF ? size - kZipEndSize - 0xFFFF : 0;
  size_t end = size;  // sentinel: not found
  for (size_t pos = size - kZipEndSize + 1; pos-- > lowest;) {
    if (Rd32(b + pos) == kZipEndSig && pos + kZipEndSize + Rd16(b + pos + 20) <= size) {
      end = pos;
      break;
    }
  }
  if (end == size) {
    return Invalid(what, "truncated or not a zip archive (no end-of-central-directory record)");
  }
  const uint8_t* e = b + end;
  uint16_t disk = Rd16(e + 4), cd_disk = Rd16(e + 6);
  uint16_t n_disk = Rd16(e + 8), n_total = Rd16(e + 10);
  *count = n_total;
  *cd_size = Rd32(e + 12);
  *cd_offset = Rd32(e + 16);
  bool zip64 = n_total == 0xFFFF || *cd_size == kU32Max || *cd_offset == kU32Max;
  if (zip64) {
    if (end < kZip64LocatorSize || Rd32(b + end - kZip64LocatorSize) != kZip64LocatorSig) {
      return Invalid(what, "zip64 archive without a zip64 end-of-central-directory locator");
    }
    uint64_t rec = Rd64(b + end - kZip64LocatorSize + 8);
    if (rec > size || size - rec < kZip64EndSize || Rd32(b + rec) != kZip64EndSig) {
      return Invalid(what, "bad zip64 end-of-central-directory record offset");
    }
    const uint8_t* z = b + rec;
    if (Rd32(z + 16) != 0 || Rd32(z + 20) != 0 || Rd64(z + 24) != Rd64(z + 32)) {
      return Invalid(what, "multi-disk zip archives are not supported");
    }
    *count = Rd64(z + 32);
    *cd_size = Rd64(z + 40);
    *cd_offset = Rd64(z + 48);
  } else if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
    return Invalid(what, "multi-disk zip archives are not supported");
  }
  if (*cd_offset > size || *cd_size > size - *cd_offset) {
    return Invalid(what, "truncated zip archive (central directory at " +
                             std::to_string(*cd_offset) + "+" + std::to_string(*cd_size) +
                             " is past the end of the " + std::to_string(size) + "-byte file)");
  }
  if (*count > *cd_size / kZipCentralSize) {
    return Invalid(what,
                   "central directory is too small for " + std::to_string(*count) + " entries");
  }
  return Status::Ok();
}

// Extracts one member's uncompressed bytes.
Status ExtractMember(const uint8_t* b, size_t size, const ZipMember& m, const std::string& what,
                     std::vector<uint8_t>* data) {
  if (m.flags & 1) return Invalid(what, "encrypted entries are not supported");
  if (m.method != 0 && m.method != 8) {
    return Invalid(what, "compression method " + std::to_string(m.method) +
                             " is not supported (only stored and deflated)");
  }
  if (m.local_offset > size || size - m.local_offset < kZipLocalSize ||
      Rd32(b + m.local_offset) != kZipLocalSig) {
    return Invalid(what, "bad local header offset " + std::to_string(m.local_offset));
  }
  const uint8_t* local = b + m.local_offset;
  uint64_t data_offset = m.local_offset + kZipLocalSize + Rd16(local + 26) + Rd16(local + 28);
  if (data_offset > size || m.compressed > size - data_offset) {
    return Invalid(what, "truncated entry data (needs " + std::to_string(m.compressed) +
                             " bytes at offset " + std::to_string(data_offset) + ")");
  }
  const uint8_t* src = b + data_offset;
  if (m.method == 0) {
    if (m.compressed != m.uncompressed) {
      return Invalid(what, "stored entry has different compressed and uncompressed sizes");
    }
    data->assign(src, src + m.compressed);
  } else {
    if (m.uncompressed > m.compressed * kMaxDeflateRatio + 1024) {
      return Invalid(what, "declared uncompressed size " + std::to_string(m.uncompressed) +
                               " is impossible for " + std::to_string(m.compressed) +
                               " deflated bytes");
    }
    QF_RETURN_IF_ERROR(Inflate(src, m.compressed, m.uncompressed, what, data));
  }
  if (Crc32(data->data(), data->size()) != m.crc) return Invalid(what, "CRC-32 mismatch");
  return Status::Ok();
}

Status ParseNpzImpl(const uint8_t* b, size_t size, const std::string& what,
                    std::vector<NpzEntry>* out) {
  if (size >= kNpyMagicLen && std::memcmp(b, kNpyMagic, kNpyMagicLen) == 0) {
    return Invalid(what, "this is an .npy file, not an .npz archive");
  }
  uint64_t cd_offset = 0, cd_size = 0, count = 0;
  QF_RETURN_IF_ERROR(FindCentralDirectory(b, size, what, &cd_offset, &cd_size, &count));
  std::set<std::string> names;
  uint64_t pos = cd_offset;
  const uint64_t cd_end = cd_offset + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string where = what + ": central directory entry " + std::to_string(i);
    if (cd_end - pos < kZipCentralSize || Rd32(b + pos) != kZipCentralSig) {
      return Invalid(where, "bad central directory record");
    }
    const uint8_t* c = b + pos;
    ZipMember m;
    m.flags = Rd16(c + 8);
    m.method = Rd16(c + 10);
    m.crc = Rd32(c + 16);
    m.compressed = Rd32(c + 20);
    m.uncompressed = Rd32(c + 24);
    uint64_t name_len = Rd16(c + 28), extra_len = Rd16(c + 30), comment_len = Rd16(c + 32);
    m.local_offset = Rd32(c + 42);
    uint64_t record = kZipCentralSize + name_len + extra_len + comment_len;
    if (cd_end - pos < record) return Invalid(where, "central directory record is truncated");
    m.name.assign(reinterpret_cast<const char*>(c + kZipCentralSize), size_t(name_len));
    const std::string entry = what + ": entry '" + m.name + "'";
    QF_RETURN_IF_ERROR(
        ApplyZip64Extra(c + kZipCentralSize + name_len, size_t(extra_len), entry, &m));
    pos += record;
    if (!m.name.empty() && m.name.back() == '/' && m.uncompressed == 0) continue;  // directory
    const std::string suffix = ".npy";
    if (m.name.size() <= suffix.size() ||
        m.name.compare(m.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return Invalid(entry, "not a .npy array (entry names must end in .npy)");
    }
    std::string name = m.name.substr(0, m.name.size() - suffix.size());
    if (!names.insert(name).second) return Invalid(entry, "duplicate entry name");
    std::vector<uint8_t> data;
    QF_RETURN_IF_ERROR(ExtractMember(b, size, m, entry, &data));
    NpzEntry e;
    e.name = std::move(name);
    QF_RETURN_IF_ERROR(ParseNpy(data.data(), data.size(), entry, &e.array));
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

Status OutOfMemory(const std::string& what) {
  return Status(StatusCode::kIoError, what + ": out of memory");
}

}  // namespace

// Files ----------------------------------------------------------------------------------------

Status ReadFileBytes(const std::string& path, std::vector<uint8_t>* bytes) {
  return fileio::ReadRegularFile(path, std::numeric_limits<size_t>::max(), bytes);
}

Status WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes,
                      const std::vector<std::string>& inputs) {
  return fileio::WriteFileAtomic(path, bytes.data(), bytes.size(), inputs);
}

// .npy -----------------------------------------------------------------------------------------

Status ParseNpy(const uint8_t* b, size_t size, const std::string& what, NpyArray* out) {
  *out = NpyArray();
  if (size == 0) return Invalid(what, "empty file (not an .npy array)");
  size_t magic_checked = size < kNpyMagicLen ? size : kNpyMagicLen;
  if (std::memcmp(b, kNpyMagic, magic_checked) != 0) {
    if (size >= 4 && Rd32(b) == kZipLocalSig) {
      return Invalid(what, "this is an .npz (zip) archive, not an .npy file");
    }
    return Invalid(what, "not an .npy file (bad magic; expected \\x93NUMPY)");
  }
  if (size < 10) return Invalid(what, "truncated .npy file (" + std::to_string(size) + " bytes)");
  int major = b[6], minor = b[7];
  uint64_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = Rd16(b + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      return Invalid(what, "truncated .npy file (" + std::to_string(size) + " bytes)");
    }
    header_len = Rd32(b + 8);
    header_start = 12;
  } else {
    return Invalid(what, "unsupported .npy format version " + std::to_string(major) + "." +
                             std::to_string(minor));
  }
  if (header_len > kMaxNpyHeader) {
    return Invalid(what, "header too long (" + std::to_string(header_len) + " bytes)");
  }
  if (header_len > size - header_start) {
    return Invalid(what, "truncated .npy header (" + std::to_string(header_len) +
                             " bytes declared, " + std::to_string(size - header_start) +
                             " present)");
  }
  std::string header(reinterpret_cast<const char*>(b + header_start), size_t(header_len));
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  QF_RETURN_IF_ERROR(HeaderParser(header, what).Parse(&descr, &fortran_order, &shape));
  DType dtype = DType::kUndefined;
  QF_RETURN_IF_ERROR(DTypeFromDescr(descr, what, &dtype));
  uint64_t bytes = 0;
  if (!ByteSize(shape, dtype, &bytes)) {
    return Invalid(what, "shape " + ShapeString(shape) + " is too large");
  }
  if (fortran_order && shape.size() > 1) {
    // 0-D and 1-D arrays are identical in both orders.
    return Invalid(what, "Fortran-order arrays are not supported; save np.ascontiguousarray(a)");
  }
  uint64_t data_start = header_start + header_len;
  uint64_t present = size - data_start;
  if (present != bytes) {
    return Invalid(what, std::string(present < bytes ? "truncated data" : "trailing bytes") +
                             ": shape " + ShapeString(shape) + " of " + dtype_name(dtype) +
                             " needs " + std::to_string(bytes) + " bytes, the file has " +
                             std::to_string(present));
  }
  try {
    out->data.assign(b + data_start, b + size);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(what);
  }
  out->dtype = dtype;
  out->shape = std::move(shape);
  return Status::Ok();
}

Status ReadNpy(const std::string& path, NpyArray* out) {
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  return ParseNpy(bytes.data(), bytes.size(), path, out);
}

Status EncodeNpy(const NpyArray& array, const std::string& what, std::vector<uint8_t>* out) {
  out->clear();
  const char* code = nullptr;
  for (const DTypeCode& c : kDTypeCodes) {
    if (c.dtype == array.dtype) code = c.code;
  }
  if (!code) {
    return Status(StatusCode::kUnsupported, what + ": cannot write dtype " +
                                                std::string(dtype_name(array.dtype)) +
                                                " to .npy (numpy has no such type)");
  }
  uint64_t bytes = 0;
  if (!ByteSize(array.shape, array.dtype, &bytes)) {
    return Invalid(what, "invalid shape " + ShapeString(array.shape));
  }
  if (bytes != array.data.size()) {
    return Invalid(what, "shape " + ShapeString(array.shape) + " of " + dtype_name(array.dtype) +
                             " needs " + std::to_string(bytes) + " bytes, the array holds " +
                             std::to_string(array.data.size()));
  }
  char order = dtype_size(array.dtype) == 1 ? '|' : '<';
  std::string header = std::string("{'descr': '") + order + code +
                       "', 'fortran_order': False, 'shape': " + ShapeString(array.shape) + ", }";
  // numpy pads so the data starts on a 64-byte boundary, and ends the header with '\n'.
  size_t preamble = 10;
  if (header.size() + 1 + preamble > 0xFFFF) preamble = 12;  // format 2.0: 4-byte length
  size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header.push_back('\n');
  try {
    out->reserve(total + array.data.size());
    PutBytes(out, kNpyMagic, kNpyMagicLen);
    out->push_back(preamble == 10 ? 1 : 2);
    out->push_back(0);
    if (preamble == 10) {
      Put16(out, uint16_t(header.size()));
    } else {
      Put32(out, uint32_t(header.size()));
    }
    PutBytes(out, header.data(), header.size());
    PutBytes(out, array.data.data(), array.data.size());
  } catch (const std::bad_alloc&) {
    return OutOfMemory(what);
  }
  return Status::Ok();
}

Status WriteNpy(const std::string& path, const NpyArray& array,
                const std::vector<std::string>& inputs) {
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(EncodeNpy(array, path, &bytes));
  return WriteFileBytes(path, bytes, inputs);
}

// .npz -----------------------------------------------------------------------------------------

bool LooksLikeZip(const uint8_t* bytes, size_t size) {
  return size >= 4 && (Rd32(bytes) == kZipLocalSig || Rd32(bytes) == kZipEndSig);
}

Status ParseNpz(const uint8_t* bytes, size_t size, const std::string& what,
                std::vector<NpzEntry>* out) {
  out->clear();
  if (size == 0) return Invalid(what, "empty file (not an .npz archive)");
  try {
    // Parsed aside so a failure leaves `out` empty rather than half filled.
    std::vector<NpzEntry> entries;
    QF_RETURN_IF_ERROR(ParseNpzImpl(bytes, size, what, &entries));
    *out = std::move(entries);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    out->clear();
    return OutOfMemory(what);
  }
}

Status ReadNpz(const std::string& path, std::vector<NpzEntry>* out) {
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  return ParseNpz(bytes.data(), bytes.size(), path, out);
}

namespace internal {

Status EncodeNpzWithZip64Threshold(const std::vector<NpzEntry>& entries, const std::string& what,
                                   uint64_t zip64_threshold, std::vector<uint8_t>* out) {
  out->clear();
  struct Written {
    std::string name;
    uint32_t crc;
    uint64_t size, offset;
    uint16_t flags;
  };
  std::vector<Written> written;
  std::set<std::string> names;
  const uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: fixed, for reproducible files
  try {
    for (const NpzEntry& e : entries) {
      if (e.name.empty()) return Invalid(what, "empty array name");
      std::string name = e.name + ".npy";
      if (name.size() > 0xFFFF) return Invalid(what, "array name too long");
      if (!names.insert(name).second) return Invalid(what, "duplicate array name '" + e.name + "'");
      std::vector<uint8_t> npy;
      QF_RETURN_IF_ERROR(EncodeNpy(e.array, what + ": " + e.name, &npy));
      Written w{name, Crc32(npy.data(), npy.size()), npy.size(), out->size(), 0};
      for (char ch : name) {
        if (static_cast<unsigned char>(ch) >= 0x80) w.flags = 1 << 11;  // UTF-8 name
      }
      bool zip64 = w.size >= zip64_threshold;
      Put32(out, kZipLocalSig);
      Put16(out, zip64 ? 45 : 20);
      Put16(out, w.flags);
      Put16(out, 0);  // stored
      Put16(out, 0);  // time
      Put16(out, kDosDate);
      Put32(out, w.crc);
      Put32(out, zip64 ? kU32Max : uint32_t(w.size));
      Put32(out, zip64 ? kU32Max : uint32_t(w.size));
      Put16(out, uint16_t(name.size()));
      Put16(out, zip64 ? 20 : 0);
      PutBytes(out, name.data(), name.size());
      if (zip64) {
        Put16(out, kZip64ExtraId);
        Put16(out, 16);
        Put64(out, w.size);
        Put64(out, w.size);
      }
      PutBytes(out, npy.data(), npy.size());
      written.push_back(std::move(w));
    }
    uint64_t cd_offset = out->size();
    for (const Written& w : written) {
      bool big = w.size >= zip64_threshold, far = w.offset >= zip64_threshold;
      uint16_t extra = uint16_t((big ? 16 : 0) + (far ? 8 : 0));
      Put32(out, kZipCentralSig);
      Put16(out, 45);  // made by: zip 4.5, MS-DOS attributes
      Put16(out, big || far ? 45 : 20);
      Put16(out, w.flags);
      Put16(out, 0);
      Put16(out, 0);
      Put16(out, kDosDate);
      Put32(out, w.crc);
      Put32(out, big ? kU32Max : uint32_t(w.size));
      Put32(out, big ? kU32Max : uint32_t(w.size));
      Put16(out, uint16_t(w.name.size()));
      Put16(out, extra ? uint16_t(extra + 4) : 0);
      Put16(out, 0);  // comment
      Put16(out, 0);  // disk
      Put16(out, 0);  // internal attributes
      Put32(out, 0);  // external attributes
      Put32(out, far ? kU32Max : uint32_t(w.offset));
      PutBytes(out, w.name.data(), w.name.size());
      if (extra) {
        Put16(out, kZip64ExtraId);
        Put16(out, extra);
        if (big) {
          Put64(out, w.size);
          Put64(out, w.size);
        }
        if (far) Put64(out, w.offset);
      }
    }
    uint64_t cd_size = out->size() - cd_offset;
    uint64_t count = written.size();
    bool zip64_end = count >= 0xFFFF || cd_offset >= zip64_threshold || cd_size >= zip64_threshold;
    if (zip64_end) {
      uint64_t rec = out->size();
      Put32(out, kZip64EndSig);
      Put64(out, kZip64EndSize - 12);  // size of the rest of the record
      Put16(out, 45);
      Put16(out, 45);
      Put32(out, 0);
      Put32(out, 0);
      Put64(out, count);
      Put64(out, count);
      Put64(out, cd_size);
      Put64(out, cd_offset);
      Put32(out, kZip64LocatorSig);
      Put32(out, 0);
      Put64(out, rec);
      Put32(out, 1);
    }
    Put32(out, kZipEndSig);
    Put16(out, 0);
    Put16(out, 0);
    Put16(out, zip64_end ? 0xFFFF : uint16_t(count));
    Put16(out, zip64_end ? 0xFFFF : uint16_t(count));
    Put32(out, zip64_end ? kU32Max : uint32_t(cd_size));
    Put32(out, zip64_end ? kU32Max : uint32_t(cd_offset));
    Put16(out, 0);
  } catch (const std::bad_alloc&) {
    out->clear();
    return OutOfMemory(what);
  }
  return Status::Ok();
}

}  // namespace internal

Status EncodeNpz(const std::vector<NpzEntry>& entries, const std::string& what,
                 std::vector<uint8_t>* out) {
  return internal::EncodeNpzWithZip64Threshold(entries, what, kU32Max, out);
}

Status WriteNpz(const std::string& path, const std::vector<NpzEntry>& entries,
                const std::vector<std::string>& inputs) {
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(EncodeNpz(entries, path, &bytes));
  return WriteFileBytes(path, bytes, inputs);
}

}  // namespace qfold::io
