// Internal view of a loaded model, shared by Model and Session.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/attr.h"
#include "core/op.h"
#include "qfold/qfold_generated.h"
#include "qfold/runtime.h"

namespace qfold {

// The newest format this reader understands; files whose min_reader_version
// exceeds it are refused.
constexpr uint32_t kReaderVersion = 7;

struct OpEntry {
  const OpDef* def = nullptr;
  std::string type;
  std::string name;
  AttrMap attrs;
  std::vector<int> inputs;   // -1: omitted
  std::vector<int> outputs;  // -1: omitted
};

// A subgraph of an If/Loop/Scan (Model.subgraphs); its ops address Model's tensors.
struct GraphEntry {
  std::string name;
  std::vector<OpEntry> ops;
  std::vector<int> input_ids, output_ids;
};

struct TensorEntry {
  TensorInfo info;
  const void* const_data = nullptr;  // non-null for constants (in the mapped file)
  // False for a sequence (or optional) whose elements may differ in rank.
  bool rank_known = true;
};

struct Model::Impl {
  std::string source;  // file path or "<memory>", for messages
  // Exactly one of these holds the bytes: a mapping or an owned copy.
  void* mapped = nullptr;
  size_t mapped_size = 0;
  std::vector<uint8_t> owned;  // over-allocated so that owned_base is 64-aligned
  const uint8_t* base = nullptr;
  size_t size = 0;

  const fb::Model* fb = nullptr;
  std::vector<TensorEntry> tensors;
  std::vector<OpEntry> ops;
  std::vector<int> input_ids, output_ids;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<GraphEntry> subgraphs;
  // float32 copies of float16 weights (WidenHalfWeights), 64-byte aligned
  // inside each over-allocated block; TensorEntry::const_data points there.
  std::vector<std::unique_ptr<uint8_t[]>> widened;
  size_t widened_bytes = 0;

  ~Impl();
  Status Parse();

 private:
  // Reads one graph's operators; `producer` holds -1 for the values the graph
  // starts with (constants, its inputs) and -2 for the others. `graph` is the
  // subgraph index (-1: the main graph): nested subgraphs must come later.
  Status ParseOps(const flatbuffers::Vector<flatbuffers::Offset<fb::Operator>>* fb_ops, int graph,
                  std::vector<int>* producer, std::vector<OpEntry>* out, std::string* unsupported);
  // float16 constants read only by ops with kTraitHalfWeights (the weights a
  // converter kept as float16) become float32 copies, once per model, so the
  // ops see the values of the widened model; any other float16 constant stays.
  Status WidenHalfWeights();
  Status CheckSequences() const;
};

}  // namespace qfold
