#!/usr/bin/env bash
# On the GPU machine: build (CPU JIT off) unless built, then the model suite
# one model per process so that a call cut short still returns the models it
# finished. Logs and JSON rows go to $OUT.
#   MODELS="gpt2 bert"  DTYPE=bfloat16  TRAIN=1  PYTEST=1 (CUDA end-to-end tests first)
#   BACKENDS=inductor,cppinductor (eager always runs; default: the bench's list)
set -uo pipefail
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
GXX=$([ -x /usr/bin/g++ ] && echo /usr/bin/g++ || echo g++)
GCC=$([ -x /usr/bin/gcc ] && echo /usr/bin/gcc || echo gcc)
start=$(date +%s)
if ! python3 -c "import cppinductor._C" 2>/dev/null; then
  CC=$GCC CXX=$GXX CPPINDUCTOR_BUILD_DIR=$PWD/build-gpu CPPINDUCTOR_CPU_JIT=OFF CPPINDUCTOR_BUILD_TESTS=OFF \
    python3 -m pip install -q --no-build-isolation --no-deps --no-index -e . > "$OUT/install.log" 2>&1 \
    || { tail -30 "$OUT/install.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
if [ -n "${PYTEST:-}" ]; then
  timeout "${PYTEST_TIMEOUT:-300}" python3 -m pytest tests/python -q -x -p no:cacheprovider -k "cuda and not bench" \
    2>&1 | tee "$OUT/pytest_cuda.log" | tail -6
  echo "pytest: $(( $(date +%s) - start )) s"
fi
DTYPE=${DTYPE:-float32}
suffix=${DTYPE}$([ -n "${TRAIN:-}" ] && echo _train)
for m in ${MODELS:-gpt2 bert t5 llama mistral vit convnext resnet wav2vec2 whisper}; do
  python3 -m cppinductor.bench --device cuda --suite models --batch large --dtype "$DTYPE" ${TRAIN:+--train} ${BACKENDS:+--backends $BACKENDS} \
    --only "$m$([ -n "${TRAIN:-}" ] && echo _train)" --fresh-process none --no-progress \
    --json "$OUT/models_${suffix}_$m.json" > "$OUT/models_${suffix}_$m.log" 2>&1
  grep -E "^\s*$m|cppinductor|inductor" "$OUT/models_${suffix}_$m.log" | grep -v -i warn | tail -4
  echo "$m done: $(( $(date +%s) - start )) s"
done
