// How an operator is defined: one OpDef per ONNX op type, holding a shape and
// dtype inference function and a reference kernel. The same OpDef serves the
// runtime (plan, then run) and the converter (shape inference and constant
// folding), so each op's semantics live in exactly one file under ops/.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/attr.h"
#include "core/tensor.h"
#include "qfold/status.h"

namespace qfold {
namespace kernels {
class ThreadPool;
struct KernelConfig;
}  // namespace kernels
struct SubgraphEnv;  // graph_runner.h

// Memory an op's run needs beyond its inputs and outputs (OpDef::scratch).
struct ScratchNeeds {
  // Alive only while the op runs: planned in the session's arena beside the
  // activations (ops that run at different steps share it) and handed over as
  // KernelContext::scratch. Per-thread scratch is counted for every thread.
  size_t run = 0;
  // Held by the op's prepared state across runs for these shapes (an
  // indirection buffer reused while the input's address stays): not in the
  // arena, but counted with it against SessionOptions::max_memory_bytes.
  size_t kept = 0;
};

struct KernelContext {
  const std::string* op_type = nullptr;
  const std::string* op_name = nullptr;  // ONNX node name, for messages
  const AttrMap* attrs = nullptr;
  std::vector<Tensor*> inputs;   // nullptr for an omitted optional input
  std::vector<Tensor*> outputs;  // nullptr for an omitted optional output
  // The session's threads (kernels/thread_pool.h); null runs everything on
  // the calling thread.
  kernels::ThreadPool* pool = nullptr;
  // The kernel variants to use (kernels/kernel_config.h): a session's own
  // configuration, the reference one in the converter; null means
  // kernels::DefaultKernelConfig(). Read it through kernel_config().
  const kernels::KernelConfig* kernels = nullptr;
  // Per-op state built once by OpDef::prepare (packed weights, tables); null otherwise.
  void* state = nullptr;
  // Set by a run that fell back to its reference kernel although the op has
  // fast kernels (an uncovered case); profiling reports it (qfold bench --profile).
  bool reference_path = false;
  // Runtime only: what If/Loop/Scan need to run their subgraphs (the model,
  // kernels, threads, memory limit); null in the converter.
  const SubgraphEnv* subgraphs = nullptr;
  // Set by the session in dynamic mode for ops with OpDef::sizes_outputs: run
  // sets the outputs' shapes and points their data at buffers the op owns
  // (a Loop's scan outputs are sized by the iterations it runs).
  bool op_allocates_outputs = false;
  // Runtime only: the scratch planned for this op (OpDef::scratch), 64-byte
  // aligned, valid during run. scratch_planned is false where nothing was
  // planned (the converter, ops evaluated at plan time): kernels then
  // allocate their own (kernels/scratch.h).
  void* scratch = nullptr;
  size_t scratch_size = 0;
  bool scratch_planned = false;

  int num_inputs() const { return int(inputs.size()); }
  int num_outputs() const { return int(outputs.size()); }
  // Input i if present (not omitted), else nullptr.
  Tensor* input(int i) const { return i < num_inputs() ? inputs[i] : nullptr; }
  Tensor* output(int i) const { return i < num_outputs() ? outputs[i] : nullptr; }
  const AttrMap& attr() const { return *attrs; }
  const kernels::KernelConfig& kernel_config() const;

