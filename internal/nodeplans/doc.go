// Package nodeplans is gin-agent's store of the plans of the jobs that run
// on its node, served to local processes through internal/plansock.
//
// A plan is kept in memory and, when a directory is given, in one file per
// job in a root-owned directory (mode 0700) so that an agent restart keeps
// them; files are decoded and verified (planread.Decode) when loaded, and a
// plan is dropped from both when it expires (Plan.expires_at).
//
// Plans arrive three ways: the leader pushes a plan to the agents of its
// nodes when it pins it (the agent's session hands it to Put); the Slurm
// prolog asks for it (root: the agent may have it created); or a rank asks
// for one the store does not hold (the socket drops a non-root peer's node
// list, so the masters only look up a pinned plan).
//
// A plan the store does not hold is asked of the masters once per node and
// user: the concurrent requests of a job's ranks (one user) share one
// fetch, and its outcome, success or failure, is what every one of them
// gets. A failure is kept for FailureTTL, so the ranks of a job that start
// together on this node decide alike (all stand aside) instead of some
// getting a plan a moment later.
//
// What one local user asks changes nothing another user gets (the socket is
// open to every local user; SO_PEERCRED names them): a failure and a fetch
// in flight are that user's only, so a miss asked early for a future job id
// never becomes root's prolog answer; a user other than root may have the
// store fetch at most MaxJobsPerUID distinct jobs in FailureTTL (then
// UNAVAILABLE without a fetch); failures live apart from plans
// (MaxMisses) and never take a plan's place; a plan fetched for a user
// other than root is unclaimed, kept only while there is room and the
// first dropped when a claimed plan (pushed by the leader, fetched for
// root, kept across a restart) needs room.
//
// The rule that keeps every rank of a job on one decision is the Slurm
// prolog's: it has each node's agent hold the pinned plan before any task
// starts (gin-agent plan), and with GIN_PROLOG_STRICT=1 fails the job when
// it cannot; after that the ranks read the plan from their agent, with the
// masters up or down. Requests may ask for the plan (form 1) or for its
// compiled table (form 2, internal/plantable), which the plugin's C shim
// reads.
package nodeplans
