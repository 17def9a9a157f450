// Random ops (rand, randn, uniform, normal, bernoulli, exponential,
// native_dropout): counter-based Philox4x32-10 (ir::Random) keyed on the
// call's seed, with the element's logical row-major index (after the node's
// own base offset) as the counter. The values have the op's distribution,
// not eager's bits (eager's CPU generator is a Mersenne Twister, its CUDA one
// Philox with another counter layout). A value depends only on (seed, node,
// element): not on thread count, vector width, layout or fusion, so a fused
// consumer that recomputes a random node sees the same numbers as a stored
// copy would hold.
//
// Each op computes in float32 (float64 for a float64 result, from the same
// float32 draw) and rounds to the result dtype on store.
#include "lowering/ops/op_call.h"
#include "lowering/ops/registry.h"
#include "lowering/ops/type_promotion.h"

namespace cppi::lowering {
namespace {

using ir::BinaryOp;
using ir::CompareOp;
using ir::Expr;
using ir::RandomKind;
using Coords = std::vector<ir::IndexExpr>;

/// float64 results compute in float64; everything else in float32.
DType compute_type(DType result) { return result == DType::Float64 ? DType::Float64 : DType::Float32; }

Expr mul(Expr a, Expr b) { return ir::binary(BinaryOp::Mul, std::move(a), std::move(b)); }
Expr add(Expr a, Expr b) { return ir::binary(BinaryOp::Add, std::move(a), std::move(b)); }
Expr constant(double v, DType t) { return ir::Constant::make(v, t); }
Expr scalar_as(const Scalar& s, DType t) { return s.as_expr(t); }

/// One random node's draws: the element at `coords` gets counter
/// base_offset + (its row-major index in the result).
class RandomDraw {
 public:
  RandomDraw(LoweringContext::RandomStream stream, std::vector<ir::IndexExpr> sizes)
      : stream_(std::move(stream)), sizes_(std::move(sizes)) {}

  Expr at(RandomKind kind, const Coords& coords) const {
    ir::IndexExpr linear = ir::Layout::contiguous(sizes_).index(coords);
    return ir::Random::make(kind, stream_.seed, stream_.base_offset + linear);
  }

 private:
  LoweringContext::RandomStream stream_;
  std::vector<ir::IndexExpr> sizes_;
};

/// The node's draws over a result of `sizes` on the device of `meta`. An
/// explicit torch.Generator holds state a kernel cannot advance, so such
/// calls stay in ATen.
Expected<RandomDraw> draw_for(const OpCall& c, const TensorMeta& meta, const std::vector<ir::IndexExpr>& sizes) {
  if (c.arg(SIZE_MAX, "generator")) return Error::unsupported("an explicit torch.Generator is used");
  auto stream = c.ctx.random_stream(ir_device(meta), meta.device_index, ir::product(sizes));
  return RandomDraw(std::move(stream), sizes);
}

using RandomBody = std::function<Expected<Expr>(const RandomDraw& draw, const Coords& coords, DType compute)>;

/// out[x] = body(draw, x) into the node's own buffer.
Status emit_random(const OpCall& c, const RandomBody& body) {
  if (c.node.value.kind != ValueInfo::Kind::Tensor) return Error::unsupported("result is not a tensor");
  ir::BufferPtr out = c.result_buffer();
  CPPI_ASSIGN_OR_RETURN(draw, draw_for(c, c.meta(), out->layout.sizes));
  const DType compute = compute_type(out->dtype);
  // An operand the body cannot use fails the lowering (lower_graph then
  // rolls back the node emitted here).
  Status st = Status::success();
  emit_pointwise(c.ctx, c.node.name, out, [&](const Coords& x) -> Expr {
    auto v = body(draw, x, compute);
    if (!v.ok()) {
      st = v.error();
      return constant(0, out->dtype);
    }
    return *v;
  });
  if (!st.ok()) return st;
  c.set_result_buffer(out);
  return Status::success();
}

/// A uniform number in [0, 1) that stays below 1 in `result`: reduced
/// floats keep only the bits they can hold (floor(u * 2^d) / 2^d, exact in
/// the dtype), as rounding to nearest could give 1.0.
Expr unit_uniform(const RandomDraw& draw, const Coords& x, DType result, DType compute) {
  Expr u = draw.at(RandomKind::Uniform, x);
  if (is_reduced_float(result)) {
    const double scale = result == DType::BFloat16 ? 256.0 : 2048.0;
    u = mul(ir::unary(ir::UnaryOp::Floor, mul(u, constant(scale, DType::Float32))), constant(1.0 / scale, DType::Float32));
  }
  return ir::cast(u, compute);
}

Expr normal(const RandomDraw& draw, const Coords& x, DType compute) {
  return ir::cast(draw.at(RandomKind::Normal, x), compute);
}

/// A tensor or scalar operand (mean/std of normal), loaded broadcast at x.
Expected<Expr> operand_at(const OpCall& c, size_t pos, const char* kw, std::optional<double> dflt, const Coords& x,
                          DType compute) {
  const Arg* a = c.arg(pos, kw);
  if (!a && dflt) return constant(*dflt, compute);
  if (OpCall::node_of(a) >= 0 && c.ctx.value(OpCall::node_of(a)).kind == NodeValue::Kind::Tensor) {
    CPPI_ASSIGN_OR_RETURN(t, c.tensor(pos, kw));
    CPPI_RETURN_IF_ERROR_STATUS(check_broadcast(t, to_index(c.meta().sizes)));
    return ir::cast(load_broadcast(t, x), compute);
  }
  CPPI_ASSIGN_OR_RETURN(s, c.scalar(pos, kw));
  return scalar_as(s, compute);
}

// --- ops ------------------------------------------------------------------------------------

Status lower_rand(const OpCall& c) {
  return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType compute) -> Expected<Expr> {
    return unit_uniform(d, x, c.meta().dtype, compute);
  });
}

