/// \file
/// Remarks: the compiler's record of every decision a user may ask about —
/// why a node fell back to ATen, which nodes went to an extern call, why two
/// nodes did not fuse. explain() and the debug dumps print them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cppi {

struct Remark {
  enum class Kind { Fallback, Extern, FusionRefusal, GraphFallback };
  Kind kind;
  std::string node;    // FX node name (for FusionRefusal: the first node)
  std::string op;      // ATen overload name, e.g. "aten.sort.default"
  std::string other;   // FusionRefusal: the second node
  std::string reason;
  /// FusionRefusal: the bytes that go through memory because the two did not
  /// fuse (what the first writes and the second reads back, once each); -1
  /// where a size is symbolic or the second reads nothing the first writes.
  int64_t bytes = -1;
};

const char* to_string(Remark::Kind kind);

inline const char* to_string(Remark::Kind kind) {
  switch (kind) {
    case Remark::Kind::Fallback: return "fallback";
    case Remark::Kind::Extern: return "extern";
    case Remark::Kind::FusionRefusal: return "fusion_refusal";
    case Remark::Kind::GraphFallback: return "graph_fallback";
  }
  return "?";
}

class Remarks {
 public:
  void add(Remark r) { remarks_.push_back(std::move(r)); }
  const std::vector<Remark>& all() const { return remarks_; }

 private:
  std::vector<Remark> remarks_;
};

}  // namespace cppi
