/// \file
/// Error values for the compiler core. Passes return `Expected<T>`; an error
/// becomes a Python exception only at the pybind11 boundary (backend/python).
/// We do not use llvm::Expected because the core must build without LLVM
/// (the GPU machine has no LLVM dev libraries).
#pragma once

#include <cassert>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace cppi {

/// Why a stage failed. `kind` lets callers decide between "fall back to eager"
/// (Unsupported) and "this is our bug" (Internal).
struct Error {
  /// IndexOutOfRange: a compiled kernel met an index eager would reject
  /// (raised as IndexError).
  enum class Kind { Unsupported, InvalidInput, CompileFailed, Internal, IndexOutOfRange };
  Kind kind = Kind::Internal;
  std::string message;

  static Error unsupported(std::string m) { return {Kind::Unsupported, std::move(m)}; }
  static Error invalid_input(std::string m) { return {Kind::InvalidInput, std::move(m)}; }
  static Error compile_failed(std::string m) { return {Kind::CompileFailed, std::move(m)}; }
  static Error internal(std::string m) { return {Kind::Internal, std::move(m)}; }
  static Error index_out_of_range(std::string m) { return {Kind::IndexOutOfRange, std::move(m)}; }
};

const char* to_string(Error::Kind kind);

inline const char* to_string(Error::Kind kind) {
  switch (kind) {
    case Error::Kind::Unsupported: return "unsupported";
    case Error::Kind::InvalidInput: return "invalid input";
    case Error::Kind::CompileFailed: return "compile failed";
    case Error::Kind::Internal: return "internal error";
    case Error::Kind::IndexOutOfRange: return "index out of range";
  }
  return "?";
}

/// Thrown only where a status cannot be returned (constructors of immutable
/// IR nodes checking their invariants); the bindings translate it.
class CompilerError : public std::runtime_error {
 public:
  explicit CompilerError(Error e) : std::runtime_error(e.message), error_(std::move(e)) {}
  const Error& error() const { return error_; }

 private:
  Error error_;
};

/// A value or an Error.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    if (!ok()) throw CompilerError(error());
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) throw CompilerError(error());
    return std::get<0>(std::move(v_));
  }
  const T& value() const& {
    if (!ok()) throw CompilerError(error());
    return std::get<0>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

/// Success or an Error, for functions with nothing to return.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT
  static Status success() { return {}; }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }
  void throw_if_error() const {
    if (error_) throw CompilerError(*error_);
  }

 private:
  std::optional<Error> error_;
};

/// Builds a message from streamable parts: `cat("bad rank ", r)`.
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

}  // namespace cppi