Status lower_randn(const OpCall& c) {
  return emit_random(c, [](const RandomDraw& d, const Coords& x, DType compute) -> Expected<Expr> {
    return normal(d, x, compute);
  });
}

/// uniform(self, from=0, to=1): from + u * (to - from).
Status lower_uniform(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(from, c.optional_scalar(1, "from"));
  CPPI_ASSIGN_OR_RETURN(to, c.optional_scalar(2, "to"));
  const double lo = from ? from->as_double() : 0.0, hi = to ? to->as_double() : 1.0;
  if ((from && from->kind == Scalar::Kind::Symbolic) || (to && to->kind == Scalar::Kind::Symbolic))
    return Error::unsupported("symbolic bounds");
  return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType compute) -> Expected<Expr> {
    Expr u = unit_uniform(d, x, c.meta().dtype, compute);
    return add(constant(lo, compute), mul(u, constant(hi - lo, compute)));
  });
}

/// normal.{float_float, Tensor_float, float_Tensor, Tensor_Tensor}(mean, std)
/// and normal_functional(self, mean, std): mean + std * n.
LowerFn normal_op(size_t mean_pos, size_t std_pos) {
  return [=](const OpCall& c) -> Status {
    return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType compute) -> Expected<Expr> {
      CPPI_ASSIGN_OR_RETURN(mean, operand_at(c, mean_pos, "mean", 0.0, x, compute));
      CPPI_ASSIGN_OR_RETURN(stddev, operand_at(c, std_pos, "std", 1.0, x, compute));
      return add(mean, mul(stddev, normal(d, x, compute)));
    });
  };
}

/// bernoulli.p(self, p): 1 where u < p. bernoulli.default(self): the
/// probability is self itself, element by element.
Status lower_bernoulli_p(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(p, c.optional_scalar(1, "p"));
  if (p && p->kind == Scalar::Kind::Symbolic) return Error::unsupported("symbolic p");
  const double prob = p ? p->as_double() : 0.5;
  return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType) -> Expected<Expr> {
    return ir::compare(CompareOp::Lt, d.at(RandomKind::Uniform, x), constant(prob, DType::Float32));
  });
}

Status lower_bernoulli_tensor(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(self, c.tensor(0, "self"));
  return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType) -> Expected<Expr> {
    const DType t = compute_type(self.dtype);
    return ir::compare(CompareOp::Lt, ir::cast(d.at(RandomKind::Uniform, x), t), ir::cast(load(self, x), t));
  });
}

