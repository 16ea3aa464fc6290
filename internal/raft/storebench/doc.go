// Package storebench compares the two durable hashicorp/raft log stores that
// the gin-master replication issue considered: hashicorp/raft-wal and
// hashicorp/raft-boltdb/v2. It holds only tests and benchmarks (see
// storebench_test.go) that measure what the master does on its data
// directory: fsynced single appends of 12 KiB inventory commands and 512 B
// state changes, 64-entry batches, random reads of recent entries, head
// compaction with DeleteRange, and a single-node raft.NewRaft end to end.
//
// RESULTS.md records a run and the reasons for the choice.
package storebench
