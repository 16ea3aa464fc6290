package raft

import (
	"io"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is hashicorp/raft's logger. It leaves out the warning raft
// gives once while this server holds no Raft configuration at all: "no
// known peers, aborting election" is what every fresh master of a
// --bootstrap-expect or --join start says before it is bootstrapped or
// joined, read by newcomers as a failure; the join loop logs that wait
// itself.
func raftLogger(level hclog.Level, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: "raft", Level: level, Output: w,
		Exclude: func(_ hclog.Level, msg string, _ ...any) bool {
			return msg == "no known peers, aborting election"
		},
	})
}
