// Session: resolves shapes for the current input shapes, folds what depends
// only on constants and shapes (PyTorch's Shape->Gather->Concat chains), plans
// one arena for the remaining activations, then runs the ops in order.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>

#include "core/sequence.h"
#include "core/shape_util.h"
#include "graph_runner.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "model_impl.h"

namespace qfold {

namespace {
constexpr size_t kArenaAlign = 64;
// Kernels may read up to this many bytes past a tensor's end (SIMD tails).
constexpr size_t kArenaTailPad = 64;
constexpr int64_t kMaxActivationElements = int64_t(1) << 32;
// Memory a session may allocate for activations and plan-time folded values
// (each tensor, and all together): beyond it a model is refused with a status
// rather than left to fail in the allocator. Edge devices have less than this.

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBuffer AllocAligned(size_t bytes) {
  size_t rounded = (bytes + kArenaTailPad + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  return AlignedBuffer(static_cast<uint8_t*>(std::aligned_alloc(kArenaAlign, rounded)));
}

// SessionOptions::num_threads: at least 1, at most the hardware threads (64
// when the count is unknown).
// Runs an op's kernel; an exception from it (std::bad_alloc from a kernel's
// own buffers, or one forwarded from a pool worker) becomes a status naming the
// op, so none escapes Session::Run.
Status RunGuarded(const OpDef& def, KernelContext& ctx) {
  try {
    return def.run(ctx);
  } catch (const std::bad_alloc&) {
    return ctx.Error(StatusCode::kIoError, "out of memory");
  } catch (const std::exception& e) {
    return ctx.Error(StatusCode::kInternal, std::string("exception: ") + e.what());
  } catch (...) {
    return ctx.Error(StatusCode::kInternal, "unknown exception");
  }
}

int ClampThreads(int requested) {
  const unsigned hw = std::thread::hardware_concurrency();
  const int cap = hw == 0 ? 64 : int(std::min(hw, 4096u));
  return std::min(std::max(1, requested), cap);
}
}  // namespace

struct Session::Impl {
  std::shared_ptr<Model> model;
  const Model::Impl* m = nullptr;
  SessionOptions opts;
  // num_threads - 1 workers, this session's alone (none for one thread).
  std::unique_ptr<kernels::ThreadPool> pool;
  // Chosen once at creation; every op's KernelContext points here.
  kernels::KernelConfig kernels;
  std::string kernels_description;

  std::vector<Tensor> tensors;
  std::vector<Shape> input_shapes;  // current shape per graph input
  std::vector<KernelContext> contexts;
  std::vector<bool> folded;                     // op evaluated at plan time
  std::vector<std::shared_ptr<void>> op_state;  // OpDef::prepare results, kept across re-plans
  std::vector<AlignedBuffer> folded_storage;
  // Dynamic mode: some shape depends on data only known while running (a
  // Reshape whose target comes from a graph input, say). Then every op is
  // inferred and given its own buffer during Run instead of the arena.
  bool dynamic = false;
  std::vector<AlignedBuffer> dynamic_storage;  // per tensor
  std::vector<size_t> dynamic_capacity;
  size_t dynamic_bytes = 0;  // sum of dynamic_capacity
  size_t folded_bytes = 0;   // sum of folded_storage sizes
  OwnedBuffer arena;
  size_t arena_size = 0;
  size_t kept_bytes = 0;  // ScratchNeeds::kept of the planned ops
  OwnedBuffer dynamic_scratch;
  ArenaGraph arena_graph;
  bool planned = false;
  size_t bf16_activations = 0;        // tensors PlanBf16Storage stores as bfloat16
  std::vector<OpProfile> op_profile;  // per op, when opts.profile
  // The model, kernels and threads, for the runners of If/Loop/Scan subgraphs.
  SubgraphEnv subgraph_env;
  // SessionOptions::state_bindings as (output tensor, input tensor) ids.
  std::vector<std::pair<int, int>> state_bindings;
  // The values of sequence tensors (TensorInfo::is_sequence), per tensor id;
  // a model with any runs in dynamic mode.
  std::vector<SequenceValue> sequences;
  bool has_sequences = false;
  // Inputs read in place (BindInput): their own buffer while bound, to go
  // back to; released: bound, then released or re-planned, and not set since
  // (Run refuses them: their own buffer holds no value of the caller's).
  std::vector<void*> bound_buffer;
  std::vector<bool> released;
  void ReleaseInput(size_t idx) {
    if (!bound_buffer[idx]) return;
    tensors[size_t(m->input_ids[idx])].data = bound_buffer[idx];
    bound_buffer[idx] = nullptr;
    released[idx] = true;
  }

  // Runs op k, timing it when profiling.
  Status RunOp(size_t k, KernelContext& ctx) {
    if (!opts.profile) return RunGuarded(*m->ops[k].def, ctx);
    ctx.reference_path = false;
    const auto start = std::chrono::steady_clock::now();
    Status st = RunGuarded(*m->ops[k].def, ctx);
    const auto end = std::chrono::steady_clock::now();
    op_profile[k].runs += 1;
    op_profile[k].reference_runs += ctx.reference_path ? 1 : 0;
    const double us = std::chrono::duration<double, std::micro>(end - start).count();
    OpProfile& prof = op_profile[k];
    prof.min_us = prof.runs == 1 ? us : std::min(prof.min_us, us);
    prof.total_us += us;
    return st;
  }

