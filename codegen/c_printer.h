/// \file
/// The target-neutral part of printing loop-IR kernels as C-family source
/// (the role TVM's CodeGenC plays under CodeGenCUDA): an indenting source
/// writer, index expressions as C, scalar types and literals, scalar ops from
/// the scalar table (op_tables.h), and scoped common-subexpression naming.
///
/// A target printer derives from CPrinterBase and overrides the hooks
/// (types, literals, math names, how a node is printed in vector form) and
/// adds its own loop structure. The CPU printer is cpu_kernel_printer.h; a CUDA
/// printer would override scalar_type / scalar_unary for __half and device
/// math and print thread mappings instead of loops.
///
/// Values: every non-trivial expression node gets a name (tmp0, tmp1, ... in
/// print order) the first time a scope needs it; later uses in that scope or
/// nested scopes reuse the name. Constants and reduction results print
/// inline. Names are deterministic: they depend only on the kernel.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/print_options.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/kernel.h"
#include "lowering/ir/index_simplify.h"

namespace cppi::codegen {

/// Lines with indentation.
///
/// A `for` loop that encloses another loop gets `outer_loop_pragma` on the
/// line before it (when one is set and the line before is not a pragma
/// already). For the CPU kernels it keeps the loop rolled: LLVM otherwise
/// fully unrolls short outer loops and unrolls the loops under them 16-fold,
/// a copy of the inner vector loop per iteration. T5's graph: 174 KB of code
/// and 4.2 s to compile, 39 KB and 0.9 s with outer loops rolled.
class SourceWriter {
 public:
  explicit SourceWriter(std::string outer_loop_pragma = "") : outer_loop_pragma_(std::move(outer_loop_pragma)) {}
  void line(const std::string& s);
  /// `head {` and indent.
  void open(const std::string& head);
  /// Dedent and `tail` (default "}").
  void close(const std::string& tail = "}");
  void blank() { out_ += "\n"; }
  std::string str() const;

 private:
  struct Block {
    size_t head_offset;  // where the head's line starts in out_
    int indent;
    bool is_loop;
    bool pragma_before;  // the line before the head is a pragma
    bool encloses_loop = false;
  };
  /// Marks the innermost open loop as enclosing a loop.
  void nested_loop();

  std::string out_;
  int indent_ = 0;
  std::string outer_loop_pragma_;
  std::string last_line_;
  std::vector<Block> open_;
  /// (offset, indent) of the outer loops' heads, for str() to insert the pragma.
  std::vector<std::pair<size_t, int>> outer_loops_;
};

/// The comment above a kernel, the same for both targets: its name, the FX
/// nodes it came from (with their source lines when `options` has them), its
/// schedule's description and why the schedule was chosen.
void print_kernel_header(SourceWriter& out, const std::string& name, const ir::Kernel& k,
                         const PrintOptions& options, const std::string& schedule);

/// A printed value: a C expression (usually a name or a literal). Vector
/// values of dtype bool are lane masks with `mask_bytes`-wide lanes.
struct CValue {
  std::string text;
  DType dtype = DType::Float32;
  bool vector = false;
  int mask_bytes = 0;
};

/// Where in the loop nest a target prints the values of a scope: its
/// vectorised loop, the lanes of a masked vector, ... Each target derives its
/// own; the printer opens one with each loop that changes it, and the values
/// printed inside read it from their scope (the printer keeps no such mode).
struct LoopPlace {
  virtual ~LoopPlace() = default;
};

/// Expressions by structure.
using ExprSet = std::unordered_set<ir::Expr, ir::ExprStructuralHash, ir::ExprStructuralEqual>;

/// The operands that both sin and cos take somewhere in `roots`.
ExprSet sincos_operands(const std::vector<ir::Expr>& roots);
/// ... in some value of a stage of `k` (each value on its own, as each prints).
ExprSet sincos_operands(const ir::Kernel& k);

/// A named-value scope: one per C block that introduces names. It also
/// carries the LoopPlace of that block (its own, or else its parent's),
/// whether indirect indices printed in it are checked (print_index_check),
/// and the sin/cos operands of the values printed in it (its own, or else
/// its parent's) where they are not the kernel's own (a vector's lanes).
class ValueScope {
 public:
  explicit ValueScope(const ValueScope* parent = nullptr, const LoopPlace* place = nullptr,
                      const ExprSet* sincos = nullptr)
      : parent_(parent),
        place_(place ? place : parent ? parent->place_ : nullptr),
        sincos_(sincos ? sincos : parent ? parent->sincos_ : nullptr),
        check_indices_(parent ? parent->check_indices_ : true) {}
  /// `of` as seen by a masked load (its indices may be anything where the
  /// mask is off): the same values (what it names is named in `of`) and
  /// place, its indirect indices unchecked.
  struct UncheckedIndices {};
  ValueScope(ValueScope& of, UncheckedIndices)
      : parent_(of.parent_),
        place_(of.place_),
        sincos_(of.sincos_),
        values_of_(of.values_of_ ? of.values_of_ : &of),
        check_indices_(false) {}
  ValueScope(const ValueScope&) = delete;
  ValueScope& operator=(const ValueScope&) = delete;
  const CValue* find(const ir::Expr& e) const;
  const LoopPlace* place() const { return place_; }
  /// Whether sin and cos of `operand` both print in this scope's values.
  bool sincos_operand(const ir::Expr& operand) const { return sincos_ && sincos_->count(operand) > 0; }
  bool check_indices() const { return check_indices_; }
  void add(const ir::Expr& e, CValue v) { table().emplace(e, std::move(v)); }
  /// Forgets every value in this scope (not its parents) that reads `buffer`:
  /// after a store to it, a later load must read memory again.
  void forget_loads_of(const std::string& buffer);

