/// How stage accesses move along a loop, vector widths, masked tails: see
/// vector_access.h. Also the access shapes cpu_schedule.h declares
/// (transposed, strided, repeated, row-block loads; Philox lane steps).
#include "cpu_codegen/schedule/vector_access.h"

#include <unordered_map>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/stage_loops.h"
#include "support/status.h"

namespace cppi::cpu::detail {

using namespace ir;

namespace {

class AccessScanner : public ExprVisitor {
 public:
  /// `tile_var`: when set, loads that are transposed_load along var and it
  /// count as `transposed` instead of gathers.
  /// `row_loop`: the stage's one loop, when row blocks are asked for.
  AccessScanner(std::string var, AccessCounts* counts, std::string tile_var = "", const Loop* row_loop = nullptr)
      : var_(std::move(var)), tile_var_(std::move(tile_var)), counts_(counts), row_loop_(row_loop) {}

  void store(const Store& s) {
    ++counts_->stores;
    note_indirect(s.index);
    for (const auto& v : indirect_values(s.index)) walk(v);
    auto c = coefficient(s.index, ir::var(var_));
    const auto stride = c ? c->constant() : std::nullopt;
    if (!s.accumulate && row_block(s.index, false, s.buffer->dtype)) {
      ++counts_->row_block_stores;
    } else if (!s.accumulate && stride && *stride != 0 && *stride != 1 && indirect_terms(s.index).empty()) {
      ++counts_->strided_stores;
    } else if (!c || !c->is_constant(1)) {
      ++counts_->bad_stores;
    }
    note_dtype(s.buffer->dtype);
    walk(stored_value(s));  // an accumulating store loads its old value too
  }
  /// The vector printer computes an indirect position once per vector
  /// iteration, as a scalar: a position that moves along the vectorised
  /// variable (a gather or scatter along it) must stay scalar code.
  void note_indirect(const IndexExpr& index) {
    for (const auto& leaf : indirect_terms(index)) {
      if (depends_on(leaf, var_)) counts_->unsupported = true;
    }
  }
  /// A row_block_access along the stage's loop.
  bool row_block(const IndexExpr& index, bool masked, DType t) const {
    return row_loop_ && row_block_access(t, index, masked, var_, *row_loop_).has_value();
  }
  void note_dtype(DType t) {
    if (t != DType::Bool) counts_->max_lane_bytes = std::max(counts_->max_lane_bytes, dtype_size(t));
  }
  /// Whether `e` moves with the variable, as the vector printer decides it
  /// (CpuKernelPrinter::varying): only such values become vectors, so only
  /// their dtypes bound the width. LocalRefs count as moving (conservative).
  bool varies(const Expr& e) {
    auto it = varies_memo_.find(e.get());
    if (it != varies_memo_.end()) return it->second;
    bool r = false;
    switch (e.kind()) {
      case ExprKind::Constant: break;
      case ExprKind::LocalRef: r = true; break;
      case ExprKind::Load: {
        auto n = e.as<Load>();
        r = depends_on(n->index, var_) || (n->mask.defined() && varies(n->mask));
        break;
      }
      case ExprKind::IndexValue: r = depends_on(e.as<IndexValue>()->index, var_); break;
      case ExprKind::Cast: r = varies(e.as<Cast>()->value); break;
      case ExprKind::Unary: r = varies(e.as<Unary>()->operand); break;
      case ExprKind::Binary: r = varies(e.as<Binary>()->lhs) || varies(e.as<Binary>()->rhs); break;
      case ExprKind::Compare: r = varies(e.as<Compare>()->lhs) || varies(e.as<Compare>()->rhs); break;
      case ExprKind::Where: {
        auto n = e.as<Where>();
        r = varies(n->cond) || varies(n->then_value) || varies(n->else_value);
        break;
      }
      case ExprKind::Random: r = depends_on(e.as<Random>()->offset, var_) || varies(e.as<Random>()->seed); break;
    }
    varies_memo_[e.get()] = r;
    return r;
  }

