#include "graph_runner.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "core/shape_util.h"
#include "planner.h"

namespace qfold {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kTailPad = 64;  // kernels' SIMD over-reads
constexpr int64_t kMaxActivationElements = int64_t(1) << 32;

Status RunCaught(const OpDef& def, KernelContext& ctx) {
  try {
    return def.run(ctx);
  } catch (const std::bad_alloc&) {
    return ctx.Error(StatusCode::kIoError, "out of memory");
  } catch (const std::exception& e) {
    return ctx.Error(StatusCode::kInternal, std::string("exception: ") + e.what());
  }
}
}  // namespace

void* OwnedBuffer::Reserve(size_t bytes) {
  if (data_ && capacity_ >= bytes) return data_.get();
  size_t rounded = (bytes + kTailPad + kAlign - 1) / kAlign * kAlign;
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded)));
  capacity_ = data_ ? bytes : 0;
  return data_.get();
}

void* OwnedBuffer::Grow(size_t bytes, size_t keep) {
  if (data_ && capacity_ >= bytes) return data_.get();
  size_t want = std::max(bytes, capacity_ + capacity_ / 2);
  size_t rounded = (want + kTailPad + kAlign - 1) / kAlign * kAlign;
  std::unique_ptr<uint8_t, Free> grown(static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded)));
  if (!grown) return nullptr;
  if (keep && data_) std::memcpy(grown.get(), data_.get(), std::min(keep, capacity_));
  data_ = std::move(grown);
  capacity_ = want;
  return data_.get();
}

namespace {
// "needs 5 MB of kernel scratch" style message for an op over the limit.
Status ScratchOverLimit(const KernelContext& ctx, const ScratchNeeds& needs, size_t limit) {
  return ctx.Invalid(
      "needs " + std::to_string(needs.run) + " bytes of kernel scratch" +
      (needs.kept ? " and keeps " + std::to_string(needs.kept) + " across runs" : "") +
      ", more than the " + std::to_string(limit) + " bytes a session may allocate");
}
}  // namespace

