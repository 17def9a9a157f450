/// \file
/// What the CPU schedule (cpu_schedule.cpp) asks about vectorising a loop:
/// how the accesses of a kernel's stages move along one loop variable, whether
/// that is worth vectors and of which width, and whether a stage loop's last
/// partial vector can run masked (TailKind::Masked). Internal to the
/// schedule.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "cpu_codegen/schedule/cpu_schedule.h"
#include "lowering/ir/kernel.h"

namespace cppi::cpu::detail {

/// What the accesses of some expressions look like along one loop variable.
struct AccessCounts {
  int contiguous = 0;  // stride-1 loads
  int strided = 0;     // strided_load: a few whole vectors each
  int repeated = 0;    // repeated_load: part of a vector, its elements repeated
  int broadcast = 0;   // loads that do not move with the variable
  int gathers = 0;     // lane-by-lane work: other strides, masked, random, non-affine
  int transposed = 0;  // transposed_load along the scanner's tile variable (not in gathers)
  int row_blocks = 0;        // row_block_access loads of 4- or 8-byte elements, when asked
  int row_block_stores = 0;  // row_block_access stores of them (in `stores`, not in bad_stores)
  std::set<std::string> transposed_buffers;
  int bad_stores = 0;      // stores that are neither stride 1 nor strided_stores
  int strided_stores = 0;  // plain stores of a constant stride other than 0 and 1: lane by lane (also in `stores`)
  int stores = 0;
  int max_lane_bytes = 4;
  bool unsupported = false;  // something the vector printer cannot do
};

/// Adds the accesses of `stage` along `var` to `counts`. `tile_var`: when
/// set, loads that are transposed_load along var and it count as
/// `transposed` instead of gathers. `row_blocks`: accesses of 4- or 8-byte
/// elements that are row_block_access along var and the stage's one loop
/// count as row_blocks / row_block_stores.
void scan_stage(const ir::Stage& stage, const std::string& var, AccessCounts* counts, const std::string& tile_var = "",
                bool row_blocks = false);
/// Whether loads and stores so counted run well in vectors: every store
/// stride 1, a row block or of a constant stride, and at most one gathered
/// load or strided store per two whole-vector loads.
bool worth_vectorizing(const AccessCounts& c);
/// "3 contiguous, 1 broadcast, 0 gathered loads" for the schedule's reasons.
std::string describe_loads(const AccessCounts& c);

/// The vector width in {16, 8, 4} for lanes of `max_lane_bytes` and loops of
/// these extents: the host's, halved while a constant extent is shorter
/// than a vector (0 if even 4 lanes are too many). With a masked tail a vector
/// may be longer than the loop (its lanes past the end are off), so the
/// width is the shortest that covers the loop in one vector: a row of 7
/// takes 8 lanes, one call of a vector exp, where 4 lanes and 3 scalars were
/// four.
int pick_width(const CpuTarget& target, int max_lane_bytes, const std::vector<ir::IndexExpr>& extents,
               bool masked_tail = false);
/// Whether the lanes a masked tail turns off (TailKind::Masked) can compute
/// whatever they like. They load zeros: an integer division by a value
/// loaded there would trap, and nonzero_divisor would report a zero that
/// the program never divides by. Where the lanes combine (`lanes_combine`:
/// a stage loop's vector, reduced horizontally) only reductions whose
/// identity can stand in for a lane that is off (sum, prod, max, min, any,
/// all) take part: welford counts its lanes, and an arg reduction's lanes
/// carry positions; a scan runs in order along its loop and has no tail.
/// A vectorised outer loop's lanes are separate outputs and never combine.
bool masked_tail_safe(const ir::Kernel& k, bool lanes_combine = true);
/// Whether a stage loop's last partial vector is worth running as one masked
/// vector. With AVX-512 (masked moves: one load or store of the lanes that
/// are on) it always is: without, a row of 7 floats is 4 lanes and 3 scalar
/// steps per stage (layer_norm over 10^6 rows of 7). Elsewhere the partial
/// loads and stores go lane by lane, which pays only where a stage calls a
/// math function (exp, log, tanh, ...): a scalar tail calls its vector form
/// once per element, so every lane and tail element computes the same bits
/// (softmax over 10^6 rows of 7).
bool masked_tail_pays(const ir::Kernel& k, const CpuTarget& target);

}  // namespace cppi::cpu::detail
