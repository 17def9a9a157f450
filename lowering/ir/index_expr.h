/// \file
/// Index expressions: the integer arithmetic that describes sizes, strides and
/// the element a load or store touches.
///
/// Semantics
/// - Every index expression denotes an int64. Constant folding wraps on
///   overflow (two's complement); lowerings never build indices that overflow
///   for tensors of fewer than 2^63 elements.
/// - Leaves are integer constants, size symbols, loop variables and indirect
///   positions:
///   * a size symbol ("s0") is a dynamic size from the graph. It is a positive
///     integer (>= 1; torch specialises 0 and 1, so in practice >= 2), fixed
///     for one kernel call, and becomes a kernel argument.
///   * a loop variable ("x0", "r0") ranges over [0, extent) of the loop that
///     binds it. Expressions do not carry the extents; analyses take them as
///     a VarRanges map (index_simplify.h).
///   * indirect(value, size) is a position read from memory (gather,
///     embedding, x[idx], index_put, scatter: Inductor's
///     ops.indirect_indexing). `value` is an integer value expression
///     (expr.h; usually a Load of an index tensor), `size` the extent of the
///     dimension it indexes (free of loop variables). Its value is
///         v = value < 0 ? value + size : value     (negative indices wrap)
///         indirect = min(max(v, 0), size - 1)      (then clamp)
///     so it always lies in [0, size): an access built from in-range
///     coordinates stays inside its buffer whatever the data says. Where
///     eager raises IndexError (value outside [-size, size)), a kernel reads
///     or writes the element at the clamped position instead: the result is
///     unspecified (not an error), but memory safety holds. Analyses treat
///     the leaf as an opaque atom with bounds [0, size - 1]; it depends on
///     the loop variables its value's indices use (free_vars), so an access
///     whose indirect term moves with a loop variable is not affine in it (a
///     gather along that loop).
/// - Operations: + and * (n-ary), floordiv, mod, min, max. Subtraction is
///   a + (-1)*b. floordiv and mod follow Python: a // b = floor(a / b) and
///   a % b = a - b * (a // b), so for b > 0 the remainder is in [0, b) even
///   for negative a. Divisors built by lowerings are positive (constants or
///   products of size symbols); a zero divisor is an error in evaluate().
///   There are no comparisons: masks are value expressions (expr.h) over
///   IndexValue.
/// - Nodes are immutable and shared. Factories keep every expression in a
///   canonical sum-of-products form (constants folded, like terms merged,
///   terms and factors sorted, products of sums expanded, multiples pulled
///   out of floordiv/mod), so structural equality decides equality of
///   polynomials: `x0 + 64*x1 == 64*x1 + x0`. Rules that need variable ranges
///   (e.g. x1 // 4 -> 0 when x1 < 4) live in simplify() (index_simplify.h).
///
/// Printing is stable and C/Python-like: `x0 + 64*x1`, `s0*x1 - 1`,
/// `(x1 // 3)`, `(x1 % 3)`, `min(x0, s0)`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "lowering/ir/index_expr.def"

namespace cppi::ir {

class Expr;
class ExprNode;

enum class IndexKind : uint8_t {
#define CPPI_INDEX_KIND_ENUM(Name) Name,
  CPPI_FOR_EACH_INDEX_NODE(CPPI_INDEX_KIND_ENUM)
#undef CPPI_INDEX_KIND_ENUM
};
const char* to_string(IndexKind kind);

class IndexNode;

/// A handle to an immutable, shared index expression node. Cheap to copy.
/// `==` is structural equality (O(1) on hash mismatch).
class IndexExpr {
 public:
  /// The null expression; most functions reject it.
  IndexExpr() = default;
  /// Integer constants convert implicitly so `x0 + 64 * x1` reads naturally.
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  IndexExpr(T value) : IndexExpr(make_constant(static_cast<int64_t>(value))) {}  // NOLINT
  explicit IndexExpr(std::shared_ptr<const IndexNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const IndexNode* get() const { return node_.get(); }
  const IndexNode* operator->() const { return node_.get(); }
  IndexKind kind() const;
  size_t hash() const;

  /// The node as a concrete class, or nullptr if it is another kind.
  template <typename T>
  const T* as() const;

  /// The value if this is a constant.
  std::optional<int64_t> constant() const;
  bool is_constant(int64_t v) const { return constant() == v; }
  /// Pointer identity (same node object), cheaper than ==.
  bool same_as(const IndexExpr& other) const { return node_ == other.node_; }

  std::string str() const;

 private:
  static IndexExpr make_constant(int64_t value);
  std::shared_ptr<const IndexNode> node_;
};

bool operator==(const IndexExpr& a, const IndexExpr& b);
inline bool operator!=(const IndexExpr& a, const IndexExpr& b) { return !(a == b); }
std::ostream& operator<<(std::ostream& os, const IndexExpr& e);
std::string to_string(const IndexExpr& e);

/// Total order on expressions (kind, then fields), used for canonical sorting.
/// Returns <0, 0, >0.
int compare(const IndexExpr& a, const IndexExpr& b);

struct IndexExprHash {
  size_t operator()(const IndexExpr& e) const { return e.hash(); }
};

// ---------------------------------------------------------------------------
// Node classes. Fields are public and const; build them with the factories
// below, which canonicalise.

class IndexNode {
 public:
  virtual ~IndexNode() = default;
  const IndexKind kind;
  const size_t hash;

