#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/gin-epilog.sh): expires the
# job's plan on the masters (idempotent: every node of the job may call it).
# The node's agent drops its copy when the plan's own expiry passes. Never
# fails the job.
set -u
GINCTL=${GINCTL:-/usr/local/bin/ginctl}
[ -r /etc/default/gin-slurm ] && . /etc/default/gin-slurm
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
"$GINCTL" --timeout 10s plan delete --job "$SLURM_JOB_ID" >/dev/null 2>&1 || true
exit 0
