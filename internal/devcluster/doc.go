// Package devcluster runs a complete GIN cluster in one process on loopback:
// a single-voter gin-master with its Raft data in a temporary directory, a
// simulated leaf/spine fabric imported through the AdminService, and N
// simulated agents streaming to the master over real gRPC. It is what
// `gin-master --dev` starts, so a newcomer sees the whole system with nothing
// but Go installed.
package devcluster
