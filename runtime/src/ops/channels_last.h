// Spatial ops with a channels_last attribute (set by the converter's layout
// planning): input 0 and output 0 are [N, spatial..., C] instead of
// [N, C, spatial...]. Ops whose reference kernel reads channels-first use
// these wrappers for inference and for their reference path, so the NCHW
// code stays the one specification of the op.
#pragma once
#include "core/op.h"

namespace qfold {

// The channels_last attribute; an error unless it is 0 or 1.
Status ReadChannelsLast(const KernelContext& ctx, bool* channels_last);

// x_channels_first = 1 with channels_last = 1 (the converter's
// FuseConvInputTranspose, on a Conv reading a graph input): input 0 is
// [N, C, spatial...] as given, only output 0 is channels-last. The wrappers
// below then leave input 0 as it is.
bool InputChannelsFirst(const KernelContext& ctx);

// [N, C, d...] <-> [N, d..., C] (rank >= 2; unknown dims stay unknown).
Shape ChannelsLastShape(const Shape& channels_first);
Shape ChannelsFirstShape(const Shape& channels_last);

// Runs the channels-first `infer` on a channels-first view of input 0 and
// gives output 0 the channels-last shape. Only input 0 and output 0 are
// permuted; every other input is a parameter.
Status InferViaChannelsFirst(KernelContext& ctx, Status (*infer)(KernelContext&));

// The scratch function of an op's channels-first run (OpDef::scratch's
// signature, called on the channels-first view without the op's state); null
// when that run needs none.
using ChannelsFirstScratchFn = Status (*)(KernelContext&, ScratchNeeds*);

// The fallback's scratch for the current shapes: the channels-first copies of
// input 0 and output 0, then the channels-first kernel's own request
// (`scratch` on the channels-first shapes). The request
// (ChannelsFirstScratch) and the run (RunViaChannelsFirst) both lay it out
// with LayoutChannelsFirst, so the two cannot drift.
struct ChannelsFirstLayout {
  size_t x = 0, y = 0, kernel = 0;  // offsets
  size_t kernel_bytes = 0, kept = 0, total = 0;
};
Status LayoutChannelsFirst(KernelContext& ctx, ChannelsFirstScratchFn scratch,
                           ChannelsFirstLayout* layout);

// OpDef::scratch of an op for shapes its channels-last kernels do not take
// (the op decides that with the predicate its run uses): the fallback's
// region, LayoutChannelsFirst's total.
Status ChannelsFirstScratch(KernelContext& ctx, ChannelsFirstScratchFn scratch,
                            ScratchNeeds* needs);

// Reference path: transposes input 0 to channels-first, runs `run` (without
// the op's prepared state) and transposes the result into output 0; the
// copies and `run`'s scratch live in the op's planned scratch when
// `planned_for_fallback` (the op requested ChannelsFirstScratch for these
// shapes). Otherwise (a fast kernel that turned down a call its scratch was
// planned for; the converter) the region is allocated for this call.
Status RunViaChannelsFirst(KernelContext& ctx, Status (*run)(KernelContext&),
                           ChannelsFirstScratchFn scratch, bool planned_for_fallback);

}  // namespace qfold
