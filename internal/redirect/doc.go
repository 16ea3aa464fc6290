// Package redirect is the client side of the masters' redirect contract
// (internal/apierr), written once for ginctl (internal/ginclient) and the
// NCCL tuner plugin's master fallback: try the masters of a list in turn,
// go straight to the leader a follower names in its LeaderHintKey trailer,
// move on only when another master may answer differently (unreachable,
// not the leader, a leader whose data dir is full, this attempt's
// deadline), stop at the first real refusal, which is returned as the
// master sent it, and walk the list again, pausing, within the caller's
// deadline while the masters say they are between leaders (an election, a
// full leader handing over).
//
// The agent's session loop (internal/agent) keeps its own long-lived walk
// (backoff, reachability, stale hints) but reads hints through the same
// apierr.LeaderHint and normalises them with masteraddr.One, as Do does.
package redirect
