// ONNX Runtime's com.microsoft MatMulNBits (its weight-only quantizer's
// QOperator output, the usual form of int4 LLM exports) -> QfMatMulWeightQ,
// plus an Add for the optional bias. MatMulNBits stores B transposed and
// packed per column ([N, k_blocks, blob], codes low bits first along K), its
// scales [N, k_blocks] and its zero points packed the same way (absent:
// 2^(bits - 1)); QfMatMulWeightQ takes B [K, N] as uint4 (2- and 4-bit codes)
// or uint8, with scales and zero points [k_blocks, N]. The codes, zero points
// and scales are the same numbers, so Y = A @ ((q - zp) * scale) is unchanged.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "converter/passes/passes.h"
#include "core/half.h"

namespace qfold {
namespace conv {

namespace {

// Code `i` of `bits`-bit codes packed low bits first in `bytes`.
uint8_t Code(const uint8_t* bytes, int64_t i, int bits) {
  const int per = 8 / bits;
  return uint8_t((bytes[i / per] >> ((i % per) * bits)) & ((1 << bits) - 1));
}

// Float value `i` of a float32/float16/bfloat16 constant.
float FloatAt(const Value& v, int64_t i) {
  const uint8_t* p = v.data->data();
  if (v.dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return v.dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

int64_t Numel(const Value& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n;
}

}  // namespace

Status LowerMatMulNBits(Graph* g, Node&& n, std::vector<Node>* out) {
  auto refuse = [&](const std::string& why) {
    return Status(StatusCode::kUnsupported, g->source + ": " + n.Label() + ": " + why);
  };
  auto invalid = [&](const std::string& why) {
    return Status(StatusCode::kInvalidModel, g->source + ": " + n.Label() + ": " + why);
  };
  const int64_t k = n.attrs.GetInt("K", 0), cols = n.attrs.GetInt("N", 0);
  const int64_t bits = n.attrs.GetInt("bits", 4), block = n.attrs.GetInt("block_size", 0);
  // Bounded so that N x k_blocks x blob below cannot overflow (a crafted
  // file): at most 2^30 x 2^31.
  constexpr int64_t kMaxDim = int64_t(1) << 30;
  if (k <= 0 || cols <= 0 || k > kMaxDim || cols > kMaxDim)
    return invalid("attributes K and N must be in [1, 2^30]");
  if (bits != 2 && bits != 4 && bits != 8)
    return refuse("bits = " + std::to_string(bits) + " (2, 4 and 8 are supported)");
  if (block < 16 || block > kMaxDim || (block & (block - 1)) != 0)
    return invalid("block_size " + std::to_string(block) + " is not a power of 2 >= 16");
  if (n.attrs.GetInt("weight_prepacked", 0) != 0)
    return refuse("weight_prepacked = 1 (a runtime-specific layout of B)");
  const int64_t blocks = (k + block - 1) / block, blob = block * bits / 8;
  const Value* b = g->Find(n.input(1));
  if (!b || !b->is_constant() || b->dtype != DType::kUInt8)
    return refuse("B must be a constant uint8 tensor");
  if (Numel(*b) != cols * blocks * blob)
    return invalid("B has " + std::to_string(Numel(*b)) + " bytes, K = " + std::to_string(k) +
                   ", N = " + std::to_string(cols) + " and block_size " + std::to_string(block) +
                   " need " + std::to_string(cols * blocks * blob));
  const Value* s = g->Find(n.input(2));
  if (!s || !s->is_constant() ||
      (s->dtype != DType::kFloat32 && s->dtype != DType::kFloat16 && s->dtype != DType::kBFloat16))
    return refuse("scales must be a constant float32, float16 or bfloat16 tensor");
  if (Numel(*s) != cols * blocks)
    return invalid("scales have " + std::to_string(Numel(*s)) +
                   " values, N x k_blocks = " + std::to_string(cols * blocks));
  // g_idx (deprecated): only the identity order (k in block k / block_size).
  if (!n.input(4).empty()) {
    const Value* gi = g->Find(n.input(4));
    if (!gi || !gi->is_constant() || gi->dtype != DType::kInt32 || Numel(*gi) != k)
      return refuse("g_idx must be a constant int32 tensor of K values");
    for (int64_t i = 0; i < k; ++i) {
      int32_t v;
      std::memcpy(&v, gi->data->data() + 4 * i, 4);
      if (v != i / block) return refuse("g_idx reorders K (act-order); re-export without it");
    }
  }
  // Zero points [N][blocks] as codes.
  const int32_t qmax = (1 << bits) - 1;
  std::vector<int32_t> zp(size_t(cols * blocks), 1 << (bits - 1));
  if (!n.input(3).empty()) {
    const Value* z = g->Find(n.input(3));
    if (!z || !z->is_constant()) return refuse("zero_points must be constant");
    if (z->dtype == DType::kUInt8) {
      const int64_t row = (blocks * bits + 7) / 8;
      if (Numel(*z) != cols * row)
        return invalid("packed zero_points have " + std::to_string(Numel(*z)) +
                       " bytes, N x ceil(k_blocks * bits / 8) = " + std::to_string(cols * row));
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t j = 0; j < blocks; ++j)
          zp[size_t(c * blocks + j)] = Code(z->data->data() + c * row, j, int(bits));
    } else if (z->dtype == DType::kFloat32 || z->dtype == DType::kFloat16 ||
               z->dtype == DType::kBFloat16) {
      if (Numel(*z) != cols * blocks)
        return invalid("zero_points have " + std::to_string(Numel(*z)) +
                       " values, N x k_blocks = " + std::to_string(cols * blocks));
      for (int64_t i = 0; i < cols * blocks; ++i) {
        const float v = FloatAt(*z, i);
        // A whole code is the same dequantization; a fractional one is not a
        // code of B's type.
        if (!(v >= 0.f && v <= float(qmax)) || v != std::floor(v))
          return refuse("float zero point " + std::to_string(v) + " is not a whole number in [0, " +
                        std::to_string(qmax) + "]");
        zp[size_t(i)] = int32_t(v);
      }
    } else {
      return refuse(std::string("zero_points of dtype ") + dtype_name(z->dtype));
    }
  }
  // B [K, N], scales and zero points [blocks, N].
  const bool nibbles = bits < 8;
  const DType qt = nibbles ? DType::kUInt4 : DType::kUInt8;
  std::vector<uint8_t> bq(nibbles ? size_t((k * cols + 1) / 2) : size_t(k * cols), 0);
  auto put = [&](std::vector<uint8_t>& dst, int64_t e, int32_t v) {
    if (!nibbles) {
      dst[size_t(e)] = uint8_t(v);
      return;
    }
    dst[size_t(e / 2)] |= uint8_t((v & 15) << ((e % 2) * 4));
  };
  const uint8_t* bd = b->data->data();
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t kk = 0; kk < k; ++kk)
      put(bq, kk * cols + c, Code(bd + (c * blocks + kk / block) * blob, kk % block, int(bits)));
  std::vector<uint8_t> zq(nibbles ? size_t((blocks * cols + 1) / 2) : size_t(blocks * cols), 0);
  for (int64_t j = 0; j < blocks; ++j)
    for (int64_t c = 0; c < cols; ++c) put(zq, j * cols + c, zp[size_t(c * blocks + j)]);
  const size_t es = s->dtype == DType::kFloat32 ? 4 : 2;
  std::vector<uint8_t> sq(size_t(blocks * cols) * es);
  for (int64_t j = 0; j < blocks; ++j)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(sq.data() + size_t(j * cols + c) * es,
                  s->data->data() + size_t(c * blocks + j) * es, es);
  Node q;
  q.op_type = "QfMatMulWeightQ";
  q.name = n.name;
  q.inputs = {n.input(0), g->AddConstant(n.input(1) + "_kn", qt, {k, cols}, std::move(bq)),
              g->AddConstant(n.input(2) + "_kn", s->dtype, {blocks, cols}, std::move(sq)),
              g->AddConstant(n.name + "_zero_points_kn", qt, {blocks, cols}, std::move(zq))};
  q.attrs.SetInt("axis", 0);
  q.attrs.SetInt("block_size", block);
  // 4 allows int8 activations (where qfold has the kernels); 0-3 (unset,
  // fp32, fp16, bf16 at least) all compute in float32 here.
  const int64_t level = n.attrs.GetInt("accuracy_level", 0);
  if (level < 0 || level > 4)
    return invalid("accuracy_level " + std::to_string(level) + " (0 to 4)");
  // Always set, so that --int8-activations (for the DequantizeLinear form)
  // leaves these as the model says.
  q.attrs.SetInt("accuracy_level", level == 4 ? 4 : 0);
  q.outputs = n.outputs;
  if (!n.input(5).empty()) {  // bias [N], added after the product
    const std::string y = g->UniqueName(n.outputs[0] + "_unbiased");
    g->values[y].name = y;
    q.outputs = {y};
    out->push_back(std::move(q));
    out->push_back(MakeNode("Add", n.name + "_bias", {y, n.input(5)}, n.outputs));
    return Status::Ok();
  }
  out->push_back(std::move(q));
  return Status::Ok();
}

}  // namespace conv
}  // namespace qfold
