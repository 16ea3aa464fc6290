#!/usr/bin/env bash
# slurm-harness.sh - a throw-away Slurm cluster on this machine, for GIN's e2e tests.
#
# One private munged, one slurmctld and N slurmd (slurmd -N nK), all started
# by hand (no systemd), every file under one directory. Debian 12's
# slurm-wlm 22.05 + munge 0.5; needs root (slurmd runs jobs as any user).
#
#   bash scripts/slurm-harness.sh up      # start, wait until every node is idle
#   export SLURM_CONF=$GIN_SLURM_DIR/etc/slurm.conf
#   srun -N2 hostname
#   bash scripts/slurm-harness.sh down    # cancel jobs, stop what 'up' started, delete the dir
#   bash scripts/slurm-harness.sh install # apt-get install the Debian packages
#   bash scripts/slurm-harness.sh check   # exit 0 when the packages are installed, else say which
#
# The e2e tests drive it through e2e/slurmharness_test.go (startSlurm).
#
# Knobs (environment):
#   GIN_SLURM_DIR        everything lives here; 'down' deletes it       [required]
#   GIN_SLURM_NODES      node count, named n1..nN, one slurmd each        [1]
#   GIN_SLURM_CPUS       CPUs declared per node (may exceed the real)     [8]
#   GIN_SLURM_GPUS       gres/gpu per node (symlinks to /dev/null); 0=none [0]
#   GIN_SLURM_CTLD_PORT  slurmctld port                                   [a free one]
#   GIN_SLURM_NODE_PORT  first slurmd port (nodes use PORT..PORT+N-1)     [free ones]
#   GIN_SLURM_TOPOLOGY   a topology.conf to load (TopologyPlugin=topology/tree) [none]
#   GIN_SLURM_INSTALL    1 = 'up' apt-get installs missing packages       [0]
#   GIN_SLURM_CONF_EXTRA lines appended to slurm.conf (Prolog=..., PrologFlags=...) [none]
#
# Ports: unless given, 'up' picks ports that nothing listens on (read from
# /proc/net/tcp{,6}); the caller that already holds free ports passes them.
# 'down' stops only what 'up' started: the pids in $GIN_SLURM_DIR/run and
# the processes that carry this cluster's marker in their environment
# (slurmstepd's, which outlive a killed slurmd).
set -euo pipefail

PKGS=(slurmctld slurmd slurm-client munge)
CMDS=(slurmctld slurmd srun sinfo scontrol scancel squeue munged mungekey munge unmunge)

log() { printf '[slurm-harness %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "$*"; exit 1; }

missing_cmds() {
  local c out=()
  for c in "${CMDS[@]}"; do command -v "$c" >/dev/null || out+=("$c"); done
  echo "${out[*]}"
}

cmd_check() {
  local m; m=$(missing_cmds)
  if [ -n "$m" ]; then
    echo "slurm harness: missing $m; install with: apt-get install ${PKGS[*]} (or bash scripts/slurm-harness.sh install)" >&2
    exit 1
  fi
}

cmd_install() {
  [ -z "$(missing_cmds)" ] && return 0
  [ "$(id -u)" = 0 ] || die "install needs root: apt-get install ${PKGS[*]}"
  log "apt-get install ${PKGS[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The packages' maintainer scripts would start the system's munged and
  # slurm daemons; a policy-rc.d that says no keeps them from it.
  local rcd=
  [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; rcd=1; }
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
  [ -z "$rcd" ] || rm -f /usr/sbin/policy-rc.d
  log "installed $(slurmctld -V)"
}

DIR=${GIN_SLURM_DIR:-}
[ "${1:-}" = check ] || [ "${1:-}" = install ] || [ -n "$DIR" ] || die "GIN_SLURM_DIR is required"
case "$DIR" in ''|/tmp/?*|/var/tmp/?*|/run/?*) ;; *) die "GIN_SLURM_DIR=$DIR: refusing (it gets rm -rf'd; use /tmp/...)" ;; esac
DIR=${DIR%/}
NODES=${GIN_SLURM_NODES:-1}
CPUS=${GIN_SLURM_CPUS:-8}
GPUS=${GIN_SLURM_GPUS:-0}
MARK="GIN_SLURM_HARNESS=$DIR"
export SLURM_CONF=$DIR/etc/slurm.conf
for v in NODES CPUS GPUS; do
  case "${!v}" in ''|*[!0-9]*) die "GIN_SLURM_$v=${!v}: not a number" ;; esac
