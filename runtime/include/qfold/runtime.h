// qfold runtime: load a .qfm model and run it. Depends only on the C++
// standard library (flatbuffers is used internally, header-only).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qfold/dtype.h"
#include "qfold/status.h"

namespace qfold {

using Shape = std::vector<int64_t>;

enum class Layout { kPlain = 0, kNCHW, kNHWC };

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;                         // -1 where the dim is symbolic
  std::vector<std::string> dim_names;  // symbolic names, "" for fixed dims
  // Graph inputs/outputs: layout and the batch/channel axes their consumers
  // imply (-1 when none), as recorded by the converter.
  Layout layout = Layout::kPlain;
  int batch_axis = -1;
  int channel_axis = -1;
  // An ONNX sequence of tensors (Session::SetInputSequence and
  // GetOutputSequence): dtype is its elements' type, shape the shape every
  // element has (-1 where they may differ; empty when even the rank may).
  bool is_sequence = false;
  // An ONNX optional: none, or a value of the type the other fields describe
  // (a tensor, or a sequence when is_sequence is set too). A present value is
  // set with SetInput/SetInputSequence, none with SetInputNone; OutputIsNone
  // tells which an output holds.
  bool is_optional = false;
};

// One tensor of a sequence, read only: its bytes at `data`, row-major.
struct TensorView {
  DType dtype = DType::kUndefined;
  Shape shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

class Model {
 public:
  // Maps the file read-only; constants are used in place.
  static Status LoadFile(const std::string& path, std::shared_ptr<Model>* out);
  // Copies nothing: `data` must outlive the model and be 64-byte aligned
  // for in-place use (otherwise it is copied once).
  static Status LoadMemory(const void* data, size_t size, std::shared_ptr<Model>* out);
  ~Model();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  Model();
  std::unique_ptr<Impl> impl_;
};

struct SessionOptions {
  // Kernel threads. Values < 1 mean 1; values above the machine's hardware
  // threads (std::thread::hardware_concurrency, or 64 when it is unknown) are
  // clamped to that count: more threads than cores only add switching, and a
  // hostile value must not start thousands of threads.
  int num_threads = 1;
  // Upper bound on what one session allocates (arena, plan-time values,
  // dynamic-mode buffers); planning a shape that needs more fails with a
  // status naming the tensor instead of exhausting the device's memory.
  size_t max_memory_bytes = size_t(4) << 30;
  // Times every operator of each Run (two clock reads per op); read with
  // Session::profile(). Off by default: it costs little, but nothing is free.
  bool profile = false;
  // Kernels from fewer CPU features than detected, for tests and comparisons:
  // a QFOLD_ISA name (reference, avx2, avxvnni, avx512vnni, amx, neon, neondot,
  // neoni8mm), clamped to what the CPU has. Empty: the detected features,
  // lowered by the QFOLD_ISA environment variable. Each kernel family picks
  // its variant once, when the session is created (Session::kernels()).
  std::string kernel_isa;
  // Arithmetic of float models' convolutions. kFloat32 (the default): fp32
  // throughout. kBfloat16 (opt-in reduced precision): channels-last float
  // convolutions round their activations and weights to bfloat16 (to nearest
  // even) and multiply them on the CPU's AMX-BF16 units or with AVX-512 BF16
  // (vdpbf16ps), summing in fp32;
  // Activations that such convolutions alone produce and read are stored as
  // bfloat16 between them (Session::bf16_activations()); graph inputs and
  // outputs stay float32. It changes nothing where bf16 would not be faster:
  // CPUs without AVX-512 BF16, and Intel CPUs without AMX-BF16 (their vdpbf16ps
  // issues at half the FMA rate).
  // Session::kernels() lists conv_nhwc_bf16 when it is in use. kFloat16
  // (opt-in, Armv8.2 FEAT_FP16): channels-last float convolutions and Gemm/
  // MatMul with a constant 2-D B round their operands to IEEE half (to
  // nearest even) and multiply them with NEON fp16 arithmetic, summing short
  // runs in fp16 and those in fp32 (docs/NUMERICS.md bounds the error); on a
  // CPU without FEAT_FP16 (x86, Cortex-A53/A72) it changes nothing.
  // Session::kernels() lists conv_nhwc_fp16 and gemm_fp16 when in use.
  enum class Precision { kFloat32, kBfloat16, kFloat16 };
  Precision precision = Precision::kFloat32;
  // Streaming state: {output, input} pairs binding a model's returned state to
  // its state input (same dtype and shape). After each successful Run the
  // output's value becomes the input's, so chunk after chunk runs without the
  // caller copying it. A bound input starts at zeros, keeps its value across
  // re-plans of other inputs, is zeroed again by ResetState, and SetInput still
  // overrides it (to restore a saved state).
  std::vector<std::pair<std::string, std::string>> state_bindings;
  // Upper bound on the iterations of each Loop node per Run; a Loop whose trip
  // count and condition would take it further fails with a status naming the
  // node (a data-dependent stop that never comes, or a trip count of 2^45, runs
  // for hours otherwise). 0: no bound, as the ONNX spec has none.
  int64_t max_loop_iterations = 0;
};

// Time spent in one operator over all Runs since the session was created
// (or since Session::ResetProfile), with SessionOptions::profile set.
struct OpProfile {
  std::string name;  // ONNX node name
  std::string type;  // operator type
  int64_t runs = 0;
  double total_us = 0;
  // The fastest single run: on a shared machine, the time least inflated by
  // other processes (the mean counts every preemption).
  double min_us = 0;
  // Runs that took the op's reference kernel instead of its fast kernels.
  int64_t reference_runs = 0;
};

class Session {
 public:
  static Status Create(std::shared_ptr<Model> model, const SessionOptions& opts,
                       std::unique_ptr<Session>* out);
  ~Session();

