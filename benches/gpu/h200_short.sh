#!/usr/bin/env bash
# Short levels on the H200 with the closing reads (docs/validation.md part 13): 7 s levels, which the
# 5 s energy term of the steady-state minimum lets read `valid` where two median E2Es fit, with the
# independent NVML energy-counter observer and the per-level crosscheck of h200_default.sh (this
# is that script with other run arguments), then each level's verdict (short_levels.py). Reads
# only; never changes a GPU setting. From the repo root with .whl carried:
#   bash benches/gpu/h200_short.sh
# Outputs under $OUT: log.txt, short_run.tgz (stdout, result, requests, telemetry, meter log,
# crosscheck JSON).
RUN_ARGS="--model llama-1b -c 1,16,64 --duration 7 --warmup 2s --no-register" RUN_WHAT="short levels" \
  RUN_TGZ=short_run.tgz RUN_AFTER="$PWD/benches/gpu/short_levels.py" exec bash benches/gpu/h200_default.sh
