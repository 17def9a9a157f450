// Ops that deliberately run through ATen, each with the reason the user sees
// in explain() (anything not registered anywhere falls back with "no
// lowering for <op>").
#include "lowering/ops/registry.h"

namespace cppi::lowering {

void register_explicit_fallbacks(Registry& r) {
  // scatter_add, scatter_reduce's sum and index_put(accumulate=True) are
  // lowered (indirect_indexing.cpp); index_add and embedding's backward are
  // decomposed into the last (python/cppinductor/decompositions.py).
  const char* reduce = "scatter with reduce= (the deprecated multiply/add forms): runs through ATen";
  for (const char* op : {"aten.scatter.reduce", "aten.scatter.value_reduce"}) r.add_fallback(op, reduce);
  const char* whole = "reached the lowering whole (its decomposition into index_put(accumulate=True) was not applied)";
  for (const char* op : {"aten.index_add.default", "aten.embedding_dense_backward.default"}) r.add_fallback(op, whole);
  const char* indirect_todo = "indirect indexing op without a lowering yet (gather/scatter family)";
  for (const char* op : {"aten.index_copy.default", "aten.index_fill.int_Scalar", "aten.masked_scatter.default",
                         "aten.take.default"})
    r.add_fallback(op, indirect_todo);

  // rand, randn, uniform, normal, bernoulli, exponential and native_dropout
  // are lowered (random.cpp). These stay in ATen:
  const char* random_ints =
      "random integers need the raw Philox bits, not the float32 uniform the loop IR's Random gives; runs "
      "through ATen";
  for (const char* op : {"aten.randint.default", "aten.randint.low", "aten.randint_like.default",
                         "aten.randint_like.low_dtype", "aten.random.default", "aten.random.from",
                         "aten.random.to"})
    r.add_fallback(op, random_ints);
  r.add_fallback("aten.randperm.default", "randperm is a shuffle (a sort of random keys): no sort in the loop IR");
  r.add_fallback("aten.multinomial.default",
                 "multinomial samples from a cumulative distribution (a scan and a search): not in the loop IR");
  const char* inplace_random = "in-place random op (functionalization normally removes it)";
  for (const char* op : {"aten.bernoulli_.float", "aten.bernoulli_.Tensor", "aten.uniform_.default",
                         "aten.normal_.default", "aten.exponential_.default"})
    r.add_fallback(op, inplace_random);
  const char* inductor_rng =
      "Inductor's own random prims (its rng functionalization) are not produced by our decompositions";
  for (const char* op : {"prims.inductor_random.default", "prims.inductor_seeds.default",
                         "prims.inductor_lookup_seed.default", "aten.philox_rand.default"})
    r.add_fallback(op, inductor_rng);

  // cumsum and cumprod are ir::ScanNode (scan.cpp).
  r.add_fallback("aten.cummax.default", "cummax's positions: the loop IR scans a single running value");
  r.add_fallback("aten.cummin.default", "cummin's positions: the loop IR scans a single running value");
  r.add_fallback("aten.logcumsumexp.default", "logcumsumexp's log-add-exp is not a scan kind (sum and prod are)");

  const char* sort = "sorting is not lowered (no sort in the loop IR)";
  for (const char* op : {"aten.sort.default", "aten.sort.stable", "aten.topk.default", "aten.argsort.default",
                         "aten.kthvalue.default", "aten.median.default", "aten.median.dim", "aten.mode.default"})
    r.add_fallback(op, sort);

  const char* dynamic = "output shape depends on the data";
  for (const char* op : {"aten.nonzero.default", "aten.masked_select.default", "aten.unique.default",
                         "aten._unique2.default", "aten.unique_consecutive.default", "aten.unique_dim.default"})
    r.add_fallback(op, dynamic);

  r.add_fallback("aten._local_scalar_dense.default", "reads a tensor element into a Python number");
  r.add_fallback("aten.view.dtype", "bitcast views are not lowered");
}

}  // namespace cppi::lowering
