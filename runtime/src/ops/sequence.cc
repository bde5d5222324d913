// Sequence ops run on sequence values (core/sequence.h) when the converter
// cannot take a sequence apart at conversion (converter/passes/
// lower_sequences.cc): a sequence graph input or output, or a length that
// depends on data. Without a value (the converter) infer gives the elements'
// common dtype and shape; with one (the runtime runs such models in dynamic
// mode, inferring each op just before it runs) the exact shapes.
#include "core/sequence.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "graph_runner.h"
#include "ops/shape_common.h"

namespace qfold {

bool MakeSequenceElement(DType dtype, const Shape& shape, const void* data, size_t bytes,
                         SequenceElement* out) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) return false;
  if (data && bytes)
    std::memcpy(p, data, bytes);
  else
    std::memset(p, 0, bytes);
  out->dtype = dtype;
  out->shape = shape;
  out->bytes = bytes;
  out->data = std::shared_ptr<const uint8_t>(
      static_cast<uint8_t*>(p), [](const uint8_t* q) { std::free(const_cast<uint8_t*>(q)); });
  return true;
}

namespace {

// The shape every element of {a, b} has: equal dims kept, others unknown;
// rank unknown when the ranks differ or one is unknown.
void MergeElementShape(const Tensor& b, bool first, Tensor* a) {
  if (first) {
    a->rank_known = b.rank_known;
    a->shape = b.rank_known ? b.shape : Shape{};
    return;
  }
  if (!a->rank_known) return;
  if (!b.rank_known || b.rank() != a->rank()) {
    a->rank_known = false;
    a->shape.clear();
    return;
  }
  for (int d = 0; d < a->rank(); ++d)
    if (a->shape[size_t(d)] != b.shape[size_t(d)]) a->shape[size_t(d)] = kUnknownDim;
}

void SetSequenceOutput(Tensor* y, DType dtype) {
  y->is_sequence = true;
  y->dtype = dtype;
  y->rank_known = false;
  y->shape.clear();
}

// The output's element shape from the elements of a known value.
void ShapeFromValue(const SequenceValue& v, Tensor* y) {
  for (size_t i = 0; i < v.elements.size(); ++i)
    MergeElementShape(v.elements[i].AsTensor(), i == 0, y);
}

Status SequenceInput(const KernelContext& ctx, int i, const Tensor** seq) {
  const Tensor* s = ctx.input(i);
  if (!s || !s->is_sequence)
    return ctx.Invalid("input " + std::to_string(i) + " must be a sequence");
  *seq = s;
  return Status::Ok();
}

Status TensorInput(const KernelContext& ctx, int i, const char* what) {
  const Tensor* t = ctx.input(i);
  if (t && t->is_sequence)
    return ctx.Invalid(std::string(what) + " '" + t->name + "' must be a tensor, not a sequence");
  return Status::Ok();
}

// A position input (a scalar int32/int64); `present` false when omitted or
// its value is not known yet.
Status ReadPosition(const KernelContext& ctx, int i, bool* present, int64_t* pos) {
  *present = false;
  const Tensor* p = ctx.input(i);
  if (!p) return Status::Ok();
  QF_RETURN_IF_ERROR(TensorInput(ctx, i, "position"));
  QF_RETURN_IF_ERROR(CheckIntDType(ctx, p, "position"));
  if (p->rank_known && p->shape_known() && p->numel() != 1)
    return ctx.Invalid("position must be a scalar, it has shape " + ShapeToString(p->shape));
  std::vector<int64_t> v;
  if (!ReadInts(p, &v)) return Status::Ok();
  *present = true;
  *pos = v[0];
  return Status::Ok();
}

// pos in [-len, len - 1 + extra], made non-negative.
Status CheckPosition(const KernelContext& ctx, int64_t len, int64_t extra, int64_t* pos) {
  if (*pos < -len || *pos > len - 1 + extra)
    return ctx.Invalid("position " + std::to_string(*pos) + " is outside [" + std::to_string(-len) +
                       ", " + std::to_string(len - 1 + extra) + "] for a sequence of " +
                       std::to_string(len) + " tensors");
  if (*pos < 0) *pos += len;
  return Status::Ok();
}

Status OutOfMemory(const KernelContext& ctx, size_t bytes) {
  return ctx.Error(StatusCode::kIoError,
                   "out of memory for a sequence element of " + std::to_string(bytes) + " bytes");
}

// --- SequenceEmpty ---------------------------------------------------------

Status InferSequenceEmpty(KernelContext& ctx) {
  const int64_t onnx = ctx.attr().GetInt("dtype", 1);  // ONNX FLOAT
  bool known = false;
  const DType dt = DTypeFromOnnxNumber(onnx, &known);
  if (!known) return ctx.Invalid("dtype " + std::to_string(onnx) + " is not an ONNX type");
  if (dt == DType::kUndefined)
    return ctx.Unsupported("sequences of ONNX type " + std::to_string(onnx) + " are not supported");
  SetSequenceOutput(ctx.output(0), dt);
  return Status::Ok();
}

Status RunSequenceEmpty(KernelContext& ctx) {
  ctx.output(0)->sequence->elements.clear();
  return Status::Ok();
}

// --- SequenceConstruct -----------------------------------------------------

Status InferSequenceConstruct(KernelContext& ctx) {
  Tensor* y = ctx.output(0);
  const Tensor* x0 = ctx.input(0);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* x = ctx.input(i);
    if (!x) return ctx.Invalid("input " + std::to_string(i) + " is omitted");
    QF_RETURN_IF_ERROR(TensorInput(ctx, i, "input"));
    if (x->dtype != x0->dtype)
      return ctx.Invalid("input '" + x->name + "' is " + dtype_name(x->dtype) + ", input '" +
                         x0->name + "' " + dtype_name(x0->dtype) +
                         ": a sequence holds one element type");
  }
  SetSequenceOutput(y, x0->dtype);
  for (int i = 0; i < ctx.num_inputs(); ++i) MergeElementShape(*ctx.input(i), i == 0, y);
  return Status::Ok();
}

