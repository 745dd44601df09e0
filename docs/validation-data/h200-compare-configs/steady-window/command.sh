#!/usr/bin/env bash
# `compare --window full` and `--window steady` of two committed H200 runs measured with --trials 3
# (A1: the tuned configuration, Z: the engine's defaults; ../runs.tgz), as the checkout this runs
# from reads them, against an empty history database (so no stored noise enters). Run from the
# repository root; OUTDIR receives compare-A1-Z-{full,steady}.{json,txt}:
#   bash docs/validation-data/h200-compare-configs/steady-window/command.sh OUTDIR
set -euo pipefail
out=${1:?give an output folder}
mkdir -p "$out"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
tar xzf docs/validation-data/h200-compare-configs/runs.tgz -C "$d"
for w in full steady; do
  python -m wattbench compare "$d/cc/A1" "$d/cc/Z" --window "$w" --db "$d/history.sqlite3" --json \
    > "$out/compare-A1-Z-$w.json"
  COLUMNS=100 python -m wattbench compare "$d/cc/A1" "$d/cc/Z" --window "$w" --db "$d/history.sqlite3" \
    > "$out/compare-A1-Z-$w.txt" 2>&1
done
