/// \file
/// Value expressions: the typed, pure expression DAGs that form kernel bodies
/// (what one output element is, in terms of loads, constants and index values).
///
/// Semantics
/// - Every node has a DType (support/dtype.h). Factories check operand types
///   and never convert implicitly: lowerings insert Cast where eager would
///   promote. Binary and Compare operands always have equal dtypes.
/// - Reduced floats (float16, bfloat16) are storage types only. They may be
///   Loaded, Cast, chosen by Where, written by constants and stored, but
///   Unary/Binary/Compare reject them: lowerings compute in float32
///   (Cast(Load(h), float32) ... Cast(result, float16) before the store), as
///   eager does with its opmath type. So rounding to a reduced float happens
///   exactly where the IR has a Cast to it, and nowhere else.
/// - float32/float64 arithmetic is IEEE-754 with round-to-nearest; NaN and
///   inf propagate (codegen must not assume finite math). maximum/minimum
///   propagate NaN (NaN wins, as torch.maximum). round is half-to-even.
///   sign is (0 < x) - (x < 0), so sign(NaN) = 0 as in ATen's CPU kernel.
///   Transcendental functions are accurate to a few ulp, not correctly rounded.
/// - Integer arithmetic wraps (two's complement) on overflow. Integer
///   floordiv/truncdiv/fmod/remainder by zero is undefined: lowerings guard
///   it where eager raises or defines a value. nonzero_divisor(x) is x, or 1
///   where x is 0 (the guard where eager raises); a backend may report that
///   0 (the CPU raises ZeroDivisionError after the kernel). floordiv rounds toward -inf,
///   truncdiv toward zero; remainder has the sign of the divisor (Python %),
///   fmod the sign of the dividend (C fmod). Float floordiv/remainder follow
///   torch.floor_divide / torch.remainder. Shifts by a negative amount or by
///   >= the bit width give 0 (lshift, unsigned rshift) or the sign fill
///   (signed rshift), like torch.
/// - Casts: float -> int truncates toward zero; NaN, inf and values out of
///   range give what eager gives on the device (the CPU: the most negative
///   value, as x86 converts; CUDA: saturated, NaN -> 0), never a C cast's
///   undefined result; float -> int8/int16/uint8 truncates to a wider
///   int and then wraps, as eager does (-1.5 -> uint8 is 255, 300.0 -> int8
///   is 44; support/dtype.h float_cast_truncates_through); x -> bool is x != 0 (NaN ->
///   true); bool -> x is 0 or 1; int -> float rounds to nearest; int ->
///   narrower int wraps.
/// - Evaluation: expressions are pure, so order is unobservable, with one
///   exception: a masked Load does not touch memory where its mask is false
///   (its index may then be out of bounds) and yields zero there. Where
///   evaluates both branches, so a branch that might read out of bounds must
///   use a masked Load.
/// - Index expressions (index_expr.h) appear as the index of a Load, in
///   IndexValue (an index as an int64 value, for arange/iota and masks) and as
///   the offset of Random. They may contain constants, size symbols, the
///   loop variables bound by the enclosing node or kernel, and indirect
///   leaves, nothing else.
/// - Indirect indexing: indirect(value, size) (built by indirect() below)
///   turns an integer value (a Load of an index tensor, possibly computed)
///   into a position in a dimension of `size`: negative values wrap once,
///   then the position is clamped into [0, size). Eager raises IndexError for
///   an index outside [-size, size); compiled code cannot raise, so it reads
///   (gather) or writes (index_put, scatter) the element at the clamped
///   position instead. The result is then unspecified, but no kernel ever
///   touches memory outside a buffer. The value is an operand of the node
///   whose index contains the leaf (operands(), post_order(): it is computed
///   first) and is evaluated even where that node's mask is false.
/// - A LocalRef reads a named scalar that an earlier stage of the same Kernel
///   computed (a reduction result: kernel.h). Pre-fusion nodes contain none.
/// - Random(kind, seed, offset) is counter-based: Philox4x32-10 with key =
///   seed (low word k0, high word k1) and counter = (offset low 32 bits,
///   offset high 32 bits, 0, 0), as Triton's tl.rand/tl.randn. rand: the
///   first output word u as a signed int32 i, mapped to [0, 1) by
///   (i < 0 ? -i - 1 : i) * 4.6566127342e-10f. randn: Box-Muller on the first
///   two words: u1 = max(1e-7f, rand(w0)), u2 = rand(w1),
///   sqrt(-2 log u1) * cos(2 pi u2). The result is float32. Lowerings key it
///   on the graph's seed buffer, which the runtime refills from torch's
///   generator on every call, and give each random node its own counter
///   range (lowering/ops/random.cpp).
///
/// Nodes are immutable and shared; hashing is structural and cached. `Expr`
/// is a cheap handle; `==` on handles is pointer identity, structural
/// equality is structurally_equal().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lowering/ir/buffer.h"
#include "lowering/ir/expr.def"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/ops.def"
#include "support/dtype.h"