Status PlanGraphArena(const ArenaGraph& g, const std::vector<bool>& folded, size_t limit,
                      size_t used, const std::string& label, OwnedBuffer* arena, size_t* arena_size,
                      size_t* kept_bytes) {
  std::vector<Tensor>& tensors = *g.tensors;
  std::vector<KernelContext>& contexts = *g.contexts;
  const int nops = int(g.defs.size());
  const size_t budget = limit - std::min(limit, used);
  *arena_size = 0;
  *kept_bytes = 0;
  // Scratch first, so that an op whose scratch alone is too much is named.
  std::vector<size_t> scratch(size_t(nops), 0);
  size_t kept = 0;
  // The op with the most scratch (run and kept), for the message.
  int largest = -1;
  size_t largest_bytes = 0;
  for (int k = 0; k < nops; ++k) {
    KernelContext& ctx = contexts[size_t(k)];
    ClearScratch(ctx);
    if (folded[size_t(k)] || !g.defs[size_t(k)]->scratch) continue;
    ScratchNeeds needs;
    QF_RETURN_IF_ERROR(g.defs[size_t(k)]->scratch(ctx, &needs));
    ctx.scratch_planned = true;
    if (needs.run > budget || needs.kept > budget - std::min(budget, kept + needs.run))
      return ScratchOverLimit(ctx, needs, limit);
    kept += needs.kept;
    scratch[size_t(k)] = needs.run;
    if (needs.run + needs.kept > largest_bytes) {
      largest = k;
      largest_bytes = needs.run + needs.kept;
    }
  }
  // Lifetimes in op steps.
  const size_t nt = tensors.size();
  std::vector<int> first(nt, INT_MAX), last(nt, -1);
  for (int id : g.live_from_start)
    first[size_t(id)] = -1, last[size_t(id)] = std::max(last[size_t(id)], -1);
  for (int k = 0; k < nops; ++k) {
    if (folded[size_t(k)]) continue;
    for (int id : *g.op_inputs[size_t(k)])
      if (id >= 0) last[size_t(id)] = std::max(last[size_t(id)], k);
    for (int id : *g.op_outputs[size_t(k)])
      if (id >= 0)
        first[size_t(id)] = std::min(first[size_t(id)], k),
        last[size_t(id)] = std::max(last[size_t(id)], k);
  }
  for (int id : g.live_to_end) last[size_t(id)] = nops;
  // Views (OpDef::output0_views_input0) share their input's buffer when both
  // are activations written by ops here: one request for the group, alive
  // from the first write to the last read of any member. No op writes a value
  // after its producer, so sharing never changes what a reader sees.
  std::vector<int> group(nt);
  std::iota(group.begin(), group.end(), 0);
  for (int k = 0; k < nops; ++k) {
    if (folded[size_t(k)] || !g.defs[size_t(k)]->output0_views_input0) continue;
    const std::vector<int>& ins = *g.op_inputs[size_t(k)];
    const std::vector<int>& outs = *g.op_outputs[size_t(k)];
    if (ins.empty() || outs.empty() || ins[0] < 0 || outs[0] < 0) continue;
    const size_t in = size_t(ins[0]), out = size_t(outs[0]);
    if (tensors[in].data || tensors[out].data || first[in] < 0 || first[in] == INT_MAX ||
        first[out] != k || tensors[in].bytes() != tensors[out].bytes())
      continue;
    group[out] = group[in];  // inputs precede outputs: group[in] is its root
  }
  for (size_t i = 0; i < nt; ++i)
    if (group[i] != int(i)) last[size_t(group[i])] = std::max(last[size_t(group[i])], last[i]);
  std::vector<BufferRequest> requests;
  std::vector<int> owner;  // tensor id, or -1 - op for an op's scratch
  for (size_t i = 0; i < nt; ++i) {
    if (tensors[i].data || first[i] == INT_MAX || group[i] != int(i)) continue;
    requests.push_back({tensors[i].bytes(), first[i], last[i]});
    owner.push_back(int(i));
  }
  for (int k = 0; k < nops; ++k)
    if (scratch[size_t(k)]) {
      requests.push_back({scratch[size_t(k)], k, k});
      owner.push_back(-1 - k);
    }
  std::vector<size_t> offsets;
  const size_t size = PlanArena(requests, kAlign, &offsets);
  const std::string prefix = label.empty() ? "" : label + ": ";
  if (size > budget - std::min(budget, kept)) {
    std::string msg = prefix + "activations need an arena of " + std::to_string(size) + " bytes";
    if (largest >= 0) {
      const KernelContext& ctx = contexts[size_t(largest)];
      msg += " (kernel scratch included; the most, " + std::to_string(largest_bytes) +
             " bytes run and kept, for " + *ctx.op_type + " '" + *ctx.op_name + "')";
    }
    if (used || kept)
      msg += " plus " + std::to_string(used + kept) +
             " bytes of values computed at plan time and kept kernel scratch";
    return Status(StatusCode::kInvalidModel, msg + ", more than the " + std::to_string(limit) +
                                                 " bytes a session may allocate");
  }
  uint8_t* base = static_cast<uint8_t*>(arena->Reserve(size));
  if (!base)
    return Status(StatusCode::kIoError,
                  prefix + "cannot allocate an arena of " + std::to_string(size) + " bytes");
  for (size_t r = 0; r < requests.size(); ++r) {
    if (owner[r] >= 0) {
      tensors[size_t(owner[r])].data = base + offsets[r];
    } else {
      KernelContext& ctx = contexts[size_t(-1 - owner[r])];
      ctx.scratch = base + offsets[r];
      ctx.scratch_size = requests[r].bytes;
    }
  }
  for (size_t i = 0; i < nt; ++i)
    if (group[i] != int(i)) tensors[i].data = tensors[size_t(group[i])].data;
  *arena_size = size;
  *kept_bytes = kept;
  return Status::Ok();
}

