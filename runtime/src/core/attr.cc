#include "core/attr.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace qfold {

void AttrMap::Set(Attr a) {
  auto it = std::lower_bound(attrs_.begin(), attrs_.end(), a.name,
                             [](const Attr& x, const std::string& n) { return x.name < n; });
  if (it != attrs_.end() && it->name == a.name) {
    *it = std::move(a);
  } else {
    attrs_.insert(it, std::move(a));
  }
}

void AttrMap::SetInt(const std::string& name, int64_t v) {
  Attr a;
  a.name = name;
  a.kind = Attr::kInt;
  a.i = v;
  Set(std::move(a));
}
void AttrMap::SetFloat(const std::string& name, float v) {
  Attr a;
  a.name = name;
  a.kind = Attr::kFloat;
  a.f = v;
  Set(std::move(a));
}
void AttrMap::SetInts(const std::string& name, std::vector<int64_t> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::kInts;
  a.ints = std::move(v);
  Set(std::move(a));
}
void AttrMap::SetFloats(const std::string& name, std::vector<float> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::kFloats;
  a.floats = std::move(v);
  Set(std::move(a));
}
void AttrMap::SetString(const std::string& name, std::string v) {
  Attr a;
  a.name = name;
  a.kind = Attr::kString;
  a.s = std::move(v);
  Set(std::move(a));
}

bool AttrMap::Erase(const std::string& name) {
  auto it = std::find_if(attrs_.begin(), attrs_.end(),
                         [&](const Attr& a) { return a.name == name; });
  if (it == attrs_.end()) return false;
  attrs_.erase(it);
  return true;
}

const Attr* AttrMap::Find(const std::string& name) const {
  auto it = std::lower_bound(attrs_.begin(), attrs_.end(), name,
                             [](const Attr& x, const std::string& n) { return x.name < n; });
  return it != attrs_.end() && it->name == name ? &*it : nullptr;
}

int64_t AttrMap::GetInt(const std::string& name, int64_t dflt) const {
  const Attr* a = Find(name);
  if (!a) return dflt;
  if (a->kind != Attr::kFloat) return a->i;
  // A float out of int64's range (a malformed file) saturates; converting it
  // would be undefined. NaN gives the default.
  if (std::isnan(a->f)) return dflt;
  if (a->f >= 9.2233720368547758e18f) return std::numeric_limits<int64_t>::max();
  if (a->f <= -9.2233720368547758e18f) return std::numeric_limits<int64_t>::min();
  return int64_t(a->f);
}
float AttrMap::GetFloat(const std::string& name, float dflt) const {
  const Attr* a = Find(name);
  if (!a) return dflt;
  return a->kind == Attr::kInt ? float(a->i) : a->f;
}
std::vector<int64_t> AttrMap::GetInts(const std::string& name, std::vector<int64_t> dflt) const {
  const Attr* a = Find(name);
  return a ? a->ints : dflt;
}
std::vector<float> AttrMap::GetFloats(const std::string& name, std::vector<float> dflt) const {
  const Attr* a = Find(name);
  return a ? a->floats : dflt;
}
std::string AttrMap::GetString(const std::string& name, std::string dflt) const {
  const Attr* a = Find(name);
  return a ? a->s : dflt;
}

}  // namespace qfold
