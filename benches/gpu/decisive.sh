#!/usr/bin/env bash
# Scenario "a decisive per-kW answer" on the H200 / H100 (device tool): the paired design of
# `wattbench ab` on real engine starts, to the precision asked, with what it cost:
#
#   1. the tuned flags on two starts: `ab engine engine` — two engines of wattbench's CUDA flags for
#      transformers serve (llama-1b preset, 256 in / 64 out, c=16), resident together, measured
#      A B B A … until the per-kW ratio is known within ±2% (--precision 2) or the part's time ends.
#      The truth is 1.00×: the answer should be "within noise" with an interval inside ±2%;
#   2. the tuned flags against the engine's own defaults: `ab engine engine-defaults --precision 2`
#      (validation.md part 16 read this pair 1.22×, inconclusive at ±28.7%, from two runs apart, and
#      the defaults' trials fell 15% in a minute; the pairs cancel a drift both sides share, and the
#      answer names what is left).
#
# PRECONDITION=1 adds `--precondition --precondition-max $PRECONDITION_MAX` (90 s by default) to
# every part: each side, after its priming and before the first pair, is loaded until its GPU
# temperature and its output tok/s settle (docs/accounting.md §10c), at most PRECONDITION_MAX
# seconds per side; the part's limit grows by 2 × PRECONDITION_MAX for it (within BUDGET_S: run one
# part per call), and parts.json records, per side, whether it settled, in how many loads and
# seconds, each load's tok/s and the host's CPUs over it, and why it stopped (the same lines print
# as "precondition A: …"); each side's trials' host CPUs (busy, steal, the engine's cores) print too:
#   PRECONDITION=1 PARTS=tuned-defaults PART_S=330 bash benches/gpu/decisive.sh
# Per part: the answer lines, the precision reached on the per-kW ratio, the pairs, why it stopped,
# and the device time each configuration spent measuring (the sum of its trials' windows) and in
# all (the part's wall time, engine starts included): parts.json, beside the logs.
#
# Both engines are resident on one GPU at once (ab measures them alternately): each takes its own
# paged cache. If the second cannot start for memory, give both sides a smaller cache with
# AB_MEMORY=0.3 (added as --cb-max-memory-percent to every side; the tuned flags otherwise as
# transformers_serve.CUDA_TUNED_ARGS). The meter is shared: the GPU's idle draw with both engines
# resident is measured before the first pair and shown with its share of each side's power.
#
# Reads only; never changes a GPU setting (power limit, clocks, persistence, MIG). Must end within
# 9 minutes of wall time (BUDGET_S, 530 s): each part runs under `timeout` with what is left (PART_S
# each, 250 s by default), and its pairs stop at --max-time before that. PARTS picks the parts
# ("tuned-tuned tuned-defaults" by default); one part per call gives it the whole call:
#   PARTS=tuned-defaults PART_S=520 DURATION=12 bash benches/gpu/decisive.sh
# Run from the repository root with the wheels carried in .whl/ (docs/validation.md says which):
#   bash benches/gpu/decisive.sh
# A dry run on a CPU machine (no meter: the figures are estimates; no GPU temperature: with
# PRECONDITION=1 the throughput rule alone decides; PARTS=tuned-defaults to try one part):
#   TUNED_ARGS="--cb-num-blocks 512 --cb-max-batch-tokens 2048" MODEL=tiny DEVICE=cpu CONC=2 OUTPUT_TOKENS=16 \
#     DURATION=3 PART_S=200 OUT=/tmp/o bash benches/gpu/decisive.sh
# Outputs under $OUT: log.txt, PROVENANCE.json (script, arguments, commit, device, date),
# parts.json (per part: the answer, precision reached, pairs, stop reason, seconds per configuration),
# runs.tgz (every run directory with each part's stdout/stderr and the history database).
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
D=/tmp/decisive
rm -rf $D && mkdir -p $D
t0=$(date +%s)
BUDGET_S=${BUDGET_S:-530}  # the whole script, engine starts and the archive included (9 minutes = 540 s)
PART_S=${PART_S:-250}     # each part's limit, engine starts included
PARTS=${PARTS:-"tuned-tuned tuned-defaults"}  # which parts, in order (one part per call gives it the whole call)
PRECONDITION=${PRECONDITION:-0}  # 1: each side preconditioned before the first pair (--precondition)
PRECONDITION_MAX=${PRECONDITION_MAX:-90}  # its limit per side, seconds (--precondition-max)
PRE=""
PRE_S=0
if [ "$PRECONDITION" = 1 ]; then
  PRE="--precondition --precondition-max $PRECONDITION_MAX"
  PRE_S=$(( 2 * PRECONDITION_MAX ))
fi
MEM=""
[ -n "${AB_MEMORY:-}" ] && MEM=" --cb-max-memory-percent ${AB_MEMORY}"
TUNED="--cb-use-cuda-graph --cb-max-batch-tokens 8192 --cb-max-memory-percent 0.5"
[ -n "$MEM" ] && TUNED="--cb-use-cuda-graph --cb-max-batch-tokens 8192${MEM}"
TUNED=${TUNED_ARGS:-$TUNED}  # the dry run on a CPU gives CPU flags here (CUDA graphs need a GPU)
COMMON="--model ${MODEL:-llama-1b} --device ${DEVICE:-cuda} -c ${CONC:-16} --input-tokens 256
  --output-tokens ${OUTPUT_TOKENS:-64} --duration ${DURATION:-6} --warmup 2s --idle 3 --no-html
  --precision 2 --pairs 4 --max-pairs 24 --db $D/history.sqlite --json"

