#include "converter/converter.h"

#include "converter/onnx_reader.h"
#include "converter/passes/passes.h"
#include "converter/qfm_writer.h"
#include "core/file_io.h"

namespace qfold {
namespace conv {

Status LoadAndOptimize(const std::string& onnx_path, const ConvertOptions& opts, Graph* g) {
  QF_RETURN_IF_ERROR(ReadOnnxModel(onnx_path, g));
  QF_RETURN_IF_ERROR(NormalizeOpsets(g));
  QF_RETURN_IF_ERROR(ApplyInputOverrides(g, opts.input_shapes, opts.dims));
  QF_RETURN_IF_ERROR(BindInputConsts(g, opts.consts));
  QF_RETURN_IF_ERROR(FoldIfs(g));
  QF_RETURN_IF_ERROR(LowerSequences(g));
  QF_RETURN_IF_ERROR(CaptureOuterValues(g));
  QF_RETURN_IF_ERROR(ApplyInputLayouts(g, opts.input_layouts));
  QF_RETURN_IF_ERROR(DequantizeWidenedConstants(g));
  QF_RETURN_IF_ERROR(CheckSupported(*g));
  QF_RETURN_IF_ERROR(VerifyGraph(g));
  QF_RETURN_IF_ERROR(WidenHalfFloats(g));
  QF_RETURN_IF_ERROR(RemoveIdentities(g));
  QF_RETURN_IF_ERROR(VerifyGraph(g));
  QF_RETURN_IF_ERROR(InferAndFold(g, opts.fold_constants, /*keep_dequantize=*/true));
  QF_RETURN_IF_ERROR(MergeDuplicateQdq(g));
  if (opts.fold_qdq) {
    QF_RETURN_IF_ERROR(SinkDequantize(g));
    QF_RETURN_IF_ERROR(FoldQdq(g));
    QF_RETURN_IF_ERROR(FuseQdqLstm(g));
    QF_RETURN_IF_ERROR(FoldQdqFloatOutput(g));
    if (opts.weight_only_int8_activations)
      for (Node& n : g->nodes)
        if (n.op_type == "QfMatMulWeightQ" && !n.attrs.Has("accuracy_level"))
          n.attrs.SetInt("accuracy_level", 4);
    QF_RETURN_IF_ERROR(RemoveDeadCode(g));
    QF_RETURN_IF_ERROR(LowerConvTranspose(g));
  }
  // Weights whose DequantizeLinear found no integer consumer become float constants.
  QF_RETURN_IF_ERROR(InferAndFold(g, opts.fold_constants));
  if (opts.fold_qdq) QF_RETURN_IF_ERROR(CollapseBytewise(g));
  if (opts.fuse) {
    QF_RETURN_IF_ERROR(FuseDynamicMatMul(g));
    QF_RETURN_IF_ERROR(FuseConvBatchNorm(g));
    QF_RETURN_IF_ERROR(FuseMatMulBias(g));
    QF_RETURN_IF_ERROR(FuseActivations(g));
    QF_RETURN_IF_ERROR(LowerFloatConvTranspose(g));
  }
  QF_RETURN_IF_ERROR(CancelTransposes(g));
  QF_RETURN_IF_ERROR(RemoveDeadCode(g));
  QF_RETURN_IF_ERROR(VerifyGraph(g));
  // Re-infer so every value written carries the final dtype and shape.
  QF_RETURN_IF_ERROR(InferAndFold(g, false));
  QF_RETURN_IF_ERROR(AnnotateLayouts(g));
  if (opts.channels_last) {
    QF_RETURN_IF_ERROR(PlanLayouts(g));
    QF_RETURN_IF_ERROR(RemoveDeadCode(g));
    QF_RETURN_IF_ERROR(CommuteReshapeTransposes(g));
    QF_RETURN_IF_ERROR(VerifyGraph(g));
    QF_RETURN_IF_ERROR(InferAndFold(g, false));
    if (opts.fuse) {
      QF_RETURN_IF_ERROR(FuseConvResidual(g));
      QF_RETURN_IF_ERROR(FuseConvInputTranspose(g));
      QF_RETURN_IF_ERROR(RemoveDeadCode(g));
      QF_RETURN_IF_ERROR(VerifyGraph(g));
      QF_RETURN_IF_ERROR(InferAndFold(g, false));
    }
  }
  return Status::Ok();
}

Status ConvertFile(const std::string& onnx_path, const std::string& qfm_path,
                   const ConvertOptions& opts, std::vector<std::string>* notes) {
  // A bad target is refused before the (possibly long) conversion, and again
  // when writing, in case it changed meanwhile.
  QF_RETURN_IF_ERROR(fileio::CheckOutputPath(qfm_path, {onnx_path}));
  Graph g;
  QF_RETURN_IF_ERROR(LoadAndOptimize(onnx_path, opts, &g));
  // Last, after every pass that computes on constants: the IR stays float32
  // for them (and for check/verify, which reuse LoadAndOptimize).
  if (opts.keep_float16_weights) QF_RETURN_IF_ERROR(NarrowHalfWeights(&g));
  if (notes) *notes = g.notes;
  std::vector<uint8_t> bytes;
  QF_RETURN_IF_ERROR(SerializeQfm(g, &bytes));
  return WriteFileAtomic(qfm_path, bytes, {onnx_path});
}

}  // namespace conv
}  // namespace qfold