  // Sets the shape of an input (symbolic dims or an override) and re-plans,
  // once every input has a concrete shape (resize them one by one; until the
  // last, nothing is planned and SetInput names the input still symbolic).
  Status ResizeInput(const std::string& name, const Shape& shape);
  // Copies `bytes` bytes into the input; shape must match the current one
  // (call ResizeInput first to change it).
  Status SetInput(const std::string& name, DType dtype, const Shape& shape, const void* data,
                  size_t bytes);
  // As SetInput, but Run reads `data` in place instead of a copy (the input
  // of a large image costs a copy per run otherwise): it stays bound until
  // ReleaseInputs, a SetInput or BindInput of this input, or a re-plan
  // (ResizeInput of any input), and must stay valid and unchanged until
  // then; no op writes it. Copied as by SetInput instead: sequence, optional
  // and bool inputs, inputs bound as streaming state, and data not aligned
  // to its element size. Outputs that are the input itself point into `data`.
  Status BindInput(const std::string& name, DType dtype, const Shape& shape, const void* data,
                   size_t bytes);
  // Ends every BindInput. Those inputs hold no value afterwards: Run fails,
  // naming one, until each is set or bound again.
  void ReleaseInputs();
  // Sets a sequence input (TensorInfo::is_sequence) to copies of `elements`:
  // each of the input's dtype and of a shape matching its known dims.
  Status SetInputSequence(const std::string& name, const std::vector<TensorView>& elements);
  // Sets an optional input (TensorInfo::is_optional) to none; an optional
  // input never set is none too.
  Status SetInputNone(const std::string& name);
  Status Run();
  // Valid until the next Run/Resize.
  Status GetOutput(const std::string& name, DType* dtype, Shape* shape, const void** data) const;
  // The elements of a sequence output; their data is valid until the next Run/Resize.
  Status GetOutputSequence(const std::string& name, std::vector<TensorView>* elements) const;
  // Whether an output holds no value: an optional output (TensorInfo::is_optional)
  // that is none, which GetOutput and GetOutputSequence refuse. False for others.
  Status OutputIsNone(const std::string& name, bool* none) const;

  // Zeros every input bound by SessionOptions::state_bindings (a new stream).
  void ResetState();
  size_t arena_bytes() const;
  // bf16 mode: how many activations the current plan stores as bfloat16
  // (SessionOptions::precision); 0 otherwise.
  size_t bf16_activations() const;
  // The kernel variant of every family this session uses, fixed at creation:
  // "gemm_f32=avx2 dwconv_f32=avx2 gemm_s8=avxvnni ... portable_loops=on"
  // ("reference" where a family runs its reference kernel).
  const std::string& kernels() const;
  // Per-operator times in graph order (empty unless SessionOptions::profile);
  // operators evaluated once at plan time are not listed.
  std::vector<OpProfile> profile() const;
  void ResetProfile();
  struct Impl;

 private:
  Session();
  std::unique_ptr<Impl> impl_;
};

}  // namespace qfold
