// If, Loop and Scan: operators that run subgraphs (graph_runner.h). The
// converter makes each subgraph self-contained: the enclosing values it reads
// are the op's last inputs (attribute captured_inputs counts them) and the
// subgraph's last inputs. Each subgraph is planned with its own arena for the
// shapes it gets; a Loop re-plans its body only when a carried value changes
// shape. Output shapes that only running can tell (a Loop stopped by its
// condition) send the session into dynamic mode (OpDef::sizes_outputs).
#include <algorithm>
#include <cstring>

#include "core/op.h"
#include "core/shape_util.h"
#include "graph_runner.h"

namespace qfold {
namespace {

ControlFlowState& State(KernelContext& ctx) {
  return *static_cast<ControlFlowState*>(ctx.state);
}

int Captured(const KernelContext& ctx) {
  return int(ctx.attr().GetInt("captured_inputs", 0));
}

// Element bytes of a dtype whose values can be sliced byte-wise.
Status SliceableBytes(KernelContext& ctx, DType dt, const std::string& what, size_t* out) {
  *out = dtype_size(dt);
  if (*out == 0 || dtype_storage_bytes(dt, 2) != 2 * *out)
    return ctx.Unsupported(what + " of dtype " + dtype_name(dt) + " (packed sub-byte values)");
  return Status::Ok();
}

// A scalar condition or count: one element of bool/uint8 (condition) or int64.
Status CheckScalar(KernelContext& ctx, const Tensor* t, DType want, const char* what) {
  if (!t) return Status::Ok();
  bool one = t->rank_known && std::all_of(t->shape.begin(), t->shape.end(),
                                          [](int64_t d) { return d == 1 || d < 0; });
  bool dtype_ok = t->dtype == want || (want == DType::kBool && t->dtype == DType::kUInt8);
  if (!one || !dtype_ok)
    return ctx.Invalid(std::string(what) + " '" + t->name + "' is " + dtype_name(t->dtype) + " " +
                       ShapeToString(t->shape) + ", expected one " + dtype_name(want));
  return Status::Ok();
}

// Writes `src` (a subgraph's result) into output `o`: into the buffer the
// session planned (whose shape must match), or, when the op sizes its
// outputs, into one the op owns.
Status WriteOutput(KernelContext& ctx, int o, DType dtype, const Shape& shape, const void* src) {
  Tensor* out = ctx.output(o);
  if (!out) return Status::Ok();
  if (out->boxed())
    return ctx.Error(StatusCode::kInternal, "a sequence or optional written as a tensor");
  if (ctx.op_allocates_outputs) {
    out->dtype = dtype;
    out->shape = shape;
    out->rank_known = true;
    ControlFlowState& st = State(ctx);
    if (st.outputs.size() < size_t(ctx.num_outputs())) st.outputs.resize(size_t(ctx.num_outputs()));
    out->data = st.outputs[size_t(o)].Reserve(out->bytes());
    if (!out->data && out->bytes())
      return ctx.Error(StatusCode::kIoError, "out of memory for output '" + out->name + "'");
  } else if (out->dtype != dtype || out->shape != shape) {
    return ctx.Invalid("output '" + out->name + "' was planned as " + dtype_name(out->dtype) + " " +
                       ShapeToString(out->shape) + " but the subgraph gave " + dtype_name(dtype) +
                       " " + ShapeToString(shape));
  }
  if (src != out->data && out->bytes()) std::memcpy(out->data, src, out->bytes());
  return Status::Ok();
}

// `v` as a value of the same type, optional or not as `optional` says: a
// Loop's carried value may enter as an optional and leave the body as its
// value (ONNX's test_loop16_seq_none), or the reverse. `dst` shares what it
// can; a tensor wrapped into an optional is copied into `box`. Unwrapping a
// none is an error naming the node.
Status AsKind(const KernelContext& ctx, const Tensor& v, bool optional, Tensor* dst,
              SequenceValue* box) {
  *dst = v;
  dst->is_optional = optional;
  if (v.is_optional == optional) return Status::Ok();
  if (v.boxed() && !v.sequence)
    return ctx.Error(StatusCode::kInternal, "'" + v.name + "' has no value");
  if (optional) {
    // A plain sequence's value is never none: the optional shares it.
    if (v.is_sequence) return Status::Ok();
    box->none = false;
    box->elements.clear();
    if (v.data) {  // only shapes matter while planning
      SequenceElement e;
      if (!MakeSequenceElement(v.dtype, v.shape, v.data, v.bytes(), &e))
        return ctx.Error(StatusCode::kIoError, "out of memory wrapping '" + v.name + "'");
      box->elements.push_back(std::move(e));
    }
    dst->sequence = box;
    dst->data = nullptr;
    return Status::Ok();
  }
  if (v.sequence->none)
    return ctx.Invalid("'" + v.name + "' is none where a value is needed (" +
                       KindName(false, v.is_sequence, v.dtype) + ")");
  if (v.is_sequence) return Status::Ok();
  if (v.sequence->elements.size() != 1)
    return ctx.Error(StatusCode::kInternal, "optional '" + v.name + "' holds " +
                                                std::to_string(v.sequence->elements.size()) +
                                                " values, not one");
  const SequenceElement& e = v.sequence->elements[0];
  dst->sequence = nullptr;
  dst->data = const_cast<uint8_t*>(e.data.get());
  dst->shape = e.shape;
  dst->rank_known = true;
  return Status::Ok();
}

// Writes a subgraph's result `v` (a tensor, sequence or optional) into output
// `o`, wrapped into or unwrapped from an optional as the output is.
Status WriteValue(KernelContext& ctx, int o, const Tensor& v) {
  Tensor* out = ctx.output(o);
  if (!out) return Status::Ok();
  if (out->is_sequence != v.is_sequence || out->boxed() != (out->sequence != nullptr) ||
      (v.boxed() && !v.sequence))
    return ctx.Invalid("output '" + out->name + "' is " + KindName(*out) +
                       " but the subgraph gave " + KindName(v));
  Tensor value;
  SequenceValue box;
  QF_RETURN_IF_ERROR(AsKind(ctx, v, out->is_optional, &value, &box));
  if (!value.boxed()) return WriteOutput(ctx, o, value.dtype, value.shape, value.data);
  // Elements are immutable: the output shares them.
  if (out->sequence != value.sequence) *out->sequence = *value.sequence;
  return Status::Ok();
}

// The shape two plans agree on: equal dims kept, others unknown.
Shape MergeShapes(const Shape& a, const Shape& b) {
  Shape s = a;
  for (size_t d = 0; d < s.size(); ++d)
    if (a[d] != b[d]) s[d] = kUnknownDim;
  return s;
}

// Copies iteration `t`'s result (`per_iter`) into a scan output of shape
// [..., T at `axis`, ...]: the slice sits at index `pos` along `axis`.
void InsertSlice(uint8_t* dst, const uint8_t* src, const Shape& per_iter, int axis, int64_t T,
                 int64_t pos, size_t esize) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= per_iter[size_t(d)];
  for (size_t d = size_t(axis); d < per_iter.size(); ++d) inner *= per_iter[d];
  const size_t row = size_t(inner) * esize;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + (size_t(o * T + pos)) * row, src + size_t(o) * row, row);
}

