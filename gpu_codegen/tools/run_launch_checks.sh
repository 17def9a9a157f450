#!/usr/bin/env bash
# On the GPU machine, in one call: build with the g++ CPU path (no LLVM
# there), then the CUDA-graph tests, a CUDA smoke of the end-to-end models,
# the launch-bound bench (default and reduce-overhead side by side) and a
# profile of where a launch-bound call's host time goes. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
GXX=$([ -x /usr/bin/g++ ] && echo /usr/bin/g++ || echo g++)
GCC=$([ -x /usr/bin/gcc ] && echo /usr/bin/gcc || echo gcc)
start=$(date +%s)
CC=$GCC CXX=$GXX CPPINDUCTOR_BUILD_DIR=$PWD/build-gpu CPPINDUCTOR_CPU_JIT=OFF CPPINDUCTOR_BUILD_TESTS=OFF \
  python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . > "$OUT/install.log" 2>&1 \
  || { tail -30 "$OUT/install.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
python3 -m pytest -q -p no:cacheprovider tests/python/test_cudagraphs.py ${CUDAGRAPH_TESTS:-} 2>&1 \
  | tee "$OUT/pytest.log" | tail -25
if [ -z "${SKIP_BENCH:-}" ]; then
  python3 -m cppinductor.bench --device cuda --suite launch --no-progress --fresh-process none \
    --json "$OUT/launch.json" ${LAUNCH_ARGS:-} 2>&1 | tee "$OUT/launch.txt" | tail -34
fi
python3 gpu_codegen/tools/cudagraph_states.py 2>&1 | grep -v "^torch\." | tail -12
if [ -z "${SKIP_PROFILE:-}" ]; then
  python3 gpu_codegen/tools/call_profile.py --out "$OUT" ${PROFILE_ARGS:-} > "$OUT/call_profile.txt" 2>&1
  grep "us per call" "$OUT/call_profile.txt"
fi
echo "total: $(( $(date +%s) - start )) s"
