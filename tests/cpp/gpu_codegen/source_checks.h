// Text checks on printed CUDA sources and loop-IR dumps, shared by the GPU
// codegen tests that need no GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cppi::gpu::testing {

/// FileCheck-style: each pattern occurs, in order.
inline void expect_in_order(const std::string& text, const std::vector<std::string>& patterns) {
  size_t at = 0;
  for (const auto& p : patterns) {
    size_t found = text.find(p, at);
    ASSERT_NE(found, std::string::npos) << "missing (in order): " << p << "\n--- source ---\n" << text;
    at = found + p.size();
  }
}

/// How many times `what` occurs in `text`.
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace cppi::gpu::testing
