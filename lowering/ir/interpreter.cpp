#include "lowering/ir/interpreter.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/scalar_convert.h"

namespace cppi::ir {

namespace {

[[noreturn]] void fail(const std::string& message) { throw CompilerError(Error::invalid_input(message)); }

// --- scalars ---------------------------------------------------------------------------

ScalarValue of_int(int64_t v, DType t) {
  ScalarValue s;
  s.dtype = t;
  s.i = wrap_to_int_dtype(v, t);
  return s;
}

ScalarValue of_float(double v, DType t) {
  ScalarValue s;
  s.dtype = t;
  s.f = round_to_float_dtype(v, t);
  return s;
}

ScalarValue of_bool(bool b) { return of_int(b ? 1 : 0, DType::Bool); }

ScalarValue zero_of(DType t) { return is_floating(t) ? of_float(0, t) : of_int(0, t); }

int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

ScalarValue cast_value(const ScalarValue& v, DType to) {
  if (is_floating(to)) return of_float(v.as_double(), to);
  if (to == DType::Bool) return of_bool(is_floating(v.dtype) ? (v.f != 0 || std::isnan(v.f)) : v.i != 0);
  if (is_floating(v.dtype)) return of_int(float_to_int64(std::trunc(v.f)), to);
  return of_int(v.i, to);
}

// --- memory ----------------------------------------------------------------------------

template <typename T>
T read_as(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void write_as(void* base, int64_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

ScalarValue read_element(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::Bool: return of_bool(read_as<uint8_t>(base, i) != 0);
    case DType::UInt8: return of_int(read_as<uint8_t>(base, i), t);
    case DType::Int8: return of_int(read_as<int8_t>(base, i), t);
    case DType::Int16: return of_int(read_as<int16_t>(base, i), t);
    case DType::Int32: return of_int(read_as<int32_t>(base, i), t);
    case DType::Int64: return of_int(read_as<int64_t>(base, i), t);
    case DType::Float16: return of_float(half_to_float(read_as<uint16_t>(base, i)), t);
    case DType::BFloat16: return of_float(bf16_to_float(read_as<uint16_t>(base, i)), t);
    case DType::Float32: return of_float(read_as<float>(base, i), t);
    case DType::Float64: return of_float(read_as<double>(base, i), t);
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: break;  // storage only: no kernel computes on them
  }
  throw CompilerError(Error::internal(cat("interpreter: no kernel reads ", dtype_name(t))));
}

void write_element(void* base, DType t, int64_t i, const ScalarValue& v) {
  switch (t) {
    case DType::Bool: write_as<uint8_t>(base, i, v.i != 0); return;
    case DType::UInt8: write_as<uint8_t>(base, i, static_cast<uint8_t>(v.i)); return;
    case DType::Int8: write_as<int8_t>(base, i, static_cast<int8_t>(v.i)); return;
    case DType::Int16: write_as<int16_t>(base, i, static_cast<int16_t>(v.i)); return;
    case DType::Int32: write_as<int32_t>(base, i, static_cast<int32_t>(v.i)); return;
    case DType::Int64: write_as<int64_t>(base, i, v.i); return;
    case DType::Float16: write_as<uint16_t>(base, i, float_to_half(static_cast<float>(v.f))); return;
    case DType::BFloat16: write_as<uint16_t>(base, i, float_to_bf16(static_cast<float>(v.f))); return;
    case DType::Float32: write_as<float>(base, i, static_cast<float>(v.f)); return;
    case DType::Float64: write_as<double>(base, i, v.f); return;
    case DType::Float8E4M3FN:
    case DType::Float8E5M2: break;
  }
  throw CompilerError(Error::internal(cat("interpreter: no kernel writes ", dtype_name(t))));
}

// --- math helpers ------------------------------------------------------------------------

double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return NAN;
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  // Giles' approximation, then Newton steps on erf.
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 3; ++i) {
    double err = std::erf(x) - y;
    x -= err / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  }
  return x;
}

double float_floordiv(double a, double b) {  // ATen's div_floor_floating
  if (b == 0) return a / b;
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}

double float_remainder(double a, double b) {  // ATen's remainder for floats
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  int64_t result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return result;
}

int bit_width(DType t) { return dtype_size(t) * 8; }

// --- evaluator -----------------------------------------------------------------------------

class Evaluator : public ExprFunctor<ScalarValue> {
 public:
  Evaluator(const InterpreterArgs& args, IndexBindings* bindings,
            const std::unordered_map<std::string, ScalarValue>* locals)
      : args_(args), bindings_(bindings), locals_(locals) {}