// ---------------------------------------------------------------- If

Status PrepareIf(KernelContext& ctx, std::shared_ptr<void>* out) {
  auto st = std::make_shared<ControlFlowState>();
  st->runners.resize(2);
  QF_RETURN_IF_ERROR(MakeSubgraphRunner(ctx, "then_branch", &st->runners[0]));
  QF_RETURN_IF_ERROR(MakeSubgraphRunner(ctx, "else_branch", &st->runners[1]));
  for (const auto& r : st->runners) {
    if (r->num_outputs() != ctx.num_outputs())
      return ctx.Invalid(r->label() + " has " + std::to_string(r->num_outputs()) +
                         " outputs, the If " + std::to_string(ctx.num_outputs()));
    if (r->num_inputs() != ctx.num_inputs() - 1)
      return ctx.Invalid(r->label() + " takes " + std::to_string(r->num_inputs()) +
                         " captured values, the If passes " + std::to_string(ctx.num_inputs() - 1));
  }
  *out = st;
  return Status::Ok();
}

std::vector<const Tensor*> IfCaptures(const KernelContext& ctx) {
  return std::vector<const Tensor*>(ctx.inputs.begin() + 1, ctx.inputs.end());
}

Status InferIf(KernelContext& ctx) {
  if (!ctx.state) return ctx.Unsupported("runs its branches only inside a session");
  const Tensor* cond = ctx.input(0);
  QF_RETURN_IF_ERROR(CheckScalar(ctx, cond, DType::kBool, "condition"));
  ControlFlowState& st = State(ctx);
  const auto captures = IfCaptures(ctx);
  for (const auto& r : st.runners) QF_RETURN_IF_ERROR(r->Plan(captures));
  const int taken = cond->data ? (*static_cast<const uint8_t*>(cond->data) ? 0 : 1) : -1;
  for (int o = 0; o < ctx.num_outputs(); ++o) {
    Tensor* out = ctx.output(o);
    const Tensor t = st.runners[0]->planned_output(o);
    const Tensor e = st.runners[1]->planned_output(o);
    if (t.dtype != e.dtype || t.is_sequence != e.is_sequence || t.is_optional != e.is_optional)
      return ctx.Invalid("output " + std::to_string(o) + " is " + KindName(t) + " " +
                         ShapeToString(t.shape) + " in then_branch but " + KindName(e) + " " +
                         ShapeToString(e.shape) + " in else_branch");
    if (!out) continue;
    out->dtype = t.dtype;
    out->is_sequence = t.is_sequence;
    out->is_optional = t.is_optional;
    out->rank_known = true;
    if (taken >= 0) {
      const Tensor& b = taken == 0 ? t : e;
      out->shape = b.shape;
      out->rank_known = b.rank_known;
    } else if (t.rank_known && e.rank_known && t.rank() == e.rank()) {
      out->shape = MergeShapes(t.shape, e.shape);
    } else {  // ONNX lets branches differ in rank: known once the condition is
      out->rank_known = false;
      out->shape.clear();
    }
  }
  return Status::Ok();
}

