#!/usr/bin/env bash
# Scenario "is B better than A per kW" on the H200 (device tool), answered by wattbench's own
# compare, regress and history over real engine starts, plus the README's first command:
#
#   1. the README's first command, unchanged (`wattbench run`), beside the independent NVML counter
#      (benches/gpu/independent_meter.py) and the per-level crosscheck: both levels should read
#      `valid`, the energy within the crosscheck's bound;
#   2. four launched runs of the embedded engine (llama-1b preset, CUDA, 256 in / 64 out, c=16,
#      three trials), registered in one history database, in this order:
#        A1, A2  wattbench's CUDA flags for transformers serve (two engine starts of one configuration)
#        Z       the engine's own defaults (WATTBENCH_TUNED_DEFAULTS=0: no --cb-* flags added)
#        A3      a third start of the tuned configuration: its key then has 3 runs (2 degrees of
#                freedom), the least a run-to-run noise basis may rest on (docs/compare.md)
#   3. `compare A1 A2`, `compare A1 Z`, `compare A3 Z`, each also with `--window steady` (the steady
#      window read whole, on the trials' steady figures), and `regress Z --baseline A1` (compare and
#      regress must say the same word for the same pair), `history list` and `history noise`.
#
# Reads only; never changes a GPU setting (power limit, clocks, persistence, MIG). Run from the
# repository root with the wheels carried in .whl/ (docs/validation.md says which):
#   bash benches/gpu/h200_compare_configs.sh
# The same steps run on a CPU machine as a dry run of the script (no meter: the figures are
# estimates): SKIP_README=1 MODEL=tiny DEVICE=cpu CONC=1 OUTPUT_TOKENS=16 DURATION=25 OUT=/tmp/o bash benches/gpu/h200_compare_configs.sh
# Outputs under $OUT: log.txt, PROVENANCE.json (script, arguments, commit, device, date),
# crosscheck.json (step 1), runs.tgz (every run directory with its stdout/stderr, the history
# database, the compare/regress/history outputs).
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
D=/tmp/cc
rm -rf $D && mkdir -p $D
t0=$(date +%s)

echo "== 1. the README's first command, unchanged"
if [ "${SKIP_README:-0}" != 1 ]; then
mkdir -p $D/readme && cd $D/readme
python3 "$REPO/benches/gpu/independent_meter.py" $D/readme/meter.jsonl & MP=$!
sleep 1
timeout 200 python3 -m wattbench run > stdout.txt 2> stderr.txt; rc=$?
kill -TERM $MP; wait $MP
echo "README first command: rc=$rc wall $(( $(date +%s) - t0 )) s"
cat stdout.txt; tail -3 stderr.txt
RUN=$(ls -d $D/readme/wattbench-results/*/ 2>/dev/null | head -1)
cd "$REPO"
[ -n "$RUN" ] && python3 benches/gpu/crosscheck.py "$RUN" $D/readme/meter.jsonl --json "$OUT/crosscheck.json"
fi

echo "== 2. A1, A2, A3 (wattbench's CUDA flags, three engine starts) and Z (the engine's defaults)"
COMMON="--model ${MODEL:-llama-1b} --device ${DEVICE:-cuda} -c ${CONC:-16} --trials 3 --input-tokens 256
  --output-tokens ${OUTPUT_TOKENS:-64} --duration ${DURATION:-20} --warmup 3s --idle 3 --no-history-check --no-html
  --db $D/history.sqlite"
for name in A1 A2 Z A3; do
  s=$(date +%s)
  left=$(( 560 - (s - t0) ))
  if [ "$left" -lt 60 ]; then echo "$name: skipped, $left s left of the call"; continue; fi
  # the label names the configuration, not the run: A1 and A2 share it (and so their history key)
  tuned=1 label=h200-tuned
  [ "$name" = Z ] && tuned=0 label=h200-engine-defaults
  # shellcheck disable=SC2086  # COMMON is a list of arguments
  WATTBENCH_TUNED_DEFAULTS=$tuned timeout "$left" python3 -m wattbench run $COMMON --config-label "$label" \
    --out $D/$name > $D/$name.stdout.txt 2> $D/$name.stderr.txt
  echo "$name: rc=$? wall $(( $(date +%s) - s )) s"
  sed -n 1,12p $D/$name.stdout.txt; tail -2 $D/$name.stderr.txt
done

echo "== 3. compare, regress, history"
W="python3 -m wattbench"
for pair in "A1 A2" "A1 Z" "A3 Z"; do
  set -- $pair
  echo "-- compare $1 $2"; $W compare $D/$1 $D/$2 --db $D/history.sqlite | tee $D/compare-$1-$2.txt
  $W compare $D/$1 $D/$2 --db $D/history.sqlite --json > $D/compare-$1-$2.json 2>/dev/null
  echo "-- compare $1 $2 --window steady"
  $W compare $D/$1 $D/$2 --db $D/history.sqlite --window steady | tee $D/compare-steady-$1-$2.txt
  $W compare $D/$1 $D/$2 --db $D/history.sqlite --window steady --json > $D/compare-steady-$1-$2.json 2>/dev/null
done
echo "-- regress Z --baseline A1"; $W regress $D/Z --baseline $D/A1 --db $D/history.sqlite | tee $D/regress-Z-A1.txt
echo "regress rc=${PIPESTATUS[0]}"
echo "-- history list"; $W history list --db $D/history.sqlite | tee $D/history-list.txt
echo "-- history noise"; $W history noise --db $D/history.sqlite | tee $D/history-noise.txt
echo "total wall $(( $(date +%s) - t0 )) s"
tar czf "$OUT/runs.tgz" -C /tmp cc 2>/dev/null
ls -la "$OUT"