namespace cppi::ir {

enum class ExprKind : uint8_t {
#define CPPI_EXPR_KIND_ENUM(Name) Name,
  CPPI_FOR_EACH_EXPR_NODE(CPPI_EXPR_KIND_ENUM)
#undef CPPI_EXPR_KIND_ENUM
};
const char* to_string(ExprKind k);

enum class UnaryOp : uint8_t {
#define CPPI_UNARY_ENUM(Name, name, typing) Name,
  CPPI_FOR_EACH_UNARY_OP(CPPI_UNARY_ENUM)
#undef CPPI_UNARY_ENUM
};
enum class BinaryOp : uint8_t {
#define CPPI_BINARY_ENUM(Name, name, typing) Name,
  CPPI_FOR_EACH_BINARY_OP(CPPI_BINARY_ENUM)
#undef CPPI_BINARY_ENUM
};
enum class CompareOp : uint8_t {
#define CPPI_COMPARE_ENUM(Name, name, c_op) Name,
  CPPI_FOR_EACH_COMPARE_OP(CPPI_COMPARE_ENUM)
#undef CPPI_COMPARE_ENUM
};
enum class RandomKind : uint8_t {
#define CPPI_RANDOM_ENUM(Name, name) Name,
  CPPI_FOR_EACH_RANDOM_KIND(CPPI_RANDOM_ENUM)
#undef CPPI_RANDOM_ENUM
};

enum class UnaryTyping : uint8_t { Number, Float, Bool, IntOrBool, FloatPredicate };
enum class BinaryTyping : uint8_t { Number, Float, Ordered, Bool, IntOrBool, Int };

const char* to_string(UnaryOp op);
const char* to_string(BinaryOp op);
const char* to_string(CompareOp op);
const char* to_string(RandomKind k);
/// The C operator of a comparison ("<").
const char* c_operator(CompareOp op);
UnaryTyping typing(UnaryOp op);
BinaryTyping typing(BinaryOp op);

class ExprNode;

/// A handle to an immutable, shared value-expression node.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& node_ptr() const { return node_; }
  const ExprNode* operator->() const { return node_.get(); }
  ExprKind kind() const;
  DType dtype() const;
  size_t hash() const;
  template <typename T>
  const T* as() const;
  /// Pointer identity.
  bool same_as(const Expr& o) const { return node_ == o.node_; }
  friend bool operator==(const Expr& a, const Expr& b) { return a.node_ == b.node_; }
  friend bool operator!=(const Expr& a, const Expr& b) { return a.node_ != b.node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

class ExprNode {
 public:
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType dtype;
  const size_t hash;

 protected:
  ExprNode(ExprKind k, DType t, size_t h) : kind(k), dtype(t), hash(h) {}
};

inline ExprKind Expr::kind() const { return node_->kind; }
inline DType Expr::dtype() const { return node_->dtype; }
inline size_t Expr::hash() const { return node_ ? node_->hash : 0; }
template <typename T>
const T* Expr::as() const {
  return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
}

/// Deep structural equality (buffers compare by name). Linear in the DAG size.
bool structurally_equal(const Expr& a, const Expr& b);
struct ExprStructuralHash {
  size_t operator()(const Expr& e) const { return e.hash(); }
};
struct ExprStructuralEqual {
  bool operator()(const Expr& a, const Expr& b) const { return structurally_equal(a, b); }
};

// ---------------------------------------------------------------------------
// Nodes. Each has a checking `make` that throws CompilerError(internal) on
// ill-typed input; fields are public and const.

/// A scalar constant. Integral and bool values live in int_value (wrapped to
/// the dtype's width; bool is 0/1); float values in float_value, already
/// rounded to the dtype (inf and NaN allowed). Two constants are equal when
/// their dtype and bits are equal (so NaN == NaN, 0.0 != -0.0 structurally).
struct Constant final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Constant;
  const int64_t int_value;
  const double float_value;

  static Expr make_int(int64_t value, DType dtype);
  static Expr make_float(double value, DType dtype);
  static Expr make_bool(bool value);
  /// Converts `value` to `dtype` with the Cast rules.
  static Expr make(double value, DType dtype);
  /// The value as a double (ints converted).
  double as_double() const;

  Constant(DType t, int64_t i, double f);
};

/// buffer[index] (index in elements from the buffer's base pointer). With a
/// mask (a bool expression), the load happens only where the mask is true
/// and yields zero elsewhere. The dtype is the buffer's.
struct Load final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Load;
  const BufferPtr buffer;
  const IndexExpr index;
  const Expr mask;  // may be undefined (unmasked)