Status RunIf(KernelContext& ctx) {
  ControlFlowState& st = State(ctx);
  const bool cond = *static_cast<const uint8_t*>(ctx.input(0)->data) != 0;
  GraphRunner& r = *st.runners[cond ? 0 : 1];
  QF_RETURN_IF_ERROR(r.Run(IfCaptures(ctx)));
  for (int o = 0; o < ctx.num_outputs(); ++o) QF_RETURN_IF_ERROR(WriteValue(ctx, o, r.output(o)));
  return Status::Ok();
}

// ---------------------------------------------------------------- Loop
// Inputs: M (optional), cond (optional), N carried values, captures.
// Body: (iteration, cond, carried..., captures...) -> (cond, carried..., scan outputs...).

int LoopCarried(const KernelContext& ctx) {
  return ctx.num_inputs() - 2 - Captured(ctx);
}

Status PrepareLoop(KernelContext& ctx, std::shared_ptr<void>* out) {
  if (!ctx.input(0) && !ctx.input(1))
    return ctx.Invalid("has neither a trip count nor a condition: it would never end");
  auto st = std::make_shared<ControlFlowState>();
  st->runners.resize(1);
  QF_RETURN_IF_ERROR(MakeSubgraphRunner(ctx, "body", &st->runners[0]));
  const GraphRunner& body = *st->runners[0];
  const int n = LoopCarried(ctx);
  if (n < 0 || body.num_inputs() != ctx.num_inputs())
    return ctx.Invalid("body takes " + std::to_string(body.num_inputs()) + " inputs, the Loop " +
                       std::to_string(ctx.num_inputs()) + " (M, cond, carried, captured)");
  if (body.num_outputs() != 1 + ctx.num_outputs() || ctx.num_outputs() < n)
    return ctx.Invalid("body has " + std::to_string(body.num_outputs()) +
                       " outputs, expected the condition and the Loop's " +
                       std::to_string(ctx.num_outputs()));
  st->iteration_tensor.name = "iteration";
  st->iteration_tensor.dtype = DType::kInt64;
  st->iteration_tensor.data = &st->iteration;
  st->condition_tensor.name = "condition";
  st->condition_tensor.dtype = DType::kBool;
  st->condition_tensor.data = &st->condition;
  for (auto& c : st->carried) {
    c.resize(size_t(n));
    for (int i = 0; i < 2; ++i) st->carried_tensors[i].resize(size_t(n));
  }
  *out = st;
  return Status::Ok();
}

// The body's inputs for the first iteration: the carried values as the body
// declares them (wrapped into or unwrapped from optionals), then the captures.
Status LoopBodyInputs(KernelContext& ctx, std::vector<const Tensor*>* in) {
  ControlFlowState& st = State(ctx);
  const GraphRunner& body = *st.runners[0];
  *in = {&st.iteration_tensor, &st.condition_tensor};
  in->insert(in->end(), ctx.inputs.begin() + 2, ctx.inputs.end());
  const int n = LoopCarried(ctx);
  st.coerced_tensors[2].resize(size_t(n));
  st.coerced_values[2].resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const Tensor& v = *ctx.input(2 + i);
    if (v.is_optional == body.input_is_optional(2 + i)) continue;
    QF_RETURN_IF_ERROR(AsKind(ctx, v, !v.is_optional, &st.coerced_tensors[2][size_t(i)],
                              &st.coerced_values[2][size_t(i)]));
    (*in)[size_t(2 + i)] = &st.coerced_tensors[2][size_t(i)];
  }
  return Status::Ok();
}

