#!/usr/bin/env bash
# tls-secrets.sh DIR [NODE...]: the TLS Secrets of deploy/kubernetes/.
#
# Runs `ginctl tls init --dir DIR` (idempotent: a CA and certificates already
# in DIR are kept) for the three masters (their DNS names under the headless
# Service and the gin Service) and an agent/<node> certificate for each GPU
# node, then applies two Secrets in the namespace:
#   gin-master-tls  ca.pem, master-gin-master-N.pem, master-gin-master-N-key.pem
#   gin-agent-tls   ca.pem, agent-NODE.pem, agent-NODE-key.pem for every node
# The CA key (DIR/ca-key.pem) and the admin certificate stay in DIR: keep
# them off the cluster. Without NODE arguments the nodes are the Nodes
# labelled $GIN_GPU_SELECTOR. Run it again after adding GPU nodes.
#
# A Secret holds at most 1 MiB: ~300 agent pairs. Larger clusters split the
# agents (one DaemonSet and Secret per node pool) or provision the agent
# certificates on the hosts (docs/kubernetes.md).
#
# Environment: GINCTL (ginctl), KUBECTL (kubectl), GIN_NAMESPACE (gin),
# GIN_GPU_SELECTOR (nvidia.com/gpu.present=true), GIN_CLUSTER_DOMAIN
# (cluster.local).
set -euo pipefail
GINCTL=${GINCTL:-ginctl}
KUBECTL=${KUBECTL:-kubectl}
NS=${GIN_NAMESPACE:-gin}
SELECTOR=${GIN_GPU_SELECTOR:-nvidia.com/gpu.present=true}
DOMAIN=${GIN_CLUSTER_DOMAIN:-cluster.local}
[ $# -ge 1 ] || { echo "usage: $0 DIR [NODE...]" >&2; exit 64; }
dir=$1; shift
nodes=("$@")
if [ ${#nodes[@]} -eq 0 ]; then
  mapfile -t nodes < <("$KUBECTL" get nodes -l "$SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
fi
[ ${#nodes[@]} -gt 0 ] || { echo "$0: no GPU nodes (none labelled $SELECTOR); name them as arguments" >&2; exit 1; }

args=(tls init --dir "$dir" --cert admin)
for i in 0 1 2; do
  m=gin-master-$i
  args+=(--cert "master/$m=$m.gin-master.$NS.svc,$m.gin-master.$NS.svc.$DOMAIN,gin.$NS.svc,gin.$NS.svc.$DOMAIN,$m")
done
for n in "${nodes[@]}"; do args+=(--cert "agent/$n"); done
"$GINCTL" "${args[@]}" >/dev/null

margs=(--from-file="$dir/ca.pem")
for i in 0 1 2; do margs+=(--from-file="$dir/master-gin-master-$i.pem" --from-file="$dir/master-gin-master-$i-key.pem"); done
aargs=(--from-file="$dir/ca.pem")
for n in "${nodes[@]}"; do aargs+=(--from-file="$dir/agent-$n.pem" --from-file="$dir/agent-$n-key.pem"); done
"$KUBECTL" -n "$NS" create secret generic gin-master-tls "${margs[@]}" --dry-run=client -o yaml | "$KUBECTL" apply --server-side --force-conflicts -f -
"$KUBECTL" -n "$NS" create secret generic gin-agent-tls "${aargs[@]}" --dry-run=client -o yaml | "$KUBECTL" apply --server-side --force-conflicts -f -
