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
# The job's NCCL Inspector dumps (gin-prolog.sh, GIN_INSPECTOR_DIR): the
# job's first node imports them as production measurements of the job
# (ginctl calibrate import --nccl-inspector DIR --job ID), before the plan
# that says what ran expires, then removes the directory. Other nodes only
# remove theirs when it is not shared (GIN_INSPECTOR_SHARED=0).
if [ -n "${GIN_INSPECTOR_DIR:-}" ] && [ -d "$GIN_INSPECTOR_DIR/$SLURM_JOB_ID" ]; then
  idir="$GIN_INSPECTOR_DIR/$SLURM_JOB_ID"
  me=${SLURMD_NODENAME:-$(hostname -s)}
  first=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | head -n1)
  if [ -z "$first" ] || [ "$me" = "$first" ]; then
    if [ -n "$(ls -A "$idir" 2>/dev/null)" ]; then
      args=(--timeout 60s calibrate import --nccl-inspector "$idir" --job "$SLURM_JOB_ID")
      [ -n "${SLURM_JOB_NODELIST:-}" ] && args+=(--nodes "$SLURM_JOB_NODELIST")
      [ -n "${GIN_NCCL_VERSION:-}" ] && args+=(--nccl-version "$GIN_NCCL_VERSION")
      if ! err=$("$GINCTL" "${args[@]}" 2>&1 >/dev/null); then
        logger -t gin-epilog "job $SLURM_JOB_ID: NCCL Inspector dump not imported: ${err##*$'\n'}" 2>/dev/null || true
        echo "gin-epilog: job $SLURM_JOB_ID: NCCL Inspector dump not imported: $err" >&2
      fi
    fi
    rm -rf -- "$idir"
  elif [ "${GIN_INSPECTOR_SHARED:-1}" = 0 ]; then
    rm -rf -- "$idir"
  fi
fi
# GIN_LIVE_DRAIN=1: a node the job's live report names as a confirmed
# suspect (a slow NIC, a straggling or hung GPU: docs/LIVE.md) is drained
# with that reason (sinfo -R: "GIN: slow-link mlx5_3 1.52x in job 4242");
# an operator resumes it after the repair. Never fails the job.
if [ "${GIN_LIVE_DRAIN:-0}" = 1 ] && [ -n "${SLURMD_NODENAME:-}" ]; then
  if ! err=$("$GINCTL" --timeout 10s gate --node "$SLURMD_NODENAME" --live-job "$SLURM_JOB_ID" --mode strict 2>&1); then
    logger -t gin-epilog "job $SLURM_JOB_ID: ${err##*$'\n'}" 2>/dev/null || true
    echo "gin-epilog: job $SLURM_JOB_ID: $err" >&2
  fi
fi
if ! err=$("$GINCTL" --timeout 10s plan delete --job "$SLURM_JOB_ID" 2>&1 >/dev/null); then
  logger -t gin-epilog "job $SLURM_JOB_ID: plan not expired: ${err##*$'\n'}" 2>/dev/null || true
  echo "gin-epilog: job $SLURM_JOB_ID: plan not expired: $err" >&2
fi
exit 0
