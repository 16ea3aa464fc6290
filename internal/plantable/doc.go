// Package plantable compiles a verified plan into the decision table the
// NCCL plugin's C hot path reads (communicator shape × collective × log2
// size bucket → algorithm, protocol, channels), and encodes it in a small
// binary form that C can check and read without protobuf, gRPC or Go:
//
//	"GINT" u8 version=1 | u8 shapes | u8 dropped | u16 len job id | u16 len content hash
//	| per shape: u32 nRanks, u32 nNodes, 5×64 cells of (i8 algo, i8 proto, i16 channels)
//	| u64 FNV-1a of every byte before it
//
// all integers big-endian. gin-agent serves it on its plan socket
// (plansock form 2) after verifying the plan (planread); the plugin's C shim
// (internal/ncclplugin/shim) checks length, checksum, job id and every cell
// before using it. Decode is the same check in Go, for tests and fuzzing.
package plantable
