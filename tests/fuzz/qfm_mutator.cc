// Structure-aware libFuzzer mutator for .qfm files (LLVMFuzzerCustomMutator):
// a valid model is read into plain structs, one to three of its fields are
// changed (a dim, a dtype, an operator's input or output index, an attribute
// value, a quantization parameter, a constant's bytes, the graph's inputs) and
// the model is written back with FlatBufferBuilder. Byte mutations almost never
// get past the flatbuffers Verifier; these keep the file parseable, so the
// fuzzer spends its time in the semantic checks, the planner and the kernels.
// Bytes that are not a valid .qfm fall back to libFuzzer's own mutations.
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qfold/qfold_generated.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {
namespace fb = qfold::fb;

struct DimS {
  int64_t value = -1;
  std::string name;
};
struct QuantS {
  std::vector<float> scales;
  std::vector<int32_t> zero_points;
  int32_t axis = -1;
  int32_t block_size = 0;
};
struct TensorS {
  std::string name;
  int8_t dtype = 0;
  std::vector<DimS> shape;
  int8_t layout = 0;
  bool has_quant = false;
  QuantS quant;
  uint32_t buffer = 0;
  int32_t batch_axis = -1, channel_axis = -1;
};
struct AttrS {
  std::string name;
  int8_t type = 0;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
};
struct OpS {
  std::string type, name, float_reason;
  std::vector<int32_t> inputs, outputs;
  std::vector<AttrS> attrs;
};
struct ModelS {
  uint32_t format_version = 1, min_reader_version = 1;
  std::vector<TensorS> tensors;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<OpS> ops;
  std::vector<int32_t> inputs, outputs;
};

std::string Str(const flatbuffers::String* s) {
  return s ? s->str() : std::string();
}
// Copied as bytes: the Verifier does not check that 8-byte elements are
// 8-byte aligned, and byte mutations produce such files.
template <typename T>
std::vector<T> Vec(const flatbuffers::Vector<T>* v) {
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

bool Read(const uint8_t* data, size_t size, ModelS* m) {
  flatbuffers::Verifier verifier(data, size);
  if (!fb::VerifyModelBuffer(verifier)) return false;
  const fb::Model* model = fb::GetModel(data);
  m->format_version = model->format_version();
  m->min_reader_version = model->min_reader_version();
  if (model->tensors()) {
    for (const fb::Tensor* t : *model->tensors()) {
      TensorS ts;
      ts.name = Str(t->name());
      ts.dtype = static_cast<int8_t>(t->dtype());
      if (t->shape()) {
        for (const fb::Dim* d : *t->shape()) ts.shape.push_back({d->value(), Str(d->name())});
      }
      ts.layout = static_cast<int8_t>(t->layout());
      if (t->quant()) {
        ts.has_quant = true;
        ts.quant = {Vec(t->quant()->scales()), Vec(t->quant()->zero_points()), t->quant()->axis(),
                    t->quant()->block_size()};
      }
      ts.buffer = t->buffer();
      ts.batch_axis = t->batch_axis();
      ts.channel_axis = t->channel_axis();
      m->tensors.push_back(std::move(ts));
    }
  }
  if (model->buffers()) {
    for (const fb::Buffer* b : *model->buffers()) m->buffers.push_back(Vec(b->data()));
  }
  if (model->operators()) {
    for (const fb::Operator* o : *model->operators()) {
      OpS os{Str(o->type()),   Str(o->name()),    Str(o->float_reason()),
             Vec(o->inputs()), Vec(o->outputs()), {}};
      if (o->attributes()) {
        for (const fb::Attribute* a : *o->attributes()) {
          os.attrs.push_back({Str(a->name()), static_cast<int8_t>(a->type()), a->i(), a->f(),
                              Vec(a->ints()), Vec(a->floats()), Str(a->s())});
        }
      }
      m->ops.push_back(std::move(os));
    }
  }
  m->inputs = Vec(model->inputs());
  m->outputs = Vec(model->outputs());
  return true;
}

std::vector<uint8_t> Write(const ModelS& m) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (const TensorS& t : m.tensors) {
    std::vector<flatbuffers::Offset<fb::Dim>> dims;
    for (const DimS& d : t.shape) {
      dims.push_back(fb::CreateDim(b, d.value, d.name.empty() ? 0 : b.CreateString(d.name)));
    }
    flatbuffers::Offset<fb::Quantization> quant = 0;
    if (t.has_quant) {
      quant = fb::CreateQuantization(b, b.CreateVector(t.quant.scales),
                                     b.CreateVector(t.quant.zero_points), t.quant.axis,
                                     t.quant.block_size);
    }
    tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name), static_cast<fb::DType>(t.dtype),
                                       b.CreateVector(dims), static_cast<fb::Layout>(t.layout),
                                       quant, t.buffer, t.batch_axis, t.channel_axis));
  }
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const std::vector<uint8_t>& data : m.buffers) {
    b.ForceVectorAlignment(data.size(), 1, 64);  // as the writer does: constants used in place
    buffers.push_back(fb::CreateBuffer(b, b.CreateVector(data)));
  }
  std::vector<flatbuffers::Offset<fb::Operator>> ops;
  for (const OpS& o : m.ops) {
    std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
    for (const AttrS& a : o.attrs) {
      attrs.push_back(fb::CreateAttribute(
          b, b.CreateString(a.name), static_cast<fb::AttrType>(a.type), a.i, a.f,
          b.CreateVector(a.ints), b.CreateVector(a.floats), b.CreateString(a.s)));
    }
    ops.push_back(fb::CreateOperator(b, b.CreateString(o.type), b.CreateString(o.name),
                                     b.CreateVector(o.inputs), b.CreateVector(o.outputs),
                                     b.CreateVectorOfSortedTables(&attrs),
                                     b.CreateString(o.float_reason)));
  }
  auto model = fb::CreateModel(b, m.format_version, m.min_reader_version, b.CreateVector(tensors),
                               b.CreateVector(buffers), b.CreateVector(ops),
                               b.CreateVector(m.inputs), b.CreateVector(m.outputs));
  fb::FinishModelBuffer(b, model);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

