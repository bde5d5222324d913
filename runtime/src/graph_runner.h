// Runs one subgraph of a model (an If branch, a Loop or Scan body) for the
// control-flow ops. It is planned like a session: shapes inferred from its
// input shapes, what depends only on constants and shapes evaluated at plan
// time, one arena for the rest from lifetimes, and a dynamic mode when a shape
// depends on data. The plan is kept while the input shapes stay the same, so
// a Loop re-plans only when a carried value changes shape.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/op.h"
#include "core/sequence.h"
#include "model_impl.h"

namespace qfold {

// What a control-flow op needs to build runners for its subgraphs.
struct SubgraphEnv {
  const Model::Impl* model = nullptr;
  const kernels::KernelConfig* kernels = nullptr;
  kernels::ThreadPool* pool = nullptr;
  size_t max_memory_bytes = SIZE_MAX;
  int64_t max_loop_iterations = 0;  // SessionOptions::max_loop_iterations
};

// A 64-byte aligned buffer with 64 bytes of tail padding (kernels' SIMD
// over-reads), grown on demand.
class OwnedBuffer {
 public:
  // Null when the allocation failed (bytes > 0).
  void* Reserve(size_t bytes);
  // Grows to at least `bytes`, keeping the first `keep` bytes.
  void* Grow(size_t bytes, size_t keep);
  void* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  void Release() {
    data_.reset();
    capacity_ = 0;
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t capacity_ = 0;
};

// One graph's ops and tensors as PlanGraphArena sees them: a session's
// (model tensor ids) or a subgraph runner's (local slots).
struct ArenaGraph {
  std::vector<Tensor>* tensors = nullptr;                      // those with data are not planned
  std::vector<KernelContext>* contexts = nullptr;              // per op
  std::vector<const OpDef*> defs;                              // per op
  std::vector<const std::vector<int>*> op_inputs, op_outputs;  // tensor per slot, -1 omitted
  std::vector<int> live_from_start;  // written before the first op (a session's inputs)
  std::vector<int> live_to_end;      // read after the last op (outputs, state inputs)
};

// Asks every op that runs (not `folded`) for its scratch (OpDef::scratch),
// then places the tensors without data by their lifetimes in op steps and
// each op's run scratch at its own step in one arena; refuses a plan whose
// arena, kept scratch and `used` bytes exceed `limit` (an op whose scratch
// alone does is named); then allocates the arena and points the tensors and
// the contexts' scratch into it. `label` prefixes messages (a subgraph's).
Status PlanGraphArena(const ArenaGraph& g, const std::vector<bool>& folded, size_t limit,
                      size_t used, const std::string& label, OwnedBuffer* arena, size_t* arena_size,
                      size_t* kept_bytes);

// Dynamic mode: the op's scratch in `buffer` (one for every op, grown to the
// largest), refused when it would take the memory past `limit` - `used`.
Status ReserveDynamicScratch(const OpDef& def, KernelContext& ctx, size_t limit, size_t used,
                             OwnedBuffer* buffer);

// The model labels which tensors hold sequences (or optionals); an op's infer must agree (a
// crafted file may label a sequence op's output a tensor, or the reverse).
inline Status CheckOutputKinds(const KernelContext& ctx) {
  for (const Tensor* t : ctx.outputs)
    if (t && t->boxed() != (t->sequence != nullptr))
      return ctx.Invalid("output '" + t->name + "' is " +
                         (t->sequence ? "a sequence or optional in the model, a tensor by the op"
                                      : std::string("a tensor in the model, ") +
                                            (t->is_optional ? "an optional" : "a sequence") +
                                            " by the op"));
  return Status::Ok();
}

// "an optional sequence of float32", "float32": a value's kind for messages.
inline std::string KindName(bool is_optional, bool is_sequence, DType dtype) {
  return std::string(is_optional ? "an optional " : "") +
         (is_sequence ? (is_optional ? "sequence of " : "a sequence of ") : "") + dtype_name(dtype);
}
inline std::string KindName(const Tensor& t) {
  return KindName(t.is_optional, t.is_sequence, t.dtype);
}

// Clears what a previous plan left in the context (before infer or folding).
inline void ClearScratch(KernelContext& ctx) {
  ctx.scratch = nullptr;
  ctx.scratch_size = 0;
  ctx.scratch_planned = false;
}

class GraphRunner {
 public:
  // Builds the contexts (and the runners of nested control-flow ops); `label`
  // ("Loop 'decode' body") prefixes its messages.
  static Status Create(const SubgraphEnv& env, int graph_index, const std::string& label,
                       std::unique_ptr<GraphRunner>* out);
  ~GraphRunner();

