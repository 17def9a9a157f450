#!/usr/bin/env bash
# Builds the GPU runtime and runs gpu_runtime_smoke and its GoogleTests on a
# GPU machine, writing logs to $OUT (default ./gpu-check-logs). Exit status 0
# only when everything built and passed. Run from anywhere:
#   bash gpu_codegen/tools/run_gpu_checks.sh
# NVRTC: $CPPINDUCTOR_NVRTC_LIBRARY if set, else torch's wheel (nvidia/*/lib),
# else /usr/local/cuda/lib64. If the whole tree does not configure (another
# folder mid-change, no GoogleTest), gpu_codegen/standalone is built instead.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/gpu-check-logs}
mkdir -p "$OUT"
GEN=Ninja
command -v ninja > /dev/null || GEN="Unix Makefiles"

if [ -z "${CPPINDUCTOR_NVRTC_LIBRARY:-}" ]; then
  CPPINDUCTOR_NVRTC_LIBRARY=$(python3 -c "import nvidia, pathlib; print(next(p for d in nvidia.__path__ for p in pathlib.Path(d).rglob('libnvrtc.so.1[0-9]')))" 2> /dev/null)
  [ -n "$CPPINDUCTOR_NVRTC_LIBRARY" ] || CPPINDUCTOR_NVRTC_LIBRARY=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[0-9] 2> /dev/null | head -1)
fi
export CPPINDUCTOR_NVRTC_LIBRARY
{
  echo "NVRTC: ${CPPINDUCTOR_NVRTC_LIBRARY:-none found}"
  echo "generator: $GEN"
  command -v nvidia-smi > /dev/null && nvidia-smi 2>&1 | head -15
} > "$OUT/env.log"
cat "$OUT/env.log"

BUILD=$ROOT/build-gpu
if ! cmake -G "$GEN" -S "$ROOT" -B "$BUILD" -DCPPINDUCTOR_CPU_JIT=OFF \
    -DCPPINDUCTOR_BUILD_PYTHON=OFF > "$OUT/configure.log" 2>&1; then
  echo "top-level configure failed (configure.log); building gpu_codegen/standalone"
  BUILD=$ROOT/build-gpu-runtime
  if ! cmake -G "$GEN" -S "$ROOT/gpu_codegen/standalone" -B "$BUILD" \
      >> "$OUT/configure.log" 2>&1; then
    tail -30 "$OUT/configure.log"
    exit 3
  fi
fi

failed=0
if ! cmake --build "$BUILD" -j "$(nproc)" --target gpu_runtime_smoke > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  exit 4
fi
for t in gpu_runtime_tests gpu_runtime_api_matches_headers; do
  cmake --build "$BUILD" -j "$(nproc)" --target "$t" >> "$OUT/build.log" 2>&1 ||
    { echo "could not build $t (no GoogleTest?), see build.log"; failed=1; }
done

"$BUILD/gpu_codegen/gpu_runtime_smoke" > "$OUT/smoke.log" 2>&1
rc=$?
echo "gpu_runtime_smoke rc=$rc"
[ $rc -eq 0 ] || failed=1
for t in gpu_runtime_tests gpu_runtime_api_matches_headers; do
  bin=$(find "$BUILD" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$bin" ] || continue
  "$bin" --gtest_output="xml:$OUT/$t.xml" > "$OUT/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc: $(grep -E '^\[  (PASSED|FAILED) +\]|listed below' "$OUT/$t.log" | tr '\n' ' ')"
  [ $rc -eq 0 ] || failed=1
  # On a GPU machine nothing may skip: a skip means no driver or no NVRTC.
  if grep -q '^\[  SKIPPED \]' "$OUT/$t.log"; then
    echo "$t skipped tests (see $t.log)"
    failed=1
  fi
done
echo "----- smoke.log"
cat "$OUT/smoke.log"
grep -E '^\[  FAILED  \]|Failure' "$OUT"/gpu_runtime_tests.log 2> /dev/null | head -20
exit $failed
