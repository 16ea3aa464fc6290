// Command ncclplugin is libnccl-tuner-gin.so, GIN's NCCL tuner plugin. It is
// a c-shared library, not a program:
//
//	go build -buildmode=c-shared -ldflags '-extldflags -Wl,-z,nodelete' \
//	    -o bin/libnccl-tuner-gin.so ./internal/ncclplugin      (make build)
//
// # Loading
//
// NCCL finds the library by NCCL_TUNER_PLUGIN=gin (NCCL tries the literal
// name, then libnccl-tuner-gin.so on the library path), or as
// libnccl-tuner.so when NCCL_TUNER_PLUGIN is unset (install a link by that
// name). It opens it with dlopen(RTLD_NOW|RTLD_LOCAL) and takes the first of
// ncclTunerPlugin_v6, _v5, _v4, _v3, _v2; all five are exported (name "GIN"),
// so NCCL 2.21 through 2.30 can use it. The Go runtime cannot be unloaded, so
// the library is linked -z nodelete and NCCL's dlclose leaves it mapped.
//
// # What runs where
//
// init (C, tuner.h/plugin.c) stands aside at once, without entering Go, unless
// NCCL_GIN_ENABLED is exactly "1"; it also stands aside (WARN) in a child that
// forked without exec (its pid differs from the pid that loaded the library),
// since Go cannot run there. Otherwise it calls ginGoLoad (Go), which finds the
// job's plan, walks every (communicator shape, collective, log2 size bucket)
// through planread.Lookup into a malloc'ed C table of {algo, proto, channels},
// and logs, at INFO with TUNING|INIT,
//
//	GIN: Connected to topology service at <host>:<port>
//	GIN: plan <content hash> for job <job> (<n> rules, <k> shapes) from <source> in <duration>
//
// getCollInfo is pure C (no Go, lock, allocation or I/O): for collectives
// 0..4 it looks up bucket floor(log2(nBytes)) of the communicator's shape and,
// when the plan names a cell that is inside NCCL's numAlgo x numProto table and
// not -1 (NCCL_ALGO_PROTO_IGNORE), writes 0.0 into it and sets *nChannels when
// the plan gives a channel count; it never writes into a -1 cell, never reads
// regBuff and always returns success. v2 (no cost table) writes
// *algorithm/*protocol instead, only for algorithms NCCL supports for the
// collective and the collNet/NVLS support flags it is given. finalize frees
// the table. getChunkSize (v6) is not provided.
//
// When no plan can be had, init logs a WARN naming the cause ("GIN: standing
// aside, NCCL tunes alone: ...") and returns success with a NULL context, so
// NCCL tunes alone; with NCCL_GIN_STRICT=1 it fails communicator init instead.
//
// # Environment (read by this plugin only)
//
//	NCCL_GIN_ENABLED=1         turns the plugin on; anything else: stand aside silently
//	NCCL_GIN_MASTER_HOST       master list, host[:port],... (IPv6 as [addr]:port, port
//	                           5000 by default); falls back to GIN_MASTER_HOST
//	NCCL_GIN_CACHE_TIMEOUT     seconds a fetched plan is reused on the node (default 300;
//	                           0 disables the node cache)
//	NCCL_GIN_FAILOVER          1 (default): try every master, follow leader hints;
//	                           0: the first master only
//	NCCL_GIN_STRICT=1          fail communicator init when no plan can be had
//	NCCL_GIN_INIT_TIMEOUT_MS   the one deadline for init: lock wait and fetch (default 5000)
//	NCCL_GIN_CACHE_DIR         node cache (default /dev/shm/gin-nccl, else $TMPDIR/gin-nccl)
//	NCCL_GIN_PLAN_FILE         a pre-staged plan (Slurm prolog); read with no network
//	SLURM_JOB_ID               the job key; outside Slurm NCCL_GIN_JOB_ID; neither: stand aside
//	SLURM_JOB_NODELIST         the job's nodes for GetOrCreatePlan (else NCCL_GIN_NODES)
//	SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE  GPUs per node (else 0: all)
//
// NCCL's own NCCL_GIN_ENABLE and NCCL_GIN_TYPE (GPU-Initiated Networking) are
// unrelated and never read or set.
//
// # Where the plan comes from
//
// NCCL_GIN_PLAN_FILE when set; else the process's memo of the job's plan;
// else the node cache <cache>/plan-<job>.pb while younger than the cache
// timeout; else the masters (PlanService.GetOrCreatePlan, insecure gRPC for
// now), starting at a master chosen by the process id (so a job start
// spreads over the replicas, any of which serves a pinned plan) and moving on
// on UNAVAILABLE, a NOT_LEADER redirect (to the leader named in the
// gin-leader-hint trailer first) or no answer, each given a share of what
// is left of the deadline; any other refusal is final. Ranks of one node serialise
// on an exclusive flock of <cache>/plan-<job>.lock: one fetches and writes the
// cache atomically (temp file + rename), the others wait (bounded by the
// deadline) and read it. Every plan is checked with planread.Verify (format and
// content hash) and must be the job's; a bad cache file is reported and
// refetched, a bad plan file or master answer makes the plugin stand aside.
//
// The test harness (harness/harness.c) loads the library as NCCL does; see
// harness_test.go.
package main
