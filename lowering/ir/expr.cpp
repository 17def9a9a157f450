#include "lowering/ir/expr.h"

#include <cstring>
#include <functional>
#include <set>
#include <utility>

#include "lowering/ir/scalar_convert.h"
#include "support/status.h"

namespace cppi::ir {

namespace {

size_t mix(size_t seed, size_t v) { return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }
size_t seed_of(ExprKind k, DType t) { return mix(mix(0xe7a1, static_cast<size_t>(k)), static_cast<size_t>(t)); }

[[noreturn]] void fail(const std::string& message) { throw CompilerError(Error::internal(message)); }

void require(const Expr& e, const char* node, const char* what) {
  if (!e.defined()) fail(cat(node, ": null ", what));
}

bool is_number(DType t) { return t != DType::Bool && !is_reduced_float(t); }

void reject_reduced(const char* node, const char* op, DType t) {
  if (is_reduced_float(t)) {
    fail(cat(node, " ", op, ": operand is ", dtype_name(t),
             "; reduced floats are storage types, cast to float32 first"));
  }
}

uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

}  // namespace

const char* to_string(ExprKind k) {
  switch (k) {
#define CPPI_EXPR_KIND_NAME(Name) \
  case ExprKind::Name: return #Name;
    CPPI_FOR_EACH_EXPR_NODE(CPPI_EXPR_KIND_NAME)
#undef CPPI_EXPR_KIND_NAME
  }
  return "?";
}

const char* to_string(UnaryOp op) {
  switch (op) {
#define CPPI_UNARY_NAME(Name, name, typing) \
  case UnaryOp::Name: return name;
    CPPI_FOR_EACH_UNARY_OP(CPPI_UNARY_NAME)
#undef CPPI_UNARY_NAME
  }
  return "?";
}

const char* to_string(BinaryOp op) {
  switch (op) {
#define CPPI_BINARY_NAME(Name, name, typing) \
  case BinaryOp::Name: return name;
    CPPI_FOR_EACH_BINARY_OP(CPPI_BINARY_NAME)
#undef CPPI_BINARY_NAME
  }
  return "?";
}

const char* to_string(CompareOp op) {
  switch (op) {
#define CPPI_COMPARE_NAME(Name, name, c_op) \
  case CompareOp::Name: return name;
    CPPI_FOR_EACH_COMPARE_OP(CPPI_COMPARE_NAME)
#undef CPPI_COMPARE_NAME
  }
  return "?";
}

const char* c_operator(CompareOp op) {
  switch (op) {
#define CPPI_COMPARE_C(Name, name, c_op) \
  case CompareOp::Name: return c_op;
    CPPI_FOR_EACH_COMPARE_OP(CPPI_COMPARE_C)
#undef CPPI_COMPARE_C
  }
  return "?";
}

const char* to_string(RandomKind k) {
  switch (k) {
#define CPPI_RANDOM_NAME(Name, name) \
  case RandomKind::Name: return name;
    CPPI_FOR_EACH_RANDOM_KIND(CPPI_RANDOM_NAME)
#undef CPPI_RANDOM_NAME
  }
  return "?";
}

UnaryTyping typing(UnaryOp op) {
  switch (op) {
#define CPPI_UNARY_TYPING(Name, name, typing) \
  case UnaryOp::Name: return UnaryTyping::typing;
    CPPI_FOR_EACH_UNARY_OP(CPPI_UNARY_TYPING)
#undef CPPI_UNARY_TYPING
  }
  return UnaryTyping::Number;
}

BinaryTyping typing(BinaryOp op) {
  switch (op) {
#define CPPI_BINARY_TYPING(Name, name, typing) \
  case BinaryOp::Name: return BinaryTyping::typing;
    CPPI_FOR_EACH_BINARY_OP(CPPI_BINARY_TYPING)
#undef CPPI_BINARY_TYPING
  }
  return BinaryTyping::Number;
}

// --- Constant ------------------------------------------------------------------

Constant::Constant(DType t, int64_t i, double f)
    : ExprNode(kKind, t, mix(mix(seed_of(kKind, t), std::hash<int64_t>()(i)), std::hash<uint64_t>()(double_bits(f)))),
      int_value(i),
      float_value(f) {}

Expr Constant::make_int(int64_t value, DType dtype) {
  if (!is_integral(dtype, /*include_bool=*/true)) {
    fail(cat("Constant::make_int: ", dtype_name(dtype), " is not integral"));
  }
  return Expr(std::make_shared<Constant>(dtype, wrap_to_int_dtype(value, dtype), 0.0));
}

Expr Constant::make_float(double value, DType dtype) {
  if (!is_floating(dtype)) fail(cat("Constant::make_float: ", dtype_name(dtype), " is not a float type"));
  return Expr(std::make_shared<Constant>(dtype, 0, round_to_float_dtype(value, dtype)));
}

Expr Constant::make_bool(bool value) { return make_int(value ? 1 : 0, DType::Bool); }

Expr Constant::make(double value, DType dtype) {
  if (is_floating(dtype)) return make_float(value, dtype);
  if (dtype == DType::Bool) return make_bool(value != 0 || std::isnan(value));
  return make_int(float_to_int64(value), dtype);
}

double Constant::as_double() const {
  return is_floating(dtype) ? float_value : static_cast<double>(int_value);
}

// --- Load, IndexValue, LocalRef ------------------------------------------------

Load::Load(BufferPtr b, IndexExpr i, Expr m)
    : ExprNode(kKind, b->dtype,
               mix(mix(mix(seed_of(kKind, b->dtype), std::hash<std::string>()(b->name)), i.hash()), m.hash())),
      buffer(std::move(b)),
      index(std::move(i)),
      mask(std::move(m)) {}

Expr Load::make(BufferPtr buffer, IndexExpr index, Expr mask) {
  if (!buffer) fail("Load: null buffer");
  if (!index.defined()) fail(cat("Load of ", buffer->name, ": null index"));
  if (mask.defined() && mask.dtype() != DType::Bool) {
    fail(cat("Load of ", buffer->name, ": mask is ", dtype_name(mask.dtype()), ", not bool"));
  }
  return Expr(std::make_shared<Load>(std::move(buffer), std::move(index), std::move(mask)));
}

IndexValue::IndexValue(IndexExpr i)
    : ExprNode(kKind, DType::Int64, mix(seed_of(kKind, DType::Int64), i.hash())), index(std::move(i)) {}

Expr IndexIndirect::value() const { return Expr(value_node); }

Expr indirect_position_value(const IndexIndirect& leaf) {
  Expr v = cast(leaf.value(), DType::Int64);
  Expr size = IndexValue::make(leaf.size);
  Expr wrapped = leaf.wraps ? where(compare(CompareOp::Lt, v, const_int(0)), binary(BinaryOp::Add, v, size), v) : v;
  Expr last = IndexValue::make(leaf.size - 1);
  return binary(BinaryOp::Minimum, binary(BinaryOp::Maximum, wrapped, const_int(0)), last);
}

Expr IndexValue::make(IndexExpr index) {
  if (!index.defined()) fail("IndexValue: null index");
  return Expr(std::make_shared<IndexValue>(std::move(index)));
}

LocalRef::LocalRef(std::string n, DType t)
    : ExprNode(kKind, t, mix(seed_of(kKind, t), std::hash<std::string>()(n))), name(std::move(n)) {}

Expr LocalRef::make(std::string name, DType dtype) {
  if (name.empty()) fail("LocalRef: empty name");
  return Expr(std::make_shared<LocalRef>(std::move(name), dtype));
}

// --- Cast, Unary, Binary, Compare, Where, Random --------------------------------

Cast::Cast(Expr v, DType t) : ExprNode(kKind, t, mix(seed_of(kKind, t), v.hash())), value(std::move(v)) {}

Expr Cast::make(Expr value, DType dtype) {
  require(value, "Cast", "value");
  if (value.dtype() == dtype) fail(cat("Cast to the same dtype ", dtype_name(dtype), " (use cast())"));
  return Expr(std::make_shared<Cast>(std::move(value), dtype));
}

Unary::Unary(UnaryOp o, Expr x, DType t)
    : ExprNode(kKind, t, mix(mix(seed_of(kKind, t), static_cast<size_t>(o)), x.hash())), op(o), operand(std::move(x)) {}

Expr Unary::make(UnaryOp op, Expr x) {
  require(x, "Unary", "operand");
  DType t = x.dtype();
  reject_reduced("Unary", to_string(op), t);
  bool ok = false;
  DType result = t;
  switch (typing(op)) {
    case UnaryTyping::Number: ok = is_number(t); break;
    case UnaryTyping::Float: ok = is_floating(t); break;
    case UnaryTyping::Bool: ok = t == DType::Bool; break;
    case UnaryTyping::IntOrBool: ok = is_integral(t, /*include_bool=*/true); break;
    case UnaryTyping::FloatPredicate:
      ok = is_floating(t);
      result = DType::Bool;
      break;
  }
  if (!ok) fail(cat("Unary ", to_string(op), ": operand type ", dtype_name(t), " not accepted"));
  return Expr(std::make_shared<Unary>(op, std::move(x), result));
}

Binary::Binary(BinaryOp o, Expr a, Expr b)
    : ExprNode(kKind, a.dtype(), mix(mix(mix(seed_of(kKind, a.dtype()), static_cast<size_t>(o)), a.hash()), b.hash())),
      op(o),
      lhs(std::move(a)),
      rhs(std::move(b)) {}

Expr Binary::make(BinaryOp op, Expr a, Expr b) {
  require(a, "Binary", "lhs");
  require(b, "Binary", "rhs");
  if (a.dtype() != b.dtype()) {
    fail(cat("Binary ", to_string(op), ": operand types differ (", dtype_name(a.dtype()), " vs ",
             dtype_name(b.dtype()), "); insert a Cast"));
  }
  DType t = a.dtype();
  reject_reduced("Binary", to_string(op), t);
  bool ok = false;
  switch (typing(op)) {
    case BinaryTyping::Number: ok = is_number(t); break;
    case BinaryTyping::Float: ok = is_floating(t); break;
    case BinaryTyping::Ordered: ok = true; break;
    case BinaryTyping::Bool: ok = t == DType::Bool; break;
    case BinaryTyping::IntOrBool: ok = is_integral(t, /*include_bool=*/true); break;
    case BinaryTyping::Int: ok = is_integral(t); break;
  }
  if (!ok) fail(cat("Binary ", to_string(op), ": operand type ", dtype_name(t), " not accepted"));
  return Expr(std::make_shared<Binary>(op, std::move(a), std::move(b)));
}

Compare::Compare(CompareOp o, Expr a, Expr b)
    : ExprNode(kKind, DType::Bool,
               mix(mix(mix(seed_of(kKind, DType::Bool), static_cast<size_t>(o)), a.hash()), b.hash())),
      op(o),
      lhs(std::move(a)),
      rhs(std::move(b)) {}

Expr Compare::make(CompareOp op, Expr a, Expr b) {
  require(a, "Compare", "lhs");
  require(b, "Compare", "rhs");
  if (a.dtype() != b.dtype()) {
    fail(cat("Compare ", to_string(op), ": operand types differ (", dtype_name(a.dtype()), " vs ",
             dtype_name(b.dtype()), "); insert a Cast"));
  }
  reject_reduced("Compare", to_string(op), a.dtype());
  return Expr(std::make_shared<Compare>(op, std::move(a), std::move(b)));
}

Where::Where(Expr c, Expr a, Expr b)
    : ExprNode(kKind, a.dtype(), mix(mix(mix(seed_of(kKind, a.dtype()), c.hash()), a.hash()), b.hash())),
      cond(std::move(c)),
      then_value(std::move(a)),
      else_value(std::move(b)) {}

Expr Where::make(Expr c, Expr a, Expr b) {
  require(c, "Where", "condition");
  require(a, "Where", "then value");
  require(b, "Where", "else value");
  if (c.dtype() != DType::Bool) fail(cat("Where: condition is ", dtype_name(c.dtype()), ", not bool"));
  if (a.dtype() != b.dtype()) {
    fail(cat("Where: branch types differ (", dtype_name(a.dtype()), " vs ", dtype_name(b.dtype()), ")"));
  }
  return Expr(std::make_shared<Where>(std::move(c), std::move(a), std::move(b)));
}

Random::Random(RandomKind k, Expr s, IndexExpr o)
    : ExprNode(kKind, DType::Float32,
               mix(mix(mix(seed_of(kKind, DType::Float32), static_cast<size_t>(k)), s.hash()), o.hash())),
      random_kind(k),
      seed(std::move(s)),
      offset(std::move(o)) {}

Expr Random::make(RandomKind kind, Expr seed, IndexExpr offset) {
  require(seed, "Random", "seed");
  if (seed.dtype() != DType::Int64) fail(cat("Random: seed is ", dtype_name(seed.dtype()), ", not int64"));
  if (!offset.defined()) fail("Random: null offset");
  return Expr(std::make_shared<Random>(kind, std::move(seed), std::move(offset)));
}

// --- structural equality -------------------------------------------------------

namespace {

class EqualityChecker {
 public:
  bool equal(const Expr& a, const Expr& b) {
    if (a.same_as(b)) return true;
    if (!a.defined() || !b.defined()) return false;
    if (a.hash() != b.hash() || a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
    auto key = std::make_pair(a.get(), b.get());
    if (proven_.count(key)) return true;
    bool eq = fields_equal(a, b);
    if (eq) proven_.insert(key);
    return eq;
  }

 private:
  bool fields_equal(const Expr& a, const Expr& b) {
    switch (a.kind()) {
      case ExprKind::Constant: {
        auto x = a.as<Constant>(), y = b.as<Constant>();
        return x->int_value == y->int_value && double_bits(x->float_value) == double_bits(y->float_value);
      }
      case ExprKind::Load: {
        auto x = a.as<Load>(), y = b.as<Load>();
        return x->buffer->name == y->buffer->name && x->index == y->index && equal(x->mask, y->mask);
      }
      case ExprKind::IndexValue: return a.as<IndexValue>()->index == b.as<IndexValue>()->index;
      case ExprKind::LocalRef: return a.as<LocalRef>()->name == b.as<LocalRef>()->name;
      case ExprKind::Cast: return equal(a.as<Cast>()->value, b.as<Cast>()->value);
      case ExprKind::Unary: {
        auto x = a.as<Unary>(), y = b.as<Unary>();
        return x->op == y->op && equal(x->operand, y->operand);
      }
      case ExprKind::Binary: {
        auto x = a.as<Binary>(), y = b.as<Binary>();
        return x->op == y->op && equal(x->lhs, y->lhs) && equal(x->rhs, y->rhs);
      }
      case ExprKind::Compare: {
        auto x = a.as<Compare>(), y = b.as<Compare>();
        return x->op == y->op && equal(x->lhs, y->lhs) && equal(x->rhs, y->rhs);
      }
      case ExprKind::Where: {
        auto x = a.as<Where>(), y = b.as<Where>();
        return equal(x->cond, y->cond) && equal(x->then_value, y->then_value) &&
               equal(x->else_value, y->else_value);
      }
      case ExprKind::Random: {
        auto x = a.as<Random>(), y = b.as<Random>();
        return x->random_kind == y->random_kind && equal(x->seed, y->seed) && x->offset == y->offset;
      }
    }
    return false;
  }

  std::set<std::pair<const ExprNode*, const ExprNode*>> proven_;
};

}  // namespace

bool structurally_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  EqualityChecker checker;
  return checker.equal(a, b);
}

// --- builders ------------------------------------------------------------------

Expr const_int(int64_t value, DType dtype) { return Constant::make_int(value, dtype); }
Expr const_float(double value, DType dtype) { return Constant::make_float(value, dtype); }
Expr const_bool(bool value) { return Constant::make_bool(value); }
Expr load(BufferPtr buffer, IndexExpr index, Expr mask) {
  return Load::make(std::move(buffer), std::move(index), std::move(mask));
}
Expr cast(Expr value, DType dtype) {
  if (value.defined() && value.dtype() == dtype) return value;
  return Cast::make(std::move(value), dtype);
}
Expr unary(UnaryOp op, Expr x) { return Unary::make(op, std::move(x)); }
Expr binary(BinaryOp op, Expr a, Expr b) { return Binary::make(op, std::move(a), std::move(b)); }
Expr compare(CompareOp op, Expr a, Expr b) { return Compare::make(op, std::move(a), std::move(b)); }
Expr where(Expr cond, Expr a, Expr b) { return Where::make(std::move(cond), std::move(a), std::move(b)); }

}  // namespace cppi::ir
