// Package faulttest holds an opt-in fault-injection campaign against a
// three-master GIN cluster: each master runs in its own Linux network
// namespace, and the test kills, pauses and partitions masters while a
// client workload writes and reads plans. The history is checked for
// linearizability with porcupine, acknowledged writes are checked on every
// master, and leader claims are checked for at most one leader per term.
//
// It needs root and `ip netns`, and runs only with GIN_FAULT_TESTS=1
// (`make fault-test`); see README.md.
package faulttest
