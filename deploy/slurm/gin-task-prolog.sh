#!/usr/bin/env bash
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/gin-task-prolog.sh):
# runs as the job's user before each task; what it prints as "export NAME=
# VALUE" reaches the task's environment. With GIN_INSPECTOR_DIR set (in
# /etc/default/gin-slurm) and the job's directory prepared by gin-prolog.sh,
# it points NCCL's Inspector at it (NCCL_INSPECTOR_DUMP_DIR), and with
# GIN_INSPECTOR_PLUGIN (the site's libnccl-profiler-inspector.so) also loads
# and enables the Inspector, unless the job chose its own profiler.
set -u
GIN_SLURM_DEFAULTS=${GIN_SLURM_DEFAULTS:-/etc/default/gin-slurm}
[ -r "$GIN_SLURM_DEFAULTS" ] && . "$GIN_SLURM_DEFAULTS"
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${GIN_INSPECTOR_DIR:-}" ] || exit 0
idir="$GIN_INSPECTOR_DIR/$SLURM_JOB_ID"
[ -d "$idir" ] && [ -w "$idir" ] || exit 0
[ -n "${NCCL_INSPECTOR_DUMP_DIR:-}" ] && exit 0   # the job's own choice stands
echo "export NCCL_INSPECTOR_DUMP_DIR=$idir"
if [ -n "${GIN_INSPECTOR_PLUGIN:-}" ] && [ -z "${NCCL_PROFILER_PLUGIN:-}" ]; then
  echo "export NCCL_PROFILER_PLUGIN=$GIN_INSPECTOR_PLUGIN"
  echo "export NCCL_INSPECTOR_ENABLE=1"
fi
exit 0
