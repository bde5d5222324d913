// Operator attributes as read from the .qfm (or, in the converter, from ONNX).
// Kernels look them up by name in infer (validation) and run.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qfold {

struct Attr {
  enum Kind { kInt, kFloat, kInts, kFloats, kString };
  std::string name;
  Kind kind = kInt;
  int64_t i = 0;
  float f = 0.f;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
};

class AttrMap {
 public:
  void Set(Attr a);
  void SetInt(const std::string& name, int64_t v);
  void SetFloat(const std::string& name, float v);
  void SetInts(const std::string& name, std::vector<int64_t> v);
  void SetFloats(const std::string& name, std::vector<float> v);
  void SetString(const std::string& name, std::string v);
  bool Erase(const std::string& name);

  const Attr* Find(const std::string& name) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  int64_t GetInt(const std::string& name, int64_t dflt) const;
  float GetFloat(const std::string& name, float dflt) const;
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> GetFloats(const std::string& name, std::vector<float> dflt = {}) const;
  std::string GetString(const std::string& name, std::string dflt = "") const;

  const std::vector<Attr>& all() const { return attrs_; }

 private:
  std::vector<Attr> attrs_;  // kept sorted by name (the .qfm stores them sorted too)
};

}  // namespace qfold