  static Expr make(BufferPtr buffer, IndexExpr index, Expr mask = Expr());
  Load(BufferPtr b, IndexExpr i, Expr m);
};

/// An index expression's value as int64 (iota, masks such as x0 < s0).
struct IndexValue final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::IndexValue;
  const IndexExpr index;

  static Expr make(IndexExpr index);
  explicit IndexValue(IndexExpr i);
};

/// A named scalar defined by an earlier stage of the same kernel.
struct LocalRef final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::LocalRef;
  const std::string name;

  static Expr make(std::string name, DType dtype);
  LocalRef(std::string n, DType t);
};

/// value converted to dtype (rules in the file comment). make() rejects a
/// cast to the same dtype; use cast() to get `value` back unchanged instead.
struct Cast final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Cast;
  const Expr value;

  static Expr make(Expr value, DType dtype);
  Cast(Expr v, DType t);
};

struct Unary final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Unary;
  const UnaryOp op;
  const Expr operand;

  static Expr make(UnaryOp op, Expr operand);
  Unary(UnaryOp o, Expr x, DType t);
};

struct Binary final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Binary;
  const BinaryOp op;
  const Expr lhs, rhs;

  static Expr make(BinaryOp op, Expr lhs, Expr rhs);
  Binary(BinaryOp o, Expr a, Expr b);
};

/// A bool-valued comparison of two operands of equal dtype.
struct Compare final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Compare;
  const CompareOp op;
  const Expr lhs, rhs;

  static Expr make(CompareOp op, Expr lhs, Expr rhs);
  Compare(CompareOp o, Expr a, Expr b);
};

/// cond ? then_value : else_value; cond is bool, both values have one dtype.
struct Where final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Where;
  const Expr cond, then_value, else_value;

  static Expr make(Expr cond, Expr then_value, Expr else_value);
  Where(Expr c, Expr a, Expr b);
};

/// Counter-based float32 random number (algorithm in the file comment).
/// seed is an int64 expression (usually a Load from the graph's seed
/// buffer); offset identifies the element (usually its linear index).
struct Random final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Random;
  const RandomKind random_kind;
  const Expr seed;
  const IndexExpr offset;

  static Expr make(RandomKind kind, Expr seed, IndexExpr offset);
  Random(RandomKind k, Expr s, IndexExpr o);
};

// ---------------------------------------------------------------------------
// Short builders for the common cases (all go through the checking makes).

Expr const_int(int64_t value, DType dtype = DType::Int64);
Expr const_float(double value, DType dtype = DType::Float32);
Expr const_bool(bool value);
Expr load(BufferPtr buffer, IndexExpr index, Expr mask = Expr());
/// Cast unless `value` already has `dtype`.
Expr cast(Expr value, DType dtype);
Expr unary(UnaryOp op, Expr x);
Expr binary(BinaryOp op, Expr a, Expr b);
Expr compare(CompareOp op, Expr a, Expr b);
Expr where(Expr cond, Expr a, Expr b);

/// The index leaf indirect(value, size) (semantics in the file comment).
/// `value` must have an integral (non-bool) dtype; `size` must be free of
/// loop variables and, if constant, >= 1 (an empty dimension has no
/// position to clamp to: lowerings refuse it). A constant value folds to the
/// constant position.
IndexExpr indirect(Expr value, IndexExpr size, bool wraps = true);
/// The position an indirect leaf denotes, as an int64 value expression
/// (min(max(v < 0 ? v + size : v, 0), size - 1) with v = cast<int64>(value);
/// without the wrap for a leaf that does not wrap):
/// what the codegens print before an access through the leaf.
Expr indirect_position_value(const IndexIndirect& leaf);

}  // namespace cppi::ir