Status RunSequenceConstruct(KernelContext& ctx) {
  SequenceValue& out = *ctx.output(0)->sequence;
  out.elements.assign(size_t(ctx.num_inputs()), SequenceElement());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* x = ctx.input(i);
    if (!MakeSequenceElement(x->dtype, x->shape, x->data, x->bytes(), &out.elements[size_t(i)]))
      return OutOfMemory(ctx, x->bytes());
  }
  return Status::Ok();
}

// --- SequenceInsert --------------------------------------------------------

Status InferSequenceInsert(KernelContext& ctx) {
  const Tensor* s = nullptr;
  QF_RETURN_IF_ERROR(SequenceInput(ctx, 0, &s));
  QF_RETURN_IF_ERROR(TensorInput(ctx, 1, "tensor"));
  const Tensor* x = ctx.input(1);
  if (x->dtype != s->dtype)
    return ctx.Invalid("tensor '" + x->name + "' is " + dtype_name(x->dtype) + ", sequence '" +
                       s->name + "' holds " + dtype_name(s->dtype));
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 2, &present, &pos));
  Tensor* y = ctx.output(0);
  SetSequenceOutput(y, s->dtype);
  if (s->sequence) {
    const int64_t len = int64_t(s->sequence->elements.size());
    if (present) QF_RETURN_IF_ERROR(CheckPosition(ctx, len, 1, &pos));
    ShapeFromValue(*s->sequence, y);
    MergeElementShape(*x, len == 0, y);
  } else {
    // Without the value an empty input sequence is possible: its shape says nothing.
    y->rank_known = false;
  }
  return Status::Ok();
}

Status RunSequenceInsert(KernelContext& ctx) {
  const SequenceValue& in = *ctx.input(0)->sequence;
  const Tensor* x = ctx.input(1);
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 2, &present, &pos));
  const int64_t len = int64_t(in.elements.size());
  if (present)
    QF_RETURN_IF_ERROR(CheckPosition(ctx, len, 1, &pos));
  else
    pos = len;
  SequenceElement e;
  if (!MakeSequenceElement(x->dtype, x->shape, x->data, x->bytes(), &e))
    return OutOfMemory(ctx, x->bytes());
  SequenceValue& out = *ctx.output(0)->sequence;
  if (&out != &in) out.elements = in.elements;
  out.elements.insert(out.elements.begin() + pos, std::move(e));
  return Status::Ok();
}

// --- SequenceErase ---------------------------------------------------------