Status InferLoop(KernelContext& ctx) {
  if (!ctx.state) return ctx.Unsupported("runs its body only inside a session");
  const Tensor* m = ctx.input(0);
  const Tensor* cond = ctx.input(1);
  QF_RETURN_IF_ERROR(CheckScalar(ctx, m, DType::kInt64, "trip count"));
  QF_RETURN_IF_ERROR(CheckScalar(ctx, cond, DType::kBool, "condition"));
  ControlFlowState& st = State(ctx);
  GraphRunner& body = *st.runners[0];
  std::vector<const Tensor*> in;
  QF_RETURN_IF_ERROR(LoopBodyInputs(ctx, &in));
  QF_RETURN_IF_ERROR(body.Plan(in));
  const int n = LoopCarried(ctx);
  // Iterations known before running: M given, the condition given (or absent)
  // and passed through unchanged by the body.
  int64_t trips = kUnknownDim;
  const bool cond_fixed = !cond || (cond->data && body.OutputPassesInput(0, 1));
  if (m && m->data && cond_fixed) {
    const bool go = !cond || *static_cast<const uint8_t*>(cond->data) != 0;
    trips = go ? std::max<int64_t>(0, *static_cast<const int64_t*>(m->data)) : 0;
  }
  for (int o = 0; o < ctx.num_outputs(); ++o) {
    Tensor* out = ctx.output(o);
    const Tensor v = body.planned_output(1 + o);
    if (o < n) {
      // The body may make an optional carried value plain, or the reverse.
      const Tensor& init = *ctx.input(2 + o);
      if (v.dtype != init.dtype || v.is_sequence != init.is_sequence)
        return ctx.Invalid("carried value " + std::to_string(o) + " ('" + init.name + "') is " +
                           KindName(init) + " but the body returns " + KindName(v));
    } else if (v.boxed()) {
      return ctx.Unsupported("scan output " + std::to_string(o - n) + " is " +
                             (v.is_optional ? "an optional" : "a sequence") +
                             "; scan outputs are tensors stacked over iterations");
    }
    if (!out) continue;
    out->dtype = v.dtype;
    out->is_sequence = v.is_sequence;
    out->is_optional = v.is_optional;
    out->rank_known = true;
    if (o < n && v.is_sequence) {
      // What every element has: the initial value's and the body's agree.
      const Tensor& init = *ctx.input(2 + o);
      out->rank_known = v.rank_known && init.rank_known && v.rank() == init.rank();
      out->shape = out->rank_known ? MergeShapes(init.shape, v.shape) : Shape();
    } else if (o < n) {
      // Invariant when one iteration keeps the shape; a changing one is known after the run.
      const Tensor& init = *ctx.input(2 + o);
      out->shape = v.rank() == init.rank() ? MergeShapes(init.shape, v.shape)
                                           : Shape(size_t(init.rank()), kUnknownDim);
      if (trips == 0) out->shape = init.shape;
    } else {
      out->shape = v.shape;
      out->shape.insert(out->shape.begin(), trips);
    }
  }
  return Status::Ok();
}

