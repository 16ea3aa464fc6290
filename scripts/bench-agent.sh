#!/usr/bin/env bash
# Measures a real gin-agent process (simulated DGX H100) against a dev master:
# its resident memory when idle and the CPU it spends per heartbeat.
# Usage: scripts/bench-agent.sh [seconds]   (needs ./bin from `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
hz=$(getconf CLK_TCK)
log=$(mktemp)
./bin/gin-master --dev --dev-agents 1 --bind 127.0.0.1:0 >"$log" 2>/dev/null &
mpid=$!
trap 'kill $mpid $apid 2>/dev/null; wait 2>/dev/null; rm -f "$log"' EXIT
apid=
for _ in $(seq 1 300); do grep -q "cluster is up" "$log" && break; sleep 0.1; done
addr=$(sed -n 's/.*master \([^,]*\),.*/\1/p' "$log" | head -1)
[ -n "$addr" ] || { echo "dev master did not start"; exit 1; }

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }

run() { # interval -> prints "rss_kb cpu_ticks heartbeats"
  ./bin/gin-agent --source sim:dgx-h100 --node-name bench01 --master "$addr" --metrics-bind 127.0.0.1:0 \
    --heartbeat-interval "$1" --log-level error &
  apid=$!
  sleep 3 # start-up and first inventory, not measured
  c0=$(cpu $apid)
  sleep "$secs"
  c1=$(cpu $apid)
  r=$(rss $apid)
  kill $apid; wait $apid 2>/dev/null || true
  apid=
  echo "$r $((c1 - c0))"
}

read -r rss_idle cpu_idle < <(run 5s)
read -r rss_busy cpu_busy < <(run 100ms)
beats=$(awk -v s="$secs" 'BEGIN{print s/0.1}')
echo "machine: $(nproc) cores, $(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo | sed 's/^ *//')"
echo "idle (5s heartbeats, ${secs}s): RSS ${rss_idle} kB, CPU $(awk -v t="$cpu_idle" -v hz="$hz" -v s="$secs" 'BEGIN{printf "%.3f%%", 100*t/hz/s}')"
echo "busy (100ms heartbeats and collections, ${secs}s, ~${beats} heartbeats): RSS ${rss_busy} kB, CPU per heartbeat $(awk -v t="$cpu_busy" -v hz="$hz" -v b="$beats" 'BEGIN{printf "%.3f ms", 1000*t/hz/b}')"
