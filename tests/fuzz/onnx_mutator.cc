// Structure-aware libFuzzer mutator for ONNX models (LLVMFuzzerCustomMutator):
// the bytes are parsed as an onnx::ModelProto, one to three protobuf fields
// change (a node's input names, op type or attribute values, an initializer's
// dims, type or bytes, a graph input's shape or element type, the opset) and
// the model is serialized again, so nearly every mutation still parses and
// reaches the converter's checks and passes instead of the protobuf decoder.
// The ONNX proto is built lite (no reflection), so the fields are named here.
// Bytes that do not parse fall back to libFuzzer's own mutations.
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onnx.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

int64_t InterestingInt(std::mt19937& rng, int64_t old) {
  static const int64_t kValues[] = {0,
                                    1,
                                    -1,
                                    2,
                                    3,
                                    4,
                                    -2,
                                    8,
                                    16,
                                    255,
                                    65536,
                                    int64_t(1) << 31,
                                    int64_t(1) << 40,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  switch (rng() % 3) {
    case 0:
      return kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
    // Wrapping on purpose (unsigned): the extremes are interesting values too.
    case 1:
      return static_cast<int64_t>(static_cast<uint64_t>(old) + rng() % 5 - 2);
    default:
      return static_cast<int64_t>(0 - static_cast<uint64_t>(old));
  }
}

float InterestingFloat(std::mt19937& rng, float old) {
  static const float kValues[] = {0.0f,
                                  -0.0f,
                                  1.0f,
                                  -1.0f,
                                  0.5f,
                                  1e-30f,
                                  3.0e38f,
                                  std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN()};
  return (rng() % 2) ? kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))] : old * 2.0f;
}

// Every value name the graph knows, to rewire node inputs to real values
// (a random string would only ever be "input from nowhere").
std::vector<std::string> ValueNames(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) names.push_back(o);
  }
  names.push_back("");  // an omitted optional input
  return names;
}

// Attribute names that steer kernels, added to nodes that lack them.
const char* const kAttrNames[] = {"axis",      "axes",   "pads",  "strides",  "kernel_shape",
                                  "dilations", "group",  "perm",  "keepdims", "auto_pad",
                                  "ceil_mode", "transB", "alpha", "mode",     "count_include_pad"};

// Op types the converter and runtime handle, to swap a node's type for.
const char* const kOpTypes[] = {"Conv",
                                "MaxPool",
                                "AveragePool",
                                "Add",
                                "Mul",
                                "MatMul",
                                "Gemm",
                                "Relu",
                                "Reshape",
                                "Transpose",
                                "Concat",
                                "Split",
                                "Slice",
                                "Gather",
                                "Softmax",
                                "Resize",
                                "Pad",
                                "ReduceMean",
                                "QuantizeLinear",
                                "DequantizeLinear",
                                "QLinearConv",
                                "ConvInteger",
                                "MatMulInteger",
                                "GlobalAveragePool",
                                "Expand",
                                "Tile",
                                "Where",
                                "Cast",
                                "Sigmoid",
                                "LayerNormalization",
                                "ConvTranspose",
                                "DepthToSpace",
                                "Unsqueeze",
                                "Squeeze"};

void MutateAttribute(std::mt19937& rng, onnx::AttributeProto* a) {
  switch (a->type()) {
    case onnx::AttributeProto::INT:
      a->set_i(InterestingInt(rng, a->i()));
      return;
    case onnx::AttributeProto::FLOAT:
      a->set_f(InterestingFloat(rng, a->f()));
      return;
    case onnx::AttributeProto::INTS:
      if (a->ints_size() == 0 || rng() % 4 == 0) {
        a->add_ints(InterestingInt(rng, 1));
      } else if (rng() % 5 == 0) {
        a->mutable_ints()->RemoveLast();
      } else {
        int i = int(rng() % a->ints_size());
        a->set_ints(i, InterestingInt(rng, a->ints(i)));
      }
      return;
    case onnx::AttributeProto::FLOATS:
      if (a->floats_size() == 0) {
        a->add_floats(InterestingFloat(rng, 1.0f));
      } else {
        int i = int(rng() % a->floats_size());
        a->set_floats(i, InterestingFloat(rng, a->floats(i)));
      }
      return;
    case onnx::AttributeProto::STRING:
      a->set_s((rng() % 2) ? "NOTSET" : "SAME_UPPER");
      return;
    case onnx::AttributeProto::TENSOR:
      if (a->t().dims_size() > 0) {
        int i = int(rng() % a->t().dims_size());
        a->mutable_t()->set_dims(i, InterestingInt(rng, a->t().dims(i)));
      } else if (!a->t().raw_data().empty()) {
        std::string* raw = a->mutable_t()->mutable_raw_data();
        (*raw)[rng() % raw->size()] = static_cast<char>(rng());
      }
      return;
    default:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(InterestingInt(rng, 0));
      return;
  }
}