  ScalarValue eval(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    ScalarValue v = dispatch(e);
    memo_.emplace(e.get(), v);
    return v;
  }
  void clear() { memo_.clear(); }
  int64_t index(const IndexExpr& e) {
    return evaluate(e, *bindings_, [&](const IndexIndirect& n) { return eval(n.value()).i; });
  }

  void check_bounds(const std::string& buffer, const IndexExpr& e, int64_t i) const {
    auto it = args_.elements.find(buffer);
    if (it == args_.elements.end() || (i >= 0 && i < it->second)) return;
    std::string where;
    for (const auto& name : free_vars(e)) where += cat(" ", name, "=", bindings_->at(name));
    fail(cat("interpreter: ", buffer, "[", e, "] = ", buffer, "[", i, "] is out of bounds [0, ", it->second,
             ") at", where));
  }

 protected:
  ScalarValue visit(const Constant& n) override {
    return is_floating(n.dtype) ? of_float(n.float_value, n.dtype) : of_int(n.int_value, n.dtype);
  }

  ScalarValue visit(const Load& n) override {
    if (n.mask.defined() && eval(n.mask).i == 0) return zero_of(n.dtype);
    auto it = args_.buffers.find(n.buffer->name);
    if (it == args_.buffers.end() || !it->second) fail(cat("interpreter: no pointer for buffer ", n.buffer->name));
    int64_t i = index(n.index);
    check_bounds(n.buffer->name, n.index, i);
    return read_element(it->second, n.dtype, i);
  }

  ScalarValue visit(const IndexValue& n) override { return of_int(index(n.index), DType::Int64); }

  ScalarValue visit(const LocalRef& n) override {
    if (!locals_) fail(cat("interpreter: no value for local ", n.name));
    auto it = locals_->find(n.name);
    if (it == locals_->end()) fail(cat("interpreter: no value for local ", n.name));
    return it->second;
  }

  ScalarValue visit(const Cast& n) override { return cast_value(eval(n.value), n.dtype); }

