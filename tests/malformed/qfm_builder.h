// Builds small .qfm files directly with the generated flatbuffers functions, so
// tests can write what the converter never would: bad indices, dims, sizes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qfold/qfold_generated.h"

namespace qfold {
namespace malformed {

struct QTensor {
  std::string name;
  fb::DType dtype = fb::DType::FLOAT32;
  std::vector<int64_t> dims;
  bool constant = false;
  std::vector<uint8_t> data;  // for constants
  fb::TensorKind kind = fb::TensorKind::TENSOR;
};

struct QOp {
  std::string type;
  std::string name;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<std::pair<std::string, int64_t>> int_attrs;
};

// A subgraph (format 3): its tensors are the model's.
struct QGraph {
  std::string name;
  std::vector<QOp> ops;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
};

struct QModel {
  std::vector<QTensor> tensors;
  std::vector<QOp> ops;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<QGraph> subgraphs;
  uint32_t min_reader_version = 1;

  int Tensor(const std::string& name, std::vector<int64_t> dims,
             fb::DType dtype = fb::DType::FLOAT32) {
    tensors.push_back({name, dtype, std::move(dims), false, {}, fb::TensorKind::TENSOR});
    return int(tensors.size()) - 1;
  }
  int Constant(const std::string& name, std::vector<int64_t> dims, std::vector<uint8_t> data,
               fb::DType dtype = fb::DType::FLOAT32) {
    tensors.push_back(
        {name, dtype, std::move(dims), true, std::move(data), fb::TensorKind::TENSOR});
    return int(tensors.size()) - 1;
  }
  QOp& Op(const std::string& type, const std::string& name, std::vector<int32_t> ins,
          std::vector<int32_t> outs) {
    ops.push_back({type, name, std::move(ins), std::move(outs), {}});
    return ops.back();
  }

  std::vector<uint8_t> Bytes() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers{fb::CreateBuffer(b)};
    std::vector<flatbuffers::Offset<fb::Tensor>> ts;
    for (const QTensor& t : tensors) {
      uint32_t buffer = 0;
      if (t.constant) {
        b.ForceVectorAlignment(t.data.size(), 1, 64);
        buffers.push_back(fb::CreateBuffer(b, b.CreateVector(t.data)));
        buffer = uint32_t(buffers.size() - 1);
      }
      std::vector<flatbuffers::Offset<fb::Dim>> dims;
      for (int64_t d : t.dims) dims.push_back(fb::CreateDim(b, d));
      ts.push_back(fb::CreateTensor(b, b.CreateString(t.name), t.dtype, b.CreateVector(dims),
                                    fb::Layout::PLAIN, 0, buffer, -1, -1, t.kind));
    }
    auto write_ops = [&b](const std::vector<QOp>& list) {
      std::vector<flatbuffers::Offset<fb::Operator>> os;
      for (const QOp& o : list) {
        std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
        for (const auto& a : o.int_attrs)
          attrs.push_back(
              fb::CreateAttribute(b, b.CreateString(a.first), fb::AttrType::INT, a.second));
        os.push_back(fb::CreateOperator(b, b.CreateString(o.type), b.CreateString(o.name),
                                        b.CreateVector(o.inputs), b.CreateVector(o.outputs),
                                        b.CreateVectorOfSortedTables(&attrs)));
      }
      return b.CreateVector(os);
    };
    auto os = write_ops(ops);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Graph>>> graphs = 0;
    if (!subgraphs.empty()) {
      std::vector<flatbuffers::Offset<fb::Graph>> gs;
      for (const QGraph& g : subgraphs)
        gs.push_back(fb::CreateGraph(b, b.CreateString(g.name), write_ops(g.ops),
                                     b.CreateVector(g.inputs), b.CreateVector(g.outputs)));
      graphs = b.CreateVector(gs);
    }
    auto model = fb::CreateModel(b, subgraphs.empty() ? 1 : 3, min_reader_version,
                                 b.CreateVector(ts), b.CreateVector(buffers), os,
                                 b.CreateVector(inputs), b.CreateVector(outputs), 0, graphs);
    fb::FinishModelBuffer(b, model);
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
};

// x[dims] -> Relu -> y: the smallest valid model, to mutate.
inline QModel ReluModel(std::vector<int64_t> dims = {1, 4}) {
  QModel m;
  int x = m.Tensor("x", dims), y = m.Tensor("y", dims);
  m.Op("Relu", "relu0", {x}, {y});
  m.inputs = {x};
  m.outputs = {y};
  return m;
}

// y = If(cond, then: Relu(x), else: Neg(x)), x captured by both branches
// (subgraphs 0 and 1): the smallest valid format-3 model, to mutate.
inline QModel IfModel() {
  QModel m;
  m.min_reader_version = 3;
  int cond = m.Tensor("cond", {}, fb::DType::BOOL), x = m.Tensor("x", {1, 4}),
      y = m.Tensor("y", {1, 4});
  int then_in = m.Tensor("then_x", {1, 4}), then_out = m.Tensor("then_y", {1, 4});
  int else_in = m.Tensor("else_x", {1, 4}), else_out = m.Tensor("else_y", {1, 4});
  m.subgraphs.push_back(
      {"then", {{"Relu", "then_relu", {then_in}, {then_out}, {}}}, {then_in}, {then_out}});
  m.subgraphs.push_back(
      {"else", {{"Neg", "else_neg", {else_in}, {else_out}, {}}}, {else_in}, {else_out}});
  m.Op("If", "pick", {cond, x}, {y}).int_attrs = {
      {"then_branch", 0}, {"else_branch", 1}, {"captured_inputs", 1}};
  m.inputs = {cond, x};
  m.outputs = {y};
  return m;
}

}  // namespace malformed
}  // namespace qfold
