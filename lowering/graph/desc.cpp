#include "lowering/graph/desc.h"

#include <cmath>
#include <cstdio>

namespace cppi {

const Desc* Desc::find(const std::string& key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : as_dict())
    if (k == key) return &v;
  return nullptr;
}

const std::string& Desc::tag() const {
  static const std::string empty;
  if (!is_dict() || as_dict().size() != 1) return empty;
  return as_dict()[0].first;
}

const Desc& Desc::tagged_value() const { return as_dict().at(0).second; }

namespace {

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const Desc& d) {
  if (d.is_none()) {
    out += "null";
  } else if (d.is_bool()) {
    out += d.as_bool() ? "true" : "false";
  } else if (d.is_int()) {
    out += std::to_string(d.as_int());
  } else if (d.is_float()) {
    double f = d.as_float();
    if (std::isnan(f)) {
      out += "\"nan\"";
    } else if (std::isinf(f)) {
      out += f > 0 ? "\"inf\"" : "\"-inf\"";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", f);
      out += buf;
    }
  } else if (d.is_string()) {
    append_json_string(out, d.as_string());
  } else if (d.is_list()) {
    out += '[';
    bool first = true;
    for (const auto& e : d.as_list()) {
      if (!first) out += ", ";
      first = false;
      append_json(out, e);
    }
    out += ']';
  } else {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : d.as_dict()) {
      if (!first) out += ", ";
      first = false;
      append_json_string(out, k);
      out += ": ";
      append_json(out, v);
    }
    out += '}';
  }
}

}  // namespace

std::string Desc::to_json() const {
  std::string out;
  append_json(out, *this);
  return out;
}

}  // namespace cppi