  ScalarValue visit(const Unary& n) override {
    ScalarValue x = eval(n.operand);
    DType t = x.dtype;
    if (is_floating(t)) {
      double v = x.f, r = 0;
      switch (n.op) {
        case UnaryOp::Neg: r = -v; break;
        case UnaryOp::Abs: r = std::fabs(v); break;
        case UnaryOp::Sign: r = (0 < v) - (v < 0); break;
        case UnaryOp::Exp: r = std::exp(v); break;
        case UnaryOp::Exp2: r = std::exp2(v); break;
        case UnaryOp::Expm1: r = std::expm1(v); break;
        case UnaryOp::Log: r = std::log(v); break;
        case UnaryOp::Log2: r = std::log2(v); break;
        case UnaryOp::Log10: r = std::log10(v); break;
        case UnaryOp::Log1p: r = std::log1p(v); break;
        case UnaryOp::Sqrt: r = std::sqrt(v); break;
        case UnaryOp::Rsqrt: r = 1.0 / std::sqrt(v); break;
        case UnaryOp::Reciprocal: r = 1.0 / v; break;
        case UnaryOp::Sin: r = std::sin(v); break;
        case UnaryOp::Cos: r = std::cos(v); break;
        case UnaryOp::Tan: r = std::tan(v); break;
        case UnaryOp::Asin: r = std::asin(v); break;
        case UnaryOp::Acos: r = std::acos(v); break;
        case UnaryOp::Atan: r = std::atan(v); break;
        case UnaryOp::Sinh: r = std::sinh(v); break;
        case UnaryOp::Cosh: r = std::cosh(v); break;
        case UnaryOp::Tanh: r = std::tanh(v); break;
        case UnaryOp::Asinh: r = std::asinh(v); break;
        case UnaryOp::Acosh: r = std::acosh(v); break;
        case UnaryOp::Atanh: r = std::atanh(v); break;
        case UnaryOp::Sigmoid: r = 1.0 / (1.0 + std::exp(-v)); break;
        case UnaryOp::Erf: r = std::erf(v); break;
        case UnaryOp::Erfc: r = std::erfc(v); break;
        case UnaryOp::Erfinv: r = erfinv(v); break;
        case UnaryOp::Lgamma: r = std::lgamma(v); break;
        case UnaryOp::Floor: r = std::floor(v); break;
        case UnaryOp::Ceil: r = std::ceil(v); break;
        case UnaryOp::Round: r = std::nearbyint(v); break;
        case UnaryOp::Trunc: r = std::trunc(v); break;
        case UnaryOp::IsNan: return of_bool(std::isnan(v));
        case UnaryOp::IsInf: return of_bool(std::isinf(v));
        case UnaryOp::IsFinite: return of_bool(std::isfinite(v));
        case UnaryOp::SignBit: return of_bool(std::signbit(v));
        case UnaryOp::LogicalNot:
        case UnaryOp::BitwiseNot:
        case UnaryOp::NonzeroDivisor: fail(cat("interpreter: ", to_string(n.op), " on a float"));
      }
      return of_float(r, t);
    }
    int64_t v = x.i;
    switch (n.op) {
      case UnaryOp::Neg: return of_int(wrap_sub(0, v), t);
      case UnaryOp::Abs: return of_int(v < 0 ? wrap_sub(0, v) : v, t);
      case UnaryOp::Sign: return of_int((0 < v) - (v < 0), t);
      case UnaryOp::LogicalNot: return of_bool(v == 0);
      case UnaryOp::BitwiseNot: return t == DType::Bool ? of_bool(v == 0) : of_int(~v, t);
      case UnaryOp::NonzeroDivisor: return v == 0 ? (t == DType::Bool ? of_bool(true) : of_int(1, t)) : x;
      default: fail(cat("interpreter: ", to_string(n.op), " on ", dtype_name(t)));
    }
  }

