// Package inspector reads the output of NCCL's Inspector profiler plugin
// (NVIDIA/nccl plugins/profiler/inspector, README "Output Example" and
// "Output Example Verbose"): files <dir>/<hostname>-pid<pid>.log holding one
// JSON object per collective per rank ({"header": {id, comm_name, rank,
// n_ranks, nnodes}, "metadata": {inspector_output_format_version, hostname,
// pid, dump_timestamp_us, ...}, "coll_perf": {coll, coll_sn,
// coll_msg_size_bytes, coll_exec_time_us, coll_timing_source,
// coll_algobw_gbs, coll_busbw_gbs, and in verbose mode event_trace_sn /
// event_trace_ts}}), written one per line or pretty-printed. P2P objects
// ("p2p_perf") are skipped: NCCL's tuner never sees them.
//
// Reading streams: one object is decoded at a time (each bounded by
// MaxObjectBytes) and folded into an Aggregate whose size is bounded by the
// distinct (communicator, collective, size bucket) groups and hosts, not by
// the number of collectives, so a dump of a million collectives takes the
// memory of its groups.
package inspector
