#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/gin-epilog.sh): removes the
# staged plan from this node and expires the job's plan on the masters
# (idempotent: every node of the job may call it). Never fails the job.
set -u
GINCTL=${GINCTL:-/usr/local/bin/ginctl}
STAGE=${NCCL_GIN_CACHE_DIR:-/dev/shm/gin-nccl}
[ -r /etc/default/gin-slurm ] && . /etc/default/gin-slurm
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
rm -f "$STAGE/plan-$SLURM_JOB_ID.pb" "$STAGE/plan-$SLURM_JOB_ID.lock"
"$GINCTL" --timeout 10s plan delete --job "$SLURM_JOB_ID" >/dev/null 2>&1 || true
exit 0