  bool AllInputsConcrete() const {
    for (size_t i = 0; i < input_shapes.size(); ++i)
      for (int64_t d : input_shapes[i])
        if (d < 0 && !m->inputs[i].is_sequence && !m->inputs[i].is_optional) return false;
    return true;
  }
  int InputIndex(const std::string& name) const {
    for (size_t i = 0; i < m->input_ids.size(); ++i)
      if (m->inputs[i].name == name) return int(i);
    return -1;
  }
  Status Plan();
  void PlanBf16Storage();
  Status PlanKeepingState();
  Status CopyState();
  Status RunDynamic();
  void* DynamicBuffer(int tensor, size_t bytes);
  // OpDef::prepare of op k once per session, after its first successful
  // infer, when its const_inputs are constants (the state stays valid across
  // runs and resizes).
  Status PrepareOnce(size_t k, KernelContext& ctx) {
    const OpEntry& op = m->ops[k];
    if (!op.def->prepare || op_state[k]) return Status::Ok();
    for (int i = 0; i < ctx.num_inputs() && i < 32; ++i)
      if ((op.def->const_inputs >> i & 1) &&
          (!ctx.inputs[size_t(i)] || !m->tensors[size_t(op.inputs[size_t(i)])].const_data))
        return Status::Ok();
    QF_RETURN_IF_ERROR(op.def->prepare(ctx, &op_state[k]));
    ctx.state = op_state[k].get();
    return Status::Ok();
  }
  // Appends to `value` a copy of `e`, one element of sequence or optional
  // input `idx`, checked against its declared dtype and known dims and, with
  // the `*held` bytes `value` holds already (updated; a running total, not a
  // walk over the elements per element), against max_memory_bytes.
  Status BoxInputElement(size_t idx, const TensorView& e, const std::string& what,
                         SequenceValue* value, size_t* held) const {
    const TensorInfo& info = m->inputs[idx];
    const bool rank_known = m->tensors[size_t(m->input_ids[idx])].rank_known;
    if (e.dtype != info.dtype)
      return Status(
          StatusCode::kInvalidArgument,
          what + " is " + dtype_name(e.dtype) + ", the model declares " + dtype_name(info.dtype));
    bool fits = !rank_known || e.shape.size() == info.shape.size();
    for (size_t d = 0; fits && rank_known && d < e.shape.size(); ++d)
      fits = info.shape[d] < 0 || info.shape[d] == e.shape[d];
    int64_t n = 0;
    if (!fits || e.shape.size() > size_t(kMaxRank) || !CheckedNumel(e.shape, &n) ||
        n > kMaxActivationElements)
      return Status(StatusCode::kInvalidArgument,
                    what + " has shape " + ShapeToString(e.shape) + ", the model declares " +
                        (rank_known ? ShapeToString(info.shape) : std::string("any shape")));
    const size_t bytes = dtype_storage_bytes(e.dtype, n);
    if (e.bytes != bytes)
      return Status(StatusCode::kInvalidArgument, what + " of shape " + ShapeToString(e.shape) +
                                                      " needs " + std::to_string(bytes) +
                                                      " bytes, given " + std::to_string(e.bytes));
    if (bytes && !e.data) return Status(StatusCode::kInvalidArgument, what + " has no data");
    // What the copies hold.
    *held += SequenceElementFootprint(bytes);
    if (*held > opts.max_memory_bytes)
      return Status(StatusCode::kInvalidArgument, what + ": the input needs more than the " +
                                                      std::to_string(opts.max_memory_bytes) +
                                                      " bytes a session may allocate");
    SequenceElement el;
    if (!MakeSequenceElement(e.dtype, e.shape, e.data, bytes, &el))
      return Status(StatusCode::kIoError, what + ": out of memory");
    if (e.dtype == DType::kBool) {
      uint8_t* p = const_cast<uint8_t*>(el.data.get());
      for (size_t k = 0; k < bytes; ++k) p[k] = p[k] != 0;
    }
    value->elements.push_back(std::move(el));
    value->none = false;
    return Status::Ok();
  }
  // Sequences count against max_memory_bytes with the dynamic buffers (an
  // element shared by several sequences counts for each).
  Status CheckSequenceBytes(const KernelContext& ctx) const {
    size_t n = dynamic_bytes;
    for (const SequenceValue& v : sequences) n += v.bytes();
    if (n > opts.max_memory_bytes)
      return ctx.Invalid("sequences and buffers need " + std::to_string(n) +
                         " bytes, more than the " + std::to_string(opts.max_memory_bytes) +
                         " a session may allocate");
    return Status::Ok();
  }
};

void* Session::Impl::DynamicBuffer(int tensor, size_t bytes) {
  if (!dynamic_storage[tensor] || dynamic_capacity[tensor] < bytes) {
    dynamic_bytes -= dynamic_capacity[tensor];
    dynamic_storage[tensor] = AllocAligned(bytes);
    // A failed allocation returns null; the caller turns that into a status.
    dynamic_capacity[tensor] = dynamic_storage[tensor] ? bytes : 0;
    dynamic_bytes += dynamic_capacity[tensor];
  }
  return dynamic_storage[tensor].get();
}

Status Session::Impl::RunDynamic() {
  for (size_t k = 0; k < contexts.size(); ++k) {
    if (folded[k]) continue;
    KernelContext& ctx = contexts[k];
    QF_RETURN_IF_ERROR(m->ops[k].def->infer(ctx));
    QF_RETURN_IF_ERROR(CheckOutputKinds(ctx));
    // Ops past the point where planning turned dynamic (every op of a model
    // with sequences) get their packed weights here, once, not a slower path.
    QF_RETURN_IF_ERROR(PrepareOnce(k, ctx));
    // A Loop stopped by its condition sizes its outputs while running; sequence
    // outputs are written by the op into their values, not buffers.
    bool known = true, writes_sequence = false;
    for (Tensor* t : ctx.outputs) {
      if (t && !t->boxed() && !t->shape_known()) known = false;
      writes_sequence = writes_sequence || (t && t->boxed());
    }
    ctx.op_allocates_outputs = m->ops[k].def->sizes_outputs && !known;
    for (size_t o = 0; o < ctx.outputs.size() && !ctx.op_allocates_outputs; ++o) {
      Tensor* t = ctx.outputs[o];
      if (!t || t->boxed()) continue;
      int64_t n = 0;
      if (!t->rank_known || t->rank() > kMaxRank || !CheckedNumel(t->shape, &n) ||
          n > kMaxActivationElements)
        return ctx.Invalid("output '" + t->name + "' gets an invalid shape " +
                           ShapeToString(t->shape));
      if (t->bytes() > opts.max_memory_bytes - std::min(opts.max_memory_bytes, dynamic_bytes))
        return ctx.Invalid("output '" + t->name + "' of shape " + ShapeToString(t->shape) +
                           " needs " + std::to_string(t->bytes()) + " bytes, more than the " +
                           std::to_string(opts.max_memory_bytes) + " a session may allocate");
      t->data = DynamicBuffer(m->ops[k].outputs[o], t->bytes());
      if (!t->data && t->bytes() > 0)
        return ctx.Error(StatusCode::kIoError, "out of memory for output '" + t->name + "' (" +
                                                   std::to_string(t->bytes()) + " bytes)");
    }
    QF_RETURN_IF_ERROR(ReserveDynamicScratch(*m->ops[k].def, ctx, opts.max_memory_bytes,
                                             dynamic_bytes, &dynamic_scratch));
    QF_RETURN_IF_ERROR(RunOp(k, ctx));
    if (writes_sequence) QF_RETURN_IF_ERROR(CheckSequenceBytes(ctx));
  }
  return Status::Ok();
}

Status Session::Impl::Plan() {
  // A new plan gives every input its own buffer: bound ones are released.
  for (size_t i = 0; i < bound_buffer.size(); ++i)
    if (bound_buffer[i]) {
      bound_buffer[i] = nullptr;
      released[i] = true;
    }
  planned = false;
  dynamic = false;
  bf16_activations = 0;
  folded_storage.clear();
  folded_bytes = 0;
  arena.Release();
  arena_size = 0;
  kept_bytes = 0;
  const size_t nt = m->tensors.size();
  for (size_t i = 0; i < nt; ++i) {
    Tensor& t = tensors[i];
    const TensorEntry& e = m->tensors[i];
    t.dtype = e.info.dtype;
    t.shape = e.info.shape;
    t.rank_known = e.rank_known;
    t.is_sequence = e.info.is_sequence;
    t.is_optional = e.info.is_optional;
    t.data = const_cast<void*>(e.const_data);
  }
  for (size_t i = 0; i < m->input_ids.size(); ++i) {
    Tensor& t = tensors[m->input_ids[i]];
    // A sequence's element shapes come with SetInputSequence; an optional
    // tensor's with SetInput, which boxes it.
    if (t.boxed()) continue;
    t.shape = input_shapes[i];
    if (!t.shape_known()) {
      std::string dims;
      for (size_t d = 0; d < t.shape.size(); ++d)
        if (t.shape[d] < 0) {
          if (!dims.empty()) dims += ", ";
          dims += m->inputs[i].dim_names[d].empty() ? "axis " + std::to_string(d)
                                                    : "'" + m->inputs[i].dim_names[d] + "'";
        }
      return Status(StatusCode::kInvalidArgument,
                    "input '" + t.name + "' has symbolic dims (" + dims + ") in shape " +
                        ShapeToString(t.shape) + ": call ResizeInput with a concrete shape");
    }
    int64_t n = 0;
    if (!CheckedNumel(t.shape, &n) || n > kMaxActivationElements)
      return Status(StatusCode::kInvalidArgument,
                    "input '" + t.name + "' of shape " + ShapeToString(t.shape) +
                        " has more than " + std::to_string(kMaxActivationElements) + " elements");
  }

  const int nops = int(m->ops.size());
  folded.assign(nops, false);
  // A sequence's length and elements' shapes are data: each op is inferred
  // when it runs.
  dynamic = has_sequences;
  for (int k = 0; k < nops && !dynamic; ++k) {
    const OpEntry& op = m->ops[k];
    KernelContext& ctx = contexts[k];
    ClearScratch(ctx);  // folded ops run before the arena exists
    QF_RETURN_IF_ERROR(op.def->infer(ctx));
    QF_RETURN_IF_ERROR(CheckOutputKinds(ctx));
    bool all_known = true;
    for (Tensor* in : ctx.inputs)
      if (in && !in->data) all_known = false;
    bool value_unknown = false;
    // The masks cover inputs 0-31; variadic ops (Concat, Sum) may have more.
    for (int i = 0; i < ctx.num_inputs() && i < 32; ++i)
      if ((op.def->value_inputs >> i & 1) && ctx.inputs[i] && !ctx.inputs[i]->data)
        value_unknown = true;
    bool outputs_known = true;
    for (Tensor* o : ctx.outputs)
      if (o && !o->shape_known()) outputs_known = false;
    if (!outputs_known && (value_unknown || op.def->sizes_outputs)) {
      dynamic = true;
      break;
    }
    for (Tensor* o : ctx.outputs) {
      if (!o) continue;
      int64_t n = 0;
      if (!o->rank_known || o->rank() > kMaxRank || !CheckedNumel(o->shape, &n) ||
          n > kMaxActivationElements)
        return ctx.Invalid("output '" + o->name + "' gets an invalid shape " +
                           ShapeToString(o->shape));
      if (o->bytes() > opts.max_memory_bytes)
        return ctx.Invalid("output '" + o->name + "' of shape " + ShapeToString(o->shape) +
                           " needs " + std::to_string(o->bytes()) + " bytes, more than the " +
                           std::to_string(opts.max_memory_bytes) + " a session may allocate");
      o->data = nullptr;
    }
    QF_RETURN_IF_ERROR(PrepareOnce(size_t(k), ctx));
    if (op.def->shape_only || all_known) {
      for (Tensor* o : ctx.outputs) {
        if (!o) continue;
        folded_bytes += o->bytes();
        if (folded_bytes > opts.max_memory_bytes)
          return ctx.Invalid("values computed at plan time need more than the " +
                             std::to_string(opts.max_memory_bytes) +
                             " bytes a session may allocate");
        folded_storage.push_back(AllocAligned(o->bytes()));
        o->data = folded_storage.back().get();
        if (!o->data)
          return ctx.Error(StatusCode::kIoError, "out of memory for " + std::to_string(o->bytes()) +
                                                     " bytes of a value computed at plan time");
      }
      QF_RETURN_IF_ERROR(RunGuarded(*op.def, ctx));
      folded[k] = true;
    }
  }

  if (dynamic) {
    dynamic_storage.resize(nt);
    dynamic_capacity.resize(nt, 0);
    for (int id : m->input_ids) {
      if (tensors[id].boxed()) continue;
      tensors[id].data = DynamicBuffer(id, tensors[id].bytes());
      if (!tensors[id].data && tensors[id].bytes() > 0)
        return Status(StatusCode::kIoError, "out of memory for input '" + tensors[id].name + "' (" +
                                                std::to_string(tensors[id].bytes()) + " bytes)");
    }
    planned = true;
    return Status::Ok();
  }

  PlanBf16Storage();
  QF_RETURN_IF_ERROR(PlanGraphArena(arena_graph, folded, opts.max_memory_bytes, folded_bytes,
                                    std::string(), &arena, &arena_size, &kept_bytes));
  planned = true;
  return Status::Ok();
}

// bf16 mode: an activation whose producer writes bfloat16 and whose every
// reader reads it (OpDef::bf16_io) is stored so: half the bytes between the
// matrix units and memory. Convolutions round their float inputs to bf16
// anyway; what changes is what other readers see (a fused residual,
// BatchNormalization's and AveragePool's inputs: docs/NUMERICS.md). Graph
// inputs and outputs keep their dtype; a model with subgraphs keeps float32
// throughout (a body may read any outer value).
void Session::Impl::PlanBf16Storage() {
  bf16_activations = 0;
  if (opts.precision != SessionOptions::Precision::kBfloat16) return;
  for (const OpEntry& op : m->ops)
    if (op.def->has_subgraphs) return;
  const size_t nt = tensors.size();
  std::vector<char> written(nt, 0), read(nt, 0), refused(nt, 0);
  // The tensors of each tied op's bf16 slots (OpDef::bf16_tied).
  std::vector<std::vector<size_t>> tied;
  for (size_t k = 0; k < m->ops.size(); ++k) {
    const OpEntry& op = m->ops[k];
    unsigned in_bits = 0, out_bits = 0;
    if (!folded[k] && op.def->bf16_io) op.def->bf16_io(contexts[k], &in_bits, &out_bits);
    if (op.def->bf16_tied && (in_bits || out_bits)) {
      tied.emplace_back();
      for (size_t i = 0; i < op.inputs.size() && i < 32; ++i)
        if (op.inputs[i] >= 0 && (in_bits >> i & 1)) tied.back().push_back(size_t(op.inputs[i]));
      for (size_t o = 0; o < op.outputs.size() && o < 32; ++o)
        if (op.outputs[o] >= 0 && (out_bits >> o & 1)) tied.back().push_back(size_t(op.outputs[o]));
    }
    for (size_t o = 0; o < op.outputs.size(); ++o)
      if (op.outputs[o] >= 0 && o < 32 && (out_bits >> o & 1)) written[size_t(op.outputs[o])] = 1;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i] < 0) continue;
      read[size_t(op.inputs[i])] = 1;
      if (i >= 32 || !(in_bits >> i & 1)) refused[size_t(op.inputs[i])] = 1;
    }
  }
  for (int id : m->input_ids) refused[size_t(id)] = 1;
  for (int id : m->output_ids) refused[size_t(id)] = 1;
  std::vector<char> chosen(nt, 0);
  for (size_t i = 0; i < nt; ++i)
    chosen[i] = written[i] && read[i] && !refused[i] && tensors[i].dtype == DType::kFloat32 &&
                !tensors[i].data && !tensors[i].boxed();
  // A tied op with one of its tensors left float32 leaves them all so, which
  // may leave another tied op's tensor float32 in turn.
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::vector<size_t>& ids : tied) {
      bool all = true, any = false;
      for (size_t id : ids) {
        all = all && chosen[id];
        any = any || chosen[id];
      }
      if (all || !any) continue;
      for (size_t id : ids) chosen[id] = 0;
      changed = true;
    }
  }
  for (size_t i = 0; i < nt; ++i)
    if (chosen[i]) {
      tensors[i].dtype = DType::kBFloat16;
      ++bf16_activations;
    }
}

