// Printing index expressions in the canonical, stable form that tests and
// dumps compare against.
#include <ostream>
#include <sstream>

#include "lowering/ir/index_expr.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/printer.h"

namespace cppi::ir {

// --- printing ----------------------------------------------------------------

namespace {

void print(std::ostream& os, const IndexExpr& e);

void print_product(std::ostream& os, int64_t coefficient, const std::vector<IndexExpr>& factors) {
  if (coefficient == -1) {
    os << "-";
  } else if (coefficient != 1) {
    os << coefficient << "*";
  }
  for (size_t i = 0; i < factors.size(); ++i) {
    if (i) os << "*";
    print(os, factors[i]);
  }
}

void print_operand(std::ostream& os, const IndexExpr& e, bool paren_products) {
  bool paren = e.kind() == IndexKind::Add || (paren_products && e.kind() == IndexKind::Mul);
  if (paren) os << "(";
  print(os, e);
  if (paren) os << ")";
}

void print(std::ostream& os, const IndexExpr& e) {
  if (!e.defined()) {
    os << "<null>";
    return;
  }
  switch (e.kind()) {
    case IndexKind::Const: os << e.as<IndexConst>()->value; return;
    case IndexKind::Symbol: os << e.as<IndexSymbol>()->name; return;
    case IndexKind::Var: os << e.as<IndexVar>()->name; return;
    case IndexKind::Add: {
      auto n = e.as<IndexAdd>();
      bool first = true;
      auto emit = [&](int64_t coefficient, const std::vector<IndexExpr>& factors) {
        bool negative = coefficient < 0;
        int64_t magnitude = negative ? -coefficient : coefficient;
        if (first) {
          if (negative) os << "-";
        } else {
          os << (negative ? " - " : " + ");
        }
        first = false;
        if (factors.empty()) {
          os << magnitude;
        } else {
          print_product(os, magnitude, factors);
        }
      };
      for (const auto& t : n->terms) {
        if (auto m = t.as<IndexMul>()) {
          emit(m->coefficient, m->factors);
        } else {
          emit(1, {t});
        }
      }
      if (n->constant != 0) emit(n->constant, {});
      return;
    }
    case IndexKind::Mul: {
      auto n = e.as<IndexMul>();
      print_product(os, n->coefficient, n->factors);
      return;
    }
    case IndexKind::FloorDiv: {
      auto n = e.as<IndexFloorDiv>();
      os << "(";
      print_operand(os, n->lhs, false);
      os << " // ";
      print_operand(os, n->rhs, true);
      os << ")";
      return;
    }
    case IndexKind::Mod: {
      auto n = e.as<IndexMod>();
      os << "(";
      print_operand(os, n->lhs, false);
      os << " % ";
      print_operand(os, n->rhs, true);
      os << ")";
      return;
    }
    case IndexKind::Min: {
      auto n = e.as<IndexMin>();
      os << "min(" << n->lhs << ", " << n->rhs << ")";
      return;
    }
    case IndexKind::Max: {
      auto n = e.as<IndexMax>();
      os << "max(" << n->lhs << ", " << n->rhs << ")";
      return;
    }
    case IndexKind::Indirect: {
      auto n = e.as<IndexIndirect>();
      os << (n->wraps ? "indirect(" : "indirect_nowrap(") << to_string(n->value()) << ", " << n->size << ")";
      return;
    }
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const IndexExpr& e) {
  print(os, e);
  return os;
}

std::string to_string(const IndexExpr& e) {
  std::ostringstream os;
  print(os, e);
  return os.str();
}

}  // namespace cppi::ir
