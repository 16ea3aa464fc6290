#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/gin-epilog.sh): expires the
# job's plan on the masters (idempotent: every node of the job may call it).
# The node's agent drops its copy when the plan's own expiry passes. Never
# fails the job; a failure is logged (logger -t gin-epilog and stderr).
#
# Deleting a plan needs the scheduler role when the masters serve mutual TLS:
# GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY from /etc/default/gin-slurm, else
# /etc/gin/ca.pem, /etc/gin/scheduler.pem and /etc/gin/scheduler-key.pem when
# the certificate is there (ginctl tls cert create --role scheduler), else
# plaintext (masters started with --insecure).
set -u
GINCTL=${GINCTL:-/usr/local/bin/ginctl}
set -a   # GIN_MASTER_HOST and GIN_TLS_* reach ginctl
GIN_SLURM_DEFAULTS=${GIN_SLURM_DEFAULTS:-/etc/default/gin-slurm}
[ -r "$GIN_SLURM_DEFAULTS" ] && . "$GIN_SLURM_DEFAULTS"
if [ -z "${GIN_TLS_CERT:-}" ] && [ -r /etc/gin/scheduler.pem ]; then
  GIN_TLS_CA=${GIN_TLS_CA:-/etc/gin/ca.pem} GIN_TLS_CERT=/etc/gin/scheduler.pem GIN_TLS_KEY=${GIN_TLS_KEY:-/etc/gin/scheduler-key.pem}
fi
set +a
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
if ! err=$("$GINCTL" --timeout 10s plan delete --job "$SLURM_JOB_ID" 2>&1 >/dev/null); then
  logger -t gin-epilog "job $SLURM_JOB_ID: plan not expired: ${err##*$'\n'}" 2>/dev/null || true
  echo "gin-epilog: job $SLURM_JOB_ID: plan not expired: $err" >&2
fi
exit 0
