// A transposed convolution whose kernel equals its stride (no padding,
// dilation or groups: the learned 2x upsampling of detection and
// segmentation heads) never overlaps: each input pixel writes its own k x k
// block of output pixels. That is a 1x1 convolution to k*k*M channels, one
// per (ky, kx, m), followed by DepthToSpace(DCR): the same products, each
// output summing exactly one input pixel's C terms, so the integer results
// are identical, without the k*k-fold zero-stuffed input of the general
// path. Channels-last, DepthToSpace(DCR) is one copy per output row segment.
#include <cstring>

#include "converter/passes/passes.h"

namespace qfold {
namespace conv {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// `v` repeated `times` times (per-channel values for k*k*M channels); its
// name unchanged when absent, or when it holds a single value that means the
// same for every channel (`single_is_per_tensor`: scales, zero points; a bias
// always needs one value per channel, also for M = 1); "" when it cannot be.
std::string TiledPerChannel(Graph* g, const std::string& name, int64_t m, int64_t times,
                            bool single_is_per_tensor) {
  if (name.empty()) return name;
  const Value* v = g->Find(name);
  if (!v || !v->is_constant()) return "";
  int64_t n = 1;
  for (int64_t d : v->shape) n *= d;
  if (n == 1 && single_is_per_tensor) return name;
  if (n != m || v->shape.size() != 1) return "";
  std::vector<uint8_t> bytes;
  for (int64_t t = 0; t < times; ++t) bytes.insert(bytes.end(), v->data->begin(), v->data->end());
  const DType dtype = v->dtype;
  return g->AddConstant(name + "_tiled", dtype, {m * times}, std::move(bytes));
}

}  // namespace

std::vector<uint8_t> ConvTransposeWeightsAsConv1x1(const uint8_t* src, int64_t c, int64_t m,
                                                   int64_t k, size_t esize) {
  std::vector<uint8_t> wb(static_cast<size_t>(k * k * m * c) * esize);
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx)
          std::memcpy(&wb[size_t(((ky * k + kx) * m + mi) * c + ci) * esize],
                      src + size_t(((ci * m + mi) * k + ky) * k + kx) * esize, esize);
  return wb;
}

namespace {

// Declares the 1x1 convolution's output [N, k*k*M, H, W] (like y: dtype and
// quantization) and returns its name.
std::string AddDepthValue(Graph* g, const Value& x, const Value& y, int64_t out_c) {
  Value depth;
  depth.name = g->UniqueName(y.name + "_depth");
  depth.dtype = y.dtype;
  depth.quant = y.quant;
  if (x.shape[0] >= 0 && x.shape[2] >= 0 && x.shape[3] >= 0) {
    depth.rank_known = true;
    depth.shape = {x.shape[0], out_c, x.shape[2], x.shape[3]};
  }
  const std::string name = depth.name;
  g->values[name] = std::move(depth);
  return name;
}

// DepthToSpace(DCR) from the 1x1 convolution's output to ConvTranspose n's.
Node DepthToSpaceNode(Graph* g, const Node& n, const std::string& depth_name, int64_t k) {
  Node d2s;
  d2s.op_type = "DepthToSpace";
  d2s.name = g->UniqueName(n.name + "_depth_to_space");
  d2s.inputs = {depth_name};
  d2s.outputs = n.outputs;
  d2s.attrs.SetInt("blocksize", k);
  d2s.attrs.SetString("mode", "DCR");
  return d2s;
}

}  // namespace

bool ConvTransposeIsConv1x1(const AttrMap& attrs, const Shape& x, const Shape& w) {
  if (x.size() != 4 || w.size() != 4) return false;
  const int64_t c = w[0], k = w[2];
  std::vector<int64_t> kernel = attrs.GetInts("kernel_shape");
  if (kernel.empty()) kernel = {w[2], w[3]};
  const std::string auto_pad = attrs.GetString("auto_pad", "NOTSET");
  return attrs.GetInt("group", 1) == 1 && w[3] == k && k >= 2 &&
         kernel == std::vector<int64_t>{k, k} &&
         attrs.GetInts("strides") == std::vector<int64_t>{k, k} &&
         AllEqual(attrs.GetInts("pads"), 0) && AllEqual(attrs.GetInts("dilations"), 1) &&
         AllEqual(attrs.GetInts("output_padding"), 0) && !attrs.Has("output_shape") &&
         (auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad.empty()) &&
         (x[1] < 0 || x[1] == c);
}

