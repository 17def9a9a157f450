#include "codegen/c_printer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "codegen/op_tables.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/scalar_convert.h"
#include "support/status.h"

namespace cppi::codegen {

using namespace ir;
using cppi::CompilerError;
using cppi::Error;
using cppi::cat;

// --- SourceWriter -----------------------------------------------------------------------

namespace {

bool is_loop_head(const std::string& s) { return s.rfind("for (", 0) == 0; }
bool is_pragma(const std::string& s) { return s.rfind("CPPI_", 0) == 0 || s.rfind("_Pragma", 0) == 0 || s[0] == '#'; }

}  // namespace

void SourceWriter::line(const std::string& s) {
  if (s.empty()) {
    out_ += "\n";
    return;
  }
  if (is_loop_head(s)) nested_loop();  // a one-line loop
  out_ += std::string(static_cast<size_t>(indent_) * 2, ' ') + s + "\n";
  last_line_ = s;
}

void SourceWriter::open(const std::string& head) {
  const bool loop = is_loop_head(head);
  if (loop) nested_loop();
  const bool pragma_before = !last_line_.empty() && is_pragma(last_line_);
  open_.push_back({out_.size(), indent_, loop, pragma_before});
  out_ += std::string(static_cast<size_t>(indent_) * 2, ' ') + (head.empty() ? "{" : head + " {") + "\n";
  last_line_ = head;
  ++indent_;
}

void SourceWriter::close(const std::string& tail) {
  --indent_;
  if (!open_.empty()) open_.pop_back();
  line(tail);
}

void SourceWriter::nested_loop() {
  auto loop = std::find_if(open_.rbegin(), open_.rend(), [](const Block& b) { return b.is_loop; });
  if (loop == open_.rend() || loop->encloses_loop) return;
  loop->encloses_loop = true;
  if (!loop->pragma_before && !outer_loop_pragma_.empty()) outer_loops_.emplace_back(loop->head_offset, loop->indent);
}

std::string SourceWriter::str() const {
  if (outer_loops_.empty()) return out_;
  std::vector<std::pair<size_t, int>> at = outer_loops_;
  std::sort(at.begin(), at.end());
  std::string text;
  size_t from = 0;
  for (const auto& [offset, indent] : at) {
    text.append(out_, from, offset - from);
    text += std::string(static_cast<size_t>(indent) * 2, ' ') + outer_loop_pragma_ + "\n";
    from = offset;
  }
  text.append(out_, from, std::string::npos);
  return text;
}

void print_kernel_header(SourceWriter& out, const std::string& name, const ir::Kernel& k,
                         const PrintOptions& options, const std::string& schedule) {
  out.line("// kernel: " + name);
  if (!k.origins.empty()) {
    std::string line = "// origins:";
    for (const auto& o : k.origins) line += " " + o;
    out.line(line);
    for (const auto& o : k.origins) {
      auto it = options.origin_source.find(o);
      if (it != options.origin_source.end()) out.line("//   " + o + ": " + it->second);
    }
  }
  out.line("// schedule: " + schedule);
  if (!k.schedule.why.empty()) out.line("// why: " + k.schedule.why);
}

// --- scopes -------------------------------------------------------------------------------

const CValue* ValueScope::find(const Expr& e) const {
  for (const ValueScope* s = this; s; s = s->parent_) {
    auto it = s->table().find(e);
    if (it != s->table().end()) return &it->second;
  }
  return nullptr;
}

void ValueScope::forget_loads_of(const std::string& buffer) {
  Values& values = table();
  for (auto it = values.begin(); it != values.end();) {
    if (reads_buffer(it->first, buffer)) {
      it = values.erase(it);
    } else {
      ++it;
    }
  }
}

bool reads_buffer(const Expr& e, const std::string& buffer) {
  struct Finder : ExprVisitor {
    const std::string& name;
    bool found = false;
    explicit Finder(const std::string& n) : name(n) {}
    void visit(const Load& n) override {
      if (n.buffer->name == name) found = true;
      ExprVisitor::visit(n);
    }
  } finder(buffer);
  finder.walk(e);
  return finder.found;
}

void printer_error(const std::string& target, const std::string& message) {
  throw CompilerError(Error::internal(target + " codegen: " + message));
}

std::string c_identifier(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "_" + out;
  return out;
}

// --- hooks: types, literals, scalar ops ------------------------------------------------------

std::string CPrinterBase::scalar_type(DType t) const { return std::string(dtype_ctype(t)); }

namespace {

std::string int_literal(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  std::string s = std::to_string(v);
  if (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()) s += "LL";
  return s;
}

std::string float_text(double v, bool single) {
  char buf[64];
  std::snprintf(buf, sizeof buf, single ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string CPrinterBase::literal(const Constant& c) const {
  const DType t = c.dtype;
  if (t == DType::Bool) return c.int_value ? "true" : "false";
  if (!is_floating(t)) return int_literal(c.int_value);
  const double v = c.float_value;
  if (t == DType::Float16 || t == DType::BFloat16) {
    const uint16_t bits = t == DType::Float16 ? float_to_half(static_cast<float>(v)) : float_to_bf16(static_cast<float>(v));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s{0x%04x}", t == DType::Float16 ? "cppi_half" : "cppi_bf16", bits);
    return buf;
  }
  const bool single = t == DType::Float32;
  if (std::isnan(v)) return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(v)) {
    std::string inf = single ? "__builtin_inff()" : "__builtin_inf()";
    return v < 0 ? "(-" + inf + ")" : inf;
  }
  std::string s = float_text(v, single);
  if (std::signbit(v)) s = "(" + s + (single ? "f)" : ")");
  else if (single) s += "f";
  return s;
}

std::string CPrinterBase::c_unary(UnaryOp op, DType t, const std::string& x) const {
  const char* tmpl = scalar_unary_template(op, operand_class(t));
  if (!tmpl) throw CompilerError(Error::internal(cat("codegen: no scalar form of ", to_string(op), " on ", dtype_name(t))));
  return expand_template(tmpl, {x}, scalar_type(t));
}

std::string CPrinterBase::c_binary(BinaryOp op, DType t, const std::string& a, const std::string& b) const {
  const char* tmpl = scalar_binary_template(op, operand_class(t));
  if (!tmpl) throw CompilerError(Error::internal(cat("codegen: no scalar form of ", to_string(op), " on ", dtype_name(t))));
  return expand_template(tmpl, {a, b}, scalar_type(t));
}

std::string CPrinterBase::scalar_cast(DType from, DType to, const std::string& x) const {
  if (from == to) return x;
  if (from == DType::Float16 || from == DType::BFloat16) {
    const std::string f = (from == DType::Float16 ? "cppi_half_to_float(" : "cppi_bf16_to_float(") + x + ")";
    return scalar_cast(DType::Float32, to, f);
  }
  if (to == DType::Float16 || to == DType::BFloat16) {
    const std::string f = scalar_cast(from, DType::Float32, x);
    return (to == DType::Float16 ? "cppi_float_to_half(" : "cppi_float_to_bf16(") + f + ")";
  }
  if (to == DType::Bool) return "(" + x + " != 0)";
  if (is_floating(from) && is_integral(to)) {
    // Through int32 or int64 (defined for every float, cppi_float_to_int),
    // then wrapped to a narrower type.
    const DType wide = float_cast_truncates_through(to);
    const std::string converted = "cppi_float_to_int<" + scalar_type(wide) + ">(" + x + ")";
    return wide == to ? converted : "((" + scalar_type(to) + ")" + converted + ")";
  }
  return "((" + scalar_type(to) + ")" + x + ")";
}

// --- index expressions -----------------------------------------------------------------------

namespace {

bool is_positive_constant_or_symbolic(const IndexExpr& e) { return is_positive_monomial(e); }

}  // namespace

std::string CPrinterBase::index(const IndexExpr& e) const {
  return index_text(e, [](const IndexExpr& leaf) -> std::string {
    throw CompilerError(Error::internal(cat("codegen: indirect index ", leaf, " printed without a value scope")));
  });
}

std::string CPrinterBase::index(const IndexExpr& e, ValueScope& scope) {
  std::vector<std::pair<IndexExpr, std::string>> names;
  for (const auto& leaf : indirect_terms(e)) {
    const auto& indirect = *leaf.as<IndexIndirect>();
    if (scope.check_indices()) {
      const std::string size = scalar_value(IndexValue::make(indirect.size), scope).text;
      print_index_check(scalar_value(cast(indirect.value(), DType::Int64), scope).text,
                        indirect.wraps ? "-" + size : "0", size);
    }
    names.emplace_back(leaf, scalar_value(indirect_position_value(indirect), scope).text);
  }
  return index_text(e, [&](const IndexExpr& leaf) {
    for (const auto& [l, name] : names) {
      if (l == leaf) return name;
    }
    throw CompilerError(Error::internal(cat("codegen: no value for ", leaf)));
  });
}

std::string CPrinterBase::index_text(const IndexExpr& e,
                                     const std::function<std::string(const IndexExpr&)>& indirect) const {
  std::function<std::string(const IndexExpr&, bool)> print = [&](const IndexExpr& x, bool atom) -> std::string {
    if (x.kind() == IndexKind::Indirect) return indirect(x);
    if (auto c = x.as<IndexConst>()) return c->value < 0 && atom ? "(" + int_literal(c->value) + ")" : int_literal(c->value);
    if (auto s = x.as<IndexSymbol>()) return c_identifier(s->name);
    if (auto v = x.as<IndexVar>()) return c_identifier(v->name);
    if (auto m = x.as<IndexMul>()) {
      std::string s;
      if (m->coefficient == -1) s = "-";
      else if (m->coefficient != 1) s = int_literal(m->coefficient) + "*";
      for (size_t i = 0; i < m->factors.size(); ++i) s += (i ? "*" : "") + print(m->factors[i], true);
      return atom ? "(" + s + ")" : s;
    }
    if (auto a = x.as<IndexAdd>()) {
      std::string s;
      auto add_term = [&](const std::string& text) {
        if (s.empty()) {
          s = text;
        } else if (text[0] == '-') {
          s += " - " + text.substr(1);
        } else {
          s += " + " + text;
        }
      };
      for (const auto& t : a->terms) add_term(print(t, false));
      if (a->constant != 0) add_term(int_literal(a->constant));
      return atom ? "(" + s + ")" : s;
    }
    if (auto d = x.as<IndexFloorDiv>()) {
      if (prove_nonnegative(d->lhs, ranges_) && is_positive_constant_or_symbolic(d->rhs)) {
        return nonnegative_div(print(d->lhs, true), d->rhs, print(d->rhs, true));
      }
      return "cppi_floordiv_i64(" + print(d->lhs, false) + ", " + print(d->rhs, false) + ")";
    }
    if (auto d = x.as<IndexMod>()) {
      if (prove_nonnegative(d->lhs, ranges_) && is_positive_constant_or_symbolic(d->rhs)) {
        return nonnegative_mod(print(d->lhs, true), d->rhs, print(d->rhs, true));
      }
      return "cppi_mod_i64(" + print(d->lhs, false) + ", " + print(d->rhs, false) + ")";
    }
    if (auto m = x.as<IndexMin>()) return "cppi_min_i<int64_t>(" + print(m->lhs, false) + ", " + print(m->rhs, false) + ")";
    if (auto m = x.as<IndexMax>()) return "cppi_max_i<int64_t>(" + print(m->lhs, false) + ", " + print(m->rhs, false) + ")";
    throw CompilerError(Error::internal("codegen: unknown index expression kind"));
  };
  return print(e, false);
}

// --- sin and cos of one argument --------------------------------------------------------------

ExprSet sincos_operands(const std::vector<Expr>& roots) {
  ExprSet sins, coss, out;
  for (const Expr& e : post_order(roots)) {
    auto u = e.as<Unary>();
    if (u && u->op == UnaryOp::Sin) sins.insert(u->operand);
    if (u && u->op == UnaryOp::Cos) coss.insert(u->operand);
  }
  for (const Expr& x : sins) {
    if (coss.count(x)) out.insert(x);
  }
  return out;
}

ExprSet sincos_operands(const Kernel& k) {
  ExprSet out;
  for (const auto& st : k.stages) {
    for (const Expr& v : stage_values(st)) {
      for (const Expr& x : sincos_operands({v})) out.insert(x);
    }
  }
  return out;
}

bool CPrinterBase::is_sincos_half(const Expr& e, const ValueScope& scope) const {
  auto u = e.as<Unary>();
  if (!u || (u->op != UnaryOp::Sin && u->op != UnaryOp::Cos)) return false;
  return sincos_args_.count(u->operand) > 0 || scope.sincos_operand(u->operand);
}

CValue CPrinterBase::print_sincos(const Expr& e, const CValue& x, const std::string& type, ValueScope& scope) {
  auto u = e.as<Unary>();
  const std::string s = fresh_name(), c = fresh_name();
  out_.line(cat(type, " ", s, ", ", c, ";"));
  out_.line(cat("cppi_sincos(", x.text, ", &", s, ", &", c, ");"));
  const bool sin = u->op == UnaryOp::Sin;
  CValue other{sin ? c : s, e.dtype(), x.vector};
  scope.add(Unary::make(sin ? UnaryOp::Cos : UnaryOp::Sin, u->operand), other);
  return CValue{sin ? s : c, e.dtype(), x.vector};
}

// --- scalar values ---------------------------------------------------------------------------

std::string CPrinterBase::fresh_name(const std::string& prefix) { return prefix + std::to_string(next_name_++); }

std::string CPrinterBase::declare(const std::string& type, const std::string& text) {
  std::string name = fresh_name();
  out_.line("const " + type + " " + name + " = " + text + ";");
  return name;
}

CValue CPrinterBase::scalar_value(const Expr& e, ValueScope& scope) {
  if (auto c = e.as<Constant>()) return CValue{literal(*c), e.dtype()};
  if (auto l = e.as<LocalRef>()) return local_value(*l);
  if (const CValue* v = scope.find(e)) return *v;
  if (std::optional<CValue> fused = fused_value(e, scope)) {
    scope.add(e, *fused);
    return *fused;
  }
  CValue v{declare(scalar_type(e.dtype()), scalar_node(e, scope)), e.dtype()};
  scope.add(e, v);
  return v;
}

std::string CPrinterBase::scalar_node(const Expr& e, ValueScope& scope) {
  auto operand = [&](const Expr& x) { return scalar_value(x, scope).text; };
  switch (e.kind()) {
    case ExprKind::Constant:
    case ExprKind::LocalRef: break;  // handled inline by scalar_value
    case ExprKind::Load: {
      auto n = e.as<Load>();
      if (!n->mask.defined()) return pointer_name(n->buffer->name) + "[" + index(n->index, scope) + "]";
      ValueScope unchecked(scope, ValueScope::UncheckedIndices{});
      const std::string access = pointer_name(n->buffer->name) + "[" + index(n->index, unchecked) + "]";
      const std::string zero = literal(*Constant::make(0, n->dtype).as<Constant>());
      return "(" + scalar_value(n->mask, unchecked).text + " ? " + access + " : " + zero + ")";
    }
    case ExprKind::IndexValue: return "(" + index(e.as<IndexValue>()->index, scope) + ")";
    case ExprKind::Cast: {
      auto n = e.as<Cast>();
      return scalar_cast(n->value.dtype(), n->dtype, operand(n->value));
    }
    case ExprKind::Unary: {
      auto n = e.as<Unary>();
      return scalar_unary(n->op, n->operand.dtype(), operand(n->operand), scope);
    }
    case ExprKind::Binary: {
      auto n = e.as<Binary>();
      const std::string a = operand(n->lhs), b = operand(n->rhs);
      return scalar_binary(n->op, n->lhs.dtype(), a, b, scope);
    }
    case ExprKind::Compare: {
      auto n = e.as<Compare>();
      const std::string a = operand(n->lhs), b = operand(n->rhs);
      return "(" + a + " " + c_operator(n->op) + " " + b + ")";
    }
    case ExprKind::Where: {
      auto n = e.as<Where>();
      const std::string c = operand(n->cond), a = operand(n->then_value), b = operand(n->else_value);
      return "(" + c + " ? " + a + " : " + b + ")";
    }
    case ExprKind::Random: {
      auto n = e.as<Random>();
      const std::string seed = operand(n->seed);
      return std::string(n->random_kind == RandomKind::Uniform ? "cppi_rand(" : "cppi_randn(") + seed + ", " +
             index(n->offset, scope) + ")";
    }
  }
  throw CompilerError(Error::internal(cat("codegen: cannot print ", to_string(e.kind()))));
}

// The integer helpers every C-family target pastes into generated code; the
// target's support text defines CPPI_INLINE first.
const char* c_integer_support_source() {
  return R"cppi_support(
// Integer arithmetic wraps (two's complement), as the loop IR defines it.
template <class T> struct cppi_unsigned_of { typedef T type; };
template <> struct cppi_unsigned_of<int8_t> { typedef uint8_t type; };
template <> struct cppi_unsigned_of<int16_t> { typedef uint16_t type; };
template <> struct cppi_unsigned_of<int32_t> { typedef uint32_t type; };
template <> struct cppi_unsigned_of<int64_t> { typedef uint64_t type; };
template <class T> CPPI_INLINE T cppi_wadd(T a, T b) {
  typedef typename cppi_unsigned_of<T>::type U;
  return (T)(U)((U)a + (U)b);
}
template <class T> CPPI_INLINE T cppi_wsub(T a, T b) {
  typedef typename cppi_unsigned_of<T>::type U;
  return (T)(U)((U)a - (U)b);
}
template <class T> CPPI_INLINE T cppi_wmul(T a, T b) {
  typedef typename cppi_unsigned_of<T>::type U;
  return (T)(U)((U)a * (U)b);
}
// Python // and % on int64 index values (divisor > 0 is not assumed).
CPPI_INLINE int64_t cppi_floordiv_i64(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
CPPI_INLINE int64_t cppi_mod_i64(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Integer value ops (divisor != 0 is the lowering's job; MIN / -1 wraps).
template <class T> CPPI_INLINE T cppi_int_floordiv(T a, T b) {
  if (b == (T)-1) return cppi_wsub<T>((T)0, a);
  const T q = (T)(a / b);
  return (a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <class T> CPPI_INLINE T cppi_int_truncdiv(T a, T b) {
  if (b == (T)-1) return cppi_wsub<T>((T)0, a);
  return (T)(a / b);
}
template <class T> CPPI_INLINE T cppi_int_fmod(T a, T b) {
  if (b == (T)-1) return (T)0;
  return (T)(a % b);
}
template <class T> CPPI_INLINE T cppi_int_remainder(T a, T b) {
  if (b == (T)-1) return (T)0;
  const T r = (T)(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <class T> CPPI_INLINE T cppi_int_pow(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return (T)1;
    if (base == -1) return (exp % 2 == 0) ? (T)1 : (T)-1;
    return (T)0;
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = cppi_wmul<T>(result, base);
    base = cppi_wmul<T>(base, base);
    exp = (T)(exp >> 1);
  }
  return result;
}
template <class T> CPPI_INLINE T cppi_int_shl(T a, T b) {
  typedef typename cppi_unsigned_of<T>::type U;
  return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)0 : (T)(U)((U)a << b);
}
template <class T> CPPI_INLINE T cppi_int_shr(T a, T b) {
  return (b < 0 || b >= (T)(sizeof(T) * 8)) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);
}
template <class T> CPPI_INLINE T cppi_int_abs(T a) { return a < 0 ? cppi_wsub<T>((T)0, a) : a; }
template <class T> CPPI_INLINE T cppi_sign(T a) { return (T)((T(0) < a) - (a < T(0))); }
)cppi_support";
}

// Float floor division and remainder exactly as ATen's div_floor_floating
// and remainder kernels compute them; the target defines cppi_fmod,
// cppi_floor and cppi_copysign first.
const char* c_float_division_support_source() {
  return R"cppi_support(
// Float floor division and remainder exactly as ATen's div_floor_floating
// and remainder kernels compute them.
template <class T> CPPI_INLINE T cppi_float_floordiv(T a, T b) {
  if (b == 0) return a / b;
  const T m = cppi_fmod(a, b);
  T div = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
  if (div == 0) return cppi_copysign((T)0, a / b);
  T fl = cppi_floor(div);
  if (div - fl > (T)0.5) fl += 1;
  return fl;
}
template <class T> CPPI_INLINE T cppi_float_remainder(T a, T b) {
  T m = cppi_fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}
)cppi_support";
}

// Philox4x32-10 as the loop IR's Random defines it (lowering/ir/expr.h; the
// reference is lowering/ir/interpreter.cpp). The target defines cppi_mul_hilo
// (for uint32_t and any vector of them it uses) and cppi_box_muller first.
// The integer steps and the one conversion are exact, so rand is
// bit-identical on every target; randn rounds as the target's log, sqrt and
// cos do.
const char* c_philox_support_source() {
  return R"cppi_support(
// Philox4x32-10 (Salmon et al. 2011, as Random123 and Triton): key = seed,
// counter = (offset low word, offset high word, 0, 0). The rounds take
// uint32_t words or vectors of them (one counter per lane).
template <class U>
CPPI_INLINE void cppi_philox_rounds(U& c0, U& c1, U& c2, U& c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    U hi0, lo0, hi2, lo2;
    cppi_mul_hilo(0xD2511F53u, c0, hi0, lo0);
    cppi_mul_hilo(0xCD9E8D57u, c2, hi2, lo2);
    c0 = hi2 ^ c1 ^ k0;
    c1 = lo2;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
CPPI_INLINE void cppi_philox(int64_t seed, int64_t offset, uint32_t out[4]) {
  const uint64_t s = (uint64_t)seed, o = (uint64_t)offset;
  uint32_t c0 = (uint32_t)o, c1 = (uint32_t)(o >> 32), c2 = 0, c3 = 0;
  cppi_philox_rounds(c0, c1, c2, c3, (uint32_t)s, (uint32_t)(s >> 32));
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
// A word as a float in [0, 1): i = (int32)u folded onto [0, 2^31) (i < 0:
// -i - 1, spelled ~i), times ~2^-31 (the largest result is 1 - 2^-24).
CPPI_INLINE float cppi_uint_to_uniform(uint32_t u) {
  const int32_t i = (int32_t)u;
  return (float)(i ^ (i >> 31)) * 4.6566127342e-10f;
}
CPPI_INLINE float cppi_rand(int64_t seed, int64_t offset) {
  uint32_t w[4];
  cppi_philox(seed, offset, w);
  return cppi_uint_to_uniform(w[0]);
}
CPPI_INLINE float cppi_randn(int64_t seed, int64_t offset) {
  uint32_t w[4];
  cppi_philox(seed, offset, w);
  return cppi_box_muller(cppi_uint_to_uniform(w[0]), cppi_uint_to_uniform(w[1]));
}
)cppi_support";
}

}  // namespace cppi::codegen
