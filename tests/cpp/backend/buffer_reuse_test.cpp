// The buffer reuse planner on hand-built plans: which allocation takes over
// which dead buffer, and which never may.
#include <gtest/gtest.h>

#include "graph_builders.h"

#include "backend/buffer_reuse.h"
#include "backend/wrapper.h"

namespace cppi {
namespace {

using testing::node_arg;

/// A plan under construction: graph nodes, then steps over their slots.
struct PlanBuilder {
  CompiledGraph cg;

  int node(const std::string& name, Node::Op op, const std::string& target, std::vector<int> args = {}) {
    Node n;
    n.name = name;
    n.op = op;
    n.target = target;
    for (int a : args) n.args.push_back(node_arg(a));
    cg.graph.nodes.push_back(n);
    return static_cast<int>(cg.graph.nodes.size()) - 1;
  }
  int input(const std::string& name) { return node(name, Node::Op::Placeholder, "placeholder"); }
  /// A value a kernel computes (it is a graph node so ATen steps can read it).
  int computed(const std::string& name) { return node(name, Node::Op::CallFunction, "aten.relu.default"); }
  /// Gives node `n` the FX layout of an 8x8 float tensor (an extern result's
  /// size comes from it).
  void square_tensor_value(int n) {
    ValueInfo value;
    value.kind = ValueInfo::Kind::Tensor;
    value.tensor.sizes = {SizeExpr::constant(8), SizeExpr::constant(8)};
    value.tensor.strides = {SizeExpr::constant(8), SizeExpr::constant(1)};
    value.tensor.storage_offset = SizeExpr::constant(0);
    cg.graph.nodes[n].value = value;
  }

  void kernel(std::vector<int> buffers, std::vector<Allocation> allocs) {
    Step s;
    s.kind = Step::Kind::Kernel;
    s.kernel = static_cast<int>(cg.steps.size());
    s.buffers = std::move(buffers);
    s.allocs = std::move(allocs);
    cg.steps.push_back(std::move(s));
  }
  void aten(int node, bool is_extern) {
    Step s;
    s.kind = Step::Kind::Aten;
    s.node = node;
    s.is_extern = is_extern;
    cg.steps.push_back(std::move(s));
  }
  /// Closes the graph with an output node and plans frees and reuse.
  /// Internal buffers take the slots after the output node.
  CompiledGraph& plan(std::vector<int> outputs, int internal_buffers = 0) {
    Node out;
    out.name = "output";
    out.op = Node::Op::Output;
    out.target = "output";
    Arg list;
    list.kind = Arg::Kind::List;
    for (int o : outputs) list.list.push_back(node_arg(o));
    out.args.push_back(list);
    cg.graph.nodes.push_back(out);
    cg.num_slots = static_cast<int>(cg.graph.nodes.size()) + internal_buffers;
    plan_frees(cg);
    plan_buffer_reuse(cg);
    return cg;
  }
};

Allocation alloc(int slot, std::vector<ir::IndexExpr> sizes, std::vector<ir::IndexExpr> strides,
                 DType dtype = DType::Float32, Device device = Device::CPU, int device_index = 0) {
  Allocation a;
  a.slot = slot;
  a.sizes = std::move(sizes);
  a.strides = std::move(strides);
  a.dtype = dtype;
  a.device = device;
  a.device_index = device_index;
  return a;
}

Allocation square(int slot, DType dtype = DType::Float32, Device device = Device::CPU, int device_index = 0) {
  return alloc(slot, {8, 8}, {8, 1}, dtype, device, device_index);
}

const Allocation& allocation_of(const CompiledGraph& cg, int slot) {
  for (const Step& s : cg.steps)
    for (const Allocation& a : s.allocs)
      if (a.slot == slot) return a;
  throw std::runtime_error("no allocation");
}

bool freed_anywhere(const CompiledGraph& cg, int slot) {
  for (const Step& s : cg.steps)
    for (int f : s.free_after)
      if (f == slot) return true;
  return false;
}

/// x -> k0 -> r1 -> mm1 -> k1 -> r2 -> mm2 -> k2 -> r3 (returned): the chain
/// of unfusable intermediates that extern matmuls separate.
TEST(BufferReuse, ReusesABufferThatDiedBeforeTheAllocation) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int r1 = b.computed("r1");
  int mm1 = b.node("mm1", Node::Op::CallFunction, "aten.mm.default", {r1, w});
  int r2 = b.computed("r2");
  int mm2 = b.node("mm2", Node::Op::CallFunction, "aten.mm.default", {r2, w});
  int r3 = b.computed("r3");
  b.kernel({x, r1}, {square(r1)});
  b.aten(mm1, true);
  b.kernel({mm1, r2}, {square(r2)});
  b.aten(mm2, true);
  b.kernel({mm2, r3}, {square(r3)});
  const CompiledGraph& cg = b.plan({r3});

