#!/usr/bin/env bash
# On the GPU machine: build (CPU JIT off) unless built, then the GEMM template
# probe (gemm_probe.py: NVRTC time, correctness, time against cuBLAS + a
# separate epilogue) and the bench's GEMM suite in bfloat16. Logs and JSON go
# to $OUT.
#   PROBE_SHAPES=m16,m16_gelu   GEMM_ONLY=addmm_gelu_m16,...   GEMM_BACKENDS=eager,inductor,cppinductor
#   PYTEST_FILES="tests/python/test_x.py ..." (CUDA tests first; PYTEST_K, default "cuda", selects them;
#   PYTEST_K="" runs all, as tests/python/test_gemm_epilogue.py needs)   PROBE_ARGS=--cold   SKIP_PROBE=1   SKIP_BENCH=1
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$PWD/python
start=$(date +%s)
if ! python3 -c "import cppinductor._C" 2>/dev/null; then
  CC=gcc CXX=g++ CPPINDUCTOR_BUILD_DIR=$PWD/build-gpu CPPINDUCTOR_CPU_JIT=OFF CPPINDUCTOR_BUILD_TESTS=OFF \
    python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . > "$OUT/install.log" 2>&1 \
    || { tail -30 "$OUT/install.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
if [ -n "${PYTEST_FILES:-}" ]; then
  timeout "${PYTEST_TIMEOUT:-300}" python3 -m pytest $PYTEST_FILES -q -p no:cacheprovider -k "${PYTEST_K-cuda}" \
    2>&1 | tee "$OUT/pytest_cuda.log" | tail -4
  echo "pytest: $(( $(date +%s) - start )) s"
fi
if [ -z "${SKIP_PROBE:-}" ]; then
  timeout "${PROBE_TIMEOUT:-240}" python3 gpu_codegen/tools/gemm_probe.py ${PROBE_SHAPES:+--shapes $PROBE_SHAPES} ${PROBE_ARGS:-} \
    --json "$OUT/gemm_probe.json" 2>&1 | tee "$OUT/gemm_probe.log" | grep -v "^    "
  echo "probe: $(( $(date +%s) - start )) s"
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout "${BENCH_TIMEOUT:-300}" python3 -m cppinductor.bench --device cuda --suite gemm --dtype bfloat16 \
    ${GEMM_ONLY:+--only $GEMM_ONLY} ${GEMM_BACKENDS:+--backends $GEMM_BACKENDS} --fresh-process none --no-progress \
    --json "$OUT/gemm_suite.json" > "$OUT/gemm_suite.log" 2>&1
  grep -E "^[a-z]|^ +(inductor|cppinductor)" "$OUT/gemm_suite.log" | cut -c1-130 | tail -60
  echo "bench: $(( $(date +%s) - start )) s"
fi
