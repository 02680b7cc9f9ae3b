#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries the operator's tests run against
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and a
# kubectl of the same release) from the
# Go module proxy, and prints the directory that holds them.
#
# No download site is reachable from our machines, so envtest's own installer
# cannot fetch prebuilt binaries; everything here comes through `go build`.
# The binaries are cached outside the repository, keyed by their versions:
#   ${CAPSTAN_K8S_CACHE:-$HOME/.cache/capstan/k8s}/<versions>/bin
# A binary already there is not rebuilt. The first run takes about 10-15
# minutes on 2 cores (kube-apiserver is most of it); later runs print the
# directory at once. None of this touches the repository's go.mod.
#
# Usage: test/k8s/binaries.sh [etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kwok ...]
# (no arguments: all of them). Progress goes to stderr; stdout is only the bin dir.
set -euo pipefail

# The versions, in one place. k8s.io/kubernetes' staging modules are published
# as k8s.io/<name> v0.<minor>.<patch> of the same release.
K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

cache="${CAPSTAN_K8S_CACHE:-$HOME/.cache/capstan/k8s}"
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION/bin"
mkdir -p "$bin"

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

log() { echo "binaries.sh: $*" >&2; }

# scratch makes an empty module in a temp dir for one build; the caller removes it.
scratch() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/capstan-k8s-build.XXXXXX")
  (cd "$dir" && GOFLAGS=-mod=mod go mod init capstan.local/k8sbuild >/dev/null 2>&1)
  echo "$dir"
}

# install builds pkg (at the module requirement already in $dir) to $bin/$name,
# through a temp name so a killed build never leaves a half-written binary.
install() {
  local dir=$1 name=$2 pkg=$3 ldflags=${4:-}
  local start=$SECONDS
  log "building $name ($pkg)"
  (cd "$dir" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/.$name.tmp" "$pkg")
  mv "$bin/.$name.tmp" "$bin/$name"
  log "built $name in $((SECONDS - start))s"
}

missing() { [ ! -x "$bin/$1" ]; }

build_etcd() {
  missing etcd || return 0
  local dir
  dir=$(scratch)
  (cd "$dir" && GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2)
  install "$dir" etcd go.etcd.io/etcd/server/v3
  rm -rf "$dir"
}

# kube_module prepares a scratch module requiring k8s.io/kubernetes with every
# staging module (which its go.mod replaces by ./staging/... paths, meaningless
# for a dependency) replaced by the published module of the same release.
kube_module() {
  local dir gomod
  dir=$(scratch)
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || { log "no go.mod for k8s.io/kubernetes@$K8S_VERSION"; return 1; }
  {
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -oE '^[[:space:]]*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" |
      awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >>"$dir/go.mod"
  (cd "$dir" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes >&2)
  echo "$dir"
}

build_kube() {
  local todo=() name
  for name in "$@"; do missing "$name" && todo+=("$name"); done
  [ ${#todo[@]} -gt 0 ] || return 0
  local dir minor
  dir=$(kube_module)
  minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  # Without these the binaries report v0.0.0-master and kubectl warns about skew.
  local ver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  for name in "${todo[@]}"; do
    install "$dir" "$name" "k8s.io/kubernetes/cmd/$name" "$ver"
  done
  rm -rf "$dir"
}

build_kwok() {
  missing kwok || [ ! -s "$bin/kwok-stages.yaml" ] || return 0
  local dir src f
  dir=$(scratch)
  (cd "$dir" && GOFLAGS=-mod=mod go get "sigs.k8s.io/kwok@$KWOK_VERSION" >&2)
  missing kwok && install "$dir" kwok sigs.k8s.io/kwok/cmd/kwok
  # kwok needs stages (how fake nodes and pods change state); its "fast"
  # set, from the same module version, marks nodes Ready and pods Running.
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$src/kustomize/stage/$f"
  done >"$bin/.kwok-stages.yaml.tmp"
  mv "$bin/.kwok-stages.yaml.tmp" "$bin/kwok-stages.yaml"
  rm -rf "$dir"
}

kube=()
for name in "${want[@]}"; do
  case $name in
  etcd) build_etcd ;;
  kube-apiserver | kube-controller-manager | kube-scheduler | kubectl) kube+=("$name") ;;
  kwok) ;;
  *) log "unknown binary $name"; exit 2 ;;
  esac
done
[ ${#kube[@]} -eq 0 ] || build_kube "${kube[@]}"
for name in "${want[@]}"; do [ "$name" != kwok ] || build_kwok; done

echo "$bin"
