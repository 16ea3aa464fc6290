// Command ncclplugin is libnccl-tuner-gin-go.so, the Go plan loader of
// GIN's NCCL tuner plugin. It is a c-shared library, not a program, and it
// is not what NCCL loads: NCCL loads the C shim in shim/ (shim.c, tuner.h),
// libnccl-tuner-gin.so. With NCCL_GIN_ENABLED=1 the shim asks the node's
// agent for the plan's compiled table itself, in C (plansock form 2,
// internal/plantable), and dlopens this library from its own directory only
// for a plan file (NCCL_GIN_PLAN_FILE), without a job id, or when no agent
// listens on the socket (then this library asks the masters).
//
//	go build -buildmode=c-shared -ldflags '-extldflags -Wl,-z,nodelete' \
//	    -o bin/libnccl-tuner-gin-go.so ./internal/ncclplugin
//	cc -O2 -fPIC -shared -fvisibility=hidden \
//	    -o bin/libnccl-tuner-gin.so internal/ncclplugin/shim/shim.c -ldl   (make plugin)
//
// # Loading
//
// NCCL finds the shim by NCCL_TUNER_PLUGIN=gin (NCCL tries the literal
// name, then libnccl-tuner-gin.so on the library path), or as
// libnccl-tuner.so when NCCL_TUNER_PLUGIN is unset (install a link by that
// name), and takes the first of ncclTunerPlugin_v6, _v5, _v4, _v3, _v2; all
// five are exported (name "GIN"), so NCCL 2.21 through 2.30 can use it.
// Because every NCCL process on a node loads it, the shim is C only and
// starts nothing while GIN is off: measured by TestFootprint (0 threads,
// about 0.1 MB RSS after dlopen and init; docs/BENCHMARKS.md).
//
// # What runs where
//
// init (C, shim/shim.c) stands aside at once unless NCCL_GIN_ENABLED is
// exactly "1". It asks the node's agent in C (above), also in a child that
// forked without exec; when the Go loader is needed there instead (a plan
// file, no agent), it stands aside (WARN): Go cannot run after fork without
// exec (the child's pid differs from the pid that loaded the library).
// Otherwise it dlopens libnccl-tuner-gin-go.so
// (RTLD_NODELETE: a Go runtime cannot be unloaded) and calls ginGoLoad,
// which finds the job's plan, verifies it (internal/planread), compiles every
// (communicator shape, collective, log2 size bucket) into a malloc'ed C
// table of {algo, proto, channels}, and logs, at INFO with TUNING|INIT,
//
//	GIN: Connected to topology service at unix:/run/gin/agent.sock (node agent)   (or <host>:<port>)
//	GIN: plan <content hash> for job <job> (<n> rules, <k> shapes) from <source> in <duration>
//
// The whole of it (read, verify, compile) runs under NCCL_GIN_INIT_TIMEOUT_MS.
//
// Init binds the plan to the communicator: it copies the shape's cells, reads
// the running NCCL version with ncclGetVersion resolved in the process (the
// global scope, else a libnccl already loaded), and marks the measured
// choices the version rule excludes (another release series than their
// measurements'; docs/CALIBRATION.md), logging each.
//
// getCollInfo is pure C (no Go, lock, allocation or I/O): for collectives
// 0..4 it looks up bucket floor(log2(nBytes)) of the communicator's shape and
// walks the bucket's ordered choices: the first whose cell is inside NCCL's
// numAlgo x numProto table and not -1 (NCCL_ALGO_PROTO_IGNORE) wins; a forcing
// choice writes 0.0 into its cell, "NCCL's choice when it offers X" writes
// nothing, and either sets *nChannels when the choice gives a channel count;
// none usable leaves NCCL's choice. It never writes into a -1 cell, never
// reads regBuff and always returns success. v2 (no cost table) writes
// *algorithm/*protocol instead, only for algorithms NCCL supports for the
// collective and the collNet/NVLS support flags it is given. Each bucket
// records what it resolved to (a relaxed byte store when it changes);
// finalize logs that once per communicator ("all_reduce 16M-32G: resolved
// to choice 2 of 2, tree/simple (passed over: nccl(nvls_tree) (not
// offered))") and frees the context. getChunkSize (v6) is not provided.
//
// When no plan can be had, init logs a WARN naming the cause ("GIN: standing
// aside, NCCL tunes alone: ...") and returns success with a NULL context, so
// NCCL tunes alone; with NCCL_GIN_STRICT=1 it fails communicator init instead.
//
// # Environment (read by this plugin only)
//
//	NCCL_GIN_ENABLED=1         turns the plugin on; anything else: stand aside silently
//	NCCL_GIN_PLAN_FILE         a plan file to use instead of asking anyone
//	NCCL_GIN_AGENT_SOCKET      the node agent's plan socket (default /run/gin/agent.sock; "none": no agent)
//	NCCL_GIN_MASTER_HOST       master list, host[:port],... (IPv6 as [addr]:port, port
//	                           5000 by default), only asked when no agent listens; falls
//	                           back to GIN_MASTER_HOST
//	NCCL_GIN_CACHE_TIMEOUT     whole seconds a plan is reused by the process's later
//	                           communicators (default 300; 0 disables)
//	NCCL_GIN_FAILOVER          1 (default): try every master in turn; 0: the first only
//	NCCL_GIN_STRICT=1          fail communicator init when no plan can be had
//	NCCL_GIN_INIT_TIMEOUT_MS   the one deadline of init, 1..600000 (default 5000)
//	SLURM_JOB_ID               the job key; outside Slurm NCCL_GIN_JOB_ID; neither: stand aside
//	SLURM_JOB_NODELIST         the job's nodes, to create a plan (else NCCL_GIN_NODES)
//	SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE  GPUs per node (else 0: all)
//
// A value out of range or unparsable is logged as a WARN and replaced by its
// default. NCCL's own NCCL_GIN_ENABLE and NCCL_GIN_TYPE (GPU-Initiated
// Networking) are unrelated and never read or set.
//
// # Where the plan comes from
//
// NCCL_GIN_PLAN_FILE when set (opened with O_NOFOLLOW|O_NONBLOCK and checked
// on the descriptor: a regular file of at most planread.MaxBytes, owned by
// root or this user, not writable by everyone); else the process's memo of
// the job's plan; else the node's agent (internal/plansock: one request, the
// plan bytes and its content hash back; the agent must run as root or as
// this user), whose answer is final, "no plan" included; else, only when no
// agent listens on the socket (absent or refused), the masters
// (plaintext without certificates; with NCCL_GIN_TLS_CA/CERT/KEY, else
// GIN_TLS_*, mutual TLS, and a reader certificate only reads the pinned
// plan, PlanService.GetPlan from the leader, while scheduler, admin and agent certificates
// may pin it, PlanService.GetOrCreatePlan), starting at a master
// chosen by the process id and moving on on UNAVAILABLE, an older master's
// NOT_LEADER or no answer (the one failover walk, internal/redirect, each
// master a share of the deadline; a follower forwards to the leader). Every plan is decoded
// and verified by planread.Decode (size and rule caps, format, content hash,
// no overlapping rules) and must be the job's.
//
// # One decision per job
//
// Every rank of a job applies the same pinned plan, or none: the Slurm
// prolog (deploy/slurm/gin-prolog.sh) has each node's agent fetch and hold
// the plan before any task starts, and with GIN_PROLOG_STRICT=1 fails the
// job when it cannot; the plan is pinned (its bytes never change), so ranks
// that get one get the same one. A rank that cannot get it stands aside
// (NCCL tunes alone) or, with NCCL_GIN_STRICT=1, fails init. Without the
// strict settings a node whose agent had no plan would stand aside while
// others apply it; that is why production jobs should run with both.
//
// The test harness (harness/harness.c) loads the shim as NCCL does; see
// harness_test.go and footprint_test.go.
package main
