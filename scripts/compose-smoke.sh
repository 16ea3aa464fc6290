#!/usr/bin/env bash
# End-to-end check of the Docker deployment (deploy/compose): builds the two
# images (scripts/docker-build.sh) and checks them:
#   0. the static image (gin:dev): its three binaries statically linked; the
#      GPU agent image (gin-agent-gpu:dev): gin-agent dynamically linked
#      against glibc only (ldd in the image, file), not root, its version the
#      label's, `--once -o json --source sim:dgx-h100` an 8-GPU inventory and
#      `--source auto` (no NVIDIA driver in the container) failing with the
#      "no NVIDIA driver (libnvidia-ml.so.1 not found)" message, not a loader
#      or missing-symbol error, while the static agent says it has no NVML;
# then starts 3 masters and 4 simulated agents under a unique compose project (with
# mutual TLS: the certs service makes the CA and certificates at up), and
# checks with ginctl (as admin) inside the network:
#   1. 3 voters, exactly one leader, every master agrees on it, every member's
#      client address registered and its Raft address = its container's IP;
#   2. node01..node04 up (a consistent read through the leader) and the 4
#      agents' sessions held by the masters (their gin_master_connected_agents
#      add up to 4, read inside each master's network namespace at 127.0.0.1:5002/metrics);
#   3. `docker kill` of the leader: a new leader among the other two, the
#      nodes still there and up, the agents reconnected to the live masters;
#   4. the killed master started again: 3 members agreeing again, nodes up;
#   5. TLS is on: the certs service exited 0, every master says it serves
#      mTLS, ginctl without a certificate is refused, an agent's certificate
#      may not remove a master; a second `up` keeps the CA and every
#      certificate (the certs service says "kept", ca.pem is unchanged).
# Always tears the project down (containers, network, volumes), and prints
# `docker-compose logs` when a check fails. Exit status 0 only if all passed.
#
# Usage: scripts/compose-smoke.sh        (make docker-test)
# Env:   GIN_IMAGE (default gin:dev), GIN_AGENT_GPU_IMAGE (default
#        gin-agent-gpu:dev), GIN_SMOKE_SKIP_BUILD=1 (use the images as they are),
#        GIN_SMOKE_TIMEOUT (seconds per wait, default 120), GIN_SMOKE_PROJECT,
#        GIN_SMOKE_LOGS=1 (print the logs also when every check passed).
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s)
log() { printf '[smoke %4ss] %s\n' "$(($(date +%s) - t0))" "$*"; }
die() { log "FAIL: $*"; exit 1; }