Status InferSequenceErase(KernelContext& ctx) {
  const Tensor* s = nullptr;
  QF_RETURN_IF_ERROR(SequenceInput(ctx, 0, &s));
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 1, &present, &pos));
  Tensor* y = ctx.output(0);
  SetSequenceOutput(y, s->dtype);
  y->rank_known = s->rank_known;
  y->shape = s->shape;
  if (s->sequence) {
    const int64_t len = int64_t(s->sequence->elements.size());
    if (len == 0) return ctx.Invalid("sequence '" + s->name + "' is empty: nothing to erase");
    if (!present) pos = len - 1;
    QF_RETURN_IF_ERROR(CheckPosition(ctx, len, 0, &pos));
    SequenceValue rest = *s->sequence;
    rest.elements.erase(rest.elements.begin() + pos);
    ShapeFromValue(rest, y);
  }
  return Status::Ok();
}

Status RunSequenceErase(KernelContext& ctx) {
  const SequenceValue& in = *ctx.input(0)->sequence;
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 1, &present, &pos));
  const int64_t len = int64_t(in.elements.size());
  if (len == 0) return ctx.Invalid("sequence is empty: nothing to erase");
  if (!present) pos = len - 1;
  QF_RETURN_IF_ERROR(CheckPosition(ctx, len, 0, &pos));
  SequenceValue& out = *ctx.output(0)->sequence;
  if (&out != &in) out.elements = in.elements;
  out.elements.erase(out.elements.begin() + pos);
  return Status::Ok();
}

// --- SequenceAt ------------------------------------------------------------

Status InferSequenceAt(KernelContext& ctx) {
  const Tensor* s = nullptr;
  QF_RETURN_IF_ERROR(SequenceInput(ctx, 0, &s));
  if (!ctx.input(1)) return ctx.Invalid("position is omitted");
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 1, &present, &pos));
  Tensor* y = ctx.output(0);
  y->is_sequence = false;
  y->dtype = s->dtype;
  y->rank_known = s->rank_known;
  y->shape = s->shape;
  if (s->sequence && present) {
    const int64_t len = int64_t(s->sequence->elements.size());
    QF_RETURN_IF_ERROR(CheckPosition(ctx, len, 0, &pos));
    y->rank_known = true;
    y->shape = s->sequence->elements[size_t(pos)].shape;
  }
  return Status::Ok();
}

Status RunSequenceAt(KernelContext& ctx) {
  const SequenceValue& in = *ctx.input(0)->sequence;
  bool present = false;
  int64_t pos = 0;
  QF_RETURN_IF_ERROR(ReadPosition(ctx, 1, &present, &pos));
  QF_RETURN_IF_ERROR(CheckPosition(ctx, int64_t(in.elements.size()), 0, &pos));
  const SequenceElement& e = in.elements[size_t(pos)];
  Tensor* y = ctx.output(0);
  if (y->shape != e.shape || y->bytes() != e.bytes)
    return ctx.Error(StatusCode::kInternal, "output was sized for another element");
  if (e.bytes) std::memcpy(y->data, e.data.get(), e.bytes);
  return Status::Ok();
}

// --- SequenceLength --------------------------------------------------------

Status InferSequenceLength(KernelContext& ctx) {
  const Tensor* s = nullptr;
  QF_RETURN_IF_ERROR(SequenceInput(ctx, 0, &s));
  SetOutput(ctx.output(0), DType::kInt64, Shape{});
  ctx.output(0)->is_sequence = false;
  return Status::Ok();
}

Status RunSequenceLength(KernelContext& ctx) {
  const int64_t len = int64_t(ctx.input(0)->sequence->elements.size());
  std::memcpy(ctx.output(0)->data, &len, sizeof(len));
  return Status::Ok();
}

// --- SplitToSequence -------------------------------------------------------

// How the axis of length `dim` is cut: the split input's sizes, or equal
// chunks of `chunk` (a scalar split, else 1; the last piece smaller). Chunks
// are counted, not listed, since `dim` may be huge while shapes are inferred.
struct SplitPlan {
  bool known = false;          // false while the split values are data not yet known
  std::vector<int64_t> sizes;  // from a 1-D split input
  int64_t chunk = 0;           // > 0: equal chunks instead of `sizes`
  int64_t dim = 0;

