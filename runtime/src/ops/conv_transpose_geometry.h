// Output geometry of ConvTranspose, shared by the float op and the quantized
// QfQLinearConvTranspose (both take W in ConvTranspose layout [C, M/group, k...]).
#pragma once
#include "core/op.h"
#include "ops/window_util.h"

namespace qfold {

// Reads group, kernel_shape (or W's kernel dims), strides, dilations,
// output_padding, output_shape, pads and auto_pad. g->out receives the output
// spatial dims and g->pad_begin/pad_end the effective padding; in_spatial may
// hold kUnknownDim (then that output dim is unknown, or output_shape's).
Status ParseConvTransposeGeometry(const KernelContext& ctx, const Tensor* w,
                                  const Shape& in_spatial, int64_t* group, WindowGeometry* g);

}  // namespace qfold
