#include "lowering/ir/kernel.h"

#include <algorithm>
#include <map>
#include <set>

#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/node_check.h"

namespace cppi::ir {

const char* to_string(VectorizedLoop v) {
  switch (v) {
    case VectorizedLoop::None: return "none";
    case VectorizedLoop::InnermostOuter: return "innermost_outer";
    case VectorizedLoop::InnermostOfEachStage: return "innermost_of_each_stage";
  }
  return "?";
}

const char* to_string(TailKind t) {
  switch (t) {
    case TailKind::ScalarLoop: return "scalar_loop";
    case TailKind::Overlapped: return "overlapped";
    case TailKind::Masked: return "masked";
  }
  return "?";
}

const char* to_string(GpuMapping m) {
  switch (m) {
    case GpuMapping::None: return "none";
    case GpuMapping::GridStridePointwise: return "grid_stride_pointwise";
    case GpuMapping::RowPerWarp: return "row_per_warp";
    case GpuMapping::RowPerBlock: return "row_per_block";
    case GpuMapping::ColumnReduction: return "column_reduction";
  }
  return "?";
}

ReductionStage ReductionStage::make(std::vector<Loop> loops, ReductionKind kind, Expr body,
                                    std::vector<std::string> results) {
  if (!body.defined()) throw CompilerError(Error::internal("reduction stage: null body"));
  auto dtypes = reduction_result_dtypes(kind, body.dtype());
  if (!dtypes.ok()) throw CompilerError(dtypes.error());
  if (results.size() != dtypes->size()) {
    throw CompilerError(Error::internal(cat("reduction stage ", to_string(kind), ": ", results.size(),
                                            " result names for ", dtypes->size(), " results")));
  }
  ReductionStage s;
  s.loops = std::move(loops);
  s.kind = kind;
  s.body = std::move(body);
  s.results = std::move(results);
  s.result_dtypes = std::move(dtypes).value();
  return s;
}

Expr ReductionStage::result(size_t i) const { return LocalRef::make(results.at(i), result_dtypes.at(i)); }

ScanStage ScanStage::make(Loop loop, ReductionKind kind, Expr body, std::string result, std::vector<Store> stores) {
  if (!body.defined()) throw CompilerError(Error::internal("scan stage: null body"));
  if (!is_scan_kind(kind)) throw CompilerError(Error::internal(cat("scan stage: no ", to_string(kind), " scan")));
  if (body.dtype() == DType::Bool) throw CompilerError(Error::internal("scan stage: a bool body"));
  if (result.empty() || stores.empty()) throw CompilerError(Error::internal("scan stage: no result name or no stores"));
  ScanStage s;
  s.loops = {std::move(loop)};
  s.kind = kind;
  s.body = std::move(body);
  s.result = std::move(result);
  s.stores = std::move(stores);
  return s;
}

namespace {

#define CPPI_RETURN_IF_ERROR(expr) \
  do {                             \
    Status _s = (expr);            \
    if (!_s.ok()) return _s;       \
  } while (0)

Status check_loops(const std::vector<Loop>& loops, std::set<std::string>* scope, const std::string& what) {
  for (const auto& l : loops) {
    auto v = l.var.as<IndexVar>();
    if (!v) return Error::internal(cat(what, ": loop variable ", l.var, " is not a variable"));
    if (!l.extent.defined()) return Error::internal(cat(what, ": loop ", v->name, " has no extent"));
    if (!free_vars(l.extent).empty()) {
      return Error::internal(cat(what, ": extent ", l.extent, " of ", v->name, " uses a loop variable"));
    }
    if (!scope->insert(v->name).second) return Error::internal(cat(what, ": loop variable ", v->name, " bound twice"));
  }
  return Status::success();
}

Status check_device(const BufferPtr& b, Device d, const std::string& what) {
  if (b->device != d) {
    return Error::internal(cat(what, ": buffer ", b->name, " is on ", to_string(b->device), ", the kernel on ",
                               to_string(d)));
  }
  return Status::success();
}

class DeviceChecker : public ExprVisitor {
 public:
  explicit DeviceChecker(Device d) : device_(d) {}
  std::string error;

 protected:
  void visit(const Load& node) override {
    if (node.buffer->device != device_ && !is_host_scalar(*node.buffer, device_) && error.empty()) {
      error = cat("load from ", node.buffer->name, " on ", to_string(node.buffer->device));
    }
    ExprVisitor::visit(node);
  }

