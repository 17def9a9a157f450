/// \file
/// The per-user on-disk cache of compiled code (g++ shared objects, JIT
/// object files, CUDA cubins) and tuning results. One file per entry: payload followed by a trailer holding
/// the payload's size and SHA-256, so an entry is verified before use and a
/// torn or corrupted file is rebuilt instead of loaded. Entries are written
/// to a temporary file and rename()d into place, so readers never see a
/// partial entry. ELF loaders ignore bytes past the sections, so a trailer on
/// a .so does not stop dlopen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "support/status.h"

namespace cppi {

/// Creates `dir` (and missing parents) with mode 0700, then refuses it unless
/// it is a directory owned by the current user and not writable by group or
/// others (another user could otherwise plant code we would load).
Status ensure_private_dir(const std::string& dir);

/// Reads an entry. nullopt if missing; `corrupt` is set when a file exists but
/// fails verification.
std::optional<std::string> read_cache_entry(const std::string& path, bool* corrupt);

/// Writes payload + trailer atomically (temp file in the same dir + rename).
Status write_cache_entry(const std::string& path, const std::string& payload);

/// A 64-bit size as 8 little-endian bytes, and back from `bytes` (at least
/// 8): how entries store lengths.
std::string u64_le(uint64_t value);
uint64_t read_u64_le(const char* bytes);

/// Reads a whole file.
Expected<std::string> read_file(const std::string& path);

/// The on-disk cache directory: $CPPINDUCTOR_CACHE_DIR, else
/// $XDG_CACHE_HOME/cppinductor, else ~/.cache/cppinductor. Created with mode
/// 0700 if missing. Refused (Error) if it is not a directory, is owned by
/// another user, or is writable by group or others.
Expected<std::string> cache_dir();

}  // namespace cppi