export GIN_IMAGE=${GIN_IMAGE:-gin:dev}
export GIN_AGENT_GPU_IMAGE=${GIN_AGENT_GPU_IMAGE:-gin-agent-gpu:dev}
timeout_s=${GIN_SMOKE_TIMEOUT:-120}
poll_s=1
file=deploy/compose/docker-compose.yml
masters=(m1 m2 m3)
agents=(node01 node02 node03 node04)
# Unique per run, so parallel runs on one engine do not share anything.
project=${GIN_SMOKE_PROJECT:-ginsmoke$(date +%s)$$$RANDOM}
project=$(printf '%s' "$project" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9_-')

# --- prerequisites (nothing installed by hand) --------------------------------
apt_install() {
  [ "$(id -u)" = 0 ] || die "$1 is missing (install it, or run as root to apt-get it)"
  command -v apt-get >/dev/null || die "$1 is missing and there is no apt-get"
  log "installing $1 with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable"
command -v docker-compose >/dev/null || apt_install docker-compose
command -v python3 >/dev/null || apt_install python3
command -v git >/dev/null || apt_install git
command -v file >/dev/null || apt_install file
log "$(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose /'), engine $(docker version -f '{{.Server.Version}}'), project $project"

compose() { docker-compose --ansi never -p "$project" -f "$file" "$@"; }

work=$(mktemp -d)
cleanup() {
  local rc=$? left
  trap - EXIT INT TERM
  set +e
  if [ "$rc" != 0 ] || [ "${GIN_SMOKE_LOGS:-0}" = 1 ]; then
    [ "$rc" != 0 ] && log "failed or interrupted (exit $rc); state and logs follow"
    compose ps
    compose logs --no-color --timestamps --tail=200
  fi
  log "tearing down $project (containers, network, volumes)"
  compose down -v --remove-orphans -t 5 >/dev/null 2>&1
  left=$({
    docker ps -aq --filter "label=com.docker.compose.project=$project"
    docker network ls -q --filter "label=com.docker.compose.project=$project"
    docker volume ls -q --filter "label=com.docker.compose.project=$project"
  })
  if [ -n "$left" ]; then
    log "FAIL: left behind after down -v: ${left//$'\n'/ }"
    [ "$rc" = 0 ] && rc=1
  fi
  rm -rf "$work"
  log "$([ "$rc" = 0 ] && echo PASS || echo FAIL) after $(($(date +%s) - t0))s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- images -------------------------------------------------------------------
if [ "${GIN_SMOKE_SKIP_BUILD:-0}" = 1 ]; then
  for i in "$GIN_IMAGE" "$GIN_AGENT_GPU_IMAGE"; do
    docker image inspect "$i" >/dev/null 2>&1 || die "GIN_SMOKE_SKIP_BUILD=1 but there is no image $i"
  done
  log "using the existing images $GIN_IMAGE and $GIN_AGENT_GPU_IMAGE"
else
  b=$(date +%s)
  log "building $GIN_IMAGE and $GIN_AGENT_GPU_IMAGE (scripts/docker-build.sh)"
  GIN_DOCKER_TARGETS="gin agent-gpu" scripts/docker-build.sh
  log "images built in $(($(date +%s) - b))s"
fi
want_version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$GIN_IMAGE")
for i in "$GIN_IMAGE" "$GIN_AGENT_GPU_IMAGE"; do
  log "image $i: $(docker image inspect -f '{{.Size}}' "$i" | awk '{printf "%.1f MB", $1/1e6}'), user $(docker image inspect -f '{{.Config.User}}' "$i"), version $(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$i")"
  case "$(docker image inspect -f '{{.Config.User}}' "$i")" in
    "" | 0 | 0:* | root | root:*) die "the image $i runs as root" ;;
  esac
done
gpu_version=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$GIN_AGENT_GPU_IMAGE")
[ "$gpu_version" = "$want_version" ] || die "$GIN_AGENT_GPU_IMAGE is version $gpu_version, $GIN_IMAGE $want_version (built apart?)"

# copy_out IMAGE PATH DEST: a file of an image, without running it.
copy_out() {
  local c
  c=$(docker create "$1") || return 1
  docker cp "$c:$2" "$3" >/dev/null || { docker rm "$c" >/dev/null; return 1; }
  docker rm "$c" >/dev/null
}
for b in gin-master gin-agent ginctl; do
  copy_out "$GIN_IMAGE" "/usr/local/bin/$b" "$work/static-$b" || die "$GIN_IMAGE has no /usr/local/bin/$b"
  case "$(file -b "$work/static-$b")" in
    *"statically linked"*) ;;
    *) die "$GIN_IMAGE: $b is not static: $(file -b "$work/static-$b")" ;;
  esac
done
log "checked: $GIN_IMAGE's gin-master, gin-agent and ginctl are statically linked"