  EXPECT_EQ(allocation_of(cg, r2).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r3).reuse, -1) << "a returned buffer is always fresh";
  // r1's storage changes hands at r2's allocation: it is not freed before.
  EXPECT_FALSE(freed_anywhere(cg, r1));
  EXPECT_TRUE(freed_anywhere(cg, r2));
  AllocationCounts counts = count_allocations(cg);
  EXPECT_EQ(counts.fresh, 2);
  EXPECT_EQ(counts.reused, 1);
}

TEST(BufferReuse, RefusesWhenLifetimesOverlap) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3");
  b.kernel({x, r1}, {square(r1)});
  b.kernel({r1, r2}, {square(r2)});  // reads r1 while writing r2: r1 is still live
  b.kernel({r2, r3}, {square(r3)});
  const CompiledGraph& cg = b.plan({r3});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1);
  EXPECT_EQ(count_allocations(cg).reused, 0);
}

TEST(BufferReuse, InternalBuffersReuseToo) {
  PlanBuilder b;
  int x = b.input("x"), out = b.computed("out");
  int nodes = 3;  // x, out, output: internal buffers take slots after them
  int buf_a = nodes, buf_b = nodes + 1, buf_c = nodes + 2;
  b.kernel({x, buf_a}, {square(buf_a)});
  b.kernel({buf_a, buf_b}, {square(buf_b)});
  b.kernel({buf_b, buf_c}, {square(buf_c)});  // buf_a died at step 1
  b.kernel({buf_c, out}, {square(out)});
  const CompiledGraph& cg = b.plan({out}, 3);
  EXPECT_EQ(allocation_of(cg, buf_c).reuse, buf_a);
  EXPECT_EQ(allocation_of(cg, out).reuse, -1);
}

TEST(BufferReuse, AnAliasKeepsTheStorageAlive) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int r1 = b.computed("r1");
  int v = b.node("v", Node::Op::CallFunction, "aten.view.default", {r1});  // may alias r1
  int r2 = b.computed("r2");
  int mm = b.node("mm", Node::Op::CallFunction, "aten.mm.default", {v, w});
  int r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {square(r1)});
  b.aten(v, false);                     // r1's last direct use
  b.kernel({x, r2}, {square(r2)});      // r1's storage is still live through v
  b.aten(mm, true);                     // v's last use
  b.kernel({mm, r2, r3}, {square(r3)});  // now it is dead
  b.kernel({r3, r4}, {square(r4)});
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1);
  EXPECT_EQ(allocation_of(cg, r3).reuse, r1);
}

TEST(BufferReuse, NeverReusesAStorageAReturnedViewAliases) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1");
  int v = b.node("v", Node::Op::CallFunction, "aten.view.default", {r1});
  int r2 = b.computed("r2"), r3 = b.computed("r3");
  b.kernel({x, r1}, {square(r1)});
  b.aten(v, false);
  b.kernel({x, r2}, {square(r2)});
  b.kernel({r2, r3}, {square(r3)});
  const CompiledGraph& cg = b.plan({v, r3});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1) << "v is returned and shares r1's storage";
}

