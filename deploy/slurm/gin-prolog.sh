#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/gin-prolog.sh): pins the job's
# GIN plan and stages it on this node before any task starts, so the NCCL
# tuner plugin reads it from /dev/shm at init with no network at all.
# Every node of the job runs it; the master pins the plan once and returns
# the same bytes to all of them. A failure never fails the job: the plugin
# then fetches the plan itself (or stands aside).
set -u
GINCTL=${GINCTL:-/usr/local/bin/ginctl}
STAGE=${NCCL_GIN_CACHE_DIR:-/dev/shm/gin-nccl}
[ -r /etc/default/gin-slurm ] && . /etc/default/gin-slurm   # GIN_MASTER_HOST, GIN_PLAN_TTL
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ] || exit 0
args=(--timeout 10s plan --job "$SLURM_JOB_ID" --nodes "$SLURM_JOB_NODELIST" --stage-dir "$STAGE")
[ -n "${GIN_PLAN_TTL:-}" ] && args+=(--ttl "$GIN_PLAN_TTL")
# GPUs per node the job got (SLURM_JOB_GPUS lists their indices); none: all.
gpn=${SLURM_GPUS_ON_NODE:-}
if [ -z "$gpn" ] && [ -n "${SLURM_JOB_GPUS:-}" ]; then
  gpn=$(awk -F, '{print NF}' <<<"$SLURM_JOB_GPUS")
fi
case "$gpn" in ''|*[!0-9]*) ;; *) args+=(--gpus-per-node "$gpn") ;; esac
if ! "$GINCTL" "${args[@]}" >/dev/null 2>/tmp/gin-prolog-"$SLURM_JOB_ID".err; then
  logger -t gin-prolog "job $SLURM_JOB_ID: plan not staged: $(tail -1 /tmp/gin-prolog-"$SLURM_JOB_ID".err)" 2>/dev/null || true
fi
rm -f /tmp/gin-prolog-"$SLURM_JOB_ID".err
exit 0