gpu() { docker run --rm --network none "$GIN_AGENT_GPU_IMAGE" "$@"; }
copy_out "$GIN_AGENT_GPU_IMAGE" /usr/local/bin/gin-agent "$work/gpu-agent" || die "$GIN_AGENT_GPU_IMAGE has no /usr/local/bin/gin-agent"
f=$(file -b "$work/gpu-agent")
case "$f" in *"dynamically linked"*) ;; *) die "$GIN_AGENT_GPU_IMAGE: gin-agent is not dynamically linked (no cgo?): $f" ;; esac
# ldd in the image (its own glibc): the vDSO, libc and the loader, nothing else.
libs=$(docker run --rm --network none --entrypoint ldd "$GIN_AGENT_GPU_IMAGE" /usr/local/bin/gin-agent 2>&1) || die "ldd gin-agent in $GIN_AGENT_GPU_IMAGE: $libs"
extra_libs=$(printf '%s\n' "$libs" | grep -v -E '^[[:space:]]*(linux-vdso\.so\.1|libc\.so\.6 => /[^ ]+|/lib(64)?/ld-linux[^ ]*\.so\.[0-9]+) \(0x[0-9a-f]+\)$' || true)
[ -z "$extra_libs" ] || die "$GIN_AGENT_GPU_IMAGE: gin-agent needs more than glibc: $extra_libs"
printf '%s\n' "$libs" | grep -q 'libc\.so\.6 => /' || die "$GIN_AGENT_GPU_IMAGE: gin-agent is not linked against glibc: $libs"
log "checked: $GIN_AGENT_GPU_IMAGE's gin-agent is dynamically linked against glibc only ($(printf '%s' "$libs" | awk '{print $1}' | tr '\n' ' '))"
v=$(gpu --version 2>&1) || die "$GIN_AGENT_GPU_IMAGE gin-agent --version: $v"
case "$v" in "gin-agent $want_version ("*) ;; *) die "$GIN_AGENT_GPU_IMAGE's gin-agent says '$v', want $want_version" ;; esac
gpu --once -o json --source sim:dgx-h100 --node-name gpu-check >"$work/gpu-sim.json" 2>"$work/gpu-sim.err" ||
  die "$GIN_AGENT_GPU_IMAGE gin-agent --once --source sim:dgx-h100: $(cat "$work/gpu-sim.err")"
python3 - "$work/gpu-sim.json" <<'PY' || die "$GIN_AGENT_GPU_IMAGE: the simulated inventory is wrong"
import json, sys
inv = json.load(open(sys.argv[1]))
gpus = inv.get("gpus", [])
if inv.get("node_name") != "gpu-check" or len(gpus) != 8:
    sys.exit(f"node {inv.get('node_name')!r} with {len(gpus)} GPUs, want gpu-check with 8")
PY
log "checked: $GIN_AGENT_GPU_IMAGE's gin-agent --once -o json --source sim:dgx-h100 reports 8 GPUs"
# --source auto in a container without the NVIDIA runtime: go-nvml finds no
# libnvidia-ml.so.1 and says so. On a host with RDMA devices the agent goes
# on with them (and warns); elsewhere it fails with the discovery error.
set +e
gpu --once -o json --source auto >"$work/gpu-auto.json" 2>"$work/gpu-auto.err"
rc=$?
docker run --rm --network none --entrypoint /usr/local/bin/gin-agent "$GIN_IMAGE" --once --source auto >/dev/null 2>"$work/static-auto.err"
static_rc=$?
set -e
err=$(cat "$work/gpu-auto.err")
case "$err" in *"symbol"* | *"error while loading shared libraries"* | *"panic:"* | *"SIGSEGV"*) die "--source auto in $GIN_AGENT_GPU_IMAGE crashed (exit $rc): $err" ;; esac
case "$err" in *"built without cgo"*) die "$GIN_AGENT_GPU_IMAGE's gin-agent says it has no NVML: $err" ;; esac
if [ -d /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
  [ "$rc" = 0 ] || die "--source auto in $GIN_AGENT_GPU_IMAGE on a host with RDMA devices: exit $rc: $err"
  case "$err" in *"libnvidia-ml.so.1 not found"*) ;; *) die "--source auto in $GIN_AGENT_GPU_IMAGE: no word of the missing NVIDIA driver: $err" ;; esac
else
  [ "$rc" = 1 ] || die "--source auto in $GIN_AGENT_GPU_IMAGE without a driver: exit $rc, want 1: $err"
  case "$err" in *"no NVIDIA driver (libnvidia-ml.so.1 not found)"*) ;; *) die "--source auto in $GIN_AGENT_GPU_IMAGE: want the no-driver message, got: $err" ;; esac
  [ "$static_rc" = 1 ] && grep -q 'built without cgo' "$work/static-auto.err" ||
    die "--source auto in $GIN_IMAGE: want exit 1 and 'built without cgo', got exit $static_rc: $(cat "$work/static-auto.err")"
