/// \file
/// `Desc`: the plain-data tree (none, bool, int, float, string, list, ordered
/// dict) that crosses the Python/C++ boundary. python/cppinductor/export.py
/// turns an ATen FX graph into one; lowering/graph/graph.cpp validates and imports it.
/// Keeping the boundary generic means the bindings never change when the
/// graph format grows, and C++ tests build graphs without Python.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cppi {

class Desc {
 public:
  using List = std::vector<Desc>;
  using Dict = std::vector<std::pair<std::string, Desc>>;  // insertion-ordered

  Desc() = default;
  Desc(std::nullptr_t) {}                          // NOLINT
  Desc(bool b) : v_(b) {}                          // NOLINT
  Desc(int v) : v_(static_cast<int64_t>(v)) {}     // NOLINT
  Desc(int64_t v) : v_(v) {}                       // NOLINT
  Desc(double v) : v_(v) {}                        // NOLINT
  Desc(const char* s) : v_(std::string(s)) {}      // NOLINT
  Desc(std::string s) : v_(std::move(s)) {}        // NOLINT
  Desc(List l) : v_(std::move(l)) {}               // NOLINT
  Desc(Dict d) : v_(std::move(d)) {}               // NOLINT

  bool is_none() const { return v_.index() == 0; }
  bool is_bool() const { return v_.index() == 1; }
  bool is_int() const { return v_.index() == 2; }
  bool is_float() const { return v_.index() == 3; }
  bool is_string() const { return v_.index() == 4; }
  bool is_list() const { return v_.index() == 5; }
  bool is_dict() const { return v_.index() == 6; }

  bool as_bool() const { return std::get<1>(v_); }
  int64_t as_int() const { return std::get<2>(v_); }
  double as_float() const { return std::get<3>(v_); }
  const std::string& as_string() const { return std::get<4>(v_); }
  const List& as_list() const { return std::get<5>(v_); }
  const Dict& as_dict() const { return std::get<6>(v_); }

  /// For a dict: the value at `key`, or nullptr.
  const Desc* find(const std::string& key) const;
  /// For a one-key dict used as a tagged value ({"node": 3}): the tag, else "".
  const std::string& tag() const;
  /// The value of a one-key dict.
  const Desc& tagged_value() const;

  bool operator==(const Desc& o) const { return v_ == o.v_; }
  bool operator!=(const Desc& o) const { return !(*this == o); }

  /// JSON text (floats printed round-trippably; inf/nan as strings "inf"...).
  std::string to_json() const;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, List, Dict> v_;
};

}  // namespace cppi
