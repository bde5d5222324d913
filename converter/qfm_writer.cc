#include "converter/qfm_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/file_io.h"
#include "core/op.h"
#include "qfold/qfold_generated.h"

namespace qfold {
namespace conv {

namespace {
constexpr size_t kConstAlign = 64;

flatbuffers::Offset<fb::Attribute> WriteAttr(flatbuffers::FlatBufferBuilder& b, const Attr& a) {
  auto name = b.CreateString(a.name);
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> ints;
  flatbuffers::Offset<flatbuffers::Vector<float>> floats;
  flatbuffers::Offset<flatbuffers::String> s;
  fb::AttrType type = fb::AttrType::INT;
  switch (a.kind) {
    case Attr::kInt:
      type = fb::AttrType::INT;
      break;
    case Attr::kFloat:
      type = fb::AttrType::FLOAT;
      break;
    case Attr::kInts:
      type = fb::AttrType::INTS;
      ints = b.CreateVector(a.ints);
      break;
    case Attr::kFloats:
      type = fb::AttrType::FLOATS;
      floats = b.CreateVector(a.floats);
      break;
    case Attr::kString:
      type = fb::AttrType::STRING;
      s = b.CreateString(a.s);
      break;
  }
  return fb::CreateAttribute(b, name, type, a.i, a.f, ints, floats, s);
}
}  // namespace

namespace {
// Subgraphs of If/Loop/Scan in pre-order, so a nested one comes after the graph
// holding it (the reader relies on that to refuse cycles).
void CollectSubgraphs(const Graph& g, std::vector<const Graph*>* list,
                      std::map<const Graph*, int>* index) {
  for (const Node& n : g.nodes) {
    if (!IsControlFlowNode(n)) continue;
    for (const auto& kv : n.subgraphs) {
      (*index)[kv.second.get()] = int(list->size());
      list->push_back(kv.second.get());
      CollectSubgraphs(*kv.second, list, index);
    }
  }
}
}  // namespace

Status SerializeQfm(const Graph& g, std::vector<uint8_t>* out) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  buffers.push_back(fb::CreateBuffer(b));
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::vector<const Graph*> subgraphs;
  std::map<const Graph*, int> subgraph_index;
  CollectSubgraphs(g, &subgraphs, &subgraph_index);
  bool has_sequences = false, has_optionals = false;

