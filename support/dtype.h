/// \file
/// Scalar types shared by the graph import, the loop IR and both codegens.
/// The list is an X-macro so every switch over dtypes is generated from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace cppi {

// X(enum name, torch name, C++ storage type name, size in bytes)
//
// The float8 types are storage only: graphs carry them to and from ATen ops
// (torch._scaled_mm, casts), and lowering sends every op that would compute
// on one in a kernel through ATen (lower_graph's check_no_float8). Their
// C++ names exist in no prelude, so a kernel that did touch one would fail
// to compile rather than read bytes as integers.
#define CPPI_FOR_EACH_DTYPE(X)                                      \
  X(Bool, "bool", "bool", 1)                                        \
  X(UInt8, "uint8", "uint8_t", 1)                                   \
  X(Int8, "int8", "int8_t", 1)                                      \
  X(Int16, "int16", "int16_t", 2)                                   \
  X(Int32, "int32", "int32_t", 4)                                   \
  X(Int64, "int64", "int64_t", 8)                                   \
  X(Float16, "float16", "cppi_half", 2)                             \
  X(BFloat16, "bfloat16", "cppi_bf16", 2)                           \
  X(Float32, "float32", "float", 4)                                 \
  X(Float64, "float64", "double", 8)                                \
  X(Float8E4M3FN, "float8_e4m3fn", "cppi_float8_not_computed", 1) \
  X(Float8E5M2, "float8_e5m2", "cppi_float8_not_computed", 1)

enum class DType : uint8_t {
#define CPPI_DTYPE_ENUM(name, torch_name, ctype, size) name,
  CPPI_FOR_EACH_DTYPE(CPPI_DTYPE_ENUM)
#undef CPPI_DTYPE_ENUM
};

inline constexpr std::string_view dtype_name(DType t) {
  switch (t) {
#define CPPI_DTYPE_NAME(name, torch_name, ctype, size) \
  case DType::name: return torch_name;
    CPPI_FOR_EACH_DTYPE(CPPI_DTYPE_NAME)
#undef CPPI_DTYPE_NAME
  }
  return "?";
}

inline constexpr std::string_view dtype_ctype(DType t) {
  switch (t) {
#define CPPI_DTYPE_CTYPE(name, torch_name, ctype, size) \
  case DType::name: return ctype;
    CPPI_FOR_EACH_DTYPE(CPPI_DTYPE_CTYPE)
#undef CPPI_DTYPE_CTYPE
  }
  return "?";
}

inline constexpr int dtype_size(DType t) {
  switch (t) {
#define CPPI_DTYPE_SIZE(name, torch_name, ctype, size) \
  case DType::name: return size;
    CPPI_FOR_EACH_DTYPE(CPPI_DTYPE_SIZE)
#undef CPPI_DTYPE_SIZE
  }
  return 0;
}

/// Parses a torch dtype name as `str(torch.float32)` minus "torch." prints it.
inline std::optional<DType> parse_dtype(std::string_view s) {
#define CPPI_DTYPE_PARSE(name, torch_name, ctype, size) \
  if (s == torch_name) return DType::name;
  CPPI_FOR_EACH_DTYPE(CPPI_DTYPE_PARSE)
#undef CPPI_DTYPE_PARSE
  return std::nullopt;
}

inline constexpr bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
inline constexpr bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
inline constexpr bool is_float8(DType t) { return t == DType::Float8E4M3FN || t == DType::Float8E5M2; }
/// The integer dtype a float -> `to` cast truncates to before it wraps to
/// `to`, as eager's does (c10::convert sends uint8 through int64; int8 and
/// int16 go through int32 on x86), or `to` itself. C++'s direct conversion
/// is undefined out of range, and the vector forms saturate instead of wrapping.
inline constexpr DType float_cast_truncates_through(DType to) {
  if (to == DType::UInt8) return DType::Int64;
  if (to == DType::Int8 || to == DType::Int16) return DType::Int32;
  return to;
}
inline constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int16 || t == DType::Int32 ||
         t == DType::Int64 || (include_bool && t == DType::Bool);
}

}  // namespace cppi