// Plan() with the bound state inputs' values carried over (zeros when new or
// when their size changed): re-planning for another input's shape must not
// restart the stream.
Status Session::Impl::PlanKeepingState() {
  std::vector<std::vector<uint8_t>> saved(state_bindings.size());
  if (planned)
    for (size_t i = 0; i < state_bindings.size(); ++i) {
      const Tensor& t = tensors[state_bindings[i].second];
      if (t.data)
        saved[i].assign(static_cast<const uint8_t*>(t.data),
                        static_cast<const uint8_t*>(t.data) + t.bytes());
    }
  QF_RETURN_IF_ERROR(Plan());
  for (size_t i = 0; i < state_bindings.size(); ++i) {
    Tensor& t = tensors[state_bindings[i].second];
    if (!t.data) continue;
    if (saved[i].size() == t.bytes())
      std::memcpy(t.data, saved[i].data(), saved[i].size());
    else
      std::memset(t.data, 0, t.bytes());
  }
  return Status::Ok();
}

// After a Run: each bound output's value becomes its input's.
Status Session::Impl::CopyState() {
  for (const auto& b : state_bindings) {
    const Tensor& out = tensors[b.first];
    Tensor& in = tensors[b.second];
    if (b.first == b.second) continue;
    if (out.shape != in.shape)
      return Status(StatusCode::kInvalidArgument,
                    "state binding: output '" + out.name + "' has shape " +
                        ShapeToString(out.shape) + ", its input '" + in.name + "' " +
                        ShapeToString(in.shape) + "; resize the input to the state's shape");
    if (in.bytes()) std::memcpy(in.data, out.data, in.bytes());
  }
  return Status::Ok();
}

