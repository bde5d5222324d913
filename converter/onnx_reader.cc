#include "converter/onnx_reader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "converter/onnx_dtype.h"
#include "converter/sha256.h"
#include "core/file_io.h"
#include "core/shape_util.h"
#include "onnx.pb.h"

namespace qfold {
namespace conv {

namespace {

Status Invalid(const std::string& msg) { return Status(StatusCode::kInvalidModel, msg); }

// Most elements one tensor may have (constants and declared shapes alike).
constexpr int64_t kMaxElements = int64_t(1) << 34;

// True when the product of the known dims (unknown ones count as 1) is at most kMaxElements.
bool KnownDimsCountable(const Shape& shape) {
  Shape known;
  for (int64_t d : shape) known.push_back(d < 0 ? 1 : d);
  int64_t n = 0;
  return CheckedNumel(known, &n) && n <= kMaxElements;
}

Status ReadFileBytes(const std::string& path, std::string* out) {
  // Regular files only (a FIFO would block, a device never end): checked first.
  int fd = -1;
  uint64_t size = 0;
  QF_RETURN_IF_ERROR(fileio::OpenRegularFile(path, &fd, &size));
  close(fd);
  if (size > kMaxProtoBytes)
    return Invalid(path + ": " + std::to_string(size) +
                   " bytes is over the 2 GiB protobuf limit; save large weights as external data");
  return fileio::ReadRegularFile(path, kMaxProtoBytes, out);
}

bool ParseProto(const std::string& bytes, google::protobuf::MessageLite* msg) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            int(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  in.SetRecursionLimit(100);
  return msg->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Resolves an external-data location and refuses any path that leaves base_dir.
Status ResolveExternalPath(const std::string& base_dir, const std::string& location,
                           const std::string& where, std::string* out) {
  if (location.empty() || location[0] == '/')
    return Invalid(where + ": external data location '" + location +
                   "' must be a relative path inside the model's folder");
  char base_real[PATH_MAX], file_real[PATH_MAX];
  if (!realpath(base_dir.c_str(), base_real))
    return Status(StatusCode::kIoError, where + ": cannot resolve folder '" + base_dir + "'");
  std::string joined = base_dir + "/" + location;
  // Refuse escapes before touching the file system, so a missing file outside the
  // folder gets the same answer as an existing one.
  std::string normal = std::filesystem::path(location).lexically_normal().string();
  if (normal == ".." || normal.compare(0, 3, "../") == 0)
    return Invalid(where + ": external data location '" + location +
                   "' leaves the model's folder; refused");
  if (!realpath(joined.c_str(), file_real))
    return Status(StatusCode::kIoError,
                  where + ": external data file '" + joined + "' does not exist");
  std::string b = base_real, f = file_real;
  if (f.compare(0, b.size() + 1, b + "/") != 0)
    return Invalid(where + ": external data location '" + location +
                   "' leaves the model's folder; refused");
  *out = f;
  return Status::Ok();
}

template <class Src>
void StoreAs(DType dt, const Src& src, std::vector<uint8_t>* out) {
  // Narrow the typed repeated field into dt's little-endian representation.
  size_t es = dtype_size(dt);
  out->resize(size_t(src.size()) * es);
  for (int i = 0; i < src.size(); ++i) {
    auto v = src.Get(i);
    uint8_t* p = out->data() + size_t(i) * es;
    switch (dt) {
      case DType::kFloat32: { float x = float(v); std::memcpy(p, &x, 4); break; }
      case DType::kFloat64: { double x = double(v); std::memcpy(p, &x, 8); break; }
      case DType::kInt8: case DType::kUInt8: case DType::kBool: { uint8_t x = uint8_t(v); *p = x; break; }
      case DType::kInt16: case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16: {
        uint16_t x = uint16_t(v); std::memcpy(p, &x, 2); break; }
      case DType::kInt32: case DType::kUInt32: { uint32_t x = uint32_t(v); std::memcpy(p, &x, 4); break; }
      case DType::kInt64: case DType::kUInt64: { uint64_t x = uint64_t(v); std::memcpy(p, &x, 8); break; }
      default: break;
    }
  }
}

Status ReadTypeProto(const onnx::TypeProto& tp, const std::string& where, Value* v) {
  // An optional is described by the type of its value, a sequence of tensors
  // by its elements' type.
  v->is_optional = tp.has_optional_type();
  const onnx::TypeProto& held = v->is_optional ? tp.optional_type().elem_type() : tp;
  v->is_sequence = held.has_sequence_type();
  const onnx::TypeProto& elem = v->is_sequence ? held.sequence_type().elem_type() : held;
  if (!elem.has_tensor_type())
    return Status(StatusCode::kUnsupported,
                  where +
                      ": only tensors, sequences of tensors and optionals of either are "
                      "supported (not maps, sparse tensors or nested sequences)");
  const auto& tt = elem.tensor_type();
  v->dtype = DTypeFromOnnx(tt.elem_type());
  if (v->dtype == DType::kUndefined)
    return Status(StatusCode::kUnsupported,
                  where + ": element type " + OnnxTypeName(tt.elem_type()) + " is not supported");
  v->rank_known = tt.has_shape();
  v->shape.clear();
  v->dim_names.clear();
  if (tt.has_shape()) {
    if (tt.shape().dim_size() > kMaxRank)
      return Invalid(where + ": rank " + std::to_string(tt.shape().dim_size()) + " exceeds " +
                     std::to_string(kMaxRank));
    for (const auto& d : tt.shape().dim()) {
      // Paddle2ONNX writes dim_value -1 for a dynamic dim (PP-OCR's classifier); ONNX
      // Runtime reads it as unknown, and so does qfold. Other negatives are errors.
      if (d.has_dim_value() && d.dim_value() != -1) {
        if (d.dim_value() < 0) return Invalid(where + ": negative dim " + std::to_string(d.dim_value()));
        v->shape.push_back(d.dim_value());
        v->dim_names.push_back("");
      } else {
        v->shape.push_back(kUnknownDim);
        v->dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
    if (!KnownDimsCountable(v->shape))
      return Invalid(where + ": shape " + ShapeToString(v->shape) + " has more than " +
                     std::to_string(kMaxElements) + " elements");
  }
  return Status::Ok();
}

Status ReadGraphBody(const onnx::GraphProto& gp, const std::string& path,
                     const std::string& base_dir, bool subgraph, Graph* g);

Status ReadAttribute(const onnx::AttributeProto& a, const std::string& base_dir, const Graph& outer,
                     Node* node) {
  const std::string where = node->Label() + " attribute '" + a.name() + "'";
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::INT: node->attrs.SetInt(a.name(), a.i()); break;
    case AP::FLOAT: node->attrs.SetFloat(a.name(), a.f()); break;
    case AP::STRING: node->attrs.SetString(a.name(), a.s()); break;
    case AP::INTS: node->attrs.SetInts(a.name(), {a.ints().begin(), a.ints().end()}); break;
    case AP::FLOATS: node->attrs.SetFloats(a.name(), {a.floats().begin(), a.floats().end()}); break;
    case AP::TENSOR: {
      Value v;
      QF_RETURN_IF_ERROR(ValueFromTensorProto(a.t(), base_dir, where, &v));
      node->tensor_attrs[a.name()] = std::move(v);
      break;
    }
    case AP::GRAPH: {
      auto sub = std::make_shared<Graph>();
      sub->source = outer.source;
      sub->opset = outer.opset;
      sub->opsets = outer.opsets;
      QF_RETURN_IF_ERROR(
          ReadGraphBody(a.g(), outer.source, base_dir, /*subgraph=*/true, sub.get()));
      node->subgraphs[a.name()] = std::move(sub);
      // If/Loop/Scan run their subgraphs (capture_outer_values.cc); elsewhere a graph is foreign.
      if (!IsControlFlowNode(*node)) node->unsupported_attrs.push_back(a.name());
      break;
    }
    case AP::TYPE_PROTO: {
      // Optional's `type` (the value type of a none): kept as attributes the
      // .qfm holds, _<name>_elem (ONNX element type), _<name>_sequence and,
      // when the rank is known, _<name>_shape (-1 for unknown dims).
      Value t;
      if (!ReadTypeProto(a.tp(), where, &t).ok() || t.is_optional) {
        node->unsupported_attrs.push_back(a.name());
        break;
      }
      const onnx::TypeProto& elem = t.is_sequence ? a.tp().sequence_type().elem_type() : a.tp();
      node->attrs.SetInt("_" + a.name() + "_elem", elem.tensor_type().elem_type());
      node->attrs.SetInt("_" + a.name() + "_sequence", t.is_sequence ? 1 : 0);
      if (t.rank_known) node->attrs.SetInts("_" + a.name() + "_shape", t.shape);
      break;
    }
    case AP::STRINGS:
      node->string_lists[a.name()] = {a.strings().begin(), a.strings().end()};
      node->unsupported_attrs.push_back(a.name());
      break;
    default: node->unsupported_attrs.push_back(a.name()); break;
  }
  return Status::Ok();
}

}  // namespace

Status ValueFromTensorProto(const onnx::TensorProto& t, const std::string& base_dir,
                            const std::string& where, Value* out) {
  out->name = t.name();
  out->dtype = DTypeFromOnnx(t.data_type());
  if (IsFloat8(t.data_type())) {
    // One byte per element, from raw_data or one per int32_data entry.
    std::string bytes = t.has_raw_data() ? t.raw_data() : std::string();
    if (!t.has_raw_data())
      for (int32_t v : t.int32_data()) bytes.push_back(char(uint8_t(v)));
    out->shape.assign(t.dims().begin(), t.dims().end());
    int64_t n = 0;
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.dims_size() > kMaxRank ||
        !CheckedNumel(out->shape, &n) || int64_t(bytes.size()) != n)
      return Status(StatusCode::kUnsupported,
                    where + ": float8 tensor '" + t.name() + "' must hold its " +
                        std::to_string(n) + " bytes inline");
    auto data = std::make_shared<std::vector<uint8_t>>(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      float f = Float8ToFloat(t.data_type(), uint8_t(bytes[size_t(i)]));
      std::memcpy(data->data() + 4 * i, &f, 4);
    }
    out->name = t.name();
    out->dtype = DType::kFloat32;
    out->rank_known = true;
    out->data = data;
    out->widened_from = OnnxTypeName(t.data_type());
    return Status::Ok();
  }
  if (out->dtype == DType::kUndefined)
    return Status(StatusCode::kUnsupported,
                  where + ": tensor '" + t.name() + "' has element type " +
                      OnnxTypeName(t.data_type()) + ", which qfold does not support");
  if (t.dims_size() > kMaxRank)
    return Invalid(where + ": tensor '" + t.name() + "' has rank " + std::to_string(t.dims_size()));
  out->shape.assign(t.dims().begin(), t.dims().end());
  out->rank_known = true;
  int64_t n = 0;
  if (!CheckedNumel(out->shape, &n) || n > kMaxElements)
    return Invalid(where + ": tensor '" + t.name() + "' has an invalid shape " +
                   ShapeToString(out->shape));
  const size_t want = dtype_storage_bytes(out->dtype, n);
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  const DType dt = out->dtype;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::atoll(kv.value().c_str());
      else if (kv.key() == "length") length = std::atoll(kv.value().c_str());
    }
    std::string path;
    QF_RETURN_IF_ERROR(ResolveExternalPath(base_dir, location, where + ": tensor '" + t.name() + "'", &path));
    int fd = -1;
    uint64_t size = 0;
    Status opened = fileio::OpenRegularFile(path, &fd, &size);
    if (!opened.ok())
      return Status(opened.code(),
                    where + ": tensor '" + t.name() + "' external data: " + opened.message());
    const int64_t file_size = int64_t(size);
    struct FdCloser {
      int fd;
      ~FdCloser() { close(fd); }
    } closer{fd};
    if (length < 0) length = int64_t(want);
    if (offset < 0 || length < 0 || offset > file_size || length > file_size - offset)
      return Invalid(where + ": tensor '" + t.name() + "' external data range [" +
                     std::to_string(offset) + ", +" + std::to_string(length) +
                     ") is outside '" + location + "' (" + std::to_string(file_size) + " bytes)");
    if (size_t(length) != want)
      return Invalid(where + ": tensor '" + t.name() + "' external data has " +
                     std::to_string(length) + " bytes, shape " + ShapeToString(out->shape) +
                     " needs " + std::to_string(want));
    bytes->resize(want);
    for (size_t done = 0; done < want;) {
      ssize_t r = pread(fd, bytes->data() + done, want - done, off_t(offset) + off_t(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return Status(StatusCode::kIoError, where + ": reading external data failed");
      done += size_t(r);
    }
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != want)
      return Invalid(where + ": tensor '" + t.name() + "' has " +
                     std::to_string(t.raw_data().size()) + " bytes of raw data, shape " +
                     ShapeToString(out->shape) + " needs " + std::to_string(want));
    bytes->assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    int64_t count = 0;
    if (dt == DType::kFloat32) {
      StoreAs(dt, t.float_data(), bytes.get()), count = t.float_data_size();
    } else if (dt == DType::kFloat64) {
      StoreAs(dt, t.double_data(), bytes.get()), count = t.double_data_size();
    } else if (dt == DType::kInt64) {
      StoreAs(dt, t.int64_data(), bytes.get()), count = t.int64_data_size();
    } else if (dt == DType::kUInt32 || dt == DType::kUInt64) {
      StoreAs(dt, t.uint64_data(), bytes.get()), count = t.uint64_data_size();
    } else if (dt == DType::kInt4 || dt == DType::kUInt4) {
      // int32_data holds the packed bytes, one per entry.
      for (int32_t v : t.int32_data()) bytes->push_back(uint8_t(v));
      count = (int64_t(bytes->size()) * 2 >= n && int64_t(bytes->size()) == (n + 1) / 2) ? n : -1;
    } else {
      if (dt == DType::kBool)
        for (int i = 0; i < t.int32_data_size(); ++i)
          if (t.int32_data(i) != 0 && t.int32_data(i) != 1)
            return Invalid(where + ": bool tensor '" + t.name() + "' element " +
                           std::to_string(i) + " is " + std::to_string(t.int32_data(i)) +
                           "; ONNX bools are 0 or 1");
      StoreAs(dt, t.int32_data(), bytes.get()), count = t.int32_data_size();
    }
    if (count != n)
      return Invalid(where + ": tensor '" + t.name() + "' has " + std::to_string(count) +
                     " values, shape " + ShapeToString(out->shape) + " needs " + std::to_string(n));
  }
  // Raw or external bool bytes other than 0 and 1 have no meaning (a C++ bool
  // holding them is undefined): refused here rather than by the runtime's loader.
  if (dt == DType::kBool)
    for (size_t i = 0; i < bytes->size(); ++i)
      if ((*bytes)[i] > 1)
        return Invalid(where + ": bool tensor '" + t.name() + "' element " + std::to_string(i) +
                       " is " + std::to_string(int((*bytes)[i])) + "; ONNX bools are 0 or 1");
  out->data = bytes;
  return Status::Ok();
}

Status ReadTensorProtoFile(const std::string& path, Value* out) {
  std::string bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  onnx::TensorProto t;
  if (!ParseProto(bytes, &t)) return Invalid(path + ": not a valid ONNX TensorProto");
  return ValueFromTensorProto(t, DirName(path), path, out);
}

// onnx.proto does not declare SequenceProto (onnx-data.proto does, which
// Debian does not ship), so its few fields are read from the wire format:
// 2 elem_type (varint), 3 tensor_values (TensorProto); 1 name is skipped.
namespace {
// A serialized SequenceProto of tensors; `path` names its file for messages.
Status ParseSequenceProto(const std::string& bytes, const std::string& path,
                          std::vector<Value>* out) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            int(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  constexpr uint32_t kTensorElements = 1, kSequenceField = 2, kTensorField = 3;
  uint32_t elem_type = kTensorElements;
  out->clear();
  while (uint32_t tag = in.ReadTag()) {
    const int field = int(tag >> 3);
    if (field == int(kSequenceField) && (tag & 7) == 0) {
      if (!in.ReadVarint32(&elem_type)) break;
      continue;
    }
    if (field == int(kTensorField) && (tag & 7) == 2) {
      uint32_t len = 0;
      std::string msg;
      if (!in.ReadVarint32(&len) || !in.ReadString(&msg, int(len)))
        return Invalid(path + ": not a valid ONNX SequenceProto (truncated tensor)");
      onnx::TensorProto t;
      if (!ParseProto(msg, &t)) return Invalid(path + ": element is not a valid TensorProto");
      Value v;
      QF_RETURN_IF_ERROR(ValueFromTensorProto(
          t, DirName(path), path + ": element " + std::to_string(out->size()), &v));
      out->push_back(std::move(v));
      continue;
    }
    if (field >= 4 && field <= 7)  // sparse tensors, sequences, maps, optionals
      elem_type = uint32_t(field);
    if (!WireFormatLite::SkipField(&in, tag))
      return Invalid(path + ": not a valid ONNX SequenceProto");
  }
  if (in.CurrentPosition() != int(bytes.size()))
    return Invalid(path + ": not a valid ONNX SequenceProto");
  if (elem_type != kTensorElements && elem_type != 0)
    return Status(StatusCode::kUnsupported,
                  path + ": only sequences of tensors are supported (not sparse tensors, maps, "
                         "optionals or nested sequences)");
  return Status::Ok();
}
}  // namespace

Status ReadSequenceProtoFile(const std::string& path, std::vector<Value>* out) {
  std::string bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  return ParseSequenceProto(bytes, path, out);
}

Status ReadOptionalProtoFile(const std::string& path, OptionalValue* out) {
  std::string bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            int(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  // OptionalProto: name = 1, elem_type = 2, tensor_value = 3, sparse_tensor_value = 4,
  // sequence_value = 5, map_value = 6, optional_value = 7.
  constexpr int kTensorValue = 3, kSequenceValue = 5;
  *out = OptionalValue();
  while (uint32_t tag = in.ReadTag()) {
    const int field = int(tag >> 3);
    if ((field == kTensorValue || field == kSequenceValue) && (tag & 7) == 2) {
      uint32_t len = 0;
      std::string msg;
      if (!in.ReadVarint32(&len) || !in.ReadString(&msg, int(len)))
        return Invalid(path + ": not a valid ONNX OptionalProto (truncated value)");
      out->none = false;
      out->is_sequence = field == kSequenceValue;
      if (out->is_sequence) {
        QF_RETURN_IF_ERROR(ParseSequenceProto(msg, path, &out->sequence));
        continue;
      }
      onnx::TensorProto t;
      if (!ParseProto(msg, &t)) return Invalid(path + ": value is not a valid TensorProto");
      QF_RETURN_IF_ERROR(ValueFromTensorProto(t, DirName(path), path, &out->tensor));
      continue;
    }
    if (field == 4 || field == 6 || field == 7)
      return Status(StatusCode::kUnsupported,
                    path + ": only optionals of tensors and sequences of tensors are supported");
    if (!WireFormatLite::SkipField(&in, tag))
      return Invalid(path + ": not a valid ONNX OptionalProto");
  }
  if (in.CurrentPosition() != int(bytes.size()))
    return Invalid(path + ": not a valid ONNX OptionalProto");
  return Status::Ok();
}

Status ReadOnnxModel(const std::string& path, Graph* g) {
  std::string bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  onnx::ModelProto model;
  if (bytes.empty() || !ParseProto(bytes, &model))
    return Invalid(path + ": not a valid ONNX model (protobuf parsing failed: truncated or not "
                          "an .onnx file)");
  if (!model.has_graph()) return Invalid(path + ": the model has no graph");
  g->source = path;
  g->producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  g->sha256 = Sha256Hex(bytes);
  for (const auto& op : model.opset_import()) {
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    g->opsets[domain] = op.version();
  }
  // IR v2 models predate opset_import; models of other domains only have no default opset.
  if (!g->opsets.count("") && model.opset_import_size() == 0) g->opsets[""] = 1;
  g->opset = g->opsets.count("") ? g->opsets[""] : 0;
  // An opset qfold has not seen may change an op's meaning (normalize_opsets
  // rewrites only the forms it knows): refused rather than run as if older.
  if (g->opsets.count("") && (g->opset < 1 || g->opset > kNewestOnnxOpset))
    return Status(g->opset < 1 ? StatusCode::kInvalidModel : StatusCode::kUnsupported,
                  path + ": ai.onnx opset " + std::to_string(g->opset) +
                      (g->opset < 1 ? " is invalid (opsets start at 1)"
                                    : " is newer than the newest qfold knows (" +
                                          std::to_string(kNewestOnnxOpset) + ")"));
  return ReadGraphBody(model.graph(), path, DirName(path), /*subgraph=*/false, g);
}

namespace {

// The graph's initializers, inputs, outputs and nodes. A subgraph (a GRAPH
// attribute) is read the same way, except that an input type qfold cannot hold
// (a Loop body's sequence) stays undefined: such a body is refused when its
// types are inferred (infer_subgraphs.cc).
Status ReadGraphBody(const onnx::GraphProto& gp, const std::string& path,
                     const std::string& base_dir, bool subgraph, Graph* g) {
  const std::string scope = subgraph ? path + ": subgraph '" + gp.name() + "'" : path;
  for (const auto& init : gp.initializer()) {
    Value v;
    QF_RETURN_IF_ERROR(ValueFromTensorProto(init, base_dir, scope + ": initializer", &v));
    if (v.name.empty()) return Invalid(scope + ": an initializer has no name");
    g->values[v.name] = std::move(v);
  }
  if (gp.sparse_initializer_size() > 0)
    return Status(StatusCode::kUnsupported, scope + ": sparse initializers are not supported");
  for (const auto& in : gp.input()) {
    if (g->IsConstant(in.name())) continue;  // old exporters list initializers as inputs
    Value v;
    v.name = in.name();
    Status st = ReadTypeProto(in.type(), scope + ": graph input '" + in.name() + "'", &v);
    if (!st.ok() && !subgraph) return st;
    g->values[v.name] = std::move(v);
    g->inputs.push_back(in.name());
  }
  for (const auto& out : gp.output()) {
    g->outputs.push_back(out.name());
    if (!g->Find(out.name()) && out.has_type()) {
      Value v;
      v.name = out.name();
      // Declared output types are advisory: inference recomputes them.
      if (ReadTypeProto(out.type(), path, &v).ok()) g->values[v.name] = std::move(v);
    }
  }
  for (int k = 0; k < gp.node_size(); ++k) {
    const auto& np = gp.node(k);
    Node n;
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) QF_RETURN_IF_ERROR(ReadAttribute(a, base_dir, *g, &n));
    g->nodes.push_back(std::move(n));
  }
  return Status::Ok();
}

OnnxArg ArgFromValueInfo(const onnx::ValueInfoProto& vi) {
  OnnxArg arg;
  arg.name = vi.name();
  arg.is_optional = vi.type().has_optional_type();
  const onnx::TypeProto& held = arg.is_optional ? vi.type().optional_type().elem_type() : vi.type();
  arg.is_sequence = held.has_sequence_type();
  const onnx::TypeProto& type = arg.is_sequence ? held.sequence_type().elem_type() : held;
  if (!type.has_tensor_type()) return arg;
  const auto& tt = type.tensor_type();
  arg.elem_type = OnnxTypeName(tt.elem_type());
  for (char& c : arg.elem_type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  arg.has_shape = tt.has_shape();
  for (const auto& d : tt.shape().dim()) {
    OnnxDim dim;
    if (d.has_dim_value() && d.dim_value() >= 0)
      dim.value = d.dim_value();
    else if (d.has_dim_param())
      dim.param = d.dim_param();
    arg.dims.push_back(dim);
  }
  return arg;
}

}  // namespace

Status ReadOnnxSignature(const std::string& path, OnnxSignature* out) {
  std::string bytes;
  QF_RETURN_IF_ERROR(ReadFileBytes(path, &bytes));
  onnx::ModelProto model;
  if (bytes.empty() || !ParseProto(bytes, &model))
    return Invalid(path +
                   ": not a valid ONNX model (protobuf parsing failed: truncated or not "
                   "an .onnx file)");
  if (!model.has_graph()) return Invalid(path + ": the model has no graph");
  const onnx::GraphProto& gp = model.graph();
  std::set<std::string> initializers;
  for (const auto& init : gp.initializer()) initializers.insert(init.name());
  *out = OnnxSignature();
  for (const auto& in : gp.input())
    if (!initializers.count(in.name())) out->inputs.push_back(ArgFromValueInfo(in));
  for (const auto& o : gp.output()) out->outputs.push_back(ArgFromValueInfo(o));
  out->producer_name = model.producer_name();
  out->domain = model.domain();
  out->description = model.doc_string();
  // ONNX Runtime reports an unset model_version as INT64_MAX; so does qfold.
  out->model_version =
      model.has_model_version() ? model.model_version() : std::numeric_limits<int64_t>::max();
  out->graph_name = gp.name();
  out->graph_description = gp.doc_string();
  for (const auto& p : model.metadata_props()) out->metadata_props.emplace_back(p.key(), p.value());
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
