#!/usr/bin/env bash
# Builds llama.cpp's llama-server and writes a tiny GGUF model for the tests
# that run capstan against a real engine, and prints the directory holding
# both (llama-server and tiny.gguf) as its last line of stdout.
#
# No download site is reachable from our machines: llama.cpp's full source
# comes from the npm registry, inside node-llama-cpp (package/llama/
# gitRelease.bundle is a git bundle of the llama.cpp release it wraps), and
# is built with Debian's cmake and g++. The model is a llama-architecture
# network with random weights and llama.cpp's own 32k-token SentencePiece
# vocabulary (models/ggml-vocab-llama-spm.gguf), written by the tree's gguf-py:
# it loads and generates like any llama model, only its text is gibberish.
#
# Cached outside the repository, keyed by the package version and by this
# CPU (the build uses GGML_NATIVE, whose code may not run on another CPU):
#   ${CAPSTAN_ENGINE_CACHE:-$HOME/.cache/capstan/engines}/llamacpp-<version>-<cpu>/
# The first run takes about 10 minutes on 2 cores; later runs print the
# directory at once. Progress goes to stderr.
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.22.1

log() { echo "llamacpp.sh: $*" >&2; }

cpu_key=$( (uname -m; grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true) | sha256sum | cut -c1-12)
cache="${CAPSTAN_ENGINE_CACHE:-$HOME/.cache/capstan/engines}"
dir="$cache/llamacpp-$NODE_LLAMA_CPP_VERSION-$cpu_key"
mkdir -p "$dir"

if [ -x "$dir/llama-server" ] && [ -s "$dir/tiny.gguf" ]; then
  echo "$dir"
  exit 0
fi

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v git >/dev/null || need+=(git)
# gguf-py needs numpy; Debian's is for Debian's python3.
/usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
if [ ${#need[@]} -gt 0 ]; then
  log "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/capstan-llamacpp.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION from npm"
(cd "$work" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null)
tar -xzf "$work/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz" -C "$work" package/llama/gitRelease.bundle
git clone -q "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
src="$work/src"

if [ ! -x "$dir/llama-server" ]; then
  start=$SECONDS
  log "building llama-server (about 10 minutes on 2 cores)"
  # The UI options keep the build from downloading the web UI; OpenSSL and
  # shared libraries are not needed for a loopback server binary.
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DGGML_NATIVE=ON >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 ||
    { tail -50 "$work/build.log" >&2; exit 1; }
  # Through a temp name, so a killed build never leaves a half-written binary.
  cp "$work/build/bin/llama-server" "$dir/.llama-server.tmp"
  mv "$dir/.llama-server.tmp" "$dir/llama-server"
  log "built llama-server in $((SECONDS - start))s"
fi

if [ ! -s "$dir/tiny.gguf" ]; then
  log "writing tiny.gguf"
  PYTHONPATH="$src/gguf-py" /usr/bin/python3 "$(dirname "$0")/tiny_gguf.py" \
    "$src/models/ggml-vocab-llama-spm.gguf" "$dir/.tiny.gguf.tmp"
  mv "$dir/.tiny.gguf.tmp" "$dir/tiny.gguf"
fi

echo "$dir"
