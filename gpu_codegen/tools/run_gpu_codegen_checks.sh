#!/usr/bin/env bash
# Builds the GPU codegen (gpu_codegen/codegen/standalone), runs its tests
# (source checks, NVRTC compiles, GPU runs against the IR interpreter) and
# gpu_codegen_bench, then times the same workloads under Inductor for
# comparison. Logs go to $OUT (default ./gpu-codegen-logs). Run from anywhere:
#   bash gpu_codegen/tools/run_gpu_codegen_checks.sh
# GoogleTest: installed, else the sources in $CPPI_GTEST_SOURCE_DIR (default
# build-gpucg/_gtest, a copy of /usr/src/googletest carried to the machine).
# NVRTC: $CPPINDUCTOR_NVRTC_LIBRARY if set, else torch's wheel, else the toolkit's.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/gpu-codegen-logs}
BUILD=${BUILD:-/tmp/b-gpu-codegen}
mkdir -p "$OUT"
GEN=Ninja
command -v ninja > /dev/null || GEN="Unix Makefiles"
if [ -z "${CPPINDUCTOR_NVRTC_LIBRARY:-}" ]; then
  CPPINDUCTOR_NVRTC_LIBRARY=$(python3 -c "import nvidia, pathlib; print(next(p for d in nvidia.__path__ for p in pathlib.Path(d).rglob('libnvrtc.so.1[0-9]')))" 2> /dev/null)
  [ -n "$CPPINDUCTOR_NVRTC_LIBRARY" ] || CPPINDUCTOR_NVRTC_LIBRARY=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[0-9] 2> /dev/null | head -1)
fi
export CPPINDUCTOR_NVRTC_LIBRARY
echo "NVRTC: ${CPPINDUCTOR_NVRTC_LIBRARY:-none found}"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

GTEST_SRC=${CPPI_GTEST_SOURCE_DIR:-$ROOT/build-gpucg/_gtest}
if ! cmake -G "$GEN" -S "$ROOT/gpu_codegen/codegen/standalone" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCPPI_GTEST_SOURCE_DIR="$GTEST_SRC" > "$OUT/configure.log" 2>&1; then
  tail -30 "$OUT/configure.log"
  exit 3
fi
start=$(date +%s)
if ! cmake --build "$BUILD" -j "$(nproc)" --target gpu_codegen_bench gpu_source_test gpu_codegen_test gpu_runtime_tests > "$OUT/build.log" 2>&1; then
  cmake --build "$BUILD" -j "$(nproc)" --target gpu_codegen_bench >> "$OUT/build.log" 2>&1
  grep -E "error" "$OUT/build.log" | head -20
fi
echo "build: $(( $(date +%s) - start )) s"

failed=0
for name in gpu_source_test gpu_codegen_test gpu_runtime_tests; do
  TEST=$(find "$BUILD" -name "$name" -type f -perm -u+x | head -1)
  if [ -z "$TEST" ]; then
    echo "$name not built"
    failed=1
    continue
  fi
  timeout "${TEST_TIMEOUT:-240}" "$TEST" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc: $(grep -E '^\[  (PASSED|FAILED) +\]' "$OUT/$name.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure|gpu [-0-9.einaf]+ vs' "$OUT/$name.log" | head -30
  grep -q '^\[  SKIPPED \]' "$OUT/$name.log" && echo "$name: tests skipped (no GPU or NVRTC?)"
  [ $rc -eq 0 ] || failed=1
done
BENCH=$(find "$BUILD" -name gpu_codegen_bench -type f -perm -u+x | head -1)
timeout 120 "$BENCH" > "$OUT/bench.log" 2>&1 || failed=1
cat "$OUT/bench.log"
if [ "${SKIP_INDUCTOR:-0}" != 1 ]; then
  PYTHONUNBUFFERED=1 timeout "${INDUCTOR_TIMEOUT:-200}" python3 "$ROOT/gpu_codegen/tools/inductor_reference_bench.py" \
    > "$OUT/inductor.log" 2>&1
  echo "----- inductor (triton) reference"
  grep -v "^W\|^I" "$OUT/inductor.log" | tail -15
fi
exit $failed
