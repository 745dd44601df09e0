#!/usr/bin/env bash
# The headline rule on the H200 (device tool; docs/validation.md part 13): two `--trials 3` runs of the embedded engine with NVML
# (board + HBM rail) and the CPU estimate, then compare, regress, report --json and the HTML report.
# What it proves (headline_check.py prints PASS/FAIL per line, exit 1 on any FAIL):
#   - the run's headline, the history row, compare's point and regress's value are the trial means
#     at the accelerator boundary (never accelerator_memory, never the host estimate), each inside
#     its own 95% CI;
#   - result.json carries no tokens per kW or J/token at accelerator_memory, cpu or host;
#   - the HTML's tokens-per-kW plots hold the board only, and its first screen leads with one figure.
# Reads only; never changes a GPU setting. ~6 min. Run from the repo root (benches/gpu/preamble.sh: carried .whl, log.txt, PROVENANCE.json):
#   bash benches/gpu/h200_headline.sh
# Outputs under $OUT: log.txt, headline.tgz (both run dirs, compare/regress/report JSON, the HTML).
source benches/gpu/preamble.sh
set -u
export WATTBENCH_DB=/tmp/hd/history.sqlite3
rm -rf /tmp/hd && mkdir -p /tmp/hd && cd /tmp/hd  # a warm machine keeps /tmp: start empty
common=(--model llama-1b -c 1,16 --trials 3 --duration 10 --warmup 3s --sensor nvml --sensor estimate:cpu --quiet)
rc=0
for name in a b; do
  start=$(date +%s)
  timeout 280 python3 -m wattbench run "${common[@]}" --out /tmp/hd/$name > /tmp/hd/$name.stdout 2> /tmp/hd/$name.stderr
  r=$?; echo "run $name: rc=$r wall $(( $(date +%s) - start )) s"; [ $r -eq 0 ] || rc=$r
  cat /tmp/hd/$name.stdout; tail -3 /tmp/hd/$name.stderr
done
python3 -m wattbench compare /tmp/hd/a /tmp/hd/b --json > /tmp/hd/compare.json 2> /tmp/hd/compare.err; echo "compare rc=$?"
python3 -m wattbench compare /tmp/hd/a /tmp/hd/b 2>&1 | head -40
python3 -m wattbench regress /tmp/hd/b --baseline /tmp/hd/a --json > /tmp/hd/regress.json 2> /tmp/hd/regress.err; echo "regress rc=$?"
python3 -m wattbench report /tmp/hd/a --json --html /tmp/hd/a.html > /tmp/hd/report.json; echo "report rc=$?"
python3 -m wattbench history show "$(python3 -c "import json;print(json.load(open('/tmp/hd/a/result.json'))['run_id'])")" --json > /tmp/hd/history.json
python3 "$REPO/benches/gpu/headline_check.py" /tmp/hd; c=$?; [ $c -eq 0 ] || rc=$c
tar czf "$OUT/headline.tgz" -C /tmp hd 2>/dev/null
ls -la "$OUT"
exit $rc