TEST(BufferReuse, ExternResultsAreFreshTensorsNotAliases) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int r1 = b.computed("r1");
  int mm = b.node("mm", Node::Op::CallFunction, "aten.mm.default", {r1, w});
  int r2 = b.computed("r2");
  b.kernel({x, r1}, {square(r1)});
  b.aten(mm, true);  // returned, but an extern's result does not alias r1
  b.kernel({x, r2}, {square(r2)});
  const CompiledGraph& cg = b.plan({mm, r2});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1) << "r2 is returned";
  PlanBuilder c;
  x = c.input("x"), w = c.input("w");
  r1 = c.computed("r1");
  mm = c.node("mm", Node::Op::CallFunction, "aten.mm.default", {r1, w});
  r2 = c.computed("r2");
  int r3 = c.computed("r3");
  c.kernel({x, r1}, {square(r1)});
  c.aten(mm, true);
  c.kernel({x, r2}, {square(r2)});
  c.kernel({r2, r3}, {square(r3)});
  const CompiledGraph& cg2 = c.plan({mm, r3});
  EXPECT_EQ(allocation_of(cg2, r2).reuse, r1) << "mm is returned, yet r1 is dead";
}

TEST(BufferReuse, NeverAcrossDevices) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {square(r1, DType::Float32, Device::CUDA, 0)});
  b.kernel({r1, r2}, {square(r2, DType::Float32, Device::CUDA, 0)});
  b.kernel({r2, r3}, {square(r3, DType::Float32, Device::CPU)});       // r1 died: another device
  b.kernel({r3, r4}, {square(r4, DType::Float32, Device::CUDA, 1)});   // another CUDA device
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, r3).reuse, -1);
  EXPECT_EQ(allocation_of(cg, r4).reuse, -1);
}

TEST(BufferReuse, MatchesByteSizeAcrossDtypes) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  int r5 = b.computed("r5"), r6 = b.computed("r6");
  b.kernel({x, r1}, {square(r1)});                                    // 256 bytes
  b.kernel({r1, r2}, {square(r2, DType::Float64)});                   // 512 bytes
  b.kernel({r2, r3}, {alloc(r3, {8, 4}, {4, 1}, DType::Int64)});      // 256 bytes: r1's
  b.kernel({r3, r4}, {alloc(r4, {4, 16}, {1, 4}, DType::Float64)});   // 512 bytes: r2's
  b.kernel({r4, r5}, {alloc(r5, {4, 4}, {4, 1}, DType::Float16)});    // 32 bytes: all too large
  b.kernel({r5, r6}, {square(r6)});
  const CompiledGraph& cg = b.plan({r6});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1);
  EXPECT_EQ(allocation_of(cg, r3).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r4).reuse, r2);
  EXPECT_EQ(allocation_of(cg, r5).reuse, -1);
}

TEST(BufferReuse, ALargerStaticBufferServesUpToTwiceItsNeed) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  int r5 = b.computed("r5"), r6 = b.computed("r6");
  b.kernel({x, r1}, {alloc(r1, {8, 16}, {16, 1})});  // 512 bytes
  b.kernel({r1, r2}, {alloc(r2, {8, 6}, {6, 1})});   // 192 bytes
  b.kernel({r2, r3}, {alloc(r3, {8, 12}, {12, 1})});  // 384 bytes: r1's 512 (r2's 192 is too small)
  b.kernel({r3, r4}, {alloc(r4, {8, 3}, {3, 1})});   // 96 bytes: only r2's 192, not r1's 512
  b.kernel({r4, r5}, {alloc(r5, {8, 16}, {16, 1})});  // 512 bytes: r1's storage again, through r3
  b.kernel({r5, r6}, {square(r6)});
  const CompiledGraph& cg = b.plan({r6});
  EXPECT_EQ(allocation_of(cg, r3).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r4).reuse, r2);
  EXPECT_EQ(allocation_of(cg, r5).reuse, r3) << "r3 holds r1's 512 bytes";
}

