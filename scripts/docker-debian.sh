#!/usr/bin/env bash
# Builds the Debian base images of the GPU agent image (Dockerfile target
# agent-gpu) locally, because no image registry is reachable (`FROM debian`
# cannot be pulled): mmdebstrap makes the root file system from Debian's
# package archive (its default mirrors, or the host's apt sources with
# GIN_DEBIAN_HOST_SOURCES=1) and `docker import` turns the tar stream into an
# image:
#   slim  gin-debian:<suite>-slim  minbase (the Essential packages and apt),
#         merged /usr, no docs (copyrights kept), man pages, info or locales:
#         what Debian's -slim images are. glibc for the cgo gin-agent, and
#         ldconfig for the NVIDIA container toolkit's hook (it refreshes the
#         image's ld.so.cache after mounting the driver's libraries).
#   cc    gin-debian:<suite>-cc    the same plus gcc and libc6-dev: the cgo
#         build stage (the Go toolchain comes from scripts/docker-base.sh).
# Both come from the same suite, so the agent needs no newer glibc than the
# one it runs on. The package set is today's archive; --force rebuilds.
#
# Usage: scripts/docker-debian.sh slim|cc [--force]
#   prints the image reference on stdout; an existing image with that tag is
#   kept unless --force is given. ~30 s (slim) and ~60 s (cc) the first time.
# Env: GIN_DEBIAN_SUITE (default bookworm), GIN_DEBIAN_SLIM and GIN_DEBIAN_CC
#      (override the image references), GIN_DEBIAN_HOST_SOURCES=1 (the
#      host's /etc/apt sources instead of mmdebstrap's default mirrors).
# Needs mmdebstrap (apt-get installs it when missing and run as root).
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-}
force=0
[ "${2:-}" = --force ] && force=1
suite=${GIN_DEBIAN_SUITE:-bookworm}
[[ $suite =~ ^[a-z]+$ ]] || { echo "docker-debian: GIN_DEBIAN_SUITE '$suite' is not a Debian suite name" >&2; exit 2; }
case "$kind" in
  slim) ref=${GIN_DEBIAN_SLIM:-gin-debian:$suite-slim}; include=() ;;
  cc) ref=${GIN_DEBIAN_CC:-gin-debian:$suite-cc}; include=(--include=gcc,libc6-dev) ;;
  *) echo "usage: scripts/docker-debian.sh slim|cc [--force]" >&2; exit 2 ;;
esac

if [ "$force" = 0 ] && docker image inspect "$ref" >/dev/null 2>&1; then
  echo "docker-debian: $ref exists (--force rebuilds it)" >&2
  echo "$ref"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "docker-debian: installing mmdebstrap with apt-get" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  else
    echo "docker-debian: mmdebstrap is missing (apt-get install mmdebstrap, or run as root)" >&2
    exit 1
  fi
fi
hooks=/usr/share/mmdebstrap/hooks/merged-usr
[ -d "$hooks" ] || { echo "docker-debian: $hooks is missing (mmdebstrap too old?)" >&2; exit 1; }

mirrors=()
if [ "${GIN_DEBIAN_HOST_SOURCES:-0}" = 1 ]; then
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && mirrors+=("$f")
  done
  [ "${#mirrors[@]}" -gt 0 ] || { echo "docker-debian: GIN_DEBIAN_HOST_SOURCES=1 but the host has no apt sources" >&2; exit 1; }
fi

echo "docker-debian: building $ref (mmdebstrap $suite minbase${include:+ ${include[*]#--include=}})" >&2
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Debian's -slim path excludes (dpkg keeps them in /etc/dpkg/dpkg.cfg.d, so
# packages added later stay slim too).
slim=(
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/groff/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/linda/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)
if ! mmdebstrap --variant=minbase --hook-dir="$hooks" --format=tar \
  "${slim[@]}" "${include[@]}" "$suite" - "${mirrors[@]}" 2>"$log" |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "Debian $suite minbase ($kind) for gin's Docker build, mmdebstrap $(date -u +%Y-%m-%d)" \
    - "$ref" >/dev/null; then
  tail -20 "$log" >&2
  echo "docker-debian: mmdebstrap or docker import failed" >&2
  docker rmi "$ref" >/dev/null 2>&1 || true
  exit 1
fi
echo "docker-debian: $ref built in $(($(date +%s) - start))s" >&2
# A base whose libc cannot run a program is worse than none.
docker run --rm --network none "$ref" ldd --version >/dev/null || {
  echo "docker-debian: $ref cannot run ldd" >&2
  docker rmi "$ref" >/dev/null 2>&1 || true
  exit 1
}
echo "$ref"