Status ReserveDynamicScratch(const OpDef& def, KernelContext& ctx, size_t limit, size_t used,
                             OwnedBuffer* buffer) {
  ClearScratch(ctx);
  if (!def.scratch) return Status::Ok();
  ScratchNeeds needs;
  QF_RETURN_IF_ERROR(def.scratch(ctx, &needs));
  const size_t budget = limit - std::min(limit, used);
  if (needs.run > budget || needs.kept > budget - needs.run)
    return ScratchOverLimit(ctx, needs, limit);
  ctx.scratch = buffer->Reserve(needs.run);
  if (!ctx.scratch)
    return ctx.Error(StatusCode::kIoError,
                     "out of memory for " + std::to_string(needs.run) + " bytes of kernel scratch");
  ctx.scratch_size = needs.run;
  ctx.scratch_planned = true;
  return Status::Ok();
}

Status MakeSubgraphRunner(KernelContext& ctx, const char* attr, std::unique_ptr<GraphRunner>* out) {
  if (!ctx.subgraphs || !ctx.subgraphs->model)
    return ctx.Unsupported("runs subgraphs only inside a session");
  const Attr* a = ctx.attr().Find(attr);
  const auto& graphs = ctx.subgraphs->model->subgraphs;
  if (!a || a->kind != Attr::kInt || a->i < 0 || a->i >= int64_t(graphs.size()))
    return ctx.Invalid(std::string("attribute '") + attr + "' does not name a subgraph");
  return GraphRunner::Create(*ctx.subgraphs, int(a->i),
                             *ctx.op_type + " '" + *ctx.op_name + "' " + attr, out);
}

GraphRunner::~GraphRunner() = default;

Status GraphRunner::Create(const SubgraphEnv& env, int graph_index, const std::string& label,
                           std::unique_ptr<GraphRunner>* out) {
  std::unique_ptr<GraphRunner> r(new GraphRunner);
  r->env_ = &env;
  r->graph_ = &env.model->subgraphs[size_t(graph_index)];
  r->label_ = label;
  const GraphEntry& g = *r->graph_;
  std::unordered_map<int, int> slot_of;
  auto slot = [&](int id) {
    if (id < 0) return -1;
    auto it = slot_of.find(id);
    if (it != slot_of.end()) return it->second;
    const int s = int(r->tensors_.size());
    slot_of[id] = s;
    r->tensors_.emplace_back();
    r->tensors_.back().name = env.model->tensors[size_t(id)].info.name;
    r->tensors_.back().is_sequence = env.model->tensors[size_t(id)].info.is_sequence;
    r->tensors_.back().is_optional = env.model->tensors[size_t(id)].info.is_optional;
    r->has_sequences_ = r->has_sequences_ || r->tensors_.back().boxed();
    return s;
  };
  for (int id : g.input_ids) r->input_slots_.push_back(slot(id));
  for (const OpEntry& op : g.ops) {
    r->op_in_slots_.emplace_back();
    r->op_out_slots_.emplace_back();
    for (int id : op.inputs) r->op_in_slots_.back().push_back(slot(id));
    for (int id : op.outputs) r->op_out_slots_.back().push_back(slot(id));
  }
  for (int id : g.output_ids) r->output_slots_.push_back(slot(id));
  r->sequences_.resize(r->tensors_.size());
  for (size_t s = 0; s < r->tensors_.size(); ++s)
    if (r->tensors_[s].boxed()) r->tensors_[s].sequence = &r->sequences_[s];
  r->contexts_.resize(g.ops.size());
  r->op_state_.resize(g.ops.size());
  for (size_t k = 0; k < g.ops.size(); ++k) {
    const OpEntry& op = g.ops[k];
    KernelContext& ctx = r->contexts_[k];
    ctx.op_type = &op.type;
    ctx.op_name = &op.name;
    ctx.attrs = &op.attrs;
    ctx.pool = env.pool;
    ctx.kernels = env.kernels;
    ctx.subgraphs = &env;
    for (int s : r->op_in_slots_[k])
      ctx.inputs.push_back(s >= 0 ? &r->tensors_[size_t(s)] : nullptr);
    for (int s : r->op_out_slots_[k])
      ctx.outputs.push_back(s >= 0 ? &r->tensors_[size_t(s)] : nullptr);
    if (op.def->has_subgraphs) {
      QF_RETURN_IF_ERROR(op.def->prepare(ctx, &r->op_state_[k]));
      ctx.state = r->op_state_[k].get();
    }
  }
  ArenaGraph& ag = r->arena_graph_;
  ag.tensors = &r->tensors_;
  ag.contexts = &r->contexts_;
  for (size_t k = 0; k < g.ops.size(); ++k) {
    ag.defs.push_back(g.ops[k].def);
    ag.op_inputs.push_back(&r->op_in_slots_[k]);
    ag.op_outputs.push_back(&r->op_out_slots_[k]);
  }
  // Inputs belong to the caller (not planned); outputs live to the end.
  ag.live_to_end = r->output_slots_;
  *out = std::move(r);
  return Status::Ok();
}