Session::Session() : impl_(new Impl) {}
Session::~Session() = default;

Status Session::Create(std::shared_ptr<Model> model, const SessionOptions& opts,
                       std::unique_ptr<Session>* out) {
  if (!model) return Status(StatusCode::kInvalidArgument, "Session::Create: null model");
  std::unique_ptr<Session> s(new Session);
  Impl& im = *s->impl_;
  im.model = model;
  im.m = model->impl();
  im.opts = opts;
  im.opts.num_threads = ClampThreads(opts.num_threads);
  if (opts.kernel_isa.empty()) {
    im.kernels = kernels::MakeKernelConfig(kernels::DefaultCpuFeatures());
  } else {
    kernels::Isa isa;
    if (!kernels::ParseIsa(opts.kernel_isa.c_str(), &isa))
      return Status(StatusCode::kInvalidArgument,
                    "Session::Create: unknown kernel_isa '" + opts.kernel_isa +
                        "' (reference, avx2, avxvnni, avx512vnni, amx, neon, neondot, neoni8mm)");
    im.kernels = kernels::KernelConfigForIsa(isa);
  }
  if (opts.precision == SessionOptions::Precision::kBfloat16) kernels::EnableBf16(&im.kernels);
  if (opts.precision == SessionOptions::Precision::kFloat16) kernels::EnableFp16(&im.kernels);
  im.kernels_description = im.kernels.Describe();
  if (im.opts.num_threads > 1) im.pool.reset(new kernels::ThreadPool(im.opts.num_threads));
  im.tensors.resize(im.m->tensors.size());
  im.sequences.resize(im.m->tensors.size());
  for (size_t i = 0; i < im.tensors.size(); ++i) {
    im.tensors[i].name = im.m->tensors[i].info.name;
    const TensorInfo& info = im.m->tensors[i].info;
    if (!info.is_sequence && !info.is_optional) continue;
    im.tensors[i].is_sequence = info.is_sequence;
    im.tensors[i].is_optional = info.is_optional;
    im.tensors[i].sequence = &im.sequences[i];
    // An optional input never set is none.
    im.sequences[i].none = info.is_optional;
    im.has_sequences = true;
  }
  for (const TensorInfo& info : im.m->inputs) im.input_shapes.push_back(info.shape);
  im.bound_buffer.assign(im.m->inputs.size(), nullptr);
  im.released.assign(im.m->inputs.size(), false);
  im.contexts.resize(im.m->ops.size());
  im.op_state.resize(im.m->ops.size());
  if (opts.profile) {
    im.op_profile.resize(im.m->ops.size());
    for (size_t k = 0; k < im.m->ops.size(); ++k) {
      im.op_profile[k].name = im.m->ops[k].name;
      im.op_profile[k].type = im.m->ops[k].type;
    }
  }
  im.subgraph_env.model = im.m;
  im.subgraph_env.kernels = &im.kernels;
  im.subgraph_env.pool = im.pool.get();
  im.subgraph_env.max_memory_bytes = im.opts.max_memory_bytes;
  im.subgraph_env.max_loop_iterations = im.opts.max_loop_iterations;
  for (size_t k = 0; k < im.m->ops.size(); ++k) {
    const OpEntry& op = im.m->ops[k];
    KernelContext& ctx = im.contexts[k];
    ctx.op_type = &op.type;
    ctx.op_name = &op.name;
    ctx.attrs = &op.attrs;
    ctx.pool = im.pool.get();
    ctx.kernels = &im.kernels;
    ctx.subgraphs = &im.subgraph_env;
    for (int id : op.inputs) ctx.inputs.push_back(id >= 0 ? &im.tensors[id] : nullptr);
    for (int id : op.outputs) ctx.outputs.push_back(id >= 0 ? &im.tensors[id] : nullptr);
    // If/Loop/Scan infer through their subgraphs: their runners come first.
    if (op.def->has_subgraphs) {
      QF_RETURN_IF_ERROR(op.def->prepare(ctx, &im.op_state[k]));
      ctx.state = im.op_state[k].get();
    }
  }
  ArenaGraph& ag = im.arena_graph;
  ag.tensors = &im.tensors;
  ag.contexts = &im.contexts;
  for (const OpEntry& op : im.m->ops) {
    ag.defs.push_back(op.def);
    ag.op_inputs.push_back(&op.inputs);
    ag.op_outputs.push_back(&op.outputs);
  }
  // Graph inputs are written before the first op, outputs read after the last.
  // Inputs stay alive to the end too: a Run reads the inputs set so far, so a
  // second Run without SetInput must see them, not a later tensor placed over
  // them (qfold bench timed its repeated runs on such leftovers: Inception-v1's
  // input QuantizeLinear divided denormals and took 15x longer).
  ag.live_from_start = im.m->input_ids;
  ag.live_to_end = im.m->output_ids;
  ag.live_to_end.insert(ag.live_to_end.end(), im.m->input_ids.begin(), im.m->input_ids.end());
  for (const auto& binding : opts.state_bindings) {
    const std::string& out_name = binding.first;
    const std::string& in_name = binding.second;
    const std::string what = "state binding '" + out_name + "' -> '" + in_name + "': ";
    int out_idx = -1, in_idx = im.InputIndex(in_name);
    for (size_t i = 0; i < im.m->outputs.size(); ++i)
      if (im.m->outputs[i].name == out_name) out_idx = int(i);
    if (out_idx < 0)
      return Status(StatusCode::kInvalidArgument,
                    what + "the model has no output named '" + out_name + "'");
    if (in_idx < 0)
      return Status(StatusCode::kInvalidArgument,
                    what + "the model has no input named '" + in_name + "'");
    const TensorInfo& o = im.m->outputs[size_t(out_idx)];
    const TensorInfo& i = im.m->inputs[size_t(in_idx)];
    if (o.is_sequence || i.is_sequence || o.is_optional || i.is_optional)
      return Status(StatusCode::kInvalidArgument,
                    what + "state bindings hold tensors, not sequences or optionals");
    bool same_shape = o.shape.size() == i.shape.size();
    for (size_t d = 0; same_shape && d < o.shape.size(); ++d)
      same_shape = o.shape[d] < 0 || i.shape[d] < 0 || o.shape[d] == i.shape[d];
    if (o.dtype != i.dtype || !same_shape)
      return Status(StatusCode::kInvalidArgument,
                    what + "the output is " + dtype_name(o.dtype) + " " + ShapeToString(o.shape) +
                        ", the input " + dtype_name(i.dtype) + " " + ShapeToString(i.shape));
    const int in_id = im.m->input_ids[size_t(in_idx)];
    for (const auto& b : im.state_bindings)
      if (b.second == in_id)
        return Status(StatusCode::kInvalidArgument,
                      what + "input '" + in_name + "' is already bound to an output");
    im.state_bindings.emplace_back(im.m->output_ids[size_t(out_idx)], in_id);
    // Written from its output after the last op: no other tensor (the output
    // included) may share its memory.
    ag.live_to_end.push_back(in_id);
  }
  // A model with symbolic input dims is planned once the caller resizes it.
  if (im.AllInputsConcrete()) QF_RETURN_IF_ERROR(im.PlanKeepingState());
  *out = std::move(s);
  return Status::Ok();
}

