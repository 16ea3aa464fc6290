#!/usr/bin/env bash
# make deb: builds dist/gin-agent_<version>_<arch>.deb, dist/gin-master_...deb
# and dist/gin-tools_...deb with nfpm (pinned in tools/go.mod) from the
# configs in deploy/deb/. Versions: the tag vX.Y.Z when HEAD is tagged, else
# X.Y.Z+gitN.gHASH after the last tag (0.0.0 without one), so later builds
# sort after earlier ones and after the tag they follow.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}
NFPM=("$GO" tool -modfile=tools/go.mod nfpm)

desc=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null || true)
if [[ $desc =~ ^v([0-9]+\.[0-9]+\.[0-9]+.*)-([0-9]+)-g([0-9a-f]+)$ ]]; then
  base=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} hash=${BASH_REMATCH[3]}
  if [[ $n == 0 ]]; then version=$base; else version="$base+git$n.g$hash"; fi
else
  version="0.0.0+git$(git rev-list --count HEAD 2>/dev/null || echo 0).g$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
fi
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || version="$version.dirty"
export GIN_DEB_VERSION=$version
export GIN_DEB_ARCH=${GIN_DEB_ARCH:-$("$GO" env GOARCH)}
case $GIN_DEB_ARCH in
  amd64) export GIN_DEB_MULTIARCH=x86_64-linux-gnu ;;
  arm64) export GIN_DEB_MULTIARCH=aarch64-linux-gnu ;;
  *) echo "deb-build: unsupported GOARCH $GIN_DEB_ARCH" >&2; exit 1 ;;
esac
export GIN_DEB_MAINTAINER=${GIN_DEB_MAINTAINER:-"GIN maintainers <maintainers@users.noreply.a-seed-e061e91f.example>"}
export GIN_DEB_LICENSE=${GIN_DEB_LICENSE:-"not-yet-chosen"}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
# -s -w: stripped (Debian ships no unstripped binaries).
ldflags="-s -w -X github.com/gin-topology/gin/internal/buildinfo.Version=$version"

stage=dist/stage
rm -rf "$stage"
mkdir -p "$stage/bin"
# gin-master and ginctl are static; gin-agent needs cgo (NVML, dlopened at
# run time) and the tuner plugin is a C shim plus a c-shared Go loader.
CGO_ENABLED=0 "$GO" build -trimpath -ldflags "$ldflags" -o "$stage/bin/" ./cmd/gin-master ./cmd/ginctl
# No -z now: go-nvml resolves NVML symbols lazily, by design.
CGO_ENABLED=1 "$GO" build -trimpath -buildmode=pie -ldflags "$ldflags" -o "$stage/bin/" ./cmd/gin-agent
make --no-print-directory plugin BIN="$stage/bin" GO="$GO" >/dev/null
strip --strip-unneeded "$stage/bin/libnccl-tuner-gin.so" "$stage/bin/libnccl-tuner-gin-go.so" "$stage/bin/libnccl-profiler-gin.so"

# Units: the repository's, with Debian's paths; the master runs as the
# gin-master system user (made by the postinst) instead of DynamicUser.
sed 's|/usr/local/bin/|/usr/bin/|g' deploy/systemd/gin-agent.service > "$stage/gin-agent.service"
sed -e 's|/usr/local/bin/|/usr/bin/|g' -e 's|^DynamicUser=yes$|User=gin-master\nGroup=gin-master|' \
  deploy/systemd/gin-master.service > "$stage/gin-master.service"
grep -q '^User=gin-master$' "$stage/gin-master.service" || { echo "deb-build: gin-master.service lost DynamicUser=yes; update the sed" >&2; exit 1; }

# Manual pages from --help (lintian wants one per command).
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
manpage() { # name section summary
  local name=$1 sec=$2 summary=$3
  {
    printf '.TH %s %s "%s" "gin %s" "GIN"\n.SH NAME\n%s \\- %s\n.SH DESCRIPTION\n.nf\n' \
      "${name^^}" "$sec" "$date" "$version" "$name" "$summary"
    "$stage/bin/$name" --help | sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'
    printf '.fi\n.SH SEE ALSO\nhttps://github.com/gin-topology/gin\n'
  } | gzip -9n > "$stage/$name.$sec.gz"
}
manpage gin-master 8 "replicated cluster-wide GPU topology service"
manpage gin-agent 8 "GPU, NVLink, PCIe and InfiniBand topology discovery agent"
manpage ginctl 1 "command line of the GIN topology service"

cat > "$stage/changelog.yaml" <<YAML
- semver: "$version-1"
  date: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  packager: "$GIN_DEB_MAINTAINER"
  deb:
    urgency: medium
    distributions: [unstable]
  changes:
    - note: "Build of $(git rev-parse --short HEAD 2>/dev/null || echo unknown); see the repository history."
YAML

mkdir -p dist
rm -f dist/gin-agent_*.deb dist/gin-master_*.deb dist/gin-tools_*.deb
for pkg in gin-agent gin-master gin-tools; do
  "${NFPM[@]}" package --packager deb --config "deploy/deb/$pkg.yaml" --target dist/ >/dev/null
done
ls dist/*.deb
