// Runs a single runtime op on hand-made tensors: infer, allocate, run.
// Used by the per-op unit tests; the ONNX backend tests cover the rest.
#pragma once
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/op.h"
#include "kernels/kernel_config.h"
#include "kernels/thread_pool.h"
#include "qfold/dtype.h"

namespace qfold {
namespace test {

// The kernel configuration of a named feature set (clamped to this CPU's
// features), made once and kept for the whole run, so a KernelContext may point
// at it. Tests that compare levels set ctx.kernels = &IsaConfig(isa).
inline const kernels::KernelConfig& IsaConfig(kernels::Isa isa) {
  static const std::vector<kernels::KernelConfig> configs = [] {
    std::vector<kernels::KernelConfig> v;
    for (int i = 0; i <= int(kernels::Isa::kAmx); ++i)  // kAmx: the last value
      v.push_back(kernels::KernelConfigForIsa(kernels::Isa(i)));
    return v;
  }();
  return configs[size_t(isa)];
}

struct OwnedTensor {
  Tensor t;
  std::vector<uint8_t> storage;
};

template <class T>
std::shared_ptr<OwnedTensor> Make(DType dtype, Shape shape, std::vector<T> values) {
  auto o = std::make_shared<OwnedTensor>();
  o->t.dtype = dtype;
  o->t.shape = std::move(shape);
  o->storage.resize(values.size() * sizeof(T) + 1);
  if (!values.empty()) std::memcpy(o->storage.data(), values.data(), values.size() * sizeof(T));
  o->t.data = o->storage.data();
  return o;
}

inline std::shared_ptr<OwnedTensor> F32(Shape shape, std::vector<float> v) {
  return Make<float>(DType::kFloat32, std::move(shape), std::move(v));
}
inline std::shared_ptr<OwnedTensor> I64(Shape shape, std::vector<int64_t> v) {
  return Make<int64_t>(DType::kInt64, std::move(shape), std::move(v));
}

struct OpRun {
  Status status;
  std::vector<std::shared_ptr<OwnedTensor>> outputs;
  template <class T>
  std::vector<T> values(int i = 0) const {
    const Tensor& t = outputs[i]->t;
    const T* p = t.ptr<T>();
    return std::vector<T>(p, p + t.numel());
  }
  const Shape& shape(int i = 0) const { return outputs[i]->t.shape; }
};

// A pool of `threads` threads for tests that compare thread counts, kept for
// the test binary's lifetime; null for one thread (the kernels then run on
// the caller alone, as in a one-thread session).
inline kernels::ThreadPool* TestPool(int threads) {
  if (threads <= 1) return nullptr;
  static std::mutex mu;
  static std::map<int, std::unique_ptr<kernels::ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<kernels::ThreadPool>& p = pools[threads];
  if (!p) p.reset(new kernels::ThreadPool(threads));
  return p.get();
}

// inputs: nullptr for an omitted optional input. kc: the kernels to use (null:
// kernels::DefaultKernelConfig(), the CPU's features lowered by QFOLD_ISA).
inline OpRun RunOp(const std::string& type, const std::vector<std::shared_ptr<OwnedTensor>>& inputs,
                   const AttrMap& attrs = AttrMap(), int num_outputs = 1, int num_threads = 1,
                   const kernels::KernelConfig* kc = nullptr) {
  OpRun r;
  const OpDef* def = FindOp(type);
  if (!def) {
    r.status = Status(StatusCode::kUnsupported, "no op " + type);
    return r;
  }
  std::string name = "test";
  KernelContext ctx;
  ctx.op_type = &type;
  ctx.op_name = &name;
  ctx.attrs = &attrs;
  ctx.pool = TestPool(num_threads);
  ctx.kernels = kc;
  for (auto& in : inputs) ctx.inputs.push_back(in ? &in->t : nullptr);
  for (int i = 0; i < num_outputs; ++i) {
    r.outputs.push_back(std::make_shared<OwnedTensor>());
    ctx.outputs.push_back(&r.outputs.back()->t);
  }
  r.status = def->infer(ctx);
  if (!r.status.ok()) return r;
  for (auto& o : r.outputs) {
    o->storage.assign(o->t.bytes() + 1, 0);
    o->t.data = o->storage.data();
  }
  r.status = def->run(ctx);
  return r;
}

}  // namespace test
}  // namespace qfold
