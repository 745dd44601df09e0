#!/usr/bin/env bash
# llama.cpp on the H200 (docs/validation.md part 8): build llama-server with CUDA from the sources carried in
# .carry/ (prepare them with benches/gpu/llamacpp_carry.sh), export the llama-1b preset to GGUF and
# run a short wattbench ladder against it, NVML-metered, token counts checked against llama.cpp's
# own /metrics counters. Reads only; never changes a GPU setting.
#
#   device tool, carry [".carry", ".whl"]:  bash benches/gpu/llamacpp_h200.sh
#
# The build goes to .llamacpp-cuda/ (ignored, kept on a warm machine between calls). When the
# build does not finish within BUILD_S (default 480 s) the script stops with rc 3 ("call again"):
# the second call resumes the build where it stopped. When too little time is left for the ladder
# after building, it stops with rc 4 ("built; call again").
set -u
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-560}
BUILD_S=${BUILD_S:-480}
# Levels that fit the budget. Seen on 2026-12-01 with 1,16,64,256 and default level sizes: c=1 took
# a 7.9 s window, then c=16 was sized from c=1's E2E (0.25 s -> 110 rounds, 1,760 requests) and took
# 305 s at 2.8 s E2E; the budget's timeout cut the run before c=64. A fixed --duration per level
# (DURATION seconds; set DURATION= for the default sizes) keeps three levels near 3 x 50 s.
LEVELS=${LEVELS:-1,16,64}
DURATION=${DURATION:-40}
NP=${NP:-256}
# Not benches/gpu/preamble.sh: this script appends to its log (a build call, then a run call) and
# carries its own wheels in .carry/whl; it writes the same PROVENANCE.json.
mkdir -p "$OUT"
python3 benches/gpu/provenance.py write "$OUT/PROVENANCE.json" "$0" "$@"
exec > >(tee -a "$OUT/log.txt") 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version,power.limit,pstate,temperature.gpu --format=csv
nvcc --version | tail -2
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
whls=$(ls .whl/*.whl .carry/whl/*.whl 2>/dev/null)
[ -n "$whls" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $whls
export PYTHONPATH=/tmp/site:$PWD/src

DEST=$PWD/.llamacpp-cuda
if [ ! -x "$DEST/bin/llama-server" ]; then
  [ -f .carry/llama.cpp-src.tgz ] || { echo "no .carry/llama.cpp-src.tgz: run benches/gpu/llamacpp_carry.sh first and carry .carry"; exit 2; }
  if [ ! -f "$DEST/src/llama.cpp/CMakeLists.txt" ]; then
    mkdir -p "$DEST/src" && tar xzf .carry/llama.cpp-src.tgz -C "$DEST/src"
  fi
  tb=$(date +%s)
  LLAMACPP_SRC="$DEST/src/llama.cpp" JOBS=16 timeout "$BUILD_S" bash scripts/install-llamacpp.sh "$DEST" \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=ON
  rc=$?
  echo "build rc=$rc in $(( $(date +%s) - tb )) s" | tee "$OUT/build_time.txt"
  if [ ! -x "$DEST/bin/llama-server" ]; then
    tail -30 "$DEST/build.log" 2>/dev/null
    echo "BUILD INCOMPLETE (rc=$rc): call the script again; the build resumes"; exit 3
  fi
fi
"$DEST/bin/llama-server" --version 2>&1 | tail -2
left=$(( BUDGET_S - ($(date +%s) - T0) ))
if [ "$left" -lt 300 ]; then echo "BUILT; ${left}s left is too little for the ladder: call the script again"; exit 4; fi

tg=$(date +%s)
python3 -c "from wattbench.engines.gguf_export import ensure_gguf; print(ensure_gguf('llama-1b'))" || exit 5
echo "preset + GGUF export: $(( $(date +%s) - tg )) s"
export WATTBENCH_LLAMA_SERVER="$DEST/bin/llama-server"
CTX=$(( NP * 512 ))
timeout $(( left - 30 )) python3 -m wattbench run --engine llamacpp --model llama-1b --device cuda \
  --engine-arg=-np --engine-arg=$NP --engine-arg=-c --engine-arg=$CTX \
  --concurrency "$LEVELS" ${DURATION:+--duration "$DURATION"} --input-tokens 256 --output-tokens 128 --warmup 3s --idle 5 \
  --no-register --out /tmp/lc --quiet; echo "run rc=$?"
cp /tmp/lc/result.json "$OUT/result.json" 2>/dev/null
tar czf "$OUT/run.tgz" -C /tmp lc --exclude=engine-scratch 2>/dev/null
python3 benches/gpu/llamacpp_summary.py /tmp/lc; echo "summary rc=$?"
echo "total $(( $(date +%s) - T0 )) s"