bool MutateOnce(std::mt19937& rng, onnx::ModelProto* m) {
  onnx::GraphProto* g = m->mutable_graph();
  switch (rng() % 10) {
    case 0:
    case 1: {  // rewire a node input
      if (g->node_size() == 0) return false;
      onnx::NodeProto* n = g->mutable_node(int(rng() % g->node_size()));
      std::vector<std::string> names = ValueNames(*g);
      const std::string& name = names[rng() % names.size()];
      if (n->input_size() == 0 || rng() % 5 == 0) {
        if (n->input_size() > 0 && rng() % 2) {
          n->mutable_input()->RemoveLast();
        } else {
          n->add_input(name);
        }
      } else {
        n->set_input(int(rng() % n->input_size()), name);
      }
      return true;
    }
    case 2:
    case 3: {  // an attribute value, or a new attribute
      if (g->node_size() == 0) return false;
      onnx::NodeProto* n = g->mutable_node(int(rng() % g->node_size()));
      if (n->attribute_size() == 0 || rng() % 5 == 0) {
        onnx::AttributeProto* a = n->add_attribute();
        a->set_name(kAttrNames[rng() % (sizeof(kAttrNames) / sizeof(kAttrNames[0]))]);
        if (rng() % 2) {
          a->set_type(onnx::AttributeProto::INT);
          a->set_i(InterestingInt(rng, 1));
        } else {
          a->set_type(onnx::AttributeProto::INTS);
          for (int k = int(rng() % 5); k > 0; --k) a->add_ints(InterestingInt(rng, 1));
        }
      } else {
        MutateAttribute(rng, n->mutable_attribute(int(rng() % n->attribute_size())));
      }
      return true;
    }
    case 4: {  // an op type
      if (g->node_size() == 0) return false;
      g->mutable_node(int(rng() % g->node_size()))
          ->set_op_type(kOpTypes[rng() % (sizeof(kOpTypes) / sizeof(kOpTypes[0]))]);
      return true;
    }
    case 5: {  // an initializer's dims or data type
      if (g->initializer_size() == 0) return false;
      onnx::TensorProto* t = g->mutable_initializer(int(rng() % g->initializer_size()));
      if (rng() % 4 == 0) {
        t->set_data_type(int(rng() % 24));
      } else if (t->dims_size() == 0 || rng() % 4 == 0) {
        if (t->dims_size() > 0 && rng() % 2) {
          t->mutable_dims()->RemoveLast();
        } else {
          t->add_dims(1 + int64_t(rng() % 3));
        }
      } else {
        int i = int(rng() % t->dims_size());
        t->set_dims(i, InterestingInt(rng, t->dims(i)));
      }
      return true;
    }
    case 6: {  // an initializer's values
      if (g->initializer_size() == 0) return false;
      onnx::TensorProto* t = g->mutable_initializer(int(rng() % g->initializer_size()));
      if (!t->raw_data().empty()) {
        std::string* raw = t->mutable_raw_data();
        if (rng() % 6 == 0) {
          raw->resize(raw->size() / 2);
        } else {
          (*raw)[rng() % raw->size()] = static_cast<char>(rng());
        }
      } else if (t->float_data_size() > 0) {
        int i = int(rng() % t->float_data_size());
        t->set_float_data(i, InterestingFloat(rng, t->float_data(i)));
      } else if (t->int64_data_size() > 0) {
        int i = int(rng() % t->int64_data_size());
        t->set_int64_data(i, InterestingInt(rng, t->int64_data(i)));
      } else if (t->int32_data_size() > 0) {
        int i = int(rng() % t->int32_data_size());
        t->set_int32_data(i, static_cast<int32_t>(InterestingInt(rng, t->int32_data(i))));
      } else {
        return false;
      }
      return true;
    }
    case 7: {  // a graph input's shape or element type
      if (g->input_size() == 0) return false;
      onnx::TypeProto_Tensor* tt =
          g->mutable_input(int(rng() % g->input_size()))->mutable_type()->mutable_tensor_type();
      if (rng() % 5 == 0) {
        tt->set_elem_type(int(rng() % 24));
        return true;
      }
      onnx::TensorShapeProto* shape = tt->mutable_shape();
      if (shape->dim_size() == 0 || rng() % 5 == 0) {
        if (shape->dim_size() > 0 && rng() % 2) {
          shape->mutable_dim()->RemoveLast();
        } else {
          shape->add_dim()->set_dim_value(1 + int64_t(rng() % 4));
        }
        return true;
      }
      onnx::TensorShapeProto_Dimension* d = shape->mutable_dim(int(rng() % shape->dim_size()));
      if (rng() % 4 == 0) {
        d->set_dim_param((rng() % 2) ? "N" : "fuzz_dim");
      } else {
        d->set_dim_value(InterestingInt(rng, d->has_dim_value() ? d->dim_value() : 1));
      }
      return true;
    }
    case 8: {  // the opset, or the node list itself
      if (rng() % 2 && m->opset_import_size() > 0) {
        m->mutable_opset_import(0)->set_version(7 + int64_t(rng() % 16));
        return true;
      }
      if (g->node_size() == 0) return false;
      int i = int(rng() % g->node_size());
      if (rng() % 2) {
        *g->add_node() = g->node(i);  // a second producer, or a duplicate consumer
      } else {
        g->mutable_node()->DeleteSubrange(i, 1);
      }
      return true;
    }
    default: {  // a node output renamed (graph outputs now dangle, or a value is shadowed)
      if (g->node_size() == 0) return false;
      onnx::NodeProto* n = g->mutable_node(int(rng() % g->node_size()));
      if (n->output_size() == 0) return false;
      std::vector<std::string> names = ValueNames(*g);
      n->set_output(int(rng() % n->output_size()), names[rng() % names.size()]);
      return true;
    }
  }
}
}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937 rng(seed);
  onnx::ModelProto model;
  // One in eight: plain byte mutations, so the protobuf reader keeps being fuzzed too.
  if (rng() % 8 == 0 || !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph()) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  const int changes = 1 + int(rng() % 3);
  for (int done = 0, tries = 0; done < changes && tries < 20; ++tries)
    done += MutateOnce(rng, &model);
  std::string bytes;
  if (!model.SerializeToString(&bytes) || bytes.size() > max_size) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