TEST(BufferReuse, ExactSizeWinsOverALargerBuffer) {
  PlanBuilder c;
  int x = c.input("x");
  int r1 = c.computed("r1"), r2 = c.computed("r2"), r3 = c.computed("r3"), r4 = c.computed("r4");
  int r5 = c.computed("r5");
  c.kernel({x, r2}, {square(r2)});                    // 256 bytes
  c.kernel({x, r1}, {alloc(r1, {8, 10}, {10, 1})});   // 320 bytes
  c.kernel({r1, r2, r3}, {alloc(r3, {4, 4}, {4, 1})});
  c.kernel({r3, r4}, {square(r4)});                   // r2's exact 256, though r1 died as recently
  c.kernel({r4, r5}, {square(r5)});
  const CompiledGraph& cg2 = c.plan({r5});
  EXPECT_EQ(allocation_of(cg2, r4).reuse, r2);
}

TEST(BufferReuse, AnExternResultIsASourceOnceDead) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int r1 = b.computed("r1");
  int mm = b.node("mm", Node::Op::CallFunction, "aten.mm.default", {r1, w});
  b.square_tensor_value(mm);
  int r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {square(r1)});
  b.aten(mm, true);
  b.kernel({mm, x, r2}, {square(r2)});  // r1 is dead: r2 takes it
  b.kernel({r2, r3}, {square(r3)});     // mm is dead: r3 takes the extern's result
  b.kernel({r3, r4}, {square(r4)});
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, r2).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r3).reuse, mm);
  EXPECT_FALSE(freed_anywhere(cg, mm));
}

/// A CPU matmul extern that writes through its out= variant
/// (backend/wrapper.cpp) has an allocation like a kernel's output: it takes a
/// buffer that died before the call, never one the call itself reads, and
/// its result is then a source like any kernel buffer.
TEST(BufferReuse, AnExternWithAnOutBufferTakesADeadOneButNotItsOperand) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int r1 = b.computed("r1"), r2 = b.computed("r2");
  int mm1 = b.node("mm1", Node::Op::CallFunction, "aten.mm.default", {r2, w});
  int mm2 = b.node("mm2", Node::Op::CallFunction, "aten.mm.default", {mm1, w});
  int r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {square(r1)});
  b.kernel({r1, r2}, {square(r2)});  // r1 dies here
  b.aten(mm1, true);
  b.cg.steps.back().allocs = {square(mm1)};  // r2 dies in this step: not its to take
  b.aten(mm2, true);
  b.cg.steps.back().allocs = {square(mm2)};
  b.kernel({mm2, r3}, {square(r3)});
  b.kernel({r3, r4}, {square(r4)});
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, mm1).reuse, r1);
  EXPECT_FALSE(allocation_of(cg, mm1).in_place);
  EXPECT_EQ(allocation_of(cg, mm2).reuse, r2) << "r2 died at mm1's step, before mm2";
  EXPECT_EQ(allocation_of(cg, r3).reuse, mm1);
  EXPECT_FALSE(freed_anywhere(cg, r1));
}

TEST(BufferReuse, SymbolicSizesCompareAsExpressions) {
  ir::IndexExpr s0 = ir::sym("s0"), s1 = ir::sym("s1");
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {alloc(r1, {s0, 8}, {8, 1})});
  b.kernel({r1, r2}, {alloc(r2, {s1, 8}, {8, 1})});
  b.kernel({r2, r3}, {alloc(r3, {8, s0}, {1, 8})});     // 32*s0 bytes: r1's, transposed
  b.kernel({r3, r4}, {alloc(r4, {s0, 8}, {8, 1})});     // s1 rows would not do
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, r2).reuse, -1) << "s1 rows are not s0 rows";
  EXPECT_EQ(allocation_of(cg, r3).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r4).reuse, -1) << "r4 is returned";
}

