# shellcheck shell=bash
# The shared start of every GPU scenario script (benches/gpu/h200_*.sh). Source it first thing,
# from the repository root, with $OUT set to the output directory (the device tool's $OUT):
#
#   source benches/gpu/preamble.sh
#
# Pass WATTBENCH_COMMIT=<commit> when the checkout's .git may be stale (benches/gpu/provenance.py).
# Afterwards: the carried wheels in .whl/ (or $WHEEL_DIR) are installed into /tmp/site (exits 1 if that fails),
# PYTHONPATH=/tmp/site:$REPO/src, PYTHONUNBUFFERED=1 and HF_HUB_DISABLE_TELEMETRY=1 are exported, REPO is the
# repository root, everything the script prints is also written to $OUT/log.txt (LOG=name.txt
# before sourcing picks another name), the log starts with the date, the GPU (nvidia-smi), torch/
# transformers versions and the commit, and $OUT/PROVENANCE.json records the script, its arguments,
# the commit, the device and the date (benches/gpu/provenance.py: the format). The script's own
# settings (set -u, extra exports, cd) come after the `source` line.
if [ -z "${OUT:-}" ]; then
  echo "preamble: OUT is not set; set it to the output directory (the device tool sets it)" >&2
  exit 2
fi
mkdir -p "$OUT"
REPO=$PWD
WHEEL_DIR=${WHEEL_DIR:-.whl}  # the carried wheels (another folder for a test run beside a checkout's own)
if compgen -G "$WHEEL_DIR/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEEL_DIR"/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$REPO/src PYTHONUNBUFFERED=1 HF_HUB_DISABLE_TELEMETRY=1
python3 "$REPO/benches/gpu/provenance.py" write "$OUT/PROVENANCE.json" "$0" "$@" \
  || echo "preamble: could not write $OUT/PROVENANCE.json" >&2
exec > >(tee "$OUT/${LOG:-log.txt}") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,power.limit,pstate,temperature.gpu,clocks.sm,clocks.mem,memory.used --format=csv 2>/dev/null \
  || echo "no nvidia-smi"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" 2>/dev/null \
  || echo "torch/transformers not importable"
git -C "$REPO" log --oneline -1 2>/dev/null || echo "commit unknown (no git)"