  // "Conv '/layer1/conv': <msg>" style errors.
  Status Error(StatusCode code, const std::string& msg) const;
  Status Invalid(const std::string& msg) const { return Error(StatusCode::kInvalidModel, msg); }
  Status Unsupported(const std::string& msg) const { return Error(StatusCode::kUnsupported, msg); }
};

// How an op reads the axes of its data tensors; the converter's layout
// planning (converter/passes/plan_layouts.cc) asks the op instead of keeping lists.
enum class LayoutRole : unsigned char {
  kFixed = 0,     // reads axes by position: another layout needs a Transpose in front
  kElementwise,   // the same at every position: the data inputs may be permuted together
  kAxis,          // like kElementwise, with an "axis" attribute that follows the permutation
  kChannelsLast,  // spatial op with a channels_last attribute (NCHW -> NHWC variant)
};

// Default data inputs of a layout-agnostic op: input 0 only.
inline bool FirstInputOnly(int index, int /*num_inputs*/) {
  return index == 0;
}
inline bool EveryInput(int /*index*/, int /*num_inputs*/) {
  return true;
}

// What the converter may assume about an op, kept on its OpDef (OpDef::traits)
// so that passes ask the op instead of keeping lists of names.
enum OpTrait : unsigned {
  // Output elements are copies of input elements (Reshape, Transpose, Gather,
  // MaxPool, nearest Resize ...): quantized values pass through unchanged, so
  // a DequantizeLinear can move past it and a Q/DQ pair around it folds away.
  kTraitMovesElements = 1u << 0,
  // A float function of one tensor, element by element, whose other inputs
  // are constant parameters (Clip's bounds): between DequantizeLinear and
  // QuantizeLinear it becomes a table over the quantized values (QfLookupTable).
  kTraitUnaryLut = 1u << 1,
  // Output element i depends on input element i alone (other inputs broadcast
  // single values): a region of such ops between quantized values collapses
  // to one table (converter/passes/collapse_bytewise.cc).
  kTraitPointwise = 1u << 2,
  // All its present inputs broadcast against each other the numpy way (not
  // QLinearAdd: its scales and zero points are separate per-tensor inputs).
  kTraitBroadcasting = 1u << 3,
  // Reads input 0 as N, C, spatial axes (NCHW), so graph inputs and outputs
  // next to it are images.
  kTraitSpatial = 1u << 4,
  // A matrix product: Conv, ConvTranspose, MatMul, Gemm and their integer
  // forms; the heavy ops whose integer share check/inspect report.
  kTraitMatrixProduct = 1u << 5,
  // Computes on integer data with integer kernels (what folded QDQ becomes).
  kTraitIntegerKernel = 1u << 6,
  // Its float16 constant inputs (weights, bias) are widened to float32 once
  // when the model loads, so the converter may store them as float16 (half
  // the file) and the op still computes on the same float32 values.
  kTraitHalfWeights = 1u << 7,
  // Reads or writes sequence values (SequenceAt, SplitToSequence ...; Identity
  // passes them on). Other ops refuse a sequence input.
  kTraitSequence = 1u << 8,
  // Reads or writes optional values (Optional, OptionalHasElement,
  // OptionalGetElement; Identity passes them on). Other ops refuse them.
  kTraitOptional = 1u << 9,
};

struct OpDef {
  const char* type;
  // Validates attributes and input dtypes/shapes, then sets every present
  // output's dtype and shape. Input shapes may hold kUnknownDim (converter);
  // results then hold kUnknownDim too, or rank_known = false. Reads input
  // data only for inputs in value_inputs, and only when their data is known.
  Status (*infer)(KernelContext& ctx);
  // Computes outputs whose buffers the caller has allocated per infer.
  Status (*run)(KernelContext& ctx);
  // Bit i set: the output shape depends on the value of input i.
  unsigned value_inputs = 0;
  // Output value depends only on input shapes (Shape, Size): computable at plan time.
  bool shape_only = false;
  int min_inputs = 1;
  int max_inputs = 1;
  // Optional: builds state that stays valid across runs and input resizes
  // (e.g. weights packed for a SIMD kernel). Called once per session, after
  // the first successful infer, only when every input in `const_inputs` is a
  // constant. The session owns the returned state.
  Status (*prepare)(KernelContext& ctx, std::shared_ptr<void>* state) = nullptr;
  unsigned const_inputs = 0;
  LayoutRole layout = LayoutRole::kFixed;
  // kElementwise/kAxis: which inputs are data tensors (permuted with the
  // layout, broadcast against each other); the others are per-tensor parameters.
  bool (*layout_input)(int index, int num_inputs) = FirstInputOnly;
  // kAxis: the axis an absent "axis" attribute means; kNoDefaultAxis when an
  // absent attribute means there is no axis (QfLookupTable's single table).
  int layout_default_axis = 1;
  // kChannelsLast: whether a node with these attributes has a channels-last
  // kernel worth planning for (null: always).
  bool (*layout_channels_last)(const AttrMap& attrs) = nullptr;
  // kChannelsLast: whether 4-D float32 data has a channels-last kernel too
  // (otherwise only 8-bit data, and QLinearConv's 16-bit, is planned so).
  bool layout_float = false;
  // If/Loop/Scan: reads subgraphs (INT attributes then_branch/else_branch/body
  // index Model.subgraphs). The session calls prepare before the first infer,
  // which builds the subgraphs' runners; the converter infers such ops itself
  // (converter/passes/infer_subgraphs.cc).
  bool has_subgraphs = false;
  // The output shapes may be known only after running (see
  // KernelContext::op_allocates_outputs); the session then runs in dynamic mode.
  bool sizes_outputs = false;
  // Whether output 0 may be omitted (ONNX: LSTM/GRU/RNN's Y). Elsewhere infer
  // and run write output 0, so the loader and the converter refuse a node without it.
  // (Last, like the other flags, so positional initializers of the fields above stay valid.)
  bool output0_optional = false;
  // OpTrait bits.
  unsigned traits = 0;
  // Optional: the scratch run will need for the current shapes, state and
  // threads (called after infer and prepare, before run). The session plans
  // it and refuses the model at plan time when it exceeds the memory limit.
  Status (*scratch)(KernelContext& ctx, ScratchNeeds* needs) = nullptr;
  // Output 0 holds input 0's bytes unchanged (Reshape and its kin): the
  // planner may give both one buffer, and run then copies nothing (it must
  // skip the copy when the pointers are equal).
  bool output0_views_input0 = false;
  // Input slots, so that the converter, `qfold check` and `qfold inspect` ask
  // the op instead of keeping lists of names (appended last, like the flags).
  // Bit i set: input i must have the dtype of the other inputs marked here
  // (Add's operands; Conv's X, W and B); kAllInputs: every input, however many.
  unsigned same_dtype_inputs = 0;
  // The weight of a matrix product (Conv's W, QLinearConv's w, MatMul's B),
  // its scale (quantized forms) and the bias; -1 where the op has none.
  signed char weight_input = -1;
  signed char weight_scale_input = -1;
  signed char bias_input = -1;
  // Optional, bf16 mode (SessionOptions::precision): which float32 inputs
  // (bit i) run can read as bfloat16 and which outputs it can write so, for
  // the planned shapes and prepared state. A session stores an activation
  // as bfloat16 (half the bytes to write and read) when its producer writes
  // it so and every op reading it reads it so; run then finds those
  // tensors' dtype kBFloat16. Each named slot is decided on its own, so run
  // must take every mix of them (a float32 input, a bfloat16 output ...)
  // unless bf16_tied.
  void (*bf16_io)(KernelContext& ctx, unsigned* inputs, unsigned* outputs) = nullptr;
  // The slots bf16_io names are stored all as bfloat16 or none (Concat and
  // MaxPool move the bytes of one dtype).
  bool bf16_tied = false;
};

// OpDef::same_dtype_inputs of an op whose inputs all share one dtype (variadic ones too).
constexpr unsigned kAllInputs = ~0u;

// Whether input `index` of op `def` must share the dtype of its other such inputs.
inline bool SameDtypeInput(const OpDef& def, size_t index) {
  return def.same_dtype_inputs == kAllInputs ||
         (index < sizeof(unsigned) * 8 && ((def.same_dtype_inputs >> index) & 1u) != 0);
}

// `def` with `traits` set: lets positional OpDef initializers add traits.
inline OpDef WithTraits(OpDef def, unsigned traits) {
  def.traits = traits;
  return def;
}
constexpr int kNoDefaultAxis = -1000;

// nullptr when the op type is not supported.
const OpDef* FindOp(const std::string& type);
// Whether op `type` has every bit of `traits`; false for unsupported types.
bool HasTraits(const std::string& type, unsigned traits);
// Every supported op type, sorted.
std::vector<std::string> SupportedOps();

}  // namespace qfold
