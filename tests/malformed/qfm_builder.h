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
};

struct QOp {
  std::string type;
  std::string name;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<std::pair<std::string, int64_t>> int_attrs;
};

struct QModel {
  std::vector<QTensor> tensors;
  std::vector<QOp> ops;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  uint32_t min_reader_version = 1;

  int Tensor(const std::string& name, std::vector<int64_t> dims,
             fb::DType dtype = fb::DType::FLOAT32) {
    tensors.push_back({name, dtype, std::move(dims), false, {}});
    return int(tensors.size()) - 1;
  }
  int Constant(const std::string& name, std::vector<int64_t> dims, std::vector<uint8_t> data,
               fb::DType dtype = fb::DType::FLOAT32) {
    tensors.push_back({name, dtype, std::move(dims), true, std::move(data)});
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
                                    fb::Layout::PLAIN, 0, buffer));
    }
    std::vector<flatbuffers::Offset<fb::Operator>> os;
    for (const QOp& o : ops) {
      std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
      for (const auto& a : o.int_attrs)
        attrs.push_back(
            fb::CreateAttribute(b, b.CreateString(a.first), fb::AttrType::INT, a.second));
      os.push_back(fb::CreateOperator(b, b.CreateString(o.type), b.CreateString(o.name),
                                      b.CreateVector(o.inputs), b.CreateVector(o.outputs),
                                      b.CreateVectorOfSortedTables(&attrs)));
    }
    auto model =
        fb::CreateModel(b, 1, min_reader_version, b.CreateVector(ts), b.CreateVector(buffers),
                        b.CreateVector(os), b.CreateVector(inputs), b.CreateVector(outputs));
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

}  // namespace malformed
}  // namespace qfold
