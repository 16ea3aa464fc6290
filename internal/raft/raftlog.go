package raft

import (
	"errors"
	"io"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is hashicorp/raft's logger. It leaves out two kinds of line:
//
//   - the warning raft gives once while this server holds no Raft
//     configuration at all: "no known peers, aborting election" is what
//     every fresh master of a --bootstrap-expect or --join start says
//     before it is bootstrapped or joined, read by newcomers as a failure;
//     the join loop logs that wait itself;
//   - the transport's "failed to decode incoming command" ERROR when the
//     error is the RPC guard's refusal: the guard has counted it and
//     logged it through its rate-limited line, and the transport's copy,
//     one per forged request, is what an attacker could write at will.
func raftLogger(level hclog.Level, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: level, Output: w,
		Exclude: func(_ hclog.Level, msg string, args ...any) bool {
			switch msg {
			case "no known peers, aborting election":
				return true
			case "failed to decode incoming command":
				return isGuardRefusal(args)
			}
			return false
		},
	})
}

// isGuardRefusal reports whether an hclog key/value list carries an error
// that is (or wraps) an *rpcRefusal.
func isGuardRefusal(args []any) bool {
	for _, a := range args {
		if err, ok := a.(error); ok {
			var r *rpcRefusal
			if errors.As(err, &r) {
				return true
			}
		}
	}
	return false
}
