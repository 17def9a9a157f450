/// \file
/// Internal to lowering/fusion: compute nodes as fusion sees them. Fusion
/// first drops loops of extent 1 (a keepdim reduction's [rows, 1] becomes
/// [rows]) so that iteration spaces compare by their extents alone, and
/// substitutes cheap pointwise producers into their readers. Both return new
/// nodes; the node list of the LoweredGraph is never modified.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lowering/ir/node.h"

namespace cppi::lowering::fusion {

bool is_reduction(const ir::ComputeNode& n);
/// A running sum or product: a kernel of its own, which pointwise producers
/// may still be substituted into (ir::ScanNode).
bool is_scan(const ir::ComputeNode& n);
/// A pointwise node whose store accumulates (index_put(accumulate=True),
/// scatter_add): it keeps a kernel of its own (see ir::Store).
bool accumulates(const ir::ComputeNode& n);
/// Extents of the pointwise loops x0..xn-1.
const std::vector<ir::IndexExpr>& ranges_of(const ir::ComputeNode& n);
const std::vector<std::string>& origins_of(const ir::ComputeNode& n);
ir::Device device_of(const ir::ComputeNode& n);
/// Whether `n` is pointwise and computes a host scalar from host scalars
/// alone (ir::is_host_scalar: a 0-d CPU tensor from lifted Python scalars),
/// so that a kernel on `device` can evaluate it wherever it reads the result.
bool computes_host_scalar(const ir::ComputeNode& n, ir::Device device);
ir::VarRanges var_ranges_of(const ir::ComputeNode& n);
/// Names of the buffers a node loads / stores.
std::set<std::string> read_buffers(const ir::ComputeNode& n);
std::set<std::string> written_buffers(const ir::ComputeNode& n);
/// The value expressions of a node (the store's value, or the reduction body).
ir::Expr value_of(const ir::ComputeNode& n);

/// The name remarks use: the first FX origin, else the node's name.
std::string display_name(const ir::ComputeNode& n);
/// `s` with every character that may not appear in a C identifier replaced
/// by '_' (kernel names, LocalRef names).
std::string c_identifier(const std::string& s);
/// "[s0, 64]".
std::string format_ranges(const std::vector<ir::IndexExpr>& ranges);

/// The same node without loops of extent 1 (their variables become 0 and
/// the remaining variables are renumbered x0.., r0..).
ir::ComputeNode drop_unit_loops(const ir::ComputeNode& n);

/// The substitution that puts `producer`'s variables at `point` (one
/// expression per producer loop, over a reader's variables; a ReadMap point).
std::map<std::string, ir::IndexExpr> at_point(const ir::PointwiseNode& producer,
                                              const std::vector<ir::IndexExpr>& point);

/// `reader` with every load of `producer`'s output replaced by the
/// producer's value at the point the load reads. `points[i]` is, for the
/// i-th distinct access of the buffer in ir::reads(reader) order, the
/// producer's point (one expression per producer loop, over the reader's
/// variables). A masked load becomes where(mask, value, 0) with the mask
/// pushed into the value's own loads, so no load runs where the mask is false.
ir::ComputeNode inline_producer(const ir::ComputeNode& reader, const ir::PointwiseNode& producer,
                                const std::vector<ir::Access>& accesses,
                                const std::vector<std::vector<ir::IndexExpr>>& points,
                                std::vector<std::string> origins);

}  // namespace cppi::lowering::fusion