  const GraphEntry& graph() const { return *graph_; }
  const std::string& label() const { return label_; }
  const SubgraphEnv& env() const { return *env_; }
  int num_inputs() const { return int(graph_->input_ids.size()); }
  int num_outputs() const { return int(graph_->output_ids.size()); }
  // Whether input i is declared an optional (a Loop wraps a carried value to match).
  bool input_is_optional(int i) const {
    return tensors_[size_t(input_slots_[size_t(i)])].is_optional;
  }
  // Infers and plans for these inputs' dtypes and shapes (their data is not
  // read); keeps the previous plan when they have not changed.
  Status Plan(const std::vector<const Tensor*>& inputs);
  // Runs on the inputs' data, planning first when their shapes changed.
  Status Run(const std::vector<const Tensor*>& inputs);
  // Output i: after Plan its dtype and shape (dims may be unknown in dynamic
  // mode), after Run its value too, valid until the next Plan or Run.
  const Tensor& output(int i) const;
  // Output i as planned, without data: dims unknown in dynamic mode (those of
  // its last run are no promise for the next).
  Tensor planned_output(int i) const;
  // Whether output `i` is a copy of input `j` (Identity chains included): a
  // Loop whose condition output passes its condition input on runs M times.
  bool OutputPassesInput(int i, int j) const;
  // This plan's arena and kept kernel scratch plus those of the nested
  // subgraphs, planned so far.
  size_t arena_bytes() const;

 private:
  GraphRunner() = default;
  Status RunDynamic();
  Status CheckShapes(KernelContext& ctx, size_t budget_used) const;

  const SubgraphEnv* env_ = nullptr;
  const GraphEntry* graph_ = nullptr;
  std::string label_;
  std::vector<Tensor> tensors_;  // local slots
  // Values of the slots that hold sequences (a runner with any runs in
  // dynamic mode); an input slot points at its caller's value instead.
  std::vector<SequenceValue> sequences_;
  bool has_sequences_ = false;
  std::vector<int> input_slots_, output_slots_;
  std::vector<std::vector<int>> op_in_slots_, op_out_slots_;
  std::vector<KernelContext> contexts_;
  std::vector<std::shared_ptr<void>> op_state_;
  std::vector<bool> folded_;
  std::vector<Shape> planned_shapes_;
  std::vector<DType> planned_dtypes_;
  bool planned_ = false;
  bool dynamic_ = false;
  std::vector<OwnedBuffer> folded_storage_;
  std::vector<OwnedBuffer> dynamic_storage_;  // per slot, dynamic mode
  OwnedBuffer dynamic_scratch_;
  OwnedBuffer arena_;
  size_t arena_size_ = 0;
  size_t kept_bytes_ = 0;  // ScratchNeeds::kept of the planned ops
  ArenaGraph arena_graph_;
};

// The state of an If/Loop/Scan op (OpDef::prepare): its subgraphs' runners
// and the buffers it keeps between iterations and runs.
struct ControlFlowState {
  std::vector<std::unique_ptr<GraphRunner>> runners;
  // Loop/Scan: loop-carried values, double-buffered (an iteration's outputs
  // may be another carried value's inputs, so they are written apart).
  std::vector<OwnedBuffer> carried[2];
  std::vector<Tensor> carried_tensors[2];
  // Scan slices of the current iteration; the iteration counter and condition.
  std::vector<OwnedBuffer> slices;
  std::vector<Tensor> slice_tensors;
  int64_t iteration = 0;
  bool condition = true;
  Tensor iteration_tensor, condition_tensor;
  // Outputs the op sizes itself (dynamic mode).
  std::vector<OwnedBuffer> outputs;
  // Loop: loop-carried sequences, double-buffered like `carried`.
  std::vector<SequenceValue> carried_sequences[2];
  // Loop: carried values wrapped into or unwrapped from optionals where the
  // body's input kind differs (0, 1: by parity like `carried`; 2: initial values).
  std::vector<Tensor> coerced_tensors[3];
  std::vector<SequenceValue> coerced_values[3];

  size_t arena_bytes() const {
    size_t n = 0;
    for (const auto& r : runners) n += r ? r->arena_bytes() : 0;
    return n;
  }
};

// The runner for the subgraph named by attribute `attr` of a control-flow op.
Status MakeSubgraphRunner(KernelContext& ctx, const char* attr, std::unique_ptr<GraphRunner>* out);

}  // namespace qfold