  int64_t count() const {
    return chunk > 0 ? dim / chunk + (dim % chunk != 0) : int64_t(sizes.size());
  }
  int64_t size(int64_t i) const {
    return chunk > 0 ? std::min(chunk, dim - i * chunk) : sizes[size_t(i)];
  }
  // The size every piece shares, kUnknownDim when they differ or are unknown.
  int64_t uniform() const {
    if (!known || count() == 0) return kUnknownDim;
    if (chunk > 0) return dim % chunk == 0 || dim < chunk ? std::min(chunk, dim) : kUnknownDim;
    for (int64_t v : sizes)
      if (v != sizes[0]) return kUnknownDim;
    return sizes[0];
  }
};

Status PlanSplit(const KernelContext& ctx, int64_t dim, SplitPlan* plan) {
  *plan = SplitPlan();
  plan->dim = dim;
  const Tensor* s = ctx.input(1);
  std::vector<int64_t> split;
  if (s) {
    QF_RETURN_IF_ERROR(TensorInput(ctx, 1, "split"));
    QF_RETURN_IF_ERROR(CheckIntDType(ctx, s, "split"));
    if (s->rank_known && s->rank() > 1) return ctx.Invalid("split must be a scalar or 1-D");
    if (!ReadInts(s, &split)) return Status::Ok();
  }
  if (s && s->rank() == 1) {
    QF_RETURN_IF_ERROR(CheckSplitSizes(ctx, split, dim));
    plan->sizes = std::move(split);
    plan->known = true;
    return Status::Ok();
  }
  const int64_t chunk = s ? split[0] : 1;
  if (chunk <= 0) return ctx.Invalid("split must be positive, it is " + std::to_string(chunk));
  if (dim < 0) return Status::Ok();
  plan->chunk = chunk;
  plan->known = true;
  return Status::Ok();
}

Status SplitAxis(const KernelContext& ctx, const Tensor* x, int* axis) {
  const int64_t a = ctx.attr().GetInt("axis", 0);
  if (!NormalizeAxis(a, x->rank(), axis))
    return ctx.Invalid("axis " + std::to_string(a) + " out of range for input '" + x->name +
                       "' of rank " + std::to_string(x->rank()));
  return Status::Ok();
}

// keepdims = 0 drops the axis, allowed only without a split input.
bool DropsAxis(const KernelContext& ctx) {
  return !ctx.input(1) && ctx.attr().GetInt("keepdims", 1) == 0;
}

Status InferSplitToSequence(KernelContext& ctx) {
  QF_RETURN_IF_ERROR(TensorInput(ctx, 0, "input"));
  const Tensor* x = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, x, "input"));
  Tensor* y = ctx.output(0);
  SetSequenceOutput(y, x->dtype);
  if (!x->rank_known) return Status::Ok();
  int axis = 0;
  QF_RETURN_IF_ERROR(SplitAxis(ctx, x, &axis));
  SplitPlan plan;
  QF_RETURN_IF_ERROR(PlanSplit(ctx, x->shape[size_t(axis)], &plan));
  y->rank_known = true;
  y->shape = x->shape;
  y->shape[size_t(axis)] = plan.uniform();
  if (DropsAxis(ctx)) y->shape.erase(y->shape.begin() + axis);
  return Status::Ok();
}

// Outside a session (an op harness) nothing bounds memory: this default does.
constexpr size_t kDefaultSequenceLimit = size_t(256) << 20;

Status TooManyPieces(const KernelContext& ctx, int64_t count, size_t limit) {
  return ctx.Invalid("a sequence of " + std::to_string(count) + " tensors needs more than the " +
                     std::to_string(limit) + " bytes a session may allocate");
}