Status Session::ResizeInput(const std::string& name, const Shape& shape) {
  Impl& im = *impl_;
  int idx = im.InputIndex(name);
  if (idx < 0) return Status(StatusCode::kInvalidArgument, "no input named '" + name + "'");
  const TensorInfo& info = im.m->inputs[idx];
  if (info.is_sequence)
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "' is a sequence: SetInputSequence sets its elements");
  if (info.is_optional) return Status::Ok();  // its value's shape comes with SetInput
  if (shape.size() != info.shape.size())
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "': shape " + ShapeToString(shape) + " has rank " +
                      std::to_string(shape.size()) + ", the model declares " +
                      ShapeToString(info.shape));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      return Status(StatusCode::kInvalidArgument,
                    "input '" + name + "': negative dim in " + ShapeToString(shape));
    if (info.shape[d] >= 0 && info.shape[d] != shape[d]) {
      std::string msg = "input '" + name + "': shape " + ShapeToString(shape) +
                        " contradicts the fixed dim " + std::to_string(info.shape[d]) +
                        " at axis " + std::to_string(d) + " of the model's " +
                        ShapeToString(info.shape);
      // A batch/channel swap shows as the needed size sitting on another axis.
      for (size_t o = 0; o < shape.size(); ++o)
        if (o != d && shape[o] == info.shape[d] &&
            (info.shape[o] < 0 || info.shape[o] == shape[d])) {
          Shape fixed = shape;
          std::swap(fixed[o], fixed[d]);
          msg += "; axes " + std::to_string(std::min(o, d)) + " and " +
                 std::to_string(std::max(o, d)) + " look swapped: did you mean " +
                 ShapeToString(fixed) + "?";
          break;
        }
      return Status(StatusCode::kInvalidArgument, msg);
    }
  }
  if (im.planned && im.input_shapes[idx] == shape) return Status::Ok();
  im.input_shapes[idx] = shape;
  // A caller resizes symbolic inputs one by one: plan once all have a shape.
  if (!im.AllInputsConcrete()) {
    im.planned = false;
    return Status::Ok();
  }
  Status st = im.PlanKeepingState();
  if (!st.ok()) im.planned = false;
  return st;
}