TEST(BufferReuse, TakesTheMostRecentlyFreedAndChains) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  int r5 = b.computed("r5");
  b.kernel({x, r1}, {square(r1)});
  b.kernel({r1, r2}, {square(r2)});
  b.kernel({r2, r3}, {square(r3)});  // r1 is free
  b.kernel({r3, r4}, {square(r4)});  // r2 is free (and r1 is taken)
  b.kernel({r4, r5}, {square(r5)});
  const CompiledGraph& cg = b.plan({r5});
  EXPECT_EQ(allocation_of(cg, r3).reuse, r1);
  EXPECT_EQ(allocation_of(cg, r4).reuse, r2);
  EXPECT_EQ(count_allocations(cg).fresh, 3);
}

TEST(BufferReuse, NeverTakesAZeroSizedOrPossiblyEmptyBuffer) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3");
  b.kernel({x, r1}, {alloc(r1, {0, 8}, {8, 1})});
  b.kernel({r1, r2}, {square(r2)});
  b.kernel({r2, r3}, {alloc(r3, {0, 8}, {8, 1})});
  const CompiledGraph& cg = b.plan({r3});
  EXPECT_EQ(count_allocations(cg).reused, 0);
}

/// An allocation its kernel may write over `sources` (what build_wrapper_steps
/// finds with ir::can_write_over).
Allocation over(Allocation a, std::vector<int> sources) {
  a.overwritable = std::move(sources);
  return a;
}

TEST(BufferReuse, AKernelWritesInPlaceOverAnInputItReadsForTheLastTime) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int mm = b.node("mm", Node::Op::CallFunction, "aten.mm.default", {x, w});
  b.square_tensor_value(mm);
  int relu = b.computed("relu");
  b.aten(mm, true);
  b.kernel({mm, relu}, {over(square(relu), {mm})});
  const CompiledGraph& cg = b.plan({relu});
  const Allocation& a = allocation_of(cg, relu);
  EXPECT_EQ(a.reuse, mm) << "returned buffers too: the mm result was made in this call";
  EXPECT_TRUE(a.in_place);
  // The kernel still reads mm: it is freed after the kernel, not at the allocation.
  ASSERT_EQ(cg.steps[1].free_after.size(), 1u);
  EXPECT_EQ(cg.steps[1].free_after[0], mm);
}

TEST(BufferReuse, NotInPlaceOverAnInputThatLivesOnOrIsTheCallers) {
  PlanBuilder b;
  int x = b.input("x"), w = b.input("w");
  int mm = b.node("mm", Node::Op::CallFunction, "aten.mm.default", {x, w});
  b.square_tensor_value(mm);
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3");
  b.aten(mm, true);
  b.kernel({mm, r1}, {over(square(r1), {mm})});  // mm is read again below
  b.kernel({mm, r2}, {square(r2)});
  b.kernel({x, r3}, {over(square(r3), {x})});  // x is a graph input
  const CompiledGraph& cg = b.plan({r1, r2, r3});
  EXPECT_EQ(allocation_of(cg, r1).reuse, -1);
  EXPECT_EQ(allocation_of(cg, r3).reuse, -1);
}

TEST(BufferReuse, InPlaceComesBeforeADeadBufferAndChains) {
  PlanBuilder b;
  int x = b.input("x");
  int r1 = b.computed("r1"), r2 = b.computed("r2"), r3 = b.computed("r3"), r4 = b.computed("r4");
  b.kernel({x, r1}, {square(r1)});
  b.kernel({r1, r2}, {square(r2)});
  b.kernel({r2, r3}, {over(square(r3), {r2})});  // r1 is dead too, but r3 may go where r2 is
  b.kernel({r3, r4}, {over(square(r4), {r3})});
  const CompiledGraph& cg = b.plan({r4});
  EXPECT_EQ(allocation_of(cg, r3).reuse, r2);
  EXPECT_TRUE(allocation_of(cg, r3).in_place);
  EXPECT_EQ(allocation_of(cg, r4).reuse, r3) << "r3 holds r2's storage now";
  EXPECT_EQ(count_allocations(cg).fresh, 2);
}

}  // namespace
}  // namespace cppi
