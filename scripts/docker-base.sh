#!/usr/bin/env bash
# Builds the Go builder base image locally, because no image registry is
# reachable (`FROM golang` cannot be pulled): `docker import` of a tar stream
# of this host's GOROOT placed at /usr/local/go, plus an empty /tmp (1777).
# There is no shell or libc in it: the Dockerfile's build stage uses
# exec-form RUN with CGO_ENABLED=0 and GOPROXY=off (modules come vendored).
#
# Usage: scripts/docker-base.sh [--force]
#   prints the image reference (gin-go-builder:<go version>) on stdout;
#   an existing image with that tag is kept unless --force is given.
# Env: GO (default go), GIN_GO_BASE (override the image reference).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
force=0
[ "${1:-}" = --force ] && force=1

goroot=$(GOTOOLCHAIN=local "$GO" env GOROOT)
gover=$(GOTOOLCHAIN=local "$GO" env GOVERSION) # go1.26.8 (maybe "go1.26.8 X:...")
gover=${gover%% *}
gover=${gover#go}
goarch=$(GOTOOLCHAIN=local "$GO" env GOARCH)
ref=${GIN_GO_BASE:-gin-go-builder:${gover//[^A-Za-z0-9_.-]/_}}

if [ "$force" = 0 ] && docker image inspect "$ref" >/dev/null 2>&1; then
  echo "docker-base: $ref exists (--force rebuilds it)" >&2
  echo "$ref"
  exit 0
fi
[ -x "$goroot/bin/go" ] || { echo "docker-base: no go binary in GOROOT $goroot" >&2; exit 1; }
[ "$goarch" = "$(docker version -f '{{.Server.Arch}}')" ] || {
  echo "docker-base: host Go is $goarch, the Docker engine runs $(docker version -f '{{.Server.Arch}}')" >&2
  exit 1
}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tmp" "$stage/usr/local"
chmod 1777 "$stage/tmp"
chmod 0755 "$stage/usr" "$stage/usr/local"

echo "docker-base: importing $goroot as $ref" >&2
start=$(date +%s)
# One tar stream: tmp/ and usr/ from the staging dir, then GOROOT's "./..."
# renamed to usr/local/go/... (S: symlink targets are left alone). What
# `go build` does not read (tests, API lists, docs, testdata) stays out.
tar -c -f - --numeric-owner --owner=0 --group=0 \
  -C "$stage" tmp usr \
  -C "$goroot" \
  --exclude=./test --exclude=./api --exclude=./doc --exclude=./misc \
  --exclude=testdata --exclude=./pkg/obj \
  --transform='s,^\.\(/\|$\),usr/local/go\1,S' \
  . |
  docker import \
    --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV GOROOT=/usr/local/go' \
    --change 'ENV HOME=/tmp' \
    --change 'ENV TMPDIR=/tmp' \
    --change 'ENV GOTOOLCHAIN=local' \
    --change 'ENV GOPROXY=off' \
    --change 'ENV CGO_ENABLED=0' \
    --change 'ENV GOPATH=/tmp/gopath' \
    --change 'ENV GOCACHE=/tmp/gocache' \
    --change 'WORKDIR /tmp' \
    --change 'CMD ["go", "version"]' \
    --message "GOROOT of $gover ($goroot) for gin's Docker build" \
    - "$ref" >/dev/null
echo "docker-base: $ref imported in $(($(date +%s) - start))s" >&2
# A base that cannot run go is worse than none.
docker run --rm --network none "$ref" go version >&2 || { docker rmi "$ref" >/dev/null 2>&1 || true; exit 1; }
echo "$ref"