namespace {

// SetInput's and BindInput's common part for plain tensor input `idx`:
// resized (and the session planned) to `shape`, then `bytes` checked.
Status InputTensorFor(Session* s, Session::Impl& im, const std::string& name, int idx,
                      const Shape& shape, size_t bytes, Tensor** t) {
  if (!im.planned || im.input_shapes[size_t(idx)] != shape)
    QF_RETURN_IF_ERROR(s->ResizeInput(name, shape));
  if (!im.planned) return im.Plan();  // names the input still without a shape
  *t = &im.tensors[size_t(im.m->input_ids[size_t(idx)])];
  if (bytes != (*t)->bytes())
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "' of shape " + ShapeToString(shape) + " needs " +
                      std::to_string((*t)->bytes()) + " bytes, given " + std::to_string(bytes));
  return Status::Ok();
}

}  // namespace

Status Session::SetInput(const std::string& name, DType dtype, const Shape& shape, const void* data,
                         size_t bytes) {
  Impl& im = *impl_;
  int idx = im.InputIndex(name);
  if (idx < 0) return Status(StatusCode::kInvalidArgument, "no input named '" + name + "'");
  const TensorInfo& info = im.m->inputs[idx];
  if (info.is_sequence)
    return Status(StatusCode::kInvalidArgument, "input '" + name + "' is " +
                                                    (info.is_optional ? "an optional " : "a ") +
                                                    "sequence: set it with SetInputSequence" +
                                                    (info.is_optional ? " or SetInputNone" : ""));
  if (info.is_optional) {  // present: boxed like a sequence's element
    SequenceValue value;
    size_t held = 0;
    QF_RETURN_IF_ERROR(im.BoxInputElement(size_t(idx), TensorView{dtype, shape, data, bytes},
                                          "input '" + name + "'", &value, &held));
    im.sequences[size_t(im.m->input_ids[size_t(idx)])] = std::move(value);
    return Status::Ok();
  }
  if (dtype != info.dtype)
    return Status(
        StatusCode::kInvalidArgument,
        "input '" + name + "' is " + dtype_name(info.dtype) + ", given " + dtype_name(dtype));
  Tensor* tp = nullptr;
  QF_RETURN_IF_ERROR(InputTensorFor(this, im, name, idx, shape, bytes, &tp));
  Tensor& t = *tp;
  im.ReleaseInput(size_t(idx));
  im.released[size_t(idx)] = false;
  if (bytes) std::memcpy(t.data, data, bytes);
  if (dtype == DType::kBool) {
    // Any non-zero byte means true (C callers may pass uint8 masks); kernels
    // read bool storage as bool, where only 0 and 1 are valid values.
    uint8_t* p = static_cast<uint8_t*>(t.data);
    for (size_t k = 0; k < bytes; ++k) p[k] = p[k] != 0;
  }
  return Status::Ok();
}