part() {  # part NAME SIDE_A SIDE_B
  local name=$1 a=$2 b=$3 s left limit
  s=$(date +%s)
  left=$(( BUDGET_S - (s - t0) - 15 ))   # 15 s kept for the summary and the archive
  limit=$(( PART_S + PRE_S ))            # --precondition's loads of both sides on top of the part's
  limit=$(( left < limit ? left : limit ))
  if [ "$limit" -lt $(( 90 + PRE_S )) ]; then echo "$name: skipped, $left s left of the call"; return; fi
  # the pairs stop (--max-time) early enough for the last block (~2 trials of DURATION + drains)
  # and the engines' stop to fit in the part's limit; engine starts and preconditioning come before the pairs
  local pairs_s=$(( limit - 140 - PRE_S ))
  [ "$pairs_s" -lt 30 ] && pairs_s=30
  echo "== $name: ab '$a' '$b' (limit ${limit} s, pairs at most ${pairs_s} s${PRE:+, $PRE})"
  # shellcheck disable=SC2086  # COMMON and PRE are lists of arguments
  timeout "$limit" python3 -m wattbench ab "$a" "$b" $COMMON $PRE --max-time "$pairs_s" --out "$D/$name" \
    > "$D/$name.json" 2> "$D/$name.stderr.txt"
  echo "$name: rc=$? wall $(( $(date +%s) - s )) s"
  echo "$(( $(date +%s) - s ))" > "$D/$name.wall_s"
  tail -5 "$D/$name.stderr.txt"
}

for p in $PARTS; do
  case $p in
    tuned-tuned) part tuned-tuned "engine:$TUNED" "engine:$TUNED" ;;
    tuned-defaults) part tuned-defaults "engine:$TUNED" "engine-defaults:${MEM# }" ;;
    *) echo "decisive: unknown part '$p' (tuned-tuned, tuned-defaults)" >&2; exit 2 ;;
  esac
done

echo "== summary"
python3 - "$D" "$OUT/parts.json" "$PRECONDITION" "$PRECONDITION_MAX" $PARTS <<'PY'
import json, sys
from pathlib import Path
d, out = Path(sys.argv[1]), Path(sys.argv[2])
pre = sys.argv[3] == "1"
parts = []
for name in sys.argv[5:]:
    p = {"part": name, "precondition": {"asked": pre, "max_s": float(sys.argv[4]) if pre else None}}
    try:
        p["wall_s"] = float((d / f"{name}.wall_s").read_text())
    except (OSError, ValueError):
        pass
    try:
        data = json.loads((d / f"{name}.json").read_text())
    except (OSError, ValueError) as e:
        p["error"] = f"no answer: {e}"
        parts.append(p)
        print(name, p["error"])
        continue
    cmp = data["comparison"]
    p.update(run_ids=cmp["run_ids"], stopped=cmp["stopped"], precision_pct=cmp["precision_pct"],
             idle=cmp["idle_lines"], levels=[])
    for lv in cmp["levels"]:
        p["levels"].append({k: lv.get(k) for k in ("key", "pairs", "answer", "precision_line",
                                                   "precision_reached_pct", "pairs_needed")})
        print(lv["answer"])
        print(lv["precision_line"])
    # device time per configuration: its trials' windows, from its run directory
    p["measured_s"] = {}
    for side, rd in zip("AB", data["run_dirs"]):
        r = json.loads((Path(rd) / "result.json").read_text())
        pc = (r.get("noise") or {}).get("precondition")
        if pre:  # each side's record as the run wrote it (noise.precondition), or why there is none
            keep = ("settled", "rules", "duration_s", "rounds", "requests", "reason", "throughput_change_pct",
                    "temperature_c", "slope_c_per_min", "round_output_tokens_per_s", "round_end_s",
                    "round_host_cpu")
            p["precondition"][side] = {k: pc.get(k) for k in keep} if pc else {"reason": "not recorded"}
            print(f"precondition {side}: {pc['reason'] if pc else 'not recorded'}")
        # the host's CPUs over each trial (LevelResult.host_cpu): a CPU-bound engine slowed by another
        # tenant or a VM's steal shows here, where no GPU reading moves
        hosts = [h for lv in r.get("levels", []) for h in ((lv.get("trials") or {}).get("host_cpu")
                                                            or [lv.get("host_cpu")]) if h]
        p.setdefault("host_cpu", {})[side] = hosts
        if hosts:
            def span(key, hs=hosts):
                vals = [h.get(key) for h in hs if h.get(key) is not None]
                return f"{min(vals):.1f}–{max(vals):.1f}" if vals else "not read"
            print(f"host CPU {side} over {len(hosts)} trials: busy {span('busy_pct')}%, steal {span('steal_pct')}%, "
                  f"server {span('server_cpu_cores')} cores")
        total = 0.0  # each level: its trials times its (last trial's) window: an estimate to the second
        for lv in r.get("levels", []):
            dur = (lv.get("window") or {}).get("duration_s") or 0.0
            total += dur * ((lv.get("trials") or {}).get("n") or 1)
        p["measured_s"][side] = round(total, 1)
    print(f"{name}: stopped at {cmp['stopped']}; seconds measured A {p['measured_s']['A']}, "
          f"B {p['measured_s']['B']}; part wall {p.get('wall_s')} s")
    parts.append(p)
out.write_text(json.dumps(parts, indent=2) + "\n")
PY
echo "total wall $(( $(date +%s) - t0 )) s"
tar czf "$OUT/runs.tgz" -C /tmp decisive 2>/dev/null
ls -la "$OUT"