Status RunLoop(KernelContext& ctx) {
  ControlFlowState& st = State(ctx);
  GraphRunner& body = *st.runners[0];
  const int n = LoopCarried(ctx), k_scan = ctx.num_outputs() - n;
  const int64_t max_trips =
      ctx.input(0) ? *static_cast<const int64_t*>(ctx.input(0)->data) : INT64_MAX;
  st.condition = ctx.input(1) ? *static_cast<const uint8_t*>(ctx.input(1)->data) != 0 : true;
  std::vector<const Tensor*> in;
  QF_RETURN_IF_ERROR(LoopBodyInputs(ctx, &in));
  for (int i = 0; i < 2; ++i) {
    st.coerced_tensors[i].resize(size_t(LoopCarried(ctx)));
    st.coerced_values[i].resize(size_t(LoopCarried(ctx)));
  }
  std::vector<Shape> per_iter(static_cast<size_t>(k_scan));
  std::vector<size_t> per_iter_bytes(size_t(k_scan), 0);
  int parity = 0;
  int64_t it = 0;
  const int64_t max_iterations = body.env().max_loop_iterations;
  // Scan outputs the op grows itself stay within the session's memory bound.
  size_t scan_bytes = 0;
  for (; it < max_trips && st.condition; ++it) {
    if (max_iterations > 0 && it == max_iterations)
      return ctx.Invalid("runs more than the session's max_loop_iterations (" +
                         std::to_string(max_iterations) + ")");
    st.iteration = it;
    QF_RETURN_IF_ERROR(body.Run(in));
    const Tensor& c = body.output(0);
    if (c.numel() != 1 || (c.dtype != DType::kBool && c.dtype != DType::kUInt8))
      return ctx.Invalid(std::string("body's condition output is ") + dtype_name(c.dtype) + " " +
                         ShapeToString(c.shape) + ", expected one bool");
    const bool next_cond = *static_cast<const uint8_t*>(c.data) != 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& v = body.output(1 + i);
      Tensor& dst = st.carried_tensors[parity][size_t(i)];
      dst.name = v.name;
      dst.dtype = v.dtype;
      dst.shape = v.shape;
      dst.rank_known = v.rank_known;
      dst.is_sequence = v.is_sequence;
      dst.is_optional = v.is_optional;
      if (v.boxed()) {
        // Elements are shared, not copied; the body's value is rewritten next iteration.
        std::vector<SequenceValue>& seqs = st.carried_sequences[parity];
        if (seqs.size() < size_t(n)) seqs.resize(size_t(n));
        seqs[size_t(i)] = *v.sequence;
        dst.sequence = &seqs[size_t(i)];
        dst.data = nullptr;
      } else {
        dst.sequence = nullptr;
        dst.data = st.carried[parity][size_t(i)].Reserve(v.bytes());
        if (!dst.data && v.bytes()) return ctx.Error(StatusCode::kIoError, "out of memory");
        if (v.bytes()) std::memcpy(dst.data, v.data, v.bytes());
      }
      in[size_t(2 + i)] = &dst;
      if (dst.is_optional != body.input_is_optional(2 + i)) {
        Tensor& wrapped = st.coerced_tensors[parity][size_t(i)];
        QF_RETURN_IF_ERROR(
            AsKind(ctx, dst, !dst.is_optional, &wrapped, &st.coerced_values[parity][size_t(i)]));
        in[size_t(2 + i)] = &wrapped;
      }
    }
    parity ^= 1;
    for (int k = 0; k < k_scan; ++k) {
      const Tensor& v = body.output(1 + n + k);
      Tensor* out = ctx.output(n + k);
      if (it == 0) {
        per_iter[size_t(k)] = v.shape;
        QF_RETURN_IF_ERROR(SliceableBytes(ctx, v.dtype, "scan output", &per_iter_bytes[size_t(k)]));
        per_iter_bytes[size_t(k)] *= size_t(v.numel());
      } else if (v.shape != per_iter[size_t(k)]) {
        return ctx.Invalid("scan output " + std::to_string(k) + " has shape " +
                           ShapeToString(v.shape) + " at iteration " + std::to_string(it) + ", " +
                           ShapeToString(per_iter[size_t(k)]) + " before");
      }
      if (!out) continue;
      const size_t bytes = per_iter_bytes[size_t(k)];
      uint8_t* base;
      if (ctx.op_allocates_outputs) {
        scan_bytes += bytes;
        if (scan_bytes > body.env().max_memory_bytes)
          return ctx.Invalid("scan output '" + out->name + "' grows past the " +
                             std::to_string(body.env().max_memory_bytes) +
                             " bytes a session may allocate at iteration " + std::to_string(it));
        if (st.outputs.size() < size_t(ctx.num_outputs()))
          st.outputs.resize(size_t(ctx.num_outputs()));
        base = static_cast<uint8_t*>(
            st.outputs[size_t(n + k)].Grow(size_t(it + 1) * bytes, size_t(it) * bytes));
        if (!base && bytes) return ctx.Error(StatusCode::kIoError, "out of memory");
      } else {
        if (size_t(it + 1) * bytes > out->bytes() || v.dtype != out->dtype)
          return ctx.Invalid("scan output '" + out->name + "' was planned as " +
                             ShapeToString(out->shape) + ", the loop runs longer");
        base = static_cast<uint8_t*>(out->data);
      }
      if (bytes) std::memcpy(base + size_t(it) * bytes, v.data, bytes);
    }
    st.condition = next_cond;
  }
  for (int i = 0; i < n; ++i) QF_RETURN_IF_ERROR(WriteValue(ctx, i, *in[size_t(2 + i)]));
  for (int k = 0; k < k_scan; ++k) {
    Tensor* out = ctx.output(n + k);
    if (!out) continue;
    Shape shape = it > 0 ? per_iter[size_t(k)] : body.output(1 + n + k).shape;
    for (int64_t& d : shape) d = std::max<int64_t>(d, 0);  // no iteration: empty
    shape.insert(shape.begin(), it);
    if (ctx.op_allocates_outputs) {
      out->dtype = body.output(1 + n + k).dtype;
      out->shape = shape;
      out->rank_known = true;
      if (st.outputs.size() < size_t(ctx.num_outputs()))
        st.outputs.resize(size_t(ctx.num_outputs()));
      out->data = st.outputs[size_t(n + k)].Grow(out->bytes(), out->bytes());
      if (!out->data && out->bytes()) return ctx.Error(StatusCode::kIoError, "out of memory");
    } else if (out->shape != shape) {
      return ctx.Invalid("scan output '" + out->name + "' was planned as " +
                         ShapeToString(out->shape) + ", the loop gave " + ShapeToString(shape));
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Scan (opset 9+)
// Inputs: N states, S scan inputs, captures. Body: (states..., one slice of
// each scan input..., captures...) -> (states..., one slice of each scan output...).

struct ScanLayout {
  int states = 0, scan_inputs = 0, scan_outputs = 0;
  std::vector<int> in_axes, in_dirs, out_axes, out_dirs;
};

Status ReadScanLayout(KernelContext& ctx, ScanLayout* s) {
  s->scan_inputs = int(ctx.attr().GetInt("num_scan_inputs", 0));
  s->states = ctx.num_inputs() - s->scan_inputs - Captured(ctx);
  s->scan_outputs = ctx.num_outputs() - s->states;
  if (s->scan_inputs < 1 || s->states < 0 || s->scan_outputs < 0)
    return ctx.Invalid("num_scan_inputs " + std::to_string(s->scan_inputs) + " does not fit its " +
                       std::to_string(ctx.num_inputs()) + " inputs and " +
                       std::to_string(ctx.num_outputs()) + " outputs");
  auto read = [&](const char* name, int count, std::vector<int>* v) -> Status {
    std::vector<int64_t> a = ctx.attr().GetInts(name);
    if (a.empty()) a.assign(size_t(count), 0);
    if (int(a.size()) != count)
      return ctx.Invalid(std::string(name) + " has " + std::to_string(a.size()) +
                         " entries, expected " + std::to_string(count));
    v->assign(a.begin(), a.end());
    return Status::Ok();
  };
  QF_RETURN_IF_ERROR(read("scan_input_axes", s->scan_inputs, &s->in_axes));
  QF_RETURN_IF_ERROR(read("scan_input_directions", s->scan_inputs, &s->in_dirs));
  QF_RETURN_IF_ERROR(read("scan_output_axes", s->scan_outputs, &s->out_axes));
  QF_RETURN_IF_ERROR(read("scan_output_directions", s->scan_outputs, &s->out_dirs));
  return Status::Ok();
}

Status PrepareScan(KernelContext& ctx, std::shared_ptr<void>* out) {
  ScanLayout s;
  QF_RETURN_IF_ERROR(ReadScanLayout(ctx, &s));
  auto st = std::make_shared<ControlFlowState>();
  st->runners.resize(1);
  QF_RETURN_IF_ERROR(MakeSubgraphRunner(ctx, "body", &st->runners[0]));
  const GraphRunner& body = *st->runners[0];
  if (body.num_inputs() != ctx.num_inputs() || body.num_outputs() != ctx.num_outputs())
    return ctx.Invalid("body has " + std::to_string(body.num_inputs()) + " inputs and " +
                       std::to_string(body.num_outputs()) + " outputs, the Scan " +
                       std::to_string(ctx.num_inputs()) + " and " +
                       std::to_string(ctx.num_outputs()));
  for (int i = 0; i < 2; ++i) {
    st->carried[i].resize(size_t(s.states));
    st->carried_tensors[i].resize(size_t(s.states));
  }
  st->slices.resize(size_t(s.scan_inputs));
  st->slice_tensors.resize(size_t(s.scan_inputs));
  *out = st;
  return Status::Ok();
}

// Sequence length and each scan input's normalized axis; sets the slice tensors' shapes.
Status ScanSlices(KernelContext& ctx, const ScanLayout& s, int64_t* T, std::vector<int>* axes) {
  ControlFlowState& st = State(ctx);
  *T = kUnknownDim;
  axes->clear();
  for (int j = 0; j < s.scan_inputs; ++j) {
    const Tensor* x = ctx.input(s.states + j);
    int axis = 0;
    if (!x || !x->rank_known || !NormalizeAxis(s.in_axes[size_t(j)], x->rank(), &axis))
      return ctx.Invalid("scan input " + std::to_string(j) + " has no axis " +
                         std::to_string(s.in_axes[size_t(j)]));
    const int64_t len = x->shape[size_t(axis)];
    if (*T >= 0 && len >= 0 && len != *T)
      return ctx.Invalid("scan inputs disagree on the sequence length: " + std::to_string(*T) +
                         " and " + std::to_string(len) + " ('" + x->name + "')");
    if (len >= 0) *T = len;
    axes->push_back(axis);
    Tensor& slice = st.slice_tensors[size_t(j)];
    slice.name = x->name;
    slice.dtype = x->dtype;
    slice.shape = x->shape;
    slice.shape.erase(slice.shape.begin() + axis);
  }
  return Status::Ok();
}

std::vector<const Tensor*> ScanBodyInputs(KernelContext& ctx, const ScanLayout& s) {
  ControlFlowState& st = State(ctx);
  std::vector<const Tensor*> in(ctx.inputs.begin(), ctx.inputs.begin() + s.states);
  for (int j = 0; j < s.scan_inputs; ++j) in.push_back(&st.slice_tensors[size_t(j)]);
  in.insert(in.end(), ctx.inputs.begin() + s.states + s.scan_inputs, ctx.inputs.end());
  return in;
}

Status InferScan(KernelContext& ctx) {
  if (!ctx.state) return ctx.Unsupported("runs its body only inside a session");
  ScanLayout s;
  QF_RETURN_IF_ERROR(ReadScanLayout(ctx, &s));
  // States, scan inputs and outputs are tensors (the spec's V); values the
  // body captures may be sequences, passed as Loop passes them (not optionals).
  auto kind = [](const Tensor* t) {
    return std::string(t->is_optional ? "an optional" : "a sequence");
  };
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (!t || !t->boxed()) continue;
    if (i < s.states + s.scan_inputs)
      return ctx.Invalid("input '" + t->name + "' is " + kind(t) + "; Scan's inputs are tensors");
    if (t->is_optional)
      return ctx.Unsupported("reads optional '" + t->name + "'; Scan bodies take no optionals");
  }
  for (const Tensor* t : ctx.outputs)
    if (t && t->boxed())
      return ctx.Invalid("output '" + t->name + "' is " + kind(t) + "; Scan's outputs are tensors");
  int64_t T = 0;
  std::vector<int> axes;
  QF_RETURN_IF_ERROR(ScanSlices(ctx, s, &T, &axes));
  GraphRunner& body = *State(ctx).runners[0];
  QF_RETURN_IF_ERROR(body.Plan(ScanBodyInputs(ctx, s)));
  for (int o = 0; o < ctx.num_outputs(); ++o) {
    Tensor* out = ctx.output(o);
    const Tensor v = body.planned_output(o);
    if (!out) continue;
    out->dtype = v.dtype;
    out->rank_known = true;
    if (o < s.states) {
      const Tensor& init = *ctx.input(o);
      out->shape = v.rank() == init.rank() ? MergeShapes(init.shape, v.shape)
                                           : Shape(size_t(init.rank()), kUnknownDim);
      if (T == 0) out->shape = init.shape;
      continue;
    }
    int axis = 0;
    if (!NormalizeAxis(s.out_axes[size_t(o - s.states)], v.rank() + 1, &axis))
      return ctx.Invalid("scan_output_axes " + std::to_string(s.out_axes[size_t(o - s.states)]) +
                         " is out of range for scan output '" + out->name + "' of rank " +
                         std::to_string(v.rank() + 1));
    out->shape = v.shape;
    out->shape.insert(out->shape.begin() + axis, T);
  }
  return Status::Ok();
}

Status RunScan(KernelContext& ctx) {
  ScanLayout s;
  QF_RETURN_IF_ERROR(ReadScanLayout(ctx, &s));
  ControlFlowState& st = State(ctx);
  int64_t T = 0;
  std::vector<int> axes;
  QF_RETURN_IF_ERROR(ScanSlices(ctx, s, &T, &axes));
  GraphRunner& body = *st.runners[0];
  std::vector<const Tensor*> in = ScanBodyInputs(ctx, s);
  std::vector<size_t> in_esize(size_t(s.scan_inputs)), out_esize(size_t(s.scan_outputs));
  for (int j = 0; j < s.scan_inputs; ++j) {
    QF_RETURN_IF_ERROR(
        SliceableBytes(ctx, ctx.input(s.states + j)->dtype, "scan input", &in_esize[size_t(j)]));
    Tensor& slice = st.slice_tensors[size_t(j)];
    slice.data = st.slices[size_t(j)].Reserve(slice.bytes());
    if (!slice.data && slice.bytes()) return ctx.Error(StatusCode::kIoError, "out of memory");
  }
  std::vector<Shape> per_iter(static_cast<size_t>(s.scan_outputs));
  std::vector<int> out_axis(size_t(s.scan_outputs), 0);
  int parity = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int j = 0; j < s.scan_inputs; ++j) {
      const Tensor* x = ctx.input(s.states + j);
      const int64_t idx = s.in_dirs[size_t(j)] ? T - 1 - t : t;
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < axes[size_t(j)]; ++d) outer *= x->shape[size_t(d)];
      for (int d = axes[size_t(j)] + 1; d < x->rank(); ++d) inner *= x->shape[size_t(d)];
      const size_t row = size_t(inner) * in_esize[size_t(j)];
      const uint8_t* src = static_cast<const uint8_t*>(x->data);
      uint8_t* dst = static_cast<uint8_t*>(st.slice_tensors[size_t(j)].data);
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + size_t(o) * row, src + size_t(o * T + idx) * row, row);
    }
    QF_RETURN_IF_ERROR(body.Run(in));
    for (int i = 0; i < s.states; ++i) {
      const Tensor& v = body.output(i);
      Tensor& dst = st.carried_tensors[parity][size_t(i)];
      dst.name = v.name;
      dst.dtype = v.dtype;
      dst.shape = v.shape;
      dst.data = st.carried[parity][size_t(i)].Reserve(v.bytes());
      if (!dst.data && v.bytes()) return ctx.Error(StatusCode::kIoError, "out of memory");
      if (v.bytes()) std::memcpy(dst.data, v.data, v.bytes());
      in[size_t(i)] = &dst;
    }
    parity ^= 1;
    for (int k = 0; k < s.scan_outputs; ++k) {
      const Tensor& v = body.output(s.states + k);
      Tensor* out = ctx.output(s.states + k);
      if (t == 0) {
        per_iter[size_t(k)] = v.shape;
        QF_RETURN_IF_ERROR(SliceableBytes(ctx, v.dtype, "scan output", &out_esize[size_t(k)]));
        if (!NormalizeAxis(s.out_axes[size_t(k)], v.rank() + 1, &out_axis[size_t(k)]))
          return ctx.Invalid("scan_output_axes out of range");
        if (out) {
          Shape full = v.shape;
          full.insert(full.begin() + out_axis[size_t(k)], T);
          if (ctx.op_allocates_outputs) {
            out->dtype = v.dtype;
            out->shape = full;
            out->rank_known = true;
            if (st.outputs.size() < size_t(ctx.num_outputs()))
              st.outputs.resize(size_t(ctx.num_outputs()));
            out->data = st.outputs[size_t(s.states + k)].Reserve(out->bytes());
            if (!out->data && out->bytes()) return ctx.Error(StatusCode::kIoError, "out of memory");
          } else if (out->shape != full || out->dtype != v.dtype) {
            return ctx.Invalid("scan output '" + out->name + "' was planned as " +
                               ShapeToString(out->shape) + ", the body gives " +
                               ShapeToString(full));
          }
        }
      } else if (v.shape != per_iter[size_t(k)]) {
        return ctx.Invalid("scan output " + std::to_string(k) + " has shape " +
                           ShapeToString(v.shape) + " at iteration " + std::to_string(t) + ", " +
                           ShapeToString(per_iter[size_t(k)]) + " before");
      }
      if (!out) continue;
      const int64_t pos = s.out_dirs[size_t(k)] ? T - 1 - t : t;
      InsertSlice(static_cast<uint8_t*>(out->data), static_cast<const uint8_t*>(v.data), v.shape,
                  out_axis[size_t(k)], T, pos, out_esize[size_t(k)]);
    }
  }
  for (int i = 0; i < s.states; ++i)
    QF_RETURN_IF_ERROR(
        WriteOutput(ctx, i, in[size_t(i)]->dtype, in[size_t(i)]->shape, in[size_t(i)]->data));
  if (T == 0)
    for (int k = 0; k < s.scan_outputs; ++k) {
      Tensor* out = ctx.output(s.states + k);
      if (!out || !ctx.op_allocates_outputs) continue;
      const Tensor& v = body.output(s.states + k);
      Shape shape = v.shape;
      for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
      int axis = 0;
      NormalizeAxis(s.out_axes[size_t(k)], v.rank() + 1, &axis);
      shape.insert(shape.begin() + axis, 0);
      QF_RETURN_IF_ERROR(WriteOutput(ctx, s.states + k, v.dtype, shape, nullptr));
    }
  return Status::Ok();
}

}  // namespace