Status Session::BindInput(const std::string& name, DType dtype, const Shape& shape,
                          const void* data, size_t bytes) {
  Impl& im = *impl_;
  const int idx = im.InputIndex(name);
  if (idx < 0) return Status(StatusCode::kInvalidArgument, "no input named '" + name + "'");
  const TensorInfo& info = im.m->inputs[size_t(idx)];
  // Copied instead: sequences and optionals (boxed values), bool (normalized
  // to 0/1 in the copy), a streaming state (written after each Run), data
  // not aligned to its elements, or a dtype SetInput will refuse.
  bool copy = info.is_sequence || info.is_optional || dtype != info.dtype ||
              dtype == DType::kBool || !data ||
              reinterpret_cast<uintptr_t>(data) % std::max<size_t>(1, dtype_size(dtype)) != 0;
  for (const auto& b : im.state_bindings) copy = copy || b.second == im.m->input_ids[size_t(idx)];
  if (copy) return SetInput(name, dtype, shape, data, bytes);
  Tensor* tp = nullptr;
  QF_RETURN_IF_ERROR(InputTensorFor(this, im, name, idx, shape, bytes, &tp));
  Tensor& t = *tp;
  if (!im.bound_buffer[size_t(idx)]) im.bound_buffer[size_t(idx)] = t.data;
  // Read only: no op writes a graph input (they stay live through the Run).
  t.data = const_cast<void*>(data);
  im.released[size_t(idx)] = false;
  return Status::Ok();
}

void Session::ReleaseInputs() {
  Impl& im = *impl_;
  for (size_t i = 0; i < im.bound_buffer.size(); ++i) im.ReleaseInput(i);
}

Status Session::Run() {
  Impl& im = *impl_;
  if (!im.planned) {
    Status st = im.PlanKeepingState();
    if (!st.ok()) return st;
  }
  for (size_t i = 0; i < im.released.size(); ++i)
    if (im.released[i])
      return Status(StatusCode::kInvalidArgument,
                    "input '" + im.m->inputs[i].name +
                        "' was bound with BindInput and released (or the session re-planned): "
                        "set or bind it again before Run");
  if (im.dynamic) {
    QF_RETURN_IF_ERROR(im.RunDynamic());
  } else {
    for (size_t k = 0; k < im.contexts.size(); ++k) {
      if (im.folded[k]) continue;
      QF_RETURN_IF_ERROR(im.RunOp(k, im.contexts[k]));
    }
  }
  return im.CopyState();
}

void Session::ResetState() {
  Impl& im = *impl_;
  if (!im.planned) return;  // planning zeros them
  for (const auto& b : im.state_bindings) {
    Tensor& t = im.tensors[b.second];
    if (t.data && t.bytes()) std::memset(t.data, 0, t.bytes());
  }
}