/// exponential(self, lambd=1): -log(1 - u) / lambd (u < 1, so finite).
Status lower_exponential(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(lambd, c.optional_scalar(1, "lambd"));
  if (lambd && lambd->kind == Scalar::Kind::Symbolic) return Error::unsupported("symbolic lambd");
  const double rate = lambd ? lambd->as_double() : 1.0;
  return emit_random(c, [&](const RandomDraw& d, const Coords& x, DType compute) -> Expected<Expr> {
    Expr u = ir::cast(d.at(RandomKind::Uniform, x), compute);
    Expr log1m = ir::unary(ir::UnaryOp::Log1p, ir::unary(ir::UnaryOp::Neg, u));
    return mul(log1m, constant(-1.0 / rate, compute));
  });
}

/// native_dropout(input, p, train) -> (output, mask), as torch's
/// decomposition: mask = u > p, output = mask ? x / (1 - p) : 0; p == 1
/// drops everything; not training (or p == 0) is (x, all true). Both items
/// read the same draws, so the output is zero exactly where the mask is.
Status lower_native_dropout(const OpCall& c) {
  CPPI_ASSIGN_OR_RETURN(x, c.tensor(0, "input"));
  CPPI_ASSIGN_OR_RETURN(p_arg, c.scalar(1, "p"));
  if (p_arg.kind == Scalar::Kind::Symbolic) return Error::unsupported("symbolic p");
  if (!is_floating(x.dtype)) return Error::unsupported("dropout of a non-float tensor");
  const double p = p_arg.as_double();
  const bool train = c.flag(2, "train", true) && p != 0;
  if (c.node.value.kind != ValueInfo::Kind::Tuple || c.node.value.items.size() != 2)
    return Error::unsupported("result is not an (output, mask) pair");
  std::optional<RandomDraw> draw;
  if (train) {
    CPPI_ASSIGN_OR_RETURN(d, draw_for(c, c.item_meta(0), x.sizes));
    draw = std::move(d);
  }
  auto keep = [&](const Coords& at) -> Expr {
    if (!train) return ir::const_bool(true);
    if (p >= 1) return ir::const_bool(false);
    return ir::compare(CompareOp::Gt, draw->at(RandomKind::Uniform, at), constant(p, DType::Float32));
  };
  std::vector<std::optional<TensorRef>> items(2);
  if (c.item_used(0)) {
    ir::BufferPtr out = c.item_buffer(0);
    const DType compute = opmath_type(x.dtype);
    const double scale = train && p < 1 ? 1.0 / (1.0 - p) : 1.0;
    emit_pointwise(c.ctx, c.node.name, out, [&](const Coords& at) {
      Expr v = ir::cast(load(x, at), compute);
      if (!train) return v;
      return ir::where(keep(at), mul(v, constant(scale, compute)), constant(0, compute));
    });
    items[0] = TensorRef::of_buffer(out);
  }
  if (c.item_used(1)) {
    ir::BufferPtr mask = c.item_buffer(1);
    emit_pointwise(c.ctx, c.node.name, mask, keep);
    items[1] = TensorRef::of_buffer(mask);
  }
  c.set_items(std::move(items));
  return Status::success();
}

}  // namespace

void register_random_lowerings(Registry& r) {
  r.add("aten.rand.default", lower_rand);
  r.add("aten.rand_like.default", lower_rand);
  r.add("aten.randn.default", lower_randn);
  r.add("aten.randn_like.default", lower_randn);
  r.add("aten.uniform.default", lower_uniform);
  r.add("aten.normal.float_float", normal_op(0, 1));
  r.add("aten.normal.Tensor_float", normal_op(0, 1));
  r.add("aten.normal.float_Tensor", normal_op(0, 1));
  r.add("aten.normal.Tensor_Tensor", normal_op(0, 1));
  r.add("aten.normal_functional.default", normal_op(1, 2));
  r.add("aten.bernoulli.p", lower_bernoulli_p);
  r.add("aten.bernoulli.default", lower_bernoulli_tensor);
  r.add("aten.exponential.default", lower_exponential);
  r.add("aten.native_dropout.default", lower_native_dropout);
}

}  // namespace cppi::lowering