 protected:
  void visit(const Load& n) override {
    if (depends_on(n.index, var_) || (n.mask.defined() && varies(n.mask))) note_dtype(n.dtype);
    note_indirect(n.index);
    auto c = coefficient(n.index, ir::var(var_));
    if (row_block(n.index, n.mask.defined(), n.buffer->dtype)) {
      ++counts_->row_blocks;
      ExprVisitor::visit(n);
      return;
    }
    if (!tile_var_.empty() && transposed_load(n.index, n.mask.defined(), var_, tile_var_)) {
      ++counts_->transposed;
      counts_->transposed_buffers.insert(n.buffer->name);
      ExprVisitor::visit(n);
      return;
    }
    // A masked stride-1 or strided load is whole vectors wherever its mask
    // is uniform over the vector (cppi_vload_masked): a cat's inputs,
    // padding, a padded pooling window.
    const bool strided = strided_load(n.index, /*masked=*/false, var_).has_value();
    if (n.mask.defined() && c && !c->is_constant(0) && !c->is_constant(1) && !strided) {
      ++counts_->gathers;
    } else if (c && c->is_constant(1)) {
      ++counts_->contiguous;
    } else if (strided) {
      ++counts_->strided;
    } else if (c && c->is_constant(0)) {
      ++counts_->broadcast;
    } else if (repeated_load(n.index, n.mask.defined(), var_)) {
      ++counts_->repeated;
    } else {
      ++counts_->gathers;
    }
    ExprVisitor::visit(n);
  }
  void visit(const IndexValue& n) override {
    if (depends_on(n.index, var_)) note_dtype(DType::Int64);
    note_indirect(n.index);
    // Any constant step is an iota (cppi_viota_step); the rest lane by lane.
    // An index that does not move is one scalar, broadcast.
    auto c = coefficient(n.index, ir::var(var_));
    if (depends_on(n.index, var_) && (!c || !c->constant() || !indirect_terms(n.index).empty())) ++counts_->gathers;
    ExprVisitor::visit(n);
  }
  void visit(const Random& n) override {
    note_indirect(n.offset);
    // Counters that step evenly along the lanes are computed in vector
    // registers (cppi_vrand): no memory access at all, so not a gather.
    if (depends_on(n.offset, var_) && !philox_lane_step(n.offset, var_)) ++counts_->gathers;
    ExprVisitor::visit(n);
  }
  void visit(const Cast& n) override {
    if (varies(n.value)) note_dtype(n.dtype);
    if (varies(n.value) && int32_iota_step(n, var_)) return;  // int32 lanes from the start
    ExprVisitor::visit(n);
  }
  void visit(const Unary& n) override {
    if (varies(n.operand)) note_dtype(n.dtype);
    ExprVisitor::visit(n);
  }
  void visit(const Binary& n) override {
    if (varies(n.lhs) || varies(n.rhs)) note_dtype(n.dtype);
    ExprVisitor::visit(n);
  }
  void visit(const Compare& n) override {
    if (varies(n.lhs) || varies(n.rhs)) note_dtype(n.lhs.dtype());
    ExprVisitor::visit(n);
  }
  void visit(const Where& n) override {
    if (varies(n.cond) || varies(n.then_value) || varies(n.else_value)) note_dtype(n.dtype);
    ExprVisitor::visit(n);
  }
  void visit(const LocalRef& n) override {
    note_dtype(n.dtype);
    ExprVisitor::visit(n);
  }

 private:
  std::string var_;
  std::string tile_var_;
  AccessCounts* counts_;
  const Loop* row_loop_;
  std::unordered_map<const ExprNode*, bool> varies_memo_;
};

}  // namespace

void scan_stage(const Stage& stage, const std::string& var, AccessCounts* counts, const std::string& tile_var,
                bool row_blocks) {
  const auto& loops = loops_of(stage);
  AccessScanner scanner(var, counts, tile_var, row_blocks && loops.size() == 1 ? &loops[0] : nullptr);
  if (auto r = std::get_if<ReductionStage>(&stage)) {
    scanner.walk(r->body);
    for (DType t : r->result_dtypes) scanner.note_dtype(t);
    if (r->kind == ReductionKind::ArgMax || r->kind == ReductionKind::ArgMin) {
      if (r->body.dtype() == DType::Bool) counts->unsupported = true;
      scanner.note_dtype(DType::Int64);
    }
  } else if (auto sc = std::get_if<ScanStage>(&stage)) {
    scanner.walk(sc->body);
    scanner.note_dtype(sc->body.dtype());  // the running value
    for (const auto& s : sc->stores) scanner.store(s);
  } else {
    for (const auto& s : std::get<PointwiseStage>(stage).stores) scanner.store(s);
  }
}

bool worth_vectorizing(const AccessCounts& c) {
  if (c.unsupported || c.bad_stores > 0) return false;
  const int whole = c.contiguous + c.strided + c.repeated + c.row_blocks;
  if (whole + c.stores == 0) return false;
  return (c.gathers + c.strided_stores) * 2 <= whole;
}

std::string describe_loads(const AccessCounts& c) {
  return cat(c.contiguous, " contiguous, ", c.row_blocks ? cat(c.row_blocks, " row-block, ") : std::string(),
             c.strided ? cat(c.strided, " strided, ") : std::string(),
             c.repeated ? cat(c.repeated, " repeated, ") : std::string(), c.broadcast,
             " broadcast, ", c.gathers, " gathered loads",
             c.strided_stores ? cat("; ", c.strided_stores, " strided stores") : std::string());
}

int pick_width(const CpuTarget& target, int max_lane_bytes, const std::vector<IndexExpr>& extents,
               bool masked_tail) {
  int w = target.vector_bytes / std::max(4, max_lane_bytes);
  w = std::min(16, std::max(4, w));
  if (max_lane_bytes == 8) w = std::min(w, 8);
  for (const auto& e : extents) {
    if (auto c = e.constant()) {
      if (masked_tail) {
        while (w > 4 && *c <= w / 2) w /= 2;
        if (*c < 2) return 0;
        continue;
      }
      while (w > 4 && *c < w) w /= 2;
      if (*c < w) return 0;
    }
  }
  return w;
}

bool masked_tail_safe(const Kernel& k, bool lanes_combine) {
  for (const auto& s : k.stages) {
    if (lanes_combine && std::holds_alternative<ScanStage>(s)) return false;
    if (const auto* r = std::get_if<ReductionStage>(&s); r && lanes_combine) {
      switch (r->kind) {
        case ReductionKind::Sum:
        case ReductionKind::Prod:
        case ReductionKind::Max:
        case ReductionKind::Min:
        case ReductionKind::Any:
        case ReductionKind::All: break;
        default: return false;
      }
    }
    for (const Expr& e : stage_values(s)) {
      if (may_raise(e)) return false;
    }
  }
  return true;
}

bool masked_tail_pays(const Kernel& k, const CpuTarget& target) {
  if (target.vector_bytes >= 64) return true;
  for (const auto& s : k.stages) {
    if (loops_of(s).empty()) continue;
    for (const Expr& e : stage_values(s)) {
      if (calls_math_function(e)) return true;
    }
  }
  return false;
}

}  // namespace cppi::cpu::detail