 protected:
  IndexNode(IndexKind k, size_t h) : kind(k), hash(h) {}
};

struct IndexConst final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Const;
  const int64_t value;
  explicit IndexConst(int64_t v);
};

/// A positive size symbol (>= 1).
struct IndexSymbol final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Symbol;
  const std::string name;
  explicit IndexSymbol(std::string n);
};

/// A loop variable, ranging over [0, extent) of the loop binding it.
struct IndexVar final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Var;
  const std::string name;
  explicit IndexVar(std::string n);
};

/// terms[0] + ... + terms[n-1] + constant. Canonical: terms are atoms or
/// IndexMul (never constants, never Add), sorted (terms over loop variables
/// first, by variable), no two with the same monomial; n >= 2 or constant != 0.
struct IndexAdd final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Add;
  const std::vector<IndexExpr> terms;
  const int64_t constant;
  IndexAdd(std::vector<IndexExpr> t, int64_t c);
};

/// coefficient * factors[0] * ... Canonical: coefficient != 0, factors are
/// atoms (Symbol, Var, FloorDiv, Mod, Min, Max, Indirect) sorted by compare(),
/// and (factors.size() >= 2 or coefficient != 1).
struct IndexMul final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Mul;
  const int64_t coefficient;
  const std::vector<IndexExpr> factors;
  IndexMul(int64_t c, std::vector<IndexExpr> f);
};

/// floor(lhs / rhs) (Python //).
struct IndexFloorDiv final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::FloorDiv;
  const IndexExpr lhs, rhs;
  IndexFloorDiv(IndexExpr a, IndexExpr b);
};

/// lhs - rhs * (lhs // rhs) (Python %): in [0, rhs) for rhs > 0.
struct IndexMod final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Mod;
  const IndexExpr lhs, rhs;
  IndexMod(IndexExpr a, IndexExpr b);
};

/// Canonical: lhs < rhs in compare() order (min and max are commutative).
struct IndexMin final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Min;
  const IndexExpr lhs, rhs;
  IndexMin(IndexExpr a, IndexExpr b);
};

struct IndexMax final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Max;
  const IndexExpr lhs, rhs;
  IndexMax(IndexExpr a, IndexExpr b);
};

/// indirect(value, size) (semantics in the file comment). Built by
/// ir::indirect() in expr.h, which checks that `value` is an integer
/// expression. `vars`/`symbols`: the loop variables and size symbols used
/// anywhere inside (the value's indices and the size), cached so that
/// free_vars() / free_symbols() need not walk the value.
struct IndexIndirect final : IndexNode {
  static constexpr IndexKind kKind = IndexKind::Indirect;
  const std::shared_ptr<const ExprNode> value_node;
  const IndexExpr size;
  const std::set<std::string> vars;
  const std::set<std::string> symbols;
  /// Negative values count from the end (advanced indexing, index_put). If
  /// false they are out of range, as gather, index_select, embedding and
  /// scatter have them.
  const bool wraps;
  /// The wrapped value expression (an integer Expr; defined in expr.cpp).
  Expr value() const;
  IndexIndirect(std::shared_ptr<const ExprNode> v, IndexExpr s, std::set<std::string> vs, std::set<std::string> ss,
                bool wraps);
};

inline IndexKind IndexExpr::kind() const { return node_->kind; }
inline size_t IndexExpr::hash() const { return node_ ? node_->hash : 0; }
template <typename T>
const T* IndexExpr::as() const {
  return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
}

