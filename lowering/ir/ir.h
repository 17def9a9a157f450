/// \file
/// The loop IR in one include, and a map of it.
///
///   index_expr.h     IndexExpr: int64 index arithmetic over constants, size
///                    symbols and loop variables; canonical by construction.
///   index_simplify.h simplify(e, ranges), bounds and proofs (x < s0 ...).
///   index_affine.h   affine_form / coefficient: strides per loop variable.
///   buffer.h         Buffer, Layout (sizes/strides/offset), Device, kind.
///   expr.h           Expr: typed value DAG (Constant, Load, IndexValue,
///                    LocalRef, Cast, Unary, Binary, Compare, Where, Random)
///                    and the IR's numeric semantics; ops.def lists the ops.
///   expr_visitor.h   ExprFunctor / ExprVisitor / ExprMutator and helpers
///                    (substitute_indices, replace_loads, post_order, ...).
///   reduction.h      ReductionKind, result dtypes, identities, NaN rules.
///   node.h           Pre-fusion PointwiseNode / ReductionNode, NodeList,
///                    read/write sets.
///   kernel.h         Post-fusion Kernel: outer loops + stages, Schedule.
///   printer.h        The stable text form (tests, debug dumps).
///   interpreter.h    Reference interpreter on host buffers.
///
/// Building a pointwise node (out = relu(a + b), b broadcast over rows):
///   auto a = Buffer::make_contiguous("a", DType::Float32, Device::CPU,
///                                    BufferKind::GraphInput, {sym("s0"), 64});
///   ... b of size {64}, out like a ...
///   IndexExpr x0 = pointwise_var(0), x1 = pointwise_var(1);
///   Expr sum = binary(BinaryOp::Add, load(a, a->layout.index({x0, x1})),
///                                    load(b, b->layout.index({x1})));
///   auto node = PointwiseNode::make("add_relu", out,
///       binary(BinaryOp::Maximum, sum, const_float(0)), {"add", "relu"});
///
/// A fused softmax kernel: see kernel.h and tests/cpp/ir/ir_builders.h.
#pragma once

#include "lowering/ir/buffer.h"
#include "lowering/ir/expr.h"
#include "lowering/ir/expr_visitor.h"
#include "lowering/ir/index_affine.h"
#include "lowering/ir/index_expr.h"
#include "lowering/ir/index_simplify.h"
#include "lowering/ir/interpreter.h"
#include "lowering/ir/kernel.h"
#include "lowering/ir/node.h"
#include "lowering/ir/printer.h"
#include "lowering/ir/reduction.h"