namespace cppi::cpu {

using namespace ir;

// --- the access shapes cpu_schedule.h declares (the scanner above and the printer ask them) --------------

std::optional<uint32_t> philox_lane_step(const IndexExpr& offset, const std::string& var) {
  auto c = coefficient(offset, ir::var(var));
  if (!c || !c->constant()) return std::nullopt;
  const int64_t step = *c->constant();
  if (step < 0 || step > (int64_t{1} << 32) / 16) return std::nullopt;
  return static_cast<uint32_t>(step);
}

std::optional<int64_t> int32_iota_step(const Cast& cast, const std::string& var) {
  auto iv = cast.value.as<IndexValue>();
  if (cast.dtype != DType::Int32 || !iv || !indirect_terms(iv->index).empty()) return std::nullopt;
  auto c = coefficient(iv->index, ir::var(var));
  if (!c || !c->constant()) return std::nullopt;
  return *c->constant();
}

bool transposed_load(const IndexExpr& index, bool masked, const std::string& vector_var, const std::string& tile_var) {
  if (masked || !indirect_terms(index).empty()) return false;
  auto form = affine_form(index, {ir::var(vector_var), ir::var(tile_var)});
  if (!form) return false;
  const IndexExpr& along_vector = form->strides[0];
  return form->strides[1].is_constant(1) && !along_vector.is_constant(0) && !along_vector.is_constant(1);
}

std::optional<int> strided_load(const IndexExpr& index, bool masked, const std::string& vector_var) {
  if (masked || !indirect_terms(index).empty()) return std::nullopt;
  auto c = coefficient(index, ir::var(vector_var));
  auto stride = c ? c->constant() : std::nullopt;
  if (!stride || *stride < 2 || *stride > 4) return std::nullopt;
  return static_cast<int>(*stride);
}

std::optional<int64_t> row_block_access(DType element, const IndexExpr& index, bool masked,
                                        const std::string& vector_var, const Loop& row_loop) {
  const bool whole = element == DType::Float32 || element == DType::Float64 || element == DType::Int32 ||
                     element == DType::Int64;
  const auto rows = row_loop.extent.constant();
  if (!whole || masked || !rows || *rows < 2 || !indirect_terms(index).empty()) return std::nullopt;
  auto form = affine_form(index, {ir::var(vector_var), row_loop.var});
  if (!form || !form->strides[1].is_constant(1) || !form->strides[0].is_constant(*rows)) return std::nullopt;
  return *rows;
}

IndexExpr row_block_start(const IndexExpr& index, const Loop& row_loop) {
  return simplify(substitute(index, {{row_loop.var.as<IndexVar>()->name, index_const(0)}}));
}

std::optional<int> repeated_load(const IndexExpr& index, bool masked, const std::string& vector_var) {
  if (masked || !indirect_terms(index).empty() || !depends_on(index, vector_var)) return std::nullopt;
  if (coefficient(index, ir::var(vector_var))) return std::nullopt;  // affine: contiguous, strided or a gather
  // vector_var = R * group + lane, lane in [0, R): the index must not depend
  // on the lane and must step by 1 with the group.
  const std::string group = vector_var + "_group", lane = vector_var + "_lane";
  for (const int r : {2, 4, 8}) {
    const IndexExpr split = ir::simplify(ir::substitute(index, {{vector_var, ir::var(group) * r + ir::var(lane)}}),
                                         {{lane, index_const(r)}});
    auto c = coefficient(split, ir::var(group));
    if (!depends_on(split, lane) && c && c->is_constant(1)) return r;
  }
  return std::nullopt;
}

}  // namespace cppi::cpu
