#!/usr/bin/env bash
# Checks the systemd units with systemd-analyze verify, against the binaries
# in ./bin (the units' /usr/local/bin paths are rewritten to a temporary copy).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not found: install systemd to verify the units" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in deploy/systemd/*.service; do
  sed "s|/usr/local/bin/|$PWD/bin/|g" "$unit" > "$tmp/$(basename "$unit")"
done
out=$(systemd-analyze verify --man=no "$tmp"/*.service 2>&1) || { echo "$out"; exit 1; }
# verify exits 0 on some warnings; treat any line about our units as a failure.
if echo "$out" | grep -q "gin-"; then echo "$out"; exit 1; fi
echo "systemd units verified: $(ls deploy/systemd/*.service | xargs -n1 basename | tr '\n' ' ')"
# The exit statuses the units do not restart are the binaries' usage (64)
# and configuration (78) errors, never 2 (a Go panic) or 75 (a full data dir).
prevent() { sed -n 's/^RestartPreventExitStatus=//p' "deploy/systemd/$1.service"; }
[[ $(prevent gin-master) == "64 65 78" ]] || { echo "gin-master.service: RestartPreventExitStatus=$(prevent gin-master), want 64 65 78" >&2; exit 1; }
[[ $(prevent gin-agent) == "64 78" ]] || { echo "gin-agent.service: RestartPreventExitStatus=$(prevent gin-agent), want 64 78" >&2; exit 1; }
for bin in gin-master gin-agent; do
  rc=0; "bin/$bin" --no-such-flag >/dev/null 2>&1 || rc=$?
  [[ " $(prevent "$bin") " == *" $rc "* ]] || { echo "$bin exits $rc on a bad flag, which $bin.service restarts on (RestartPreventExitStatus=$(prevent "$bin"))" >&2; exit 1; }
done
echo "restart policy: bad flags exit 64 and are not restarted; a panic (2) and a full data dir (75) are"