done
[ "$NODES" -ge 1 ] && [ "$NODES" -le 64 ] || die "GIN_SLURM_NODES=$NODES: want 1..64"
[ "$GPUS" -le 64 ] || die "GIN_SLURM_GPUS=$GPUS: want 0..64"

# alive: the pid exists and is not a zombie (PID 1 may reap late).
alive() { [ -n "${1:-}" ] && [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# stop_pid PID WHAT: SIGTERM, wait up to 15 s, then SIGKILL.
stop_pid() {
  local p=$1 what=$2 i
  alive "$p" || return 0
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 150); do alive "$p" || return 0; sleep 0.1; done
  log "pid $p ($what) ignored SIGTERM; SIGKILL"
  kill -KILL "$p" 2>/dev/null || true
  for i in $(seq 50); do alive "$p" || return 0; sleep 0.1; done
}

stop_pidfile() {
  local f=$1
  [ -s "$f" ] || { rm -f "$f"; return 0; }
  stop_pid "$(cat "$f")" "$f"
  rm -f "$f"
}

# listening: the ports (decimal) something listens on, from /proc/net/tcp{,6}.
listening() {
  local _ addr st f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    while read -r _ addr _ st _; do
      [ "$st" = 0A ] && echo $((16#${addr##*:}))
    done <"$f"
  done
}

# free_base N: a port P with P..P+N-1 all free (random in 20000..31999: below
# the kernel's ephemeral range, 32768.., so no test's outgoing or :0 socket can
# take it between the pick and slurmctld's bind).
free_base() {
  local n=$1 try base p busy used
  used=" $(listening | tr '\n' ' ') ${TAKEN:-} "
  for try in $(seq 200); do
    base=$((20000 + RANDOM % (12000 - n)))
    busy=0
    for p in $(seq "$base" $((base + n - 1))); do
      case "$used" in *" $p "*) busy=1; break ;; esac
    done
    [ "$busy" = 0 ] && { echo "$base"; return 0; }
  done
  die "no $n free consecutive ports"
}

write_conf() {
  mkdir -p "$DIR"/{etc,state,spool,log,run,dev,munge}
  local host nodeline gresline="" topo=""
  host=$(hostname -s)   # slurmctld insists that SlurmctldHost is `hostname -s`
  # Several slurmd's on one host: the same NodeHostname/NodeAddr, a port each.
  if [ "$NODES" -eq 1 ]; then
    nodeline="NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$NODE_PORT"
  else
    nodeline="NodeName=n[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$NODE_PORT-$((NODE_PORT + NODES - 1))]"
  fi
  nodeline+=" CPUs=$CPUS RealMemory=1000 State=UNKNOWN"
  if [ "$GPUS" -gt 0 ]; then
    nodeline+=" Gres=gpu:$GPUS"
    gresline="GresTypes=gpu"
    # gres/gpu wants a character device per GPU: a symlink to /dev/null
    # passes (stat follows it) and its trailing digit becomes the index in
    # CUDA_VISIBLE_DEVICES. No mknod needed.
    local i
    for i in $(seq 0 $((GPUS - 1))); do ln -sfn /dev/null "$DIR/dev/nvidia$i"; done
    printf 'AutoDetect=off\nName=gpu File=%s/dev/nvidia[0-%d]\n' "$DIR" $((GPUS - 1)) >"$DIR/etc/gres.conf"
  fi
  if [ -n "${GIN_SLURM_TOPOLOGY:-}" ]; then
    cp "$GIN_SLURM_TOPOLOGY" "$DIR/etc/topology.conf"
    topo="TopologyPlugin=topology/tree"
  fi
  # slurmd loads a cgroup plugin even with proctrack/linuxproc + task/none;
  # without systemd, cgroup/v2 falls back to a manual hierarchy.
  printf 'CgroupPlugin=autodetect\nIgnoreSystemdOnFailure=yes\n' >"$DIR/etc/cgroup.conf"
  cat >"$SLURM_CONF" <<EOF
ClusterName=gin
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$NODE_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
$gresline
$topo
$nodeline
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  if [ -n "${GIN_SLURM_CONF_EXTRA:-}" ]; then printf '%s\n' "$GIN_SLURM_CONF_EXTRA" >>"$SLURM_CONF"; fi
}

start_munge() {
  # A private munged: its own key, socket, pid and log under $DIR. The
  # socket's directory must be world-executable, the key 0600.
  chmod 0755 "$DIR" "$DIR/munge"
  mungekey -c -b 1024 -k "$DIR/munge/munge.key"
  chmod 0600 "$DIR/munge/munge.key"
  env "$MARK" munged --socket="$DIR/munge/munge.sock" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  munge -S "$DIR/munge/munge.sock" -n | unmunge -S "$DIR/munge/munge.sock" >/dev/null
}

wait_idle() {
  local i n=0
  for i in $(seq 600); do # 60 s
    # A slurmctld that died (a port taken, a bad config) never makes the
    # nodes idle: say so now instead of waiting on sinfo's time-outs.
    if [ -s "$DIR/run/slurmctld.pid" ] && ! alive "$(cat "$DIR/run/slurmctld.pid")"; then
      log "slurmctld exited:"; tail -n 20 "$DIR"/log/slurmctld.log >&2 || true; return 1
    fi
    n=$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2=="idle"' | sort -u | wc -l) || n=0
    [ "$n" -ge "$NODES" ] && return 0
    sleep 0.1
  done
  log "nodes not idle after 60 s:"
  sinfo -N -l >&2 || true
  tail -n 20 "$DIR"/log/*.log >&2 || true
  return 1
}

cmd_up() {
  if [ -s "$DIR/run/slurmctld.pid" ] && alive "$(cat "$DIR/run/slurmctld.pid")"; then
    die "already running in $DIR"
  fi
  [ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users)"
  if [ -n "$(missing_cmds)" ]; then
    [ "${GIN_SLURM_INSTALL:-0}" = 1 ] || { cmd_check; }
    cmd_install
  fi
  local t0=$SECONDS
  CTLD_PORT=${GIN_SLURM_CTLD_PORT:-$(free_base 1)}
  TAKEN=$CTLD_PORT
  NODE_PORT=${GIN_SLURM_NODE_PORT:-$(free_base "$NODES")}
  if [ "$CTLD_PORT" -ge "$NODE_PORT" ] && [ "$CTLD_PORT" -lt $((NODE_PORT + NODES)) ]; then
    die "slurmctld port $CTLD_PORT is inside the slurmd ports $NODE_PORT..$((NODE_PORT + NODES - 1))"
  fi
  rm -rf "$DIR"
  mkdir -p "$DIR"
  write_conf
  start_munge
  # Every daemon carries the marker, so 'down' finds their children too.
  env "$MARK" slurmctld # daemonizes; pid in $DIR/run/slurmctld.pid
  local i
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$DIR/spool/n$i"
    env "$MARK" slurmd -N "n$i"
  done
  wait_idle
  log "up: $NODES node(s) idle in $((SECONDS - t0)) s; slurmctld :$CTLD_PORT, slurmd :$NODE_PORT..; export SLURM_CONF=$SLURM_CONF"
}

# marked: the pids (not ours) whose environment carries this cluster's marker.
marked() {
  local f p
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = $$ ] && continue
    grep -qzxF "$MARK" "$f" 2>/dev/null && echo "$p"
  done
  return 0
}

cmd_down() {
  [ -d "$DIR" ] || return 0
  local f p i
  # Jobs first, while slurmctld still answers; bounded.
  if [ -s "$DIR/run/slurmctld.pid" ] && alive "$(cat "$DIR/run/slurmctld.pid")"; then
    timeout 10 squeue -h -o %i 2>/dev/null | xargs -r timeout 10 scancel >/dev/null 2>&1 || true
    for i in $(seq 50); do
      [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for f in "$DIR"/run/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
  stop_pidfile "$DIR/run/slurmctld.pid"
  stop_pidfile "$DIR/run/munged.pid"
  for p in $(marked); do stop_pid "$p" "left over: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"; done
  rm -rf "$DIR"
  log "down: $DIR"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
check) cmd_check ;;
install) cmd_install ;;
*) echo "usage: $0 up|down|check|install (GIN_SLURM_DIR=/tmp/... required for up and down)" >&2; exit 2 ;;
esac
