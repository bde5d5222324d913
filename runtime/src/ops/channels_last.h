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

// [N, C, d...] <-> [N, d..., C] (rank >= 2; unknown dims stay unknown).
Shape ChannelsLastShape(const Shape& channels_first);
Shape ChannelsFirstShape(const Shape& channels_last);

// Runs the channels-first `infer` on a channels-first view of input 0 and
// gives output 0 the channels-last shape. Only input 0 and output 0 are
// permuted; every other input is a parameter.
Status InferViaChannelsFirst(KernelContext& ctx, Status (*infer)(KernelContext&));

// Reference path: transposes input 0 to channels-first, runs `run` (without
// the op's prepared state) and transposes the result into output 0.
Status RunViaChannelsFirst(KernelContext& ctx, Status (*run)(KernelContext&));

}  // namespace qfold