 private:
  Device device_;
};

}  // namespace

Status verify(const Kernel& k) {
  std::string what = cat("kernel ", k.name);
  if (k.name.empty()) return Error::internal("kernel with an empty name");
  std::set<std::string> outer_scope;
  CPPI_RETURN_IF_ERROR(check_loops(k.outer, &outer_scope, what));
  std::map<std::string, DType> locals;
  for (size_t i = 0; i < k.stages.size(); ++i) {
    std::string swhat = cat(what, " stage ", i);
    std::set<std::string> scope = outer_scope;
    const auto& stage = k.stages[i];
    std::vector<Expr> values;
    if (auto r = std::get_if<ReductionStage>(&stage)) {
      CPPI_RETURN_IF_ERROR(check_loops(r->loops, &scope, swhat));
      if (!r->body.defined() || r->result_dtypes.size() != r->results.size() ||
          r->results.size() != static_cast<size_t>(num_results(r->kind))) {
        return Error::internal(cat(swhat, ": malformed reduction stage (build it with ReductionStage::make)"));
      }
      CPPI_RETURN_IF_ERROR(detail::check_expr_scope(r->body, scope, &locals, swhat));
      values.push_back(r->body);
    } else {
      const auto* scan = std::get_if<ScanStage>(&stage);
      if (scan && k.stages.size() != 1) return Error::internal(cat(swhat, ": a scan stage beside other stages"));
      if (scan && (scan->loops.size() != 1 || !scan->body.defined() || !is_scan_kind(scan->kind))) {
        return Error::internal(cat(swhat, ": malformed scan stage (build it with ScanStage::make)"));
      }
      const auto& loops = loops_of(stage);
      const auto& stores = scan ? scan->stores : std::get<PointwiseStage>(stage).stores;
      CPPI_RETURN_IF_ERROR(check_loops(loops, &scope, swhat));
      if (scan) {
        CPPI_RETURN_IF_ERROR(detail::check_expr_scope(scan->body, scope, &locals, swhat));
        values.push_back(scan->body);
        locals.emplace(scan->result, scan->body.dtype());  // visible to its own stores only
      }
      if (stores.empty()) return Error::internal(cat(swhat, ": pointwise stage without stores"));
      for (const auto& s : stores) {
        if (scan && s.accumulate) return Error::internal(cat(swhat, ": an accumulating store in a scan"));
        if (!s.buffer || !s.value.defined() || s.value.dtype() != s.buffer->dtype) {
          return Error::internal(cat(swhat, ": malformed store (build it with Store::make)"));
        }
        CPPI_RETURN_IF_ERROR(check_device(s.buffer, k.device, swhat));
        CPPI_RETURN_IF_ERROR(detail::check_index_scope(s.index, scope, swhat));
        CPPI_RETURN_IF_ERROR(detail::check_expr_scope(s.value, scope, &locals, swhat));
        values.push_back(s.value);
      }
    }
    DeviceChecker devices(k.device);
    for (const auto& v : values) devices.walk(v);
    if (!devices.error.empty()) return Error::internal(cat(swhat, ": ", devices.error));
    if (auto r = std::get_if<ReductionStage>(&stage)) {
      for (size_t j = 0; j < r->results.size(); ++j) {
        if (!locals.emplace(r->results[j], r->result_dtypes[j]).second) {
          return Error::internal(cat(swhat, ": result name ", r->results[j], " defined twice"));
        }
      }
    }
  }
  return Status::success();
}

KernelPtr Kernel::make(std::string name, Device device, std::vector<Loop> outer, std::vector<Stage> stages,
                       Schedule schedule, std::vector<std::string> origins) {
  auto k = KernelPtr(new Kernel(std::move(name), device, std::move(outer), std::move(stages), schedule,
                                std::move(origins)));
  verify(*k).throw_if_error();
  return k;
}

KernelPtr Kernel::with_schedule(Schedule s) const {
  return KernelPtr(new Kernel(name, device, outer, stages, s, origins));
}

namespace {
void add_loops(const std::vector<Loop>& loops, VarRanges* out) {
  for (const auto& l : loops) (*out)[l.var.as<IndexVar>()->name] = l.extent;
}
}  // namespace

VarRanges Kernel::var_ranges() const {
  VarRanges out;
  add_loops(outer, &out);
  for (const auto& s : stages) add_loops(loops_of(s), &out);
  return out;
}

VarRanges Kernel::var_ranges(size_t stage) const {
  VarRanges out;
  add_loops(outer, &out);
  add_loops(loops_of(stages.at(stage)), &out);
  return out;
}

const std::vector<Loop>& loops_of(const Stage& s) {
  return std::visit([](const auto& st) -> const std::vector<Loop>& { return st.loops; }, s);
}

IndexExpr rename_stage_loops(const Kernel& k, size_t stage, const IndexExpr& index,
                             const std::function<IndexExpr(size_t)>& var_for) {
  std::map<std::string, IndexExpr> rename;
  const auto& loops = loops_of(k.stages.at(stage));
  for (size_t i = 0; i < loops.size(); ++i) rename[loops[i].var.as<IndexVar>()->name] = var_for(i);
  return substitute(index, rename);
}

namespace {

/// The run of reduction_run_end / pass_run_end.
size_t run_end(const Kernel& k, size_t first, bool with_pointwise) {
  const auto* head = std::get_if<ReductionStage>(&k.stages.at(first));
  if (!head || head->loops.empty()) return first + 1;
  std::set<std::string> run_results(head->results.begin(), head->results.end());
  std::set<std::string> loaded, stored;  // buffers the run reads / its pointwise stages write
  for (const auto& a : reads(k.stages[first])) loaded.insert(a.buffer->name);
  size_t end = first + 1;
  for (; end < k.stages.size(); ++end) {
    const Stage& s = k.stages[end];
    const auto* r = std::get_if<ReductionStage>(&s);
    if (!r && !with_pointwise) break;
    const std::vector<Loop>& loops = loops_of(s);
    if (loops.size() != head->loops.size()) break;
    bool same = true;
    for (size_t i = 0; i < loops.size(); ++i) same &= loops[i].extent == head->loops[i].extent;
    if (!same) break;
    bool independent = true;
    for (const Expr& v : stage_values(s)) {
      for (const auto& name : local_refs(v)) independent &= !run_results.count(name);
    }
    std::set<std::string> reads_here, writes_here;
    for (const auto& a : reads(s)) reads_here.insert(a.buffer->name);
    for (const auto& a : writes(s)) writes_here.insert(a.buffer->name);
    for (const auto& b : reads_here) independent &= !stored.count(b) && !writes_here.count(b);
    for (const auto& b : writes_here) independent &= !loaded.count(b) && !stored.count(b);
    if (!independent) break;
    if (r) run_results.insert(r->results.begin(), r->results.end());
    loaded.insert(reads_here.begin(), reads_here.end());
    stored.insert(writes_here.begin(), writes_here.end());
  }
  return end;
}

}  // namespace

size_t reduction_run_end(const Kernel& k, size_t first) { return run_end(k, first, false); }

size_t pass_run_end(const Kernel& k, size_t first) { return run_end(k, first, true); }

namespace {
const std::vector<Store>* stores_of(const Stage& s) {
  if (const auto* p = std::get_if<PointwiseStage>(&s)) return &p->stores;
  if (const auto* sc = std::get_if<ScanStage>(&s)) return &sc->stores;
  return nullptr;
}
}  // namespace

std::vector<Expr> stage_values(const Stage& s) {
  if (const auto* r = std::get_if<ReductionStage>(&s)) return {r->body};
  std::vector<Expr> out;
  if (const auto* sc = std::get_if<ScanStage>(&s)) out.push_back(sc->body);
  for (const auto& st : *stores_of(s)) out.push_back(st.value);
  return out;
}

std::vector<Access> reads(const Stage& s) {
  if (auto r = std::get_if<ReductionStage>(&s)) return reads(r->body);
  std::vector<Access> out;
  if (const auto* sc = std::get_if<ScanStage>(&s)) out = reads(sc->body);
  for (const auto& st : *stores_of(s)) {
    if (st.accumulate) out.push_back(Access{st.buffer, st.index, false});  // its old value
    for (auto& a : reads(st.value)) out.push_back(std::move(a));
    for (const auto& v : indirect_values(st.index)) {
      for (auto& a : reads(v)) out.push_back(std::move(a));
    }
  }
  return out;
}

std::vector<Access> writes(const Stage& s) {
  std::vector<Access> out;
  if (const auto* stores = stores_of(s)) {
    for (const auto& st : *stores) out.push_back(Access{st.buffer, st.index, false});
  }
  return out;
}

std::set<std::string> written_buffers(const Kernel& k) {
  std::set<std::string> out;
  for (const auto& s : k.stages) {
    for (const auto& a : writes(s)) out.insert(a.buffer->name);
  }
  return out;
}

std::set<std::string> read_back_buffers(const Kernel& k) {
  const std::set<std::string> written = written_buffers(k);
  std::set<std::string> out;
  for (const auto& s : k.stages) {
    for (const auto& a : reads(s))
      if (written.count(a.buffer->name)) out.insert(a.buffer->name);
  }
  return out;
}

bool accumulates(const Kernel& k) {
  for (const auto& s : k.stages) {
    if (const auto* p = std::get_if<PointwiseStage>(&s)) {
      for (const auto& st : p->stores) {
        if (st.accumulate) return true;
      }
    }
  }
  return false;
}

const ScanStage* scan_of(const Kernel& k) {
  return k.stages.size() == 1 ? std::get_if<ScanStage>(&k.stages[0]) : nullptr;
}

namespace {
class SymbolCollector : public ExprVisitor {
 public:
  std::set<std::string>* out;
  explicit SymbolCollector(std::set<std::string>* o) : out(o) {}

