// Converter passes: each takes the Graph and leaves a valid Graph. One file each.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "converter/ir.h"

namespace qfold {
namespace conv {

// Rewrites every node into the newest-opset form the runtime implements
// (attributes that later opsets turned into inputs, Upsample -> Resize, ...).
Status NormalizeOpsets(Graph* g);
// SequenceMap -> its ONNX function body: SequenceLength, a SequenceEmpty per
// output and a Loop whose body takes element i of each sequence input (and
// the tensor inputs as they are), runs the SequenceMap body and appends its
// outputs (SequenceInsert). NormalizeOpsets calls it, after normalizing the body.
Status ExpandSequenceMap(Graph* g, Node&& n, std::vector<Node>* out);
// Names a graph defines itself: its inputs, constants and node outputs.
std::set<std::string> DefinedNames(const Graph& g);
// Renames a subgraph's references to enclosing values (and those of the
// subgraphs nested in it); a name the subgraph defines itself hides the outer one.
void RenameOuterRefs(Graph* sub, std::map<std::string, std::string> renames);
// com.microsoft MatMulNBits (ONNX Runtime's weight-only quantizer) ->
// QfMatMulWeightQ on B [K, N] (+ Add of its bias); NormalizeOpsets calls it.
Status LowerMatMulNBits(Graph* g, Node&& n, std::vector<Node>* out);
// Lists every node qfold cannot run, all at once, before any work is done.
Status CheckSupported(const Graph& g);
// fp16/bf16 weights and compute become fp32; the model's boundary keeps its dtypes.
Status WidenHalfFloats(Graph* g);
// For a model whose ONNX file had float16 constants (Graph::had_float16_constants):
// float32 constants read only by ops with kTraitHalfWeights (Conv, ConvTranspose,
// Gemm, MatMul) become float16 again where every value converts back exactly
// (weights changed by folding, e.g. BatchNormalization, stay float32). The
// runtime widens them at load, so results are bit-identical. Runs last.
Status NarrowHalfWeights(Graph* g);
// Drops Identity and inference-mode Dropout, keeping graph output names.
Status RemoveIdentities(Graph* g);
// Infers every value's dtype and shape with the runtime's op definitions and
// replaces nodes whose inputs are all constant (or whose result depends only
// on known shapes) by constants computed with the runtime's kernels.
// DequantizeLinear nodes are kept (not folded into float constants) while
// keep_dequantize is set, so that FoldQdq can still see quantized weights.
Status InferAndFold(Graph* g, bool fold, bool keep_dequantize = false);
// Identical QuantizeLinear nodes on one tensor (same parameter contents and
// attributes) become one, then identical DequantizeLinear nodes; needs a
// topologically sorted graph.
Status MergeDuplicateQdq(Graph* g);
// DequantizeLinear (per tensor) -> data-movement op without a QuantizeLinear
// after it (NNCF's MaxPool) -> op on the integers -> DequantizeLinear, so the
// consumers downstream see a dequantized input.
Status SinkDequantize(Graph* g);
// DequantizeLinear -> op -> QuantizeLinear becomes one integer operator.
// Ops that carry Q/DQ neighbours but stay float get Node::float_reason.
Status FoldQdq(Graph* g);
// After FoldQdq: an LSTM whose W and R are DequantizeLinear of 8-bit constants
// (per tensor or per gate row) -> DynamicQuantizeLSTM on the integers, or
// QfLSTMInteger when X is a DequantizeLinear with one constant scale.
Status FuseQdqLstm(Graph* g);

// QfQLinearConvTranspose whose kernel equals its stride (no pads, dilation,
// groups) -> QLinearConv 1x1 to k*k*M channels + DepthToSpace(DCR).
Status LowerConvTranspose(Graph* g);
// Whether LowerConvTranspose turns a ConvTranspose with these attributes, x
// shape and W shape [C, M, k, k] into a 1x1 convolution (kernel == stride).
bool ConvTransposeIsConv1x1(const AttrMap& attrs, const Shape& x, const Shape& w);
// Its weights W [C, M, k, k] as the 1x1 convolution's [(ky, kx, m), C, 1, 1],
// elements of `esize` bytes.
std::vector<uint8_t> ConvTransposeWeightsAsConv1x1(const uint8_t* src, int64_t c, int64_t m,
                                                   int64_t k, size_t esize);
// The float ConvTranspose of the same shape -> Conv 1x1 + DepthToSpace(DCR),
// its fused activation (FuseActivations) moved to the Conv.
Status LowerFloatConvTranspose(Graph* g);
// After FoldQdq: a Conv with 8-bit DequantizeLinear inputs whose output stays
// float becomes QfConvDequant (integer kernels, float epilogue), with a
// directly following BatchNormalization and activation folded in.
Status FoldQdqFloatOutput(Graph* g);
// Chains of element-wise operators computing 8-bit results from one 8-bit
// tensor and single-element constants become one QfLookupTable per result.
Status CollapseBytewise(Graph* g);
// Dynamic quantization's DynamicQuantizeLinear -> MatMulInteger -> Cast ->
// Mul(a_scale * b_scale) [-> Add bias] -> DynamicQuantizeMatMul, or
// MatMulIntegerToFloat when the quantized input has other readers.
Status FuseDynamicMatMul(Graph* g);
// Conv + BatchNormalization -> Conv with adjusted weights and bias.
Status FuseConvBatchNorm(Graph* g);
// Float MatMul + Add of a constant per-column bias -> MatMul with the bias as
// a third input (before FuseActivations, so an activation after it fuses too).
Status FuseMatMulBias(Graph* g);
// Conv/ConvTranspose/Gemm/MatMul + Relu/Clip/... -> one node with _activation.
Status FuseActivations(Graph* g);
// x * Sigmoid(x) -> Swish, x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6 ->
// HardSwish, the Erf spelling of GELU -> Gelu (FuseActivations runs it first).
Status FuseGatedActivations(Graph* g);
// Conv followed by Mul/Add by per-output-channel (or scalar) constants -> one
// Conv with scaled weights and shifted bias (FuseActivations runs it first).
Status FuseConvAffine(Graph* g);
// Channels-last float Conv -> Add of a same-shape tensor (-> activation) ->
// one Conv with the addend as its fourth input (after layout planning).
Status FuseConvResidual(Graph* g);
// A channels-last float Conv of at most 4 input channels reading a graph
// input through Transpose(NCHW -> NHWC) reads the input itself
// (x_channels_first = 1; after layout planning).
Status FuseConvInputTranspose(Graph* g);
// The _activation attributes (core/activation.h) that apply `act`; false when
// it cannot be fused (an op type or a non-constant bound it does not cover).
bool FusedActivationAttrs(const Graph& g, const Node& act, AttrMap* attrs);
// Applies --input-shape / --dim overrides; names the input, node and both
// shapes when an override contradicts the model (including batch/channel swaps).
Status ApplyInputOverrides(Graph* g, const std::map<std::string, Shape>& shapes,
                           const std::map<std::string, int64_t>& dims);
// --const NAME=VALUE: the input becomes a constant of its own dtype ("16000",
// "1,2,3"), with the declared shape (one unknown dim taken from the count).
Status BindInputConsts(Graph* g, const std::map<std::string, std::string>& consts);
// Replaces each If whose condition folds to a constant by its taken branch,
// nested Ifs too; an If that stays dynamic is kept (it runs both branches'
// plans at run time) and `dynamic_if`, when given, receives the first one's name.
Status FoldIfs(Graph* g, std::string* dynamic_if = nullptr);
// Sequences of the main graph whose length is known at conversion
// (SequenceConstruct, SequenceEmpty, SplitToSequence, SequenceInsert/Erase)
// become lists of tensors; SequenceAt, SequenceLength and ConcatFromSequence
// become Identity/Concat (and Split, Squeeze, Unsqueeze). When one cannot be
// (a sequence graph input or output, a length that depends on data) the
// sequence ops stay and run on sequence values; `kept_why` (optional) then
// says why. Sequences an If/Loop/Scan body would use are refused naming the node.
Status LowerSequences(Graph* g, std::string* kept_why = nullptr);
// The ops LowerSequences lowers (default domain).
bool IsSequenceOp(const Node& n);
// Every If/Loop/Scan subgraph's reads of enclosing values become extra node
// and subgraph inputs (attribute captured_inputs); enclosing constants are
// copied in. Errors name the node: a value no enclosing graph defines, a Loop
// without trip count whose condition comes from data (unbounded).
Status CaptureOuterValues(Graph* g);
// InferAndFold's step for an If/Loop/Scan node: types its subgraphs' inputs
// from the node's, infers (with `fold`, folds) them and sets the node's outputs.
Status InferSubgraphNode(Graph* g, Node* n, bool fold);
// --input-layout NAME=NHWC: the input takes NHWC data; a Transpose restores NCHW.
Status ApplyInputLayouts(Graph* g, const std::map<std::string, std::string>& layouts);
// DequantizeLinear of float8 constants (widened on reading) -> float Sub/Mul.
Status DequantizeWidenedConstants(Graph* g);
// Quantized convolutions and pools run channels-last inside (channels_last = 1),
// Transposes sunk through layout-agnostic ops until they cancel; the model's
// inputs and outputs keep their shapes.
Status PlanLayouts(Graph* g);
// Transpose -> Transpose becomes one Transpose, or nothing when they cancel.
Status CancelTransposes(Graph* g);

// Moves a Transpose across a Reshape towards another Transpose when the
// Reshape's merged axes stay contiguous, then composes them (channel shuffle).
Status CommuteReshapeTransposes(Graph* g);
// Records on graph inputs and outputs their layout and batch/channel axes.
Status AnnotateLayouts(Graph* g);
// The Conv/QLinearConv reading `name` as its data input, directly or through
// QuantizeLinear/DequantizeLinear/Cast; null when there is none.
const Node* FirstConv(const Graph& g, const std::string& name, int depth = 0);

// Removes nodes and constants that no graph output depends on.
Status RemoveDeadCode(Graph* g);

}  // namespace conv
}  // namespace qfold