  ScalarValue visit(const Binary& n) override {
    ScalarValue a = eval(n.lhs), b = eval(n.rhs);
    DType t = a.dtype;
    if (is_floating(t)) {
      double x = a.f, y = b.f, r = 0;
      switch (n.op) {
        case BinaryOp::Add: r = x + y; break;
        case BinaryOp::Sub: r = x - y; break;
        case BinaryOp::Mul: r = x * y; break;
        case BinaryOp::TrueDiv: r = x / y; break;
        case BinaryOp::FloorDiv: r = float_floordiv(x, y); break;
        case BinaryOp::TruncDiv: r = std::trunc(x / y); break;
        case BinaryOp::Fmod: r = std::fmod(x, y); break;
        case BinaryOp::Remainder: r = float_remainder(x, y); break;
        case BinaryOp::Pow: r = std::pow(x, y); break;
        // A tie gives the second operand, as the CPU prelude's cppi_max.
        case BinaryOp::Maximum: r = (std::isnan(x) || std::isnan(y)) ? NAN : (x > y ? x : y); break;
        case BinaryOp::Minimum: r = (std::isnan(x) || std::isnan(y)) ? NAN : (x < y ? x : y); break;
        case BinaryOp::Atan2: r = std::atan2(x, y); break;
        case BinaryOp::Hypot: r = std::hypot(x, y); break;
        case BinaryOp::Copysign: r = std::copysign(x, y); break;
        default: fail(cat("interpreter: ", to_string(n.op), " on ", dtype_name(t)));
      }
      return of_float(r, t);
    }
    int64_t x = a.i, y = b.i;
    auto nonzero = [&] {
      if (y == 0) fail(cat("interpreter: integer ", to_string(n.op), " by zero (undefined in the IR)"));
    };
    switch (n.op) {
      case BinaryOp::Add: return of_int(wrap_add(x, y), t);
      case BinaryOp::Sub: return of_int(wrap_sub(x, y), t);
      case BinaryOp::Mul: return of_int(wrap_mul(x, y), t);
      case BinaryOp::FloorDiv:
      case BinaryOp::TruncDiv: {
        nonzero();
        if (x == std::numeric_limits<int64_t>::min() && y == -1) return of_int(x, t);
        int64_t q = x / y;
        if (n.op == BinaryOp::FloorDiv && (x % y != 0) && ((x < 0) != (y < 0))) --q;
        return of_int(q, t);
      }
      case BinaryOp::Fmod:
      case BinaryOp::Remainder: {
        nonzero();
        if (y == -1) return of_int(0, t);
        int64_t r = x % y;
        if (n.op == BinaryOp::Remainder && r != 0 && ((r < 0) != (y < 0))) r += y;
        return of_int(r, t);
      }
      case BinaryOp::Pow: return of_int(int_pow(x, y), t);
      case BinaryOp::Maximum: return of_int(std::max(x, y), t);
      case BinaryOp::Minimum: return of_int(std::min(x, y), t);
      case BinaryOp::LogicalAnd: return of_bool(x && y);
      case BinaryOp::LogicalOr: return of_bool(x || y);
      case BinaryOp::LogicalXor: return of_bool((x != 0) != (y != 0));
      case BinaryOp::BitwiseAnd: return of_int(x & y, t);
      case BinaryOp::BitwiseOr: return of_int(x | y, t);
      case BinaryOp::BitwiseXor: return of_int(x ^ y, t);
      case BinaryOp::LShift:
        if (y < 0 || y >= bit_width(t)) return of_int(0, t);
        return of_int(static_cast<int64_t>(static_cast<uint64_t>(x) << y), t);
      case BinaryOp::RShift:
        if (y < 0 || y >= bit_width(t)) return of_int(x < 0 ? -1 : 0, t);
        return of_int(x >> y, t);
      default: fail(cat("interpreter: ", to_string(n.op), " on ", dtype_name(t)));
    }
  }

  ScalarValue visit(const Compare& n) override {
    ScalarValue a = eval(n.lhs), b = eval(n.rhs);
    if (is_floating(a.dtype)) return of_bool(compare_values(n.op, a.f, b.f));
    return of_bool(compare_values(n.op, a.i, b.i));
  }

  ScalarValue visit(const Where& n) override {
    ScalarValue c = eval(n.cond);
    ScalarValue a = eval(n.then_value), b = eval(n.else_value);
    return c.i ? a : b;
  }

  ScalarValue visit(const Random& n) override {
    int64_t seed = eval(n.seed).i, offset = index(n.offset);
    float v = n.random_kind == RandomKind::Uniform ? philox_uniform(seed, offset) : philox_normal(seed, offset);
    return of_float(v, DType::Float32);
  }

 private:
  template <typename T>
  static bool compare_values(CompareOp op, T a, T b) {
    switch (op) {
      case CompareOp::Eq: return a == b;
      case CompareOp::Ne: return a != b;
      case CompareOp::Lt: return a < b;
      case CompareOp::Le: return a <= b;
      case CompareOp::Gt: return a > b;
      case CompareOp::Ge: return a >= b;
    }
    return false;
  }

  const InterpreterArgs& args_;
  IndexBindings* bindings_;
  const std::unordered_map<std::string, ScalarValue>* locals_;
  std::unordered_map<const ExprNode*, ScalarValue> memo_;
};

// --- reductions ------------------------------------------------------------------------------

class Accumulator {
 public:
  Accumulator(ReductionKind kind, DType body) : kind_(kind), body_(body) {
    for (const auto& e : reduction_identity(kind, body)) {
      auto c = e.as<Constant>();
      acc_.push_back(is_floating(c->dtype) ? of_float(c->float_value, c->dtype) : of_int(c->int_value, c->dtype));
    }
    if (kind == ReductionKind::ArgMax || kind == ReductionKind::ArgMin) best_ = zero_of(body);
  }