// Captured values follow the ONNX inputs, so the counts only bound them.
constexpr int kMaxControlInputs = 1 << 16;

const OpDef& OpDef_If() {
  static const OpDef def = [] {
    OpDef d{"If",
            InferIf,
            RunIf,
            /*value_inputs=*/1u,
            /*shape_only=*/false,
            /*min_inputs=*/1,
            /*max_inputs=*/kMaxControlInputs,
            PrepareIf};
    d.has_subgraphs = true;
    d.sizes_outputs = true;
    return d;
  }();
  return def;
}

const OpDef& OpDef_Loop() {
  static const OpDef def = [] {
    // M and cond are both optional (empty names) but keep their positions.
    OpDef d{"Loop",
            InferLoop,
            RunLoop,
            /*value_inputs=*/3u,
            /*shape_only=*/false,
            /*min_inputs=*/0,
            /*max_inputs=*/kMaxControlInputs,
            PrepareLoop};
    d.has_subgraphs = true;
    d.sizes_outputs = true;
    return d;
  }();
  return def;
}

const OpDef& OpDef_Scan() {
  static const OpDef def = [] {
    OpDef d{"Scan",
            InferScan,
            RunScan,
            /*value_inputs=*/0u,
            /*shape_only=*/false,
            /*min_inputs=*/1,
            /*max_inputs=*/kMaxControlInputs,
            PrepareScan};
    d.has_subgraphs = true;
    d.sizes_outputs = true;
    return d;
  }();
  return def;
}

}  // namespace qfold
