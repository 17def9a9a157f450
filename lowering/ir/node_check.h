/// \file
/// Internal to lowering/ir: scope checks shared by the node and kernel
/// verifiers. Not part of the IR's public API.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lowering/ir/expr.h"
#include "support/status.h"

namespace cppi::ir::detail {

/// Every loop variable of `index` is in `vars`.
Status check_index_scope(const IndexExpr& index, const std::set<std::string>& vars, const std::string& what);
/// Every index in `e` uses only `vars`; every LocalRef is in `locals` with
/// its dtype (locals == nullptr: no LocalRef allowed).
Status check_expr_scope(const Expr& e, const std::set<std::string>& vars, const std::map<std::string, DType>* locals,
                        const std::string& what);
/// Extents are defined and free of loop variables.
Status check_extents(const std::vector<IndexExpr>& extents, const std::string& what);

}  // namespace cppi::ir::detail
