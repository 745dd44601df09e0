#!/usr/bin/env bash
# One device call for the checks after the record-spool change (issue 17) and the client-accuracy
# figure on a quiet host (issue 16). Reads only; never changes a GPU setting. Run from the repo root
# with .whl carried:  bash benches/gpu/h200_session3.sh
#  1. the README's first command, unchanged, with the independent NVML counter (h200_default.sh);
#  2. wattbench's TTFT/ITL error against the scripted server's write log at 8/64/256/512 streams
#     (benches/peer_clients.py, wattbench only: the peers' tools are not installed there), on the
#     host's 16 otherwise idle cores;
#  3. benches/level_memory.py at 20,000 and 200,000 requests (peak RSS, bytes/request).
# Outputs under $OUT: default/ (log.txt, default_run.tgz), peers.json, peers.txt, memory.txt, summary.txt.
set -u
REPO=$PWD
mkdir -p "$OUT/default"
OUT="$OUT/default" bash benches/gpu/h200_default.sh; rc_default=$?
export PYTHONPATH=/tmp/site:$REPO/src:$REPO PYTHONUNBUFFERED=1
nproc; cat /proc/loadavg
start=$(date +%s)
timeout 240 python3 benches/peer_clients.py --tools wattbench --streams 8,64,256,512 --json "$OUT/peers.json" \
  > "$OUT/peers.txt" 2>&1; rc_peers=$?
echo "peers: rc=$rc_peers wall $(( $(date +%s) - start )) s" >> "$OUT/peers.txt"
start=$(date +%s)
timeout 200 python3 benches/level_memory.py --requests 20000,200000 --streams 64 --output-tokens 16 \
  > "$OUT/memory.txt" 2>&1; rc_mem=$?
echo "memory: rc=$rc_mem wall $(( $(date +%s) - start )) s" >> "$OUT/memory.txt"
{ echo "default rc=$rc_default peers rc=$rc_peers memory rc=$rc_mem"; tail -25 "$OUT/peers.txt"; cat "$OUT/memory.txt"; } \
  | tee "$OUT/summary.txt"
