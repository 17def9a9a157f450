#include "codegen/loop_stmt.h"

#include <sstream>

#include "support/status.h"

namespace cppi::codegen {

Stmt block(std::vector<Stmt> body, bool scoped) { return stmt(Block{std::move(body), scoped}); }

namespace {

/// The child slots of a node: pointers into a copy of it, which map_children
/// rewrites.
template <typename T>
std::vector<Stmt*> children(T& n) {
  if constexpr (std::is_same_v<T, Block>) {
    std::vector<Stmt*> out;
    for (Stmt& s : n.body) out.push_back(&s);
    return out;
  } else if constexpr (std::is_same_v<T, If>) {
    return {&n.then, &n.otherwise};
  } else if constexpr (std::is_same_v<T, For> || std::is_same_v<T, ParallelChunks> || std::is_same_v<T, Collapsed> ||
                       std::is_same_v<T, MaskedLanes> || std::is_same_v<T, TileRow> || std::is_same_v<T, VectorAt> ||
                       std::is_same_v<T, RowBlocks> || std::is_same_v<T, ForwardSlots> ||
                       std::is_same_v<T, Accumulators> || std::is_same_v<T, ReductionChunks> ||
                       std::is_same_v<T, TileChunks>) {
    return {&n.body};
  } else if constexpr (std::is_same_v<T, CascadeBlockDone>) {
    return {&n.full};
  } else if constexpr (std::is_same_v<T, TileCascadeDone>) {
    std::vector<Stmt*> out{&n.full};
    for (Stmt& s : n.levels) out.push_back(&s);
    return out;
  } else {
    return {};
  }
}

const char* kind_name(LoopKind k) {
  switch (k) {
    case LoopKind::Serial: return "serial";
    case LoopKind::Vector: return "vector";
    case LoopKind::VectorTiles: return "vector tiles";
    case LoopKind::GpuGridStride: return "gpu grid-stride";
    case LoopKind::GpuLanes: return "gpu lanes";
    case LoopKind::GpuWarpRows: return "gpu warp rows";
    case LoopKind::GpuBlockRows: return "gpu block rows";
    case LoopKind::GpuColumnGroups: return "gpu column groups";
    case LoopKind::GpuTickets: return "gpu tickets";
    case LoopKind::GpuRowPositions: return "gpu row positions";
    case LoopKind::GpuRowSlots: return "gpu row slots";
    case LoopKind::GpuRowSlotGroups: return "gpu row slot groups";
    case LoopKind::GpuScanSlots: return "gpu scan slots";
  }
  return "?";
}

const char* tail_name(Tail t) {
  switch (t) {
    case Tail::None: return "";
    case Tail::Scalar: return ", scalar tail";
    case Tail::Masked: return ", masked tail";
    case Tail::Overlapped: return ", overlapped tail";
  }
  return "?";
}

/// What a GPU loop's `threads` count.
const char* threads_of(LoopKind k) {
  const bool row = k == LoopKind::GpuRowPositions || k == LoopKind::GpuRowSlots || k == LoopKind::GpuRowSlotGroups;
  return row ? " threads a row" : " threads a block";
}

/// What a GPU loop's `splits` count.
const char* splits_of(LoopKind k) {
  if (k == LoopKind::GpuColumnGroups) return " blocks a group";
  return k == LoopKind::GpuTickets ? " tiles a row or group" : " blocks a row";
}

std::string row_block_text(const RowBlock& b) {
  return cat("row block ", b.number, ": ", b.buffer->name, "[", b.start, "], ", b.rows, " vectors");
}

std::string names(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& n : v) out += (out.empty() ? "" : " ") + n;
  return out;
}

void print_accumulators(std::ostringstream& os, const Accumulators& a, const std::string& pad) {
  os << pad << "accumulators" << (a.lanes ? ", in lanes" : "") << "\n";
  for (const StageAccumulators& s : a.stages) {
    os << pad << "  stage " << s.stage << ": " << ir::to_string(s.kind) << " over " << dtype_name(s.dtype);
    if (!s.scalar.empty()) os << ", scalar " << s.scalar;
    if (!s.vectors.empty()) os << ", vectors " << names(s.vectors);
    if (!s.init.empty()) os << " from " << s.init;
    if (!s.totals.empty()) os << ", totals " << names(s.totals);
    if (!s.result.empty()) os << " -> " << s.result;
    os << "\n";
  }
  if (!a.terms.empty()) {
    os << pad << "  cascade: " << a.block_terms << " terms a block, counted in " << a.terms;
    if (!a.merges.empty()) os << ", merges counted in " << names(a.merges);
    os << "\n";
  }
}

void print_tile_slots(std::ostringstream& os, const SetTileSlots& n, const std::string& pad) {
  os << pad << "set tile slots of " << ir::to_string(n.kind) << " over " << dtype_name(n.dtype) << "\n";
  for (const TileSlotSet& set : n.sets) {
    os << pad << "  " << set.slot << " = "
       << (set.earlier.empty() ? std::string("identity") : cat("combine(", set.earlier, ", ", set.later, ")")) << "\n";
  }
}

void print_tile_results(std::ostringstream& os, const TileResults& n, const std::string& pad) {
  os << pad << "results read from tiles:" << (n.slots.empty() ? " none" : "");
  for (size_t i = 0; i < n.slots.size(); ++i) {
    os << (i ? ", stage " : " stage ") << n.slots[i].first << " " << n.slots[i].second;
  }
  os << "\n";
}

void print(std::ostringstream& os, const Stmt& s, int depth) {
  if (!s) return;
  const std::string pad(static_cast<size_t>(depth) * 2, ' ');
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, For>) {
          os << pad << (n.stage_loop ? "stage " : "") << kind_name(n.kind) << " for " << n.var << " in [" << n.lo.text
             << ", " << n.hi.text << ")" << tail_name(n.tail) << (n.overlapped_rest ? ", overlapped rest" : "")
             << (n.whole_vectors_before_rest ? ", whole vectors of a masked split" : "")
             << (n.step != 1 ? cat(", step ", n.step) : std::string())
             << (n.threads ? cat(", ", n.threads, threads_of(n.kind)) : std::string())
             << (n.splits != 1 ? cat(", ", n.splits, splits_of(n.kind)) : std::string()) << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, ParallelChunks>) {
          os << pad << "parallel chunks [" << n.begin << ", " << n.end << ") of [0, " << n.count << "), grain " << n.grain
             << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, Collapsed>) {
          os << pad << "for the chunk's points of";
          for (const auto& [var, extent] : n.units) os << " " << var << " < " << extent;
          os << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, Let>) {
          os << pad << n.name << " = " << n.value << "\n";
        } else if constexpr (std::is_same_v<T, Block>) {
          if (n.scoped) os << pad << "{\n";
          for (const Stmt& c : n.body) print(os, c, depth + (n.scoped ? 1 : 0));
          if (n.scoped) os << pad << "}\n";
        } else if constexpr (std::is_same_v<T, If>) {
          os << pad << "if " << (n.condition.empty() ? "true" : n.condition) << "\n";
          print(os, n.then, depth + 1);
          if (n.otherwise) {
            os << pad << "else\n";
            print(os, n.otherwise, depth + 1);
          }
        } else if constexpr (std::is_same_v<T, Comment>) {
          os << pad << "// " << n.text << "\n";
        } else if constexpr (std::is_same_v<T, MaskedLanes>) {
          os << pad << "lanes below " << n.lanes << " on\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, TileRow>) {
          os << pad << "transposed tiles at row " << n.row << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, Stages>) {
          os << pad << "stages";
          if (!n.fold_var.empty()) os << ", index conditions folded for " << n.fold_var << " in [" << n.fold_from << ", " << n.fold_to << ")";
          os << "\n";
        } else if constexpr (std::is_same_v<T, VectorAt>) {
          os << pad << "one vector" << (n.stage_loop ? "" : " of the block") << " at " << n.var << " = " << n.at.text
             << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, StageStores>) {
          os << pad << "store";
          for (const auto& st : n.stores) os << " " << st.buffer->name;
          os << "\n";
        } else if constexpr (std::is_same_v<T, Accumulate>) {
          os << pad << "accumulate into " << n.accumulator << " of " << n.accumulators << "\n";
        } else if constexpr (std::is_same_v<T, CascadeBlockDone>) {
          os << pad << "cascade block done: terms [" << n.from << ", " << n.to << ")\n";
          print(os, n.full, depth + 1);
        } else if constexpr (std::is_same_v<T, Accumulators>) {
          print_accumulators(os, n, pad);
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, ReductionChunks>) {
          os << pad << "reduction chunks [" << n.begin << ", " << n.end << ") of [0, " << n.count << "), grain "
             << n.grain << (n.lanes ? ", in lanes" : "") << ": each returns " << n.partial << ", combined into "
             << n.state << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, MergeIntoTotals>) {
          os << pad << "merge into totals: run stages";
          for (size_t i : n.stages) os << " " << i;
          os << "\n";
        } else if constexpr (std::is_same_v<T, FinishAccumulators>) {
          os << pad << "finish accumulators" << (n.tree_row.empty() ? "" : ", into tree row " + n.tree_row) << "\n";
        } else if constexpr (std::is_same_v<T, RowBlocks>) {
          os << pad << "row blocks\n";
          for (const RowBlock& b : n.blocks) {
            os << pad << "  " << row_block_text(b) << ", opened at stage " << b.stage << (b.load ? ", loaded" : "")
               << "\n";
          }
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, ForwardSlots>) {
          os << pad << "forward slots\n";
          for (const ForwardSlot& f : n.slots) {
            os << pad << "  stage " << f.stage << ": " << f.buffer->name << "[" << f.index << "] -> slot " << f.number
               << "\n";
          }
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, StoreRowBlock>) {
          os << pad << "store " << row_block_text(n.block) << "\n";
        } else if constexpr (std::is_same_v<T, TileArrays>) {
          os << pad << "tile arrays of " << n.slots << " " << ir::to_string(n.kind) << " states over "
             << dtype_name(n.dtype) << ": " << names(n.names) << "\n";
        } else if constexpr (std::is_same_v<T, SetTileSlots>) {
          print_tile_slots(os, n, pad);
        } else if constexpr (std::is_same_v<T, Counters>) {
          os << pad << "counters " << names(n.names) << " from 0\n";
        } else if constexpr (std::is_same_v<T, TileResults>) {
          print_tile_results(os, n, pad);
        } else if constexpr (std::is_same_v<T, TileReduction>) {
          os << pad << "reduce stage " << n.stage << " in lanes over [" << n.lo.text << ", " << n.hi.text << ") from "
             << (n.from_slot ? n.slot : "the identity") << " into " << n.slot << "\n";
        } else if constexpr (std::is_same_v<T, TileCascadeDone>) {
          os << pad << "tile cascade block done: " << n.terms << " += " << n.added << ", full at " << n.block_terms
             << "\n";
          print(os, n.full, depth + 1);
          for (size_t l = 0; l < n.merges.size(); ++l) {
            os << pad << "  merges counted in " << n.merges[l] << ", full:\n";
            print(os, n.levels[l], depth + 2);
          }
        } else if constexpr (std::is_same_v<T, TileChunks>) {
          os << pad << "tile chunks [" << n.begin << ", " << n.end << ") of [0, " << n.count << "), grain " << n.grain
             << ": each returns " << n.tile << "'s first " << n.used << " slots (at most " << n.vectors
             << "), combined into " << n.tile << " of " << n.slots << "\n";
          print(os, n.body, depth + 1);
        } else if constexpr (std::is_same_v<T, TargetPart>) {
          os << pad << n.what;
          for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", " : " ") << n.args[i];
          os << "\n";
        }
      },
      s->node);
}

}  // namespace

