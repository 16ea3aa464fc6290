#!/usr/bin/env bash
# Fails, naming them, when Go files that are not generated (api/gen is made
# by `make generate`) are not as gofmt writes them. Run by `make vet`, and so
# by `make test`. The files are git's (tracked, and untracked ones it does
# not ignore), or every .go file outside a git checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gofmt >/dev/null || { echo "check-gofmt: gofmt not found (it comes with Go)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files -z --cached --others --exclude-standard -- '*.go'; }
else
  list() { find . -name '*.go' -not -path './.git/*' -printf '%P\0'; }
fi
files=()
while IFS= read -r -d '' f; do
  [[ $f == api/gen/* || ! -f $f ]] && continue
  files+=("$f")
done < <(list)
((${#files[@]})) || { echo "check-gofmt: no Go files found" >&2; exit 1; }
bad=$(gofmt -l "${files[@]}")
if [[ -n $bad ]]; then
  echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "gofmt: ${#files[@]} Go files formatted"