const Tensor& GraphRunner::output(int i) const {
  return tensors_[size_t(output_slots_[size_t(i)])];
}

Tensor GraphRunner::planned_output(int i) const {
  Tensor t = output(i);
  t.data = nullptr;
  if (dynamic_)
    for (int64_t& d : t.shape) d = kUnknownDim;
  return t;
}

bool GraphRunner::OutputPassesInput(int i, int j) const {
  int s = output_slots_[size_t(i)];
  const int want = input_slots_[size_t(j)];
  for (;;) {
    if (s == want) return true;
    int producer = -1;
    for (size_t k = 0; k < graph_->ops.size() && producer < 0; ++k)
      for (int o : op_out_slots_[k])
        if (o == s) producer = int(k);
    if (producer < 0 || graph_->ops[size_t(producer)].type != "Identity") return false;
    s = op_in_slots_[size_t(producer)][0];
  }
}

size_t GraphRunner::arena_bytes() const {
  size_t n = arena_size_ + kept_bytes_;
  for (size_t k = 0; k < graph_->ops.size(); ++k)
    if (graph_->ops[k].def->has_subgraphs && op_state_[k])
      n += static_cast<const ControlFlowState*>(op_state_[k].get())->arena_bytes();
  return n;
}

Status GraphRunner::CheckShapes(KernelContext& ctx, size_t budget_used) const {
  for (Tensor* o : ctx.outputs) {
    if (!o || o->boxed()) continue;
    int64_t n = 0;
    if (!o->rank_known || o->rank() > kMaxRank || !CheckedNumel(o->shape, &n) ||
        n > kMaxActivationElements)
      return ctx.Invalid("output '" + o->name + "' gets an invalid shape " +
                         ShapeToString(o->shape));
    if (o->bytes() > env_->max_memory_bytes - std::min(env_->max_memory_bytes, budget_used))
      return ctx.Invalid("output '" + o->name + "' of shape " + ShapeToString(o->shape) +
                         " needs " + std::to_string(o->bytes()) + " bytes, more than the " +
                         std::to_string(env_->max_memory_bytes) + " a session may allocate");
  }
  return Status::Ok();
}

