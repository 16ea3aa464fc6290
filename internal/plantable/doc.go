// Package plantable compiles a verified plan into the decision table the
// NCCL plugin's C hot path reads (communicator shape × collective × log2
// size bucket → the rule's ordered choices: force an algorithm/protocol
// (and channels), or NCCL's choice when NCCL offers an algorithm), and
// encodes it in a small binary form that C can check and read without
// protobuf, gRPC or Go:
//
//	"GINT" u8 version=2 | u8 shapes | u8 dropped | u16 len job id | u16 len content hash
//	| per shape: u32 nRanks, u32 nNodes, 5×64 cells of
//	  (u8 n, n × (i8 algo, i8 proto, u8 flags, i16 channels, u32 min NCCL version, u32 max))
//	| u64 FNV-1a of every byte before it
//
// all integers big-endian (version 1, one (i8 algo, i8 proto, i16 channels)
// per bucket, is still read). Cell.Resolve is the C walk in Go: the first
// choice NCCL's cost table marks usable, else NCCL's choice, after the
// version rule (VersionApplies). gin-agent serves the table on its plan
// socket (plansock form 2) after verifying the plan (planread); the
// plugin's C shim (internal/ncclplugin/shim) checks length, checksum, job
// id and every choice before using it. Decode is the same check in Go, for
// tests and fuzzing.
package plantable