 private:
  using Values = std::unordered_map<ir::Expr, CValue, ir::ExprStructuralHash, ir::ExprStructuralEqual>;
  Values& table() { return values_of_ ? values_of_->values_ : values_; }
  const Values& table() const { return values_of_ ? values_of_->values_ : values_; }

  const ValueScope* parent_;
  const LoopPlace* place_;
  const ExprSet* sincos_;
  ValueScope* values_of_ = nullptr;  // a view's scope
  bool check_indices_ = true;
  Values values_;
};

/// True if `e` contains a Load of `buffer`.
bool reads_buffer(const ir::Expr& e, const std::string& buffer);

/// Makes `name` a C identifier (other characters become '_').
std::string c_identifier(const std::string& name);
/// A loop's variable as C names it.
inline std::string loop_var(const ir::Loop& l) { return c_identifier(l.var.as<ir::IndexVar>()->name); }

/// Throws the internal error of a target's printer: "<target> codegen: <message>".
[[noreturn]] void printer_error(const std::string& target, const std::string& message);

/// What a target's printer code names unqualified (`using namespace
/// codegen::printer_names;` in its namespace): the loop IR and the values
/// the C printer prints.
namespace printer_names {
using namespace ir;
using codegen::CValue;
using codegen::ValueScope;
}  // namespace printer_names

class CPrinterBase {
 public:
  virtual ~CPrinterBase() = default;

 protected:
  /// `ranges`: every variable the printed code's indices may hold, with its
  /// extent (the kernel's loops and the target's own, such as a vector's
  /// lane); `sincos`: the operands whose sin and cos print as one call
  /// (sincos_operands of the kernel).
  CPrinterBase(ir::VarRanges ranges, ExprSet sincos) : ranges_(std::move(ranges)), sincos_args_(std::move(sincos)) {}

  // --- hooks ------------------------------------------------------------------------
  /// Scalar C type of a dtype as computed with ("float", "cppi_half", "bool").
  virtual std::string scalar_type(DType t) const;
  virtual std::string literal(const ir::Constant& c) const;
  /// A unary or binary op on scalars, printed in `scope` (a target may print
  /// it differently by where it is: see LoopPlace); by default c_unary and
  /// c_binary.
  virtual std::string scalar_unary(ir::UnaryOp op, DType t, const std::string& x, const ValueScope& scope) const {
    (void)scope;
    return c_unary(op, t, x);
  }
  virtual std::string scalar_binary(ir::BinaryOp op, DType t, const std::string& a, const std::string& b,
                                    const ValueScope& scope) const {
    (void)scope;
    return c_binary(op, t, a, b);
  }
  /// The plain C form of an op on scalars (the op tables' scalar templates).
  std::string c_unary(ir::UnaryOp op, DType t, const std::string& x) const;
  std::string c_binary(ir::BinaryOp op, DType t, const std::string& a, const std::string& b) const;
  virtual std::string scalar_cast(DType from, DType to, const std::string& x) const;
  /// The C name of a buffer's pointer.
  virtual std::string pointer_name(const std::string& buffer) const = 0;
  /// The C expression of a kernel-local (reduction result) value.
  virtual CValue local_value(const ir::LocalRef& ref) const = 0;
  /// A target's way to compute `e` together with related values (it may
  /// print statements and add those values to `scope`); nullopt: print `e`
  /// on its own, as usual.
  virtual std::optional<CValue> fused_value(const ir::Expr& e, ValueScope& scope) {
    (void)e, (void)scope;
    return std::nullopt;
  }