Status GraphRunner::Plan(const std::vector<const Tensor*>& inputs) {
  if (int(inputs.size()) != num_inputs())
    return Status(StatusCode::kInvalidModel, label_ + " takes " + std::to_string(num_inputs()) +
                                                 " inputs, given " + std::to_string(inputs.size()));
  if (planned_) {
    bool same = true;
    for (size_t i = 0; i < inputs.size() && same; ++i)
      same = inputs[i]->dtype == planned_dtypes_[i] && inputs[i]->shape == planned_shapes_[i];
    if (same) return Status::Ok();
  }
  planned_ = false;
  dynamic_ = false;
  folded_storage_.clear();
  arena_size_ = 0;
  kept_bytes_ = 0;
  planned_shapes_.clear();
  planned_dtypes_.clear();
  const Model::Impl& m = *env_->model;
  const GraphEntry& g = *graph_;
  // Slots start as the model declares them: constants with their data.
  std::vector<int> model_id(tensors_.size(), -1);
  for (size_t k = 0; k < g.ops.size(); ++k) {
    for (size_t i = 0; i < g.ops[k].inputs.size(); ++i)
      if (op_in_slots_[k][i] >= 0) model_id[size_t(op_in_slots_[k][i])] = g.ops[k].inputs[i];
    for (size_t i = 0; i < g.ops[k].outputs.size(); ++i)
      if (op_out_slots_[k][i] >= 0) model_id[size_t(op_out_slots_[k][i])] = g.ops[k].outputs[i];
  }
  for (size_t i = 0; i < g.input_ids.size(); ++i)
    model_id[size_t(input_slots_[i])] = g.input_ids[i];
  for (size_t i = 0; i < g.output_ids.size(); ++i)
    model_id[size_t(output_slots_[i])] = g.output_ids[i];
  for (size_t s = 0; s < tensors_.size(); ++s) {
    const TensorEntry& e = m.tensors[size_t(model_id[s])];
    tensors_[s].dtype = e.info.dtype;
    tensors_[s].shape = e.info.shape;
    tensors_[s].rank_known = e.rank_known;
    tensors_[s].data = const_cast<void*>(e.const_data);
    tensors_[s].is_sequence = e.info.is_sequence;
    tensors_[s].is_optional = e.info.is_optional;
    if (tensors_[s].boxed()) tensors_[s].sequence = &sequences_[s];
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& t = tensors_[size_t(input_slots_[i])];
    const TensorInfo& declared = m.tensors[size_t(g.input_ids[i])].info;
    if (inputs[i]->dtype != declared.dtype || inputs[i]->is_sequence != declared.is_sequence ||
        inputs[i]->is_optional != declared.is_optional ||
        (inputs[i]->boxed() && !inputs[i]->sequence))
      return Status(StatusCode::kInvalidModel,
                    label_ + ": input '" + t.name + "' is " +
                        KindName(declared.is_optional, declared.is_sequence, declared.dtype) +
                        ", given " + KindName(*inputs[i]));
    t.shape = inputs[i]->shape;
    t.rank_known = inputs[i]->rank_known;
    t.data = nullptr;
    if (t.boxed()) t.sequence = inputs[i]->sequence;
    planned_shapes_.push_back(inputs[i]->shape);
    planned_dtypes_.push_back(inputs[i]->dtype);
  }

  const int nops = int(g.ops.size());
  folded_.assign(size_t(nops), false);
  size_t folded_bytes = 0;
  // A sequence's length and elements are data: each op is inferred as it runs.
  dynamic_ = has_sequences_;
  for (int k = 0; k < nops && !dynamic_; ++k) {
    const OpEntry& op = g.ops[size_t(k)];
    KernelContext& ctx = contexts_[size_t(k)];
    ClearScratch(ctx);  // folded ops run before the arena exists
    QF_RETURN_IF_ERROR(op.def->infer(ctx));
    QF_RETURN_IF_ERROR(CheckOutputKinds(ctx));
    bool all_known = true, value_unknown = false, outputs_known = true;
    for (Tensor* in : ctx.inputs)
      if (in && !in->data) all_known = false;
    for (int i = 0; i < ctx.num_inputs() && i < 32; ++i)
      if ((op.def->value_inputs >> i & 1) && ctx.inputs[size_t(i)] && !ctx.inputs[size_t(i)]->data)
        value_unknown = true;
    for (Tensor* o : ctx.outputs)
      if (o && !o->shape_known()) outputs_known = false;
    if (!outputs_known && (value_unknown || op.def->sizes_outputs)) {
      dynamic_ = true;
      break;
    }
    QF_RETURN_IF_ERROR(CheckShapes(ctx, 0));
    for (Tensor* o : ctx.outputs)
      if (o) o->data = nullptr;
    if (op.def->prepare && !op_state_[size_t(k)]) {
      bool consts = true;
      for (int i = 0; i < ctx.num_inputs() && i < 32; ++i)
        if ((op.def->const_inputs >> i & 1) &&
            (!ctx.inputs[size_t(i)] || !m.tensors[size_t(op.inputs[size_t(i)])].const_data))
          consts = false;
      if (consts) {
        QF_RETURN_IF_ERROR(op.def->prepare(ctx, &op_state_[size_t(k)]));
        ctx.state = op_state_[size_t(k)].get();
      }
    }
    if ((op.def->shape_only || all_known) && !op.def->has_subgraphs) {
      for (Tensor* o : ctx.outputs) {
        if (!o) continue;
        folded_bytes += o->bytes();
        if (folded_bytes > env_->max_memory_bytes)
          return ctx.Invalid("values computed at plan time need more than the " +
                             std::to_string(env_->max_memory_bytes) +
                             " bytes a session may allocate");
        folded_storage_.emplace_back();
        o->data = folded_storage_.back().Reserve(o->bytes());
        if (!o->data) return ctx.Error(StatusCode::kIoError, "out of memory");
      }
      QF_RETURN_IF_ERROR(RunCaught(*op.def, ctx));
      folded_[size_t(k)] = true;
    }
  }
  if (dynamic_) {
    dynamic_storage_.resize(tensors_.size());
    planned_ = true;
    return Status::Ok();
  }
  QF_RETURN_IF_ERROR(PlanGraphArena(arena_graph_, folded_, env_->max_memory_bytes, folded_bytes,
                                    label_, &arena_, &arena_size_, &kept_bytes_));
  planned_ = true;
  return Status::Ok();
}