  void add(const ScalarValue& v, int64_t position) {
    ScalarValue& a = acc_[0];
    bool fl = is_floating(body_);
    switch (kind_) {
      case ReductionKind::Sum:
        a = fl ? of_float(a.f + v.f, body_) : of_int(wrap_add(a.i, v.i), body_);
        return;
      case ReductionKind::Prod:
        a = fl ? of_float(a.f * v.f, body_) : of_int(wrap_mul(a.i, v.i), body_);
        return;
      case ReductionKind::Max:
        if (fl) {
          if (std::isnan(v.f) || v.f > a.f) a = v;
        } else if (v.i > a.i) {
          a = v;
        }
        return;
      case ReductionKind::Min:
        if (fl) {
          if (std::isnan(v.f) || v.f < a.f) a = v;
        } else if (v.i < a.i) {
          a = v;
        }
        return;
      case ReductionKind::ArgMax:
      case ReductionKind::ArgMin: {
        bool is_max = kind_ == ReductionKind::ArgMax;
        bool take;
        if (!seen_) {
          take = true;
        } else if (fl) {
          if (std::isnan(best_.f)) {
            take = false;
          } else if (std::isnan(v.f)) {
            take = true;
          } else {
            take = is_max ? v.f > best_.f : v.f < best_.f;
          }
        } else {
          take = is_max ? v.i > best_.i : v.i < best_.i;
        }
        if (take) {
          best_ = v;
          a = of_int(position, DType::Int64);
        }
        seen_ = true;
        return;
      }
      case ReductionKind::Any: a = of_bool(a.i || v.i); return;
      case ReductionKind::All: a = of_bool(a.i && v.i); return;
      case ReductionKind::Welford: {
        ScalarValue &mean = acc_[0], &m2 = acc_[1], &weight = acc_[2];
        weight = of_float(weight.f + 1, body_);
        double delta = v.f - mean.f;
        mean = of_float(mean.f + delta / weight.f, body_);
        m2 = of_float(m2.f + delta * (v.f - mean.f), body_);
        return;
      }
    }
  }

  const std::vector<ScalarValue>& results() const { return acc_; }

