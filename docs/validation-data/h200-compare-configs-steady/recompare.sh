#!/usr/bin/env bash
# Step 3 of benches/gpu/h200_compare_configs.sh again, over the run directories and the history
# database that the H200 call left in runs.tgz (beside this script), with the code of the checkout
# this runs from: compare A1 A2, A1 Z and A3 Z (full and --window steady, text and JSON) and
# regress Z --baseline A1. Run from the repository root; OUTDIR receives the outputs:
#   bash docs/validation-data/h200-compare-configs-steady/recompare.sh OUTDIR
set -euo pipefail
out=${1:?give an output folder}
mkdir -p "$out"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
tar xzf docs/validation-data/h200-compare-configs-steady/runs.tgz -C "$d"
D=$d/cc
W="python -m wattbench"
for pair in "A1 A2" "A1 Z" "A3 Z"; do
  set -- $pair
  for w in full steady; do
    COLUMNS=100 $W compare $D/$1 $D/$2 --db $D/history.sqlite --window $w > "$out/compare-$w-$1-$2.txt" 2>&1
    $W compare $D/$1 $D/$2 --db $D/history.sqlite --window $w --json > "$out/compare-$w-$1-$2.json"
  done
done
COLUMNS=100 $W regress $D/Z --baseline $D/A1 --db $D/history.sqlite > "$out/regress-Z-A1.txt" 2>&1 || true
COLUMNS=100 $W regress $D/Z --baseline $D/A1 --db $D/history.sqlite --window steady > "$out/regress-steady-Z-A1.txt" 2>&1 || true
