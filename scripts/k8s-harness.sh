#!/usr/bin/env bash
# k8s-harness.sh build: the Kubernetes API server the tests run against
# (internal/kubetest). Debian has etcd-server but no kube-apiserver, so this
# installs etcd-server from apt when missing and builds kube-apiserver and
# kubectl from the Go module proxy into a cache directory, once per machine:
#   $GIN_K8S_BIN (default /var/cache/gin-k8s-ci/$GIN_K8S_VERSION)
# ~150 MB of modules and ~8 min on 2 cores the first time; nothing after.
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces its staging
# modules with ./staging paths its module zip lacks): a wrapper module
# requires it and replaces each k8s.io/<staging> v0.0.0 with the published
# k8s.io/<staging> v0.<minor>.<patch>. The version ldflags make the server
# report its real version (kubectl refuses v0.0.0-master+$Format:%H$).
set -euo pipefail
VERSION=${GIN_K8S_VERSION:-v1.36.3}
STAGING="v0.${VERSION#v1.}"
BIN=${GIN_K8S_BIN:-/var/cache/gin-k8s-ci/$VERSION}

log() { printf '[k8s-harness %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

etcd_server() {
  command -v etcd >/dev/null && return
  log "installing etcd-server (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
}

build() {
  etcd_server
  if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ]; then log "cached in $BIN"; return; fi
  command -v go >/dev/null || { echo "k8s-harness: go is needed to build kube-apiserver" >&2; exit 1; }
  local b; b=$(mktemp -d /tmp/k8s-harness-build.XXXXXX)
  # Expanded now: b is local to build() and unset when the EXIT trap runs
  # (under set -u a late "$b" made the first build exit 1 after it succeeded).
  trap "rm -rf -- '$b'" EXIT
  log "building kube-apiserver and kubectl $VERSION in $b (first time: ~8 min on 2 cores)"
  local kmod
  kmod=$(cd "$b" && go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -s "$kmod" ] || { echo "k8s-harness: could not download k8s.io/kubernetes@$VERSION" >&2; exit 1; }
  {
    printf 'module ginkube/build\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$VERSION"
    grep -E '^[[:space:]]+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$kmod" | awk -v v="$STAGING" '{printf "\t%s => %s %s\n", $1, $1, v}'
    printf ')\n'
  } >"$b/go.mod"
  cat >"$b/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  local minor="${VERSION#v1.}"; minor="${minor%%.*}"
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$BIN"
  (cd "$b" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 \
    && go build -trimpath -ldflags="$ld" -o "$BIN/kube-apiserver.tmp.$$" k8s.io/kubernetes/cmd/kube-apiserver \
    && go build -trimpath -ldflags="$ld" -o "$BIN/kubectl.tmp.$$" k8s.io/kubernetes/cmd/kubectl)
  mv "$BIN/kube-apiserver.tmp.$$" "$BIN/kube-apiserver"; mv "$BIN/kubectl.tmp.$$" "$BIN/kubectl"
  log "built into $BIN"
}

case "${1:-}" in
  build) build ;;
  *) echo "usage: $0 build" >&2; exit 64 ;;
esac
