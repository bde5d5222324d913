// Loading a .qfm: map it, run the flatbuffers Verifier once, then check what
// the Verifier cannot (indices, sizes, dtypes, topological order) so that a
// Session can trust the model without checks in the hot loop.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/file_io.h"
#include "core/shape_util.h"
#include "kernels/half_f32.h"
#include "model_impl.h"

namespace qfold {

namespace {

constexpr size_t kAlign = 64;
// Caps that keep a hostile file from asking for absurd work.
constexpr int64_t kMaxTensorElements = int64_t(1) << 34;
constexpr size_t kMaxTensors = size_t(1) << 24;

Status Bad(const std::string& source, const std::string& msg) {
  return Status(StatusCode::kInvalidModel, source + ": " + msg);
}

std::string TensorLabel(const fb::Model* m, int idx) {
  const auto* t = m->tensors()->Get(idx);
  return "tensor '" + (t->name() ? t->name()->str() : std::to_string(idx)) + "'";
}

void ReadAttr(const fb::Attribute* a, AttrMap* out) {
  Attr attr;
  attr.name = a->name() ? a->name()->str() : "";
  switch (a->type()) {
    case fb::AttrType::INT:
      attr.kind = Attr::kInt;
      break;
    case fb::AttrType::FLOAT:
      attr.kind = Attr::kFloat;
      break;
    case fb::AttrType::INTS:
      attr.kind = Attr::kInts;
      break;
    case fb::AttrType::FLOATS:
      attr.kind = Attr::kFloats;
      break;
    case fb::AttrType::STRING:
      attr.kind = Attr::kString;
      break;
  }
  attr.i = a->i();
  attr.f = a->f();
  // The Verifier checks a vector's length word (4-byte alignment), not that
  // 8-byte elements are 8-byte aligned: a hand-made file can misalign them, so
  // they are copied as bytes (little-endian, as flatbuffers stores them).
  if (a->ints()) {
    attr.ints.resize(a->ints()->size());
    if (!attr.ints.empty())
      std::memcpy(attr.ints.data(), a->ints()->Data(), attr.ints.size() * sizeof(int64_t));
  }
  if (a->floats()) attr.floats.assign(a->floats()->begin(), a->floats()->end());
  if (a->s()) attr.s = a->s()->str();
  out->Set(std::move(attr));
}

}  // namespace

Model::Impl::~Impl() {
  if (mapped) munmap(mapped, mapped_size);
}

Status Model::Impl::Parse() {
  // The Verifier asserts on buffers of 2 GiB or more; refuse them first.
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Bad(source, "file too large for a flatbuffer (" + std::to_string(size) + " bytes)");
  if (size < 8 || !fb::ModelBufferHasIdentifier(base))
    return Bad(source,
               "not a qfold model (missing file identifier 'QFM1'); was it made by "
               "'qfold convert'?");
  flatbuffers::Verifier::Options vopts;
  vopts.max_tables = 1u << 24;
  flatbuffers::Verifier verifier(base, size, vopts);
  if (!fb::VerifyModelBuffer(verifier))
    return Bad(source, "file is corrupt or truncated (flatbuffers verification failed)");
  fb = fb::GetModel(base);
  if (fb->min_reader_version() > kReaderVersion)
    return Status(StatusCode::kUnsupported,
                  source + ": needs reader version " + std::to_string(fb->min_reader_version()) +
                      ", this runtime reads version " + std::to_string(kReaderVersion));
  if (!fb->tensors() || !fb->buffers() || !fb->operators() || !fb->inputs() || !fb->outputs())
    return Bad(source, "model lacks tensors, buffers, operators, inputs or outputs");
  const size_t nt = fb->tensors()->size();
  const size_t nb = fb->buffers()->size();
  if (nt > kMaxTensors) return Bad(source, "too many tensors");

  tensors.resize(nt);
  std::vector<int> producer(nt, -2);  // -2: none yet, -1: constant or graph input
  for (size_t i = 0; i < nt; ++i) {
    const fb::Tensor* t = fb->tensors()->Get(uint32_t(i));
    TensorEntry& e = tensors[i];
    e.info.name = t->name() ? t->name()->str() : "";
    if (!dtype_is_valid(int(t->dtype())))
      return Bad(source, TensorLabel(fb, int(i)) + " has an invalid dtype " +
                             std::to_string(int(t->dtype())));
    e.info.dtype = DType(int(t->dtype()));
    e.info.layout = t->layout() == fb::Layout::NCHW   ? Layout::kNCHW
                    : t->layout() == fb::Layout::NHWC ? Layout::kNHWC
                                                      : Layout::kPlain;
    e.info.batch_axis = t->batch_axis();
    e.info.channel_axis = t->channel_axis();
    const fb::TensorKind kind = t->kind();
    if (kind != fb::TensorKind::TENSOR && kind != fb::TensorKind::SEQUENCE &&
        kind != fb::TensorKind::OPTIONAL_TENSOR && kind != fb::TensorKind::OPTIONAL_SEQUENCE)
      return Bad(source,
                 TensorLabel(fb, int(i)) + " has an invalid kind " + std::to_string(int(kind)));
    e.info.is_sequence =
        kind == fb::TensorKind::SEQUENCE || kind == fb::TensorKind::OPTIONAL_SEQUENCE;
    e.info.is_optional =
        kind == fb::TensorKind::OPTIONAL_TENSOR || kind == fb::TensorKind::OPTIONAL_SEQUENCE;
    const bool boxed = e.info.is_sequence || e.info.is_optional;
    e.rank_known = !(boxed && t->rank_unknown());
    if (boxed && t->buffer() != 0)
      return Bad(source, TensorLabel(fb, int(i)) + " is " +
                             (e.info.is_optional ? "an optional" : "a sequence") +
                             " with constant data");
    if (t->shape()) {
      if (t->shape()->size() > size_t(kMaxRank))
        return Bad(source, TensorLabel(fb, int(i)) + " has rank " +
                               std::to_string(t->shape()->size()) + ", more than " +
                               std::to_string(kMaxRank));
      for (const fb::Dim* d : *t->shape()) {
        if (d->value() < -1) return Bad(source, TensorLabel(fb, int(i)) + " has a negative dim");
        e.info.shape.push_back(d->value());
        e.info.dim_names.push_back(d->name() ? d->name()->str() : "");
      }
      // Known dims alone must stay countable, so no later size arithmetic overflows.
      Shape known;
      for (int64_t d : e.info.shape) known.push_back(d < 0 ? 1 : d);
      int64_t n = 0;
      if (!CheckedNumel(known, &n) || n > kMaxTensorElements)
        return Bad(source, TensorLabel(fb, int(i)) + " has shape " + ShapeToString(e.info.shape) +
                               ", more than " + std::to_string(kMaxTensorElements) + " elements");
    }
    if (t->buffer() != 0) {
      if (t->buffer() >= nb)
        return Bad(source, TensorLabel(fb, int(i)) + " refers to buffer " +
                               std::to_string(t->buffer()) + " of " + std::to_string(nb));
      int64_t n = 0;
      if (!CheckedNumel(e.info.shape, &n) || n > kMaxTensorElements)
        return Bad(source, TensorLabel(fb, int(i)) + " is a constant without a valid fixed shape " +
                               ShapeToString(e.info.shape));
      const fb::Buffer* b = fb->buffers()->Get(t->buffer());
      size_t have = b->data() ? b->data()->size() : 0;
      size_t want = dtype_storage_bytes(e.info.dtype, n);
      if (have != want)
        return Bad(source, TensorLabel(fb, int(i)) + " has " + std::to_string(have) +
                               " bytes of data, its dtype and shape need " + std::to_string(want));
      e.const_data = b->data() ? b->data()->data() : nullptr;
      // Kernels read constants in place as their element type; the writer puts
      // every buffer at a 64-byte boundary (schema: force_align), a hand-made
      // file may not.
      const size_t offset = b->data() ? size_t(b->data()->data() - base) : 0;
      if (want != 0 && offset % kAlign != 0)
        return Bad(source, TensorLabel(fb, int(i)) + ": constant data at file offset " +
                               std::to_string(offset) + " is not " + std::to_string(kAlign) +
                               "-byte aligned");
      // A bool byte other than 0/1 is undefined behaviour wherever a kernel
      // reads it as bool; the converter never writes one.
      if (e.info.dtype == DType::kBool)
        for (size_t k = 0; k < want; ++k)
          if (b->data()->data()[k] > 1)
            return Bad(source, TensorLabel(fb, int(i)) + ": bool constant element " +
                                   std::to_string(k) + " is " +
                                   std::to_string(int(b->data()->data()[k])) + ", not 0 or 1");
      if (want == 0) e.const_data = base;  // any non-null pointer marks "known, empty"
      producer[i] = -1;
    }
  }

  auto check_io = [&](const flatbuffers::Vector<int32_t>* ids, std::vector<int>* out,
                      const char* what) -> Status {
    for (int32_t id : *ids) {
      if (id < 0 || size_t(id) >= nt)
        return Bad(source,
                   std::string("graph ") + what + " index " + std::to_string(id) + " out of range");
      out->push_back(id);
    }
    return Status::Ok();
  };
  QF_RETURN_IF_ERROR(check_io(fb->inputs(), &input_ids, "input"));
  QF_RETURN_IF_ERROR(check_io(fb->outputs(), &output_ids, "output"));
  for (int id : input_ids) {
    if (producer[id] == -1)
      return Bad(source, TensorLabel(fb, id) + " is both input and constant, or listed twice");
    producer[id] = -1;
  }
  // Callers address inputs and outputs by name.
  for (const std::vector<int>* ids : {&input_ids, &output_ids})
    for (size_t a = 0; a < ids->size(); ++a)
      for (size_t b = 0; b < a; ++b)
        if (tensors[(*ids)[a]].info.name == tensors[(*ids)[b]].info.name)
          return Bad(source, std::string(ids == &input_ids ? "graph inputs " : "graph outputs ") +
                                 std::to_string(b) + " and " + std::to_string(a) +
                                 " share the name '" + tensors[(*ids)[a]].info.name + "'");

  std::string unsupported;
  QF_RETURN_IF_ERROR(ParseOps(fb->operators(), -1, &producer, &ops, &unsupported));
  if (fb->subgraphs()) {
    subgraphs.resize(fb->subgraphs()->size());
    for (size_t gi = 0; gi < subgraphs.size(); ++gi) {
      const fb::Graph* fg = fb->subgraphs()->Get(uint32_t(gi));
      GraphEntry& ge = subgraphs[gi];
      ge.name = fg->name() ? fg->name()->str() : "subgraph " + std::to_string(gi);
      if (!fg->operators() || !fg->inputs() || !fg->outputs())
        return Bad(source, "subgraph '" + ge.name + "' lacks operators, inputs or outputs");
      // A subgraph starts from the constants and its own inputs only.
      std::vector<int> sub_producer(nt, -2);
      for (size_t i = 0; i < nt; ++i)
        if (tensors[i].const_data) sub_producer[i] = -1;
      QF_RETURN_IF_ERROR(check_io(fg->inputs(), &ge.input_ids, "input"));
      QF_RETURN_IF_ERROR(check_io(fg->outputs(), &ge.output_ids, "output"));
      for (int id : ge.input_ids) {
        if (sub_producer[id] == -1)
          return Bad(source, "subgraph '" + ge.name + "': " + TensorLabel(fb, id) +
                                 " is both input and constant, or listed twice");
        sub_producer[id] = -1;
      }
      QF_RETURN_IF_ERROR(ParseOps(fg->operators(), int(gi), &sub_producer, &ge.ops, &unsupported));
      for (int id : ge.output_ids)
        if (sub_producer[id] == -2)
          return Bad(source, "subgraph '" + ge.name + "': output " + TensorLabel(fb, id) +
                                 " is never produced");
    }
  }
  if (!unsupported.empty())
    return Status(StatusCode::kUnsupported,
                  source + ": operators this runtime does not support: " + unsupported);
  QF_RETURN_IF_ERROR(CheckSequences());
  for (int id : output_ids)
    if (producer[id] == -2)
      return Bad(source, "graph output " + TensorLabel(fb, id) + " is never produced");

  QF_RETURN_IF_ERROR(WidenHalfWeights());
  for (int id : input_ids) inputs.push_back(tensors[id].info);
  for (int id : output_ids) outputs.push_back(tensors[id].info);
  return Status::Ok();
}

// Only sequence ops (kTraitSequence) and the control-flow ops passing values
// to their subgraphs (If, Loop; Scan refuses them when inferred) read or write
// sequences: another op would take a sequence for a tensor without data.
// Likewise only optional-aware ops (kTraitOptional) read or write optionals.
Status Model::Impl::CheckSequences() const {
  auto check = [&](const std::vector<OpEntry>& list) -> Status {
    for (const OpEntry& op : list) {
      if (op.def->has_subgraphs) continue;
      const bool sequences = op.def->traits & kTraitSequence;
      const bool optionals = op.def->traits & kTraitOptional;
      for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
        for (int id : *ids) {
          if (id < 0) continue;
          const TensorInfo& info = tensors[size_t(id)].info;
          if (info.is_optional && !optionals)
            return Bad(source, op.type + " '" + op.name + "' reads or writes optional '" +
                                   info.name + "', but it does not take optionals");
          if (info.is_sequence && !sequences)
            return Bad(source, op.type + " '" + op.name + "' reads or writes sequence '" +
                                   info.name + "', but it takes tensors only");
        }
    }
    return Status::Ok();
  };
  QF_RETURN_IF_ERROR(check(ops));
  for (const GraphEntry& ge : subgraphs) QF_RETURN_IF_ERROR(check(ge.ops));
  return Status::Ok();
}

Status Model::Impl::WidenHalfWeights() {
  const size_t nt = tensors.size();
  std::vector<bool> widen(nt, false);
  bool any = false;
  for (size_t i = 0; i < nt; ++i) {
    widen[i] = tensors[i].const_data && tensors[i].info.dtype == DType::kFloat16;
    any = any || widen[i];
  }
  if (!any) return Status::Ok();
  auto keep_unless_half_weights = [&](const std::vector<OpEntry>& list) {
    for (const OpEntry& op : list)
      if (!(op.def->traits & kTraitHalfWeights))
        for (int id : op.inputs)
          if (id >= 0) widen[size_t(id)] = false;
  };
  keep_unless_half_weights(ops);
  for (const GraphEntry& ge : subgraphs) {
    keep_unless_half_weights(ge.ops);
    for (int id : ge.output_ids) widen[size_t(id)] = false;
  }
  for (int id : output_ids) widen[size_t(id)] = false;  // the caller asked for float16

  const kernels::HalfToF32Fn to_f32 = kernels::HalfToF32For(kernels::DefaultCpuFeatures());
  for (size_t i = 0; i < nt; ++i) {
    if (!widen[i]) continue;
    TensorEntry& e = tensors[i];
    int64_t n = 0;
    CheckedNumel(e.info.shape, &n);  // Parse checked the shape
    e.info.dtype = DType::kFloat32;
    if (n == 0) continue;  // const_data stays the non-null "empty" marker
    const size_t bytes = size_t(n) * sizeof(float);
    std::unique_ptr<uint8_t[]> block(new (std::nothrow) uint8_t[bytes + kAlign]);
    if (!block)
      return Status(StatusCode::kIoError, source + ": out of memory widening the float16 " +
                                              TensorLabel(fb, int(i)) + " (" +
                                              std::to_string(bytes) + " bytes)");
    const uintptr_t p = reinterpret_cast<uintptr_t>(block.get());
    float* dst = reinterpret_cast<float*>(block.get() + (kAlign - p % kAlign) % kAlign);
    to_f32(static_cast<const uint16_t*>(e.const_data), dst, size_t(n));
    e.const_data = dst;
    widened.push_back(std::move(block));
    widened_bytes += bytes;
  }
  return Status::Ok();
}

Status Model::Impl::ParseOps(const flatbuffers::Vector<flatbuffers::Offset<fb::Operator>>* fb_ops,
                             int graph, std::vector<int>* producer_ptr, std::vector<OpEntry>* out,
                             std::string* unsupported_ptr) {
  std::vector<int>& producer = *producer_ptr;
  std::string& unsupported = *unsupported_ptr;
  const size_t nt = tensors.size();
  const size_t num_graphs = fb->subgraphs() ? fb->subgraphs()->size() : 0;
  out->resize(fb_ops->size());
  for (size_t k = 0; k < out->size(); ++k) {
    const fb::Operator* o = fb_ops->Get(uint32_t(k));
    OpEntry& op = (*out)[k];
    op.type = o->type() ? o->type()->str() : "";
    op.name = o->name() ? o->name()->str() : "";
    std::string label = op.type + " '" + op.name + "'";
    op.def = FindOp(op.type);
    if (!op.def) {
      unsupported += (unsupported.empty() ? "" : ", ") + label;
      continue;
    }
    if (o->attributes())
      for (const fb::Attribute* a : *o->attributes()) ReadAttr(a, &op.attrs);
    if (o->inputs())
      for (int32_t id : *o->inputs()) {
        if (id < -1 || id >= int64_t(nt))
          return Bad(source, label + ": input index " + std::to_string(id) + " out of range");
        if (id >= 0 && producer[id] == -2)
          return Bad(source, label + ": input " + TensorLabel(fb, id) +
                                 " is not produced by an earlier operator (graph not "
                                 "topologically sorted, or cyclic)");
        op.inputs.push_back(id);
      }
    if (o->outputs())
      for (int32_t id : *o->outputs()) {
        if (id < -1 || id >= int64_t(nt))
          return Bad(source, label + ": output index " + std::to_string(id) + " out of range");
        if (id >= 0) {
          if (producer[id] != -2)
            return Bad(source, label + ": output " + TensorLabel(fb, id) +
                                   " is already a constant, input or another operator's output");
          producer[id] = int(k);
        }
        op.outputs.push_back(id);
      }
    int n_in = int(op.inputs.size());
    if (n_in < op.def->min_inputs || n_in > op.def->max_inputs)
      return Bad(source, label + ": has " + std::to_string(n_in) + " inputs, expected " +
                             std::to_string(op.def->min_inputs) + ".." +
                             std::to_string(op.def->max_inputs));
    // Kernels rely on this: only inputs past min_inputs may be omitted (ONNX lists
    // required inputs first).
    for (int i = 0; i < op.def->min_inputs; ++i)
      if (op.inputs[i] < 0)
        return Bad(source, label + ": required input " + std::to_string(i) + " is omitted");
    // Optional outputs may be omitted, the first only where the op allows it
    // (LSTM with only Y_h).
    if (std::none_of(op.outputs.begin(), op.outputs.end(), [](int id) { return id >= 0; }))
      return Bad(source, label + ": has no output");
    if (!op.def->output0_optional && op.outputs[0] < 0)
      return Bad(source, label + ": required output 0 is omitted");
    // Graph attributes index later subgraphs only, so nesting cannot recurse.
    for (const char* attr : {"then_branch", "else_branch", "body"}) {
      const Attr* a = op.def->has_subgraphs ? op.attrs.Find(attr) : nullptr;
      if (!a) continue;
      if (a->kind != Attr::kInt || a->i <= graph || a->i >= int64_t(num_graphs))
        return Bad(source, label + ": attribute '" + attr + "' names subgraph " +
                               std::to_string(a->i) + ", not one of the " +
                               std::to_string(num_graphs) + " subgraphs after this graph");
    }
  }
  return Status::Ok();
}

Model::Model() : impl_(new Impl) {}
Model::~Model() = default;

const std::vector<TensorInfo>& Model::inputs() const {
  return impl_->inputs;
}
const std::vector<TensorInfo>& Model::outputs() const {
  return impl_->outputs;
}

Status Model::LoadFile(const std::string& path, std::shared_ptr<Model>* out) {
  // A FIFO or device is refused without blocking (core/file_io.h).
  int fd = -1;
  uint64_t file_size = 0;
  QF_RETURN_IF_ERROR(fileio::OpenRegularFile(path, &fd, &file_size));
  std::shared_ptr<Model> m(new Model);
  m->impl_->source = path;
  size_t size = size_t(file_size);
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return Status(StatusCode::kIoError, path + ": mmap failed: " + std::strerror(errno));
    }
    m->impl_->mapped = p;
    m->impl_->mapped_size = size;
    m->impl_->base = static_cast<const uint8_t*>(p);
  }
  close(fd);
  m->impl_->size = size;
  QF_RETURN_IF_ERROR(m->impl_->Parse());
  *out = std::move(m);
  return Status::Ok();
}

Status Model::LoadMemory(const void* data, size_t size, std::shared_ptr<Model>* out) {
  if (!data && size) return Status(StatusCode::kInvalidArgument, "<memory>: null data");
  std::shared_ptr<Model> m(new Model);
  Impl& im = *m->impl_;
  im.source = "<memory>";
  if (reinterpret_cast<uintptr_t>(data) % kAlign == 0) {
    im.base = static_cast<const uint8_t*>(data);
  } else {  // constants must be aligned for in-place use: copy once
    im.owned.resize(size + kAlign);
    uintptr_t p = reinterpret_cast<uintptr_t>(im.owned.data());
    size_t pad = (kAlign - p % kAlign) % kAlign;
    if (size) std::memcpy(im.owned.data() + pad, data, size);
    im.base = im.owned.data() + pad;
  }
  im.size = size;
  QF_RETURN_IF_ERROR(im.Parse());
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace qfold
