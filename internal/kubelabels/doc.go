// Package kubelabels keeps GIN's view of the topology on Kubernetes Node
// objects: on each Node whose name is a GIN node, the labels under Prefix
// (leaf, spine, block, NVLink domain, health verdict; Keys), and on
// request topograph's keys and a NoSchedule taint on a failing node. It
// runs only on the leader (gin-master --kube-labels), as one of the
// master's leader-only loops.
//
// Ownership: labels are written by server-side apply with the field
// manager FieldManager, which owns exactly the keys it applies: keys other
// controllers or administrators set are never touched, and a key GIN stops
// applying (a node that leaves a block) is removed by the API server. The
// taint list is atomic in the Node API (a server-side apply would own all
// of it), so the taint is added and removed by a JSON patch that tests the
// Node's resourceVersion first (patch is the only write the ClusterRole
// grants).
//
// Only what changed is patched: the labeller remembers what it applied to
// each node, compares the labels computed from the state at each new Raft
// index, and patches just the nodes whose labels differ, at most QPS per
// second. It learns what is on the Nodes from a metadata informer (list,
// then watch; client-go relists after the API server restarts), so a new
// leader starts from what the Nodes carry and patches only those that
// differ, a Node created later is labelled when it appears, and a label
// someone else changed is put back. Patches that fail are retried with
// backoff; the nodes stay pending until one succeeds.
//
// Labels are a pure function of the replicated state (Desired): every
// leader computes the same ones, with the leaf, spine and block names of
// the Slurm exports (export.Placements), so Slurm and Kubernetes see the
// same groups. The health verdict comes from a Health: gin-master gives
// the master's node verdicts (internal/health, what ginctl check prints);
// StateHealth (DOWN or a down link fails) is the fallback.
package kubelabels
