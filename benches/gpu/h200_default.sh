#!/usr/bin/env bash
# The README's first command, unchanged, on the H200 (device tool), with an independent NVML
# energy-counter observer around it and the per-level crosscheck. The short re-check that every
# change to engines/, the run pipeline or accounting needs before it lands (docs/validation.md).
# Reads only; never changes a GPU setting. Run from the repo root with .whl carried (benches/gpu/preamble.sh: wheels,
# log, PROVENANCE.json):
#   bash benches/gpu/h200_default.sh
# Outputs under $OUT: log.txt, default_run.tgz (stdout, result, requests, telemetry, meter log,
# crosscheck JSON). Other runs with the same observer (benches/gpu/h200_short.sh): RUN_ARGS (the
# `wattbench run` arguments; default none, the README's command), RUN_WHAT (the log's name for it)
# and RUN_TGZ (the archive's name).
source benches/gpu/preamble.sh
set -u
RUN_ARGS=${RUN_ARGS:-}
RUN_WHAT=${RUN_WHAT:-README first command}
RUN_TGZ=${RUN_TGZ:-default_run.tgz}
rm -rf /tmp/rd && mkdir -p /tmp/rd && cd /tmp/rd  # a warm machine keeps /tmp: start empty
python3 "$REPO/benches/gpu/independent_meter.py" /tmp/rd/meter.jsonl & MP=$!
sleep 1
start=$(date +%s)
# shellcheck disable=SC2086  # RUN_ARGS is a list of arguments
timeout 420 python3 -m wattbench run $RUN_ARGS > /tmp/rd/stdout.txt 2> /tmp/rd/stderr.txt; rc=$?
echo "$RUN_WHAT: rc=$rc wall $(( $(date +%s) - start )) s"
kill -TERM $MP; wait $MP
cat /tmp/rd/stdout.txt; tail -5 /tmp/rd/stderr.txt
RUN=$(ls -d /tmp/rd/wattbench-results/*/ 2>/dev/null | head -1)
cd "$REPO"
[ -n "$RUN" ] && python3 benches/gpu/crosscheck.py "$RUN" /tmp/rd/meter.jsonl --json /tmp/rd/crosscheck.json
[ -n "${RUN_AFTER:-}" ] && [ -n "$RUN" ] && python3 "$RUN_AFTER" "$RUN"
tar czf "$OUT/$RUN_TGZ" -C /tmp rd 2>/dev/null
ls -la "$OUT"
exit $rc