fi
log "checked: --source auto without a driver: $GIN_AGENT_GPU_IMAGE exits $rc ($(printf '%s' "$err" | tail -1 | cut -c1-120)...), the static agent says it was built without cgo"

# --- up -----------------------------------------------------------------------
b=$(date +%s)
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log"; die "compose up -d failed"; }
tr -d '\r' <"$work/up.log" | grep -v -E ' \.\.\. *$' || true
log "compose up -d: $(($(date +%s) - b))s"
ctl_cid=$(compose ps -q node01)
[ -n "$ctl_cid" ] || die "no node01 container"
cid() { compose ps -q "$1"; }
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }
# ginctl inside the network (the agent container node01 is never killed), as
# admin (node01's own GIN_TLS_* name its agent certificate).
ctl() { docker exec "$ctl_cid" /usr/local/bin/ginctl --tls-ca /etc/gin/ca.pem --tls-cert /etc/gin/admin.pem --tls-key /etc/gin/admin-key.pem --timeout 3s "$@"; }

v=$(ctl --version 2>&1) || die "ginctl --version: $v"
# buildinfo.Line: "ginctl VERSION (goX linux/ARCH)", the same in all three binaries.
case "$v" in "ginctl $want_version ("*) ;; *) die "ginctl says '$v', the image label says $want_version" ;; esac
log "checked: ginctl in the image reports $want_version"

# wait_until DESC CMD...: polls CMD every $poll_s until it succeeds, at most
# $timeout_s; CMD prints the reason when it fails, the summary when it passes.
wait_until() {
  local desc=$1 start out
  shift
  start=$(date +%s)
  log "waiting (at most ${timeout_s}s) for: $desc"
  while :; do
    if out=$("$@" 2>&1); then
      log "ok after $(($(date +%s) - start))s: $out"
      return 0
    fi
    if [ $(($(date +%s) - start)) -ge "$timeout_s" ]; then
      log "timed out after ${timeout_s}s waiting for: $desc"
      log "last answer: $out"
      return 1
    fi
    sleep "$poll_s"
  done
}

# members_ok EXCLUDED LIVE...: every live master answers `members -o json`;
# the views agree: 3 voters m1..m3, exactly one leader, the same one, live and
# not EXCLUDED ("-" for none); client addresses registered; each live
# member's Raft address is its container's current IP:5001.
members_ok() {
  local excluded=$1 m c ips=""
  shift
  rm -f "$work"/members.*
  for m in "$@"; do
    ctl --master "$m:5000" members -o json >"$work/members.$m" 2>&1 || { echo "$m: $(tail -1 "$work/members.$m")"; return 1; }
    c=$(cid "$m")
    ips="$ips $m=$(ip_of "$c")"
  done
  python3 - "$work" "$excluded" "${masters[*]}" "$ips" "$@" <<'PY'
import json, os, sys
work, excluded, want, ips, live = sys.argv[1], sys.argv[2], sorted(sys.argv[3].split()), dict(kv.split("=", 1) for kv in sys.argv[4].split()), sys.argv[5:]
leaders = set()
for m in live:
    try:
        members = json.load(open(os.path.join(work, "members." + m)))
    except ValueError as e:
        sys.exit(f"{m}: not JSON: {e}")
    ids = sorted(x["id"] for x in members)
    if ids != want:
        sys.exit(f"{m} sees members {ids}, want {want}")
    if not all(x["voter"] for x in members):
        sys.exit(f"{m} sees non-voters: {[x['id'] for x in members if not x['voter']]}")
    ls = [x["id"] for x in members if x["leader"]]
    if len(ls) != 1:
        sys.exit(f"{m} sees {len(ls)} leaders {ls}")
    leaders.add(ls[0])
    for x in members:
        if x.get("client_address") != x["id"] + ":5000":
            sys.exit(f"{m} sees {x['id']} with client address {x.get('client_address')!r}, want {x['id']}:5000")
        if x["id"] in ips and x["address"] != ips[x["id"]] + ":5001":
            sys.exit(f"{m} sees {x['id']} at Raft address {x['address']}, its container is at {ips[x['id']]}")
if len(leaders) != 1:
    sys.exit(f"the masters disagree on the leader: {sorted(leaders)}")
leader = leaders.pop()
if leader not in live:
    sys.exit(f"leader {leader} is not one of the live masters {live}")
if leader == excluded:
    sys.exit(f"{excluded} (killed) is still the leader")
print(f"{len(want)} voters, {len(live)} live masters ({' '.join(live)}) agree: leader {leader}")
open(os.path.join(work, "leader"), "w").write(leader)
open(os.path.join(work, "live"), "w").write(" ".join(live))
PY
}

