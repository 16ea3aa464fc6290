package masteraddr

import "hash/fnv"

// Where in the master list a node's agent starts, and where it goes when
// that master fails. gin-agent follows these rules (internal/agent), and
// the tests and benchmarks that simulate thousands of agents call the same
// functions, so the simulation cannot drift from the agent.

// StartIndex is where node starts in a list of n masters: the FNV-1a hash
// of its name modulo n, so that a cluster's agents spread evenly over the
// masters and each node always starts at the same one.
func StartIndex(node string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(nodeHash(node) % uint32(n))
}

// MoveFrom is where an agent of node whose master at index i failed starts
// looking for the next one (the search goes on from the index after it):
// i plus the hash modulo n-1, so that the agents of one failed master
// spread evenly over the n-1 others (the hash modulo n, which put them on
// i, and modulo n-1 are independent: n and n-1 are coprime).
func MoveFrom(node string, i, n int) int {
	if n <= 2 {
		return i
	}
	return i + int(nodeHash(node)%uint32(n-1))
}

// Home is the home master of node among masters (as normalised by Parse,
// in the --master order): the one its agent starts at and returns to; ""
// without masters.
func Home(node string, masters []string) string {
	if len(masters) == 0 {
		return ""
	}
	return masters[StartIndex(node, len(masters))]
}

// nodeHash is the FNV-1a hash of a node name.
func nodeHash(node string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return h.Sum32()
}
