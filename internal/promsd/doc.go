// Package promsd writes Prometheus file_sd target files for GIN: one group
// per node's gin-agent (job gin-agent) and per gin-master (job gin-master),
// from the node names and the masters' client addresses the cluster knows.
// `ginctl export prometheus-sd` uses it; the file is written atomically (a
// temporary file renamed into place), as file_sd wants.
package promsd
