#!/bin/sh
# A "python" for WATTBENCH_TRANSFORMERS_PYTHON: `-m transformers.cli.transformers ARGS` runs
# serve_probe.py ARGS (the same server with probes); anything else is plain python
# ($WB_PROBE_PYTHON, default python3).
if [ "$1" = "-m" ] && [ "$2" = "transformers.cli.transformers" ]; then
  shift 2
  exec "${WB_PROBE_PYTHON:-python3}" "$(dirname "$0")/serve_probe.py" "$@"
fi
exec "${WB_PROBE_PYTHON:-python3}" "$@"
