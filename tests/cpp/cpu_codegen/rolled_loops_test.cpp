// Outer loops stay rolled: SourceWriter marks every loop that encloses
// another, and the CPU printer's kernels carry the mark (CPPI_ROLLED).
#include <gtest/gtest.h>

#include "codegen/c_printer.h"
#include "cpu_codegen/schedule/cpu_schedule.h"
#include "kernel_builders.h"

namespace cppi::cpu::test {
namespace {

TEST(CpuPrinter, OuterLoopsStayRolled) {
  // The row loop encloses the vector loop: LLVM would otherwise copy the
  // vector loop per unrolled row. The innermost loops keep their unrolling.
  auto m = print_one(schedule_for_cpu(broadcast_add_kernel(512, 1000), avx512_target()));
  EXPECT_TRUE(file_check(kernel_text(m), {
                                             "CPPI_ROLLED",
                                             "for (int64_t x0 = begin; x0 < end; ++x0) {",
                                             "for (int64_t x1 = 0; x1 < 992; x1 += 16) {",
                                         }));
  const std::string text = kernel_text(m);
  size_t rolled = 0;
  for (size_t at = text.find("CPPI_ROLLED"); at != std::string::npos; at = text.find("CPPI_ROLLED", at + 1)) ++rolled;
  EXPECT_EQ(rolled, 1u);
}

TEST(SourceWriter, MarksLoopsThatEncloseLoopsUnlessAPragmaIsThere) {
  cppi::codegen::SourceWriter w("ROLLED");
  w.open("for (int i = 0; i < 4; ++i)");
  w.line("for (int j = 0; j < 4; ++j) f(i, j);");  // a one-line inner loop
  w.close();
  w.line("CPPI_NO_AUTOVEC");
  w.open("for (int i = 0; i < 4; ++i)");
  w.open("for (int j = 0; j < 4; ++j)");
  w.line("g(i, j);");
  w.close();
  w.close();
  w.open("for (int k = 0; k < 4; ++k)");  // innermost: left to the compiler
  w.line("h(k);");
  w.close();
  EXPECT_EQ(w.str(),
            "ROLLED\n"
            "for (int i = 0; i < 4; ++i) {\n"
            "  for (int j = 0; j < 4; ++j) f(i, j);\n"
            "}\n"
            "CPPI_NO_AUTOVEC\n"
            "for (int i = 0; i < 4; ++i) {\n"
            "  for (int j = 0; j < 4; ++j) {\n"
            "    g(i, j);\n"
            "  }\n"
            "}\n"
            "for (int k = 0; k < 4; ++k) {\n"
            "  h(k);\n"
            "}\n");
}

}  // namespace
}  // namespace cppi::cpu::test
