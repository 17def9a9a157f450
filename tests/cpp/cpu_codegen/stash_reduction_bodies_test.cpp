// stash_reduction_bodies: where it applies (softmax rows), the rewritten IR,
// one exp in the printed code, numerics against the interpreter; and every
// condition that keeps a kernel unchanged.
#include <gtest/gtest.h>

#include <string>

#include "cpu_codegen/printer/cpu_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "cpu_codegen/schedule/stash_reduction_bodies.h"
#include "kernel_builders.h"
#include "lowering/ir/printer.h"

namespace cppi::cpu::test {
namespace {

using namespace ir;

CpuTarget target() {
  CpuTarget t;
  t.vector_bytes = 64;
  t.num_threads = 8;
  t.min_parallel_work = 4096;
  return t;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Variant {
  DType out_dtype = DType::Float32;
  bool exp_body = true;       // sum of exp(x - max); else sum of (x - max)
  bool out_is_input = false;  // softmax written over its input
  bool shift_by_max = true;   // exp(x - max); else exp(x - 1)
};

/// softmax_kernel's structure with the knobs of Variant.
KernelPtr softmax_like(int64_t rows, int64_t cols, const Variant& v = {}) {
  auto in = input("arg0", DType::Float32, {rows, cols});
  auto out = v.out_is_input ? in : output("buf0", v.out_dtype, {rows, cols});
  IndexExpr x0 = var("x0"), r0 = var("r0"), c0 = var("c0");
  auto x = [&](const IndexExpr& col) { return load(in, x0 * cols + col); };
  auto amax = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Max, x(r0), {"amax"});
  auto body = [&](const IndexExpr& col) {
    Expr shifted = binary(BinaryOp::Sub, x(col), v.shift_by_max ? amax.result() : const_float(1, DType::Float32));
    return v.exp_body ? unary(UnaryOp::Exp, shifted) : shifted;
  };
  auto denom = ReductionStage::make({Loop{r0, cols}}, ReductionKind::Sum, body(r0), {"denom"});
  Expr value = binary(BinaryOp::TrueDiv, body(c0), denom.result());
  if (v.out_dtype != DType::Float32) value = cast(value, v.out_dtype);
  PointwiseStage norm{{Loop{c0, cols}}, {Store::make(out, x0 * cols + c0, value)}};
  return Kernel::make("softmax_0", Device::CPU, {Loop{x0, rows}}, {amax, denom, norm});
}

TEST(StashReductionBodies, SoftmaxComputesExpOnceAndKeepsItsResults) {
  auto k = softmax_like(37, 1000);
  auto stashed = stash_reduction_bodies(k);
  ASSERT_FALSE(stashed.get() == k.get());
  ASSERT_EQ(stashed->stages.size(), 4u);
  const auto* store = std::get_if<PointwiseStage>(&stashed->stages[1]);
  const auto* sum = std::get_if<ReductionStage>(&stashed->stages[2]);
  const auto* norm = std::get_if<PointwiseStage>(&stashed->stages[3]);
  ASSERT_TRUE(store && sum && norm);
  EXPECT_EQ(store->stores[0].buffer->name, "buf0");
  ASSERT_TRUE(store->stores[0].value.as<Unary>());
  EXPECT_EQ(store->stores[0].value.as<Unary>()->op, UnaryOp::Exp);
  ASSERT_TRUE(sum->body.as<Load>());
  EXPECT_EQ(sum->body.as<Load>()->buffer->name, "buf0");
  EXPECT_EQ(sum->results, std::vector<std::string>{"denom"});
  EXPECT_EQ(to_string(norm->stores[0].value).find("exp"), std::string::npos) << to_string(norm->stores[0].value);
  // The sum is in [1, cols]: the normalisation multiplies by its reciprocal.
  ASSERT_TRUE(norm->stores[0].value.as<Binary>());
  EXPECT_EQ(norm->stores[0].value.as<Binary>()->op, BinaryOp::Mul);

  auto scheduled = schedule_for_cpu(stashed, target());
  auto m = print_cpu_module({scheduled}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string text = m->source.substr(m->source.find("// kernel: "));
  EXPECT_EQ(count(text, "cppi_exp("), 2u) << text;  // vector loop and its scalar tail
  auto before = print_cpu_module({schedule_for_cpu(k, target())}, {});
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(count(before->source.substr(before->source.find("// kernel: ")), "cppi_exp("), 4u);
  RunOptions o;
  o.specials = true;  // NaN and inf rows propagate as before
  EXPECT_EQ(run_and_compare(scheduled, o), "");
  EXPECT_EQ(run_and_compare(schedule_for_cpu(stash_reduction_bodies(softmax_like(5, 3)), target()), o), "");
}

TEST(StashReductionBodies, TheStagesAfterReadTheStashedExpFromRegisters) {
  // Rows of 7 go in lanes: the sum and the normalisation read exp(x - max)
  // from the row block the first pass filled, stored once at the end.
  const auto k = schedule_for_cpu(stash_reduction_bodies(softmax_like(300, 7)), target());
  ASSERT_TRUE(k->schedule.cpu.row_blocks);
  auto m = print_cpu_module({k}, {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string text = m->source.substr(m->source.find("// kernel: "));
  EXPECT_TRUE(file_check(text, {"rows1_out_buf0[c0] = ", "// stage 2: reduce sum", "= rows1_out_buf0[c0];",
                                "// stage 3:", "= rows1_out_buf0[c0];", "cppi_vstore_rows<cppi_f32x16, 7>(&out_buf0[",
                                "NOT:cppi_vload_rows<cppi_f32x16, 7>(&out_buf0"}))
      << text;
  // Rows of 33: whole vectors reload from memory; the masked last one is
  // forwarded (a masked load of a masked store's elements waits for the
  // store to retire).
  auto m33 = print_cpu_module({schedule_for_cpu(stash_reduction_bodies(softmax_like(300, 33)), target())}, {});
  ASSERT_TRUE(m33.ok());
  EXPECT_EQ(count(m33->source, "= out_buf0_fwd0;"), 2u) << m33->source;
  RunOptions o;
  o.specials = true;
  for (int64_t cols : {2, 7, 9, 33}) {
    EXPECT_EQ(run_and_compare(schedule_for_cpu(stash_reduction_bodies(softmax_like(300, cols)), target()), o), "") << cols;
  }
}

TEST(StashReductionBodies, DividesWhenTheSumIsNotKnownToBeAtLeastOne) {
  Variant v;
  v.shift_by_max = false;  // exp(x - 1) may sum to a subnormal: 1 / sum could overflow
  auto stashed = stash_reduction_bodies(softmax_like(4, 100, v));
  ASSERT_EQ(stashed->stages.size(), 4u);
  const auto& norm = std::get<PointwiseStage>(stashed->stages[3]);
  ASSERT_TRUE(norm.stores[0].value.as<Binary>());
  EXPECT_EQ(norm.stores[0].value.as<Binary>()->op, BinaryOp::TrueDiv);
  RunOptions o;
  o.specials = true;
  EXPECT_EQ(run_and_compare(schedule_for_cpu(stashed, target()), o), "");
}

TEST(StashReductionBodies, LeavesKernelsWhereItWouldNotPayOrNotBeExact) {
  auto unchanged = [](const KernelPtr& k, std::optional<int64_t> max_row_bytes = std::nullopt) {
    return stash_reduction_bodies(k, max_row_bytes).get() == k.get();
  };
  EXPECT_FALSE(unchanged(softmax_like(4, 100)));
  EXPECT_TRUE(unchanged(softmax_like(4, 100), 399)) << "a row past the cache budget";
  EXPECT_TRUE(unchanged(softmax_like(4, 100, {DType::BFloat16})))
      << "a bf16 output would round the stashed float values";
  EXPECT_TRUE(unchanged(softmax_like(4, 100, {DType::Float32, false}))) << "nothing expensive to save";
  EXPECT_TRUE(unchanged(softmax_like(4, 100, {DType::Float32, true, true})))
      << "the output is read by the kernel (in place)";
  EXPECT_TRUE(unchanged(softmax_kernel(4, sym("s0")), 256 * 1024)) << "a symbolic row length, with a budget";
  EXPECT_FALSE(unchanged(softmax_kernel(4, sym("s0")))) << "a symbolic row length stashes without one";
}

}  // namespace
}  // namespace cppi::cpu::test
