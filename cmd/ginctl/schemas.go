package main

import (
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/nccllog"
)

// jsonOutput is what one command prints with -o json: a value of sample's
// type, written by internal/jsonout. Its JSON Schema is committed as
// docs/json-schema/<file>.json and checked by TestJSONSchemas; every
// command's JSON golden file is validated against it.
type jsonOutput struct {
	command string // the command line that prints it ("estimate --nodes")
	file    string // docs/json-schema/<file>.json
	sample  any
	lines   bool // JSON Lines (one document per event), not one document
}

// jsonOutputs lists every ginctl command that prints JSON. A command added
// to ginctl must be added here (or to noJSONOutput), TestEveryCommandHasASchema
// says so.
func jsonOutputs() []jsonOutput {
	return []jsonOutput{
		{"nodes", "ginctl-nodes", []*ginv1.NodeSummary(nil), false},
		{"node", "ginctl-node", (*ginv1.GetNodeResponse)(nil), false},
		{"topo", "ginctl-topo", matrixJSON{}, false},
		{"path", "ginctl-path", (*ginv1.GetPathResponse)(nil), false},
		{"watch", "ginctl-watch", (*ginv1.WatchResponse)(nil), true},
		{"cluster", "ginctl-cluster", (*ginv1.GetClusterInfoResponse)(nil), false},
		{"members", "ginctl-members", []*ginv1.Member(nil), false},
		{"members --pending", "ginctl-members-pending", []*ginv1.PendingMember(nil), false},
		{"members remove", "ginctl-members-remove", (*ginv1.RemoveServerResponse)(nil), false},
		{"members add", "ginctl-members-add", (*ginv1.AdmitServerResponse)(nil), false},
		{"fabric import", "ginctl-fabric-import", (*ginv1.ImportFabricResponse)(nil), false},
		{"plan", "ginctl-plan", (*ginv1.Plan)(nil), false},
		{"plan delete", "ginctl-plan-delete", (*ginv1.DeletePlanResponse)(nil), false},
		{"estimate --nodes", "ginctl-estimate-nodes", (*ginv1.Prediction)(nil), false},
		{"estimate --gpus", "ginctl-estimate-gpus", (*ginv1.EstimateResponse)(nil), false},
		{"order", "ginctl-order", (*ginv1.OrderNodesResponse)(nil), false},
		{"version", "ginctl-version", versionJSON{}, false},
		{"calibrate import", "ginctl-calibrate-import", []*ginv1.ImportMeasurementResponse(nil), false},
		{"calibrate list", "ginctl-calibrate-list", (*ginv1.ListMeasurementsResponse)(nil), false},
		{"calibrate show", "ginctl-calibrate-show", (*ginv1.GetMeasurementResponse)(nil), false},
		{"calibrate delete", "ginctl-calibrate-delete", (*ginv1.DeleteMeasurementResponse)(nil), false},
		{"calibrate compare", "ginctl-calibrate-compare", compareReport{}, false},
		{"job report", "ginctl-job-report", jobReport{}, false},
		{"job watch", "ginctl-job-watch", jobWatchEvent{}, true},
		{"tls ca create", "ginctl-tls-ca-create", tlsCreated{}, false},
		{"tls cert create", "ginctl-tls-cert-create", tlsCreated{}, false},
		{"tls init", "ginctl-tls-init", []tlsInitResult(nil), false},
		{"tls deny", "ginctl-tls-deny", (*ginv1.DenyCertificateResponse)(nil), false},
		{"tls denied", "ginctl-tls-denied", []*ginv1.DeniedCertificate(nil), false},
		{"tls allow", "ginctl-tls-allow", (*ginv1.AllowCertificateResponse)(nil), false},
		{"tls allow --expired", "ginctl-tls-allow-expired", []*ginv1.AllowCertificateResponse(nil), false},
		{"node delete", "ginctl-node-delete", (*ginv1.DeleteNodeResponse)(nil), false},
		{"check", "ginctl-check", (*ginv1.CheckResponse)(nil), false},
		{"diagnose", "ginctl-diagnose", (*nccllog.Report)(nil), false},
	}
}

// noJSONOutput lists the commands without a JSON form, and why.
func noJSONOutput() map[string]string {
	return map[string]string{
		"export": "writes the format its argument names (export json is the graph as JSON)",
		"gate":   "a Slurm prolog step: its result is the exit status and, in strict mode, Slurm's drain reason (ginctl check -o json prints the verdict)",
	}
}
