// Package rankreport is the profiler plugin's report of one NCCL rank over
// one window (libnccl-profiler-gin.so, internal/ncclplugin/profiler), as the
// plugin sends it to gin-agent's node socket: what the communicator is,
// where the rank stands (collectives started and done, the oldest one in
// flight), how long its collectives took by kind and size, how long its
// network proxy steps waited in each state per peer and direction, and the
// start times of sampled collectives (for arrival skew across ranks). The
// plugin keeps aggregates, never events: a report is a few hundred bytes
// whatever the job does.
//
// One report per connection on the agent's plan socket (internal/plansock
// tells a report from a plan request by its magic), no answer. All
// integers big-endian, times in nanoseconds of CLOCK_REALTIME:
//
//	header: "GINP" | u8 version=1 | u8 0 | u16 0 | u32 body length (≤ MaxBody)
//	body:
//	  u64 comm id (NCCL's commHash) | u32 nranks | u32 nnodes | u32 rank
//	  i32 local rank (-1 unknown) | i32 GPU index (-1 unknown) | u32 pid
//	  u16 len | job id (≤ MaxJobID bytes; "" when the job is unknown)
//	  u64 window start | u64 window end
//	  u64 collectives started | u64 collectives done      (since init)
//	  u64 oldest collective in flight started at (0: none in flight)
//	  u64 events dropped (since init: no free slot)
//	  u16 n (≤ MaxColls) × { u8 func | u8 log2 bytes | u16 0 | u32 count | u64 sum ns | u64 max ns }
//	  u16 n (≤ MaxPeers) × { u32 peer | u8 dir (0 recv, 1 send) | u8 0 | u16 0 | u64 bytes | u32 steps | u32 0 | u64 wait ns[3] }
//	  u16 n (≤ MaxArrivals) × { u64 seq | u64 start }
//
// A send's waits are GPU (data not produced), peer (no credit from the
// receiver) and network (posted, not completed); a receive's are network
// (posted, no data), flush and GPU (not consumed). Counts and times in the
// lists are of the window only; a collective's kind is Func, its size the
// floor of log2 of count × datatype size. Arrivals are the collectives whose
// sequence number is a multiple of SampleEvery, so every rank samples the
// same ones.
//
// Decode checks every length and count against its bound before it
// allocates, and every value against the others (rank < nranks, window
// start ≤ end, bytes only with steps); it is fuzzed (FuzzDecode).
package rankreport
