/// \file
/// On-disk cache entries and the cache directory policy.
#include "support/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/sha256.h"

namespace cppi {
namespace {

constexpr char k_magic[8] = {'C', 'P', 'P', 'I', 'C', 'A', 'C', '1'};
constexpr size_t k_trailer_size = 8 + 8 + 32;  // magic, payload size, sha256

std::string errno_text() { return std::strerror(errno); }

Status make_dirs(const std::string& dir) {
  // Parents get the usual mode; only the cache dir itself must be private.
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    bool last = pos == dir.size();
    if (mkdir(prefix.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST)
      return Error::invalid_input(cat("cannot create cache directory ", prefix, ": ", errno_text()));
  }
  return Status::success();
}

}  // namespace

Status ensure_private_dir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/')
    return Error::invalid_input(cat("cache directory must be an absolute path: '", dir, "'"));
  if (Status s = make_dirs(dir); !s) return s;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return Error::invalid_input(cat("cannot stat cache directory ", dir, ": ", errno_text()));
  if (!S_ISDIR(st.st_mode))
    return Error::invalid_input(cat("cache directory ", dir, " is not a directory (or is a symlink)"));
  if (st.st_uid != geteuid())
    return Error::invalid_input(cat("refusing cache directory ", dir, ": owned by uid ", st.st_uid,
                                    ", not by the current user (uid ", geteuid(), ")"));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error::invalid_input(cat("refusing cache directory ", dir,
                                    ": writable by group or others (chmod 700 it)"));
  return Status::success();
}

Expected<std::string> cache_dir() {
  std::string dir;
  if (const char* env = std::getenv("CPPINDUCTOR_CACHE_DIR"); env && *env) {
    dir = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    dir = std::string(xdg) + "/cppinductor";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::string(home) + "/.cache/cppinductor";
  } else {
    return Error::invalid_input("no cache directory: set CPPINDUCTOR_CACHE_DIR or HOME");
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (Status s = ensure_private_dir(dir); !s) return s.error();
  return dir;
}

std::string u64_le(uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char(value >> (8 * i));
  return out;
}

uint64_t read_u64_le(const char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  return value;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::internal(cat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> read_cache_entry(const std::string& path, bool* corrupt) {
  *corrupt = false;
  if (access(path.c_str(), F_OK) != 0) return std::nullopt;
  auto data = read_file(path);
  if (!data || data->size() < k_trailer_size) {
    *corrupt = true;
    return std::nullopt;
  }
  std::string& bytes = *data;
  const size_t payload_size = bytes.size() - k_trailer_size;
  const char* trailer = bytes.data() + payload_size;
  const uint64_t stored_size = read_u64_le(trailer + 8);
  std::string_view payload(bytes.data(), payload_size);
  if (std::memcmp(trailer, k_magic, 8) != 0 || stored_size != payload_size ||
      Sha256().update(payload).digest() != std::string_view(trailer + 16, 32)) {
    *corrupt = true;
    return std::nullopt;
  }
  bytes.resize(payload_size);
  return std::move(bytes);
}

Status write_cache_entry(const std::string& path, const std::string& payload) {
  std::string trailer(k_magic, 8);
  trailer += u64_le(payload.size());
  trailer += Sha256().update(payload).digest();

  std::string tmp = path + ".tmp.XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) return Error::internal(cat("cannot create ", tmp, ": ", errno_text()));
  auto write_all = [&](const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = write(fd, s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  };
  bool ok = write_all(payload) && write_all(trailer) && fchmod(fd, 0600) == 0;
  ok = (close(fd) == 0) && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    unlink(tmp.c_str());
    return Error::internal(cat("cannot write cache entry ", path, ": ", why));
  }
  return Status::success();
}

}  // namespace cppi