# nodes_ok: a consistent read (through the leader) lists node01..node04, all up.
nodes_ok() {
  ctl --consistent nodes -o json >"$work/nodes" 2>&1 || { tail -1 "$work/nodes"; return 1; }
  python3 - "$work/nodes" "${agents[*]}" <<'PY'
import json, sys
nodes, want = json.load(open(sys.argv[1])), sorted(sys.argv[2].split())
names = sorted(n["name"] for n in nodes)
if names != want:
    sys.exit(f"nodes {names}, want {want}")
bad = [f"{n['name']}={n['state']}" for n in nodes if n["state"] != "up" or n["gpu_count"] != 8]
if bad:
    sys.exit(f"not up with 8 GPUs: {bad}")
print(f"{len(nodes)} nodes up ({' '.join(names)}), 8 GPUs and {nodes[0]['nvlinks_up']}/{nodes[0]['nvlinks_total']} NVLinks each")
PY
}

# agents_ok: every agent holds a session with one of the live masters (from
# the last members_ok; agents spread over the masters, a follower relays to
# the leader): their gin_master_connected_agents add up to the agents.
# /metrics is read inside each master's own network namespace (nsenter into
# its container's, at 127.0.0.1:5002), not at the container's IP from the
# host: that works where the host cannot route to the compose network too
# (the scratch image has no HTTP client of its own).
agents_ok() {
  local m total=0 n per=""
  for m in $(cat "$work/live"); do
    n=$(metric_in "$m" gin_master_connected_agents) || { echo "$m: $n"; return 1; }
    per="$per $m $n"
    total=$((total + n))
  done
  [ "$total" -eq "${#agents[@]}" ] || { echo "agent sessions:$per; $total, want ${#agents[@]}"; return 1; }
  echo "$total agent sessions over the live masters:$per"
}

# metric_in MASTER NAME: the sum of NAME's samples on MASTER's /metrics,
# read from inside the master container's network namespace.
metric_in() {
  local pid
  pid=$(docker inspect -f '{{.State.Pid}}' "$(cid "$1")") || { echo "no container"; return 1; }
  [ -n "$pid" ] && [ "$pid" != 0 ] || { echo "not running"; return 1; }
  nsenter --net="/proc/$pid/ns/net" python3 - "$2" <<'PY'
import sys, urllib.request
url = "http://127.0.0.1:5002/metrics"
try:
    text = urllib.request.urlopen(url, timeout=3).read().decode()
except Exception as e:
    sys.exit(f"{url}: {e}")
vals = [float(l.rsplit(None, 1)[1]) for l in text.splitlines() if l.startswith(sys.argv[1])]
if not vals:
    sys.exit(f"{url}: no {sys.argv[1]}")
print(int(sum(vals)))
PY
}

# --- 1, 2: the cluster forms --------------------------------------------------
wait_until "3 masters, one leader they all agree on" members_ok - "${masters[@]}"
wait_until "the 4 agents' nodes up" nodes_ok
wait_until "every agent connected to a master" agents_ok
ctl members
ctl nodes
leader=$(cat "$work/leader")
others=()
for m in "${masters[@]}"; do [ "$m" = "$leader" ] || others+=("$m"); done