/// Calls f(node) with the node's concrete class. `f` must accept every node
/// class (generated from index_expr.def), so a new kind is a compile error
/// wherever dispatch() is used with a closed set of overloads.
template <typename F>
decltype(auto) dispatch(const IndexExpr& e, F&& f) {
  switch (e.kind()) {
#define CPPI_INDEX_DISPATCH(Name) \
  case IndexKind::Name: return f(*static_cast<const Index##Name*>(e.get()));
    CPPI_FOR_EACH_INDEX_NODE(CPPI_INDEX_DISPATCH)
#undef CPPI_INDEX_DISPATCH
  }
  return f(*static_cast<const IndexConst*>(e.get()));  // unreachable
}

// ---------------------------------------------------------------------------
// Factories. All return canonical expressions; none needs variable ranges.

IndexExpr index_const(int64_t value);
/// A size symbol; `name` must be non-empty and is the kernel argument's name.
IndexExpr sym(const std::string& name);
/// A loop variable.
IndexExpr var(const std::string& name);

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b);
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b);
IndexExpr operator-(const IndexExpr& a);
IndexExpr operator*(const IndexExpr& a, const IndexExpr& b);
/// Python floor division. Pulls out every term whose coefficient is a multiple
/// of a positive divisor: (a*c + b) // c -> a + b // c (always valid);
/// (2*x) // 4 -> x // 2; (x // 2) // 3 -> x // 6; x // 1 -> x.
/// Throws CompilerError on a constant zero divisor.
IndexExpr floordiv(const IndexExpr& a, const IndexExpr& b);
/// Python modulo. (a*c + b) % c -> b % c; x % 1 -> 0; (x % 6) % 3 -> x % 3.
IndexExpr mod(const IndexExpr& a, const IndexExpr& b);
IndexExpr min(const IndexExpr& a, const IndexExpr& b);
IndexExpr max(const IndexExpr& a, const IndexExpr& b);
/// Product / sum of a list (1 / 0 when empty).
IndexExpr product(const std::vector<IndexExpr>& factors);
IndexExpr sum(const std::vector<IndexExpr>& terms);

// ---------------------------------------------------------------------------
// Queries and rewrites that need no ranges.

/// Values for symbols and loop variables by name.
using IndexBindings = std::unordered_map<std::string, int64_t>;

/// Evaluates with Python floordiv/mod semantics. Throws CompilerError for an
/// unbound name or a zero divisor, and for an indirect leaf (its value needs
/// memory: use the overload below).
int64_t evaluate(const IndexExpr& e, const IndexBindings& bindings);
/// As above; `indirect_value` returns the raw value of an indirect leaf's
/// value expression (the interpreter loads it), which evaluate() then wraps
/// and clamps with indirect_position().
using IndirectValueFn = std::function<int64_t(const IndexIndirect&)>;
int64_t evaluate(const IndexExpr& e, const IndexBindings& bindings, const IndirectValueFn& indirect_value);
/// The position an indirect leaf denotes for a raw `value` in a dimension of
/// `size` >= 1: negative values wrap once (if `wraps`), then the result is
/// clamped into [0, size).
int64_t indirect_position(int64_t value, int64_t size, bool wraps = true);

/// The indirect leaves of `e` (IndexIndirect nodes; not those nested inside
/// their values), each distinct leaf once, in print order. Codegen computes
/// their positions before the access that uses `e`.
std::vector<IndexExpr> indirect_terms(const IndexExpr& e);
bool has_indirect(const IndexExpr& e);
/// Rebuilds `e` with every indirect leaf (outside their values) replaced by
/// f(leaf); returns `e` itself when f returned every leaf unchanged.
IndexExpr map_indirect(const IndexExpr& e, const std::function<IndexExpr(const IndexExpr&)>& f);

/// Replaces symbols and loop variables by name (both share one namespace of
/// names; a name must not be both). The result is canonical but not
/// range-simplified. Reaches into indirect leaves (their size and the indices
/// inside their value).
IndexExpr substitute(const IndexExpr& e, const std::map<std::string, IndexExpr>& replacements);

/// Names of the loop variables / size symbols that occur in `e`, including
/// those inside indirect leaves.
std::set<std::string> free_vars(const IndexExpr& e);
std::set<std::string> free_symbols(const IndexExpr& e);
bool depends_on(const IndexExpr& e, const std::string& name);

/// Positive divisors are positive constants or a positive constant times size
/// symbols; only those get the algebraic floordiv/mod rules.
bool is_positive_monomial(const IndexExpr& e);

/// "Less" for names with a numeric suffix: x2 < x10.
bool natural_name_less(const std::string& a, const std::string& b);

}  // namespace cppi::ir

template <>
struct std::hash<cppi::ir::IndexExpr> {
  size_t operator()(const cppi::ir::IndexExpr& e) const { return e.hash(); }
};