 protected:
  void visit_index(const IndexExpr& index) override {
    for (const auto& s : free_symbols(index)) out->insert(s);
  }
};
}  // namespace

KernelSignature signature(const Kernel& k) {
  std::map<std::string, KernelSignature::Arg> buffers;
  std::set<std::string> symbols;
  SymbolCollector collector(&symbols);
  auto add_index = [&](const IndexExpr& e) {
    for (const auto& s : free_symbols(e)) symbols.insert(s);
  };
  auto add_loops_syms = [&](const std::vector<Loop>& loops) {
    for (const auto& l : loops) add_index(l.extent);
  };
  add_loops_syms(k.outer);
  for (const auto& s : k.stages) {
    add_loops_syms(loops_of(s));
    for (const auto& a : reads(s)) {
      auto& arg = buffers[a.buffer->name];
      arg.buffer = a.buffer;
      arg.read = true;
    }
    for (const auto& a : writes(s)) {
      auto& arg = buffers[a.buffer->name];
      arg.buffer = a.buffer;
      arg.written = true;
      add_index(a.index);
    }
    for (const auto& v : stage_values(s)) collector.walk(v);
  }
  KernelSignature sig;
  for (auto& [name, arg] : buffers) {
    if (arg.buffer->kind == BufferKind::KernelLocal) {
      sig.scratch.push_back(arg.buffer);
      for (const auto& e : arg.buffer->layout.sizes) add_index(e);
      for (const auto& e : arg.buffer->layout.strides) add_index(e);
    } else {
      sig.buffers.push_back(arg);
    }
  }
  sig.symbols.assign(symbols.begin(), symbols.end());
  std::sort(sig.symbols.begin(), sig.symbols.end(), natural_name_less);
  return sig;
}

KernelPtr single_node_kernel(const ComputeNode& node) {
  auto loops_of = [](const std::vector<IndexExpr>& vars, const std::vector<IndexExpr>& extents) {
    std::vector<Loop> loops;
    for (size_t i = 0; i < vars.size(); ++i) loops.push_back(Loop{vars[i], extents[i]});
    return loops;
  };
  if (auto p = std::get_if<PointwiseNodePtr>(&node)) {
    const auto& n = **p;
    return Kernel::make(n.name, n.store.buffer->device, loops_of(n.vars(), n.ranges),
                        {PointwiseStage{{}, {n.store}}}, Schedule{}, n.origins);
  }
  if (auto sc = std::get_if<ScanNodePtr>(&node)) {
    const auto& n = **sc;
    const std::string running = n.name + "_running";
    auto store = Store::make(n.output, n.index, n.stored(LocalRef::make(running, n.body.dtype())));
    auto scan = ScanStage::make(Loop{n.scan_var(), n.scan_range}, n.kind, n.body, running, {store});
    return Kernel::make(n.name, n.output->device, loops_of(n.vars(), n.ranges), {scan}, Schedule{}, n.origins);
  }
  const auto& n = *std::get<ReductionNodePtr>(node);
  std::vector<std::string> names;
  for (const char* suffix : result_suffixes(n.kind)) names.push_back(suffix[0] ? n.name + "_" + suffix : n.name);
  auto reduce = ReductionStage::make(loops_of(n.reduction_vars(), n.reduction_ranges), n.kind, n.body, names);
  PointwiseStage store;
  Device device = Device::CPU;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i].buffer) continue;
    device = n.outputs[i].buffer->device;
    store.stores.push_back(Store::make(n.outputs[i].buffer, n.outputs[i].index, reduce.result(i)));
  }
  return Kernel::make(n.name, device, loops_of(n.vars(), n.ranges), {reduce, store}, Schedule{}, n.origins);
}

}  // namespace cppi::ir
