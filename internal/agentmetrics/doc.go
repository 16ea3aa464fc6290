// Package agentmetrics exposes gin-agent's link health to Prometheus: a
// custom collector, read at scrape time on the agent's own registry, that
// reports GPU and NVLink state and error counters, InfiniBand/RoCE port
// state, rate and counters, RDMA QP counts, the agent's build and its
// connection to the masters; and, in PlanCollector, the node-local plan
// path (answers on the plan socket, fetches from the masters).
//
// Label names follow dcgm-exporter (gpu, UUID, pci_bus_id, modelName,
// hostname; model_name for dcgm's modelName, which the linter rejects) and node_exporter's infiniband collector (device, port) so that
// existing dashboards join on them; NVLink series add the nvlink label.
package agentmetrics