int64_t InterestingInt(std::mt19937& rng, int64_t old) {
  static const int64_t kValues[] = {0,
                                    1,
                                    -1,
                                    2,
                                    3,
                                    4,
                                    7,
                                    8,
                                    16,
                                    255,
                                    256,
                                    65536,
                                    int64_t(1) << 31,
                                    (int64_t(1) << 31) - 1,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    int64_t(1) << 62};
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
                                  1e30f,
                                  3.0e38f,
                                  std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN()};
  return (rng() % 2) ? kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))] : old * 2.0f;
}

// A tensor index: mostly a real one, sometimes -1 (omitted) or out of range.
int32_t TensorIndex(std::mt19937& rng, const ModelS& m) {
  switch (rng() % 8) {
    case 0:
      return -1;
    case 1:
      return static_cast<int32_t>(m.tensors.size()) + int32_t(rng() % 3);
    default:
      return m.tensors.empty() ? 0 : int32_t(rng() % m.tensors.size());
  }
}

template <typename T>
T& Pick(std::mt19937& rng, std::vector<T>& v) {
  return v[rng() % v.size()];
}

// One change to one field. Returns false when the chosen field does not exist
// in this model (the caller tries another).
bool MutateOnce(std::mt19937& rng, ModelS* m) {
  switch (rng() % 12) {
    case 0: {  // a dim: value, symbolic, or one more / one fewer dim
      if (m->tensors.empty()) return false;
      TensorS& t = Pick(rng, m->tensors);
      if (t.shape.empty() || rng() % 4 == 0) {
        if (!t.shape.empty() && rng() % 2) {
          t.shape.erase(t.shape.begin() + rng() % t.shape.size());
        } else {
          t.shape.insert(t.shape.begin() + rng() % (t.shape.size() + 1),
                         DimS{1 + int64_t(rng() % 4), ""});
        }
        return true;
      }
      DimS& d = Pick(rng, t.shape);
      if (rng() % 5 == 0) {
        d.value = -1;
        d.name = (rng() % 2) ? "N" : "fuzz_dim";
      } else {
        d.value = InterestingInt(rng, d.value);
      }
      return true;
    }
    case 1: {  // a dtype, valid or not
      if (m->tensors.empty()) return false;
      Pick(rng, m->tensors).dtype = static_cast<int8_t>(rng() % 18);
      return true;
    }
    case 2: {  // an operator's input index
      if (m->ops.empty()) return false;
      OpS& o = Pick(rng, m->ops);
      if (o.inputs.empty() || rng() % 5 == 0) {
        if (!o.inputs.empty() && rng() % 2) {
          o.inputs.pop_back();
        } else {
          o.inputs.push_back(TensorIndex(rng, *m));
        }
      } else {
        Pick(rng, o.inputs) = TensorIndex(rng, *m);
      }
      return true;
    }
    case 3: {  // an operator's output index
      if (m->ops.empty()) return false;
      OpS& o = Pick(rng, m->ops);
      if (o.outputs.empty()) return false;
      Pick(rng, o.outputs) = TensorIndex(rng, *m);
      return true;
    }
    case 4:
    case 5: {  // an attribute value
      if (m->ops.empty()) return false;
      OpS& o = Pick(rng, m->ops);
      if (o.attrs.empty()) return false;
      AttrS& a = Pick(rng, o.attrs);
      switch (a.type) {
        case 0:
          a.i = InterestingInt(rng, a.i);
          break;
        case 1:
          a.f = InterestingFloat(rng, a.f);
          break;
        case 2:
          if (a.ints.empty() || rng() % 4 == 0) {
            a.ints.push_back(InterestingInt(rng, 1));
          } else {
            int64_t& v = Pick(rng, a.ints);
            v = InterestingInt(rng, v);
          }
          break;
        case 3:
          if (a.floats.empty()) {
            a.floats.push_back(InterestingFloat(rng, 1.0f));
          } else {
            float& v = Pick(rng, a.floats);
            v = InterestingFloat(rng, v);
          }
          break;
        default:
          a.s = (rng() % 2) ? "" : a.s + "X";
          break;
      }
      if (rng() % 8 == 0) a.type = static_cast<int8_t>(rng() % 6);  // type and value disagree
      return true;
    }
    case 6: {  // quantization parameters
      std::vector<TensorS*> quantized;
      for (TensorS& t : m->tensors) {
        if (t.has_quant) quantized.push_back(&t);
      }
      if (quantized.empty()) return false;
      QuantS& q = quantized[rng() % quantized.size()]->quant;
      switch (rng() % 4) {
        case 0:
          if (!q.scales.empty()) {
            float& s = Pick(rng, q.scales);
            s = InterestingFloat(rng, s);
          }
          break;
        case 1:
          if (!q.zero_points.empty()) {
            int32_t& z = Pick(rng, q.zero_points);
            z = static_cast<int32_t>(InterestingInt(rng, z));
          }
          break;
        case 2:
          q.axis = static_cast<int32_t>(InterestingInt(rng, q.axis));
          break;
        default:
          q.block_size = static_cast<int32_t>(InterestingInt(rng, q.block_size));
          break;
      }
      return true;
    }
    case 7: {  // a constant's bytes (values) or length
      if (m->buffers.size() < 2) return false;
      std::vector<uint8_t>& data = m->buffers[1 + rng() % (m->buffers.size() - 1)];
      if (data.empty() || rng() % 6 == 0) {
        data.resize(rng() % 2 ? data.size() / 2 : data.size() + 1 + rng() % 8);
      } else {
        data[rng() % data.size()] = static_cast<uint8_t>(rng());
      }
      return true;
    }
    case 8: {  // which buffer a tensor reads
      if (m->tensors.empty()) return false;
      Pick(rng, m->tensors).buffer = static_cast<uint32_t>(rng() % (m->buffers.size() + 2));
      return true;
    }
    case 9: {  // the graph's inputs and outputs
      std::vector<int32_t>& v = (rng() % 2) ? m->inputs : m->outputs;
      if (v.empty() || rng() % 3 == 0) {
        v.push_back(TensorIndex(rng, *m));
      } else {
        Pick(rng, v) = TensorIndex(rng, *m);
      }
      return true;
    }
    case 10: {  // an operator's type: another one from this model, or dropped / doubled
      if (m->ops.empty()) return false;
      if (rng() % 3 == 0) {
        size_t i = rng() % m->ops.size();
        if (rng() % 2) {
          m->ops.erase(m->ops.begin() + i);
        } else {
          m->ops.insert(m->ops.begin() + i, m->ops[i]);
        }
      } else {
        Pick(rng, m->ops).type = Pick(rng, m->ops).type;
      }
      return true;
    }
    default: {  // layout and the batch/channel axes
      if (m->tensors.empty()) return false;
      TensorS& t = Pick(rng, m->tensors);
      if (rng() % 2) {
        t.layout = static_cast<int8_t>(rng() % 4);
      } else {
        t.channel_axis = static_cast<int32_t>(InterestingInt(rng, t.channel_axis));
      }
      return true;
    }
  }
}
}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  std::mt19937 rng(seed);
  ModelS model;
  // One in eight: plain byte mutations, so the loader's own parsing keeps
  // being fuzzed too.
  if (rng() % 8 == 0 || !Read(data, size, &model)) return LLVMFuzzerMutate(data, size, max_size);
  const int changes = 1 + int(rng() % 3);
  for (int done = 0, tries = 0; done < changes && tries < 20; ++tries)
    done += MutateOnce(rng, &model);
  std::vector<uint8_t> bytes = Write(model);
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