Status RunSplitToSequence(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  int axis = 0;
  QF_RETURN_IF_ERROR(SplitAxis(ctx, x, &axis));
  const int64_t dim = x->shape[size_t(axis)];
  SplitPlan plan;
  QF_RETURN_IF_ERROR(PlanSplit(ctx, dim, &plan));
  if (!plan.known) return ctx.Error(StatusCode::kInternal, "split is not known while running");
  const size_t es = dtype_storage_bytes(x->dtype, 1);
  const int64_t outer = DimProduct(x->shape, 0, axis);
  const int64_t inner = DimProduct(x->shape, axis + 1, x->rank());
  // Many small pieces cost far more than the input (a block and bookkeeping
  // each; an empty input may still have a huge axis): refused before
  // allocating when past the session's bound.
  const size_t limit = ctx.subgraphs ? ctx.subgraphs->max_memory_bytes : kDefaultSequenceLimit;
  const int64_t count = plan.count();
  if (uint64_t(count) > limit / SequenceElementFootprint(0))
    return TooManyPieces(ctx, count, limit);
  size_t footprint = 0;
  for (int64_t i = 0; i < count; ++i) {
    footprint += SequenceElementFootprint(size_t(plan.size(i) * inner * outer) * es);
    if (footprint > limit) return TooManyPieces(ctx, count, limit);
  }
  SequenceValue& out = *ctx.output(0)->sequence;
  out.elements.assign(size_t(count), SequenceElement());
  const bool drop = DropsAxis(ctx);
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t piece = plan.size(i);
    Shape shape = x->shape;
    shape[size_t(axis)] = piece;
    if (drop) shape.erase(shape.begin() + axis);
    const size_t row = size_t(piece * inner) * es;
    SequenceElement& e = out.elements[size_t(i)];
    if (!MakeSequenceElement(x->dtype, shape, nullptr, row * size_t(outer), &e))
      return OutOfMemory(ctx, row * size_t(outer));
    uint8_t* dst = const_cast<uint8_t*>(e.data.get());
    const uint8_t* src = x->ptr<uint8_t>() + size_t(at * inner) * es;
    for (int64_t o = 0; o < outer && row; ++o)
      std::memcpy(dst + size_t(o) * row, src + size_t(o * dim * inner) * es, row);
    at += piece;
  }
  return Status::Ok();
}

// --- ConcatFromSequence ----------------------------------------------------

// The output shape from element shapes (every element's when known).
Status ConcatShape(const KernelContext& ctx, const std::vector<Tensor>& elems, int rank,
                   int64_t axis_attr, bool new_axis, Shape* out, int* axis_out) {
  const int out_rank = rank + (new_axis ? 1 : 0);
  int axis = 0;
  if (!NormalizeAxis(axis_attr, out_rank, &axis))
    return ctx.Invalid("axis " + std::to_string(axis_attr) + " out of range for elements of rank " +
                       std::to_string(rank) + (new_axis ? " (new_axis: output rank " : " (") +
                       std::to_string(out_rank) + ")");
  *axis_out = axis;
  Shape s(size_t(out_rank), kUnknownDim);
  int64_t total = 0;
  bool total_known = true;
  for (size_t i = 0; i < elems.size(); ++i) {
    const Tensor& e = elems[i];
    if (e.rank() != rank)
      return ctx.Invalid("element " + std::to_string(i) + " has rank " + std::to_string(e.rank()) +
                         ", element 0 rank " + std::to_string(rank));
    Shape es = e.shape;
    if (new_axis) es.insert(es.begin() + axis, 1);
    for (int d = 0; d < out_rank; ++d) {
      if (d == axis) continue;
      const int64_t v = es[size_t(d)];
      if (v < 0) continue;
      if (s[size_t(d)] >= 0 && s[size_t(d)] != v)
        return ctx.Invalid("element " + std::to_string(i) + " has shape " + ShapeToString(e.shape) +
                           ": dim " + std::to_string(d) + " differs from the other elements'");
      s[size_t(d)] = v;
    }
    if (es[size_t(axis)] < 0)
      total_known = false;
    else
      total += es[size_t(axis)];
  }
  s[size_t(axis)] = total_known ? total : kUnknownDim;
  *out = std::move(s);
  return Status::Ok();
}

