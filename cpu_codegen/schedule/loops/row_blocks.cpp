/// open_row_blocks (CpuSchedule::row_blocks): around the stages of a vector
/// of outer iterations, the row blocks they walk, each opened before the
/// first stage that reads or stores it, and after them the stores of those
/// a stage stored.
#include <map>
#include <set>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/loops/loop_nest.h"
#include "support/status.h"

namespace cppi::cpu {

using codegen::Stmt;
using codegen::stmt;

namespace {

/// The block an access walks: its rows' start (C text) and length; nullopt
/// for an access that walks none.
std::optional<std::pair<std::string, int64_t>> block_of(const ir::BufferPtr& buffer, const ir::IndexExpr& index,
                                                        bool masked, const std::string& vector_var,
                                                        const ir::Loop& row_loop, const LoopNestInput& in) {
  const auto rows = row_block_access(buffer->dtype, index, masked, vector_var, row_loop);
  if (!rows) return std::nullopt;
  return std::pair{in.index(row_block_start(index, row_loop)), *rows};
}

std::string key_of(const std::string& buffer, const std::pair<std::string, int64_t>& at) {
  return cat(buffer, "[", at.first, "] x ", at.second);
}

/// The Stages leaf `stages` in the vector loop `vector_var`, with the row
/// blocks its stages walk around it; `stages` where they walk none.
Stmt with_row_blocks(const Stmt& stages, const std::string& vector_var, const LoopNestInput& in) {
  std::vector<codegen::RowBlock> blocks;
  std::map<std::string, size_t> by_key;  // buffer[start] x rows -> blocks' index
  std::set<std::string> stored;
  const std::set<std::string> written = ir::written_buffers(in.k);
  for (size_t i = 0; i < in.k.stages.size(); ++i) {
    const ir::Stage& s = in.k.stages[i];
    const auto& loops = ir::loops_of(s);
    // A scan keeps its running value, not row blocks.
    if (std::holds_alternative<ir::ScanStage>(s) || loops.size() != 1) continue;
    auto open = [&](const ir::Access& a, bool load) {
      const auto at = block_of(a.buffer, a.index, a.masked, vector_var, loops[0], in);
      if (!at) return;
      const std::string key = key_of(a.buffer->name, *at);
      if (by_key.count(key)) return;
      // The schedule checked that a stored block is first stored, then read.
      if (load && written.count(a.buffer->name)) in.fail(cat("row block ", key, " loaded before a stage stores it"));
      by_key[key] = blocks.size();
      blocks.push_back(codegen::RowBlock{static_cast<int>(blocks.size()), a.buffer, at->first, at->second, i, load});
    };
    for (const auto& a : ir::reads(s)) open(a, true);
    for (const auto& a : ir::writes(s)) open(a, false);
    const auto* p = std::get_if<ir::PointwiseStage>(&s);
    for (const auto& st : p ? p->stores : std::vector<ir::Store>{}) {
      // An accumulating store adds to memory, not to its row block.
      const auto at = st.accumulate ? std::nullopt : block_of(st.buffer, st.index, false, vector_var, loops[0], in);
      if (at) stored.insert(key_of(st.buffer->name, *at));
    }
  }
  if (blocks.empty()) return stages;
  std::vector<Stmt> body{stages};
  for (const auto& [key, i] : by_key) {
    if (stored.count(key)) body.push_back(stmt(codegen::StoreRowBlock{blocks[i]}));
  }
  return stmt(codegen::RowBlocks{std::move(blocks), codegen::block(std::move(body))});
}

Stmt open_in(const Stmt& s, const std::string& vector_var, const LoopNestInput& in) {
  std::string inner = vector_var;
  if (const auto* l = std::get_if<codegen::For>(&s->node); l && l->kind == codegen::LoopKind::Vector) inner = l->var;
  if (const auto* v = std::get_if<codegen::VectorAt>(&s->node)) inner = v->var;
  if (const auto* st = std::get_if<codegen::Stages>(&s->node); st && st->fold_var.empty() && !inner.empty()) {
    return with_row_blocks(s, inner, in);
  }
  return codegen::map_children(s, [&](const Stmt& c) { return open_in(c, inner, in); });
}

}  // namespace

codegen::Stmt open_row_blocks(const codegen::Stmt& s, const LoopNestInput& in) {
  return in.s.row_blocks ? open_in(s, "", in) : s;
}

const codegen::RowBlock* find_row_block(const codegen::RowBlocks& r, const ir::BufferPtr& buffer,
                                        const ir::IndexExpr& index, bool masked, const std::string& vector_var,
                                        const ir::Loop& row_loop, const LoopNestInput& in) {
  const auto at = block_of(buffer, index, masked, vector_var, row_loop, in);
  if (!at) return nullptr;
  for (const codegen::RowBlock& b : r.blocks) {
    if (b.buffer->name == buffer->name && b.start == at->first && b.rows == at->second) return &b;
  }
  in.fail(cat("a row block of ", buffer->name, " that no stage opened"));
}

}  // namespace cppi::cpu