Status LowerConvTranspose(Graph* g) {
  std::vector<Node> nodes;
  nodes.reserve(g->nodes.size());
  for (Node& n : g->nodes) {
    auto keep = [&] { nodes.push_back(std::move(n)); };
    if (n.op_type != "QfQLinearConvTranspose" || !n.domain.empty() || n.inputs.size() < 8 ||
        n.outputs.size() != 1) {
      keep();
      continue;
    }
    const Value* x = g->Find(n.input(0));
    const Value* w = g->Find(n.input(3));
    const Value* y = g->Find(n.outputs[0]);
    if (!x || !w || !y || !x->rank_known || x->shape.size() != 4 || !w->is_constant() ||
        w->shape.size() != 4 || (w->dtype != DType::kInt8 && w->dtype != DType::kUInt8)) {
      keep();
      continue;
    }
    const int64_t c = w->shape[0], m = w->shape[1], k = w->shape[2];
    if (!ConvTransposeIsConv1x1(n.attrs, x->shape, w->shape)) {
      keep();
      continue;
    }
    const int64_t out_c = k * k * m;
    const std::string w_scale = TiledPerChannel(g, n.input(4), m, k * k, true);
    const std::string w_zp = TiledPerChannel(g, n.input(5), m, k * k, true);
    const std::string bias = TiledPerChannel(g, n.input(8), m, k * k, false);
    if ((!n.input(4).empty() && w_scale.empty()) || (!n.input(5).empty() && w_zp.empty()) ||
        (!n.input(8).empty() && bias.empty())) {
      keep();
      continue;
    }
    const std::string w_name =
        g->AddConstant(n.input(3) + "_as_conv1x1", w->dtype, {out_c, c, 1, 1},
                       ConvTransposeWeightsAsConv1x1(w->data->data(), c, m, k, 1));
    const std::string depth_name = AddDepthValue(g, *x, *y, out_c);

    Node conv;
    conv.op_type = "QLinearConv";
    conv.name = n.name;
    conv.inputs = {n.input(0), n.input(1), n.input(2), w_name,
                   w_scale,    w_zp,       n.input(6), n.input(7)};
    if (!bias.empty()) conv.inputs.push_back(bias);
    conv.outputs = {depth_name};
    conv.attrs.SetInts("kernel_shape", {1, 1});
    for (const char* clamp : {"_qmin", "_qmax"})
      if (n.attrs.Has(clamp)) conv.attrs.SetInt(clamp, n.attrs.GetInt(clamp, 0));
    Node d2s = DepthToSpaceNode(g, n, depth_name, k);
    nodes.push_back(std::move(conv));
    nodes.push_back(std::move(d2s));
  }
  g->nodes = std::move(nodes);
  return Status::Ok();
}

// The float ConvTranspose the same way: a float 1x1 Conv to k*k*M channels
// (the channels-last float kernels) and DepthToSpace(DCR), instead of the
// reference GEMM and a col2im scatter. Each output still sums one input
// pixel's C products (in the Conv's order: float results differ from the
// col2im path by rounding only). After FuseActivations: a fused activation
// applies per element, so it moves to the Conv before the DepthToSpace copy.
Status LowerFloatConvTranspose(Graph* g) {
  std::vector<Node> nodes;
  nodes.reserve(g->nodes.size());
  for (Node& n : g->nodes) {
    auto keep = [&] { nodes.push_back(std::move(n)); };
    if (n.op_type != "ConvTranspose" || !n.domain.empty() || n.inputs.size() < 2 ||
        n.inputs.size() > 3 || n.outputs.size() != 1) {
      keep();
      continue;
    }
    const Value* x = g->Find(n.input(0));
    const Value* w = g->Find(n.input(1));
    const Value* y = g->Find(n.outputs[0]);
    if (!x || !w || !y || !x->rank_known || x->shape.size() != 4 || x->dtype != DType::kFloat32 ||
        !w->is_constant() || w->dtype != DType::kFloat32 || w->shape.size() != 4 ||
        !ConvTransposeIsConv1x1(n.attrs, x->shape, w->shape)) {
      keep();
      continue;
    }
    const int64_t c = w->shape[0], m = w->shape[1], k = w->shape[2];
    const int64_t out_c = k * k * m;
    // The bias, one value per output channel, repeated for every (ky, kx).
    const Value* b = n.input(2).empty() ? nullptr : g->Find(n.input(2));
    if (b && b->dtype != DType::kFloat32) {
      keep();
      continue;
    }
    const std::string bias = TiledPerChannel(g, n.input(2), m, k * k, false);
    if (!n.input(2).empty() && bias.empty()) {
      keep();
      continue;
    }
    const std::string w_name =
        g->AddConstant(n.input(1) + "_as_conv1x1", DType::kFloat32, {out_c, c, 1, 1},
                       ConvTransposeWeightsAsConv1x1(w->data->data(), c, m, k, 4));
    const std::string depth_name = AddDepthValue(g, *x, *y, out_c);

    Node conv;
    conv.op_type = "Conv";
    conv.name = n.name;
    conv.inputs = {n.input(0), w_name};
    if (!bias.empty()) conv.inputs.push_back(bias);
    conv.outputs = {depth_name};
    conv.attrs.SetInts("kernel_shape", {1, 1});
    for (const Attr& a : n.attrs.all())
      if (a.name.rfind("_act", 0) == 0) conv.attrs.Set(a);  // _activation, _act_alpha, ...
    Node d2s = DepthToSpaceNode(g, n, depth_name, k);
    nodes.push_back(std::move(conv));
    nodes.push_back(std::move(d2s));
  }
  g->nodes = std::move(nodes);
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