  struct Written {
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Operator>>> ops;
    flatbuffers::Offset<flatbuffers::Vector<int32_t>> ins, outs;
  };
  // Each graph's names index the one tensor table; a subgraph's names are its own.
  auto write_graph = [&](const Graph& gr, Written* w) -> Status {
    std::map<std::string, int> index;
    std::vector<std::string> order;
    auto use = [&](const std::string& name) {
      if (name.empty() || index.count(name)) return;
      index[name] = int(tensors.size() + order.size());
      order.push_back(name);
    };
    for (const std::string& n : gr.inputs) use(n);
    for (const Node& n : gr.nodes) {
      for (const std::string& s : n.inputs) use(s);
      for (const std::string& s : n.outputs) use(s);
    }
    for (const std::string& n : gr.outputs) use(n);
    for (const std::string& name : order) {
      const Value* v = gr.Find(name);
      if (!v || v->dtype == DType::kUndefined)
        return Status(StatusCode::kInternal, gr.source + ": value '" + name + "' has no type");
      uint32_t buffer = 0;
      if (v->is_constant()) {
        b.ForceVectorAlignment(v->data->size(), 1, kConstAlign);
        auto data = b.CreateVector(v->data->data(), v->data->size());
        buffer = uint32_t(buffers.size());
        buffers.push_back(fb::CreateBuffer(b, data));
      }
      std::vector<flatbuffers::Offset<fb::Dim>> dims;
      for (size_t d = 0; d < v->shape.size(); ++d) {
        const std::string& dn = d < v->dim_names.size() ? v->dim_names[d] : std::string();
        dims.push_back(fb::CreateDim(b, v->shape[d], dn.empty() ? 0 : b.CreateString(dn)));
      }
      flatbuffers::Offset<fb::Quantization> quant = 0;
      if (v->quant)
        quant = fb::CreateQuantization(b, b.CreateVector(v->quant->scales),
                                       b.CreateVector(v->quant->zero_points), v->quant->axis,
                                       v->quant->block_size);
      fb::Layout layout = v->layout == Value::Layout::kNCHW   ? fb::Layout::NCHW
                          : v->layout == Value::Layout::kNHWC ? fb::Layout::NHWC
                                                              : fb::Layout::PLAIN;
      if (v->is_sequence) has_sequences = true;
      if (v->is_optional) has_optionals = true;
      const fb::TensorKind kind =
          v->is_optional ? (v->is_sequence ? fb::TensorKind::OPTIONAL_SEQUENCE
                                           : fb::TensorKind::OPTIONAL_TENSOR)
                         : (v->is_sequence ? fb::TensorKind::SEQUENCE : fb::TensorKind::TENSOR);
      tensors.push_back(fb::CreateTensor(b, b.CreateString(name), fb::DType(int8_t(v->dtype)),
                                         b.CreateVector(dims), layout, quant, buffer, v->batch_axis,
                                         v->channel_axis, kind,
                                         (v->is_sequence || v->is_optional) && !v->rank_known));
    }
    std::vector<flatbuffers::Offset<fb::Operator>> ops;
    for (const Node& n : gr.nodes) {
      std::vector<int32_t> ins, outs;
      for (const std::string& s : n.inputs) ins.push_back(s.empty() ? -1 : index[s]);
      for (const std::string& s : n.outputs) outs.push_back(s.empty() ? -1 : index[s]);
      AttrMap attrs = n.attrs;
      if (IsControlFlowNode(n))
        for (const auto& kv : n.subgraphs) attrs.SetInt(kv.first, subgraph_index[kv.second.get()]);
      std::vector<flatbuffers::Offset<fb::Attribute>> fattrs;
      for (const Attr& a : attrs.all()) fattrs.push_back(WriteAttr(b, a));
      ops.push_back(
          fb::CreateOperator(b, b.CreateString(n.op_type), b.CreateString(n.name),
                             b.CreateVector(ins), b.CreateVector(outs), b.CreateVector(fattrs),
                             n.float_reason.empty() ? 0 : b.CreateString(n.float_reason)));
    }
    std::vector<int32_t> ins, outs;
    for (const std::string& n : gr.inputs) ins.push_back(index[n]);
    for (const std::string& n : gr.outputs) outs.push_back(index[n]);
    w->ops = b.CreateVector(ops);
    w->ins = b.CreateVector(ins);
    w->outs = b.CreateVector(outs);
    return Status::Ok();
  };
  Written main_graph;
  QF_RETURN_IF_ERROR(write_graph(g, &main_graph));
  std::vector<flatbuffers::Offset<fb::Graph>> graphs;
  for (size_t i = 0; i < subgraphs.size(); ++i) {
    Written w;
    QF_RETURN_IF_ERROR(write_graph(*subgraphs[i], &w));
    graphs.push_back(
        fb::CreateGraph(b, b.CreateString("subgraph " + std::to_string(i)), w.ops, w.ins, w.outs));
  }
  std::vector<flatbuffers::Offset<flatbuffers::String>> notes;
  for (const std::string& n : g.notes) notes.push_back(b.CreateString(n));
  auto meta =
      fb::CreateMetadata(b, b.CreateString("qfold " QFOLD_VERSION_STRING), int32_t(g.opset),
                         b.CreateString(g.sha256), b.CreateString(g.source), b.CreateVector(notes));
  // Version 2: operators may carry channels_last = 1 (converter's layout
  // planning); a version-1 reader would ignore it and compute garbage, so
  // such files require reader 2. Version 3: subgraphs (If/Loop/Scan), which a
  // version-2 reader refuses by name. Files without these stay readable by 1.
  // Version 4: float16 weights of ops with kTraitHalfWeights, which the
  // reader widens; a version-3 reader would refuse them as a dtype mismatch.
  bool channels_last = false, half_weights = false;
  for (const Node& n : g.nodes) {
    channels_last |= n.attrs.GetInt("channels_last", 0) != 0;
    if (!HasTraits(n.op_type, kTraitHalfWeights)) continue;
    for (const std::string& s : n.inputs) {
      const Value* v = g.Find(s);
      half_weights |= v && v->is_constant() && v->dtype == DType::kFloat16;
    }
  }
  // Version 5: sequence values, which a version-4 reader would take for tensors.
  // Version 6: an affine after a fused activation (_act_scale, _act_shift),
  // which a version-5 reader would ignore, computing without it.
  // Version 7: optional values (TensorKind OPTIONAL_*), which a version-6
  // reader refuses as an invalid kind; the version names the reason instead.
  bool act_affine = false;
  auto scan_affine = [&](const Graph& graph) {
    for (const Node& n : graph.nodes)
      act_affine |= n.attrs.Has("_act_scale") || n.attrs.Has("_act_shift");
  };
  scan_affine(g);
  for (const Graph* sg : subgraphs) scan_affine(*sg);
  const uint32_t min_reader = has_optionals     ? 7
                              : act_affine      ? 6
                              : has_sequences   ? 5
                              : half_weights    ? 4
                              : !graphs.empty() ? 3
                              : channels_last   ? 2
                                                : 1;
  auto model = fb::CreateModel(b, 7, min_reader, b.CreateVector(tensors), b.CreateVector(buffers),
                               main_graph.ops, main_graph.ins, main_graph.outs, meta,
                               graphs.empty() ? 0 : b.CreateVector(graphs));
  fb::FinishModelBuffer(b, model);
  out->assign(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes,
                       const std::vector<std::string>& inputs) {
  return fileio::WriteFileAtomic(path, bytes.data(), bytes.size(), inputs);
}

}  // namespace conv
}  // namespace qfold
