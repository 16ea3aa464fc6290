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
