#!/usr/bin/env bash
# The energy error by window length on the H200 (issue 25): benches/gpu/window_error.py with the
# same install step as h200_default.sh. Reads only; never changes a GPU setting. Run from the repo
# root with .whl carried:
#   bash benches/gpu/h200_window_error.sh
# Outputs under $OUT: log.txt, window_error.json, runs.tgz (run directories, the observer's log).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
REPO=$PWD
export PYTHONPATH=/tmp/site:$REPO/src PYTHONUNBUFFERED=1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
timeout 560 python3 "$REPO/benches/gpu/window_error.py" --out "$OUT"
rc=$?
ls -la "$OUT"
exit $rc
