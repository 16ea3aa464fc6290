// Package plansock is the node-local plan protocol between gin-agent and the
// processes of its node (the NCCL plugin, the Slurm prolog): one request and
// one response per Unix-socket connection, with no gRPC, no TLS and no
// credentials, since the kernel tells each side who the other is
// (SO_PEERCRED).
//
// Request (client → agent), all integers big-endian:
//
//	"GINQ" form(1) | u16 len | job id | u16 len | nodes (hostlist) | u32 GPUs per node
//
// form 1 asks for the encoded plan, form 2 for its compiled decision table
// (internal/plantable's C form, what the plugin's C shim reads).
//
// Response (agent → client):
//
//	"GINA" version(1)=1 | u8 status | u16 len | content hash | u32 len | body
//
// status 0 (OK): body is the encoded gin.v1.Plan (or its table, form 2)
// whose content_hash is the hash field; 1 (NOT_FOUND), 2 (UNAVAILABLE), 3 (BAD_REQUEST): body is a
// one-line message. Every length is bounded (MaxJobID, MaxNodes,
// MaxHash, planread.MaxBytes, MaxMessage) before anything is allocated.
//
// The Server calls a Source for each request and logs the peer's uid and
// pid (at debug level for a plan served). A Source that also offers
// FrameCache (the agent's store does) has a held plan's answer encoded once;
// the accept loop then answers a request that has already arrived with one
// non-blocking read and one non-blocking write, with no goroutine, context
// or encoding per request (BenchmarkServeTableCached); anything else goes
// to a goroutine per connection; it bounds each user's connections (MaxConnsPerUID; root is not
// bounded) and drops the node list of a request whose peer is not root, so
// only root (the Slurm prolog) can have a plan created. Fetch is the
// client; it refuses a socket served by neither root nor its own user.
// Neither imports the plan builder.
package plansock
