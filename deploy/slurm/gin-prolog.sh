#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/gin-prolog.sh): has this
# node's gin-agent fetch and hold the job's GIN plan before any task starts
# (`gin-agent plan`; the agent asks the masters once, which pin the plan on
# the first request and return the same bytes to every node). The ranks then
# read it from the agent's socket with no network, masters up or down.
#
# The rule that keeps every rank of a job on one decision: the plan is pinned
# and held by every node's agent before tasks start. With GIN_PROLOG_STRICT=1
# a node that cannot get it fails the prolog (Slurm then drains the node and
# requeues the job) instead of letting the job start with some nodes
# planned and others not. The default (0) only logs it.
#
# First, the health gate (docs/HEALTH.md): `ginctl gate` asks the masters for
# this node's verdict. GIN_HEALTH_GATE=strict drains a failing node with
# GIN's reason (sinfo -R shows "GIN: nvlink-down GPU3/nvlink7") and fails
# the prolog, so Slurm requeues the job onto other nodes; advisory (the
# default) logs the failure; off skips it. GIN_HEALTH_AUTO_RESUME=1 resumes a
# node GIN drained once it passes; otherwise an operator resumes it. Strict
# means strict: no verdict (no master answers, or GIN knows no node of this
# name) fails the prolog too, without draining the node (not its fault).
#
# The gate's ginctl, against masters serving mutual TLS, uses GIN_TLS_CA,
# GIN_TLS_CERT, GIN_TLS_KEY from /etc/default/gin-slurm, else (as the epilog)
# /etc/gin/ca.pem, /etc/gin/scheduler.pem and /etc/gin/scheduler-key.pem
# when the certificate is there, else plaintext.
set -u
GIN_AGENT=${GIN_AGENT:-/usr/local/bin/gin-agent}
GINCTL=${GINCTL:-/usr/local/bin/ginctl}
set -a   # GIN_MASTER_HOST and GIN_TLS_* reach ginctl
GIN_SLURM_DEFAULTS=${GIN_SLURM_DEFAULTS:-/etc/default/gin-slurm}
[ -r "$GIN_SLURM_DEFAULTS" ] && . "$GIN_SLURM_DEFAULTS"   # GIN_PROLOG_STRICT, GIN_PLAN_SOCKET, GIN_INSPECTOR_DIR, GIN_HEALTH_GATE
if [ -z "${GIN_TLS_CERT:-}" ] && [ -r /etc/gin/scheduler.pem ]; then
  GIN_TLS_CA=${GIN_TLS_CA:-/etc/gin/ca.pem} GIN_TLS_CERT=/etc/gin/scheduler.pem GIN_TLS_KEY=${GIN_TLS_KEY:-/etc/gin/scheduler-key.pem}
fi
set +a
SOCK=${GIN_PLAN_SOCKET:-/run/gin/agent.sock}
STRICT=${GIN_PROLOG_STRICT:-0}
GATE=${GIN_HEALTH_GATE:-advisory}
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
if [ "$GATE" != off ] && [ -n "${SLURMD_NODENAME:-}" ] && [ -x "$GINCTL" ]; then
  gate=(--timeout 5s gate --node "$SLURMD_NODENAME" --mode "$GATE")
  [ "${GIN_HEALTH_AUTO_RESUME:-0}" = 1 ] && gate+=(--auto-resume)
  if ! err=$("$GINCTL" "${gate[@]}" 2>&1); then
    logger -t gin-prolog "job $SLURM_JOB_ID: ${err##*$'\n'}" 2>/dev/null || true
    echo "gin-prolog: job $SLURM_JOB_ID: $err" >&2
    [ "$GATE" = strict ] && exit 1
  elif [ -n "$err" ]; then
    logger -t gin-prolog "job $SLURM_JOB_ID: ${err##*$'\n'}" 2>/dev/null || true
    echo "gin-prolog: job $SLURM_JOB_ID: $err" >&2
  fi
fi
[ -n "${SLURM_JOB_NODELIST:-}" ] || exit 0
args=(plan --job "$SLURM_JOB_ID" --nodes "$SLURM_JOB_NODELIST" --plan-socket "$SOCK" --timeout 15s)
# GPUs per node the job got (SLURM_JOB_GPUS lists their indices); none: all.
gpn=${SLURM_GPUS_ON_NODE:-}
if [ -z "$gpn" ] && [ -n "${SLURM_JOB_GPUS:-}" ]; then
  gpn=$(awk -F, '{print NF}' <<<"$SLURM_JOB_GPUS")
fi
case "$gpn" in ''|*[!0-9]*) ;; *) args+=(--gpus-per-node "$gpn") ;; esac
# NCCL Inspector dumps (GIN_INSPECTOR_DIR set): a per-job directory the
# job's user may write and nobody else may read, which gin-task-prolog.sh
# points NCCL_INSPECTOR_DUMP_DIR at and gin-epilog.sh imports. On a
# directory all the job's nodes share, the epilog of the job's first node
# imports every rank's dump.
if [ -n "${GIN_INSPECTOR_DIR:-}" ]; then
  idir="$GIN_INSPECTOR_DIR/$SLURM_JOB_ID"
  if mkdir -p "$idir" 2>/dev/null && chmod 0700 "$idir" && { [ -z "${SLURM_JOB_UID:-}" ] || chown "$SLURM_JOB_UID" "$idir" 2>/dev/null || [ "$(id -u)" != 0 ]; }; then
    :
  else
    logger -t gin-prolog "job $SLURM_JOB_ID: cannot prepare $idir for NCCL Inspector dumps" 2>/dev/null || true
    echo "gin-prolog: job $SLURM_JOB_ID: cannot prepare $idir for NCCL Inspector dumps" >&2
  fi
fi
if ! err=$("$GIN_AGENT" "${args[@]}" 2>&1 >/dev/null); then
  logger -t gin-prolog "job $SLURM_JOB_ID: plan not held by the node's agent: ${err##*$'\n'}" 2>/dev/null || true
  echo "gin-prolog: job $SLURM_JOB_ID: plan not held by the node's agent: $err" >&2
  [ "$STRICT" = 1 ] && exit 1
fi
exit 0
