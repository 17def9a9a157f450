// Ops that deliberately run through ATen, each with the reason the user sees
// in explain() (anything not registered anywhere falls back with "no
// lowering for <op>").
#include "lowering/ops/registry.h"

namespace cppi::lowering {

void register_explicit_fallbacks(Registry& r) {
  const char* accumulate =
      "accumulates into repeated positions: a read-modify-write scatter would race under the parallel loops, "
      "so it runs through ATen";
  for (const char* op : {"aten.scatter_add.default", "aten.scatter_reduce.two", "aten.scatter.reduce",
                         "aten.scatter.value_reduce", "aten.index_add.default"})
    r.add_fallback(op, accumulate);
  // The backward of embedding is decomposed into index_put(accumulate=True)
  // (python/cppinductor/decompositions.py); if it reaches us whole it is the
  // same accumulating scatter.
  r.add_fallback("aten.embedding_dense_backward.default", accumulate);
  const char* indirect_todo = "indirect indexing op without a lowering yet (gather/scatter family)";
  for (const char* op : {"aten.index_copy.default", "aten.index_fill.int_Scalar", "aten.masked_scatter.default",
                         "aten.take.default"})
    r.add_fallback(op, indirect_todo);

  const char* random =
      "random op runs through ATen so its values come from eager's generator (bit-identical to eager)";
  for (const char* op : {"aten.rand.default", "aten.rand_like.default", "aten.randn.default",
                         "aten.randn_like.default", "aten.randint.default", "aten.randint.low",
                         "aten.randint_like.default", "aten.randint_like.low_dtype", "aten.randperm.default",
                         "aten.bernoulli.default", "aten.bernoulli.p", "aten.bernoulli_.float",
                         "aten.native_dropout.default", "aten.uniform.default", "aten.uniform_.default",
                         "aten.normal.Tensor_float", "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor",
                         "aten.normal_functional.default", "aten.exponential.default", "aten.multinomial.default",
                         "prims.inductor_random.default", "prims.inductor_seeds.default",
                         "aten.philox_rand.default"})
    r.add_fallback(op, random);

  const char* scan = "scans are not in the loop IR yet";
  for (const char* op : {"aten.cumsum.default", "aten.cumprod.default", "aten.cummax.default",
                         "aten.cummin.default", "aten.logcumsumexp.default"})
    r.add_fallback(op, scan);

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