  /// Called with the C texts of an indirect index's raw int64 value, the
  /// smallest valid value (-size, or 0 for a leaf that does not wrap) and the
  /// dimension's size, before the value is wrapped and clamped into range,
  /// unless the index belongs to a masked load (which may hold anything
  /// where its mask is off). A target may print a range check; the default
  /// prints nothing (the clamp alone keeps memory safe).
  virtual void print_index_check(const std::string& value, const std::string& lowest, const std::string& size) {
    (void)value, (void)lowest, (void)size;
  }
  /// `x / d` and `x % d` of an index `x` proven nonnegative by a divisor
  /// that is a positive constant or size symbol (C's truncating division is
  /// floor division there). `x` and `d` are C texts, each an operand.
  virtual std::string nonnegative_div(const std::string& x, const ir::IndexExpr& d, const std::string& d_text) const {
    (void)d;
    return "(" + x + " / " + d_text + ")";
  }
  virtual std::string nonnegative_mod(const std::string& x, const ir::IndexExpr& d, const std::string& d_text) const {
    (void)d;
    return "(" + x + " % " + d_text + ")";
  }
  // --- sin and cos of one argument ----------------------------------------------------
  // sin(x) and cos(x) of the same x (sin + cos, rotary embeddings) print as
  // one cppi_sincos call: one argument reduction instead of two. Each target's
  // support code defines cppi_sincos(x, &s, &c) for the types it passes.
  /// True if `e` is sin or cos of an operand whose sin and cos both print:
  /// in the kernel's values, or in those of `scope`.
  bool is_sincos_half(const ir::Expr& e, const ValueScope& scope) const;
  /// For such an `e` with its operand printed as `x` (of C type `type`):
  /// prints `type s, c; cppi_sincos(x, &s, &c);`, names the other half in
  /// `scope` and returns `e`'s half.
  CValue print_sincos(const ir::Expr& e, const CValue& x, const std::string& type, ValueScope& scope);

  // --- index expressions ------------------------------------------------------------
  /// `e` as a C int64 expression; floordiv/mod print as / and % where the
  /// dividend is provably nonnegative (loop variables are), else through the
  /// Python-semantics helpers.
  std::string index(const ir::IndexExpr& e) const;
  /// The same for an index that may hold indirect leaves (gather/scatter
  /// positions): each leaf's position (ir::indirect_position_value: wrap,
  /// then clamp into the dimension) is first declared as a scalar value in
  /// `scope`, and the leaf prints as its name. The const overload asserts
  /// that there is no indirect leaf.
  std::string index(const ir::IndexExpr& e, ValueScope& scope);

  // --- scalar values ----------------------------------------------------------------
  /// The value of `e` in scalar form, naming it in `scope` if needed.
  CValue scalar_value(const ir::Expr& e, ValueScope& scope);
  /// Declares `const <type> tmpN = text;` and returns tmpN.
  std::string declare(const std::string& type, const std::string& text);
  std::string fresh_name(const std::string& prefix = "tmp");

  SourceWriter out_;
  const ir::VarRanges ranges_;

 private:
  std::string scalar_node(const ir::Expr& e, ValueScope& scope);
  std::string index_text(const ir::IndexExpr& e,
                         const std::function<std::string(const ir::IndexExpr&)>& indirect) const;
  int next_name_ = 0;
  const ExprSet sincos_args_;
};

/// Integer helpers generated code uses (wrapping arithmetic, Python // and
/// % on indices, integer div/mod/pow/shifts) as C++ source text, shared by
/// the CPU and CUDA support blocks; they define CPPI_INLINE before it.
const char* c_integer_support_source();
/// Float floor division and remainder as ATen computes them (text), shared
/// likewise; the target defines cppi_fmod, cppi_floor and cppi_copysign first.
const char* c_float_division_support_source();
/// Philox4x32-10 random numbers (cppi_philox, cppi_rand, cppi_randn) as the
/// loop IR's Random defines them (text), shared likewise; the target defines
/// cppi_mul_hilo(m, a, hi, lo) (the words of the 64-bit product m * a, for
/// uint32_t and any vector of them it uses) and cppi_box_muller(u1,
/// u2) = sqrt(-2 log(max(u1, 1e-7))) * cos(2 pi u2) in float first.
const char* c_philox_support_source();

}  // namespace cppi::codegen
