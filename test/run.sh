#!/usr/bin/env bash
# The test command: installs what the tests drive when it is missing (Debian
# packages through apt-get, Go modules), then runs every Go test and the
# end-to-end scripts under test/e2e. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
# Debian's prometheus package also ships promtool (the alert rules' tests).
command -v prometheus >/dev/null && command -v promtool >/dev/null || need+=(prometheus)
command -v nginx >/dev/null || need+=(nginx)
# Spaces run Debian's Jupyter server (test/spaces drives it through capstan).
command -v jupyter-notebook >/dev/null || need+=(jupyter-notebook)
# The sample notebooks run in a space with Debian's nbconvert and boto3.
command -v jupyter-nbconvert >/dev/null || need+=(jupyter-nbconvert)
/usr/bin/python3 -c 'import boto3' 2>/dev/null || need+=(python3-boto3)
# Spaces and engines run in bubblewrap's sandbox (docs/security.md).
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Code Editor spaces run code-server (npm; built once per version, outside
# the repository).
command -v code-server >/dev/null || bash test/spaces/install-code-server.sh
if ! command -v aws >/dev/null; then
  echo "installing the aws CLI (pip)"
  python3 -m pip install -q awscli
fi
# moto's standalone server is the S3-compatible store the model-source tests use.
if ! command -v moto_server >/dev/null || ! python3 -c 'import moto.server' 2>/dev/null; then
  echo "installing moto[server] (pip)"
  python3 -m pip install -q 'moto[server]'
fi

# Tests that need an installed tool (promtool) fail instead of skipping.
export CI="${CI:-true}"

# The web console: built from web/console with the versions its
# package-lock.json pins; the built assets are committed (so `go run
# ./cmd/capstan serve` works from a fresh clone without npm), and must be
# what the sources build to.
if ! command -v npm >/dev/null; then
  # Debian's own nodejs (18) is older than Vite needs, so this is not apt-get's job.
  echo "the web console's build needs Node.js >= 20.19 with npm, which this machine lacks" >&2
  exit 1
fi
(cd web/console && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build >/dev/null)
if [ -n "$(git status --porcelain -- internal/console/dist)" ]; then
  git status --short -- internal/console/dist
  echo "internal/console/dist differs from what web/console builds: run 'npm run build' in web/console and commit it" >&2
  exit 1
fi

go mod download
go vet ./...
go build -o bin/capstan ./cmd/capstan
# Tests that run the real binary (test/chaos) take this one instead of building their own.
export CAPSTAN_BIN="$PWD/bin/capstan"

# The operator's tests (internal/operator) run a real control plane: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok,
# built from the Go module proxy into ~/.cache/capstan/k8s (about 10-15
# minutes the first time on 2 cores, then cached; CAPSTAN_K8S_CACHE moves it).
CAPSTAN_K8S_BIN="$(test/k8s/binaries.sh)"
export CAPSTAN_K8S_BIN

# The real-engine tests run llama.cpp's llama-server on a tiny GGUF model,
# built from the npm registry's node-llama-cpp with Debian's cmake into
# ~/.cache/capstan/engines (about 10 minutes the first time on 2 cores,
# then cached, keyed by version and CPU; CAPSTAN_ENGINE_CACHE moves it).
CAPSTAN_LLAMACPP_DIR="$(test/engines/llamacpp.sh | tail -1)"
export CAPSTAN_LLAMACPP_DIR

# -p 1 keeps process-heavy packages from competing for the 2 CI cores.
go test -p 1 -count=1 -timeout 30m $(go list ./... | grep -v '/test/chaos$')

# The race detector over the packages whose goroutines share state: the
# gateway (routing, the KV index), the serving spine and its reconcile loop,
# the store, the KV tiers and the cluster.
go test -race -count=1 -timeout 15m ./internal/gateway ./internal/gateway/openai ./internal/serving \
  ./internal/reconcile ./internal/store ./internal/kv/... ./internal/cluster

# The chaos test on its own and verbose: go test ./... hides a passing
# test's output, and its report line is the point (docs/reliability.md).
chaos_log=$(mktemp)
if ! go test -count=1 -v -timeout 10m ./test/chaos >"$chaos_log" 2>&1; then
  cat "$chaos_log"
  exit 1
fi
grep -E '^chaos: kills=|^ok' "$chaos_log"
rm -f "$chaos_log"

# Every fuzz target for a short fixed budget (longer: FUZZTIME=8h test/fuzz.sh).
./test/fuzz.sh

for script in test/e2e/*.sh; do
  [ -e "$script" ] || continue
  echo "== $script"
  CAPSTAN_BIN="$PWD/bin/capstan" bash "$script"
done
echo "all tests passed"
