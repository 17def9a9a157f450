#!/usr/bin/env bash
# On the 2-GPU machine, in one call: build with the g++ CPU path (no LLVM
# there), the two-process distributed test (NCCL), then the distributed bench
# (DDP and FSDP2; eager, Inductor and cppinductor, default and
# reduce-overhead). Logs go to $OUT. NVLink multicast stays off.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
GXX=$([ -x /usr/bin/g++ ] && echo /usr/bin/g++ || echo g++)
GCC=$([ -x /usr/bin/gcc ] && echo /usr/bin/gcc || echo gcc)
start=$(date +%s)
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1; head -4 "$OUT/topo.txt"
CC=$GCC CXX=$GXX CPPINDUCTOR_BUILD_DIR=$PWD/build-gpu CPPINDUCTOR_CPU_JIT=OFF CPPINDUCTOR_BUILD_TESTS=OFF \
  python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . > "$OUT/install.log" 2>&1 \
  || { tail -30 "$OUT/install.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 480 python3 -m pytest -q -s -p no:cacheprovider tests/python/test_distributed_suite.py ${DIST_TESTS:-} \
    > "$OUT/pytest.log" 2>&1
  grep -v "^\[rank" "$OUT/pytest.log" | tail -40
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  python3 -m cppinductor.bench --device cuda --suite distributed --no-progress --timeout ${BENCH_TIMEOUT:-400} \
    --json "$OUT/distributed.json" ${DIST_ARGS:-} > "$OUT/distributed.txt" 2>&1
  grep -v "^\[rank\|^W1\|^I1" "$OUT/distributed.txt" | tail -25
fi
echo "total: $(( $(date +%s) - start )) s"