Stmt map_children(const Stmt& s, const std::function<Stmt(const Stmt&)>& f) {
  if (!s) return s;
  StmtNode copy = *s;
  bool changed = false;
  std::visit(
      [&](auto& n) {
        for (Stmt* c : children(n)) {
          if (!*c) continue;
          Stmt mapped = f(*c);
          changed |= mapped != *c;
          *c = std::move(mapped);
        }
      },
      copy.node);
  return changed ? std::make_shared<const StmtNode>(std::move(copy)) : s;
}

std::string to_text(const Stmt& s) {
  std::ostringstream os;
  print(os, s, 0);
  return os.str();
}

VectorSplit split_at_whole_vectors(const std::string& var, const Bound& lo, const Bound& hi, int64_t width) {
  VectorSplit split;
  if (lo.value && hi.value) {
    const int64_t vend = *lo.value + (*hi.value - *lo.value) / width * width;
    if (vend > *lo.value) split.main = {std::to_string(*lo.value), std::to_string(vend)};
    if (vend < *hi.value) split.rest = {std::to_string(vend), std::to_string(*hi.value)};
    return split;
  }
  const std::string lo_name = var + "_lo", vend = var + "_vec_end", hi_name = var + "_end";
  split.lets = {Let{lo_name, lo.text}, Let{hi_name, hi.text},
                Let{vend, cat(lo_name, " + (", hi_name, " - ", lo_name, ") / ", width, " * ", width)}};
  split.main = {lo_name, vend};
  split.rest = {vend, hi_name};
  return split;
}

MaskedRest masked_rest(const std::string& var, const std::string& vend, const std::string& end, bool known) {
  return MaskedRest{known ? std::string() : cat(vend, " < ", end),
                    cat(var, " from ", vend, ": one vector, its lanes from ", end, " on turned off"),
                    known ? std::to_string(std::stoll(end) - std::stoll(vend)) : cat("(", end, " - ", vend, ")")};
}

}  // namespace cppi::codegen
