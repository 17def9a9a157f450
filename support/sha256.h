/// \file
/// SHA-256, for cache keys and for verifying cache entries on disk (ours:
/// the core must build without LLVM, which has its own).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cppi {

class Sha256 {
 public:
  Sha256();
  /// Feeds bytes. Feeding a length-prefixed field (`field`) keeps
  /// ("ab","c") and ("a","bc") apart.
  Sha256& update(std::string_view bytes);
  Sha256& field(std::string_view bytes);
  /// 32 raw bytes; the object must not be updated afterwards.
  std::string digest();
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;
  size_t fill_ = 0;
};

std::string sha256_hex(std::string_view bytes);

}  // namespace cppi