# --- 3: kill the leader -------------------------------------------------------
log "killing the leader $leader (docker kill: SIGKILL, no handover)"
docker kill "$(cid "$leader")" >/dev/null
[ "$(docker inspect -f '{{.State.Running}}' "$(cid "$leader")")" = false ] || die "$leader still runs after docker kill"
wait_until "a new leader among ${others[*]}" members_ok "$leader" "${others[@]}"
wait_until "the nodes still there and up (through the new leader)" nodes_ok
wait_until "every agent reconnected to a live master" agents_ok
ctl members

# --- 4: bring it back ---------------------------------------------------------
log "starting $leader again"
compose start "$leader" >"$work/start.log" 2>&1 || { cat "$work/start.log"; die "compose start $leader failed"; }
wait_until "3 live masters agreeing on one leader again" members_ok - "${masters[@]}"
wait_until "the nodes up" nodes_ok
wait_until "every agent connected to a master" agents_ok
ctl --master "$leader:5000" cluster

# --- 5: TLS is on, and a second up keeps the certificates ---------------------
certs_cid=$(cid certs)
[ -n "$certs_cid" ] || die "no certs container"
[ "$(docker inspect -f '{{.State.ExitCode}}' "$certs_cid")" = 0 ] || die "the certs service failed: $(docker logs "$certs_cid" 2>&1 | tail -3)"
for m in "${masters[@]}"; do
  # (into a file: grep -q would end the pipe early and pipefail fail it)
  docker logs "$(cid "$m")" >"$work/$m.log" 2>&1
  grep -q 'gRPC with mTLS' "$work/$m.log" || die "$m does not say it serves mTLS"
done
log "checked: the certs service made the certificates; every master serves mTLS"
if out=$(docker exec -e GIN_TLS_CA= -e GIN_TLS_CERT= -e GIN_TLS_KEY= "$ctl_cid" /usr/local/bin/ginctl --timeout 3s --master m1:5000 cluster 2>&1); then
  die "ginctl without a certificate was answered: $out"
fi
log "checked: ginctl without a certificate is refused ($(printf '%s' "$out" | tail -1))"
if out=$(docker exec "$ctl_cid" /usr/local/bin/ginctl --timeout 3s members remove m3 2>&1); then
  die "node01's agent certificate removed a master: $out"
fi
case "$out" in *PermissionDenied* | *"may not call"*) ;; *) die "members remove as agent: want a permission error, got: $out" ;; esac
log "checked: an agent certificate may not remove a master ($(printf '%s' "$out" | tail -1))"
docker cp "$ctl_cid:/etc/gin/ca.pem" "$work/ca-before.pem" || die "docker cp ca.pem"
# A restarted container keeps its earlier log lines: read only the new ones.
seen=$(docker logs "$certs_cid" 2>&1 | wc -l)
compose up -d >"$work/up2.log" 2>&1 || { cat "$work/up2.log"; die "the second compose up -d failed"; }
[ "$(cid certs)" = "$certs_cid" ] || { certs_cid=$(cid certs); seen=0; }
[ "$(docker inspect -f '{{.State.ExitCode}}' "$certs_cid")" = 0 ] || die "the certs service failed at the second up: $(docker logs "$certs_cid" 2>&1 | tail -3)"
docker logs "$certs_cid" 2>&1 | tail -n +"$((seen + 1))" >"$work/certs2.log"
grep -q '^kept' "$work/certs2.log" || die "the certs service did not run again at the second up: $(cat "$work/certs2.log")"
grep -q '^wrote' "$work/certs2.log" && die "the second up wrote certificates again: $(grep '^wrote' "$work/certs2.log")"
docker cp "$ctl_cid:/etc/gin/ca.pem" "$work/ca-after.pem" || die "docker cp ca.pem"
cmp -s "$work/ca-before.pem" "$work/ca-after.pem" || die "the second up replaced the CA"
log "checked: a second up keeps the CA and every certificate ($(grep -c '^kept' "$work/certs2.log") kept)"
wait_until "3 live masters agreeing on one leader after the second up" members_ok - "${masters[@]}"
log "all checks passed"