Status InferConcatFromSequence(KernelContext& ctx) {
  const Tensor* s = nullptr;
  QF_RETURN_IF_ERROR(SequenceInput(ctx, 0, &s));
  QF_RETURN_IF_ERROR(CheckByteDType(ctx, s, "sequence"));
  if (!ctx.attr().Has("axis")) return ctx.Invalid("attribute axis is missing");
  const int64_t axis = ctx.attr().GetInt("axis", 0);
  const bool new_axis = ctx.attr().GetInt("new_axis", 0) != 0;
  Tensor* y = ctx.output(0);
  y->is_sequence = false;
  y->dtype = s->dtype;
  if (s->sequence) {
    const SequenceValue& v = *s->sequence;
    if (v.elements.empty()) return ctx.Invalid("sequence '" + s->name + "' is empty");
    std::vector<Tensor> elems;
    for (const SequenceElement& e : v.elements) elems.push_back(e.AsTensor());
    int a = 0;
    y->rank_known = true;
    return ConcatShape(ctx, elems, elems[0].rank(), axis, new_axis, &y->shape, &a);
  }
  if (!s->rank_known) {
    SetOutputUnknownRank(y, s->dtype);
    return Status::Ok();
  }
  // The length is unknown: the concatenated axis is too.
  Tensor elem;
  elem.shape = s->shape;
  int a = 0;
  y->rank_known = true;
  QF_RETURN_IF_ERROR(ConcatShape(ctx, {elem}, s->rank(), axis, new_axis, &y->shape, &a));
  y->shape[size_t(a)] = kUnknownDim;
  return Status::Ok();
}

Status RunConcatFromSequence(KernelContext& ctx) {
  const SequenceValue& v = *ctx.input(0)->sequence;
  Tensor* y = ctx.output(0);
  const bool new_axis = ctx.attr().GetInt("new_axis", 0) != 0;
  int axis = 0;
  if (!NormalizeAxis(ctx.attr().GetInt("axis", 0), y->rank(), &axis))
    return ctx.Error(StatusCode::kInternal, "axis out of range while running");
  const size_t es = dtype_storage_bytes(y->dtype, 1);
  const int64_t outer = DimProduct(y->shape, 0, axis);
  const int64_t inner = DimProduct(y->shape, axis + 1, y->rank());
  const size_t out_row = size_t(y->shape[size_t(axis)] * inner) * es;
  size_t at = 0;
  for (const SequenceElement& e : v.elements) {
    const int64_t len = new_axis ? 1 : e.shape[size_t(axis)];
    const size_t row = size_t(len * inner) * es;
    for (int64_t o = 0; o < outer && row; ++o)
      std::memcpy(y->ptr<uint8_t>() + size_t(o) * out_row + at, e.data.get() + size_t(o) * row,
                  row);
    at += row;
  }
  return Status::Ok();
}

// Sequence values exist only in a session, which points every sequence
// tensor at one; run elsewhere (an op harness calling infer then run), an op
// refuses instead of dereferencing nothing.
template <Status (*Run)(KernelContext&)>
Status RunWithValues(KernelContext& ctx) {
  for (const std::vector<Tensor*>* list : {&ctx.inputs, &ctx.outputs})
    for (const Tensor* t : *list)
      if (t && t->is_sequence && !t->sequence)
        return ctx.Unsupported("sequence '" + t->name +
                               "' has no value: sequences run in a session");
  return Run(ctx);
}

// Every sequence op reads its sequence's value (the session runs models with
// sequences in dynamic mode), so every input counts as a value input.
OpDef SequenceOp(const char* type, Status (*infer)(KernelContext&), Status (*run)(KernelContext&),
                 int min_inputs, int max_inputs) {
  OpDef d{type, infer, run, ~0u, false, min_inputs, max_inputs};
  d.traits = kTraitSequence;
  return d;
}

}  // namespace

#define QF_SEQUENCE_OP(NAME, MIN, MAX)                                                         \
  const OpDef& OpDef_##NAME() {                                                                \
    static const OpDef d = SequenceOp(#NAME, Infer##NAME, RunWithValues<Run##NAME>, MIN, MAX); \
    return d;                                                                                  \
  }
QF_SEQUENCE_OP(SequenceEmpty, 0, 0)
QF_SEQUENCE_OP(SequenceConstruct, 1, 1 << 20)
QF_SEQUENCE_OP(SequenceInsert, 2, 3)
QF_SEQUENCE_OP(SequenceErase, 1, 2)
QF_SEQUENCE_OP(SequenceAt, 2, 2)
QF_SEQUENCE_OP(SequenceLength, 1, 1)
QF_SEQUENCE_OP(SplitToSequence, 1, 2)
QF_SEQUENCE_OP(ConcatFromSequence, 1, 1)
#undef QF_SEQUENCE_OP

}  // namespace qfold