Status Session::GetOutput(const std::string& name, DType* dtype, Shape* shape,
                          const void** data) const {
  const Impl& im = *impl_;
  for (size_t i = 0; i < im.m->output_ids.size(); ++i) {
    if (im.m->outputs[i].name != name) continue;
    if (!im.planned)
      return Status(StatusCode::kInvalidArgument,
                    "session is not planned: set inputs and Run first");
    const Tensor& t = im.tensors[im.m->output_ids[i]];
    if (t.is_sequence)
      return Status(StatusCode::kInvalidArgument,
                    "output '" + name + "' is a sequence: read it with GetOutputSequence");
    if (t.is_optional) {
      if (!t.sequence || t.sequence->none)
        return Status(StatusCode::kInvalidArgument,
                      "output '" + name +
                          "' is none (an optional without a value): check "
                          "OutputIsNone first");
      if (t.sequence->elements.size() != 1)
        return Status(StatusCode::kInternal, "optional output '" + name + "' holds " +
                                                 std::to_string(t.sequence->elements.size()) +
                                                 " values, not one");
      const SequenceElement& e = t.sequence->elements[0];
      *dtype = e.dtype;
      *shape = e.shape;
      *data = e.data.get();
      return Status::Ok();
    }
    *dtype = t.dtype;
    *shape = t.shape;
    *data = t.data;
    return Status::Ok();
  }
  return Status(StatusCode::kInvalidArgument, "no output named '" + name + "'");
}

Status Session::SetInputSequence(const std::string& name, const std::vector<TensorView>& elements) {
  Impl& im = *impl_;
  const int idx = im.InputIndex(name);
  if (idx < 0) return Status(StatusCode::kInvalidArgument, "no input named '" + name + "'");
  const TensorInfo& info = im.m->inputs[size_t(idx)];
  if (!info.is_sequence)
    return Status(StatusCode::kInvalidArgument, "input '" + name + "' is " +
                                                    (info.is_optional ? "an optional " : "a ") +
                                                    "tensor: set it with SetInput" +
                                                    (info.is_optional ? " or SetInputNone" : ""));
  SequenceValue value;
  size_t held = 0;
  for (size_t i = 0; i < elements.size(); ++i)
    QF_RETURN_IF_ERROR(im.BoxInputElement(size_t(idx), elements[i],
                                          "input '" + name + "' element " + std::to_string(i),
                                          &value, &held));
  im.sequences[size_t(im.m->input_ids[size_t(idx)])] = std::move(value);
  return Status::Ok();
}

Status Session::SetInputNone(const std::string& name) {
  Impl& im = *impl_;
  const int idx = im.InputIndex(name);
  if (idx < 0) return Status(StatusCode::kInvalidArgument, "no input named '" + name + "'");
  if (!im.m->inputs[size_t(idx)].is_optional)
    return Status(StatusCode::kInvalidArgument,
                  "input '" + name + "' is not optional: it cannot be none");
  SequenceValue& v = im.sequences[size_t(im.m->input_ids[size_t(idx)])];
  v.elements.clear();
  v.none = true;
  return Status::Ok();
}

Status Session::OutputIsNone(const std::string& name, bool* none) const {
  const Impl& im = *impl_;
  for (size_t i = 0; i < im.m->output_ids.size(); ++i) {
    if (im.m->outputs[i].name != name) continue;
    const Tensor& t = im.tensors[size_t(im.m->output_ids[i])];
    *none = t.is_optional && t.sequence && t.sequence->none;
    return Status::Ok();
  }
  return Status(StatusCode::kInvalidArgument, "no output named '" + name + "'");
}

Status Session::GetOutputSequence(const std::string& name,
                                  std::vector<TensorView>* elements) const {
  const Impl& im = *impl_;
  for (size_t i = 0; i < im.m->output_ids.size(); ++i) {
    if (im.m->outputs[i].name != name) continue;
    const Tensor& t = im.tensors[size_t(im.m->output_ids[i])];
    if (!t.is_sequence)
      return Status(StatusCode::kInvalidArgument,
                    "output '" + name + "' is a tensor: read it with GetOutput");
    if (t.is_optional && t.sequence->none)
      return Status(StatusCode::kInvalidArgument,
                    "output '" + name +
                        "' is none (an optional without a value): check "
                        "OutputIsNone first");
    elements->clear();
    for (const SequenceElement& e : t.sequence->elements)
      elements->push_back(TensorView{e.dtype, e.shape, e.data.get(), e.bytes});
    return Status::Ok();
  }
  return Status(StatusCode::kInvalidArgument, "no output named '" + name + "'");
}

size_t Session::arena_bytes() const {
  size_t n = impl_->arena_size + impl_->kept_bytes;
  // Each If/Loop/Scan subgraph has its own arena (planned with it).
  for (size_t k = 0; k < impl_->m->ops.size(); ++k)
    if (impl_->m->ops[k].def->has_subgraphs && impl_->op_state[k])
      n += static_cast<const ControlFlowState*>(impl_->op_state[k].get())->arena_bytes();
  return n;
}

size_t Session::bf16_activations() const {
  return impl_->bf16_activations;
}

const std::string& Session::kernels() const {
  return impl_->kernels_description;
}

std::vector<OpProfile> Session::profile() const {
  std::vector<OpProfile> out;
  for (const OpProfile& p : impl_->op_profile)
    if (p.runs) out.push_back(p);
  return out;
}

void Session::ResetProfile() {
  for (OpProfile& p : impl_->op_profile) {
    p.runs = 0;
    p.total_us = 0;
    p.min_us = 0;
    p.reference_runs = 0;
  }
}

}  // namespace qfold
