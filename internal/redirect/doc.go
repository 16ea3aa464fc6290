// Package redirect is the client side of the masters' failover contract
// (internal/apierr), written once for ginctl (cmd/ginctl/client.go), the
// agent's plan fetch (internal/nodeplans) and the NCCL tuner plugin's
// master fallback: try the masters of a list in turn, move on only when
// another master may answer differently (unreachable, this attempt's
// deadline, no leader known, a leader whose data dir is full), stop at the
// first real refusal, which is returned as the master sent it, and walk
// the list again, pausing, within the caller's deadline while the masters
// say they are between leaders (an election, a full leader handing over).
//
// A follower forwards writes and consistent reads to the leader itself
// (internal/master/forward.go), so a client never follows a leader hint;
// a master older than forwarding answers NOT_LEADER, and the walk moves on
// to the next master of the list. The agent's session loop
// (internal/agent) keeps its own long-lived walk (backoff, reachability,
// the session's leader hint).
package redirect
