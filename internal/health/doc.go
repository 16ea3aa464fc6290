// Package health turns what GIN knows of a node into a verdict: pass, warn
// or fail, each finding with what was seen, why it matters to a job and the
// fix. Node rules read one node's inventory and liveness (an NVLink or HCA
// port down, a PCIe link trained below its capability, ACS redirecting
// peer-to-peer between a GPU and its nearest NIC, a translating IOMMU, no
// GPUDirect RDMA, XIDs, ECC and row remapping, clock throttling, the MNNVL
// fabric); cluster rules compare nodes (a driver, VBIOS or NIC firmware that
// differs from the majority of the same system model, a NIC slower than its
// peers on the same leaf switch).
//
// Evaluate is the whole API: the master calls it over its stored state
// (CheckService), ginctl check prints it, the Slurm gate drains by it, the
// Kubernetes labeller and the web view read the verdict through CheckService
// (Label gives the one-word form). Thresholds are configurable (Thresholds.Set);
// their defaults and sources are in docs/HEALTH.md.
package health
