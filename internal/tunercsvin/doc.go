// Package tunercsvin reads the performance-data CSV of NVIDIA's example
// NCCL tuner: the input of plugins/tuner/example/scripts/optimize_config.py
// in NCCL (ext-tuner/example/scripts up to 2.28), which picks, per
// collective, topology and size range, the configuration that measured
// best and writes it as the example tuner's nccl_tuner.conf (the format
// internal/tunercsv writes). Its columns, as the script's README documents
// them:
//
//	collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,cost_metric,bandwidth_gbps,latency_us
//
// one measured configuration per row: the collective in the tuner's
// spelling (allreduce, allgather, reducescatter, broadcast, reduce), the
// message size in bytes, the algorithm (tree, ring, collnet_direct,
// collnet_chain, nvls, nvls_tree, pat) and protocol (ll, ll128, simple)
// that ran, the channels, node and rank counts, pipelined operations and
// buffer registration (-1: any, or not recorded), and the metrics: a
// custom cost (lower is better), a bandwidth in GB/s and a latency in
// microseconds (lower is better).
//
// The script reads the file with Python's csv.DictReader, so its first
// line names the columns, in any order. Parse takes that header where
// there is one (a line with a field "collective"; a later one,
// as in concatenated files, names the columns of the rows after it) and
// the documented order where there is none; it skips blank lines, '#'
// comment lines and a UTF-8 byte-order mark. collective, size_bytes,
// algorithm, protocol, nodes, ranks and latency_us are required (a row is
// a measurement only with a time); the other columns may be left out.
// Fields may be quoted ("ring"), without commas or quotes inside.
//
// Which bandwidth bandwidth_gbps is (nccl-tests' algbw or busbw) is not
// documented by the script or its sample, which only ranks rows by it:
// Parse keeps it as read, and importers derive the time from latency_us.
//
// Parse is bounded (MaxFileBytes, MaxRows, MaxLineBytes, MaxFieldBytes,
// MaxColumns) and every error it returns names its line (*LineError;
// the first maxErrors of them, joined).
package tunercsvin
