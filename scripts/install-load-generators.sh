#!/usr/bin/env bash
# Install NVIDIA AIPerf and GuideLLM, pinned, each in its own virtualenv under ROOT, for
# `wattbench measure`'s integration tests (tests/integration/test_measure_tools.py) and for anyone
# who wants to run them beside wattbench. Idempotent: a venv whose pinned version is already
# installed is left as it is, so ROOT can be a cache kept between CI runs.
#
#   bash scripts/install-load-generators.sh ROOT [PYTHON]
#
# Prints, on stdout, the lines to export their executables (eval them):
#   export WATTBENCH_AIPERF=ROOT/aiperf-$AIPERF_VERSION/bin/aiperf
#   export WATTBENCH_GUIDELLM=ROOT/guidellm-$GUIDELLM_VERSION/bin/guidellm
# Everything else goes to stderr.
#
# GuideLLM's own dependencies pull torch; torch==$TORCH_VERSION is named so that pip takes the CPU
# wheel these machines resolve (a plain "torch" can pull a CUDA build).
set -euo pipefail

ROOT="${1:?usage: install-load-generators.sh ROOT [PYTHON]}"
PYTHON="${2:-${PYTHON:-python3}}"
AIPERF_VERSION="${AIPERF_VERSION:-0.13.0}"
GUIDELLM_VERSION="${GUIDELLM_VERSION:-0.8.1}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
mkdir -p "$ROOT"
ROOT="$(cd "$ROOT" && pwd)"

install_one() {  # name version exe pip-args...
  local name="$1" version="$2" exe="$3"
  shift 3
  local venv="$ROOT/$name-$version"
  # (sed reads all of pip's output: grep -q would end the pipe early and pipefail would call it a failure)
  if [ -x "$venv/bin/$exe" ] && [ "$("$venv/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')" = "$version" ]; then
    echo "$name $version: cached at $venv" >&2
    return
  fi
  local t0
  t0=$(date +%s)
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" "$name==$version" >&2
  "$venv/bin/$exe" --help >/dev/null  # it starts
  echo "$name $version: installed in $(( $(date +%s) - t0 )) s at $venv" >&2
}

install_one aiperf "$AIPERF_VERSION" aiperf
install_one guidellm "$GUIDELLM_VERSION" guidellm "torch==$TORCH_VERSION"
echo "export WATTBENCH_AIPERF=$ROOT/aiperf-$AIPERF_VERSION/bin/aiperf"
echo "export WATTBENCH_GUIDELLM=$ROOT/guidellm-$GUIDELLM_VERSION/bin/guidellm"