Status GraphRunner::RunDynamic() {
  const GraphEntry& g = *graph_;
  size_t used = 0;
  for (size_t k = 0; k < g.ops.size(); ++k) {
    if (folded_[k]) continue;
    const OpDef& def = *g.ops[k].def;
    KernelContext& ctx = contexts_[k];
    QF_RETURN_IF_ERROR(def.infer(ctx));
    QF_RETURN_IF_ERROR(CheckOutputKinds(ctx));
    // Sequence outputs are written by the op into their values, not buffers.
    bool known = true;
    for (Tensor* o : ctx.outputs)
      if (o && !o->boxed() && !o->shape_known()) known = false;
    ctx.op_allocates_outputs = def.sizes_outputs && !known;
    if (!ctx.op_allocates_outputs) {
      QF_RETURN_IF_ERROR(CheckShapes(ctx, used));
      for (size_t o = 0; o < ctx.outputs.size(); ++o) {
        Tensor* t = ctx.outputs[o];
        if (!t || t->boxed()) continue;
        used += t->bytes();
        t->data = dynamic_storage_[size_t(op_out_slots_[k][o])].Reserve(t->bytes());
        if (!t->data && t->bytes())
          return ctx.Error(StatusCode::kIoError, "out of memory for output '" + t->name + "'");
      }
    }
    QF_RETURN_IF_ERROR(
        ReserveDynamicScratch(def, ctx, env_->max_memory_bytes, used, &dynamic_scratch_));
    QF_RETURN_IF_ERROR(RunCaught(def, ctx));
    // The body's sequences count against the session's bound with its buffers.
    size_t held = used;
    for (const SequenceValue& v : sequences_) held += v.bytes();
    if (held > env_->max_memory_bytes)
      return ctx.Invalid("sequences and buffers need " + std::to_string(held) +
                         " bytes, more than the " + std::to_string(env_->max_memory_bytes) +
                         " a session may allocate");
  }
  return Status::Ok();
}

Status GraphRunner::Run(const std::vector<const Tensor*>& inputs) {
  QF_RETURN_IF_ERROR(Plan(inputs));
  // Inputs are read in place: no op of the subgraph writes them.
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& t = tensors_[size_t(input_slots_[i])];
    t.data = inputs[i]->data;
    if (t.boxed()) t.sequence = inputs[i]->sequence;
  }
  if (dynamic_) return RunDynamic();
  for (size_t k = 0; k < contexts_.size(); ++k) {
    if (folded_[k]) continue;
    QF_RETURN_IF_ERROR(RunCaught(*graph_->ops[k].def, contexts_[k]));
  }
  return Status::Ok();
}

}  // namespace qfold
