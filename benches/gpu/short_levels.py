"""Each level's efficiency verdict, steady state, E2E p50, edge resolution and non-note findings of
a run directory (benches/gpu/h200_short.sh prints it after the run).

    python3 benches/gpu/short_levels.py RUN_DIR
"""

import json
import sys

r = json.load(open(sys.argv[1] + "/result.json"))
for lv in r["levels"]:
    a = lv["energy"]["accelerator"]
    sw = (lv.get("steady_window") or {}).get("duration_s")
    print(f"{lv['label']}: efficiency {lv['validity']['verdict']}, steady {sw:.1f} s, E2E p50 "
          f"{lv['latency']['e2e_ms']['p50'] / 1e3:.2f} s, edges at {a['update_period_s']:.2f} s; "
          + "; ".join(f"{f['severity']} {f['kind']}" for f in lv["validity"]["findings"] if f["severity"] != "note"))