 private:
  ReductionKind kind_;
  DType body_;
  std::vector<ScalarValue> acc_;
  ScalarValue best_;
  bool seen_ = false;
};

// --- loops -------------------------------------------------------------------------------------

template <typename F>
void for_each_point(const std::vector<Loop>& loops, size_t depth, IndexBindings* b, F&& f) {
  if (depth == loops.size()) {
    f();
    return;
  }
  const std::string& name = loops[depth].var.as<IndexVar>()->name;
  int64_t extent = evaluate(loops[depth].extent, *b);
  for (int64_t i = 0; i < extent; ++i) {
    (*b)[name] = i;
    for_each_point(loops, depth + 1, b, f);
  }
  b->erase(name);
}

void run_kernel(const Kernel& k, const InterpreterArgs& given) {
  // Kernel-local scratch is the kernel's own: allocate it unless the caller did.
  InterpreterArgs args = given;
  std::vector<std::vector<uint64_t>> scratch;
  for (const auto& b : signature(k).scratch) {
    if (args.buffers.count(b->name)) continue;
    int64_t n = evaluate(b->layout.storage_size(), args.symbols);
    scratch.emplace_back((n * dtype_size(b->dtype) + 7) / 8 + 1);
    args.bind(b->name, scratch.back().data(), n);
  }
  IndexBindings bindings = args.symbols;
  std::unordered_map<std::string, ScalarValue> locals;
  Evaluator ev(args, &bindings, &locals);
  auto pointer = [&](const BufferPtr& b) {
    auto it = args.buffers.find(b->name);
    if (it == args.buffers.end() || !it->second) fail(cat("interpreter: no pointer for buffer ", b->name));
    return it->second;
  };
  auto run_stores = [&](const std::vector<Store>& stores) {
    for (const auto& s : stores) {
      ev.clear();  // a store may feed a later load of the same iteration
      ScalarValue v = ev.eval(stored_value(s));
      int64_t i = ev.index(s.index);
      ev.check_bounds(s.buffer->name, s.index, i);
      write_element(pointer(s.buffer), s.buffer->dtype, i, v);
    }
  };
  for_each_point(k.outer, 0, &bindings, [&] {
    locals.clear();
    for (const auto& stage : k.stages) {
      if (auto r = std::get_if<ReductionStage>(&stage)) {
        Accumulator acc(r->kind, r->body.dtype());
        int64_t position = 0;
        for_each_point(r->loops, 0, &bindings, [&] {
          ev.clear();
          acc.add(ev.eval(r->body), position++);
        });
        for (size_t i = 0; i < r->results.size(); ++i) locals[r->results[i]] = acc.results()[i];
      } else if (auto sc = std::get_if<ScanStage>(&stage)) {
        Accumulator acc(sc->kind, sc->body.dtype());
        int64_t position = 0;
        for_each_point(sc->loops, 0, &bindings, [&] {
          ev.clear();
          acc.add(ev.eval(sc->body), position++);
          locals[sc->result] = acc.results()[0];
          run_stores(sc->stores);
        });
      } else {
        const auto& p = std::get<PointwiseStage>(stage);
        for_each_point(p.loops, 0, &bindings, [&] { run_stores(p.stores); });
      }
    }
  });
}

Status guarded(const std::function<void()>& f) {
  try {
    f();
  } catch (const CompilerError& e) {
    return e.error();
  }
  return Status::success();
}

// --- Philox ------------------------------------------------------------------------------------

void philox_words(int64_t seed, int64_t offset, uint32_t out[4]) {
  uint64_t s = static_cast<uint64_t>(seed), o = static_cast<uint64_t>(offset);
  auto w = philox4x32_10({static_cast<uint32_t>(o), static_cast<uint32_t>(o >> 32), 0, 0}, static_cast<uint32_t>(s),
                         static_cast<uint32_t>(s >> 32));
  for (int i = 0; i < 4; ++i) out[i] = w[i];
}

float uint_to_uniform(uint32_t u) {
  int32_t i;
  std::memcpy(&i, &u, 4);
  return static_cast<float>(i ^ (i >> 31)) * 4.6566127342e-10f;  // i < 0: -i - 1, without overflow
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint64_t pa = static_cast<uint64_t>(0xD2511F53u) * c[0];
    uint64_t pb = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    c = {static_cast<uint32_t>(pb >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(pb),
         static_cast<uint32_t>(pa >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(pa)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

float philox_uniform(int64_t seed, int64_t offset) {
  uint32_t w[4];
  philox_words(seed, offset, w);
  return uint_to_uniform(w[0]);
}

float philox_normal(int64_t seed, int64_t offset) {
  uint32_t w[4];
  philox_words(seed, offset, w);
  float u1 = std::max(1.0e-7f, uint_to_uniform(w[0]));
  float u2 = uint_to_uniform(w[1]);
  float th = 6.283185307179586f * u2;
  float r = std::sqrt(-2.0f * std::log(u1));
  return r * std::cos(th);
}

Status interpret(const Kernel& kernel, const InterpreterArgs& args) {
  return guarded([&] { run_kernel(kernel, args); });
}

Status interpret(const ComputeNode& node, const InterpreterArgs& args) {
  return guarded([&] { run_kernel(*single_node_kernel(node), args); });
}

Status interpret(const NodeList& nodes, const InterpreterArgs& args) {
  for (const auto& n : nodes.nodes) {
    Status s = interpret(n, args);
    if (!s.ok()) return s;
  }
  return Status::success();
}

Expected<ScalarValue> evaluate_expr(const Expr& e, const InterpreterArgs& args, const IndexBindings& vars,
                                    const std::unordered_map<std::string, ScalarValue>& locals) {
  IndexBindings bindings = args.symbols;
  for (const auto& [k, v] : vars) bindings[k] = v;
  Evaluator ev(args, &bindings, &locals);
  try {
    return ev.eval(e);
  } catch (const CompilerError& err) {
    return err.error();
  }
}

}  // namespace cppi::ir
