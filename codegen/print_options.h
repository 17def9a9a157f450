/// \file
/// What a caller tells either target's printer beyond the kernels.
#pragma once

#include <map>
#include <string>

namespace cppi::codegen {

struct PrintOptions {
  /// Origin (FX node name) -> "file:line | code", printed under the kernel's
  /// provenance comment when present.
  std::map<std::string, std::string> origin_source;
  /// Keep the scheduled loop IR's text after each pass (the debug dump
  /// loop_ir_scheduled.txt).
  bool loop_ir_dumps = false;
};

}  // namespace cppi::codegen
